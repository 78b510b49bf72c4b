/* aplan: when allocation queues ask for allocations, and cancel them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "aplan.h"
#include "config.h"

static struct aplan_queue
queue(int pending, int running, int starting)
{
	struct aplan_queue q = {
		.nodes = 1, .max_nodes = 3, .backlog = 2, .slots = 2,
		.time_limit = 600, .pending = pending, .running = running,
		.starting_nodes = starting,
	};

	return q;
}

/* The backlog and max_nodes bound what is asked; work that the coming
 * slots will take asks for nothing more. */
static void
test_backlog_and_max(void **state)
{
	struct aplan_need need = { .waiting = 2000 };
	struct aplan_queue q = queue(0, 0, 0);
	int sub, can;

	(void)state;
	aplan_decide(&need, &q, 1, &sub, &can);
	assert_int_equal(sub, 1);
	assert_int_equal(can, 0);
	q = queue(2, 0, 0);		/* the backlog is full */
	aplan_decide(&need, &q, 1, &sub, &can);
	assert_int_equal(sub, 0);
	q = queue(1, 2, 0);		/* 3 nodes: max_nodes */
	aplan_decide(&need, &q, 1, &sub, &can);
	assert_int_equal(sub, 0);
	q = queue(0, 2, 0);
	aplan_decide(&need, &q, 1, &sub, &can);
	assert_int_equal(sub, 1);
	need.waiting = 4;		/* 4 slots coming: enough */
	q = queue(2, 0, 0);
	q.backlog = 3;
	aplan_decide(&need, &q, 1, &sub, &can);
	assert_int_equal(sub, 0);
	need.waiting = 3;		/* one node starting, 2 idle */
	need.idle = 2;
	q = queue(0, 1, 1);
	aplan_decide(&need, &q, 1, &sub, &can);
	assert_int_equal(sub, 0);
	need.waiting = 5;
	aplan_decide(&need, &q, 1, &sub, &can);
	assert_int_equal(sub, 1);
}

/* Nothing waits: pending allocations are cancelled, running ones left
 * to their idle time; a paused queue asks for nothing. */
static void
test_cancel_and_pause(void **state)
{
	struct aplan_need need = { .waiting = 0 };
	struct aplan_queue q = queue(2, 1, 0);
	int sub, can;

	(void)state;
	aplan_decide(&need, &q, 1, &sub, &can);
	assert_int_equal(sub, 0);
	assert_int_equal(can, 2);
	need.waiting = 100;
	q = queue(0, 0, 0);
	q.paused = 1;
	aplan_decide(&need, &q, 1, &sub, &can);
	assert_int_equal(sub, 0);
	assert_int_equal(can, 0);
}

/* The first queue with room asks; a time request no node can meet asks
 * a queue long enough even when slots would be free, once. */
static void
test_queues_and_time(void **state)
{
	struct aplan_need need = { .waiting = 10, .idle = 100 };
	struct aplan_queue qs[2] = { queue(0, 0, 0), queue(0, 0, 0) };
	int sub[2], can[2];

	(void)state;
	qs[1].time_limit = 7200;
	aplan_decide(&need, qs, 2, sub, can);
	assert_int_equal(sub[0] + sub[1], 0);	/* the idle slots take it */
	need.unmet = 3600;
	aplan_decide(&need, qs, 2, sub, can);
	assert_int_equal(sub[0], 0);
	assert_int_equal(sub[1], 1);
	qs[1].pending = 1;			/* coming already */
	aplan_decide(&need, qs, 2, sub, can);
	assert_int_equal(sub[0] + sub[1], 0);
	qs[1].pending = 0;			/* running, not joined yet */
	qs[1].running = 1;
	qs[1].starting_nodes = 1;
	aplan_decide(&need, qs, 2, sub, can);
	assert_int_equal(sub[0] + sub[1], 0);
	qs[1].running = qs[1].starting_nodes = 0;
	need.unmet = 7200;			/* longer than its usable time */
	aplan_decide(&need, qs, 2, sub, can);
	assert_int_equal(sub[0] + sub[1], 0);
	need.unmet = 3600;
	need.idle = 0;
	need.unmet = 0;
	need.waiting = 1000;
	qs[0].pending = 2;			/* the first is full */
	aplan_decide(&need, qs, 2, sub, can);
	assert_int_equal(sub[0], 0);
	assert_int_equal(sub[1], 1);
}

/* Slurm counts whole minutes; the agents leave a tenth before the end
 * (at most 30 s), and a tenth (at most 60 s) is kept for their start. */
static void
test_usable(void **state)
{
	(void)state;
	assert_true(ft_alloc_usable(7200) == 7110);
	assert_true(ft_alloc_usable(100) == 96);		/* 2 min less 2 x 12 s */
	assert_true(ft_alloc_usable(60) == 48);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_backlog_and_max),
		cmocka_unit_test(test_cancel_and_pause),
		cmocka_unit_test(test_queues_and_time),
		cmocka_unit_test(test_usable),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

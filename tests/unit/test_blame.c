/* Unit tests of master/blame.c: who is charged with a worker's death, the
 * poison rule across nodes, deaths that go back to the node when the
 * task succeeds elsewhere, and records that end with their tasks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "blame.h"

static const char *const names[] = { "node1", "node2", "node3", "node4" };

/* A death while idle, or a hang, is always the node's. */
static void
test_idle_and_hung_are_the_nodes(void **state)
{
	struct blame *b = blame_new();
	char why[128];

	(void)state;
	assert_int_equal(blame_death(b, 0, 1, 0, 1, why, sizeof(why)),
			 BLAME_NODE);
	assert_non_null(strstr(why, "no task"));
	assert_int_equal(blame_death(b, 7, 1, 1, 1, why, sizeof(why)),
			 BLAME_NODE);
	assert_non_null(strstr(why, "hung"));
	assert_int_equal(blame_records(b), 0);
	blame_free(b);
}

/* A death running a task on a healthy node is the task's; on a suspect
 * node, the node's. */
static void
test_healthy_node_charges_the_task(void **state)
{
	struct blame *b = blame_new();
	char why[128];

	(void)state;
	assert_int_equal(blame_death(b, 5, 0, 0, 1, why, sizeof(why)),
			 BLAME_TASK);
	assert_int_equal(blame_task_deaths(b, 5), 1);
	assert_int_equal(blame_death(b, 6, 0, 0, 0, why, sizeof(why)),
			 BLAME_NODE);
	assert_non_null(strstr(why, "suspect"));
	assert_int_equal(blame_task_deaths(b, 6), 0);
	/* The same task again on the same node, which is suspect now: the
	 * node's. */
	assert_int_equal(blame_death(b, 5, 0, 0, 0, why, sizeof(why)),
			 BLAME_NODE);
	assert_int_equal(blame_records(b), 1);
	blame_free(b);
}

/* The same task killing workers on two nodes is poison: charged to it
 * even where the node is suspect, and its failure says so. */
static void
test_two_nodes_make_poison(void **state)
{
	struct blame *b = blame_new();
	char why[256];

	(void)state;
	assert_int_equal(blame_death(b, 9, 0, 0, 1, why, sizeof(why)),
			 BLAME_TASK);
	assert_int_equal(blame_death(b, 9, 2, 0, 0, why, sizeof(why)),
			 BLAME_TASK);
	assert_non_null(strstr(why, "poison"));
	assert_int_equal(blame_death(b, 9, 1, 0, 0, why, sizeof(why)),
			 BLAME_TASK);
	assert_int_equal(blame_task_deaths(b, 9), 3);
	assert_int_equal(blame_task_failed(b, 9, names, why, sizeof(why)), 1);
	assert_string_equal(why, "poison: killed its worker 3 times on node1, "
			    "node3, node2");
	assert_int_equal(blame_records(b), 0);
	/* Forgotten: a task without deaths has no poison reason. */
	assert_int_equal(blame_task_failed(b, 9, names, why, sizeof(why)), 0);
	blame_free(b);
}

/* A task charged with deaths on one node that succeeds on another was
 * not the cause: that node is charged after all.  Succeeding on the node
 * it killed on, or after killing on two nodes, charges nobody. */
static void
test_success_elsewhere_charges_the_node(void **state)
{
	struct blame *b = blame_new();
	char why[128];

	(void)state;
	blame_death(b, 1, 3, 0, 1, why, sizeof(why));
	blame_death(b, 1, 3, 0, 1, why, sizeof(why));
	assert_int_equal(blame_task_ok(b, 1, 0), 3);
	assert_int_equal(blame_records(b), 0);

	blame_death(b, 2, 1, 0, 1, why, sizeof(why));
	assert_int_equal(blame_task_ok(b, 2, 1), -1);

	blame_death(b, 3, 1, 0, 1, why, sizeof(why));
	blame_death(b, 3, 2, 0, 1, why, sizeof(why));
	assert_int_equal(blame_task_ok(b, 3, 0), -1);

	assert_int_equal(blame_task_ok(b, 4, 0), -1);	/* never charged */
	assert_int_equal(blame_records(b), 0);
	blame_free(b);
}

/* Many tasks charged and ended in any order: lookups stay right through
 * growth and deletion, and nothing is left once they have all ended. */
static void
test_records_follow_open_tasks(void **state)
{
	struct blame *b = blame_new();
	char why[128];
	uint64_t t;

	(void)state;
	for (t = 1; t <= 5000; t++)
		blame_death(b, t * 7919, (int)(t % 4), 0, 1, why, sizeof(why));
	assert_int_equal(blame_records(b), 5000);
	for (t = 1; t <= 5000; t += 2)
		assert_int_equal(blame_task_ok(b, t * 7919, (int)(t % 4)), -1);
	assert_int_equal(blame_records(b), 2500);
	for (t = 2; t <= 5000; t += 2) {
		assert_int_equal(blame_task_deaths(b, t * 7919), 1);
		assert_int_equal(blame_task_failed(b, t * 7919, names, why,
						   sizeof(why)), 1);
	}
	assert_int_equal(blame_records(b), 0);
	for (t = 1; t <= 5000; t++)
		assert_int_equal(blame_task_deaths(b, t * 7919), 0);
	blame_free(b);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_idle_and_hung_are_the_nodes),
		cmocka_unit_test(test_healthy_node_charges_the_task),
		cmocka_unit_test(test_two_nodes_make_poison),
		cmocka_unit_test(test_success_elsewhere_charges_the_node),
		cmocka_unit_test(test_records_follow_open_tasks),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

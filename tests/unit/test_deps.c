/* deps (master/deps.c) and taskgraph (common/taskgraph.c): tasks that
 * wait for others of their batch, held and handed back in order; graphs
 * checked for ranges and cycles; chains and fan-ins of 100,000 tasks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "deps.h"
#include "taskgraph.h"

#define BIG 100000

static struct deps_spec
spec_of(uint32_t i)
{
	struct deps_spec s = { .spec = "x", .len = 1, .cpus = (uint16_t)(i % 7) };

	return s;
}

/* Take every news of D into READY (indexes) and DOOMED; their counts. */
static void
take_all(struct deps *d, uint32_t *ready, uint32_t *nready, uint32_t *doomed,
	 uint32_t *blames, uint32_t *ndoomed)
{
	struct deps_spec sp;
	uint32_t i, blame;
	enum deps_news n;

	while ((n = deps_next(d, &i, &sp, &blame)) != DEPS_NONE) {
		if (n == DEPS_READY) {
			assert_int_equal(sp.cpus, i % 7);
			ready[(*nready)++] = i;
		} else {
			doomed[*ndoomed] = i;
			blames[(*ndoomed)++] = blame;
		}
	}
}

static void
test_fan_in_waits_for_all(void **st)
{
	struct deps *d = deps_new();
	uint32_t after[3] = { 0, 1, 2 }, r[8], b[8], x[8], nr = 0, nd = 0;
	struct deps_spec sp = spec_of(3);
	uint32_t blame;

	(void)st;
	assert_int_equal(deps_hold(d, 3, after, 3, &sp, &blame), DEPS_NONE);
	assert_int_equal(deps_held(d), 1);
	deps_ended(d, 1, 1);
	deps_ended(d, 0, 1);
	take_all(d, r, &nr, x, b, &nd);
	assert_int_equal(nr + nd, 0);
	deps_ended(d, 2, 1);
	take_all(d, r, &nr, x, b, &nd);
	assert_int_equal(nr, 1);
	assert_int_equal(r[0], 3);
	assert_int_equal(nd, 0);
	assert_int_equal(deps_held(d), 0);
	/* Waiting for tasks that succeeded already: ready at once. */
	sp = spec_of(4);
	assert_int_equal(deps_hold(d, 4, after, 3, &sp, &blame), DEPS_READY);
	deps_free(d);
}

static void
test_a_failure_dooms_its_waiters_and_theirs(void **st)
{
	struct deps *d = deps_new();
	uint32_t a1 = 1, a2 = 2, a0 = 0, r[8], x[8], b[8], nr = 0, nd = 0;
	struct deps_spec sp = spec_of(0);
	uint32_t blame;

	(void)st;
	deps_hold(d, 1, &a0, 1, &sp, &blame);	/* 1 after 0 */
	deps_hold(d, 2, &a1, 1, &sp, &blame);	/* 2 after 1 */
	deps_hold(d, 3, &a2, 1, &sp, &blame);	/* 3 after 2 */
	deps_ended(d, 0, 0);
	take_all(d, r, &nr, x, b, &nd);
	assert_int_equal(nd, 1);
	assert_int_equal(x[0], 1);
	assert_int_equal(b[0], 0);
	/* The batch fails 1 without running it, and says so here. */
	deps_ended(d, 1, 0);
	take_all(d, r, &nr, x, b, &nd);
	assert_int_equal(nd, 2);
	assert_int_equal(x[1], 2);
	assert_int_equal(b[1], 1);
	/* A task added after a failed one is doomed at once. */
	assert_int_equal(deps_hold(d, 9, &a0, 1, &sp, &blame), DEPS_DOOMED);
	assert_int_equal(blame, 0);
	assert_int_equal(nr, 0);
	deps_free(d);
}

static void
test_cancel_dooms_every_held_task(void **st)
{
	struct deps *d = deps_new();
	uint32_t a0 = 0, r[8], x[8], b[8], nr = 0, nd = 0, blame, i;
	struct deps_spec sp = spec_of(0);

	(void)st;
	for (i = 1; i <= 4; i++)
		deps_hold(d, i, &a0, 1, &sp, &blame);
	deps_cancel(d);
	take_all(d, r, &nr, x, b, &nd);
	assert_int_equal(nd, 4);
	for (i = 0; i < 4; i++)
		assert_int_equal(b[i], DEPS_CANCELLED);
	assert_int_equal(deps_held(d), 0);
	deps_ended(d, 0, 1);		/* too late: nothing more */
	take_all(d, r, &nr, x, b, &nd);
	assert_int_equal(nr + nd, 4);
	deps_free(d);
}

/* A chain of BIG: each task after the one before.  Run in order, then
 * again with the first failing: every other doomed, in order, through
 * the queue (no recursion, whatever the length). */
static void
test_chain_of_100000(void **st)
{
	uint32_t *r = malloc(BIG * sizeof(uint32_t));
	uint32_t *x = malloc(BIG * sizeof(uint32_t));
	uint32_t *b = malloc(BIG * sizeof(uint32_t));
	uint32_t i, nr = 0, nd = 0, blame;
	int round;

	(void)st;
	for (round = 0; round < 2; round++) {
		struct deps *d = deps_new();

		nr = nd = 0;
		for (i = 1; i < BIG; i++) {
			uint32_t prev = i - 1;
			struct deps_spec sp = spec_of(i);

			assert_int_equal(deps_hold(d, i, &prev, 1, &sp, &blame),
					 DEPS_NONE);
		}
		deps_ended(d, 0, round == 0);
		for (;;) {
			uint32_t before = nr + nd;

			take_all(d, r, &nr, x, b, &nd);
			if (nr + nd == before)
				break;
			for (i = before; i < nr + nd; i++)
				deps_ended(d, round == 0 ? r[i] : x[i],
					   round == 0);
		}
		if (round == 0) {
			assert_int_equal(nr, BIG - 1);
			for (i = 0; i < nr; i++)
				assert_int_equal(r[i], i + 1);
		} else {
			assert_int_equal(nd, BIG - 1);
			for (i = 0; i < nd; i++) {
				assert_int_equal(x[i], i + 1);
				assert_int_equal(b[i], i);
			}
		}
		deps_free(d);
	}
	free(r);
	free(x);
	free(b);
}

static void
test_fan_in_of_100000(void **st)
{
	uint32_t *after = malloc(BIG * sizeof(uint32_t)), i, blame, index;
	struct deps *d = deps_new();
	struct deps_spec sp = spec_of(BIG), got;

	(void)st;
	for (i = 0; i < BIG; i++)
		after[i] = i;
	assert_int_equal(deps_hold(d, BIG, after, BIG, &sp, &blame),
			 DEPS_NONE);
	for (i = 0; i < BIG; i++) {
		assert_int_equal(deps_next(d, &index, &got, &blame), DEPS_NONE);
		deps_ended(d, BIG - 1 - i, 1);
	}
	assert_int_equal(deps_next(d, &index, &got, &blame), DEPS_READY);
	assert_int_equal(index, BIG);
	deps_free(d);
	free(after);
}

/* ---- taskgraph ---- */

static void
build(struct taskgraph *g, uint32_t n, const uint32_t (*lists)[4])
{
	struct taskgraph_builder b;
	uint32_t i, k;

	taskgraph_init(&b);
	for (i = 0; i < n; i++) {
		for (k = 0; k < 4 && lists[i][k] != UINT32_MAX; k++)
			;
		taskgraph_add(&b, lists[i], k);
	}
	taskgraph_take(&b, g);
}

#define E UINT32_MAX

static void
test_graph_cycles_ranges_and_sound_ones(void **st)
{
	static const uint32_t sound[5][4] = {
		{ E }, { 0, E }, { 0, E }, { 1, 2, E }, { 3, 0, E },
	};
	static const uint32_t cycle[5][4] = {
		{ E }, { 3, E }, { 1, E }, { 2, 0, E }, { 0, E },
	};
	static const uint32_t self[2][4] = { { E }, { 1, E } };
	static const uint32_t range[2][4] = { { 5, E }, { E } };
	struct taskgraph g;
	char why[200];
	uint32_t task;

	(void)st;
	build(&g, 5, sound);
	assert_int_equal(taskgraph_check(&g, &task, why, sizeof(why)), 0);
	taskgraph_free(&g);
	build(&g, 5, cycle);
	assert_int_equal(taskgraph_check(&g, &task, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "cycle: "));
	/* The cycle named is 1 -> 3 -> 2 -> 1, from one of its tasks. */
	assert_true(strcmp(why, "cycle: 1 -> 3 -> 2 -> 1") == 0 ||
		    strcmp(why, "cycle: 3 -> 2 -> 1 -> 3") == 0 ||
		    strcmp(why, "cycle: 2 -> 1 -> 3 -> 2") == 0);
	taskgraph_free(&g);
	build(&g, 2, self);
	assert_int_equal(taskgraph_check(&g, &task, why, sizeof(why)), -1);
	assert_int_equal(task, 1);
	assert_string_equal(why, "cycle: task 1 waits for itself");
	taskgraph_free(&g);
	build(&g, 2, range);
	assert_int_equal(taskgraph_check(&g, &task, why, sizeof(why)), -1);
	assert_int_equal(task, 0);
	assert_string_equal(why, "no task 5 in this batch of 2");
	taskgraph_free(&g);
}

static void
test_graph_chain_and_fan_in_of_100000(void **st)
{
	struct taskgraph_builder b;
	struct taskgraph g;
	uint32_t i, task, *all = malloc(BIG * sizeof(uint32_t));
	char why[200];

	(void)st;
	taskgraph_init(&b);
	for (i = 0; i < BIG; i++) {
		uint32_t prev = i - 1;

		taskgraph_add(&b, &prev, i ? 1 : 0);
	}
	taskgraph_take(&b, &g);
	assert_int_equal(taskgraph_check(&g, &task, why, sizeof(why)), 0);
	taskgraph_free(&g);
	/* The chain closed into a ring: a cycle through all of it. */
	taskgraph_init(&b);
	for (i = 0; i < BIG; i++) {
		uint32_t prev = i ? i - 1 : BIG - 1;

		taskgraph_add(&b, &prev, 1);
	}
	taskgraph_take(&b, &g);
	assert_int_equal(taskgraph_check(&g, &task, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "cycle: "));
	taskgraph_free(&g);
	for (i = 0; i < BIG; i++)
		all[i] = i;
	taskgraph_init(&b);
	for (i = 0; i < BIG; i++)
		taskgraph_add(&b, NULL, 0);
	taskgraph_add(&b, all, BIG);
	taskgraph_take(&b, &g);
	assert_int_equal(taskgraph_check(&g, &task, why, sizeof(why)), 0);
	taskgraph_free(&g);
	free(all);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fan_in_waits_for_all),
		cmocka_unit_test(test_a_failure_dooms_its_waiters_and_theirs),
		cmocka_unit_test(test_cancel_dooms_every_held_task),
		cmocka_unit_test(test_chain_of_100000),
		cmocka_unit_test(test_fan_in_of_100000),
		cmocka_unit_test(test_graph_cycles_ranges_and_sound_ones),
		cmocka_unit_test(test_graph_chain_and_fan_in_of_100000),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Unit tests of ftar_plan: the layouts ftallreduce recovers into. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "ftar_plan.h"

#define NR 10

/* Holdings of a gang of 8 active ranks + 2 spares where every active rank
 * reached LEVEL (holding its chain from level 0). */
static void
all_at(struct ftar_hold *h, int level)
{
	int r;

	for (r = 0; r < NR; r++)
		h[r] = r < 8 ? (struct ftar_hold){ 1, r, 0, level }
			     : (struct ftar_hold){ 0, -1, 0, -1 };
}

static void
test_pow2(void **state)
{
	(void)state;
	assert_int_equal(ftar_pow2_floor(1), 1);
	assert_int_equal(ftar_pow2_floor(6), 4);
	assert_int_equal(ftar_pow2_floor(8), 8);
	assert_int_equal(ftar_pow2_floor(1023), 512);
	assert_int_equal(ftar_log2(1), 0);
	assert_int_equal(ftar_log2(8), 3);
}

static void
test_initial_fold(void **state)
{
	struct ftar_layout lo;

	(void)state;
	ftar_layout_initial(6, 2, &lo);
	assert_int_equal(lo.pp, 4);
	assert_int_equal(lo.npos, 4);
	assert_int_equal(lo.pos_rank[3], 3);
	assert_int_equal(lo.nfree, 4);
	assert_int_equal(lo.free_rank[0], 4);
	assert_int_equal(lo.free_rank[3], 7);
	assert_int_equal(lo.free_src[2], 2);
	ftar_layout_free(&lo);
}

static void
test_no_death_keeps_positions(void **state)
{
	struct ftar_hold h[NR];
	unsigned char dead[NR] = { 0 };
	struct ftar_layout lo;
	char why[200];
	int q;

	(void)state;
	all_at(h, 2);
	assert_int_equal(ftar_layout_plan(8, h, dead, NR, &lo, why,
					  sizeof(why)), 0);
	assert_int_equal(lo.level, 2);
	assert_int_equal(lo.npos, 8);
	assert_int_equal(lo.d, 4);
	for (q = 0; q < 8; q++) {
		assert_int_equal(lo.pos_rank[q], q);
		assert_int_equal(lo.pos_src[q], FTAR_SRC_HELD);
	}
	assert_int_equal(lo.nfree, 2);
	assert_int_equal(lo.free_src[0], 0);
	assert_int_equal(lo.free_src[1], 1);
	ftar_layout_free(&lo);
}

/* Rank 3 dies after level 1: spare 8 takes position 3, rank 2 (which holds
 * the sum of leaves 2-3) sends it; the slowest survivor sets the level. */
static void
test_spare_replaces_dead(void **state)
{
	struct ftar_hold h[NR];
	unsigned char dead[NR] = { 0 };
	struct ftar_layout lo;
	char why[200];

	(void)state;
	all_at(h, 2);
	h[2].l = 1;
	dead[3] = 1;
	assert_int_equal(ftar_layout_plan(8, h, dead, NR, &lo, why,
					  sizeof(why)), 0);
	assert_int_equal(lo.level, 1);
	assert_int_equal(lo.d, 2);
	assert_int_equal(lo.pos_rank[2], 2);
	assert_int_equal(lo.pos_rank[3], 8);
	assert_int_equal(lo.pos_src[3], 2);
	assert_int_equal(lo.nfree, 1);
	assert_int_equal(lo.free_rank[0], 9);
	ftar_layout_free(&lo);
}

static void
test_two_deaths_in_a_block_fail(void **state)
{
	struct ftar_hold h[NR];
	unsigned char dead[NR] = { 0 };
	struct ftar_layout lo;
	char why[200];

	(void)state;
	all_at(h, 1);
	dead[2] = dead[3] = 1;
	assert_int_equal(ftar_layout_plan(8, h, dead, NR, &lo, why,
					  sizeof(why)), -1);
	assert_non_null(strstr(why, "leaves 2-3"));
}

/* Before any exchange a dead rank's leaf is rebuilt from the input. */
static void
test_level0_reload(void **state)
{
	struct ftar_hold h[NR];
	unsigned char dead[NR] = { 0 };
	struct ftar_layout lo;
	char why[200];

	(void)state;
	all_at(h, 1);
	h[0].l = 0;
	dead[1] = 1;
	assert_int_equal(ftar_layout_plan(8, h, dead, NR, &lo, why,
					  sizeof(why)), 0);
	assert_int_equal(lo.level, 0);
	assert_int_equal(lo.pos_rank[1], 8);
	assert_int_equal(lo.pos_src[1], FTAR_SRC_RELOAD);
	ftar_layout_free(&lo);
}

/* Three deaths, no spare: 5 survivors shrink to 4 positions, one per
 * block of level 1; rank 7 is left free and gets the result. */
static void
test_shrink(void **state)
{
	struct ftar_hold h[8];
	unsigned char dead[8] = { 0 };
	struct ftar_layout lo;
	char why[200];
	int r;

	(void)state;
	for (r = 0; r < 8; r++)
		h[r] = (struct ftar_hold){ 1, r, 0, 1 };
	dead[1] = dead[3] = dead[5] = 1;
	assert_int_equal(ftar_layout_plan(8, h, dead, 8, &lo, why,
					  sizeof(why)), 0);
	assert_int_equal(lo.npos, 4);
	assert_int_equal(lo.d, 1);
	assert_int_equal(lo.pos_rank[0], 0);
	assert_int_equal(lo.pos_rank[1], 2);
	assert_int_equal(lo.pos_rank[2], 4);
	assert_int_equal(lo.pos_rank[3], 6);
	assert_int_equal(lo.nfree, 1);
	assert_int_equal(lo.free_rank[0], 7);
	assert_int_equal(lo.free_src[0], 0);
	ftar_layout_free(&lo);
}

/* A shrink that would leave a block of level 1 without a holder. */
static void
test_too_few_survivors(void **state)
{
	struct ftar_hold h[NR];
	unsigned char dead[NR] = { 0 };
	struct ftar_layout lo;
	char why[200];
	int r;

	(void)state;
	all_at(h, 0);
	for (r = 0; r < 8; r++)
		dead[r] = 1;
	assert_int_equal(ftar_layout_plan(8, h, dead, NR, &lo, why,
					  sizeof(why)), -1);
	assert_non_null(strstr(why, "cannot hold"));
}

/* After the top, free ranks that hold the result need nothing. */
static void
test_result_holders_need_nothing(void **state)
{
	struct ftar_hold h[NR];
	unsigned char dead[NR] = { 0 };
	struct ftar_layout lo;
	char why[200];
	int q;

	(void)state;
	all_at(h, 3);
	h[8] = (struct ftar_hold){ 0, 0, 3, 3 };
	dead[5] = 1;
	assert_int_equal(ftar_layout_plan(8, h, dead, NR, &lo, why,
					  sizeof(why)), 0);
	assert_int_equal(lo.level, 3);
	/* positions of one node may change hands: all hold the same value;
	 * the free holder of the result takes the last one, no transfer */
	for (q = 0; q < 8; q++)
		assert_int_equal(lo.pos_src[q], FTAR_SRC_HELD);
	assert_int_equal(lo.pos_rank[5], 6);
	assert_int_equal(lo.pos_rank[7], 8);
	assert_int_equal(lo.nfree, 1);
	assert_int_equal(lo.free_rank[0], 9);
	assert_int_equal(lo.free_src[0], 0);
	ftar_layout_free(&lo);
}

/* A free rank holding a node is a source but an active one is kept. */
static void
test_active_holders_first(void **state)
{
	struct ftar_hold h[NR];
	unsigned char dead[NR] = { 0 };
	struct ftar_layout lo;
	char why[200];

	(void)state;
	all_at(h, 1);
	h[8] = (struct ftar_hold){ 0, 6, 1, 1 };	/* got leaves 6-7 */
	dead[7] = 1;
	assert_int_equal(ftar_layout_plan(8, h, dead, NR, &lo, why,
					  sizeof(why)), 0);
	assert_int_equal(lo.pos_rank[6], 6);
	assert_int_equal(lo.pos_rank[7], 8);
	assert_int_equal(lo.pos_src[7], FTAR_SRC_HELD);
	ftar_layout_free(&lo);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pow2),
		cmocka_unit_test(test_initial_fold),
		cmocka_unit_test(test_no_death_keeps_positions),
		cmocka_unit_test(test_spare_replaces_dead),
		cmocka_unit_test(test_two_deaths_in_a_block_fail),
		cmocka_unit_test(test_level0_reload),
		cmocka_unit_test(test_shrink),
		cmocka_unit_test(test_too_few_survivors),
		cmocka_unit_test(test_result_holders_need_nothing),
		cmocka_unit_test(test_active_holders_first),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

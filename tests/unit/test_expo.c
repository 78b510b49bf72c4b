/* Unit tests of master/expo.c (the Prometheus text format: numbers,
 * escaping, histograms) and of master/stats.c's histograms. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "expo.h"
#include "stats.h"
#include "util.h"

static void
check_number(double v, const char *want)
{
	char out[40];

	expo_number(out, sizeof(out), v);
	assert_string_equal(out, want);
}

static void
test_numbers(void **state)
{
	(void)state;
	check_number(0, "0");
	check_number(42, "42");
	check_number(-3, "-3");
	check_number(1.5, "1.5");
	check_number(0.1, "0.1");		/* the shortest that reads back */
	check_number(0.0001, "0.0001");
	check_number(1e20, "1e+20");
	check_number(1.0 / 3, "0.33333333333333331");
	check_number(INFINITY, "+Inf");
	check_number(-INFINITY, "-Inf");
	check_number(NAN, "NaN");
}

static void
test_escaping(void **state)
{
	struct ft_buf b = { 0 };
	struct expo_label l[2] = {
		{ "name", "a\"b\\c\nd" }, { "empty", NULL },
	};

	(void)state;
	expo_family(&b, "ftfarm_x", "gauge", "back\\slash\nnewline \"kept\"");
	expo_sample(&b, "ftfarm_x", l, 2, 7);
	expo_sample(&b, "ftfarm_x", NULL, 0, 0.5);
	ft_buf_add(&b, "", 1);
	assert_string_equal(b.data,
		"# HELP ftfarm_x back\\\\slash\\nnewline \"kept\"\n"
		"# TYPE ftfarm_x gauge\n"
		"ftfarm_x{name=\"a\\\"b\\\\c\\nd\",empty=\"\"} 7\n"
		"ftfarm_x 0.5\n");
	ft_buf_free(&b);
}

static void
test_histogram(void **state)
{
	static const double le[] = { 1, 2.5 };
	struct expo_label l = { "type", "exec" };
	struct ft_buf b = { 0 };
	struct hist h;

	(void)state;
	hist_init(&h, le, 2);
	hist_observe(&h, 0.5);
	hist_observe(&h, 1);		/* on a bound: in that bucket */
	hist_observe(&h, 2);
	hist_observe(&h, 7);
	assert_int_equal(hist_cumulative(&h, 0), 2);
	assert_int_equal(hist_cumulative(&h, 1), 3);
	assert_int_equal(hist_cumulative(&h, 2), 4);
	expo_histogram(&b, "ftfarm_run_seconds", &l, 1, &h);
	ft_buf_add(&b, "", 1);
	assert_string_equal(b.data,
		"ftfarm_run_seconds_bucket{type=\"exec\",le=\"1\"} 2\n"
		"ftfarm_run_seconds_bucket{type=\"exec\",le=\"2.5\"} 3\n"
		"ftfarm_run_seconds_bucket{type=\"exec\",le=\"+Inf\"} 4\n"
		"ftfarm_run_seconds_sum{type=\"exec\"} 10.5\n"
		"ftfarm_run_seconds_count{type=\"exec\"} 4\n");
	ft_buf_free(&b);
}

static void
test_stats(void **state)
{
	struct stats *s = ft_calloc(1, sizeof(*s));

	(void)state;
	stats_init(s);
	assert_ptr_equal(stats_type(s, -1), &s->types[STATS_OTHER]);
	assert_ptr_equal(stats_type(s, STATS_MAX_TYPES + 3),
			 &s->types[STATS_OTHER]);
	assert_ptr_equal(stats_type(s, 2), &s->types[2]);
	stats_loop_lag(s, 0.003);
	stats_loop_lag(s, -1);		/* early: counts as 0 */
	stats_loop_lag(s, 0.02);
	assert_int_equal(s->loop_lag.count, 3);
	assert_true(stats_lag_max(s) == 0.02);
	assert_true(stats_lag_max(s) == 0);	/* taken: starts afresh */
	assert_true(s->detect.n > 0 && s->types[0].run.n > 0);
	free(s);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_numbers),
		cmocka_unit_test(test_escaping),
		cmocka_unit_test(test_histogram),
		cmocka_unit_test(test_stats),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

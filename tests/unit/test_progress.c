/* Unit tests of common/progress.c: the windowed rate, ETA and the words
 * of progress lines. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "progress.h"

static void
test_rate(void **state)
{
	struct ft_rate r;
	int i;

	(void)state;
	ft_rate_init(&r, 10);
	assert_true(ft_rate_get(&r) < 0);
	ft_rate_add(&r, 100, 0);
	ft_rate_add(&r, 100.2, 20);
	assert_true(ft_rate_get(&r) < 0);	/* under half a second */
	ft_rate_add(&r, 101, 100);
	assert_true(ft_rate_get(&r) == 100);
	/* 30 s at 10/s after that: the window forgets the fast start. */
	for (i = 1; i <= 30; i++)
		ft_rate_add(&r, 101 + i, 100 + 10 * i);
	assert_true(ft_rate_get(&r) > 9.99 && ft_rate_get(&r) < 10.01);
	assert_true(r.t[r.n - 1] - r.t[0] <= 11);
	/* A count that goes down (a new batch) starts afresh. */
	ft_rate_add(&r, 200, 5);
	assert_int_equal(r.n, 1);
	/* More samples than slots: the oldest go. */
	ft_rate_init(&r, 1e9);
	for (i = 0; i < 3 * FT_RATE_SAMPLES; i++)
		ft_rate_add(&r, i, 2.0 * i);
	assert_int_equal(r.n, FT_RATE_SAMPLES);
	assert_true(ft_rate_get(&r) == 2);
}

static void
check_secs(double s, const char *want)
{
	char out[32];

	ft_fmt_secs(s, out, sizeof(out));
	assert_string_equal(out, want);
}

static void
test_formats(void **state)
{
	char out[64];

	(void)state;
	check_secs(0.42, "0.4s");
	check_secs(12.4, "12s");
	check_secs(187, "3m07s");
	check_secs(7500, "2h05m");
	check_secs(3 * 86400 + 4 * 3600, "3d04h");
	check_secs(-1, "0.0s");
	ft_fmt_count(950, out, sizeof(out));
	assert_string_equal(out, "950");
	ft_fmt_count(2.5, out, sizeof(out));
	assert_string_equal(out, "2.5");
	ft_fmt_count(12345, out, sizeof(out));
	assert_string_equal(out, "12.3k");
	ft_fmt_count(4560000, out, sizeof(out));
	assert_string_equal(out, "4.56M");
	ft_fmt_bar(0.5, 12, out, sizeof(out));
	assert_string_equal(out, "[#####.....]");
	ft_fmt_bar(2, 6, out, sizeof(out));
	assert_string_equal(out, "[####]");
	ft_fmt_bar(0.5, 12, out, 8);		/* too small: nothing */
	assert_string_equal(out, "");
}

static void
test_lines(void **state)
{
	struct ft_progress p = { .total = 1000, .done = 520, .failed = 2,
				 .elapsed = 4 };
	char out[160];

	(void)state;
	ft_progress_text(&p, 240, out, sizeof(out));
	assert_string_equal(out, "520/1000 52%, 2 failed, 240/s, ETA 2.0s");
	/* No measured rate yet: the average. */
	ft_progress_text(&p, -1, out, sizeof(out));
	assert_string_equal(out, "520/1000 52%, 2 failed, 130/s, ETA 3.7s");
	assert_true(ft_progress_eta(&p, 0) < 0);	/* stalled: unknown */
	p.elapsed = 0;
	p.failed = 0;
	ft_progress_text(&p, -1, out, sizeof(out));
	assert_string_equal(out, "520/1000 52%, ?/s, ETA ?");
	p.done = 1000;
	p.finished = 1;
	p.elapsed = 75;
	ft_progress_text(&p, -1, out, sizeof(out));
	assert_string_equal(out, "1000/1000 100%, in 1m15s");
	assert_true(ft_progress_eta(&p, -1) == 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rate),
		cmocka_unit_test(test_formats),
		cmocka_unit_test(test_lines),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

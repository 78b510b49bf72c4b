/* Unit tests of master/evring.c: records kept in order, the oldest
 * dropped past the cap, positions that stay valid, counts of the lost. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "evring.h"

/* Add record I: line "line I\n". */
static void
add(struct evring *r, int i)
{
	char line[32];
	int n = snprintf(line, sizeof(line), "line %d\n", i);

	evring_add(r, 1000 + (uint64_t)i, (double)i, i % 3, line, (size_t)n);
}

/* The records from POS to the end: their numbers, into OUT.  How many. */
static int
walk(const struct evring *r, uint64_t pos, int *out)
{
	struct evrec rec;
	const char *line;
	int n = 0;

	while (pos < evring_end(r)) {
		pos = evring_get(r, pos, &rec, &line);
		assert_int_equal(rec.seq, 1000 + (uint64_t)rec.ts);
		assert_int_equal(rec.type, (int)rec.ts % 3);
		assert_memory_equal(line, "line ", 5);
		out[n++] = (int)rec.ts;
	}
	return n;
}

static void
test_order(void **state)
{
	struct evring r;
	int got[16], n;

	(void)state;
	evring_init(&r, 1 << 20);
	assert_true(evring_head(&r) == evring_end(&r));
	add(&r, 0);
	add(&r, 1);
	add(&r, 2);
	n = walk(&r, evring_head(&r), got);
	assert_int_equal(n, 3);
	assert_int_equal(got[0], 0);
	assert_int_equal(got[2], 2);
	assert_int_equal(r.head_ord, 0);
	evring_free(&r);
}

static void
test_cap(void **state)
{
	struct evring r;
	struct evrec rec;
	const char *line;
	uint64_t cursor;
	int got[4096], n, i;
	size_t one = sizeof(struct evrec) + strlen("line 100\n");

	(void)state;
	evring_init(&r, 10 * one);		/* about ten records */
	add(&r, 100);
	cursor = evring_head(&r);		/* a reader at the start */
	for (i = 101; i < 3000; i++)
		add(&r, i);
	/* Only the newest fit; their positions moved on, never back. */
	assert_true(evring_end(&r) - evring_head(&r) <= 10 * one);
	n = walk(&r, evring_head(&r), got);
	assert_true(n >= 9 && n <= 10);
	assert_int_equal(got[n - 1], 2999);
	assert_true(cursor < evring_head(&r));	/* it lost records */
	evring_get(&r, evring_head(&r), &rec, &line);
	assert_int_equal(rec.ord, r.head_ord);
	assert_int_equal(r.head_ord + (uint64_t)n, r.nadded);
	/* The buffer was compacted: it holds about the cap, not the
	 * history. */
	assert_true(r.buf.len <= 3 * 10 * one);
	evring_free(&r);
}

static void
test_big_record(void **state)
{
	struct evring r;
	char big[300];
	struct evrec rec;
	const char *line;

	(void)state;
	memset(big, 'x', sizeof(big));
	evring_init(&r, 100);
	add(&r, 1);
	evring_add(&r, 7, 7, 1, big, sizeof(big));	/* bigger than the cap */
	evring_get(&r, evring_head(&r), &rec, &line);
	assert_int_equal(rec.seq, 7);			/* kept alone */
	assert_int_equal(rec.len, sizeof(big));
	assert_int_equal(r.head_ord, 1);
	add(&r, 2);					/* and then dropped */
	evring_get(&r, evring_head(&r), &rec, &line);
	assert_int_equal(rec.seq, 1002);
	evring_free(&r);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_order),
		cmocka_unit_test(test_cap),
		cmocka_unit_test(test_big_record),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Unit tests of common/jpos.c: positions of JSON values by path. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>
#include <jansson.h>

#include "jpos.h"
#include "util.h"

static struct jpos *
build(const char *text)
{
	return jpos_build(text, strlen(text));
}

/* Assert PATH is at LINE:COL in JP. */
static void
at(const struct jpos *jp, const char *path, int line, int col)
{
	int l = -1, c = -1;

	if (jpos_find(jp, path, &l, &c) != 0)
		fail_msg("path \"%s\" not found", path);
	if (l != line || c != col)
		fail_msg("path \"%s\": got %d:%d, want %d:%d", path, l, c, line,
			 col);
}

static void
absent(const struct jpos *jp, const char *path)
{
	int l, c;

	if (jpos_find(jp, path, &l, &c) == 0)
		fail_msg("path \"%s\" unexpectedly found at %d:%d", path, l, c);
}

static void
test_config_shape(void **state)
{
	const char *text =
		"\n"
		"  {\n"
		"  \"name\": \"x\",\n"
		"  \"nodes\": [\n"
		"    {\"name\": \"a\"},\n"
		"    { \"name\": \"b\", \"host\": \"h\" }\n"
		"  ]\n"
		"}\n";
	struct jpos *jp = build(text);

	(void)state;
	assert_non_null(jp);
	at(jp, "", 2, 3);
	at(jp, "name", 3, 3);
	at(jp, "nodes", 4, 3);
	at(jp, "nodes[0]", 5, 5);
	at(jp, "nodes[0].name", 5, 6);
	at(jp, "nodes[1]", 6, 5);
	at(jp, "nodes[1].name", 6, 7);
	at(jp, "nodes[1].host", 6, 20);
	absent(jp, "nodes[2]");
	absent(jp, "nodes[1].workers");
	absent(jp, "nodes.name");
	absent(jp, "name.x");
	absent(jp, "nodes[x]");
	absent(jp, "nodes[1");
	absent(jp, "nodes[]");
	absent(jp, "nodes[99999999999999999999]");
	absent(jp, "nosuch");
	absent(jp, "nam");
	jpos_free(jp);
}

static void
test_nested_arrays_and_scalars(void **state)
{
	struct jpos *jp = build("[1, [true, [null, -2.5e+3]], {}, [], \"s\"]");

	(void)state;
	assert_non_null(jp);
	at(jp, "", 1, 1);
	at(jp, "[0]", 1, 2);
	at(jp, "[1]", 1, 5);
	at(jp, "[1][0]", 1, 6);
	at(jp, "[1][1][1]", 1, 19);
	at(jp, "[2]", 1, 30);
	at(jp, "[3]", 1, 34);
	at(jp, "[4]", 1, 38);
	absent(jp, "[2].a");
	absent(jp, "[3][0]");
	absent(jp, "[4][0]");
	absent(jp, "a");
	jpos_free(jp);
}

static void
test_scalar_root(void **state)
{
	struct jpos *jp = build("  \n 42 ");

	(void)state;
	assert_non_null(jp);
	at(jp, "", 2, 2);
	absent(jp, "[0]");
	jpos_free(jp);
}

/* Escaped quotes and backslashes inside strings do not end them; escaped
 * keys are matched in their decoded form. */
static void
test_escapes(void **state)
{
	const char *text =
		"{\"a\": \"x\\\"y\\\\\", \"b\\\"c\": 1, \"\\u0041\\u00e9\": 2,\n"
		" \"\\ud83d\\ude00\": 3, \"t\\\\\": {\"k\": [\"]\", \"{\"]}}";
	struct jpos *jp = build(text);

	(void)state;
	assert_non_null(jp);
	at(jp, "a", 1, 2);
	at(jp, "b\"c", 1, 17);
	at(jp, "A\xc3\xa9", 1, 28);
	at(jp, "\xf0\x9f\x98\x80", 2, 2);
	at(jp, "t\\", 2, 21);
	at(jp, "t\\.k", 2, 29);
	at(jp, "t\\.k[1]", 2, 40);
	absent(jp, "\\u0041\\u00e9");
	jpos_free(jp);
}

/* Keys holding '.' or '[' are stored verbatim; the lookup finds them even
 * next to keys that make the path ambiguous (the first reading in document
 * order that resolves wins). */
static void
test_keys_with_dots(void **state)
{
	const char *text =
		"{\"a\": {\"b\": 1}, \"a.b\": 2, \"x[0]\": 3, \"x\": [4]}";
	struct jpos *jp = build(text);

	(void)state;
	assert_non_null(jp);
	at(jp, "a.b", 1, 8);
	at(jp, "x[0]", 1, 27);
	jpos_free(jp);
	jp = build("{\"a.b\": {\"c\": 1}, \"a\": {\"b\": {\"d\": 2}}}");
	assert_non_null(jp);
	at(jp, "a.b.c", 1, 10);
	at(jp, "a.b.d", 1, 31);
	jpos_free(jp);
	jp = build("{\"x[0]\": {\"y\": 1}, \"x\": [{\"z\": 2}]}");
	assert_non_null(jp);
	at(jp, "x[0].y", 1, 11);
	at(jp, "x[0].z", 1, 27);
	jpos_free(jp);
}

/* Columns count bytes: two-byte characters count twice. */
static void
test_columns_are_bytes(void **state)
{
	struct jpos *jp = build("{\"\xc3\xa9\xc3\xa9\": 1, \"b\": 2}");

	(void)state;
	assert_non_null(jp);
	at(jp, "b", 1, 13);
	jpos_free(jp);
}

static void
test_malformed(void **state)
{
	static const char *const bad[] = {
		"", "   ", "{", "[1,", "{\"a\" 1}", "{\"a\": }", "[1 2]",
		"{\"a\": 1,}", "[1,]", "\"abc", "\"a\\x\"", "\"\\u12g4\"",
		"tru", "nul", "01", "1.", "-", "1e", "[1]]", "{} {}",
		"{\"a\": 1]", "[\"a\nb\"]", "{1: 2}",
	};
	size_t i;

	(void)state;
	for (i = 0; i < FT_ARRAY_LEN(bad); i++) {
		struct jpos *jp = build(bad[i]);

		if (jp != NULL) {
			jpos_free(jp);
			fail_msg("accepted malformed text: %s", bad[i]);
		}
	}
	assert_null(jpos_build("[1]\0", 4));
}

/* Nesting deeper than jansson allows still indexes (the scanner keeps its
 * own stack, no recursion). */
static void
test_deep(void **state)
{
	enum { DEPTH = 5000 };
	char *text = ft_malloc(2 * DEPTH + 1), *path = ft_malloc(3 * DEPTH + 1);
	struct jpos *jp;
	int i;

	(void)state;
	for (i = 0; i < DEPTH; i++) {
		text[i] = '[';
		text[DEPTH + i] = ']';
		memcpy(path + 3 * i, "[0]", 3);
	}
	text[2 * DEPTH] = '\0';
	path[3 * (DEPTH - 2)] = '\0';
	jp = build(text);
	assert_non_null(jp);
	at(jp, path, 1, DEPTH - 1);
	absent(jp, "[1]");
	jpos_free(jp);
	free(text);
	free(path);
}

static void
test_find_null(void **state)
{
	int l, c;

	(void)state;
	assert_int_equal(jpos_find(NULL, "", &l, &c), -1);
	jpos_free(NULL);
}

/* A batch of 100k tasks indexes in well under a second. */
static void
test_big_batch(void **state)
{
	struct ft_buf b = { 0 };
	struct jpos *jp;
	json_t *parsed;
	double t0, dt, dj;
	int i;

	(void)state;
	ft_buf_adds(&b, "{\"name\": \"big\", \"tasks\": [\n");
	for (i = 0; i < 100000; i++)
		ft_buf_printf(&b, "%s{\"type\": \"exec\", \"argv\": [\"sh\", "
			      "\"-c\", \"echo %d \\\"q\\\"\"]}\n",
			      i ? "," : "", i);
	ft_buf_adds(&b, "]}\n");
	t0 = ft_now();
	jp = jpos_build(b.data, b.len);
	dt = ft_now() - t0;
	assert_non_null(jp);
	/* on a slowed-down run (valgrind) compare with jansson's parse of the
	 * same text, which jpos should beat several times over */
	t0 = ft_now();
	parsed = json_loadb(b.data, b.len, 0, NULL);
	dj = ft_now() - t0;
	assert_non_null(parsed);
	json_decref(parsed);
	if (dt > 0.5 && dt > dj)
		fail_msg("indexing took %.3f s (jansson %.3f s)", dt, dj);
	at(jp, "tasks[0]", 2, 1);
	at(jp, "tasks[99999].argv[2]", 100001, 40);
	at(jp, "tasks[54321].type", 54323, 3);
	absent(jp, "tasks[100000]");
	jpos_free(jp);
	ft_buf_free(&b);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_config_shape),
		cmocka_unit_test(test_nested_arrays_and_scalars),
		cmocka_unit_test(test_scalar_root),
		cmocka_unit_test(test_escapes),
		cmocka_unit_test(test_keys_with_dots),
		cmocka_unit_test(test_columns_are_bytes),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_deep),
		cmocka_unit_test(test_find_null),
		cmocka_unit_test(test_big_batch),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

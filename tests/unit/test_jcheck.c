/* Unit tests of common/jcheck.c: strict checks and the messages users see. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "jcheck.h"
#include "util.h"

static json_t *
parse(const char *text)
{
	json_error_t je;
	json_t *v = json_loads(text, JSON_DECODE_ANY, &je);

	if (v == NULL)
		fail_msg("bad test JSON: %s", je.text);
	return v;
}

static const struct jfield fields[] = {
	{ "name", JT_STRING, 1 },
	{ "count", JT_INT, 0 },
	{ "ratio", JT_NUMBER, 0 },
	{ "on", JT_BOOL, 0 },
	{ "sub", JT_OBJECT, 0 },
	{ "list", JT_ARRAY, 0 },
	{ "args", JT_STRING_ARRAY, 0 },
	{ "any", JT_ANY, 0 },
	{ NULL, JT_ANY, 0 },
};

/* Check TEXT against FIELDS at PATH: expect failure with WANT_PATH and
 * WANT_MSG, or success when WANT_MSG is NULL. */
static void
check(const char *text, const char *path, const char *want_path,
      const char *want_msg)
{
	json_t *v = parse(text);
	struct jerr err = { "", "" };
	int rc = jcheck_object(v, path, fields, &err);

	json_decref(v);
	if (want_msg == NULL) {
		if (rc != 0)
			fail_msg("%s: refused: %s: %s", text, err.path, err.msg);
		return;
	}
	assert_int_equal(rc, -1);
	assert_string_equal(err.path, want_path);
	assert_string_equal(err.msg, want_msg);
}

static void
test_paths(void **state)
{
	char out[64];

	(void)state;
	jpath_key(out, sizeof(out), "", "a");
	assert_string_equal(out, "a");
	jpath_key(out, sizeof(out), "a", "b");
	assert_string_equal(out, "a.b");
	jpath_index(out, sizeof(out), "a.b", 12);
	assert_string_equal(out, "a.b[12]");
	jpath_index(out, sizeof(out), "", 0);
	assert_string_equal(out, "[0]");
}

static void
test_type_names(void **state)
{
	static const struct {
		const char *text, *name;
	} cases[] = {
		{ "{}", "an object" }, { "[]", "an array" },
		{ "\"s\"", "a string" }, { "1", "an integer" },
		{ "1.5", "a number" }, { "true", "a boolean" },
		{ "false", "a boolean" }, { "null", "null" },
	};
	size_t i;

	(void)state;
	for (i = 0; i < FT_ARRAY_LEN(cases); i++) {
		json_t *v = parse(cases[i].text);

		assert_string_equal(jcheck_type_name(v), cases[i].name);
		json_decref(v);
	}
}

static void
test_object_ok(void **state)
{
	(void)state;
	check("{\"name\": \"x\"}", "", NULL, NULL);
	check("{\"name\": \"x\", \"count\": 3, \"ratio\": 2, \"on\": false, "
	      "\"sub\": {}, \"list\": [1, \"a\"], \"args\": [], \"any\": null}",
	      "", NULL, NULL);
	check("{\"name\": \"x\", \"ratio\": 0.25, \"args\": [\"a\", \"b\"]}",
	      "", NULL, NULL);
}

static void
test_object_refusals(void **state)
{
	(void)state;
	check("[]", "", "", "expected an object, got an array");
	check("3", "tasks[2]", "tasks[2]", "expected an object, got an integer");
	check("{\"name\": 1}", "", "name", "expected a string, got an integer");
	check("{\"name\": \"x\", \"count\": \"3\"}", "", "count",
	      "expected an integer, got a string");
	check("{\"name\": \"x\", \"count\": 3.0}", "", "count",
	      "expected an integer, got a number");
	check("{\"name\": \"x\", \"ratio\": true}", "", "ratio",
	      "expected a number, got a boolean");
	check("{\"name\": \"x\", \"on\": 1}", "", "on",
	      "expected a boolean, got an integer");
	check("{\"name\": \"x\", \"sub\": []}", "", "sub",
	      "expected an object, got an array");
	check("{\"name\": \"x\", \"list\": {}}", "", "list",
	      "expected an array, got an object");
	check("{\"name\": \"x\", \"args\": \"a b\"}", "", "args",
	      "expected an array of strings, got a string");
	check("{\"name\": \"x\", \"args\": [\"a\", null]}", "", "args[1]",
	      "expected a string, got null");
	check("{\"name\": \"x\", \"colour\": 1}", "", "colour", "unknown key");
	check("{\"name\": \"x\", \"colour\": 1}", "nodes[1]", "nodes[1].colour",
	      "unknown key");
	check("{\"count\": 1}", "", "", "missing required key \"name\"");
	check("{}", "nodes[1]", "nodes[1]", "missing required key \"name\"");
	/* in document order: the unknown key before the bad type */
	check("{\"x\": 1, \"count\": \"a\"}", "", "x", "unknown key");
	check("{\"count\": \"a\", \"x\": 1}", "", "count",
	      "expected an integer, got a string");
}

static void
test_getters(void **state)
{
	json_t *v = parse("{\"s\": \"str\", \"i\": -7, \"r\": 2.5, \"b\": false}");

	(void)state;
	assert_string_equal(jget_str(v, "s", "d"), "str");
	assert_string_equal(jget_str(v, "nope", "d"), "d");
	assert_null(jget_str(v, "nope", NULL));
	assert_int_equal(jget_int(v, "i", 1), -7);
	assert_int_equal(jget_int(v, "nope", 42), 42);
	assert_true(jget_num(v, "r", 0) == 2.5);
	assert_true(jget_num(v, "i", 0) == -7.0);
	assert_true(jget_num(v, "nope", 1.5) == 1.5);
	assert_int_equal(jget_bool(v, "b", 1), 0);
	assert_int_equal(jget_bool(v, "nope", 1), 1);
	json_decref(v);
}

static void
test_ranges(void **state)
{
	json_t *v = parse("{\"n\": 0, \"big\": 101, \"r\": 0.25, \"s\": \"x\", "
			  "\"t\": 20000000, \"z\": 0.0}");
	struct jerr err;

	(void)state;
	assert_int_equal(jcheck_int_range(v, "", "n", 0, 5, &err), 0);
	assert_int_equal(jcheck_int_range(v, "", "absent", 1, 5, &err), 0);
	assert_int_equal(jcheck_int_range(v, "", "big", 1, 100, &err), -1);
	assert_string_equal(err.path, "big");
	assert_string_equal(err.msg, "must be between 1 and 100");
	assert_int_equal(jcheck_int_range(v, "a[0]", "n", 1, 5, &err), -1);
	assert_string_equal(err.path, "a[0].n");
	assert_int_equal(jcheck_int_range(v, "", "s", 1, 5, &err), -1);
	assert_string_equal(err.msg, "expected an integer, got a string");

	assert_int_equal(jcheck_num_range(v, "", "r", 0, 1, &err), 0);
	assert_int_equal(jcheck_num_range(v, "", "n", 0, 1, &err), 0);
	assert_int_equal(jcheck_num_range(v, "", "r", 0.5, 1e7, &err), -1);
	assert_string_equal(err.path, "r");
	assert_string_equal(err.msg, "must be between 0.5 and 10000000");
	assert_int_equal(jcheck_num_range(v, "", "s", 0, 1, &err), -1);
	assert_string_equal(err.msg, "expected a number, got a string");

	assert_int_equal(jcheck_num_positive(v, "", "r", 1, &err), 0);
	assert_int_equal(jcheck_num_positive(v, "", "absent", 1, &err), 0);
	assert_int_equal(jcheck_num_positive(v, "", "z", 1e7, &err), -1);
	assert_string_equal(err.msg, "must be greater than 0 and at most 10000000");
	assert_int_equal(jcheck_num_positive(v, "", "n", 3600, &err), -1);
	assert_string_equal(err.path, "n");
	assert_int_equal(jcheck_num_positive(v, "", "t", 1e7, &err), -1);
	assert_string_equal(err.path, "t");
	json_decref(v);
}

static void
test_format(void **state)
{
	const char *text = "{\n  \"a\": {\"b\": [1,\n   2]}\n}";
	struct jpos *jp = jpos_build(text, strlen(text));
	struct jerr err;
	char out[512];

	(void)state;
	assert_non_null(jp);
	jerr_set(&err, "a.b[1]", "must be between %d and %d", 5, 9);
	assert_string_equal(jcheck_format(&err, "f.json", jp, out, sizeof(out)),
			    "f.json:3:4: a.b[1]: must be between 5 and 9");
	jerr_set(&err, "", "expected an object, got an array");
	jcheck_format(&err, "f.json", jp, out, sizeof(out));
	assert_string_equal(out, "f.json:1:1: expected an object, got an array");
	jerr_set(&err, "a", "missing required key \"c\"");
	jcheck_format(&err, NULL, jp, out, sizeof(out));
	assert_string_equal(out, "<input>:2:3: a: missing required key \"c\"");
	/* a path the text does not hold: the nearest enclosing value */
	jerr_set(&err, "a.b[7].x", "boom");
	jcheck_format(&err, "f.json", jp, out, sizeof(out));
	assert_string_equal(out, "f.json:2:9: a.b[7].x: boom");
	/* no index: no position */
	jerr_set(&err, "a.b", "boom");
	jcheck_format(&err, "f.json", NULL, out, sizeof(out));
	assert_string_equal(out, "f.json: a.b: boom");
	jerr_set(&err, "", "boom");
	jcheck_format(&err, "f.json", NULL, out, sizeof(out));
	assert_string_equal(out, "f.json: boom");
	/* truncation keeps a terminated string */
	jcheck_format(&err, "f.json", NULL, out, 5);
	assert_string_equal(out, "f.js");
	jpos_free(jp);
}

/* Write TEXT to a new temp file; its name goes to PATH. */
static void
temp_file(char *path, size_t n, const char *text)
{
	int fd;

	snprintf(path, n, "/tmp/test_jcheck.XXXXXX");
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(ft_write_all(fd, text, strlen(text)), 0);
	close(fd);
}

/* Load TEXT from a temp file: expect WANT (with the file name in place of
 * "%s") or success when WANT is NULL. */
static void
load(const char *text, const char *want)
{
	char path[64], out[512], expect[512];
	char *got_text = (char *)"unset";
	json_t *v;

	temp_file(path, sizeof(path), text);
	v = jcheck_load_file(path, &got_text, out, sizeof(out));
	unlink(path);
	if (want == NULL) {
		if (v == NULL)
			fail_msg("refused: %s", out);
		assert_string_equal(got_text, text);
		free(got_text);
		json_decref(v);
		return;
	}
	assert_null(v);
	assert_null(got_text);
	snprintf(expect, sizeof(expect), want, path);
	assert_string_equal(out, expect);
}

static void
test_load_file(void **state)
{
	(void)state;
	load("{\"a\": [1, 2]}\n", NULL);
	load("\"just a string\"", NULL);
	load("{\"a\": 1,\n  \"b\": 2,,\n}",
	     "%s:2:10: invalid JSON: string or '}' expected near ','");
	load("{\"a\": 1,\n \"a\": 2}",
	     "%s:2:4: invalid JSON: duplicate object key near '\"a\"'");
	load("", "%s:1:1: invalid JSON: unexpected token near end of file");
	load("{\"a\": 1", "%s:1:7: invalid JSON: '}' expected near end of file");
	/* columns count bytes, as jpos does: "é" is two */
	load("{\"\xc3\xa9\": tru}",
	     "%s:1:10: invalid JSON: invalid token near 'tru'");
}

static void
test_load_file_unreadable(void **state)
{
	char out[512];
	char *text = (char *)"unset";

	(void)state;
	assert_null(jcheck_load_file("/nonexistent/x.json", &text, out,
				     sizeof(out)));
	assert_null(text);
	assert_string_equal(out, "/nonexistent/x.json: cannot read: "
			    "No such file or directory");
	assert_null(jcheck_load_file("/tmp", NULL, out, sizeof(out)));
	assert_string_equal(out, "/tmp: cannot read: Is a directory");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_paths),
		cmocka_unit_test(test_type_names),
		cmocka_unit_test(test_object_ok),
		cmocka_unit_test(test_object_refusals),
		cmocka_unit_test(test_getters),
		cmocka_unit_test(test_ranges),
		cmocka_unit_test(test_format),
		cmocka_unit_test(test_load_file),
		cmocka_unit_test(test_load_file_unreadable),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

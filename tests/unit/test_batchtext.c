/* Unit tests of common/batchtext.c: a batch file's bytes cut into task
 * specs without printing them again, on one thread or several, and every
 * way a batch file can be wrong reported as "FILE:LINE:COL: KEY: MESSAGE"
 * (the same line `ftfarm check` and the master give). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "batchtext.h"
#include "util.h"

static struct ft_plugins pl;

static int
setup(void **state)
{
	char err[512];

	(void)state;
	return ft_plugins_load(&pl, FT_TEST_BINDIR "/tasks", err, sizeof(err));
}

static int
teardown(void **state)
{
	(void)state;
	ft_plugins_free(&pl);
	return 0;
}

/* Read TEXT with THREADS threads: 0 with BT, or -1 with ERR. */
static int
read_text(const char *text, int threads, struct batch_text *bt, char *err,
	  size_t n)
{
	return batch_text_read(bt, "b.json", ft_strdup(text), strlen(text),
			       &pl, threads, err, n);
}

static void
expect_error(const char *text, const char *want)
{
	struct batch_text bt;
	char err[512] = "";

	assert_int_equal(read_text(text, 1, &bt, err, sizeof(err)), -1);
	if (strstr(err, want) == NULL)
		fail_msg("for %s\n  got  \"%s\"\n  want \"%s\"", text, err, want);
	assert_null(bt.text);
	assert_null(bt.spans);
}

static void
test_spans_are_the_bytes(void **state)
{
	static const char text[] =
		"{\"name\": \"x\",\n \"tasks\": [\n"
		"  {\"type\": \"sleep\", \"seconds\": 0},\n"
		"  {\"type\": \"exec\", \"argv\": [\"sh\", \"-c\", \"echo ]}\\\"[\"],"
		" \"timeout\": 7.5} ,\n"
		"  {\"type\":\"exec\",\"argv\":[\"true\"],\"env\":{\"A\":\"{\"}}\n"
		" ]\n}\n";
	struct batch_text bt;
	char err[512];
	uint32_t len;
	const char *spec;

	(void)state;
	assert_int_equal(read_text(text, 1, &bt, err, sizeof(err)), 0);
	assert_string_equal(bt.name, "x");
	assert_null(bt.job);
	assert_int_equal(bt.ntasks, 3);
	spec = batch_text_spec(&bt, 0, &len);
	assert_int_equal(len, strlen("{\"type\": \"sleep\", \"seconds\": 0}"));
	assert_memory_equal(spec, "{\"type\": \"sleep\"", 16);
	spec = batch_text_spec(&bt, 1, &len);
	assert_true(spec[len - 1] == '}');
	assert_non_null(memmem(spec, len, "echo ]}\\\"[", 10));
	assert_true(bt.spans[1].timeout == 7.5);
	assert_true(bt.spans[0].timeout == 0);
	spec = batch_text_spec(&bt, 2, &len);
	assert_int_equal(len, strlen("{\"type\":\"exec\",\"argv\":[\"true\"],"
				     "\"env\":{\"A\":\"{\"}}"));
	batch_text_free(&bt);
}

static void
test_job_batch(void **state)
{
	struct batch_text bt;
	char err[512];
	char *text = ft_asprintf("{\"job\": {\"type\": \"wordcount\", "
				 "\"inputs\": [\"%s\"], \"output\": "
				 "\"/tmp/ftfarm-bt-out.txt\"}}",
				 FT_TEST_SRCDIR "/README.md");

	(void)state;
	assert_int_equal(read_text(text, 1, &bt, err, sizeof(err)), 0);
	assert_string_equal(bt.name, "batch");
	assert_non_null(bt.job);
	assert_int_equal(bt.ntasks, 0);
	batch_text_free(&bt);
	free(text);
}

static void
test_errors(void **state)
{
	(void)state;
	expect_error("", "b.json:1:1: invalid JSON");
	expect_error("[1]", "b.json:1:1: expected an object, got an array");
	expect_error("{\"tasks\": [\n{\"type\": \"sleep\"},]}",
		     "b.json:2:19: invalid JSON: unexpected token near ']'");
	expect_error("{\"tasks\": [{\"type\": \"sleep\"}]} x",
		     "invalid JSON: end of file expected");
	expect_error("{\"tasks\": [], \"tasks\": []}",
		     "invalid JSON: duplicate object key");
	expect_error("{\"tasks\": [{\"type\": \"sleep\"}], \"extra\": 1}",
		     "b.json:1:32: extra: unknown key");
	expect_error("{\"tasks\": \"x\"}",
		     "b.json:1:2: tasks: expected an array, got a string");
	expect_error("{\"tasks\": []}", "tasks: must hold at least one task");
	expect_error("{\"name\": 3, \"tasks\": [{\"type\": \"sleep\"}]}",
		     "name: expected a string, got an integer");
	expect_error("{}", "missing required key \"tasks\" (or \"job\")");
	expect_error("{\"tasks\": [\n  {\"type\": \"exec\",\n"
		     "   \"argv\": \"ls\"}]}",
		     "b.json:3:4: tasks[0].argv: expected an array of strings");
	expect_error("{\"tasks\": [{\"type\": \"nope\"}]}",
		     "tasks[0].type: unknown task type \"nope\"");
	expect_error("{\"tasks\": [{\"type\": \"sleep\", \"a\": 1, \"a\": 2}]}",
		     "b.json:1:40: invalid JSON: duplicate object key");
	expect_error("{\"tasks\": [{\"type\": \"sleep\"}], \"job\": "
		     "{\"type\": \"wordcount\"}}",
		     "a batch has \"tasks\" or a \"job\", not both");
	expect_error("{\"tasks\": [{\"type\": \"sleep\"}", "invalid JSON");
	expect_error("{\"tasks\": [{\"type\": \"sleep\", \"x\": \"\\q\"}]}",
		     "invalid JSON");
}

/* Keys every task may carry: "mem", and "stdout"/"stderr" for the types
 * whose outputs can go to files. */
static void
test_resource_keys(void **state)
{
	static const char good[] =
		"{\"tasks\": [{\"type\": \"exec\", \"argv\": [\"true\"], "
		"\"mem\": \"1.5G\", \"stdout\": \"/o/%b.%t.%a\", "
		"\"stderr\": \"e%%\"},\n{\"type\": \"sleep\", \"seconds\": 0, \"mem\": 4096}]}";
	struct batch_text bt;
	char err[512];

	(void)state;
	assert_int_equal(read_text(good, 1, &bt, err, sizeof(err)), 0);
	assert_int_equal(bt.spans[0].mem, 1536);
	assert_int_equal(bt.spans[1].mem, 1);
	batch_text_free(&bt);
	expect_error("{\"tasks\": [{\"type\": \"sleep\", \"mem\": \"2Q\"}]}",
		     "b.json:1:30: tasks[0].mem: must be bytes or a number with "
		     "K, M, G or T");
	expect_error("{\"tasks\": [{\"type\": \"sleep\", \"mem\": 0}]}",
		     "tasks[0].mem: must be bytes");
	expect_error("{\"tasks\": [{\"type\": \"sleep\", \"mem\": [1]}]}",
		     "tasks[0].mem: expected an amount of memory, got an array");
	expect_error("{\"tasks\": [{\"type\": \"sleep\", \"stdout\": \"x\"}]}",
		     "tasks[0].stdout: tasks of type \"sleep\" have no output "
		     "to write to a file");
	expect_error("{\"tasks\": [{\"type\": \"exec\", \"argv\": [\"true\"], "
		     "\"stderr\": \"a/%x\"}]}",
		     "tasks[0].stderr: \"%x\" is no placeholder");
	expect_error("{\"tasks\": [{\"type\": \"exec\", \"argv\": [\"true\"], "
		     "\"stdout\": 3}]}",
		     "tasks[0].stdout: expected a path, got an integer");
}

/* A big batch on several threads: the first bad task is the one told. */
static void
test_threads_report_the_first(void **state)
{
	struct ft_buf b = { 0 };
	struct batch_text bt;
	char err[512];
	uint32_t i, n = 50000;

	(void)state;
	ft_buf_adds(&b, "{\"tasks\": [");
	for (i = 0; i < n; i++) {
		if (i)
			ft_buf_adds(&b, ",\n");
		if (i == 30001 || i == 45000)
			ft_buf_adds(&b, "{\"type\": \"sleep\", \"seconds\": -1}");
		else
			ft_buf_printf(&b, "{\"type\": \"sleep\", \"seconds\": 0,"
				      " \"timeout\": %u}", i + 1);
	}
	ft_buf_adds(&b, "]}");
	assert_int_equal(batch_text_read(&bt, "big.json", b.data, b.len, &pl,
					 4, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "big.json:30002:"));
	assert_non_null(strstr(err, "tasks[30001].seconds"));

	b = (struct ft_buf){ 0 };
	ft_buf_adds(&b, "{\"tasks\": [");
	for (i = 0; i < n; i++)
		ft_buf_printf(&b, "%s{\"type\":\"sleep\",\"seconds\":0,"
			      "\"timeout\":%u}", i ? "," : "", i + 1);
	ft_buf_adds(&b, "]}");
	assert_int_equal(batch_text_read(&bt, "big.json", b.data, b.len, &pl,
					 4, err, sizeof(err)), 0);
	assert_int_equal(bt.ntasks, n);
	for (i = 0; i < n; i += 997)
		assert_true(bt.spans[i].timeout == i + 1);
	batch_text_free(&bt);
}

/* Tasks of the same text are checked once and need alike; a task of
 * the same length but other bytes after them is checked on its own. */
static void
test_same_tasks_checked_alike(void **state)
{
	static const char good[] =
		"{\"type\": \"sleep\", \"seconds\": 10, \"cpus\": 2, "
		"\"timeout\": 30}";
	static const char bad[] =
		"{\"type\": \"sleep\", \"seconds\": -1, \"cpus\": 2, "
		"\"timeout\": 30}";
	struct ft_buf b = { 0 };
	struct batch_text bt;
	char err[512];
	uint32_t i, n = 5000;

	(void)state;
	assert_int_equal(strlen(good), strlen(bad));
	ft_buf_adds(&b, "{\"tasks\": [");
	for (i = 0; i < n; i++)
		ft_buf_printf(&b, "%s\n%s", i ? "," : "", good);
	ft_buf_adds(&b, "]}");
	assert_int_equal(batch_text_read(&bt, "same.json", b.data, b.len, &pl,
					 2, err, sizeof(err)), 0);
	assert_int_equal(bt.ntasks, n);
	for (i = 0; i < n; i++) {
		assert_int_equal(bt.spans[i].cpus, 2);
		assert_true(bt.spans[i].timeout == 30);
		assert_int_equal(bt.spans[i].kind, bt.spans[0].kind);
	}
	batch_text_free(&bt);

	b = (struct ft_buf){ 0 };
	ft_buf_adds(&b, "{\"tasks\": [");
	for (i = 0; i < n; i++)
		ft_buf_printf(&b, "%s\n%s", i ? "," : "",
			      i == 4321 ? bad : good);
	ft_buf_adds(&b, "]}");
	assert_int_equal(batch_text_read(&bt, "same.json", b.data, b.len, &pl,
					 2, err, sizeof(err)), -1);
	if (strstr(err, "same.json:4323:") == NULL ||
	    strstr(err, "tasks[4321].seconds") == NULL)
		fail_msg("got \"%s\"", err);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_spans_are_the_bytes),
		cmocka_unit_test(test_job_batch),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_resource_keys),
		cmocka_unit_test(test_threads_report_the_first),
		cmocka_unit_test(test_same_tasks_checked_alike),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}

/* Unit tests of master/child.c: a watched child's exit status and output,
 * its working directory, a program that cannot be started, the deadline
 * that kills it (and what it left in its session), and an environment
 * without IPMI_PASSWORD.  The real libev loop runs each. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <ev.h>

#include "child.h"
#include "util.h"

struct outcome {
	int done;
	struct child_result r;
};

static void
on_done(void *arg, const struct child_result *r)
{
	struct outcome *o = arg;

	o->done++;
	o->r = *r;
	ev_break(EV_DEFAULT, EVBREAK_ALL);
}

/* Run ARGV in DIR with DEADLINE; its outcome. */
static struct outcome
run(char *const argv[], const char *dir, double deadline)
{
	struct outcome o = { 0 };

	child_start(EV_DEFAULT, argv, dir, deadline, on_done, &o);
	assert_int_equal(o.done, 0);		/* never from inside start */
	ev_run(EV_DEFAULT, 0);
	assert_int_equal(o.done, 1);
	return o;
}

static void
test_exit_and_output(void **state)
{
	char *argv[] = { "sh", "-c", "echo out; echo err >&2; pwd; exit 3",
			 NULL };
	struct outcome o;
	char line[256];

	(void)state;
	o = run(argv, "/tmp", 10);
	assert_true(o.r.started);
	assert_int_equal(o.r.exit, 3);
	assert_int_equal(o.r.signal, 0);
	assert_false(o.r.timed_out);
	assert_string_equal(o.r.out, "out\nerr\n/tmp\n");
	child_describe(&o.r, line, sizeof(line));
	assert_string_equal(line, "exit 3: out");
}

static void
test_cannot_start(void **state)
{
	char *argv[] = { "ftfarm-no-such-program", NULL };
	struct outcome o;
	char line[256];

	(void)state;
	o = run(argv, NULL, 10);
	assert_false(o.r.started);
	child_describe(&o.r, line, sizeof(line));
	assert_string_equal(line, "cannot run: No such file or directory");
}

/* Past its deadline the child is killed, and so is what it started in
 * its session; stdin is /dev/null (read returns at once). */
static void
test_deadline(void **state)
{
	char pidfile[] = "/tmp/ftfarm-child-unit-XXXXXX";
	char script[256];
	char *argv[] = { "sh", "-c", script, NULL };
	struct outcome o;
	double t0 = ft_now();
	char *text;
	int fd = mkstemp(pidfile);

	(void)state;
	assert_true(fd >= 0);
	close(fd);
	snprintf(script, sizeof(script), "read x; sleep 60 & echo $! > %s; "
		 "sleep 60", pidfile);
	o = run(argv, NULL, 0.5);
	assert_true(o.r.timed_out);
	assert_int_equal(o.r.exit, -1);
	assert_int_equal(o.r.signal, 15);
	assert_true(ft_now() - t0 < 5);
	text = ft_read_file(pidfile, NULL);
	assert_non_null(text);
	/* A signal is delivered when the process next runs: give it a
	 * moment. */
	while (ft_pid_alive((pid_t)atoi(text)) && ft_now() - t0 < 5)
		ft_sleep(0.01);
	assert_false(ft_pid_alive((pid_t)atoi(text)));
	free(text);
	unlink(pidfile);
}

static void
test_no_password_in_environment(void **state)
{
	char *argv[] = { "sh", "-c", "echo \"[$IPMI_PASSWORD][$KEEP]\"", NULL };
	struct outcome o;

	(void)state;
	setenv("IPMI_PASSWORD", "secret", 1);
	setenv("KEEP", "kept", 1);
	o = run(argv, NULL, 10);
	unsetenv("IPMI_PASSWORD");
	assert_string_equal(o.r.out, "[][kept]\n");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_exit_and_output),
		cmocka_unit_test(test_cannot_start),
		cmocka_unit_test(test_deadline),
		cmocka_unit_test(test_no_password_in_environment),
	};

	ev_default_loop(0);
	return cmocka_run_group_tests(tests, NULL, NULL);
}

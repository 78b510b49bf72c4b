/*
 * Unit tests of the exec and sleep task plugins, loaded as the worker loads
 * them (dlopen of FT_TEST_BINDIR/tasks/NAME.so) and run against real
 * processes.
 *
 * FT_TEST_TIME_SCALE (a number, default 1) multiplies every time limit, for
 * runs under valgrind.
 *
 * The canceller thread is a C11 thrd_t, not a pthread: <pthread.h> pulls in
 * <sched.h>, which -Imaster resolves to master/sched.h.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <threads.h>
#include <unistd.h>

#include <cmocka.h>

#include "plugin.h"
#include "util.h"

#ifndef FT_TEST_BINDIR
#error "build with -DFT_TEST_BINDIR='\"/abs/path/bin\"'"
#endif

#define MB (1024 * 1024)

static void *exec_handle, *sleep_handle;
static const struct ft_plugin *exec_pl, *sleep_pl;

/* One run of a task. */
struct run {
	struct ft_result res;
	int rc;			/* run()'s return */
	double elapsed;		/* seconds run() took */
};

/* Time limits are multiplied by this (FT_TEST_TIME_SCALE). */
static double
scaled(double seconds)
{
	const char *s = getenv("FT_TEST_TIME_SCALE");
	double k = s ? atof(s) : 1;

	return seconds * (k > 0 ? k : 1);
}

static const struct ft_plugin *
load(const char *name, void **handle)
{
	char path[PATH_MAX];
	ft_plugin_fn fn;

	snprintf(path, sizeof(path), "%s/tasks/%s.so", FT_TEST_BINDIR, name);
	*handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (*handle == NULL)
		fail_msg("dlopen %s: %s", path, dlerror());
	*(void **)&fn = dlsym(*handle, FT_PLUGIN_SYMBOL);
	if (fn == NULL)
		fail_msg("%s: no %s", path, FT_PLUGIN_SYMBOL);
	return fn();
}

/* Load both plugins.  The test process becomes a child subreaper, so that
 * the orphans of a killed task come back to it and exec can reap them
 * (PID 1 of a container may never do it). */
static int
setup(void **state)
{
	(void)state;
	exec_pl = load("exec", &exec_handle);
	sleep_pl = load("sleep", &sleep_handle);
	if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0)
		fail_msg("PR_SET_CHILD_SUBREAPER: %s", strerror(errno));
	return 0;
}

static int
teardown(void **state)
{
	(void)state;
	dlclose(exec_handle);
	dlclose(sleep_handle);
	return 0;
}

static json_t *
parse(const char *text)
{
	json_error_t je;
	json_t *v = json_loads(text, JSON_ALLOW_NUL, &je);

	if (v == NULL)
		fail_msg("bad test JSON: %s: %s", text, je.text);
	return v;
}

/* The cancel descriptor run_spec hands the plugin (0: none). */
static int cancel_fd;

/* Validate SPEC with PL and run it, keeping CAP bytes of each output and
 * watching CANCEL (NULL: never cancelled).  Takes SPEC's reference. */
static void
run_spec(const struct ft_plugin *pl, json_t *spec, size_t cap,
	 const volatile int *cancel, struct run *r)
{
	static const volatile int no_cancel;
	struct ft_task task = { .id = 7, .attempt = 1, .spec = spec,
				.cancel = cancel ? cancel : &no_cancel,
				.output_cap = cap, .cancel_fd = cancel_fd };
	struct jerr err = { "", "" };
	double t0;

	if (spec == NULL)
		fail_msg("bad test spec");
	if (pl->validate(spec, "tasks[7]", &err) != 0)
		fail_msg("refused: %s: %s", err.path, err.msg);
	memset(r, 0, sizeof(*r));
	t0 = ft_now();
	r->rc = pl->run(&task, &r->res);
	r->elapsed = ft_now() - t0;
	json_decref(spec);
}

static void
run_free(struct run *r)
{
	free(r->res.out);
	free(r->res.err);
	free(r->res.value);
}

/* An exec task running the shell script SCRIPT. */
static json_t *
sh_task(const char *script)
{
	return json_pack("{s:s, s:[s,s,s]}", "type", "exec",
			 "argv", "sh", "-c", script);
}

static void
assert_failed(const struct run *r, int exit_code, const char *reason)
{
	assert_int_equal(r->rc, 0);
	assert_int_equal(r->res.ok, 0);
	assert_int_equal(r->res.exit_code, exit_code);
	assert_string_equal(r->res.reason, reason);
}

static void
assert_ok(const struct run *r)
{
	if (r->rc != 0 || !r->res.ok)
		fail_msg("task failed: rc %d, reason \"%s\", stderr \"%.*s\"",
			 r->rc, r->res.reason, (int)r->res.err_len,
			 r->res.err ? r->res.err : "");
	assert_int_equal(r->res.exit_code, 0);
}

static void
assert_bytes(const char *got, size_t got_len, const char *want,
	     size_t want_len)
{
	assert_int_equal(got_len, want_len);
	if (want_len > 0)
		assert_memory_equal(got, want, want_len);
}

/* ---- plugin identity ---- */

static void
test_plugin_identity(void **state)
{
	(void)state;
	assert_int_equal(exec_pl->abi, FT_PLUGIN_ABI);
	assert_string_equal(exec_pl->name, "exec");
	assert_int_equal(sleep_pl->abi, FT_PLUGIN_ABI);
	assert_string_equal(sleep_pl->name, "sleep");
}

/* ---- exec: outputs ---- */

static void
test_exec_output_exact(void **state)
{
	struct run r;

	(void)state;
	run_spec(exec_pl, sh_task("printf 'a\\000b\\377c\\n'; "
				  "printf 'e\\001\\000r' >&2"), 4096, NULL, &r);
	assert_ok(&r);
	assert_bytes(r.res.out, r.res.out_len, "a\0b\377c\n", 6);
	assert_bytes(r.res.err, r.res.err_len, "e\1\0r", 4);
	assert_string_equal(r.res.reason, "");
	run_free(&r);
}

static void
test_exec_argv_exact(void **state)
{
	struct run r;

	(void)state;
	run_spec(exec_pl, parse("{\"type\": \"exec\", \"argv\": [\"printf\", "
				"\"%s|\", \"a b\", \"\", \"*\", \"$HOME\"]}"),
		 4096, NULL, &r);
	assert_ok(&r);
	assert_bytes(r.res.out, r.res.out_len, "a b||*|$HOME|", 13);
	assert_null(r.res.err);
	assert_int_equal(r.res.err_len, 0);
	run_free(&r);
}

/* The first CAP bytes of an endless repetition of PATTERN. */
static void
assert_pattern(const char *got, size_t len, const char *pattern)
{
	size_t i, n = strlen(pattern);

	for (i = 0; i < len; i++)
		if (got[i] != pattern[i % n])
			fail_msg("byte %zu: got 0x%02x", i,
				 (unsigned char)got[i]);
}

static void
test_exec_output_cap(void **state)
{
	struct run r;

	(void)state;
	run_spec(exec_pl, sh_task("yes 0123456789abcdef | head -c 1048576; "
				  "yes xyz | head -c 1048576 >&2"),
		 1000, NULL, &r);
	assert_ok(&r);
	assert_true(r.elapsed < scaled(5));
	assert_int_equal(r.res.out_len, 1000);
	assert_pattern(r.res.out, r.res.out_len, "0123456789abcdef\n");
	assert_int_equal(r.res.err_len, 1000);
	assert_pattern(r.res.err, r.res.err_len, "xyz\n");
	run_free(&r);
}

static void
test_exec_output_cap_zero(void **state)
{
	struct run r;

	(void)state;
	run_spec(exec_pl, sh_task("head -c 1048576 /dev/zero"), 0, NULL, &r);
	assert_ok(&r);
	assert_null(r.res.out);
	assert_int_equal(r.res.out_len, 0);
	run_free(&r);
}

static void
test_exec_output_large(void **state)
{
	struct run r;

	(void)state;
	run_spec(exec_pl, sh_task("yes 0123456789abcdef | head -c 1048576"),
		 2 * MB, NULL, &r);
	assert_ok(&r);
	assert_int_equal(r.res.out_len, MB);
	assert_pattern(r.res.out, r.res.out_len, "0123456789abcdef\n");
	run_free(&r);
}

/* ---- exec: how it ends ---- */

static void
test_exec_exit_code(void **state)
{
	struct run r;

	(void)state;
	run_spec(exec_pl, sh_task("echo partial; exit 3"), 4096, NULL, &r);
	assert_failed(&r, 3, "exit 3");
	assert_bytes(r.res.out, r.res.out_len, "partial\n", 8);
	run_free(&r);
}

static void
test_exec_signal(void **state)
{
	struct run r;

	(void)state;
	run_spec(exec_pl, sh_task("kill -TERM $$"), 4096, NULL, &r);
	assert_failed(&r, 128 + SIGTERM, "signal 15");
	assert_int_equal(r.res.signal, SIGTERM);
	run_free(&r);
	/* An exit status of 137 is not a kill: the field says so. */
	run_spec(exec_pl, sh_task("exit 137"), 4096, NULL, &r);
	assert_failed(&r, 137, "exit 137");
	assert_int_equal(r.res.signal, 0);
	run_free(&r);
}

static void
test_exec_not_found(void **state)
{
	struct run r;

	(void)state;
	run_spec(exec_pl, parse("{\"type\": \"exec\", "
				"\"argv\": [\"ftfarm-no-such-command\"]}"),
		 4096, NULL, &r);
	assert_failed(&r, 127, "cannot execute ftfarm-no-such-command: "
		      "No such file or directory");
	assert_null(r.res.out);
	run_free(&r);
}

static void
test_exec_not_executable(void **state)
{
	struct run r;

	(void)state;
	run_spec(exec_pl, parse("{\"type\": \"exec\", "
				"\"argv\": [\"/etc/passwd\"]}"),
		 4096, NULL, &r);
	assert_failed(&r, 127, "cannot execute /etc/passwd: "
		      "Permission denied");
	run_free(&r);
}

/* ---- exec: environment, directory, input ---- */

static void
test_exec_env(void **state)
{
	struct run r;

	(void)state;
	setenv("FT_TEST_OLD", "old", 1);
	setenv("FT_TEST_KEPT", "kept", 1);
	run_spec(exec_pl, json_pack("{s:s, s:[s,s,s], s:{s:s, s:s}}",
				    "type", "exec", "argv", "sh", "-c",
				    "printf '%s|%s|%s|' \"$FT_TEST_OLD\" "
				    "\"$FT_TEST_NEW\" \"$FT_TEST_KEPT\"; "
				    "env | grep -c '^FT_TEST_OLD='",
				    "env", "FT_TEST_OLD", "new",
				    "FT_TEST_NEW", "a b=c"),
		 4096, NULL, &r);
	assert_ok(&r);
	assert_string_equal(r.res.out, "new|a b=c|kept|1\n");
	run_free(&r);
	unsetenv("FT_TEST_OLD");
	unsetenv("FT_TEST_KEPT");
}

/* A new temporary directory (a new string, resolved). */
static char *
temp_dir(void)
{
	char tmpl[] = "/tmp/ft-test-plugins-XXXXXX";
	char *dir;

	if (mkdtemp(tmpl) == NULL)
		fail_msg("mkdtemp: %s", strerror(errno));
	dir = realpath(tmpl, NULL);
	assert_non_null(dir);
	return dir;
}

/* The command is looked up in the PATH its "env" gives it. */
static void
test_exec_env_path(void **state)
{
	char *dir = temp_dir();
	char *script = ft_asprintf("%s/ft-hello", dir);
	static const char text[] = "#!/bin/sh\necho hello from PATH\n";
	struct run r;
	FILE *f;

	(void)state;
	f = fopen(script, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	assert_int_equal(chmod(script, 0755), 0);
	run_spec(exec_pl, json_pack("{s:s, s:[s], s:{s:s}}", "type", "exec",
				    "argv", "ft-hello", "env", "PATH", dir),
		 4096, NULL, &r);
	assert_ok(&r);
	assert_string_equal(r.res.out, "hello from PATH\n");
	run_free(&r);
	unlink(script);
	rmdir(dir);
	free(script);
	free(dir);
}

static void
test_exec_cwd(void **state)
{
	char *dir = temp_dir();
	char *want = ft_asprintf("%s\n", dir);
	struct run r;

	(void)state;
	run_spec(exec_pl, json_pack("{s:s, s:[s], s:s}", "type", "exec",
				    "argv", "pwd", "cwd", dir),
		 4096, NULL, &r);
	assert_ok(&r);
	assert_string_equal(r.res.out, want);
	run_free(&r);
	rmdir(dir);
	free(want);
	free(dir);
}

static void
test_exec_cwd_missing(void **state)
{
	struct run r;

	(void)state;
	run_spec(exec_pl, parse("{\"type\": \"exec\", \"argv\": [\"pwd\"], "
				"\"cwd\": \"/nonexistent/ftfarm\"}"),
		 4096, NULL, &r);
	assert_failed(&r, 127, "cannot chdir to /nonexistent/ftfarm: "
		      "No such file or directory");
	run_free(&r);
}

static void
test_exec_stdin(void **state)
{
	struct run r;

	(void)state;
	run_spec(exec_pl, parse("{\"type\": \"exec\", \"argv\": [\"cat\"], "
				"\"stdin\": \"line1\\nli\\u0000ne2\"}"),
		 4096, NULL, &r);
	assert_ok(&r);
	assert_bytes(r.res.out, r.res.out_len, "line1\nli\0ne2", 12);
	run_free(&r);
}

static void
test_exec_stdin_absent_is_devnull(void **state)
{
	struct run r;

	(void)state;
	run_spec(exec_pl, sh_task("cat; readlink /proc/self/fd/0"), 4096,
		 NULL, &r);
	assert_ok(&r);
	assert_string_equal(r.res.out, "/dev/null\n");
	run_free(&r);
}

/* A megabyte in and out at once: neither side may block the other. */
static void
test_exec_stdin_large(void **state)
{
	char *data = ft_malloc(MB);
	struct run r;
	size_t i;

	(void)state;
	for (i = 0; i < MB; i++)
		data[i] = (char)(i % 61 == 60 ? '\n' :
				 ' ' + (i * 7 + i / 251) % 95);
	run_spec(exec_pl, json_pack("{s:s, s:[s], s:s%}", "type", "exec",
				    "argv", "cat", "stdin", data, (size_t)MB),
		 2 * MB, NULL, &r);
	assert_ok(&r);
	assert_bytes(r.res.out, r.res.out_len, data, MB);
	run_free(&r);
	free(data);
}

/* A child that does not read its input must not kill us with SIGPIPE. */
static void
test_exec_stdin_unread(void **state)
{
	char *data = ft_calloc(1, MB);
	struct run r;

	(void)state;
	run_spec(exec_pl, json_pack("{s:s, s:[s,s,s], s:s%}", "type", "exec",
				    "argv", "sh", "-c", "exec <&-; echo done",
				    "stdin", data, (size_t)MB),
		 4096, NULL, &r);
	assert_ok(&r);
	assert_string_equal(r.res.out, "done\n");
	run_free(&r);
	free(data);
}

/* ---- exec: timeout and cancel ---- */

/* Is any process of group PGID left? */
static int
group_alive(pid_t pgid)
{
	return kill(-pgid, 0) == 0 || errno != ESRCH;
}

static void
test_exec_timeout_kills_group(void **state)
{
	struct run r;
	long pgid;

	(void)state;
	run_spec(exec_pl, json_pack("{s:s, s:[s,s,s], s:f}", "type", "exec",
				    "argv", "sh", "-c",
				    "echo $$; sleep 100 & sleep 100",
				    "timeout", 0.5),
		 4096, NULL, &r);
	assert_failed(&r, -1, "timeout after 0.5 s");
	assert_true(r.elapsed >= 0.5);
	assert_true(r.elapsed < scaled(2));
	assert_non_null(r.res.out);
	pgid = strtol(r.res.out, NULL, 10);
	assert_true(pgid > 1);
	assert_false(group_alive((pid_t)pgid));
	run_free(&r);
}

/* Whatever the command left behind in its group dies with it. */
static void
test_exec_leftovers_killed(void **state)
{
	struct run r;
	long pgid;

	(void)state;
	run_spec(exec_pl, sh_task("echo $$; sleep 100 &"), 4096, NULL, &r);
	assert_ok(&r);
	assert_true(r.elapsed < scaled(2));
	pgid = strtol(r.res.out, NULL, 10);
	assert_true(pgid > 1);
	assert_false(group_alive((pid_t)pgid));
	run_free(&r);
}

/* A process that left the group keeps the output pipe open: the task
 * still ends soon after its command does. */
static void
test_exec_escaped_process(void **state)
{
	struct run r;
	pid_t pid;

	(void)state;
	/* the pause lets setsid run before the group is killed */
	run_spec(exec_pl, sh_task("setsid sleep 30 & echo $!; sleep 0.3"),
		 4096, NULL, &r);
	assert_ok(&r);
	assert_true(r.elapsed < scaled(1));
	pid = (pid_t)strtol(r.res.out, NULL, 10);
	assert_true(pid > 1);
	/* an orphan, so our child (we are a subreaper) */
	assert_int_equal(kill(pid, SIGKILL), 0);
	assert_int_equal(waitpid(pid, NULL, 0), pid);
	run_free(&r);
}

/* Sets *flag after delay seconds, noting when, and rings cancel_fd when
 * there is one. */
struct canceller {
	volatile int flag;
	double delay;
	double at;
	thrd_t thread;
};

static int
cancel_later(void *arg)
{
	struct canceller *c = arg;

	uint64_t one = 1;

	ft_sleep(c->delay);
	c->at = ft_now();
	c->flag = 1;
	if (cancel_fd > 0 && write(cancel_fd, &one, sizeof(one)) < 0)
		return 1;
	return 0;
}

/* Run SPEC with PL, cancelled from another thread after DELAY seconds.
 * Returns how long run() went on after the cancel. */
static double
run_cancelled(const struct ft_plugin *pl, json_t *spec, double delay,
	      struct run *r)
{
	struct canceller c = { .delay = delay };
	double end;

	assert_int_equal(thrd_create(&c.thread, cancel_later, &c),
			 thrd_success);
	run_spec(pl, spec, 4096, &c.flag, r);
	end = ft_now();
	thrd_join(c.thread, NULL);
	assert_true(c.at > 0);
	return end - c.at;
}

static void
test_exec_cancel(void **state)
{
	struct run r;
	double after;

	(void)state;
	after = run_cancelled(exec_pl,
			      sh_task("echo $$; sleep 100 & sleep 100"), 0.1,
			      &r);
	assert_failed(&r, -1, "cancelled");
	assert_true(after < scaled(0.2));
	assert_false(group_alive((pid_t)strtol(r.res.out, NULL, 10)));
	run_free(&r);
}

/* With a cancel descriptor exec sleeps until the command ends or the
 * descriptor rings: the cancel is seen at once, not at a look now and
 * then (the command would otherwise run its 3 s). */
static void
test_exec_cancel_fd(void **state)
{
	struct run r;
	double after;

	(void)state;
	cancel_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	assert_true(cancel_fd > 0);
	after = run_cancelled(exec_pl, sh_task("sleep 3"), 0.1, &r);
	close(cancel_fd);
	cancel_fd = 0;
	assert_failed(&r, -1, "cancelled");
	assert_true(after < scaled(0.2));
	run_free(&r);
}

/* ---- exec: descriptors ---- */

static int
count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	assert_non_null(d);
	while ((e = readdir(d)) != NULL)
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

static void
test_exec_no_fd_leak(void **state)
{
	const char *specs[] = {
		"{\"type\": \"exec\", \"argv\": [\"echo\", \"hi\"]}",
		"{\"type\": \"exec\", \"argv\": [\"ftfarm-no-such-command\"]}",
		"{\"type\": \"exec\", \"argv\": [\"cat\"], \"stdin\": \"x\"}",
		"{\"type\": \"exec\", \"argv\": [\"pwd\"], "
		"\"cwd\": \"/nonexistent\"}",
		"{\"type\": \"exec\", \"argv\": [\"sleep\", \"10\"], "
		"\"timeout\": 0.01}",
	};
	int before = count_fds(), i;
	struct run r;

	(void)state;
	for (i = 0; i < 100; i++) {
		run_spec(exec_pl, parse(specs[i % FT_ARRAY_LEN(specs)]), 4096,
			 NULL, &r);
		assert_int_equal(r.rc, 0);
		run_free(&r);
	}
	assert_int_equal(count_fds(), before);
	/* and no zombie: every child was reaped */
	assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);
	assert_int_equal(errno, ECHILD);
}

/* The command sees 0, 1 and 2 only, even of descriptors we opened without
 * close-on-exec (ls adds 3, its view of the directory). */
static void
test_exec_fds_closed_in_child(void **state)
{
	int fd = open("/dev/null", O_RDONLY);
	int p[2];
	struct run r;

	(void)state;
	assert_true(fd >= 0);
	assert_int_equal(pipe(p), 0);
	run_spec(exec_pl, parse("{\"type\": \"exec\", "
				"\"argv\": [\"ls\", \"/proc/self/fd\"]}"),
		 4096, NULL, &r);
	assert_ok(&r);
	assert_string_equal(r.res.out, "0\n1\n2\n3\n");
	run_free(&r);
	close(fd);
	close(p[0]);
	close(p[1]);
}

/* Signals the worker ignores or blocks are back to normal in the command. */
static void
test_exec_signals_reset(void **state)
{
	struct sigaction ign = { .sa_handler = SIG_IGN }, old;
	sigset_t set, oldset;
	struct run r;

	(void)state;
	sigaction(SIGUSR1, &ign, &old);
	sigemptyset(&set);
	sigaddset(&set, SIGUSR2);
	pthread_sigmask(SIG_BLOCK, &set, &oldset);
	run_spec(exec_pl, sh_task("grep -E '^Sig(Blk|Ign)' /proc/self/status"),
		 4096, NULL, &r);
	sigaction(SIGUSR1, &old, NULL);
	pthread_sigmask(SIG_SETMASK, &oldset, NULL);
	assert_ok(&r);
	assert_string_equal(r.res.out, "SigBlk:\t0000000000000000\n"
			    "SigIgn:\t0000000000000000\n");
	run_free(&r);
}

/* ---- exec: validation ---- */

struct vcase {
	const char *json;
	const char *path;	/* NULL: accepted */
	const char *msg;
};

static void
check_cases(const struct ft_plugin *pl, const struct vcase *c, size_t n)
{
	struct jerr err;
	json_t *v;
	size_t i;
	int rc;

	for (i = 0; i < n; i++) {
		memset(&err, 0, sizeof(err));
		v = parse(c[i].json);
		rc = pl->validate(v, "tasks[3]", &err);
		json_decref(v);
		if (c[i].path == NULL && rc != 0)
			fail_msg("%s: refused: %s: %s", c[i].json, err.path,
				 err.msg);
		if (c[i].path == NULL)
			continue;
		if (rc != -1)
			fail_msg("%s: accepted", c[i].json);
		if (strcmp(err.path, c[i].path) || strcmp(err.msg, c[i].msg))
			fail_msg("%s: got \"%s: %s\", want \"%s: %s\"",
				 c[i].json, err.path, err.msg, c[i].path,
				 c[i].msg);
	}
}

static void
test_exec_validate(void **state)
{
	static const struct vcase cases[] = {
		{ "{\"type\": \"exec\", \"argv\": [\"ls\", \"-l\"], "
		  "\"env\": {\"A\": \"1\"}, \"cwd\": \"/\", \"timeout\": 0.5, "
		  "\"stdin\": \"x\\u0000y\"}", NULL, NULL },
		{ "{\"type\": \"exec\"}",
		  "tasks[3]", "missing required key \"argv\"" },
		{ "{\"type\": \"exec\", \"argv\": []}",
		  "tasks[3].argv", "must not be empty" },
		{ "{\"type\": \"exec\", \"argv\": \"ls\"}",
		  "tasks[3].argv",
		  "expected an array of strings, got a string" },
		{ "{\"type\": \"exec\", \"argv\": [\"ls\", 1]}",
		  "tasks[3].argv[1]", "expected a string, got an integer" },
		{ "{\"type\": \"exec\", \"argv\": [\"\"]}",
		  "tasks[3].argv[0]", "must not be empty" },
		{ "{\"type\": \"exec\", \"argv\": [\"l\\u0000s\"]}",
		  "tasks[3].argv[0]", "must not contain a NUL byte" },
		{ "{\"type\": \"exec\", \"argv\": [\"ls\"], \"shell\": true}",
		  "tasks[3].shell", "unknown key" },
		{ "{\"type\": \"exec\", \"argv\": [\"ls\"], "
		  "\"env\": {\"A\": \"1\", \"B\": 2}}",
		  "tasks[3].env.B", "expected a string, got an integer" },
		{ "{\"type\": \"exec\", \"argv\": [\"ls\"], "
		  "\"env\": [\"A=1\"]}",
		  "tasks[3].env", "expected an object, got an array" },
		{ "{\"type\": \"exec\", \"argv\": [\"ls\"], "
		  "\"env\": {\"A=B\": \"1\"}}",
		  "tasks[3].env.A=B", "is not a valid variable name" },
		{ "{\"type\": \"exec\", \"argv\": [\"ls\"], \"timeout\": -1}",
		  "tasks[3].timeout",
		  "must be greater than 0 and at most 10000000" },
		{ "{\"type\": \"exec\", \"argv\": [\"ls\"], \"timeout\": 0}",
		  "tasks[3].timeout",
		  "must be greater than 0 and at most 10000000" },
		{ "{\"type\": \"exec\", \"argv\": [\"ls\"], "
		  "\"timeout\": \"5\"}",
		  "tasks[3].timeout", "expected a number, got a string" },
		{ "{\"type\": \"exec\", \"argv\": [\"ls\"], \"cwd\": \"\"}",
		  "tasks[3].cwd", "must not be empty" },
		{ "{\"type\": \"exec\", \"argv\": [\"ls\"], \"stdin\": 5}",
		  "tasks[3].stdin", "expected a string, got an integer" },
	};

	(void)state;
	check_cases(exec_pl, cases, FT_ARRAY_LEN(cases));
}

/* ---- sleep ---- */

static void
test_sleep_validate(void **state)
{
	static const struct vcase cases[] = {
		{ "{\"type\": \"sleep\", \"seconds\": 0}", NULL, NULL },
		{ "{\"type\": \"sleep\", \"seconds\": 1.5, \"timeout\": 3}",
		  NULL, NULL },
		{ "{\"type\": \"sleep\"}",
		  "tasks[3]", "missing required key \"seconds\"" },
		{ "{\"type\": \"sleep\", \"seconds\": -1}",
		  "tasks[3].seconds", "must be between 0 and 1000000" },
		{ "{\"type\": \"sleep\", \"seconds\": 1000001}",
		  "tasks[3].seconds", "must be between 0 and 1000000" },
		{ "{\"type\": \"sleep\", \"seconds\": \"1\"}",
		  "tasks[3].seconds", "expected a number, got a string" },
		{ "{\"type\": \"sleep\", \"seconds\": 1, \"timeout\": 0}",
		  "tasks[3].timeout",
		  "must be greater than 0 and at most 10000000" },
		{ "{\"type\": \"sleep\", \"seconds\": 1, \"argv\": []}",
		  "tasks[3].argv", "unknown key" },
	};

	(void)state;
	check_cases(sleep_pl, cases, FT_ARRAY_LEN(cases));
}

/* The no-op task of the benchmarks must cost next to nothing.  A sanity
 * check, not a benchmark. */
static void
test_sleep_zero_fast(void **state)
{
	json_t *spec = parse("{\"type\": \"sleep\", \"seconds\": 0}");
	static const volatile int no_cancel;
	struct ft_task task = { .attempt = 1, .spec = spec,
				.cancel = &no_cancel, .output_cap = 4096 };
	struct ft_result res;
	double t0 = ft_now();
	int i, bad = 0;

	(void)state;
	for (i = 0; i < 1000000; i++) {
		memset(&res, 0, sizeof(res));
		bad += sleep_pl->run(&task, &res) != 0 || !res.ok;
	}
	assert_int_equal(bad, 0);
	assert_true(ft_now() - t0 < scaled(2));
	json_decref(spec);
}

static void
test_sleep_short(void **state)
{
	struct run r;

	(void)state;
	run_spec(sleep_pl, parse("{\"type\": \"sleep\", \"seconds\": 0.05}"),
		 4096, NULL, &r);
	assert_ok(&r);
	assert_true(r.elapsed >= 0.05);
	assert_true(r.elapsed < scaled(1));
	run_free(&r);
}

static void
test_sleep_timeout(void **state)
{
	struct run r;

	(void)state;
	run_spec(sleep_pl, parse("{\"type\": \"sleep\", \"seconds\": 10, "
				 "\"timeout\": 0.05}"), 4096, NULL, &r);
	assert_failed(&r, -1, "timeout after 0.05 s");
	assert_true(r.elapsed >= 0.05);
	assert_true(r.elapsed < scaled(1));
	run_free(&r);
}

static void
test_sleep_cancel(void **state)
{
	struct run r;
	double after;

	(void)state;
	after = run_cancelled(sleep_pl,
			      parse("{\"type\": \"sleep\", \"seconds\": 100}"),
			      0.05, &r);
	assert_failed(&r, -1, "cancelled");
	assert_true(after < scaled(0.2));
	run_free(&r);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_plugin_identity),
		cmocka_unit_test(test_exec_output_exact),
		cmocka_unit_test(test_exec_argv_exact),
		cmocka_unit_test(test_exec_output_cap),
		cmocka_unit_test(test_exec_output_cap_zero),
		cmocka_unit_test(test_exec_output_large),
		cmocka_unit_test(test_exec_exit_code),
		cmocka_unit_test(test_exec_signal),
		cmocka_unit_test(test_exec_not_found),
		cmocka_unit_test(test_exec_not_executable),
		cmocka_unit_test(test_exec_env),
		cmocka_unit_test(test_exec_env_path),
		cmocka_unit_test(test_exec_cwd),
		cmocka_unit_test(test_exec_cwd_missing),
		cmocka_unit_test(test_exec_stdin),
		cmocka_unit_test(test_exec_stdin_absent_is_devnull),
		cmocka_unit_test(test_exec_stdin_large),
		cmocka_unit_test(test_exec_stdin_unread),
		cmocka_unit_test(test_exec_timeout_kills_group),
		cmocka_unit_test(test_exec_leftovers_killed),
		cmocka_unit_test(test_exec_escaped_process),
		cmocka_unit_test(test_exec_cancel),
		cmocka_unit_test(test_exec_cancel_fd),
		cmocka_unit_test(test_exec_no_fd_leak),
		cmocka_unit_test(test_exec_fds_closed_in_child),
		cmocka_unit_test(test_exec_signals_reset),
		cmocka_unit_test(test_exec_validate),
		cmocka_unit_test(test_sleep_validate),
		cmocka_unit_test(test_sleep_zero_fast),
		cmocka_unit_test(test_sleep_short),
		cmocka_unit_test(test_sleep_timeout),
		cmocka_unit_test(test_sleep_cancel),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}

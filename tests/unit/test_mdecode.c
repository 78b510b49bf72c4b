/* Unit tests of MUNGE decodes off the loop (master/mdecode.c), against
 * real libmunge: a munged socket that does not exist (munged down), and
 * one that is listened on but never accepted from, which is what a
 * stopped munged is to its clients (the kernel queues the connection;
 * nobody answers).  Decodes that succeed need a running munged: the
 * integration tests (test_munged_hang.py, test_remote.py) have one. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <dirent.h>
#include <unistd.h>

#include <cmocka.h>
#include <ev.h>

#include "mdecode.h"
#include "util.h"

#define CRED "MUNGE:AwQFAAB0ZXN0:"

struct seen {
	int calls;
	struct mdecode_result last;
	char error[256];
};

static void
on_done(void *arg, const struct mdecode_result *res)
{
	struct seen *s = arg;

	s->calls++;
	s->last = *res;
	snprintf(s->error, sizeof(s->error), "%s", res->error);
}

static void
on_stop(struct ev_loop *loop, ev_timer *t, int revents)
{
	(void)t, (void)revents;
	ev_break(loop, EVBREAK_ALL);
}

/* Run LOOP for SECONDS (answers are handed over meanwhile). */
static void
run_for(struct ev_loop *loop, double seconds)
{
	ev_timer t;

	ev_timer_init(&t, on_stop, seconds, 0);
	ev_timer_start(loop, &t);
	ev_run(loop, 0);
	ev_timer_stop(loop, &t);
}

static int
threads_now(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int n = 0;

	while (d && (e = readdir(d)) != NULL)
		n += e->d_name[0] != '.';
	if (d)
		closedir(d);
	return n;
}

/* A unix socket at PATH listened on and never accepted from: a stopped
 * munged, as its clients see it.  Its fd. */
static int
stopped_munged(char *path, size_t n)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	snprintf(path, n, "/tmp/ftfarm-test-mdecode-%d.sock", (int)getpid());
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	unlink(path);
	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(fd, 64), 0);
	return fd;
}

/* Wait (running LOOP) until D has K decodes in munged's hands. */
static void
wait_busy(struct ev_loop *loop, struct mdecode *d, int k)
{
	double longest, end = ft_now() + 5;

	while (mdecode_busy(d, &longest) < k && ft_now() < end)
		run_for(loop, 0.01);
	assert_int_equal(mdecode_busy(d, &longest), k);
}

/* munged not running: the answer comes at once, munged named. */
static void
test_munged_down(void **state)
{
	struct ev_loop *loop = ev_loop_new(0);
	struct seen s = { 0 };
	char err[256];
	struct mdecode *d = mdecode_new(loop, "/nonexistent/munge.sock", 2, 4,
					err, sizeof(err));
	double t0 = ft_now();

	(void)state;
	assert_non_null(d);
	assert_true(mdecode_submit(d, CRED, on_done, &s) != 0);
	while (s.calls == 0 && ft_now() - t0 < 5)
		run_for(loop, 0.01);
	assert_int_equal(s.calls, 1);
	assert_false(s.last.ok);
	assert_true(s.last.munged_failed);
	assert_non_null(strstr(s.error, "Failed to access"));
	mdecode_free(d);
	ev_loop_destroy(loop);
}

/* munged stopped: the decodes hold the threads, never more threads; the
 * queue is bounded; cancelled jobs are never answered; free does not
 * wait for a call stuck in munged. */
static void
test_munged_stopped(void **state)
{
	struct ev_loop *loop = ev_loop_new(0);
	struct seen s = { 0 };
	char err[256], path[108];
	int fd = stopped_munged(path, sizeof(path)), before;
	struct mdecode *d;
	uint64_t id[5];
	double t0 = ft_now(), longest;
	int k;

	(void)state;
	/* The threads of the test before leave on their own. */
	while (threads_now() > 1 && ft_now() - t0 < 5)
		usleep(10000);
	before = threads_now();
	d = mdecode_new(loop, path, 2, 2, err, sizeof(err));
	assert_non_null(d);
	assert_int_equal(threads_now(), before + 2);
	for (k = 0; k < 2; k++)
		assert_true((id[k] = mdecode_submit(d, CRED, on_done, &s)) != 0);
	wait_busy(loop, d, 2);
	/* Two more wait in the queue; a fifth is refused. */
	for (k = 2; k < 4; k++)
		assert_true((id[k] = mdecode_submit(d, CRED, on_done, &s)) != 0);
	assert_int_equal(mdecode_submit(d, CRED, on_done, &s), 0);
	/* A queued one cancelled makes room. */
	mdecode_cancel(d, id[3]);
	assert_true((id[4] = mdecode_submit(d, CRED, on_done, &s)) != 0);
	run_for(loop, 0.5);
	assert_int_equal(mdecode_busy(d, &longest), 2);
	assert_true(longest >= 0.4);
	assert_int_equal(threads_now(), before + 2);
	assert_int_equal(s.calls, 0);
	for (k = 0; k < 5; k++)
		mdecode_cancel(d, id[k]);
	t0 = ft_now();
	mdecode_free(d);
	assert_true(ft_now() - t0 < 0.1);
	run_for(loop, 0.2);
	assert_int_equal(s.calls, 0);
	close(fd);
	unlink(path);
	ev_loop_destroy(loop);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_munged_down),
		cmocka_unit_test(test_munged_stopped),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* slot: the loop of ftfarm-slot (see slot.h). */
#include "slot.h"

#include <errno.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include "frame.h"
#include "proto.h"
#include "runner.h"
#include "util.h"

#define HELLO_TIMEOUT 60.0	/* seconds to wait for the welcome */
#define BYE_TIMEOUT 5.0
#define WAKE_MARGIN 50e-6	/* a wake-up this late finds its time due */

struct slot {
	int fd;
	int id;
	struct runner *runner;
	struct frame_reader in;
	pthread_mutex_t out_mu;		/* out and unsent: the runner thread
					 * writes results itself (deliver) */
	struct frame_writer out;
	double last_heard;
	double master_timeout;
	int unsent;			/* results taken, not all written */
	int welcomed;
	int stop;
	int sigfd;			/* SIGTERM (the job ends), or -1 */
};

/* Leave at once for WHY.  The running task's process group goes too:
 * nobody would collect its result, and the task may already run
 * elsewhere. */
static void
die(struct slot *s, const char *why)
{
	if (s->runner)
		runner_kill_group(s->runner);
	fprintf(stderr, "ftfarm-slot %d (pid %d): %s; exiting\n", s->id,
		(int)getpid(), why);
	_exit(1);
}

/* Queue message TAG with B's bytes (S's out_mu held, or no runner yet). */
static void
put(struct slot *s, int tag, struct ft_buf *b)
{
	frame_put(&s->out, (uint32_t)tag, b->data, b->len);
	ft_buf_free(b);
}

/* Write what the socket takes (S's out_mu held); once every result taken
 * is written, an exec task waiting for them may start. */
static void
flush_out(struct slot *s)
{
	int rc = frame_flush(&s->out, s->fd);

	if (rc == -1)
		die(s, errno == EPIPE ? "the agent is gone"
				      : "cannot write to the agent");
	if (rc == 0 && s->unsent) {
		s->unsent = 0;
		runner_sent(s->runner);
	}
}

static void
say_hello(struct slot *s, const struct ft_plugins *pl)
{
	char host[64] = "";
	char *names = ft_plugins_names(pl);
	struct proto_hello h = {
		.version = FT_PROTO_VERSION,
		.slot = (uint32_t)s->id,
		.pid = (uint32_t)getpid(),
		.start = ft_proc_start(getpid()),
		.host = host,
		.plugins = names,
	};
	struct ft_buf b = { 0 };

	gethostname(host, sizeof(host) - 1);
	h.host_len = strlen(host);
	h.plugins_len = strlen(names);
	proto_put_hello(&b, &h);
	put(s, FT_MSG_HELLO, &b);
	free(names);
}

static void
on_assign(struct slot *s, const void *p, size_t n)
{
	struct runner_task *head = NULL, **tail = &head;
	struct proto_iter it;
	struct proto_task pt;
	int rc;

	if (proto_iter_init(&it, p, n) == -1)
		die(s, "malformed assign message");
	while ((rc = proto_next_task(&it, &pt)) == 1) {
		struct runner_task *t = runner_task_new(&pt);

		*tail = t;
		tail = &t->next;
	}
	if (rc == -1)
		die(s, "malformed assign message");
	runner_push(s->runner, head);
}

static void
on_ping(struct slot *s, const void *p, size_t n)
{
	struct proto_pong pong;
	struct ft_buf b = { 0 };

	if (proto_get_ping(p, n, &pong.seq) == -1)
		die(s, "malformed ping");
	pong.running = runner_running(s->runner, &pong.queued);
	proto_put_pong(&b, &pong);
	pthread_mutex_lock(&s->out_mu);
	put(s, FT_MSG_PONG, &b);
	pthread_mutex_unlock(&s->out_mu);
}

static void
on_cancel(struct slot *s, const void *p, size_t n)
{
	struct proto_cancel c;

	if (proto_get_cancel(p, n, &c) == -1)
		die(s, "malformed cancel");
	runner_cancel(s->runner, c.tid, c.attempt);
}

static void
on_welcome(struct slot *s, const void *p, size_t n)
{
	struct proto_welcome w;

	if (proto_get_welcome(p, n, &w) == -1)
		die(s, "malformed welcome");
	runner_set_output_cap(s->runner, w.output_cap);
	runner_set_task_rules(s->runner, (int)w.mem_enforce, w.out_default,
			      w.out_default_len, w.err_default,
			      w.err_default_len);
	runner_set_node(s->runner, w.node, w.node_len);
	s->master_timeout = w.master_timeout;
	s->welcomed = 1;
}

static void
on_stop(struct slot *s, const void *p, size_t n)
{
	uint32_t flags;

	if (proto_get_stop(p, n, &flags) == -1)
		die(s, "malformed stop");
	s->stop = 1;
}

static void
handle(struct slot *s, const struct frame *f)
{
	if (!s->welcomed && f->tag != FT_MSG_WELCOME)
		die(s, "the agent spoke before the welcome");
	switch (f->tag) {
	case FT_MSG_WELCOME: on_welcome(s, f->p, f->n); break;
	case FT_MSG_ASSIGN: on_assign(s, f->p, f->n); break;
	case FT_MSG_PING: on_ping(s, f->p, f->n); break;
	case FT_MSG_CANCEL: on_cancel(s, f->p, f->n); break;
	case FT_MSG_STOP: on_stop(s, f->p, f->n); break;
	default: die(s, "unexpected message from the agent");
	}
}

/* Read what the agent sent and act on it.  Returns 1 if a frame came. */
static int
read_frames(struct slot *s, double now)
{
	enum frame_rc rc = frame_fill(&s->in, s->fd);
	struct frame f;
	int any = 0, got;

	if (rc == FRAME_EOF)
		die(s, "the agent closed its end");
	if (rc == FRAME_ERROR)
		die(s, "cannot read from the agent");
	while (!s->stop && (got = frame_next(&s->in, &f)) == 1) {
		handle(s, &f);
		any = 1;
	}
	if (!s->stop && got == -1)
		die(s, "malformed frame from the agent");
	if (any)
		s->last_heard = now;
	return any;
}

/* Queue finished results in frames of at most FT_SLOT_MSG_MAX bytes,
 * once those taken before are all written (an exec task waits until
 * then).  S's out_mu held. */
static void
queue_results(struct slot *s)
{
	struct runner_result *list, *r;
	struct ft_buf b = { 0 };
	uint32_t count = 0;

	if (s->unsent)
		return;
	list = runner_take(s->runner);
	if (list == NULL)
		return;
	proto_begin_list(&b);
	for (r = list; r; r = r->next) {
		struct proto_result pr = {
			.tid = r->tid, .attempt = r->attempt,
			.ok = (uint8_t)r->res.ok, .exit_code = r->res.exit_code,
			.seconds = r->seconds, .reason = r->res.reason,
			.reason_len = strlen(r->res.reason),
			.out = r->res.out, .out_len = r->res.out_len,
			.err = r->res.err, .err_len = r->res.err_len,
			.signal = r->res.signal,
			.value = r->res.value, .value_len = r->res.value_len,
			.interrupted = r->interrupted,
			.cpu_s = r->res.cpu_s, .max_rss = r->res.max_rss,
			.out_path = r->out_path,
			.out_path_len = r->out_path ? strlen(r->out_path) : 0,
			.err_path = r->err_path,
			.err_path_len = r->err_path ? strlen(r->err_path) : 0,
		};

		if (count > 0 &&
		    b.len + proto_result_size(&pr) > FT_SLOT_MSG_MAX) {
			proto_set_count(&b, count);
			frame_put(&s->out, FT_MSG_RESULT, b.data, b.len);
			proto_begin_list(&b);
			count = 0;
		}
		proto_put_result(&b, &pr);
		count++;
	}
	proto_set_count(&b, count);
	put(s, FT_MSG_RESULT, &b);
	s->unsent = 1;
	runner_result_free(list);
}

/* The runner's delivery, on its thread: results due go out from there,
 * unless some taken before are still being written.  Returns 1 if the
 * main thread need not wake for them, 0 if it must (to take them, or to
 * write the rest when the socket is full). */
static int
deliver(void *arg)
{
	struct slot *s = arg;
	int rc = 1;

	pthread_mutex_lock(&s->out_mu);
	if (s->unsent) {
		pthread_mutex_unlock(&s->out_mu);
		return 0;
	}
	queue_results(s);
	if (s->unsent) {
		flush_out(s);
		rc = !s->unsent;
	}
	pthread_mutex_unlock(&s->out_mu);
	return rc;
}

/* SIGTERM comes through a descriptor, on no thread of ours: the end of
 * the job sends it to the slot and to its task at once, and the slot must
 * outlive its task to say the task was interrupted (runner.h).  Called
 * before the runner thread starts, which inherits the mask.  S->sigfd,
 * or -1 (SIGTERM then left as it was). */
static void
catch_term(struct slot *s)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	s->sigfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	if (s->sigfd >= 0)
		pthread_sigmask(SIG_BLOCK, &set, NULL);
}

/* SIGTERM came: the job ends.  The runner is told before the signal is
 * taken, so that it sees the one or the other (runner.c). */
static void
on_term(struct slot *s)
{
	struct signalfd_siginfo si;

	runner_end(s->runner);
	while (read(s->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
		;
}

/* Sleep until the socket or the runner has news, the results the runner
 * holds are due, or the silence limit.  Returns the socket's poll events
 * (0 if it has none). */
static int
wait_news(struct slot *s)
{
	struct pollfd fds[3] = {
		{ .fd = s->fd, .events = POLLIN },
		{ .fd = runner_fd(s->runner), .events = POLLIN },
		{ .fd = s->sigfd, .events = POLLIN },
	};
	double held = runner_held_until(s->runner);
	double now = ft_now();	/* after the loop's work: the wait is from here */
	double left = s->last_heard + s->master_timeout - now;
	struct timespec ts;

	if (held > 0 && held - now < left)
		left = held - now;
	pthread_mutex_lock(&s->out_mu);
	if (frame_pending(&s->out))
		fds[0].events |= POLLOUT;
	/* New results wait until those taken are written: the socket's
	 * POLLOUT is the news then, not the runner's descriptor. */
	if (s->unsent)
		fds[1].fd = -1;
	pthread_mutex_unlock(&s->out_mu);
	/* A timespec, not poll's milliseconds: rounded up to whole ones
	 * (and one more), a hold of 1 ms became 2 or 3. */
	left = fmax(left, 0) + WAKE_MARGIN;
	ts.tv_sec = (time_t)left;
	ts.tv_nsec = (long)((left - (double)ts.tv_sec) * 1e9);
	if (ppoll(fds, 3, &ts, NULL) < 0) {
		if (errno != EINTR)
			die(s, "poll failed");
		return POLLIN;
	}
	if (fds[2].revents)
		on_term(s);
	return fds[0].revents;
}

/* Say bye and wait (bounded) until it is written. */
static void
say_bye(struct slot *s)
{
	struct ft_buf b = { 0 };
	double until = ft_now() + BYE_TIMEOUT;
	struct pollfd pfd = { .fd = s->fd, .events = POLLOUT };

	proto_put_bye(&b);
	put(s, FT_MSG_BYE, &b);
	while (frame_flush(&s->out, s->fd) == 1 && ft_now() < until)
		poll(&pfd, 1, 10);
}

int
slot_run(int fd, int id, const struct ft_plugins *pl)
{
	struct slot s = { .fd = fd, .id = id, .sigfd = -1 };
	int news = POLLIN;

	frame_reader_init(&s.in, FT_MSG_MAX);
	pthread_mutex_init(&s.out_mu, NULL);
	catch_term(&s);
	s.runner = runner_start(pl, id);
	if (s.runner == NULL)
		die(&s, "cannot start the runner thread");
	runner_set_deliver(s.runner, deliver, &s);
	s.master_timeout = HELLO_TIMEOUT;
	s.last_heard = ft_now();
	say_hello(&s, pl);
	while (!s.stop) {
		double now = ft_now();

		pthread_mutex_lock(&s.out_mu);
		queue_results(&s);
		flush_out(&s);
		pthread_mutex_unlock(&s.out_mu);
		/* Read only when poll said so: an idle slot's wake-up (a
		 * ping) costs one read, not a second one that finds
		 * nothing. */
		if (news & (POLLIN | POLLHUP | POLLERR))
			read_frames(&s, now);
		if (s.stop)
			break;
		/* A pong goes out now, not after a poll that says the
		 * socket takes it. */
		pthread_mutex_lock(&s.out_mu);
		if (frame_pending(&s.out))
			flush_out(&s);
		pthread_mutex_unlock(&s.out_mu);
		if (now - s.last_heard > s.master_timeout)
			die(&s, s.welcomed ? "the agent went silent"
					   : "no welcome from the agent");
		news = wait_news(&s);
	}
	runner_stop(s.runner);
	say_bye(&s);
	frame_reader_free(&s.in);
	frame_writer_free(&s.out);
	pthread_mutex_destroy(&s.out_mu);
	if (s.sigfd >= 0)
		close(s.sigfd);
	return 0;
}

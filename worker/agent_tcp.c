/* agent_tcp: a joined node's agent over TCP (see agent_tcp.h). */
#include "agent_tcp.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent.h"
#include "frame.h"
#include "hostmem.h"
#include "lease.h"
#include "proto.h"
#include "rdial.h"
#include "slots.h"
#include "slurm.h"
#include "util.h"

#define BACKOFF_MIN 0.1		/* first wait between two tries to join */
#define BACKOFF_MAX 2.0
#define OUT_MAX (64u << 20)	/* bytes queued for a master that does
				 * not read: it is gone */
#define BYE_TIMEOUT 5.0		/* for the bye to go out */
#define REAP_TIMEOUT 3.0	/* for killed slots to be reaped */
#define SAY_EVERY 30.0		/* a failing join says why this often */
#define LEAVE_WAIT 30.0		/* after its tasks were interrupted, for
				 * the master's STOP */

/* How a connection ended. */
enum end { END_LOST = 1, END_STOPPED, END_REFUSED, END_SIGNALLED };

struct tcp_agent {
	const struct agent_tcp_args *args;
	struct agent a;
	int fd;
	struct frame_reader in;
	struct frame_writer out;
	int sigfd;
	char where[300];		/* the master's HOST:PORT */
	char why[512];			/* why the connection ended */
	double leave_until;		/* left: exit if no STOP by then */
	int incarnation;		/* joins so far */
};

static void
say(const struct tcp_agent *t, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* One line on stderr, about this node. */
static void
say(const struct tcp_agent *t, const char *fmt, ...)
{
	char line[768];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	fprintf(stderr, "ftfarm join: node %s (pid %d): %s\n", t->args->name,
		(int)getpid(), line);
}

/* agent_wire's send: a frame for the master. */
static void
send_frame(void *ctx, int tag, struct ft_buf *b)
{
	struct tcp_agent *t = ctx;

	frame_put(&t->out, (uint32_t)tag, b->data, b->len);
	ft_buf_free(b);
}

static void
send_join(struct tcp_agent *t)
{
	const struct agent_tcp_args *g = t->args;
	char host[256] = "";
	struct ft_buf b = { 0 };
	struct proto_join j = {
		.version = FT_PROTO_VERSION,
		.slots = (uint32_t)g->slots,
		.pid = (uint32_t)getpid(),
		.start = ft_proc_start(getpid()),
		.name = g->name, .name_len = strlen(g->name),
		.host = host,
		.gpus = g->gpus, .gpus_len = strlen(g->gpus),
		.alloc = g->alloc, .alloc_len = strlen(g->alloc),
		.alloc_end = g->alloc_end,
		.mem = hostmem_default(),
	};

	gethostname(host, sizeof(host) - 1);
	j.host_len = strlen(host);
	proto_put_join(&b, &j);
	send_frame(t, FT_MSG_JOIN, &b);
}

/* Tell the master we leave for WHY, and begin: the tasks are
 * interrupted now. */
static void
leave(struct tcp_agent *t, const char *why)
{
	struct proto_leave l = { .grace = 0, .why = why, .why_len = strlen(why) };
	struct ft_buf b = { 0 };

	say(t, "leaving: %s", why);
	proto_put_leave(&b, &l);
	send_frame(t, FT_MSG_LEAVE, &b);
	agent_leave(&t->a, 0, ft_now());
	t->leave_until = ft_now() + LEAVE_WAIT;
}

/* SIGTERM (the allocation ends) or SIGINT.  END_SIGNALLED when the agent
 * must go at once, else 0. */
static int
on_signal(struct tcp_agent *t)
{
	struct signalfd_siginfo si;
	char why[128];

	if (read(t->sigfd, &si, sizeof(si)) != (ssize_t)sizeof(si))
		return 0;
	if (!t->a.welcomed || t->leave_until > 0) {
		snprintf(t->why, sizeof(t->why), "%s", strsignal((int)si.ssi_signo));
		return END_SIGNALLED;
	}
	if (si.ssi_signo == SIGTERM && getenv("SLURM_JOB_ID"))
		slurm_signal_reason(SIGTERM, why, sizeof(why));
	else
		snprintf(why, sizeof(why), "%s", si.ssi_signo == SIGTERM ?
			 "SIGTERM" : "SIGINT");
	leave(t, why);
	return 0;
}

/* The master's first word: WELCOME (handled) or REFUSE.  0, or
 * END_REFUSED with t->why. */
static int
first_word(struct tcp_agent *t, const struct frame *f)
{
	const char *why;
	size_t len;

	if (f->tag != FT_MSG_REFUSE)
		return 0;
	if (proto_get_refuse(f->p, f->n, &why, &len) == -1)
		snprintf(t->why, sizeof(t->why), "refused (a malformed "
			 "refusal)");
	else
		snprintf(t->why, sizeof(t->why), "refused: %.*s", (int)len,
			 why);
	return END_REFUSED;
}

/* Read and handle what the master sent.  0, or how the connection
 * ended (t->why says why). */
static int
read_master(struct tcp_agent *t)
{
	struct frame f;
	int rc;

	for (;;) {
		enum frame_rc got = frame_fill(&t->in, t->fd);

		while ((rc = frame_next(&t->in, &f)) == 1) {
			int end = t->a.welcomed ? 0 : first_word(t, &f);

			if (end)
				return end;
			agent_handle(&t->a, (int)f.tag, f.p, f.n);
		}
		if (rc == -1) {
			snprintf(t->why, sizeof(t->why), "a malformed frame");
			return END_LOST;
		}
		if (got == FRAME_AGAIN)
			return 0;
		if (got == FRAME_EOF || got == FRAME_ERROR) {
			snprintf(t->why, sizeof(t->why), "%s",
				 got == FRAME_EOF ? "the master closed the "
				 "connection" : strerror(errno));
			return END_LOST;
		}
	}
}

/* The longest sleep now: until the slots' or the leave's next work, or
 * the master's silence limit. */
static int
sleep_ms(const struct tcp_agent *t, double now)
{
	double until = fmin(agent_next(&t->a),
			    t->a.last_heard + t->a.master_timeout);

	if (t->leave_until > 0)
		until = fmin(until, t->leave_until);
	else if (t->args->alloc_end > 0)	/* its time here ends */
		until = fmin(until, now + fmax(0, t->args->alloc_end -
						 ft_wall()));
	if (t->a.stopping)
		until = fmin(until, now + 0.05);
	return until <= now ? 0 : (int)fmin((until - now) * 1000 + 1, 60000);
}

/* After a pass: what is due, what goes out, and whether it is over.
 * 0, or how the connection ended. */
static int
after_pass(struct tcp_agent *t, double now)
{
	struct agent *a = &t->a;

	agent_work(a, now);
	agent_flush(a);
	if (frame_flush(&t->out, t->fd) == -1) {
		snprintf(t->why, sizeof(t->why), "%s", strerror(errno));
		return END_LOST;
	}
	if (a->stopping && agent_stopped(a, now))
		return END_STOPPED;
	if (!a->stopping && now - a->last_heard > a->master_timeout) {
		snprintf(t->why, sizeof(t->why), "%s", a->welcomed ?
			 "the master went silent" : "no welcome from the master");
		return END_LOST;
	}
	if (frame_pending(&t->out) > OUT_MAX) {
		snprintf(t->why, sizeof(t->why), "the master does not read");
		return END_LOST;
	}
	if (t->leave_until == 0 && a->welcomed && t->args->alloc_end > 0 &&
	    ft_wall() >= t->args->alloc_end)
		leave(t, "its time here is up");
	if (t->leave_until > 0 && now > t->leave_until) {
		snprintf(t->why, sizeof(t->why), "no stop from the master "
			 "after the leave");
		return END_SIGNALLED;
	}
	return 0;
}

/* Serve the master on t->fd until the connection ends: how. */
static int
serve(struct tcp_agent *t)
{
	int end = 0;

	while (end == 0) {
		struct pollfd pf[3] = {
			{ .fd = t->fd, .events = POLLIN },
			{ .fd = slots_fd(t->a.ss), .events = POLLIN },
			{ .fd = t->sigfd, .events = POLLIN },
		};

		if (frame_pending(&t->out))
			pf[0].events |= POLLOUT;
		if (poll(pf, 3, sleep_ms(t, ft_now())) == -1 && errno != EINTR) {
			snprintf(t->why, sizeof(t->why), "poll: %s",
				 strerror(errno));
			return END_LOST;
		}
		if (pf[2].revents)
			end = on_signal(t);
		if (end == 0 && pf[0].revents)
			end = read_master(t);
		if (end == 0)
			end = after_pass(t, ft_now());
	}
	return end;
}

/* Kill every slot and task, wait (bounded) for the slots to be reaped,
 * and forget them. */
static void
drop_everything(struct tcp_agent *t)
{
	double until = ft_now() + REAP_TIMEOUT;

	if (t->a.ss == NULL)
		return;
	slots_kill_all(t->a.ss);
	while (slots_procs(t->a.ss) > 0 && ft_now() < until) {
		slots_work(t->a.ss, ft_now());
		ft_sleep(0.01);
	}
	slots_kill_everything();
	agent_fini(&t->a);
}

/* Say bye (bounded), as a node that stopped. */
static void
say_bye(struct tcp_agent *t)
{
	struct ft_buf b = { 0 };
	double until = ft_now() + BYE_TIMEOUT;

	agent_flush(&t->a);
	proto_put_bye(&b);
	send_frame(t, FT_MSG_BYE, &b);
	while (frame_flush(&t->out, t->fd) == 1 && ft_now() < until) {
		struct pollfd p = { .fd = t->fd, .events = POLLOUT };

		poll(&p, 1, 100);
	}
}

static void
close_connection(struct tcp_agent *t)
{
	if (t->fd >= 0)
		close(t->fd);
	t->fd = -1;
	frame_reader_free(&t->in);
	frame_writer_free(&t->out);
}

/* Has the cluster been stopped (`ftfarm stop`: its lease free)?  Asked
 * of an agent that has been joined: it then leaves rather than wait for
 * a master that will not come (one that died, or restarts, keeps the
 * lease). */
static int
cluster_stopped(const struct tcp_agent *t)
{
	struct lease l;
	struct lease_rec r;
	char err[256];
	int rc;

	if (t->incarnation == 0 ||
	    lease_open(&l, t->args->cfg->state_dir, err, sizeof(err)) == -1)
		return 0;
	rc = lease_read(&l, &r);
	lease_close(&l);
	return rc == 0 && r.state == LEASE_FREE && r.epoch > 0;
}

/* Connect and greet, trying until UNTIL.  0; -2 when the master refused
 * us (final); -3 when the cluster was stopped meanwhile; -1 when UNTIL
 * passed (t->why says the last failure). */
static int
dial(struct tcp_agent *t, double until)
{
	const struct ft_config *cfg = t->args->cfg;
	double wait = BACKOFF_MIN, said = 0;
	char host[256], port[16];
	int one = 1;

	for (;;) {
		int rc = rdial_published(cfg->state_dir, host, sizeof(host),
					 port, sizeof(port), t->why,
					 sizeof(t->why));

		if (rc == 1)
			snprintf(t->why, sizeof(t->why), "no master publishes "
				 "its address in %s/control.tcp (not started, "
				 "or no \"control\": {\"listen\"})",
				 cfg->state_dir);
		else if (rc == 0 && (t->fd = rdial_connect(host, port, t->why,
						sizeof(t->why))) >= 0) {
			rc = rdial_greet(t->fd, cfg->control.munge_socket,
					 RAUTH_AGENT, t->why, sizeof(t->why));
			if (rc == 0)
				break;
			close(t->fd);
			t->fd = -1;
			if (rc == -2)
				return -2;
		}
		if (cluster_stopped(t))
			return -3;
		if (ft_now() + wait > until)
			return -1;
		if (ft_now() - said >= SAY_EVERY) {
			say(t, "cannot join yet (%s); trying for %.0f s more",
			    t->why, until - ft_now());
			said = ft_now();
		}
		ft_sleep(wait);
		wait = fmin(wait * 2, BACKOFF_MAX);
	}
	snprintf(t->where, sizeof(t->where), "%s:%s", host, port);
	setsockopt(t->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	fcntl(t->fd, F_SETFL, O_NONBLOCK);
	frame_reader_init(&t->in, FT_MSG_MAX);
	return 0;
}

/* One incarnation: join on t->fd and serve.  How it ended. */
static int
incarnation(struct tcp_agent *t)
{
	struct agent_wire w = { .ctx = t, .send = send_frame };
	char why[256];
	int end;

	if (agent_init(&t->a, &w, -1, t->args->name, t->args->cfg->state_dir,
		       why, sizeof(why)) == -1) {
		snprintf(t->why, sizeof(t->why), "%s", why);
		return END_SIGNALLED;
	}
	t->incarnation++;
	t->leave_until = 0;
	send_join(t);
	end = serve(t);
	if (end == END_STOPPED)
		say_bye(t);
	return end;
}

/* SIGTERM and SIGINT through a descriptor; blocked before any slot
 * starts (the slots set their own mask). */
static int
catch_signals(void)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigprocmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	return signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
}

/* ", leaving at HH:MM:SS" for END (epoch) into BUF, or "" (0). */
static const char *
leaving_at(double end, char *buf, size_t n)
{
	time_t t = (time_t)end;
	struct tm tm;

	if (end <= 0 || localtime_r(&t, &tm) == NULL)
		return "";
	strftime(buf, n, ", leaving at %H:%M:%S", &tm);
	return buf;
}

int
agent_tcp_run(const struct agent_tcp_args *args)
{
	struct tcp_agent t = { .args = args, .fd = -1 };
	char when[64];
	double until = ft_now() + args->reconnect;
	int end, rc;

	if ((t.sigfd = catch_signals()) == -1) {
		fprintf(stderr, "ftfarm join: signalfd: %s\n", strerror(errno));
		return 1;
	}
	for (;;) {
		if (args->alloc_end > 0 && ft_wall() >= args->alloc_end) {
			say(&t, "its time here is up");
			return 0;
		}
		rc = dial(&t, until);
		if (rc == -3) {
			say(&t, "the cluster was stopped");
			return 0;
		}
		if (rc < 0) {
			say(&t, "%s%s", rc == -2 ? "" : "cannot join: ", t.why);
			return rc == -2 ? 2 : 1;
		}
		say(&t, "%s the master at %s (%d slots%s)", t.incarnation ?
		    "joining again" : "joining", t.where, args->slots,
		    leaving_at(args->alloc_end, when, sizeof(when)));
		end = incarnation(&t);
		if (end != END_STOPPED)
			drop_everything(&t);
		else
			agent_fini(&t.a);
		close_connection(&t);
		if (end == END_STOPPED) {
			say(&t, "stopped by the master");
			return 0;
		}
		if (end == END_REFUSED || end == END_SIGNALLED) {
			say(&t, "%s", t.why);
			return end == END_REFUSED ? 2 : 1;
		}
		say(&t, "lost the master (%s); joining again for up to %.0f s",
		    t.why, args->reconnect);
		until = ft_now() + args->reconnect;
	}
}

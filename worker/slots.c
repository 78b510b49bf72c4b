/* slots: the node agent's slot processes (see slots.h). */
#include "slots.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "frame.h"
#include "hugeheap.h"
#include "log.h"
#include "proto.h"
#include "slotproc.h"
#include "util.h"
#include "zygote.h"

#define QUEUE_MAX (64u << 20)	/* bytes queued for a slot that does not read */
#define HELLO_MIN 10.0		/* seconds a new slot has to say hello, at least */
#define EVENTS 256		/* epoll events taken at a time */
/* Slot processes starting (no hello yet) at once.  Each start is an exec,
 * a dynamic link and the plugins' loading, some milliseconds of CPU; a
 * node of hundreds of slots started all at once puts hundreds of
 * processes in the run queue, and on a small machine a process then waits
 * for a CPU longer than a ping may (the agent itself, the master).  The
 * rest wait here in the order they were asked for. */
#define START_AT_ONCE 8
/* A stopped slot (SIGSTOP) is found every half heartbeat by one waitid(2)
 * for stopped children (the master may take up to a ping timeout more to
 * read the news: within two heartbeats in all); pings, which wake the
 * slot, are for a slot that hangs some other way.  A slot sent work in
 * the last PING_IDLE half heartbeats (24 heartbeats) is pinged every
 * PING_BUSY (8 heartbeats), any other every PING_IDLE: a hang matters once
 * work comes, and pings every heartbeat cost 512 idle slots some 4 % of a
 * CPU here.  Either is kept within a third of the slots' silence limit,
 * past which a slot leaves (proto_slot_silence, passed on in the
 * welcome). */
#define PING_BUSY 16
#define PING_IDLE 48
/* Ping timeouts in a row a slot waiting for a CPU is given (starved()). */
#define STARVED_MAX 8

/* What an epoll event points at: a slot's socket or its pidfd, or the
 * zygote's socket. */
enum watch_kind { W_SOCK, W_PID, W_ZYGOTE };

struct watch {
	struct proc *p;
	enum watch_kind kind;
};

/* One slot process: the current generation of its slot, or an older one
 * on its way out. */
struct proc {
	uint32_t id, gen;
	pid_t pid;
	unsigned long long start;
	int sock, pidfd;
	struct watch wsock, wpid;
	struct frame_reader in;
	struct frame_writer out;
	double born;
	double ping_sent;		/* the open ping's time, 0 for none */
	double ping_written;		/* when it reached the socket, 0: not
					 * yet */
	double heard;			/* when it last sent bytes */
	uint64_t ping_seq;
	unsigned pinged;		/* the round of its last ping */
	unsigned worked;		/* 1 + the round it was last sent work
					 * in, 0 for never */
	int starved;			/* deadlines passed while it waited for
					 * a CPU, since its last pong */
	int hello;			/* it said hello */
	int bye;			/* it said bye */
	int starting;			/* counted in the slots' starting */
	int forking;			/* asked of the zygote, no pid yet */
	struct proc *next_fork;		/* the next one asked */
	int welcomed;			/* its welcome was passed on */
	int eof;			/* its socket reached end of file */
	int epout;			/* EPOLLOUT asked for */
	int dirty;			/* in the list of sockets to write */
	int killed;
	int hung;			/* killed for silence */
	char why[96];			/* why it was killed, "" for no reason given */
	struct proc *next, *next_dirty;
};

struct slots {
	int epfd;
	char *exe;
	char *node, *state_dir;
	slots_emit_fn emit;
	void *arg;
	struct proc **tab;		/* current generation by slot id */
	uint32_t ntab;
	struct proc *all;		/* every process not yet reaped */
	struct proc *dirty;		/* with frames to write */
	uint32_t live, procs;
	uint32_t starting;		/* processes without a hello yet */
	struct { uint32_t slot, gen; } *wait;	/* spawns not started yet */
	uint32_t nwait, capwait;
	double heartbeat, ping_timeout;
	unsigned ping_busy, ping_idle;	/* rounds between pings */
	double next_round;		/* the next ping round */
	double next_deadline;		/* no hello or pong is due before */
	uint64_t seq;
	unsigned rounds;		/* half heartbeats so far */
	unsigned char *own;		/* own[fd]: a slot's socket */
	size_t nown;
	int zctl;			/* the zygote's socket, -1 for none */
	pid_t zpid;			/* the zygote, 0 for none */
	int zready;			/* it said it is ready */
	int zfailed;			/* it failed once: slots start by exec */
	struct watch zwatch;
	struct proc *zq, *zq_tail;	/* asked of it, oldest first */
};

static void
set_own(struct slots *ss, int fd, int on)
{
	if ((size_t)fd >= ss->nown) {
		size_t n = (size_t)fd * 2 + 64;

		ss->own = ft_realloc(ss->own, n);
		memset(ss->own + ss->nown, 0, n - ss->nown);
		ss->nown = n;
	}
	ss->own[fd] = (unsigned char)on;
}

int
slots_owns(const struct slots *ss, int fd)
{
	return fd >= 0 && (size_t)fd < ss->nown && ss->own[fd];
}

struct slots *
slots_new(const char *exe, slots_emit_fn emit, void *arg, char *why, size_t n)
{
	struct slots *ss = ft_calloc(1, sizeof(*ss));
	char v[32];

	ss->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (ss->epfd < 0) {
		snprintf(why, n, "epoll_create1: %s", strerror(errno));
		free(ss);
		return NULL;
	}
	slotproc_more_fds();
	hugeheap_for_children();
	ss->exe = ft_strdup(exe);
	ss->emit = emit;
	ss->arg = arg;
	ss->heartbeat = 1.0;
	ss->ping_timeout = 1.0;
	ss->ping_busy = PING_BUSY;
	ss->ping_idle = PING_IDLE;
	ss->next_round = ss->next_deadline = INFINITY;
	ss->zctl = -1;
	snprintf(v, sizeof(v), "%d", (int)getpid());
	setenv(FT_AGENT_ENV, v, 1);
	snprintf(v, sizeof(v), "%llu", ft_proc_start(getpid()));
	setenv(FT_AGENT_START_ENV, v, 1);
	return ss;
}

void
slots_set_names(struct slots *ss, const char *node, const char *state_dir)
{
	free(ss->node);
	free(ss->state_dir);
	ss->node = node ? ft_strdup(node) : NULL;
	ss->state_dir = state_dir ? ft_strdup(state_dir) : NULL;
}

/* Rounds of half a heartbeat between pings: EVERY, or fewer so that a
 * third of SILENCE (0: none) is never passed. */
static unsigned
ping_rounds(const struct slots *ss, unsigned every, double silence)
{
	double most = silence > 0 ? silence / 3 / (ss->heartbeat / 2) : every;

	return most < 1 ? 1 : most < every ? (unsigned)most : every;
}

void
slots_set_timing(struct slots *ss, double heartbeat, double ping_timeout,
		 double silence)
{
	if (heartbeat > 0)
		ss->heartbeat = heartbeat;
	if (ping_timeout > 0)
		ss->ping_timeout = ping_timeout;
	ss->ping_busy = ping_rounds(ss, PING_BUSY, silence);
	ss->ping_idle = ping_rounds(ss, PING_IDLE, silence);
	ss->next_round = ft_now() + ss->heartbeat;
}

static double
hello_limit(const struct slots *ss)
{
	return fmax(HELLO_MIN, 4 * ss->heartbeat);
}

/* Kill P (and its tasks' processes); HUNG and WHY (or NULL) say why in
 * its EXITED. */
static void
proc_kill(struct proc *p, int hung, const char *why)
{
	if (p->killed)
		return;
	p->killed = 1;
	p->hung = hung;
	if (why)
		snprintf(p->why, sizeof(p->why), "%s", why);
	if (!p->forking)	/* else once its pid is known (proc_forked) */
		slotproc_kill(p->pid, p->start);
}

static void
watch_out(struct slots *ss, struct proc *p, int on)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &p->wsock };

	if (p->epout == on || p->eof)
		return;
	if (on)
		ev.events |= EPOLLOUT;
	epoll_ctl(ss->epfd, EPOLL_CTL_MOD, p->sock, &ev);
	p->epout = on;
}

/* Write what P's socket takes. */
static void
proc_flush(struct slots *ss, struct proc *p)
{
	int rc = frame_flush(&p->out, p->sock);

	if (rc == 0 && p->ping_sent > 0 && p->ping_written == 0)
		p->ping_written = ft_now();

	if (rc == -1)			/* it is going: its exit tells */
		frame_writer_free(&p->out);
	watch_out(ss, p, rc == 1);
}

static void
queue(struct slots *ss, struct proc *p, uint32_t tag, const void *b, size_t n)
{
	frame_put(&p->out, tag, b, n);
	if (frame_pending(&p->out) > QUEUE_MAX) {
		frame_writer_free(&p->out);
		proc_kill(p, 1, "64 MiB of messages unread");
		return;
	}
	if (!p->dirty) {
		p->dirty = 1;
		p->next_dirty = ss->dirty;
		ss->dirty = p;
	}
}

/* Report that slot ID's generation GEN ended, or never ran, for WHY
 * (not a hang). */
static void
report_end(struct slots *ss, uint32_t id, uint32_t gen, const char *why)
{
	struct ft_buf b = { 0 };
	struct proto_exited e = { .hung = 0, .reason = why,
				  .reason_len = strlen(why) };

	proto_put_exited(&b, &e);
	ss->emit(ss->arg, id, gen, FT_MSG_EXITED, b.data, b.len);
	ft_buf_free(&b);
}

/* Report that slot ID's generation GEN could not start (it never ran). */
static void
report_unstarted(struct slots *ss, uint32_t id, uint32_t gen, const char *why)
{
	char reason[512];

	snprintf(reason, sizeof(reason), "cannot start ftfarm-slot: %s", why);
	report_end(ss, id, gen, reason);
}

static int
watch_proc(struct slots *ss, struct proc *p)
{
	struct epoll_event es = { .events = EPOLLIN, .data.ptr = &p->wsock };
	struct epoll_event ep = { .events = EPOLLIN, .data.ptr = &p->wpid };

	p->wsock = (struct watch){ p, W_SOCK };
	p->wpid = (struct watch){ p, W_PID };
	if (epoll_ctl(ss->epfd, EPOLL_CTL_ADD, p->sock, &es) == -1 ||
	    (p->pidfd >= 0 &&
	     epoll_ctl(ss->epfd, EPOLL_CTL_ADD, p->pidfd, &ep) == -1))
		return -1;
	set_own(ss, p->sock, 1);
	return 0;
}

/* ftfarm-slot's command line, with FIRST (and FIRST2, unless NULL) after
 * the program, in ARGV (12 entries). */
static void
slot_argv(const struct slots *ss, char *argv[12], char *first, char *first2)
{
	static char fd[] = "3", opt_node[] = "--node", opt_dir[] = "--state-dir",
		    opt_fd[] = "--fd";
	int k = 0;

	argv[k++] = ss->exe;
	argv[k++] = first;
	if (first2)
		argv[k++] = first2;
	if (ss->node) {
		argv[k++] = opt_node;
		argv[k++] = ss->node;
	}
	if (ss->state_dir) {
		argv[k++] = opt_dir;
		argv[k++] = ss->state_dir;
	}
	argv[k++] = opt_fd;
	argv[k++] = fd;
	argv[k] = NULL;
}

/* Drop the zygote (killed if KILL_IT) and reap it: slots start by exec
 * from now on.  What was asked of it is failed by the caller first. */
static void
zygote_end(struct slots *ss, int kill_it)
{
	if (ss->zctl >= 0)
		close(ss->zctl);	/* leaves the epoll set */
	if (ss->zpid > 0) {
		if (kill_it)
			kill(ss->zpid, SIGKILL);
		waitpid(ss->zpid, NULL, 0);
	}
	ss->zctl = -1;
	ss->zpid = 0;
	ss->zready = 0;
	ss->zfailed = 1;
}

/* The zygote's socket once it is ready, -1 before (it is started at the
 * first slot's start, and says when it is ready: zygote_answers) and when
 * there is none (it failed once). */
static int
zygote(struct slots *ss)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &ss->zwatch };
	char *argv[12], opt[] = "--zygote", why[256];

	if (ss->zfailed || ss->zctl >= 0)
		return ss->zready ? ss->zctl : -1;
	slot_argv(ss, argv, opt, NULL);
	ss->zpid = slotproc_zygote(argv, &ss->zctl, why, sizeof(why));
	if (ss->zpid < 0) {
		log_warnx("cannot start the zygote (%s): slots start by exec",
			  why);
		ss->zpid = 0;
		ss->zfailed = 1;
		return -1;
	}
	ss->zwatch = (struct watch){ NULL, W_ZYGOTE };
	if (epoll_ctl(ss->epfd, EPOLL_CTL_ADD, ss->zctl, &ev) == -1) {
		log_warnx("epoll_ctl: %s: slots start by exec",
			  strerror(errno));
		zygote_end(ss, 1);
	}
	return -1;
}

/* A socket pair for P: P's end in P->sock, the slot's in *THEIRS.  -1
 * with WHY. */
static int
proc_socket(struct proc *p, int *theirs, char *why, size_t n)
{
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
		       0, sv) == -1) {
		snprintf(why, n, "socketpair: %s", strerror(errno));
		return -1;
	}
	p->sock = sv[0];
	*theirs = sv[1];
	return 0;
}

/* Ask the zygote for P's process (its pid comes later: proc_forked).  0,
 * or -1 when P must start by exec. */
static int
proc_ask(struct slots *ss, struct proc *p)
{
	char why[128];
	int ctl = zygote(ss), theirs;

	if (ctl < 0 || proc_socket(p, &theirs, why, sizeof(why)) == -1)
		return -1;
	if (slotproc_zygote_ask(ctl, p->id, theirs) == -1) {
		close(theirs);
		close(p->sock);
		p->sock = -1;
		return -1;	/* a full queue, or gone: its answers tell */
	}
	close(theirs);
	p->forking = 1;
	if (ss->zq_tail)
		ss->zq_tail->next_fork = p;
	else
		ss->zq = p;
	ss->zq_tail = p;
	return 0;
}

/* Start P's process: forked by the zygote, or else by exec.  Fills P's
 * socket, and its pid and pidfd unless it is forking; -1 with WHY. */
static int
proc_run(struct slots *ss, struct proc *p, char *why, size_t n)
{
	char ids[16], opt[] = "--slot", *argv[12];
	int theirs;

	if (proc_ask(ss, p) == 0)
		return 0;
	snprintf(ids, sizeof(ids), "%u", p->id);
	slot_argv(ss, argv, opt, ids);
	if (proc_socket(p, &theirs, why, n) == -1)
		return -1;
	p->pid = slotproc_start(argv, theirs, &p->pidfd, why, n);
	close(theirs);
	if (p->pid < 0) {
		close(p->sock);
		p->sock = -1;
		return -1;
	}
	p->start = ft_proc_start(p->pid);
	return 0;
}

/* Start P's process and watch it (a kill asked for before, while P was
 * forking, is done once its pid is known).  0, or -1 with WHY when it
 * cannot start. */
static int
proc_launch(struct slots *ss, struct proc *p, char *why, size_t n)
{
	char err[96];

	if (proc_run(ss, p, why, n) == -1)
		return -1;
	p->born = ft_now();
	if (watch_proc(ss, p) == -1) {
		snprintf(err, sizeof(err), "epoll_ctl: %s", strerror(errno));
		proc_kill(p, 0, err);	/* reported when reaped: its pidfd */
	} else if (p->killed && !p->forking) {
		slotproc_kill(p->pid, p->start);
	}
	return 0;
}

/* A new process for slot ID, generation GEN, or NULL with WHY. */
static struct proc *
proc_start(struct slots *ss, uint32_t id, uint32_t gen, char *why, size_t n)
{
	struct proc *p = ft_calloc(1, sizeof(*p));

	p->id = id;
	p->gen = gen;
	p->sock = p->pidfd = -1;
	frame_reader_init(&p->in, FT_SLOT_MSG_MAX);
	if (proc_launch(ss, p, why, n) == -1) {
		frame_reader_free(&p->in);
		free(p);
		return NULL;
	}
	return p;
}

/* Take SLOT's waiting spawn out of the queue (of generation GEN, or any
 * when GEN is 0): its generation, or 0 if none waited. */
static uint32_t
unwait(struct slots *ss, uint32_t slot, uint32_t gen)
{
	uint32_t i, got;

	for (i = 0; i < ss->nwait; i++) {
		if (ss->wait[i].slot != slot || (gen && ss->wait[i].gen != gen))
			continue;
		got = ss->wait[i].gen;
		memmove(&ss->wait[i], &ss->wait[i + 1],
			(ss->nwait - i - 1) * sizeof(*ss->wait));
		ss->nwait--;
		return got;
	}
	return 0;
}

/* Drop every waiting spawn, each reported with WHY. */
static void
drop_waiting(struct slots *ss, const char *why)
{
	uint32_t i, n = ss->nwait;

	ss->nwait = 0;
	for (i = 0; i < n; i++)
		report_end(ss, ss->wait[i].slot, ss->wait[i].gen, why);
}

static void start_now(struct slots *ss, uint32_t slot, uint32_t gen);

/* Start what waits, as far as START_AT_ONCE allows. */
static void
start_waiting(struct slots *ss)
{
	while (ss->nwait > 0 && ss->starting < START_AT_ONCE) {
		uint32_t slot = ss->wait[0].slot, gen = ss->wait[0].gen;

		memmove(&ss->wait[0], &ss->wait[1],
			(ss->nwait - 1) * sizeof(*ss->wait));
		ss->nwait--;
		start_now(ss, slot, gen);
	}
}

/* P has said hello, or is gone: it is no longer starting. */
static void
started(struct slots *ss, struct proc *p)
{
	if (!p->starting)
		return;
	p->starting = 0;
	ss->starting--;
}

void
slots_spawn(struct slots *ss, uint32_t slot, uint32_t gen)
{
	uint32_t old;

	if (slot >= ss->ntab) {
		uint32_t n = slot * 2 + 16;

		ss->tab = ft_realloc(ss->tab, n * sizeof(*ss->tab));
		memset(ss->tab + ss->ntab, 0, (n - ss->ntab) * sizeof(*ss->tab));
		ss->ntab = n;
	}
	if (ss->tab[slot]) {		/* an older generation: it goes */
		proc_kill(ss->tab[slot], 0, NULL);
		ss->tab[slot] = NULL;
		ss->live--;
	}
	old = unwait(ss, slot, 0);
	if (old)
		report_end(ss, slot, old, "replaced before it started");
	if (ss->starting >= START_AT_ONCE) {
		if (ss->nwait == ss->capwait) {
			ss->capwait = ss->capwait ? 2 * ss->capwait : 64;
			ss->wait = ft_realloc(ss->wait, ss->capwait *
					      sizeof(*ss->wait));
		}
		ss->wait[ss->nwait].slot = slot;
		ss->wait[ss->nwait].gen = gen;
		ss->nwait++;
		return;
	}
	start_now(ss, slot, gen);
}

static void
start_now(struct slots *ss, uint32_t slot, uint32_t gen)
{
	struct proc *p;
	char why[256] = "";

	p = proc_start(ss, slot, gen, why, sizeof(why));
	if (p == NULL) {
		report_unstarted(ss, slot, gen, why);
		return;
	}
	p->next = ss->all;
	ss->all = p;
	ss->tab[slot] = p;
	ss->live++;
	ss->procs++;
	p->starting = 1;
	ss->starting++;
	ss->next_deadline = fmin(ss->next_deadline, p->born + hello_limit(ss));
}

static struct proc *
current(struct slots *ss, uint32_t slot, uint32_t gen)
{
	struct proc *p = slot < ss->ntab ? ss->tab[slot] : NULL;

	return p && p->gen == gen && !p->killed ? p : NULL;
}

void
slots_kill(struct slots *ss, uint32_t slot, uint32_t gen)
{
	struct proc *p = current(ss, slot, gen);

	if (p)
		proc_kill(p, 0, NULL);
	else if (unwait(ss, slot, gen))
		report_end(ss, slot, gen, "killed before it started");
}

void
slots_send(struct slots *ss, uint32_t slot, uint32_t gen, uint32_t tag,
	   const void *b, size_t n)
{
	struct proc *p = current(ss, slot, gen);

	if (p == NULL || p->eof)
		return;
	if (tag == FT_MSG_WELCOME) {
		p->welcomed = 1;
		p->pinged = ss->rounds;	/* as good as a ping */
	}
	if (tag == FT_MSG_ASSIGN)
		p->worked = ss->rounds + 1;
	queue(ss, p, tag, b, n);
}

void
slots_stop(struct slots *ss)
{
	struct ft_buf b = { 0 };
	struct proc *p;

	drop_waiting(ss, "stopped before it started");
	proto_put_stop(&b, 0);
	for (p = ss->all; p; p = p->next) {
		if (p->killed || p->eof)
			continue;
		if (p->welcomed)
			queue(ss, p, FT_MSG_STOP, b.data, b.len);
		else
			proc_kill(p, 0, NULL);
	}
	ft_buf_free(&b);
}

void
slots_kill_all(struct slots *ss)
{
	struct proc *p;

	drop_waiting(ss, "killed before it started");
	/* One scan of the process table finds every task's process (they
	 * carry the agent's name), not one scan per slot. */
	for (p = ss->all; p; p = p->next) {
		p->killed = 1;
		kill(p->pid, SIGKILL);
	}
	slots_kill_everything();
}

/* Send SIG to every process this agent started, slots and tasks. */
static void
signal_everything(int sig)
{
	char entry[64], entry2[64];

	snprintf(entry, sizeof(entry), "%s=%d", FT_AGENT_ENV, (int)getpid());
	snprintf(entry2, sizeof(entry2), "%s=%llu", FT_AGENT_START_ENV,
		 ft_proc_start(getpid()));
	ft_signal_by_env(entry, entry2, sig);
}

void
slots_kill_everything(void)
{
	signal_everything(SIGKILL);
}

void
slots_end(struct slots *ss)
{
	struct proc *p;

	for (p = ss->all; p; p = p->next)
		if (!p->killed && !p->eof)
			kill(p->pid, SIGTERM);
}

void
slots_term_everything(void)
{
	signal_everything(SIGTERM);
}

/* A frame from P: relayed, but for its pongs. */
static void
on_frame(struct slots *ss, struct proc *p, const struct frame *f)
{
	struct proto_pong pong;

	switch (f->tag) {
	case FT_MSG_PONG:
		if (proto_get_pong(f->p, f->n, &pong) == -1)
			proc_kill(p, 0, "sent a malformed pong");
		else if (pong.seq == p->ping_seq)
			p->ping_sent = p->starved = 0;
		return;
	case FT_MSG_HELLO:
		p->hello = 1;
		started(ss, p);
		break;
	case FT_MSG_BYE:
		p->bye = 1;
		break;
	case FT_MSG_RESULT:
		break;
	default:
		proc_kill(p, 0, "sent an unexpected message");
		return;
	}
	ss->emit(ss->arg, p->id, p->gen, f->tag, f->p, f->n);
}

/* Read from P's socket once and pass on every whole frame.  Returns the
 * read's answer. */
static enum frame_rc
proc_read(struct slots *ss, struct proc *p)
{
	enum frame_rc rc = frame_fill(&p->in, p->sock);
	struct frame f;
	int got;

	if (rc == FRAME_READ)
		p->heard = ft_now();

	while ((got = frame_next(&p->in, &f)) == 1)
		on_frame(ss, p, &f);
	if (got == -1) {
		proc_kill(p, 0, "sent a malformed message");
		return FRAME_EOF;
	}
	if (rc == FRAME_EOF || rc == FRAME_ERROR) {
		/* Readable for good: its exit (pidfd) closes the rest. */
		epoll_ctl(ss->epfd, EPOLL_CTL_DEL, p->sock, NULL);
		p->eof = 1;
	}
	return rc;
}

static void
unlink_proc(struct slots *ss, struct proc *p)
{
	struct proc **pp;

	for (pp = &ss->all; *pp != p; pp = &(*pp)->next)
		;
	*pp = p->next;
	for (pp = &ss->dirty; *pp; pp = &(*pp)->next_dirty)
		if (*pp == p) {
			*pp = p->next_dirty;
			break;
		}
	if (p->id < ss->ntab && ss->tab[p->id] == p) {
		ss->tab[p->id] = NULL;
		ss->live--;
	}
	started(ss, p);
	ss->procs--;
}

static void
proc_free(struct slots *ss, struct proc *p)
{
	set_own(ss, p->sock, 0);
	close(p->sock);		/* leaves the epoll set */
	close(p->pidfd);
	frame_reader_free(&p->in);
	frame_writer_free(&p->out);
	free(p);
}

/* P's process has ended: pass on what it wrote, then its end. */
static void
proc_exited(struct slots *ss, struct proc *p)
{
	char reason[128];
	struct proto_exited e = { .hung = (uint32_t)p->hung, .reason = reason };
	struct ft_buf b = { 0 };
	int status = 0;

	while (!p->eof && proc_read(ss, p) == FRAME_READ)
		;
	/* Died on its own (killed from outside, crashed): what its tasks
	 * started would run on beside their next attempts.  Still a zombie
	 * here, so its pid is its own. */
	if (!p->killed && !p->bye)
		slotproc_kill(p->pid, p->start);
	waitpid(p->pid, &status, 0);
	if (p->why[0])
		snprintf(reason, sizeof(reason), "%s", p->why);
	else
		slotproc_reason(status, reason, sizeof(reason));
	e.reason_len = strlen(reason);
	proto_put_exited(&b, &e);
	unlink_proc(ss, p);
	ss->emit(ss->arg, p->id, p->gen, FT_MSG_EXITED, b.data, b.len);
	ft_buf_free(&b);
	proc_free(ss, p);
}

/* P never ran (the zygote could not fork it): report it so, and drop
 * it. */
static void
proc_unstarted(struct slots *ss, struct proc *p, const char *why)
{
	unlink_proc(ss, p);
	report_unstarted(ss, p->id, p->gen, why);
	proc_free(ss, p);
}

/* P was asked of a zygote that has failed since: start it by exec
 * instead, on a new socket.  A copy the zygote made meanwhile leaves
 * once its socket is closed here, and is reaped as a stray
 * (reap_strays).  0, or -1 with WHY when P cannot start. */
static int
proc_exec_instead(struct slots *ss, struct proc *p, char *why, size_t n)
{
	set_own(ss, p->sock, 0);
	close(p->sock);		/* leaves the epoll set */
	p->sock = -1;
	p->forking = 0;
	frame_reader_free(&p->in);
	frame_reader_init(&p->in, FT_SLOT_MSG_MAX);
	frame_writer_free(&p->out);
	return proc_launch(ss, p, why, n);
}

/* Drop the zygote (killed if KILL_IT), for WHY, and start by exec what
 * was asked of it.  A slot that has spoken already (its copy exists and
 * said hello) cannot start again in the same generation: it is reported
 * as ended. */
static void
zygote_broken(struct slots *ss, int kill_it, const char *why)
{
	struct proc *q = ss->zq;
	char reason[256];

	log_warnx("the zygote %s: slots start by exec", why);
	ss->zq = ss->zq_tail = NULL;
	zygote_end(ss, kill_it);
	while (q) {
		struct proc *p = q;

		q = p->next_fork;
		if (p->hello || p->eof)
			snprintf(reason, sizeof(reason), "the zygote %s", why);
		else if (proc_exec_instead(ss, p, reason, sizeof(reason)) == 0)
			continue;
		proc_unstarted(ss, p, reason);
	}
}

/* The zygote forked P as PID (a child of ours): watch it as if started
 * here. */
static void
proc_forked(struct slots *ss, struct proc *p, pid_t pid)
{
	struct epoll_event ep = { .events = EPOLLIN, .data.ptr = &p->wpid };

	p->forking = 0;
	p->pid = pid;
	p->pidfd = ft_pidfd_open(pid);
	if (p->pidfd < 0 ||
	    epoll_ctl(ss->epfd, EPOLL_CTL_ADD, p->pidfd, &ep) == -1) {
		/* Our child, not reaped (reap_strays waits for the answers):
		 * its pid is still its own. */
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		proc_unstarted(ss, p, "pidfd_open failed");
		return;
	}
	p->start = ft_proc_start(pid);
	if (p->killed)		/* asked for while it was forking */
		slotproc_kill(p->pid, p->start);
}

/* Read what the zygote answered: it is ready, or a pid for the oldest
 * slot asked. */
static void
zygote_answers(struct slots *ss)
{
	uint32_t slot;
	int pid, rc;

	while (ss->zctl >= 0 &&
	       (rc = slotproc_zygote_answer(ss->zctl, &slot, &pid)) != 0) {
		struct proc *p = ss->zq;
		char why[128];

		if (rc < 0) {
			zygote_broken(ss, 1, "is gone");
			return;
		}
		if (slot == ZYGOTE_READY && !ss->zready) {
			ss->zready = 1;
			continue;
		}
		if (p == NULL || p->id != slot) {
			zygote_broken(ss, 1, "answered out of turn");
			return;
		}
		ss->zq = p->next_fork;
		if (ss->zq == NULL)
			ss->zq_tail = NULL;
		if (pid > 0) {
			proc_forked(ss, p, pid);
		} else {
			snprintf(why, sizeof(why), "the zygote's fork: %s",
				 strerror(-pid));
			proc_unstarted(ss, p, why);
		}
	}
}

/* Write every queued message the sockets take. */
static int
flush_dirty(struct slots *ss)
{
	struct proc *p = ss->dirty;
	int any = p != NULL;

	ss->dirty = NULL;
	while (p) {
		struct proc *next = p->next_dirty;

		p->dirty = 0;
		proc_flush(ss, p);
		p = next;
	}
	return any;
}

/* Kill the slots that have been stopped (SIGSTOP, SIGTSTP...): a stopped
 * slot answers nothing, and its tasks wait.  Only the agent's own
 * children are reported, and a debugger's stops are its own.  A stopped
 * zygote forks nothing: it is dropped now, and what was asked of it
 * starts by exec, rather than once it is late (zygote_late). */
static void
find_stopped(struct slots *ss)
{
	siginfo_t si;
	char why[96];
	struct proc *p;

	for (;;) {
		memset(&si, 0, sizeof(si));
		if (waitid(P_ALL, 0, &si, WSTOPPED | WNOHANG) == -1 ||
		    si.si_pid == 0)
			return;
		if (ss->zpid > 0 && si.si_pid == ss->zpid) {
			snprintf(why, sizeof(why), "was stopped by signal %d",
				 si.si_status);
			zygote_broken(ss, 1, why);
			continue;
		}
		for (p = ss->all; p && p->pid != si.si_pid; p = p->next)
			;
		if (p == NULL || p->killed)
			continue;
		snprintf(why, sizeof(why), "stopped by signal %d", si.si_status);
		proc_kill(p, 1, why);
	}
}

/* How long the zygote may take to fork a slot (milliseconds, as a
 * rule): one that takes longer is stopped or lost. */
static double
zygote_late(const struct slots *ss)
{
	return fmax(2.0, 2 * ss->ping_timeout);
}

/* Reap the agent's children that are no slot process of ours: the
 * zygote once it has died, and a copy it made for a request the agent
 * gave up on (that copy leaves, its socket closed).  A slot's end is read
 * through its pidfd (proc_exited); while answers are due, an unknown
 * child may be a slot whose pid has not come yet, and waits. */
static void
reap_strays(struct slots *ss)
{
	siginfo_t si;
	struct proc *p;

	for (;;) {
		memset(&si, 0, sizeof(si));
		if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) == -1 ||
		    si.si_pid == 0)
			return;
		for (p = ss->all; p && p->pid != si.si_pid; p = p->next)
			;
		if (p)
			return;		/* its pidfd tells */
		if (si.si_pid != ss->zpid && ss->zq)
			return;		/* maybe a slot whose pid is on its way */
		if (si.si_pid == ss->zpid) {
			zygote_broken(ss, 0, "ended");
		} else {
			waitpid(si.si_pid, NULL, WNOHANG);
		}
	}
}

/* Rounds between P's pings now, at ROUND. */
static unsigned
ping_every(const struct slots *ss, const struct proc *p, unsigned round)
{
	int working = p->worked > 0 && round + 1 - p->worked < ss->ping_idle;

	return working ? ss->ping_busy : ss->ping_idle;
}

static void
ping_round(struct slots *ss, double now)
{
	struct ft_buf b = { 0 };
	struct proc *p;
	unsigned round = ++ss->rounds;
	int any = 0;

	find_stopped(ss);
	reap_strays(ss);
	if (ss->zq && now - ss->zq->born > zygote_late(ss))
		zygote_broken(ss, 1, "did not answer");
	ss->next_round = now + ss->heartbeat / 2;
	proto_put_ping(&b, ++ss->seq);
	for (p = ss->all; p; p = p->next) {
		if (!p->welcomed || p->killed || p->eof || p->ping_sent > 0 ||
		    round - p->pinged < ping_every(ss, p, round))
			continue;
		p->ping_sent = now;
		p->ping_written = 0;
		p->ping_seq = ss->seq;
		p->pinged = round;
		queue(ss, p, FT_MSG_PING, b.data, b.len);
		any = 1;
	}
	ft_buf_free(&b);
	if (any)
		ss->next_deadline = fmin(ss->next_deadline,
					 now + ss->ping_timeout);
}

/* When P's open ping started to count: when it reached P's socket.  An
 * agent that waited for a CPU between queueing it and writing it (0.5-0.9
 * s in bursts of 512 execs on 2 CPUs) gave the slot only what was left,
 * and whole runs of a node's slots were killed as hung, asleep, the ping
 * written an instant before.  Not written yet after the write this pass
 * tried first (slots_work flushes before its timers): the socket is full,
 * the slot does not read, and the time counts from the queueing. */
static double
ping_start(const struct proc *p)
{
	return p->ping_written > 0 ? p->ping_written : p->ping_sent;
}

/* PID's state letter, '?' if none. */
static char
state_of(pid_t pid)
{
	char state = ft_pid_state(pid);

	return state ? state : '?';
}

/* Is P late with its pong only for want of a CPU?  512 slots on 2 CPUs
 * running 512 commands wait a second and more for one, and whole nodes
 * were found hung.  A slot that is busy (ft_pid_busy: a thread runnable
 * or in the kernel; its main thread may wait for the lock on its output,
 * which the runner holds while it waits for a CPU) gets another ping
 * timeout, STARVED_MAX times in a row at most (a thread that spins for
 * good is still caught). */
static int
starved(struct proc *p)
{
	/* Or it sent something since the ping went out: its pong may be
	 * behind that, not read yet by an agent that itself waited. */
	if (p->starved >= STARVED_MAX ||
	    (p->heard <= p->ping_sent && !ft_pid_busy(p->pid)))
		return 0;
	p->starved++;
	return 1;
}

/* Kill the slots that missed a deadline; the next deadline after. */
static int
check_deadlines(struct slots *ss, double now)
{
	char why[96];
	struct proc *p;
	int any = 0;

	ss->next_deadline = INFINITY;
	for (p = ss->all; p; p = p->next) {
		double due = !p->hello ? p->born + hello_limit(ss)
			   : p->ping_sent > 0 ? ping_start(p) + ss->ping_timeout
			   : INFINITY;

		if (p->killed)
			continue;
		if (now >= due && p->hello && starved(p)) {
			/* another ping timeout */
			p->ping_sent = p->ping_written = now;
			due = now + ss->ping_timeout;
		}
		if (now < due) {
			ss->next_deadline = fmin(ss->next_deadline, due);
			continue;
		}
		if (!p->hello)
			snprintf(why, sizeof(why), "no hello in %g s",
				 hello_limit(ss));
		else	/* with its state, for whoever asks why */
			snprintf(why, sizeof(why), "no answer to a ping in %g s "
				 "(state %c)", ss->ping_timeout, state_of(p->pid));
		proc_kill(p, 1, why);
		any = 1;
	}
	return any;
}

static int
timers(struct slots *ss, double now)
{
	int any = 0;

	if (now >= ss->next_round) {
		ping_round(ss, now);
		any = 1;
	}
	if (now >= ss->next_deadline)
		any |= check_deadlines(ss, now);
	return any;
}

/* Handle ready descriptors: sockets first, then exits (which free). */
static int
events(struct slots *ss)
{
	struct epoll_event ev[EVENTS];
	struct proc *gone[EVENTS];
	int n = epoll_wait(ss->epfd, ev, EVENTS, 0), i, ngone = 0;

	int zy = 0;

	for (i = 0; i < n; i++) {
		struct watch *w = ev[i].data.ptr;

		if (w->kind == W_ZYGOTE) {
			zy = 1;		/* after: an answer may free a proc */
			continue;
		}
		if (w->kind == W_PID) {
			gone[ngone++] = w->p;
			continue;
		}
		if (ev[i].events & EPOLLOUT)
			proc_flush(ss, w->p);
		if (ev[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))
			proc_read(ss, w->p);
	}
	if (zy)
		zygote_answers(ss);
	for (i = 0; i < ngone; i++)
		proc_exited(ss, gone[i]);
	return n > 0;
}

int
slots_work(struct slots *ss, double now)
{
	int any = flush_dirty(ss);

	any |= events(ss);
	start_waiting(ss);
	any |= timers(ss, now);
	return any | flush_dirty(ss);
}

double
slots_next(const struct slots *ss)
{
	return fmin(ss->next_round, ss->next_deadline);
}

int
slots_fd(const struct slots *ss)
{
	return ss->epfd;
}

uint32_t
slots_live(const struct slots *ss)
{
	return ss->live;
}

uint32_t
slots_procs(const struct slots *ss)
{
	return ss->procs;
}

void
slots_free(struct slots *ss)
{
	while (ss->all) {
		struct proc *p = ss->all;

		unlink_proc(ss, p);
		proc_free(ss, p);
	}
	if (ss->zpid > 0)
		zygote_end(ss, 1);
	close(ss->epfd);
	free(ss->wait);
	free(ss->tab);
	free(ss->own);
	free(ss->exe);
	free(ss->node);
	free(ss->state_dir);
	free(ss);
}

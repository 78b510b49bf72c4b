/* loop: the master's libev loop (see loop.h). */
#include "loop.h"

#include <math.h>
#include <signal.h>

#include "agents.h"
#include "commands.h"
#include "farm.h"
#include "fence.h"
#include "log.h"
#include "registry.h"
#include "subs.h"

/* After activity the loop polls MPI without sleeping for a while, then
 * naps (the cold timer) from COLD_MIN up.  Each hot poll gives the CPU
 * away and takes it back (Open MPI yields in a poll that makes no
 * progress), so while results trickle in (short commands, one every
 * half millisecond) a long window kept the master spinning on a CPU the
 * tasks wanted: 2 ms took a third of a CPU through 600 x `true` on two
 * slots.  The windows of queued tasks (sched.h) cover the nap.  Results
 * that come in bulk (RUSH_TASKS done in one poll: short tasks, many
 * workers) keep the long window for RUSH_KEEP seconds: there the next
 * message is near, and a master that napped answered a whole node late
 * (a first batch of 100,000 no-op tasks on 512 slots lost a tenth). */
#define HOT_WINDOW 0.0002
#define HOT_RUSH 0.002
#define RUSH_TASKS 16
#define RUSH_KEEP 0.01
#define COLD_MIN 0.00005
/* The longest gap between polls: short while tasks run (their results
 * should be seen at once), longer once nothing has happened for a while,
 * and, when the farm is idle, only from the cron, so that an idle master
 * costs next to nothing.  Never past the next request deadline while
 * anything is under way. */
#define COLD_BUSY 0.002
#define COLD_MAX 0.01
#define COLD_IDLE 0.1		/* idle: the cron alone polls, this often */
#define IDLE_SLEEP 1.0		/* ... or, with nobody watching, this long */
#define QUIET_IDLE 1.0		/* seconds without activity: idle */
#define CRON_PERIOD 0.01
#define FLUSH_PERIOD 0.1
#define STALL 0.25		/* a poll gap longer than this is a stall */

static ev_idle hot_w;
static ev_timer cold_w, cron_w;
static ev_signal term_w, int_w, hup_w;
static ev_prepare defer_w;
static double last_activity, backoff, last_flush, last_poll, last_second;
static double last_rush;		/* when a poll last found RUSH_TASKS done */
static double cron_due;		/* when the cron should run next */
static int cron_asleep;		/* the cron sleeps for an idle farm */
static int hot;

/* How long the loop may go without polling MPI now; 0 when the farm is
 * idle: the cron polls then. */
static double
cold_cap(struct master *m, double now)
{
	double cap = COLD_MAX, next;

	if (farm_busy(m))
		cap = COLD_BUSY;
	else if (now - last_activity > QUIET_IDLE)
		return 0;
	next = treq_next_deadline(&m->treqs) - now;
	return fmax(COLD_MIN, fmin(cap, next));
}

/* The cron's period now: every CRON_PERIOD while anything is under way,
 * slower when idle (pings still go out every heartbeat).  An idle farm
 * that nobody watches sleeps until its next heartbeat round or request
 * deadline, IDLE_SLEEP at most (see cron_soon for what wakes it). */
static double
cron_period(struct master *m, double now)
{
	double next;

	cron_asleep = 0;
	if (farm_busy(m) || now - last_activity < QUIET_IDLE)
		return CRON_PERIOD;
	if (subs_count(m->subs) > 0)
		return fmax(CRON_PERIOD, fmin(COLD_IDLE, m->cfg.heartbeat / 4));
	cron_asleep = 1;
	next = fmin(registry_next_round(m), treq_next_deadline(&m->treqs));
	return fmax(CRON_PERIOD, fmin(IDLE_SLEEP, next - now));
}

/* Bring the cron back to its usual pace now: something was sent, or (seen
 * before the loop blocks) the farm has work under way that only the cron
 * carries on (a gang queued, a drain, a reboot) or a watcher to push to. */
static void
cron_soon(struct master *m)
{
	cron_w.repeat = CRON_PERIOD;
	ev_timer_again(m->loop, &cron_w);
	cron_due = ft_now() + CRON_PERIOD;
	cron_asleep = 0;
}

/* Write the results and events pending once a chunk of them is due
 * (events.h): a burst of tasks keeps its lines to a few chunks in
 * memory.  The results of batches clients stream go at once. */
static void
flush_if_urgent(struct master *m)
{
	if (m->events.urgent) {
		m->events.urgent = 0;
		farm_flush(m);
	}
	batches_flush_eager(&m->batches);	/* results clients stream */
}

/* How long the loop stays hot after activity, at NOW. */
static double
hot_window(double now)
{
	return now - last_rush < RUSH_KEEP ? HOT_RUSH : HOT_WINDOW;
}

static void
poll_mpi(struct master *m)
{
	double now = ft_now(), late;
	uint64_t work = m->links.work_in, open = sched_open(m->sched);

	/* Polls come at least when the cron is due.  Later means the loop
	 * was blocked (a spawn, a slow disk) and could read no answer
	 * meanwhile: deadlines move by the lost time. */
	late = now - fmax(last_poll, cron_due);
	if (last_poll > 0 && late > STALL) {
		/* Stopped, maybe, while another master took over. */
		fence_stalled(m);
		treq_delay_all(&m->treqs, late);
	}
	last_poll = now;
	agents_flush(m);
	treq_test(&m->treqs, now);
	flush_if_urgent(m);
	registry_pass_more(m);		/* a long dispatch, after the answers */
	agents_flush(m);		/* what the answers asked for */
	/* Pongs are no sign of work: an idle farm stays idle. */
	if (m->links.work_in != work)
		last_activity = now;
	if (open >= sched_open(m->sched) + RUSH_TASKS)
		last_rush = now;
}

static void
go_hot(struct master *m)
{
	ev_timer_stop(m->loop, &cold_w);
	ev_idle_start(m->loop, &hot_w);
	hot = 1;
}

static void
go_cold(struct master *m)
{
	ev_idle_stop(m->loop, &hot_w);
	backoff = COLD_MIN;
	ev_timer_set(&cold_w, backoff, 0);
	ev_timer_start(m->loop, &cold_w);
	hot = 0;
}

/* m->kick: something was sent, answers will come. */
static void
kick(struct master *m)
{
	last_activity = ft_now();
	if (!hot && m->loop)
		go_hot(m);
	if (m->loop && cron_w.repeat > CRON_PERIOD)
		cron_soon(m);
}

/* The cron found work under way while the loop polls only from the cron:
 * back to the cold timer. */
static void
wake_cold(struct master *m)
{
	if (!hot && !ev_is_active(&cold_w)) {
		backoff = COLD_MIN;
		ev_timer_set(&cold_w, backoff, 0);
		ev_timer_start(m->loop, &cold_w);
	}
}

static void
on_hot(struct ev_loop *loop, ev_idle *w, int revents)
{
	struct master *m = w->data;
	double now;

	(void)loop, (void)revents;
	poll_mpi(m);
	now = ft_now();
	if (hot && now - last_activity > hot_window(now))
		go_cold(m);
}

static void
on_cold(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct master *m = w->data;
	double cap, now;

	(void)revents;
	poll_mpi(m);
	if (hot)
		return;		/* something kicked the loop meanwhile */
	now = ft_now();
	if (now - last_activity <= hot_window(now)) {
		go_hot(m);
		return;
	}
	cap = cold_cap(m, now);
	if (cap == 0)
		return;		/* idle: the cron polls (kick wakes us) */
	backoff = fmin(backoff * 2, cap);
	ev_timer_set(w, backoff, 0);
	ev_timer_start(loop, w);
}

static void
on_cron(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct master *m = w->data;
	double now = ft_now();

	(void)revents;
	if (cron_due > 0)
		stats_loop_lag(&m->stats, now - cron_due);
	poll_mpi(m);
	if (farm_cron(m, now))
		ev_break(loop, EVBREAK_ALL);
	if (now - last_flush >= FLUSH_PERIOD) {
		farm_flush(m);
		last_flush = now;
	}
	if (now - last_second >= 1.0) {
		store_tick(&m->store);	/* retry a failed state dir */
		commands_rotate(m, 1);	/* the logs past their size */
		commands_tick(m, now);	/* idle clients */
		batches_trim(&m->batches, now);
		batches_open_tick(&m->batches, now);
		batches_retain(&m->batches, ft_wall());
		last_second = now;
	}
	w->repeat = cron_period(m, now);
	ev_timer_again(loop, w);
	cron_due = ft_now() + w->repeat;
	if (w->repeat == CRON_PERIOD)
		wake_cold(m);
}

/* Before the loop blocks: the work callbacks deferred. */
static void
on_prepare(struct ev_loop *loop, ev_prepare *w, int revents)
{
	struct master *m = w->data;

	(void)loop, (void)revents;
	defer_run(&m->defer);
	agents_flush(m);
	flush_if_urgent(m);
	if (cron_asleep && (farm_busy(m) || subs_count(m->subs) > 0))
		cron_soon(m);
}

static void
on_signal(struct ev_loop *loop, ev_signal *w, int revents)
{
	struct master *m = w->data;

	(void)loop, (void)revents;
	if (w->signum == SIGHUP) {
		commands_rotate(m, 0);
		return;
	}
	if (!m->stopping) {
		log_info("signal %d: stopping", w->signum);
		m->stopping = 1;
	}
}

int
loop_init(struct master *m)
{
	m->loop = ev_default_loop(EVFLAG_AUTO);
	if (m->loop == NULL)
		return -1;
	signal(SIGPIPE, SIG_IGN);
	ev_idle_init(&hot_w, on_hot);
	ev_timer_init(&cold_w, on_cold, COLD_MIN, 0);
	ev_timer_init(&cron_w, on_cron, CRON_PERIOD, CRON_PERIOD);
	ev_signal_init(&term_w, on_signal, SIGTERM);
	ev_signal_init(&int_w, on_signal, SIGINT);
	ev_signal_init(&hup_w, on_signal, SIGHUP);
	ev_prepare_init(&defer_w, on_prepare);
	hot_w.data = cold_w.data = cron_w.data = m;
	term_w.data = int_w.data = hup_w.data = defer_w.data = m;
	ev_timer_start(m->loop, &cron_w);
	ev_signal_start(m->loop, &term_w);
	ev_signal_start(m->loop, &int_w);
	ev_signal_start(m->loop, &hup_w);
	ev_prepare_start(m->loop, &defer_w);
	m->kick = kick;
	go_hot(m);
	return 0;
}

void
loop_run(struct master *m)
{
	ev_run(m->loop, 0);
	ev_idle_stop(m->loop, &hot_w);
	ev_timer_stop(m->loop, &cold_w);
	ev_timer_stop(m->loop, &cron_w);
	ev_prepare_stop(m->loop, &defer_w);
	defer_run(&m->defer);
}

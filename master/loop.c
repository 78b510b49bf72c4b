/*
 * loop: the master's libev loop.
 *
 * MPI has no file descriptor to wait on, so the loop polls it: on every
 * iteration while messages flow (an idle watcher keeps the loop from
 * blocking), then, once nothing happened for HOT_WINDOW, from a timer whose
 * period doubles up to COLD_MAX so that an idle master leaves the cores to
 * the workers.  Anything that sends (or a message that arrives) makes the
 * loop hot again.  A cron timer runs the periodic work.
 */
#include <math.h>
#include <signal.h>

#include "log.h"
#include "master.h"

#define HOT_WINDOW 0.002	/* seconds of quiet before polling backs off */
#define COLD_MIN 0.00005
#define COLD_MAX 0.01
#define CRON_PERIOD 0.01
#define FLUSH_PERIOD 0.1
#define STOP_WAIT 5.0		/* seconds workers get to say bye */
#define STALL 0.05		/* a poll gap longer than this is a stall */

static ev_idle hot_w;
static ev_timer cold_w, cron_w;
static ev_signal term_w, int_w;
static double last_activity, backoff, last_flush, last_poll;

static void
poll_mpi(struct master *m)
{
	double now = ft_now();

	/* Polls come at least every COLD_MAX.  A longer gap means the loop was
	 * blocked (a spawn, a slow disk, a job's planning) and could read no
	 * answer meanwhile: deadlines move by the lost time. */
	if (last_poll > 0 && now - last_poll > STALL)
		treq_delay_all(&m->treqs, now - last_poll);
	last_poll = now;
	if (treq_test(&m->treqs, now) > 0)
		last_activity = now;
}

static void
go_hot(struct master *m)
{
	ev_timer_stop(m->loop, &cold_w);
	ev_idle_start(m->loop, &hot_w);
	m->hot = 1;
}

static void
go_cold(struct master *m)
{
	ev_idle_stop(m->loop, &hot_w);
	backoff = COLD_MIN;
	ev_timer_set(&cold_w, backoff, 0);
	ev_timer_start(m->loop, &cold_w);
	m->hot = 0;
}

void
loop_kick(struct master *m)
{
	last_activity = ft_now();
	if (!m->hot && m->loop)
		go_hot(m);
}

static void
on_hot(struct ev_loop *loop, ev_idle *w, int revents)
{
	struct master *m = w->data;

	(void)loop, (void)revents;
	poll_mpi(m);
	if (m->hot && ft_now() - last_activity > HOT_WINDOW)
		go_cold(m);
}

static void
on_cold(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct master *m = w->data;

	(void)revents;
	poll_mpi(m);
	if (m->hot)
		return;		/* something kicked the loop meanwhile */
	if (ft_now() - last_activity <= HOT_WINDOW) {
		go_hot(m);
		return;
	}
	backoff = fmin(backoff * 2, COLD_MAX);
	ev_timer_set(w, backoff, 0);
	ev_timer_start(loop, w);
}

void
events_flush(struct master *m)
{
	if (jsonl_flush(&m->events) == -1)
		log_warn("events.jsonl");
}

/* No worker can run anything any more: fail what is left. */
static void
check_all_gone(struct master *m)
{
	int i;

	if (sched_open(m->sched) == 0 || m->stopping)
		return;
	for (i = 0; i < m->nworkers; i++)
		if (registry_live(&m->workers[i]) || m->workers[i].respawn_due)
			return;
	log_warnx("no worker is left: failing %llu open tasks",
		  (unsigned long long)sched_open(m->sched));
	sched_fail_open(m->sched, "no live workers");
}

static void
cron_stop(struct master *m, double now)
{
	if (m->stopping == 1) {
		registry_stop_all(m);
		m->stop_deadline = now + STOP_WAIT;
		m->stopping = 2;
		return;
	}
	if (registry_all_stopped(m) || now > m->stop_deadline) {
		registry_kill_leftovers(m);
		ev_break(m->loop, EVBREAK_ALL);
	}
}

static void
on_cron(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct master *m = w->data;
	double now = ft_now();

	(void)loop, (void)revents;
	poll_mpi(m);
	sched_tick(m->sched, now);
	registry_cron(m, now);
	check_all_gone(m);
	registry_dispatch_all(m);
	if (m->stopping)
		cron_stop(m, now);
	if (now - last_flush >= FLUSH_PERIOD) {
		events_flush(m);
		results_flush(m);
		last_flush = now;
	}
}

static void
on_signal(struct ev_loop *loop, ev_signal *w, int revents)
{
	struct master *m = w->data;

	(void)loop, (void)revents;
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
	hot_w.data = cold_w.data = cron_w.data = m;
	term_w.data = int_w.data = m;
	ev_timer_start(m->loop, &cron_w);
	ev_signal_start(m->loop, &term_w);
	ev_signal_start(m->loop, &int_w);
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
}

/* worker: the state machine of a worker slot (see worker.h). */
#include "worker.h"

#include <stdio.h>
#include <string.h>

#include "log.h"
#include "util.h"

#define B(s) (1u << (s))
#define UP_STATES (B(W_IDLE) | B(W_BUSY) | B(W_SLOW))

/* allowed[FROM]: the states FROM may go to. */
static const unsigned allowed[W_NSTATES] = {
	[W_NEW] = B(W_SPAWNING) | B(W_STARTING) | B(W_DEAD) | B(W_INACTIVE),
	[W_SPAWNING] = B(W_STARTING) | B(W_DEAD) | B(W_INACTIVE),
	[W_STARTING] = B(W_IDLE) | B(W_STOPPING) | B(W_DEAD) | B(W_INACTIVE),
	[W_IDLE] = UP_STATES | B(W_STOPPING) | B(W_STOPPED) | B(W_DEAD) |
		   B(W_INACTIVE),
	[W_BUSY] = UP_STATES | B(W_STOPPING) | B(W_STOPPED) | B(W_DEAD) |
		   B(W_INACTIVE),
	[W_SLOW] = UP_STATES | B(W_STOPPING) | B(W_STOPPED) | B(W_DEAD) |
		   B(W_INACTIVE),
	[W_STOPPING] = B(W_STOPPED) | B(W_DEAD) | B(W_INACTIVE),
	[W_STOPPED] = B(W_INACTIVE),	/* its node left (a joined one) */
	[W_DEAD] = B(W_SPAWNING) | B(W_STARTING) | B(W_INACTIVE),
	[W_INACTIVE] = B(W_SPAWNING) | B(W_STARTING),
};

static const char *const names[W_NSTATES] = {
	[W_NEW] = "new", [W_SPAWNING] = "spawning", [W_STARTING] = "starting",
	[W_IDLE] = "idle", [W_BUSY] = "busy", [W_SLOW] = "slow",
	[W_STOPPING] = "stopping", [W_STOPPED] = "stopped",
	[W_DEAD] = "dead", [W_INACTIVE] = "inactive",
};

const char *
worker_state_name(enum wstate s)
{
	return s < W_NSTATES ? names[s] : "?";
}

int
worker_can(enum wstate from, enum wstate to)
{
	return from < W_NSTATES && to < W_NSTATES &&
	       (allowed[from] & B(to)) != 0;
}

int
worker_live(const struct worker *w)
{
	return w->state == W_STARTING || worker_up(w) ||
	       w->state == W_STOPPING;
}

int
worker_up(const struct worker *w)
{
	return (UP_STATES & B(w->state)) != 0;
}

void
worker_init(struct worker *w, int id, int node, const char *node_name)
{
	memset(w, 0, sizeof(*w));
	w->id = id;
	w->node = node;
	w->node_name = node_name;
	w->state = W_NEW;
	w->since = ft_now();
}

/* The event and log line of W's move from FROM to its state. */
static void
announce(struct worker *w, enum wstate from, const char *reason,
	 struct events *ev)
{
	const char *why = reason ? reason : "";

	switch (w->state) {
	case W_IDLE:
		if (from != W_STARTING)
			break;
		if (w->respawns)
			ev_worker_respawned(ev, w->id, w->node_name, w->pid,
					    w->host, w->respawns);
		else
			ev_worker_up(ev, w->id, w->node_name, w->pid, w->host,
				     w->respawns);
		log_info("worker %d up on %s (%s, pid %d)", w->id,
			 w->node_name, w->host, (int)w->pid);
		break;
	case W_DEAD:
		if (from == W_NEW || from == W_SPAWNING) {
			ev_worker_spawn_failed(ev, w->id, w->node_name, why);
			log_warnx("worker %d: spawn failed: %s", w->id, why);
			break;
		}
		ev_worker_dead(ev, w->id, w->node_name, w->pid, why, w->killed);
		log_warnx("worker %d on %s (pid %d): worker_dead: %s%s", w->id,
			  w->node_name, (int)w->pid, why,
			  w->killed ? " (killed)" : "");
		break;
	case W_INACTIVE:
		ev_worker_inactive(ev, w->id, w->node_name, w->pid, why,
				   w->killed);
		log_warnx("worker %d on %s (pid %d): worker_inactive: %s%s",
			  w->id, w->node_name, (int)w->pid, why,
			  w->killed ? " (killed)" : "");
		break;
	default:
		log_debug("worker %d: %s -> %s%s%s", w->id,
			  worker_state_name(from), worker_state_name(w->state),
			  reason ? ": " : "", why);
	}
}

int
worker_set(struct worker *w, enum wstate to, const char *reason,
	   struct events *ev)
{
	enum wstate from = w->state;

	if (from == to)
		return 0;
	if (!worker_can(from, to)) {
		log_warnx("worker %d: no transition %s -> %s (%s)", w->id,
			  worker_state_name(from), worker_state_name(to),
			  reason ? reason : "no reason");
		return -1;
	}
	if (to == W_DEAD)
		w->failures++;
	if ((from == W_DEAD || from == W_INACTIVE) &&
	    (to == W_SPAWNING || to == W_STARTING))
		w->respawns++;
	if (to == W_IDLE && from == W_STARTING) {
		w->ever_up = 1;
		w->hello_at = ft_now();
	}
	if (to != W_DEAD)
		w->respawn_due = 0;
	w->state = to;
	w->since = ft_now();
	announce(w, from, reason, ev);
	return 0;
}

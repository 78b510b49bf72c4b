/* node: the state machine of a node (see node.h). */
#include "node.h"

#include <stdio.h>
#include <string.h>

#include "log.h"
#include "util.h"

#define B(s) (1u << (s))
#define OUT_STATES (B(N_DRAINING) | B(N_DRAINED) | B(N_REBOOTING) |	\
		    B(N_INACTIVE))

/* allowed[FROM]: the states FROM may go to. */
static const unsigned allowed[N_NSTATES] = {
	[N_UP] = B(N_SUSPECT) | OUT_STATES | B(N_LEAVING),
	[N_SUSPECT] = B(N_UP) | OUT_STATES | B(N_LEAVING),
	[N_DRAINING] = B(N_UP) | B(N_DRAINED) | B(N_REBOOTING) |
		       B(N_INACTIVE) | B(N_LEAVING),
	[N_DRAINED] = B(N_UP) | B(N_REBOOTING) | B(N_INACTIVE) | B(N_LEAVING),
	[N_REBOOTING] = B(N_UP) | B(N_DRAINED) | B(N_INACTIVE),
	[N_DOWN] = B(N_UP) | B(N_DRAINED) | B(N_REBOOTING) | B(N_INACTIVE),
	[N_INACTIVE] = B(N_DOWN) | B(N_REBOOTING),
	[N_LEAVING] = B(N_LEFT),
	[N_LEFT] = B(N_UP) | B(N_DRAINED),
};

static const char *const names[N_NSTATES] = {
	[N_UP] = "up", [N_SUSPECT] = "suspect", [N_DRAINING] = "draining",
	[N_DRAINED] = "drained", [N_REBOOTING] = "rebooting",
	[N_DOWN] = "down", [N_INACTIVE] = "inactive",
	[N_LEAVING] = "leaving", [N_LEFT] = "left",
};

const char *
node_state_name(enum nstate s)
{
	return s > 0 && s < N_NSTATES ? names[s] : "?";
}

enum nstate
node_state_parse(const char *name)
{
	int s;

	for (s = 1; name && s < N_NSTATES; s++)
		if (strcmp(names[s], name) == 0)
			return (enum nstate)s;
	return 0;
}

int
node_can(enum nstate from, enum nstate to)
{
	return from > 0 && from < N_NSTATES && to > 0 && to < N_NSTATES &&
	       (allowed[from] & B(to)) != 0;
}

int
node_serves(const struct node *n)
{
	return n->state == N_UP || n->state == N_SUSPECT;
}

void
node_init(struct node *n, int id, const char *name)
{
	memset(n, 0, sizeof(*n));
	n->id = id;
	n->name = name;
	n->state = N_UP;
	n->since = ft_now();
}

/* The event and log line of N's move from FROM to its state. */
static void
announce(struct node *n, enum nstate from, const char *why,
	 struct events *ev)
{
	switch (n->state) {
	case N_UP:
		if (from == N_SUSPECT) {
			log_info("node %s: no longer suspect (%s)", n->name, why);
			return;
		}
		ev_node_back(ev, n->name, why, n->since - n->out_since);
		break;
	case N_SUSPECT:
		ev_node_suspect(ev, n->name, why, n->strikes);
		break;
	case N_DRAINING:
		ev_node_draining(ev, n->name, why);
		break;
	case N_DRAINED:
		ev_node_drained(ev, n->name, why);
		break;
	case N_REBOOTING:
		ev_node_power_cycle(ev, n->name, why, n->reboots);
		break;
	case N_DOWN:
		ev_node_down(ev, n->name, why);
		break;
	case N_INACTIVE:
		ev_node_inactive(ev, n->name, why);
		break;
	case N_LEAVING:
		ev_node_leaving(ev, n->name, why);
		break;
	case N_LEFT:
		ev_node_left(ev, n->name, why);
		break;
	default:
		break;
	}
	log_warnx("node %s: %s -> %s: %s", n->name, node_state_name(from),
		  node_state_name(n->state), why);
}

int
node_set(struct node *n, enum nstate to, const char *reason,
	 struct events *ev)
{
	enum nstate from = n->state;
	const char *why = reason ? reason : "";

	if (from == to)
		return 0;
	if (!node_can(from, to)) {
		log_warnx("node %s: no transition %s -> %s (%s)", n->name,
			  node_state_name(from), node_state_name(to), why);
		return -1;
	}
	n->state = to;
	n->since = ft_now();
	if ((from == N_UP || from == N_SUSPECT) && !node_serves(n))
		n->out_since = n->since;
	if (to == N_REBOOTING) {
		n->reboots++;
		n->last_reboot = ft_wall();
	}
	snprintf(n->reason, sizeof(n->reason), "%s", why);
	announce(n, from, why, ev);
	return 0;
}

void
node_restore(struct node *n, enum nstate to, const char *reason,
	     enum nstate was, struct events *ev)
{
	n->state = to;
	n->since = ft_now();
	if (!node_serves(n))
		n->out_since = n->since;
	snprintf(n->reason, sizeof(n->reason), "%s", reason ? reason : "");
	ev_node_restored(ev, n->name, node_state_name(to), n->reason,
			 n->reboots, n->strikes, n->drain_wanted,
			 was != to ? node_state_name(was) : NULL);
	log_info("node %s: restored %s (%s), %d reboot%s, %d failure%s "
		 "charged%s%s", n->name, node_state_name(to), n->reason,
		 n->reboots, n->reboots == 1 ? "" : "s", n->strikes,
		 n->strikes == 1 ? "" : "s", was != to ? "; it was " : "",
		 was != to ? node_state_name(was) : "");
}

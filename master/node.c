/* node: the state machine of a node (see node.h). */
#include "node.h"

#include <stdio.h>
#include <string.h>

#include "log.h"
#include "util.h"

#define B(s) (1u << (s))

static const unsigned allowed[N_NSTATES] = {
	[N_UP] = B(N_INACTIVE),
	[N_INACTIVE] = 0,
};

static const char *const names[N_NSTATES] = {
	[N_UP] = "up", [N_INACTIVE] = "inactive",
};

const char *
node_state_name(enum nstate s)
{
	return s > 0 && s < N_NSTATES ? names[s] : "?";
}

int
node_can(enum nstate from, enum nstate to)
{
	return from > 0 && from < N_NSTATES && to > 0 && to < N_NSTATES &&
	       (allowed[from] & B(to)) != 0;
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
	snprintf(n->reason, sizeof(n->reason), "%s", why);
	if (to == N_INACTIVE) {
		ev_node_inactive(ev, n->name, why);
		log_warnx("node %s is inactive: %s", n->name, why);
	}
	return 0;
}

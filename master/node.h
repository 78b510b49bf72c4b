/*
 * node: the state of one node of the cluster, as a state machine.
 *
 *   UP --give up (its workers keep failing)--> INACTIVE
 *
 * node_set() is the only writer of a node's state: it refuses what the
 * table does not allow, logs the change and emits its event
 * (node_inactive).  What a node's state means for its workers is node
 * health's business (health.h).
 */
#ifndef FT_NODE_H
#define FT_NODE_H

#include "events.h"

enum nstate {
	N_UP = 1,
	N_INACTIVE,			/* given up on */
	N_NSTATES
};

struct node {
	int id;				/* index in cfg.nodes */
	const char *name;
	enum nstate state;
	double since;			/* when it entered its state (monotonic) */
	char reason[128];		/* why it is in its state */
	int reboots;			/* power cycles so far */
};

void node_init(struct node *n, int id, const char *name);
/* Move N to TO for REASON, emitting its event on EV.  0, or -1 (logged,
 * N unchanged) when the table does not allow it. */
int node_set(struct node *n, enum nstate to, const char *reason,
	     struct events *ev);
int node_can(enum nstate from, enum nstate to);
const char *node_state_name(enum nstate s);

#endif

/*
 * node: the state of one node of the cluster, as a state machine.
 *
 *            failure charged             second failure, or a timeout
 *   UP <------------------> SUSPECT ---------------------------+
 *    |  quiet for a window     |                               |
 *    | drain                   | drain                         v
 *    +------> DRAINING <-------+          reboot      REBOOTING (cycle, power
 *    |          |  nothing runs: DRAINED  --------->   on, ready, workers)
 *    |          +-----------------> |                    |        |
 *    | <----- undrain --------------+                    | back   | failed
 *    | <------------------------------------------------+        v
 *    | <--- back --- DOWN <--- probe, undrain --- INACTIVE <------+
 *
 * A node that joined over TCP also goes UP/SUSPECT/DRAINING/DRAINED ->
 * LEAVING -> LEFT (asked to leave, or its allocation ends), and comes
 * back from LEFT (or INACTIVE, through DOWN) when its agent joins again:
 * UP, or DRAINED when an operator drained it.
 *
 * UP and SUSPECT are in service; the other states take no new tasks.
 * SUSPECT: a failure is charged to the node; its next ones climb the
 * ladder.  DRAINING: its running tasks finish, nothing new starts;
 * DRAINED once they have (an operator's drain).  REBOOTING: being
 * power-cycled over its BMC until its workers are back.  DOWN: being
 * brought back without a power cycle (an inactive node probed, or
 * undrained by hand).  INACTIVE: given up on, probed again with backoff.
 *
 * node_set() is the only writer of a node's state: it refuses what the
 * table does not allow, logs the change and emits the event of the state
 * entered (node_suspect, node_draining, node_drained, node_power_cycle,
 * node_down, node_inactive, node_back; SUSPECT -> UP is quiet).  Entering
 * REBOOTING counts a reboot.  The one exception is node_restore(), at a
 * master's start, before any worker: the state a master before it left
 * (opstate.h), entered without a transition, with node_restored.  What a state means for the node's workers,
 * and every other field, is node health's business (health.h).
 */
#ifndef FT_NODE_H
#define FT_NODE_H

#include "events.h"

enum nstate {
	N_UP = 1,
	N_SUSPECT,			/* a failure charged; still in service */
	N_DRAINING,			/* no new tasks; running ones finish */
	N_DRAINED,			/* no tasks (an operator's drain) */
	N_REBOOTING,			/* power-cycled, coming back */
	N_DOWN,				/* coming back without a power cycle */
	N_INACTIVE,			/* given up on; probed with backoff */
	N_LEAVING,			/* a joined node leaves: no new tasks */
	N_LEFT,				/* it has left; back when it joins again */
	N_NSTATES
};

/* Where a reboot or a probe stands (node health's). */
enum nstep {
	NS_NONE = 0,
	NS_DRAIN,			/* waiting for running tasks (reboot) */
	NS_CYCLE,			/* `chassis power cycle` */
	NS_POWER,			/* `chassis power status` until on */
	NS_READY,			/* the ready command until it says yes */
	NS_WORKERS,			/* its workers respawned, not all up */
};

struct node {
	int id;				/* index in cfg.nodes */
	const char *name;
	enum nstate state;
	double since;			/* when it entered its state (monotonic) */
	char reason[160];		/* why it is in its state */
	int reboots;			/* power cycles so far */
	double last_reboot;		/* when the last began (epoch), 0: never */
	double out_since;		/* when it left service (monotonic) */

	/* Node health's (health.c): failures and the ladder. */
	int strikes;			/* failures charged in this episode */
	int episode_reboots;		/* ladder reboots in this episode */
	double last_strike;		/* the episode's last event (monotonic) */
	int drain_wanted;		/* an operator drained it: stay drained */
	int reboot_wanted;		/* reboot once drained (1), forced (2) */
	int by_operator;		/* the reboot under way is an operator's */
	double drain_deadline;		/* a reboot's drain: take tasks back then */
	enum nstep step;
	double step_at;			/* when the step is due */
	double deadline;		/* the reboot or probe ends by then */
	double t_start;			/* when the cycle or probe began */
	int power_on_sent;		/* `power on` asked after a slow cycle */
	int cycle_failed;		/* the cycle's answer was an error */
	int bmc_fails;			/* BMC commands failed in a row */
	int last_power;			/* the last power status: 1, 0, -1 */
	char last_error[160];		/* the last BMC or ready failure */
	double probe_delay;		/* inactive: seconds to the next probe */
	double probe_at;		/* when (monotonic) */
	int probes;			/* probes since it was last in service */
	int outside;			/* its host was left out of mpirun's
					 * hostfile (it did not answer at
					 * start): spawn with "add-host" */
};

void node_init(struct node *n, int id, const char *name);
/* Move N to TO for REASON, emitting its event on EV.  0, or -1 (logged,
 * N unchanged) when the table does not allow it. */
int node_set(struct node *n, enum nstate to, const char *reason,
	     struct events *ev);
int node_can(enum nstate from, enum nstate to);
const char *node_state_name(enum nstate s);
/* The state called NAME, or 0. */
enum nstate node_state_parse(const char *name);
/* At the master's start: N is in state TO for REASON, as a master
 * before this one left it (it was in WAS then), with a node_restored
 * event on EV (its counts already set). */
void node_restore(struct node *n, enum nstate to, const char *reason,
		  enum nstate was, struct events *ev);
/* Does the node take tasks (UP or SUSPECT)? */
int node_serves(const struct node *n);

#endif

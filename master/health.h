/*
 * health: node health, the re-initialisation ladder (after FTCL), blame
 * between tasks and nodes, and the operators' drain, undrain and reboot.
 *
 * Each worker death is blamed (blame.h) on the task it ran or on its
 * node.  A task's deaths cost the task its attempts (it fails as poison
 * after them) and leave the node alone: the worker is respawned.  A
 * node's failures in a row (until one of its workers finishes a task)
 * climb its ladder:
 *   1. the first respawn_limit failures: respawn the worker (the node is
 *      SUSPECT);
 *   2. the next one, any within failure_window_s of a reboot, or a
 *      respawn that does not come back (a timeout): drain the node (its
 *      tasks go elsewhere at once), power-cycle it over its BMC, wait for
 *      power, for its ready command and for its workers' hellos, all
 *      within reboot_wait_s, and put it back in service (ladder.h);
 *   3. after max_reboots reboots, or without a BMC, or in static launch
 *      (whose workers cannot be respawned), or when the reboot fails: the
 *      node is INACTIVE.
 * A node's failures and reboots are also forgotten after
 * failure_window_s without one.  An inactive node is probed again after probe_min_s,
 * doubling up to probe_max_s: it comes back if it is powered, ready and
 * its workers say hello.  When every node is inactive and no worker is
 * left, the open tasks fail ("no live workers").
 *
 * What an operator and the ladder decided outlives the master: each
 * node's drain, state and reason, its reboots and the failures charged to
 * it are saved in <state_dir>/nodes.state (opstate.h) as they change (an
 * operator's request at once, the rest within a second), and a master
 * that starts on the same state dir takes them back (health_restore):
 * a drained node stays drained, an inactive one inactive (probed on its
 * backoff), a suspect one suspect with its failures; a node that was
 * being rebooted or probed is probed (its power, its ready command, its
 * workers) rather than power-cycled again; a reboot asked by an operator
 * and still waiting for the node to drain is dropped (its client was
 * told the master went away).  Under static launch a node given up on is
 * in service again: the new job's workers are new.  A node is its name in
 * the config; the records of names no longer in it are carried over as
 * they are.
 *
 * Node health sits above the registry: it hears of failures through the
 * registry's ops and acts through the registry's calls.
 */
#ifndef FT_HEALTH_H
#define FT_HEALTH_H

#include <stddef.h>
#include <stdint.h>

#include "master.h"

struct health_ops {
	void *ctx;
	/* The reboot of node N has ended: it is back (OK), or WHY not. */
	void (*reboot_ended)(void *ctx, struct node *n, int ok,
			     const char *why);
	/* The nodes' state of generation GEN is on disk (ERR 0), or its
	 * write failed with errno ERR. */
	void (*saved)(void *ctx, uint64_t gen, int err);
};

void health_init(struct master *m, const struct health_ops *ops);
void health_free(struct master *m);

/* W has just died (registry ops.dying): charge its task or its node. */
void health_worker_dying(struct master *m, struct worker *w);
/* W failed (it is DEAD): respawn it, or climb its node's ladder. */
void health_worker_failed(struct master *m, struct worker *w);
/* Task TID's first result came from W, a success (OK) or not. */
void health_task_result(struct master *m, uint64_t tid, struct worker *w,
			int ok);
/* Task TID failed for good for REASON: the reason to record, which is
 * REASON or, for a task charged with deaths, why it is poison (in BUF). */
const char *health_task_failed(struct master *m, uint64_t tid,
			       const char *reason, char *buf, size_t n);

/* The operators' requests for node N.  0, or -1 with ERR. */
int health_drain(struct master *m, struct node *n, char *err, size_t len);
int health_undrain(struct master *m, struct node *n, char *err, size_t len);
/* Reboot N: drain it (unless FORCE: its tasks go elsewhere at once),
 * power-cycle it, bring its workers back; ops.reboot_ended says how it
 * ended.  -1 with ERR when N cannot be rebooted. */
int health_reboot(struct master *m, struct node *n, int force, char *err,
		  size_t len);
/* Could N be rebooted (a BMC, dynamic launch)?  0, or -1 with ERR. */
int health_can_reboot(const struct master *m, const struct node *n,
		      char *err, size_t len);
/* The node called NAME, or NULL. */
struct node *health_node(struct master *m, const char *name);

/* Nodes joined (cfg.nodes grew): each new one UP, or as a master before
 * left it (its record carried over in nodes.state, by name). */
void health_grow(struct master *m);
/* N's agent joined (again) for WHY: a node that had left or was given
 * up on is back (drained if an operator drained it). */
void health_joined(struct master *m, struct node *n, const char *why);
/* N (joined) leaves for WHY: it takes no new task; once nothing runs on
 * it, its agent is stopped. */
void health_leaving(struct master *m, struct node *n, const char *why);
/* Ask N (joined) to leave: its running tasks go on for GRACE seconds,
 * then are interrupted.  0, or -1 with ERR (not a joined node; no agent
 * up). */
int health_leave(struct master *m, struct node *n, double grace, char *err,
		 size_t len);
/* N's agent has left (bye, or gone while leaving). */
void health_left(struct master *m, struct node *n);

/* N's reboot or probe has ended: back (OK), or failed for WHY (the
 * ladder's callback, given to it by health_init). */
void health_ladder_ended(struct master *m, struct node *n, int ok,
			 const char *why);

/* Is a node being drained, rebooted or probed? */
int health_busy(const struct master *m);
/* Periodic work: drains, reboots, probes, forgetting, no live workers. */
void health_cron(struct master *m, double now);
/* Before the first spawn: the nodes whose host the supervisor left out
 * of the job (hosts.h) are INACTIVE, their workers retired, probed again
 * with backoff and brought in when their host answers. */
void health_hosts_left_out(struct master *m);
/* Ask each node's BMC for its power (master start): a node found off is
 * power-cycled. */
void health_check_power(struct master *m);

/* At the start, after health_hosts_left_out and before the first spawn:
 * take back the nodes' saved state and save it from now on.  A record
 * that is damaged or unreadable is reported (node_state_damaged, the
 * master log), set aside (nodes.state.damaged) and ignored. */
void health_restore(struct master *m);
/* The generation of the nodes' state not yet on disk (the last one
 * handed to the disk), or 0 when everything is. */
uint64_t health_unsaved(const struct master *m);
/* The store's retry after a failure: 0, or -1 while the last write of
 * the nodes' state has failed (it is tried again now). */
int health_retry_save(struct master *m);

#endif

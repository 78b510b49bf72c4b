/*
 * ladder: bringing a node back, step by step, within reboot_wait_s.
 *
 *   reboot (REBOOTING): chassis power cycle -> chassis power status until
 *                       on -> the ready command until it exits 0 -> its
 *                       workers respawned, until every one said hello
 *   probe (DOWN):       chassis power status (power on if off) until on
 *                       -> ready -> workers (steps without a BMC or a
 *                       ready command are skipped)
 *
 * The steps move on when a BMC command (bmc.h) or the ready command
 * (child.h, run in the config file's directory) ends, and from the cron
 * (retries, the deadline, the hellos).  A cycle whose answer is an error
 * is checked with a power status before anything is concluded; power
 * still off POWER_ON_AFTER seconds after the cycle gets one `power on`.
 * The cycle waits while an MPI_Comm_spawn is under way (killing the
 * process it starts can hang Open MPI).
 * A ready command that cannot be started, three BMC failures in a row, a
 * BMC that fails to answer after a failed cycle, or the deadline end the
 * attempt at once.  The end, either way, goes to the callback given to
 * ladder_init (node health's: the ladder never calls up).
 * The node's workers are held (no tasks) until node health puts it back.
 */
#ifndef FT_LADDER_H
#define FT_LADDER_H

#include "master.h"

/* N's reboot or probe has ended: back (OK), or failed for WHY. */
typedef void ladder_ended_fn(struct master *m, struct node *n, int ok,
			     const char *why);

/* ENDED hears of every attempt's end. */
void ladder_init(struct master *m, ladder_ended_fn *ended);
/* Nodes joined: room for each node of the config from now on. */
void ladder_grow(struct master *m);
void ladder_free(struct master *m);
/* Power-cycle N (its workers retired) for WHY: N becomes REBOOTING. */
void ladder_reboot(struct master *m, struct node *n, const char *why);
/* Bring N (INACTIVE, its workers retired) back without a power cycle:
 * N becomes DOWN. */
void ladder_probe(struct master *m, struct node *n, const char *why);
/* Stop what N's reboot or probe has under way (its end is not reported). */
void ladder_abort(struct master *m, struct node *n);
/* Move N's reboot or probe on: retries, deadline, hellos. */
void ladder_cron(struct master *m, struct node *n, double now);


#endif

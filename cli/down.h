/*
 * down: a cluster with no master and none coming, as its clients tell
 * it: what the state dir's lease says, and the note its supervisor left
 * of why it stopped.
 *
 * A supervisor that stops its cluster (`ftfarm stop`, or a signal: in a
 * Slurm job, SIGTERM is the end of the job, its time limit or scancel)
 * writes <state_dir>/stopped.json, mode 0644 like control.tcp:
 *
 *   {"v": 1, "epoch": E, "ts": T, "reason": "..."}
 *
 * (E: the lease epoch that stopped; T: when, in seconds since the epoch;
 * the reason in words).  The next supervisor to take the lease removes
 * it.  A client that cannot reach the master reads the lease: never
 * taken, free (stopped) or stopping, the cluster is down, and the note,
 * when its epoch is the lease's, says since when and why.
 */
#ifndef FT_DOWN_H
#define FT_DOWN_H

#include <stddef.h>

#include "lease.h"

#define DOWN_FILE "stopped.json"

/* Leave the note that epoch EPOCH of the cluster of STATE_DIR stopped
 * now for REASON.  0, or -1 with errno. */
int down_note(const char *state_dir, unsigned long long epoch,
	      const char *reason);
/* Remove the note of STATE_DIR (a new epoch begins). */
void down_forget(const char *state_dir);
/* Does a lease read as RC (lease_read's return) and R say the cluster is
 * down: never started, stopped, or stopping? */
int down_lease(int rc, const struct lease_rec *r);
/* Why the cluster of STATE_DIR, whose lease read as RC and R, is down, in
 * words into BUF ("stopped 2026-11-28 15:05:42 UTC: SIGTERM: the end of
 * Slurm job 12", "never started", ...).  BUF. */
const char *down_why(const char *state_dir, int rc, const struct lease_rec *r,
		     char *buf, size_t n);
/* Read STATE_DIR's lease: 1 with WHY filled when it says the cluster is
 * down, 0 when a master may hold it, or when it cannot be read. */
int down_check(const char *state_dir, char *why, size_t n);

#endif

/*
 * supervise: the supervisor that owns a cluster's MPI job, and its
 * standby.
 *
 * `ftfarm start` leaves a supervisor (a plain process, not an MPI one)
 * that takes the state dir's lease (lease.h) under a new epoch, kills
 * whatever earlier jobs of the state dir left on this host, runs the
 * launcher (launch.h) and watches it: the launcher and the master through
 * pidfds, the lease every tick (lease_ms / 8, at most 250 ms).  When the
 * master or the launcher dies, or the master's renewals stop for lease_ms
 * while its process lives (hung), the supervisor kills the whole job
 * (the master, the launcher's session, every process of this host that
 * carries the job's FTFARM_STATE_DIR and FTFARM_EPOCH), waits until it is
 * gone and starts a new one under the next epoch, after a backoff
 * (restart_backoff_ms, doubled up to restart_backoff_max_ms, back to the
 * start after 60 s of healthy running).  The supervisor renews the lease
 * too (seq + 1 every lease_ms / 4), so that the lease stands still only
 * when both it and its master are dead or stopped.
 *
 * When the state dir is gone for a second (removed, or another directory
 * in its place), nobody can reach or stop the job any more: the supervisor
 * kills it and exits, and a standby leaves.
 *
 * When the lease's epoch is no longer its own (a standby took over), it
 * kills its job's remains and steps down, writing nothing but its log.
 * When the lease says stopping (`ftfarm stop`), it restarts nothing more,
 * waits for the launcher to end, kills what is left, sets the lease free
 * and exits.
 *
 * A standby (`ftfarm start --standby`) watches the lease.  It takes over
 * when the lease has expired (its seq still for lease_ms by the standby's
 * own monotonic clock) or when its supervisor and master are both dead on
 * this host, after fencing them: holders on this host are killed (pid and
 * start time checked) and waited for; for holders on another host it
 * waits one more lease period.  Then it goes the way of a restart.  It
 * exits when the lease becomes stopping or free.
 *
 * Files of the state dir: supervisor.log (every step, with its reason),
 * supervisor.pid (the active supervisor), standby.<host>.pid (a standby
 * waiting on <host>), mpirun.pid, lease.
 */
#ifndef FT_SUPERVISE_H
#define FT_SUPERVISE_H

#include <sys/types.h>

#include "cli.h"
#include "lease.h"

#define SUP_PID_FILE "supervisor.pid"
#define SUP_LOG_FILE "supervisor.log"

/* Run the supervisor of C's cluster in this process (--standby: a
 * standby).  How the start went is written to REPORT_FD (a pipe to the
 * waiting `ftfarm start`: one byte, the exit status as a digit, then the
 * text to print) or, when REPORT_FD is -1 (--foreground), printed.
 * Returns the process's exit status. */
int sup_main(struct cli *c, int standby, int report_fd);

/* Read "PID START" from DIR/NAME: the pid (0 if none), its start time in
 * *START.  The process may be gone. */
pid_t sup_pid_file(const char *dir, const char *name,
		   unsigned long long *start);
/* SIGKILL what is left of the session of the launcher SID, started at
 * START: the launcher itself while it lives, and the members of its
 * session, which keep its id after it ended (unless the pid now names
 * another process, a new session of someone else's).  How many were
 * signalled. */
int sup_kill_session(pid_t sid, unsigned long long start);

/* The name of the standby pid file of this host (a new string). */
char *sup_standby_file(void);

/*
 * What a client sees of the supervisor while its master is away: fed
 * with the lease's records as they are read, it says whether a
 * supervisor still holds the lease.
 */
struct sup_watch {
	unsigned long long epoch;	/* (epoch, seq) last seen */
	unsigned long long seq;
	double moved;			/* when it last changed (0: never read) */
};

/* Update W with R (read at monotonic time NOW, LEASE the config's
 * lease_ms in seconds).  1 while a supervisor holds the lease: state
 * active and its supervisor alive on this host, or elsewhere and the
 * record still moving within LEASE; 0 otherwise (free, stopping, no
 * supervisor, or a supervisor dead or silent). */
int sup_watch_alive(struct sup_watch *w, const struct lease_rec *r,
		    double lease, double now);
/* Does a standby of the cluster of STATE_DIR wait to take over (its pid
 * file there, its process alive when on this host)? */
int sup_standby_waiting(const char *state_dir);

#endif

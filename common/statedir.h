/*
 * statedir: a cluster's state directory belongs to its master.
 *
 *   <state_dir>/          0711: others may reach the control socket only
 *     master.lock         held (flock) by the master for its whole life
 *     master.pid          "PID START": which process, for good
 *     mpirun.pid          the same for the launcher
 *     control.sock        the control socket (its own mode)
 *     master.log ...      0600, like everything else in it
 *     batches/            0700
 *
 * A state dir owned by another user, or writable by its group or others,
 * is refused: whoever could write there could make the master write
 * elsewhere or run what they want.  Pid files carry the process's start
 * time, and a pid is only signalled when that still matches: a stale file
 * never names an unrelated process.
 */
#ifndef FT_STATEDIR_H
#define FT_STATEDIR_H

#include <stddef.h>
#include <sys/types.h>

/* Make DIR (and its parents) if missing, mode 0711, and check it is ours:
 * a directory, not a symbolic link, owned by this user, not writable by
 * group or others.  0, or -1 with ERR. */
int sd_prepare(const char *dir, char *err, size_t n);
/* Take DIR's lock for this process's life.  The lock's descriptor, or -1
 * with ERR ("... is in use by the master with pid N"). */
int sd_lock(const char *dir, char *err, size_t n);
/* The pid of the master holding DIR's lock, or 0 when none does. */
pid_t sd_locked_by(const char *dir);
/* Write DIR/NAME: "PID START".  0, or -1 with errno. */
int sd_write_pid(const char *dir, const char *name, pid_t pid);
/* The pid in DIR/NAME if that process still runs (same start time),
 * else 0. */
pid_t sd_read_pid(const char *dir, const char *name);
/* Is PATH (absolute) DIR or inside it?  Symbolic links in PATH's existing
 * part are followed. */
int sd_contains(const char *dir, const char *path);

#endif

/*
 * store: every write of the master into its state dir goes through here.
 *
 * Three duties:
 *  - fencing: before writing, the master makes sure it still holds the
 *    state dir's lease (lease.h); a master whose epoch has passed exits at
 *    once, status 3, without writing anything more;
 *  - syncing: the config's fsync policy.  "none" leaves the bytes to the
 *    kernel; "batch" syncs what was written at most fsync_interval apart;
 *    "always" syncs each round of writes before the lines count as done.
 *    fdatasync runs on a thread of its own: the loop never waits for the
 *    disk;
 *  - failing loudly: a write that fails (ENOSPC, EIO, EROFS, a file or
 *    directory removed under the master) leaves the bytes in memory and
 *    puts the store in a failed state, named in status and master.log:
 *    no new task goes out while it lasts (those running still report,
 *    into memory), and every write is retried each second until one
 *    round succeeds.
 */
#ifndef FT_STORE_H
#define FT_STORE_H

#include <errno.h>
#include <ev.h>
#include <jansson.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "jsonl.h"
#include "lease.h"

#define STORE_LOST_LEASE 3	/* exit status of a master that stepped down */
#define STORE_MAX_FILES 4096	/* files waiting for a sync at once */

struct store_sync;

struct store_ops {
	void *ctx;
	/* Files were synced: what waited for the disk may go on. */
	void (*synced)(void *ctx);
	/* A failure ended: retry what is pending (return -1 if that failed
	 * again: the failure stays). */
	int (*retry)(void *ctx);
	/* The store failed (FAILED 1), or works again after SECONDS. */
	void (*changed)(void *ctx, int failed, double seconds);
};

struct store {
	const struct ft_config *cfg;
	struct store_ops ops;
	struct ev_loop *loop;
	struct lease *lease;		/* NULL: not fenced (tests) */
	unsigned long long epoch;
	double checked;			/* ev_now() of the last lease check */

	/* The failure outstanding, if any. */
	int failed;
	int err;			/* its errno */
	char *path;			/* the file it hit */
	char *what;			/* "write", "fsync", "create" ... */
	double since;			/* wall time */
	uint64_t failures;		/* rounds that failed, in all */
	uint64_t episode_failures;	/* those of the outstanding failure
					 * (or of the last one) */

	/* Syncing. */
	struct store_sync *sync;	/* the thread's state */
	double last_sync;		/* monotonic start of the last round */
	ev_timer sync_timer;
	int want_sync;			/* files wait for the next round */
};

/* Set S up for CFG on LOOP (starts the sync thread unless the policy is
 * none).  0, or -1 with ERR. */
int store_init(struct store *s, const struct ft_config *cfg,
	       struct ev_loop *loop, const struct store_ops *ops, char *err,
	       size_t n);
void store_free(struct store *s);
/* From now on, check LEASE for EPOCH before writing. */
void store_fence(struct store *s, struct lease *lease,
		 unsigned long long epoch);
/* Check the lease now if not done in this loop iteration (or ALWAYS);
 * steps down (exit) when it is lost.  0, or -1 when it cannot be read (a
 * failure recorded). */
int store_check_lease(struct store *s, int always);
/* The lease went to CUR's epoch: leave at once, writing nothing (a line
 * on stderr, which is the launcher's log). */
void store_step_down(const struct lease_rec *cur) __attribute__((noreturn));

/* Write J's complete lines (PATH for messages).  The lines written, or
 * -1 when the write failed (recorded; the rest stays pending).  J is
 * queued for the next sync round when the policy syncs. */
long store_write(struct store *s, struct jsonl *j, const char *path);
/* Lines of J that count as done: written ("none", "batch") or synced
 * ("always"). */
uint64_t store_done_lines(const struct store *s, const struct jsonl *j);
/* The bytes of J's file those lines end at (what it held at open
 * included). */
uint64_t store_done_bytes(const struct store *s, const struct jsonl *j);
/* Is everything J wrote as durable as the policy wants? */
int store_durable(const struct store *s, const struct jsonl *j);
/* J will be closed or freed: forget it (no sync report reaches it). */
void store_forget(struct store *s, struct jsonl *j);
/* Replace PATH by DATA (LEN bytes) atomically: for files that can be
 * made again from the durable ones (summary.json), so not synced.  0, or
 * -1 (failure recorded). */
int store_put(struct store *s, const char *path, const void *data,
	      size_t len);
/* Sync what waits now rather than at the next round's time: a batch's
 * last lines, before it is reported finished, wait for no timer (a round
 * in progress is followed by another as soon as it ends). */
void store_sync_soon(struct store *s);
/* Once a second: retry after a failure. */
void store_tick(struct store *s);

/* A write failed: WHAT ("write", "fsync"...) on PATH with ERR. */
void store_fail(struct store *s, const char *what, const char *path,
		int err);
/* A whole round of writes succeeded: the failure, if any, is over. */
void store_recovered(struct store *s);
/* May new tasks go out (no failure outstanding)? */
int store_ok(const struct store *s);
/* The status entry: {"state": "ok"} or {"state": "failed", "error",
 * "path", "errno", "since", ...} (a new reference). */
json_t *store_status(const struct store *s);

#endif

/*
 * lease: which supervisor and master own a state dir, and since when.
 *
 * <state_dir>/lease holds one fixed-size record:
 *
 *   epoch   bumped by every start of a master (a restart, a takeover);
 *           a master writes into the state dir only while the epoch is
 *           still the one it was started with (its fencing token)
 *   seq     bumped by the master's renewals: a record whose seq stands
 *           still for lease_ms has expired (judged by the observer's own
 *           monotonic clock, so hosts' clocks may differ)
 *   state   free (nobody; a clean stop), active, or stopping (ftfarm stop
 *           asked every supervisor to end)
 *   sup     the supervisor of the epoch: host, pid, process start time
 *   master  its master, once up: host, pid, start time
 *
 * Every change is a compare-and-swap under an flock of the file, written
 * whole with one pwrite and synced; a checksum guards against a torn or
 * damaged record.  Readers need no lock.  The module only reads and
 * writes records: when to take a lease over, and whom to fence first,
 * is the supervisor's business (supervise.h).
 */
#ifndef FT_LEASE_H
#define FT_LEASE_H

#include <stddef.h>
#include <sys/types.h>

#define LEASE_HOST_MAX 64

enum lease_state {
	LEASE_FREE = 0,
	LEASE_ACTIVE,
	LEASE_STOPPING,
};

struct lease_id {
	char host[LEASE_HOST_MAX];	/* "" for none */
	pid_t pid;
	unsigned long long start;	/* ft_proc_start() of pid */
};

struct lease_rec {
	unsigned long long epoch;
	unsigned long long seq;
	enum lease_state state;
	struct lease_id sup;
	struct lease_id master;
};

struct lease {
	int fd;
	char *path;
};

/* Open (create) STATE_DIR/lease.  0, or -1 with ERR. */
int lease_open(struct lease *l, const char *state_dir, char *err, size_t n);
void lease_close(struct lease *l);

/* The current record in R: 0; 1 when there is none yet (R zeroed, state
 * free, epoch 0); -1 with errno (EBADMSG: damaged, ENOENT: the file was
 * removed or replaced since it was opened). */
int lease_read(struct lease *l, struct lease_rec *r);
/* Replace the record by NEXT if it still has EXPECT's epoch, seq and
 * state: 0 when done; 1 when it had changed (CUR, if not NULL, holds
 * what is there); -1 with errno (EWOULDBLOCK: the lock stayed taken for
 * a second, by a process that may be stopped). */
int lease_swap(struct lease *l, const struct lease_rec *expect,
	       const struct lease_rec *next, struct lease_rec *cur);
/* The master's renewal: seq + 1 and MASTER recorded, if the epoch is
 * still EPOCH and the state not free.  0; 1 when the lease is lost (CUR
 * filled); -1 with errno (try again later). */
int lease_renew(struct lease *l, unsigned long long epoch,
		const struct lease_id *master, struct lease_rec *cur);
/* Before a write into the state dir: 0 while EPOCH is the lease's, 1
 * when another epoch has it (CUR filled, if not NULL), -1 with errno when
 * it cannot be told (the state dir's lease gone or unreadable). */
int lease_check(struct lease *l, unsigned long long epoch,
		struct lease_rec *cur);

/* This process: host name, pid, start time. */
void lease_self(struct lease_id *id);
/* Is ID a process of this host? */
int lease_id_local(const struct lease_id *id);
/* Is ID a process of this host that still runs (same start time)? */
int lease_id_alive(const struct lease_id *id);
/* "host:pid" of ID into BUF. */
const char *lease_id_str(const struct lease_id *id, char *buf, size_t n);
const char *lease_state_name(enum lease_state s);

#endif

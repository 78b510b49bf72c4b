/*
 * opstate: the nodes' state that outlives a master, on disk.
 *
 * A master that is killed and restarted (the supervisor), replaced by a
 * standby, or stopped and started again on the same state dir finds each
 * node as it was left: drained or not, given up on and why, its reboots
 * and the failures charged to it.  <state_dir>/nodes.state holds a header
 * line and one line per node, each a JSON object that ends with the
 * CRC-32C of its bytes (jsonl.h), as results.jsonl does:
 *
 *   {"file":"nodes.state","version":1,"epoch":4,"nodes":3,"crc":"..."}
 *   {"node":"node2","state":"drained","drained":true,
 *    "reason":"drained by an operator","reboots":1,
 *    "last_reboot":1767225600.5,"failures":0,"episode_reboots":0,
 *    "last_failure":0,"probe_delay":0,"next_probe":0,"crc":"..."}
 *
 * Writing: the file is replaced whole (a temporary file written and
 * synced, renamed over it, the directory synced) by a thread of its own,
 * so the loop never waits for the disk.  Each save that changes the file
 * is a generation; ops.saved tells the owner when one is on disk (or its
 * write failed), so that an operator's request is answered only then.
 * Writes are fenced (store.h): the lease is checked on the loop before a
 * save is handed over and on the thread before the file is replaced; a
 * master that lost it steps down without writing.  A write that fails is
 * the store's failure (status, master.log, no new tasks) and is tried
 * again from the store's retry hook (opstate_retry).
 *
 * Reading: each line is checked on its own.  A line that is torn, whose
 * checksum does not match, or whose fields are missing, mistyped or out
 * of range is a problem, handed to the caller to report, and is skipped;
 * the other lines still count.  A file of another version is skipped
 * whole.  What a record's state means is the caller's (node health).
 */
#ifndef FT_OPSTATE_H
#define FT_OPSTATE_H

#include <ev.h>
#include <stddef.h>
#include <stdint.h>

#include "store.h"
#include "util.h"

#define OPSTATE_FILE "nodes.state"
#define OPSTATE_VERSION 1
#define OPSTATE_STATE_MAX 16
#define OPSTATE_REASON_MAX 160

/* One node's record. */
struct opstate_rec {
	const char *node;		/* its name (the config's) */
	char state[OPSTATE_STATE_MAX];	/* its state's name ("drained") */
	int drained;			/* an operator's drain stands */
	char reason[OPSTATE_REASON_MAX];	/* why it is in its state */
	int reboots;			/* power cycles, in all */
	double last_reboot;		/* when the last began (epoch), 0 */
	int failures;			/* failures charged in this episode */
	int episode_reboots;		/* ladder reboots in this episode */
	double last_failure;		/* the episode's last event (epoch), 0 */
	double probe_delay;		/* inactive: seconds between probes */
	double next_probe;		/* inactive: its next probe (epoch), 0 */
};

/* A line that was not taken: its number (1-based; 0: the whole file). */
struct opstate_problem {
	int line;
	char what[200];
};

/* What a file held. */
struct opstate_read {
	struct opstate_rec *recs;	/* node names malloc'd */
	size_t n;
	struct opstate_problem *problems;
	size_t nproblems;
	unsigned long long epoch;	/* of the master that wrote it */
	int found;			/* the file exists */
};

/* Append the file's text for RECS (N of them), written under EPOCH, to
 * OUT. */
void opstate_format(const struct opstate_rec *recs, size_t n,
		    unsigned long long epoch, struct ft_buf *out);
/* Read the records of TEXT (LEN bytes) into R (zeroed first); what was
 * not taken is in R's problems. */
void opstate_parse(const char *text, size_t len, struct opstate_read *r);
/* Read the file PATH into R: 0 (a missing file reads as empty, found
 * 0), or -1 with ERR when it exists and cannot be read. */
int opstate_read(const char *path, struct opstate_read *r, char *err,
		 size_t n);
void opstate_read_free(struct opstate_read *r);
/* Are A and B the same record? */
int opstate_rec_equal(const struct opstate_rec *a,
		      const struct opstate_rec *b);

struct opstate;

struct opstate_ops {
	void *ctx;
	/* Generation GEN is on disk (ERR 0), or its write failed with
	 * errno ERR (and the store holds the failure). */
	void (*saved)(void *ctx, uint64_t gen, int err);
};

/* The writer of the file PATH (leftover temporary files of a master
 * killed mid-write are removed), fenced and failing through STORE, its
 * news through OPS on LOOP.  NULL with ERR when its thread cannot start. */
struct opstate *opstate_open(const char *path, struct ev_loop *loop,
			     struct store *store,
			     const struct opstate_ops *ops, char *err,
			     size_t n);
/* Write everything pending, stop the thread, free O (NULL is fine). */
void opstate_close(struct opstate *o);
/* Save RECS (N): the file's new text goes to the thread unless it is the
 * text last handed over.  The generation that holds them. */
uint64_t opstate_save(struct opstate *o, const struct opstate_rec *recs,
		      size_t n);
/* The last generation handed over, and the last known on disk. */
uint64_t opstate_handed(const struct opstate *o);
uint64_t opstate_durable(const struct opstate *o);
/* Move the file aside to PATH.damaged (what it held was reported as
 * damaged), so that the next save does not write over the evidence.  0,
 * or -1 with errno. */
int opstate_set_aside(struct opstate *o);
/* The store's retry: 0 when no write of O has failed; -1 while the last
 * one has (it is handed over again now). */
int opstate_retry(struct opstate *o);

#endif

/*
 * batches: submitted batches and their results.
 *
 * A batch lives in <state_dir>/batches/<id>/: batch.json as submitted,
 * results.jsonl with one line per task (written once, when the task ends),
 * and summary.json when the batch has finished: when every line of it is
 * on disk as the fsync policy wants (store.h).  Until then the batch is
 * "finishing", and the counts a client sees are those of lines written.
 * A restarted master replays the batches without a summary (journal.h).  A job batch's tasks come
 * from its plugin, phase by phase (jobs.h).  The scheduler holds the
 * tasks; this module owns their specs (the batch's bytes, or each phase's
 * printed tasks) until the batch ends, turns the tasks' outcomes into
 * result lines, and tells its owner when tasks were queued and when a
 * batch has finished.
 *
 * A finished batch keeps only its counts in memory, and only the most
 * recent ones; older ones are read back from their summary.json when asked
 * for.  A batch id is reserved when its bytes arrive and the batch is
 * accepted (or the id released) once they have been read (intake.h).
 */
#ifndef FT_BATCHES_H
#define FT_BATCHES_H

#include <jansson.h>
#include <stdint.h>

#include "batchtext.h"
#include "config.h"
#include "events.h"
#include "plugins.h"
#include "proto.h"
#include "sched.h"
#include "stats.h"

struct batch;
struct job;

struct batches_ops {
	void *ctx;
	/* New tasks are in the scheduler's queue. */
	void (*queued)(void *ctx);
	/* Batch B has finished (every result line written). */
	void (*finished)(void *ctx, struct batch *b);
	/* Task INDEX of batch BATCH is the gang job JOB: run it, then tell
	 * batches_gang_ended. */
	void (*gang)(void *ctx, uint32_t batch, uint32_t index,
		     const json_t *job);
	/* Batch BATCH was cancelled: end its gang tasks (failed). */
	void (*gang_cancel)(void *ctx, uint32_t batch);
	/* More result lines of batch ID, which clients stream
	 * (batches_watch), count as done. */
	void (*results)(void *ctx, long id);
	/* Batch ID was forgotten: remove its directory DIR (a new string,
	 * taken over; renamed already), once batches/last_id says LAST_ID
	 * (0: no need; ID, when it was the newest batch). */
	void (*forget)(void *ctx, long id, char *dir, long last_id);
};

struct store;

/* A batch ended at AT (wall clock): forgotten retain_s later. */
struct batch_ended {
	long id;
	double at;
};

struct batches {
	const struct ft_config *cfg;
	struct store *store;
	const struct ft_plugins *pl;
	struct sched *sched;
	struct events *ev;
	struct batches_ops ops;
	struct batch **v;		/* ids first, first+1, ...; NULL: gone */
	long first;			/* the id of v[0] */
	int n, cap;
	long next;			/* the next id to hand out, 0: not known */
	int nfinished;			/* finished batches in memory */
	uint64_t shown;			/* bumped when what status shows of a
					 * batch (done counts, state) moves */
	struct stats *stats;		/* counts by task type, or NULL */
	double trim_due;		/* when freed memory goes back, 0: no need */
	long *eager;			/* batches with lines to write at once */
	int neager, capeager;
	/* The batches ended, in the order they ended, to forget: a queue
	 * from ends[ends_head]. */
	struct batch_ended *ends;
	size_t ends_head, nends, capends;
	uint64_t forgotten;		/* batches forgotten so far */
};

void batches_init(struct batches *bs, const struct ft_config *cfg,
		  const struct ft_plugins *pl, struct sched *sched,
		  struct events *ev, struct store *store,
		  const struct batches_ops *ops);
/* Reserve the next id for a batch being read; *DIR its directory (a new
 * string, not yet made). */
long batches_reserve(struct batches *bs, char **dir);
/* The batch reserved as ID was refused: forget it and its directory. */
void batches_release(struct batches *bs, long id);
/* Accept the batch reserved as ID: BT read and checked (taken over), with
 * its JOB and the job's first TASKS when it is a job batch (taken over on
 * success), sent with the submitter's TOKEN (or NULL).  Its results.jsonl
 * exists (intake.h).  0, or -1 with ERR (BT still the caller's). */
int batches_accept(struct batches *bs, long id, struct batch_text *bt,
		   struct job *job, json_t *tasks, const char *token,
		   char *err, size_t n);
/* Does every batch BT runs after ("after", "after_any") exist?  0, or -1
 * with ERR (bad input: "after[0]: no batch 12"). */
int batches_check_after(const struct batches *bs, const struct batch_text *bt,
			char *err, size_t n);
/* Reserve, read and accept BATCH (a checked object) in the caller: its id,
 * or -1 with ERR. */
long batches_submit(struct batches *bs, json_t *batch, char *err, size_t n);

/* Task TID ended with result R, run by WORKER on HOST. */
void batches_record(struct batches *bs, uint64_t tid, int worker,
		    const char *host, const struct proto_result *r);
/* Is JOB (a checked "job" object, or NULL) a gang job: one gang task
 * (master/gangs.h) rather than tasks planned by a task plugin? */
int batches_is_gang(const struct ft_plugins *pl, const json_t *job);
/* Gang task INDEX of batch BATCH ended after ATTEMPT attempts: OK (its
 * output complete) or not for REASON, in SECONDS, with FIGURES (a JSON
 * object, borrowed: in the result line and, for the batch's one gang
 * task, its summary). */
void batches_gang_ended(struct batches *bs, uint32_t batch, uint32_t index,
			uint32_t attempt, int ok, double seconds,
			json_t *figures, const char *reason);
/* Task INDEX of batch BATCH failed for good after ATTEMPTS, for REASON. */
void batches_fail(struct batches *bs, uint32_t batch, uint32_t index,
		  uint32_t attempts, const char *reason);
/* Cancel batch ID: its queued tasks are dropped and its running ones
 * killed, each with a failed result "cancelled" (the results so far
 * stay); the batch then finishes in state "cancelled".  0 with *QUEUED
 * and *RUNNING the tasks dropped and killed, or -1 with ERR (no such
 * batch, or it has finished). */
int batches_cancel(struct batches *bs, long id, uint64_t *queued,
		   uint64_t *running, char *err, size_t n);
/* What an add did. */
struct batches_added {
	uint32_t added;			/* tasks new to the batch (0: a resend) */
	uint32_t total;			/* the batch's tasks now */
	uint64_t lines;			/* its record's number (batches_add_done) */
	int status;			/* for a refusal: 2 bad input, 1 else */
};
/* Add the tasks of TEXT (LEN bytes of {"tasks": [...]}, malloc'd: taken
 * over) to the open batch ID as its tasks FIRST on, and queue them.
 * Tasks come in order: an add of tasks the batch has already (a client's
 * resend) adds nothing, one past its end is refused.  Its record is
 * written first (adds.h).  0 with OUT, or -1 with ERR and OUT->status. */
int batches_add(struct batches *bs, long id, uint32_t first, char *text,
		size_t len, struct batches_added *out, char *err, size_t n);
/* Is record LINES of batch ID's adds as durable as the policy wants (or
 * the batch over)? */
int batches_add_done(const struct batches *bs, long id, uint64_t lines);
/* Close the open batch ID: no more tasks; it ends once they have.  0
 * with *TOTAL its tasks, or -1 with ERR. */
int batches_seal(struct batches *bs, long id, uint32_t *total, char *err,
		 size_t n);
/* DELTA (+1, -1) clients stream batch ID's results: its lines are then
 * written at the loop's next turn, and ops.results tells of them. */
void batches_watch(struct batches *bs, long id, int delta);
/* The bytes of batch ID's results.jsonl that count as done (store.h),
 * UINT64_MAX for the whole file (it has finished); *OVER when it has. */
uint64_t batches_results_done(const struct batches *bs, long id, int *over);
/* Write and count the lines of the batches clients stream (the loop
 * calls it after each poll). */
void batches_flush_eager(struct batches *bs);
/* Close the open batches nobody has added to or streamed for the
 * config's open_idle_s (the cron calls it). */
void batches_open_tick(struct batches *bs, double now);

/* An instance of task INDEX of batch BATCH was lost and queued again. */
void batches_reassigned(struct batches *bs, uint32_t batch);
/* The batch with id ID still in memory, or NULL. */
struct batch *batches_find(const struct batches *bs, long id);
/* The status row of batch ID, from memory or its summary.json (a new
 * reference), or NULL when there is no such finished batch. */
json_t *batches_lookup(const struct batches *bs, long id, int *finished);
/* Forget the batches that ended retain_s ago or more (NOW: wall clock;
 * the cron calls it every second).  The number forgotten. */
int batches_retain(struct batches *bs, double now);
/* Forget batch ID now (`ftfarm forget`): it must have ended.  0, or -1
 * with ERR. */
int batches_forget(struct batches *bs, long id, char *err, size_t n);
/* Was batch ID given and forgotten since (its directory gone)? */
int batches_forgotten(const struct batches *bs, long id);

/* Write pending result lines of unfinished batches, and finish those
 * whose lines are all on disk.  0, or -1 when lines are still pending
 * (the store has the failure). */
int batches_flush(struct batches *bs);
/* Give the memory finished batches freed back to the system once no
 * batch has finished for a while (the loop calls it every second). */
void batches_trim(struct batches *bs, double now);

/* What a replay found. */
struct replay_stats {
	int batches;			/* unfinished batches replayed */
	int finished;			/* of them, finished by the replay */
	uint64_t done, pending;		/* their tasks */
	int cuts;			/* lines cut out of results files */
};
/* Replay the unfinished batches of the state dir (journal.h), before any
 * new batch.  0, or -1 with ERR (the batches dir cannot be read). */
int batches_replay(struct batches *bs, struct replay_stats *st, char *err,
		   size_t n);
/* The id of the batch submitted with TOKEN, or 0. */
long batches_by_token(const struct batches *bs, const char *token);
void batches_close(struct batches *bs);

long batch_id(const struct batch *b);
int batch_finished(const struct batch *b);
/* Its tasks in all so far, and those ended. */
uint32_t batch_total(const struct batch *b);
uint32_t batch_ended(const struct batch *b);
/* Accepted (not a reservation still being read)? */
int batch_listed(const struct batch *b);
/* The batch's row of the status answer (a new reference). */
json_t *batch_json(const struct batch *b);

#endif

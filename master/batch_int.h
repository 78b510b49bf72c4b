/*
 * batch_int: a batch's insides, shared by the files of the batches
 * module: batches.c (a batch's life in a running master), openb.c (open
 * batches: adds and the close), retain.c (ended batches forgotten),
 * cancel.c (a batch cancelled) and replay.c (batches rebuilt from the
 * state dir by a master that starts).  batches.c is the lowest: the
 * others call it and it calls none of them (a batch that ends is queued
 * in bs->ends for retain.c to forget).  Nothing else includes it: the
 * batches' API is batches.h.
 */
#ifndef FT_BATCH_INT_H
#define FT_BATCH_INT_H

#include <jansson.h>
#include <stdint.h>

#include "batches.h"
#include "jsonl.h"

struct deps;
struct job;
struct journal_results;

/* A batch's life: its bytes being read; waiting for the batches it runs
 * after; its tasks running; every task ended, its last lines on their
 * way to the disk; finished (summary.json written). */
enum bstate { B_INTAKE = 1, B_WAITING, B_RUNNING, B_ENDING, B_FINISHED };

struct batch {
	long id;
	enum bstate state;
	char *name;
	char *dir;
	char *token;			/* the submitter's, or NULL */
	uint32_t total, ok, failed;	/* ended tasks (results in memory) */
	uint32_t d_ok, d_failed;	/* of them, lines done (store.h) */
	struct ft_buf kinds;		/* 'o'/'f' per line not yet done */
	size_t kinds_off;		/* kinds consumed at the front */
	uint64_t counted;		/* lines of out counted as done */
	uint32_t reassigned;		/* instances lost and queued again */
	double cpu_s, task_s;		/* its results' usage, summed: CPU
					 * seconds and wall seconds */
	uint64_t max_rss;		/* and the largest peak RSS, bytes */
	double t0, seconds;		/* monotonic start, duration */
	char *results;			/* results.jsonl's path */
	struct jsonl out;		/* results.jsonl, until finished */
	char *text;			/* the specs of a batch of tasks */
	char **phases;			/* the specs of each phase of a job */
	int nphases;
	const struct ft_plugin *plugin;	/* the planner of a job batch, or NULL */
	char *gang;			/* the job type of a gang batch, or NULL */
	json_t *gang_job;		/* its job, until handed over */
	struct job *job;		/* while running */
	int cancelled;			/* an operator cancelled it */
	int priority;			/* "priority": its tasks' order */
	char *error;			/* why its job failed, once finished */
	json_t *result;			/* its job's summary, once finished */
	/* An open batch (batch.h): more tasks may come until it is closed;
	 * tasks.jsonl is their journal (adds.h). */
	int open;
	struct jsonl adds;		/* tasks.jsonl, once opened */
	uint64_t records;		/* put in it by this master */
	struct chunk *chunks;		/* the added tasks' specs */
	int nchunks, capchunks;
	double touched;			/* monotonic: last add or watch */
	int watchers;			/* clients streaming its results */
	int eager;			/* on the eager list (batches_eager) */
	/* Dependencies (batch.h).  Its tasks that wait for others of it: */
	struct deps *deps;		/* NULL: none */
	int draining;			/* in drain(): news are queued, not run */
	struct inputs *inputs;		/* where its lines are, specs made
					 * with values (inputs.h), or NULL */
	char **stripped;		/* specs made without their "after" */
	int nstripped;
	/* The batches it runs after, and its tasks while it waits: */
	json_t *after, *after_any;	/* arrays of ids, or NULL */
	struct batch_text *held;	/* B_WAITING: its tasks, not queued */
};

/* The specs of one add: tasks FIRST .. FIRST + COUNT - 1 point into
 * TEXT, freed once LEFT of them are left to end. */
struct chunk {
	char *text;
	uint32_t first, count, left;
};

/* Queue the tasks of BT (batch_text.h) as B's next ones, but those DONE
 * has (NULL: none); tasks with an "after" are held (deps.h). */
void batch_queue_text(struct batches *bs, struct batch *b,
		      struct batch_text *bt, const struct journal_results *done);
/* The same for an add of an open batch, keeping its text. */
void batch_queue_add(struct batches *bs, struct batch *b,
		     struct batch_text *bt, const struct journal_results *done);
/* Queue TASKS (a phase of B's job) but those DONE has.  0, or -1 with
 * ERR (a task too big to send). */
int batch_queue_phase(struct batches *bs, struct batch *b, json_t *tasks,
		      const struct journal_results *done, char *err, size_t n);
/* B's tasks are BT (taken over): it waits for the batches it runs
 * after. */
void batch_hold(struct batch *b, struct batch_text *bt);
/* Run or cancel the batches whose wait is over. */
void batch_resolve_waiting(struct batches *bs);
/* B, waiting, is cancelled before it ran (WHY): every task fails without
 * running, each with its line. */
void batch_cancel_waiting(struct batches *bs, struct batch *b,
			  const char *why);
/* Queue or fail B's tasks its deps handed back. */
void batch_drain(struct batches *bs, struct batch *b);
/* Write what B holds and finish it once every line is durable. */
void batch_settle(struct batches *bs, struct batch *b);
/* Batch ID ended at AT (wall clock): queue it to be forgotten retain_s
 * later (batches_retain). */
void batch_retain(struct batches *bs, long id, double at);
/* Close the open batch B: no more tasks (recorded in its tasks.jsonl);
 * it ends once they have. */
void batch_seal(struct batches *bs, struct batch *b);
/* Every task of B has ended: write its last lines and finish it. */
void batch_ending(struct batches *bs, struct batch *b);
/* Free B and everything it holds (it is out of bs->v already). */
void batch_free(struct batch *b);
/* Drop the forgotten batches at the front of bs->v. */
void batches_trim_front(struct batches *bs);
/* B's usage as its trusted result lines R say (a master that starts). */
void batch_usage_replayed(struct batch *b, const struct journal_results *r);
/* The name of state S in status and batch entries. */
const char *batch_state_name(enum bstate s);

#endif

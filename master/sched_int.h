/*
 * sched_int: the scheduler's insides, shared by its four files:
 * sched.c (tasks, instances, workers, deadlines: the API of sched.h),
 * sched_queue.c (the queues: a FIFO per priority and shape),
 * sched_place.c (placement: which queued task a worker takes, wide
 * tasks, nodes kept for them) and sched_inst.c (instances: each
 * worker's ring of instances, what it is charged of its node's memory,
 * starting an instance).  sched.c calls the other three and
 * sched_place.c calls sched_queue.c and sched_inst.c; those two call
 * none of the others.  Nothing else includes it.
 */
#ifndef FT_SCHED_INT_H
#define FT_SCHED_INT_H

#include <stdint.h>

#include "sched.h"

/* One instance a worker holds, in dispatch order. */
struct inflight {
	uint64_t tid;
	uint64_t seq;
	uint32_t attempt;
	uint32_t mem;			/* MiB its task needs */
	int lead;			/* sent to a worker that held nothing */
	double start;
	double deadline;
};

struct sworker {
	int up;
	int paused;
	int node;			/* its node */
	int holder;			/* the worker whose wide task holds it, -1 */
	int wide;			/* its instance is a wide task */
	uint64_t gpus;			/* that task's GPUs */
	uint32_t mem;			/* MiB charged: the largest need of its
					 * instances ... */
	uint32_t mem_n;			/* ... and how many need that much */
	struct inflight *ring;		/* circular, oldest at head */
	int cap, head, n;
	int window;
	int fill;			/* instances it held after its last take */
	double ewma;			/* seconds per task, 0 = not measured */
	double heard;			/* its last result, or its first
					 * instance after it held none */
	uint32_t last_batch;		/* batch and kind of its last result */
	uint8_t last_kind;
	double last;			/* seconds of its last finished task */
	uint32_t trial;			/* the trial it took part in (sched's
					 * trial_gen), 0: none */
	int slow;
	uint64_t slow_seq;
	double slow_since;
};

/* Tasks live in chunks of CHUNK; a chunk all of whose tasks have ended is
 * freed by sched_reclaim, so that memory follows the work in flight, not
 * the history. */
#define CHUNK_SHIFT 12
#define CHUNK (1u << CHUNK_SHIFT)

struct chunk {
	uint32_t open;			/* its tasks not yet ended */
	uint32_t *mem;			/* MiB each task needs, or NULL when
					 * none of them needs any */
	uint32_t *treq;			/* seconds each asks, or NULL when
					 * none of them asks any */
	struct sched_task t[CHUNK];
};

/* A FIFO of task IDs, of one shape (cpus, gpus) within one priority;
 * stale entries (tasks no longer queued) are skipped at its head. */
struct fifo {
	uint64_t *q;			/* circular */
	size_t cap, head, len;
	int cpus, gpus;
	int tb;				/* time requests: 0 none, else those
					 * of 2^(tb-2) < treq <= 2^(tb-1) */
	uint64_t resv;			/* its head's reservation: that task ... */
	int resv_node;			/* ... kept this node (when it still does) */
};

/* The tasks of one priority; v[0] holds the one-slot tasks. */
struct level {
	int prio;
	struct fifo *v;
	int n;
};

struct snode {
	int *w;				/* its workers */
	int nw, capw;
	int ngpus;
	uint64_t gpus_busy;		/* bit i: GPU i is some task's */
	uint64_t mem;			/* MiB for tasks, 0: not counted */
	uint64_t mem_used;		/* MiB charged to its workers */
	uint64_t resv;			/* the wide task it is kept for, or 0 */
	double end;			/* when it ends (sched_set_end), 0:
					 * never */
};

struct sched {
	struct sched_params p;
	struct sched_ops ops;
	struct chunk **chunks;		/* task ID i is chunks[(i-1) / CHUNK] */
	size_t nchunks, ccap;
	size_t *done;			/* chunks whose tasks have all ended */
	size_t ndone, dcap;
	uint64_t ntasks;
	struct level *lv;		/* by priority, highest first */
	int nlv;
	struct fifo *plain;		/* that of one-slot tasks of priority 0,
					 * or NULL (found again after a move) */
	struct snode *nodes;
	int nnodes;
	int wake;			/* see sched_wake */
	int mem_waits;			/* a task waits for memory to free */
	double now;			/* the time of the last take or tick */
	size_t nqueued;			/* tasks in TASK_QUEUED */
	uint64_t nopen;			/* tasks neither done nor failed */
	struct sworker *w;
	int nw;
	int nup;			/* workers up */
	uint64_t seq;			/* last dispatch sequence number */
	uint64_t newest_done;		/* highest sequence number completed */
	double mean_service;		/* over all workers */
	double rtt;			/* seconds from a dispatch to its result,
					 * less the task's own time */
	double straggle_at;		/* no instance is a straggler before */
	int pass_left;			/* takes left in a pass (sched_pass) */
	uint32_t probe_batch;		/* the batch and kind of the latest */
	uint8_t probe_kind;		/* result, ... */
	int probe_n;			/* ... results of theirs in a row ... */
	double probe_secs;		/* ... and the longest of the first
					 * PROBE_N (see probe_window) */
	uint32_t trial_batch;		/* the batch and kind on trial ... */
	uint8_t trial_kind;
	int trial_out;			/* ... the workers that took its tasks */
	uint32_t trial_gen;		/* ... its number: 1, 2, ... */
	double trial_start;		/* ... and when the first did */
};


/* Task TID, which must be live (not reclaimed). */
static inline struct sched_task *
sched_task_of(const struct sched *s, uint64_t tid)
{
	return &s->chunks[(tid - 1) >> CHUNK_SHIFT]->t[(tid - 1) & (CHUNK - 1)];
}

/* The MiB task TID (live) needs. */
static inline uint32_t
sched_mem_of(const struct sched *s, uint64_t tid)
{
	const struct chunk *c = s->chunks[(tid - 1) >> CHUNK_SHIFT];

	return c->mem ? c->mem[(tid - 1) & (CHUNK - 1)] : 0;
}

/* The seconds task TID (live) asks its node to have left. */
static inline uint32_t
sched_treq_of(const struct sched *s, uint64_t tid)
{
	const struct chunk *c = s->chunks[(tid - 1) >> CHUNK_SHIFT];

	return c->treq ? c->treq[(tid - 1) & (CHUNK - 1)] : 0;
}

/* Instance I of W's ring, 0 the oldest. */
static inline struct inflight *
sched_ring_at(struct sworker *w, int i)
{
	return &w->ring[(w->head + i) % w->cap];
}

/* Has NODE TREQ seconds left at S's now (or no end)? */
static inline int
sched_time_fits(const struct sched *s, int node, uint32_t treq)
{
	double end = s->nodes[node].end;

	return treq == 0 || end == 0 || end - s->now >= treq;
}

/* ---- sched_queue.c ---- */

/* F's first task still queued (the stale ones before it dropped), or 0. */
uint64_t sched_fifo_head(struct sched *s, struct fifo *f);
/* Drop F's head (just found by sched_fifo_head). */
void sched_fifo_drop(struct fifo *f);
/* The FIFO of task TID's priority and shape, made when missing. */
struct fifo *sched_fifo_of(struct sched *s, uint64_t tid);
/* Queue TID, whose record is T, at the back (or the FRONT) of its FIFO. */
void sched_queue_push(struct sched *s, const struct sched_task *t,
		      uint64_t tid, int front);
void sched_queues_free(struct sched *s);

/* ---- sched_inst.c ---- */

/* Remove instance I of W's ring. */
void sched_ring_remove(struct sworker *w, int i);
/* The index in W's ring of instance (TID, ATTEMPT), or -1. */
int sched_ring_find(struct sworker *w, uint64_t tid, uint32_t attempt);

/* May a task needing MEM MiB start on WORKER as far as its node's memory
 * goes (what the node's workers are charged)? */
int sched_mem_fits(const struct sched *s, int worker, uint32_t mem);
/* W's charge, its instances having changed: the largest need left. */
void sched_charge_recount(struct sched *s, struct sworker *w);
/* W gave up an instance needing MEM MiB (its ring has lost it).  When
 * its charge falls and a task waits for memory, S wakes (sched_wake). */
void sched_charge_drop(struct sched *s, struct sworker *w, uint32_t mem);

/* Start an instance of TID on WORKER and describe it in OUT. */
void sched_start_instance(struct sched *s, int worker, uint64_t tid,
			  double now, struct sched_pick *out, int duplicate);

/* ---- sched_place.c ---- */

enum pick { PICK_NONE, PICK_ONE, PICK_HOLD };

/* One task for WORKER: of the highest priority that has one for it,
 * a wide task first (it starts here, or keeps a node, this one or
 * another), else the oldest one-slot task. */
enum pick sched_place_pick(struct sched *s, int worker, double now,
			   struct sched_pick *out);
/* WORKER's node is kept for a wide task: start it here if it fits.
 * 1: it started; 0: the node is not kept; -1: kept, it waits. */
int sched_place_kept(struct sched *s, int worker, double now,
		     struct sched_pick *out);

#endif

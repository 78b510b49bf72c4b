/*
 * sched: the master's task scheduler, free of MPI and I/O so that it can be
 * tested on its own.
 *
 * Tasks get global IDs (1, 2, ...) in submission order and wait in a queue.
 * Their records live in chunks that are freed once all their tasks have
 * ended (sched_reclaim), so memory follows the tasks open, not the
 * history; a late result of a reclaimed task is a duplicate.
 * Each time a task is handed to a worker it gets an *instance*: an attempt
 * number and a dispatch sequence number (TOP-C's task ID).  A task is done
 * the first time any of its instances reports; every other instance is then
 * cancelled and any later report of it is a duplicate.
 *
 * Lost instances (worker down, deadline passed) count as failures: the task
 * goes back to the front of the queue, or fails for good after max_attempts
 * failures.  Workers hold a window of instances sized from their measured
 * service time, so no-op tasks stream while long tasks go one at a time;
 * a wide window is refilled once half of it has run (fewer, larger
 * messages).
 *
 * The TOP-C rule finds slow workers: one whose oldest instance lags the
 * newest completed sequence number by more than 3 x the tasks in flight is
 * slow; still on the same instance slow_timeout later, it is reported hung.
 * When the queue is empty, idle workers get duplicates of the oldest
 * stragglers and the first result wins.
 *
 * Resources.  Workers belong to nodes (sched_set_nodes); a node may have
 * GPUs, numbered 0..n-1 here (sched_set_gpus).  A task needs cpus slots of
 * one node and gpus of its GPUs (struct sched_need); a task needing more
 * than one slot or any GPU is *wide*.  A wide task starts on an idle
 * worker when cpus - 1 other idle workers of its node and gpus free GPUs
 * are there too; those workers are then held (they take nothing) and the
 * GPUs are its own until its instance ends.  Its worker takes nothing else
 * meanwhile, and wide tasks get no straggler copies.
 *
 * Memory.  A node may have memory (sched_set_mem, MiB; 0: not counted)
 * and a task may need some (its need's mem).  A worker is charged the
 * largest need of the instances it holds (it runs them one at a time), and
 * a node never has more charged than it has: a task starts on a worker
 * only when its need fits beside what the node's other workers hold.
 * A one-slot task's need is checked at the head of its FIFO: a head that
 * does not fit on a worker's node now keeps that worker waiting (the FIFO
 * keeps its order), so that the head starts as soon as memory frees.
 * Tasks needing memory get no straggler copies.
 *
 * Time.  A node may end at a known time (sched_set_end: its allocation's
 * end) and a task may ask for time (its need's treq, seconds): it starts
 * only on a node that ends later than that from now, or never ends.  Such
 * tasks wait in FIFOs of their own, one per power of two of the request,
 * and are placed like wide ones: a task that no node can take now waits
 * without holding up the others, and sched_unmet tells what is asked
 * that no node in service can give (a new allocation must).  They get no
 * straggler copies.
 *
 * Order.  Tasks wait by priority (higher first).  Within a priority each
 * shape (cpus, gpus) has its own FIFO, so that a worker looks only at the
 * head of each; wide tasks go before one-slot ones.  A wide task at the
 * head of its FIFO that cannot start now reserves one node (the one with
 * the most free slots among those that could ever hold it; one
 * reservation per node): that node finishes what it runs and takes
 * nothing else until the reserved task starts, so a stream of one-slot
 * tasks cannot overtake it forever; the other nodes go on meanwhile.
 */
#ifndef FT_SCHED_H
#define FT_SCHED_H

#include <stddef.h>
#include <stdint.h>

enum task_state { TASK_QUEUED = 1, TASK_RUNNING, TASK_DONE, TASK_FAILED };

struct sched_task {
	const char *spec;		/* JSON text (the caller's); NULL once ended */
	uint32_t spec_len;
	uint32_t batch;			/* the caller's batch number */
	uint32_t index;			/* index in the batch */
	float timeout;			/* seconds an instance may take */
	uint8_t state : 3;		/* enum task_state */
	uint8_t ninst : 4;		/* live instances (at most 2) */
	uint8_t nocopy : 1;		/* no straggler copy: it writes files */
	uint8_t kind;			/* the caller's label (a task type), 0 by default */
	uint8_t gpus;			/* GPUs it needs */
	uint8_t cpus_m1;		/* slots it needs, less one */
	int8_t prio;			/* its batch's priority */
	uint8_t failures;		/* instances lost (max_attempts <= 100) */
	uint16_t attempts;		/* instances started */
	/* (Its memory need is kept beside its chunk, sched_int.h: the
	 * record stays 32 bytes, a batch of a million no-op tasks 32 MB.) */
};

/* What a task needs and how urgent it is. */
struct sched_need {
	int cpus;			/* slots of one node, 1..SCHED_CPUS_MAX */
	int gpus;			/* GPUs of that node, 0..SCHED_GPUS_MAX */
	int prio;			/* SCHED_PRIO_MIN..SCHED_PRIO_MAX, higher first */
	uint32_t mem;			/* MiB of its node's memory, 0: none */
	uint32_t treq;			/* seconds its node must have left
					 * (sched_set_end), 0: none */
	int nocopy;			/* no straggler copy of it: it writes
					 * files of its own (each attempt its
					 * own file: a copy would leave one) */
};

#define SCHED_CPUS_MAX 256
#define SCHED_GPUS_MAX 64
#define SCHED_PRIO_MIN (-128)
#define SCHED_PRIO_MAX 127

/* Why a wide task at the head of its queue waits. */
enum sched_wait_why {
	SCHED_WAIT_NO_NODE = 1,		/* no node in service has that much */
	SCHED_WAIT_RESERVED,		/* its node drains for it */
	SCHED_WAIT_BUSY,		/* every node that could is busy or kept */
};

struct sched_wait {
	uint32_t batch, index;		/* the task */
	int cpus, gpus;
	uint32_t mem;			/* MiB */
	uint32_t treq;			/* seconds it asks (time request) */
	int node;			/* its reserved node, or -1 */
	enum sched_wait_why why;
};

/* One task to send to a worker. */
struct sched_pick {
	uint64_t tid;
	uint32_t attempt;
	const struct sched_task *task;
	int duplicate;			/* a copy of a straggler */
	int cpus;			/* slots it holds (its worker's and others) */
	uint64_t gpus;			/* its GPUs: bit i is GPU i of its node */
};

struct sched_params {
	int max_attempts;		/* failures before a task fails for good */
	double slow_timeout;		/* seconds a slow worker may stay on one task */
	double grace;			/* added to every instance deadline */
	double window_target;		/* seconds of work to keep queued per worker */
	int window_max;			/* most instances in flight per worker */
	double prefetch_below;		/* tasks shorter than this: 2 in flight */
	double dup_min;			/* a straggler must have run this long */
};

/* What the scheduler tells its owner.  Any of these may be NULL. */
struct sched_ops {
	void *ctx;
	/* Instance (TID, ATTEMPT) on WORKER was lost for REASON; the task was
	 * queued again. */
	void (*reassigned)(void *ctx, uint64_t tid, uint32_t attempt, int worker,
			   const char *reason);
	/* Task TID failed for good. */
	void (*failed)(void *ctx, uint64_t tid, const char *reason);
	/* WORKER should drop instance (TID, ATTEMPT). */
	void (*cancel)(void *ctx, int worker, uint64_t tid, uint32_t attempt);
	/* WORKER became slow (TOP-C rule) on TID. */
	void (*slow)(void *ctx, int worker, uint64_t tid);
	/* WORKER stayed slow too long: the owner should declare it dead. */
	void (*hung)(void *ctx, int worker, uint64_t tid, double seconds);
};

enum sched_verdict {
	SCHED_ACCEPTED = 1,		/* first result of the task: record it */
	SCHED_DUPLICATE,		/* the task already ended: drop it */
	SCHED_UNKNOWN,			/* no such task: drop it and complain */
};

struct sched;

void sched_params_default(struct sched_params *p);
struct sched *sched_new(int nworkers, const struct sched_params *p,
			const struct sched_ops *ops);
void sched_free(struct sched *s);

/* Put WORKER i on node NODE_OF[i] (0..NNODES-1); by default every worker
 * is on node 0.  Call before any task is taken. */
void sched_set_nodes(struct sched *s, const int *node_of, int nnodes);
/* A node more (a node that joined): its index.  It has no worker and no
 * GPU yet. */
int sched_add_node(struct sched *s);
/* A worker more, on NODE, down until sched_worker_up: its index. */
int sched_add_worker(struct sched *s, int node);
/* NODE has N GPUs (0..SCHED_GPUS_MAX). */
void sched_set_gpus(struct sched *s, int node, int n);
/* NODE has MIB mebibytes of memory for its tasks (0: not counted, the
 * default).  It may change while tasks run (an agent back with less). */
void sched_set_mem(struct sched *s, int node, uint64_t mib);
/* NODE ends at END (the clock of sched_take's NOW), 0: never.  Tasks
 * asking more time than it has left then start elsewhere. */
void sched_set_end(struct sched *s, int node, double end);
/* The longest time request of a task that heads its queue and that no
 * node in service could take for want of time at NOW (0: none). */
uint32_t sched_unmet(struct sched *s, double now);
/* The MiB charged on NODE now (what its workers' instances need). */
uint64_t sched_mem_used(const struct sched *s, int node);
/* Queue a task needing NEED (NULL: one slot, priority 0); otherwise as
 * sched_add. */
uint64_t sched_add_need(struct sched *s, uint32_t batch, uint32_t index,
			const char *spec, uint32_t len, double timeout,
			const struct sched_need *need);
/* Workers held by a wide task, or reservations, were let go since the
 * last call: the owner should offer tasks to every idle worker. */
int sched_wake(struct sched *s);
/* WORKER is held by another worker's wide task (or -1 if not). */
int sched_holder(const struct sched *s, int worker);
/* Fill OUT with up to MAX wide tasks that head their queues and cannot
 * start now, and why.  Returns the count. */
int sched_waiting(struct sched *s, struct sched_wait *out, int max);

/* Queue a task; SPEC (LEN bytes) stays the caller's and must live until
 * the task has ended.  Returns its ID. */
uint64_t sched_add(struct sched *s, uint32_t batch, uint32_t index,
		   const char *spec, uint32_t len, double timeout);
/* Label task TID with KIND (the caller's: its type, for counts). */
void sched_set_kind(struct sched *s, uint64_t tid, uint8_t kind);
/* Task TID, or NULL when there is none, or when it ended and its memory
 * was reclaimed. */
const struct sched_task *sched_task(const struct sched *s, uint64_t tid);
/* Free the memory of tasks that have ended (whole chunks of them).  An
 * ended task's record stays readable until then: call it where nobody
 * still needs one (the cron).  Returns how many chunks were freed. */
size_t sched_reclaim(struct sched *s);

/* WORKER may now be given tasks. */
void sched_worker_up(struct sched *s, int worker);
/* WORKER is gone (REASON): its instances are lost.  Only the oldest one
 * can have started (workers run theirs in order), so only it counts
 * against its task's max_attempts. */
void sched_worker_down(struct sched *s, int worker, const char *reason,
		       double now);
/* WORKER is taken out of service on purpose (its node is being
 * rebooted or given up on): its instances go back to the queue without
 * counting against their tasks' max_attempts. */
void sched_worker_release(struct sched *s, int worker, const char *reason,
			  double now);
/* WORKER takes no new tasks but keeps what it has (draining). */
void sched_worker_pause(struct sched *s, int worker);
/* WORKER may take tasks again after a pause. */
void sched_worker_resume(struct sched *s, int worker);

/* The next TAKES calls of sched_take are a pass over the workers (0 ends
 * a pass early): each worker's share of the queue is then what is left
 * over the takes left, so that one pass spreads a batch evenly. */
void sched_pass(struct sched *s, int takes);
/* How many of the workers from FROM on may take tasks now (up, not
 * paused, not held by or running a wide task): the takes of a pass over
 * them.  Workers that cannot take are not counted, so that those that
 * can get the whole queue between them. */
int sched_takers(const struct sched *s, int from);
/* 1 if a pass alone gives every worker asked a task while tasks are
 * queued (only one-slot tasks of one priority wait); 0 if only a first
 * pass of one task each does. */
int sched_spreads(const struct sched *s);
/* Fill OUT with up to MAX tasks to send to WORKER now.  Returns the count. */
int sched_take(struct sched *s, int worker, double now,
	       struct sched_pick *out, int max);
/* WORKER reported instance (TID, ATTEMPT), which ran SECONDS. */
enum sched_verdict sched_done(struct sched *s, int worker, uint64_t tid,
			      uint32_t attempt, double seconds, double now);
/* WORKER gave instance (TID, ATTEMPT) back unfinished through no fault
 * of the task (its job ends): the task waits again at the front of its
 * queue, unless another instance of it runs, without counting against
 * max_attempts; no callback is made.  1 if the instance was WORKER's, 0
 * if not (it ended or was lost meanwhile). */
int sched_interrupt(struct sched *s, int worker, uint64_t tid,
		    uint32_t attempt);
/* Fail every task that has not ended (no worker is left to run it). */
void sched_fail_open(struct sched *s, const char *reason);
/* Fail every task of BATCH that has not ended, for REASON: queued ones
 * are dropped, running ones cancelled on their workers (ops.cancel).
 * *QUEUED and *RUNNING: how many of each. */
void sched_fail_batch(struct sched *s, uint32_t batch, const char *reason,
		      uint64_t *queued, uint64_t *running);
/* Deadlines and the slow-worker rule. */
void sched_tick(struct sched *s, double now);

size_t sched_queued(const struct sched *s);	/* waiting in the queue */
int sched_inflight(const struct sched *s, int worker);
int sched_window(const struct sched *s, int worker);
int sched_is_slow(const struct sched *s, int worker);
uint64_t sched_ntasks(const struct sched *s);
/* Tasks not yet done or failed. */
uint64_t sched_open(const struct sched *s);
/* The oldest instance WORKER holds (0 if none). */
uint64_t sched_oldest(const struct sched *s, int worker);
/* The same with its attempt: 1 with *TID and *ATTEMPT (the one instance
 * of WORKER's that may have started), 0 when it holds none. */
int sched_first(const struct sched *s, int worker, uint64_t *tid,
		uint32_t *attempt);

#endif

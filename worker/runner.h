/*
 * runner: the thread that runs a worker's tasks.
 *
 * The slot's main thread stays responsive to its agent; it pushes tasks
 * to the runner and takes finished results back.  Tasks run one at a time in
 * arrival order through their plugin's run().
 *
 * The end of a job (Slurm's time limit, scancel) sends SIGTERM to every
 * process of it at once: the slot, its running task and that task's
 * children.  The slot keeps SIGTERM blocked on every thread (its main
 * thread reads it, then calls runner_end), so that a task that dies of
 * it is not taken for a task that failed: the runner looks at the
 * slot's pending signals too.  Slurm may signal the task first (its
 * linuxproc tracking signals children before parents): a task that died
 * of SIGTERM, or exited 143 (128 + 15, as a task that handles the signal
 * should), waits TERM_GRACE for the slot's; a task that handles it and
 * exits with another status before the slot has it reads as failed.
 */
#ifndef FT_RUNNER_H
#define FT_RUNNER_H

#include <stddef.h>
#include <stdint.h>

#include "plugins.h"

struct runner_task {
	uint64_t tid;
	uint32_t attempt;
	uint32_t batch, index;		/* its batch and index there (its
					 * output files' names) */
	volatile int cancel;
	struct runner_task *next;
	uint32_t cpus;			/* slots it holds */
	const char *gpus;		/* its GPU ids ("0,1"), "" for none: in spec[] */
	const char *cpuset;		/* CPUs to bind it to, "" for none: in spec[] */
	size_t spec_len;
	char spec[];			/* JSON text, NUL-terminated, then gpus */
};

struct runner_result {
	uint64_t tid;
	uint32_t attempt;
	double seconds;
	struct ft_result res;
	char *out_path, *err_path;	/* its output files, or NULL */
	uint8_t interrupted;		/* enum proto_interrupted */
	struct runner_result *next;
};

struct runner;

/* Start the runner thread of slot SLOT.  NULL on failure. */
struct runner *runner_start(const struct ft_plugins *pl, int slot);
void runner_set_output_cap(struct runner *r, size_t cap);
/* What the master's welcome says of tasks' memory and files: how a
 * task's "mem" is held to (enum ft_mem_enforce: a cgroup of the slot's
 * own where the node has a directory for them, memcg.h, else sampling),
 * and the patterns of the output files of tasks that name none (OLEN,
 * ELEN bytes; 0: none).  Set before any task comes. */
void runner_set_task_rules(struct runner *r, int mem_enforce,
			   const char *out, size_t olen, const char *err,
			   size_t elen);
/* The worker's node, which its tasks see as FTFARM_NODE (set before any
 * task comes). */
void runner_set_node(struct runner *r, const char *node, size_t len);
/* Append a list of tasks (taken over). */
void runner_push(struct runner *r, struct runner_task *list);
/* Take every finished result, oldest first (NULL if none). */
struct runner_result *runner_take(struct runner *r);
/* The results last taken have been sent: an exec task waiting for them
 * may start. */
void runner_sent(struct runner *r);
/* Have the runner thread itself hand results that are due to DELIVER
 * (called without the runner's lock, at most once at a time), instead of
 * waking the thread that takes them.  DELIVER takes them with
 * runner_take and returns 1 once it has, or 0 to have them rung for as
 * usual (runner_fd).  Set before the first task is pushed. */
typedef int (*runner_deliver_fn)(void *arg);
void runner_set_deliver(struct runner *r, runner_deliver_fn deliver,
			void *arg);
/* A descriptor that is readable once results are due: at once for a
 * long task's and for the last queued; results of short tasks are held
 * while more wait (a millisecond at most). */
int runner_fd(const struct runner *r);
/* When the results held now are due (ft_now() clock), 0 if none are. */
double runner_held_until(struct runner *r);
/* Drop a queued instance, or ask the running one to stop. */
void runner_cancel(struct runner *r, uint64_t tid, uint32_t attempt);
/* The job ends (the slot got SIGTERM): from now on no task starts, and
 * a task that ends without success is reported interrupted, not failed
 * (runner_result.interrupted); so are the tasks that wait, unstarted.
 * A task that ends in success is reported as usual. */
void runner_end(struct runner *r);
/* Cancel everything, stop the thread, free the runner and leftovers. */
void runner_stop(struct runner *r);
/* The running task's id (0 if none) and the number queued. */
uint64_t runner_running(struct runner *r, uint32_t *queued);
/* SIGKILL the process group of the running task, if its plugin named
 * one (exec does).  Safe from any thread, without the runner's lock: for
 * a worker that leaves at once. */
void runner_kill_group(struct runner *r);

/* A task of ASSIGN entry PT: a copy of its spec, its GPU ids and the
 * CPUs to bind it to, in one block. */
struct proto_task;
struct runner_task *runner_task_new(const struct proto_task *pt);
void runner_result_free(struct runner_result *res);
void runner_task_free(struct runner_task *t);

#endif

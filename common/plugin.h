/*
 * plugin: the C ABI of task types.
 *
 * A task type is a shared object in bin/tasks/ (sources in worker/tasks/)
 * exporting one function, ftfarm_plugin(), that returns a static
 * struct ft_plugin.  The master and the CLI load every plugin to validate
 * submitted tasks; workers load them to run tasks.
 *
 * run() is called on a worker's runner thread, never on the thread that
 * owns MPI, so it may block for as long as the task takes.  It must return
 * soon after *task->cancel becomes non-zero, and must not call MPI.
 */
#ifndef FT_PLUGIN_H
#define FT_PLUGIN_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "jcheck.h"

#define FT_PLUGIN_ABI 5
#define FT_PLUGIN_SYMBOL "ftfarm_plugin"
/* The largest "timeout" of a task, and of the config's task_timeout_s. */
#define FT_TASK_TIMEOUT_MAX 1e7

struct ft_job_ops;

/* One task handed to run(). */
struct ft_task {
	uint64_t id;			/* the master's id of the task: unique
					 * while the master runs, not its
					 * index in the batch */
	uint32_t attempt;		/* 1 for the first try */
	const json_t *spec;		/* the task object, already validated */
	const char *spec_text;		/* and its JSON text, as submitted */
	size_t spec_len;
	const volatile int *cancel;	/* non-zero: stop as soon as possible */
	size_t output_cap;		/* keep at most this many bytes of each output */
	/* A plugin that runs the task in a process group of its own says
	 * which (its pgid) once the group exists, and 0 before it reaps the
	 * group's leader (after which the id may name another group): a
	 * worker that must leave at once kills that group first.  NULL when
	 * the caller does not ask. */
	void (*group)(const struct ft_task *task, pid_t pgid);
	void *caller;			/* the caller's, for group() */
	/* The task's environment variables beside the worker's, as
	 * "NAME=value", NULL-terminated (or NULL): FTFARM_NODE, FTFARM_CPUS
	 * and, for a task given GPUs, CUDA_VISIBLE_DEVICES.  A plugin that
	 * starts commands gives them these. */
	const char *const *env;
	/* The CPUs the task is bound to ("0,1": places among its node's
	 * slots, to be taken modulo the host's CPUs), or NULL when its node
	 * does not pin.  A plugin that starts commands binds them. */
	const char *cpuset;
	/* A descriptor that becomes readable once *cancel is set, for a
	 * plugin that sleeps in poll(2) to add to its set instead of waking
	 * now and then to look; 0 when the caller has none (zeroed
	 * callers). */
	int cancel_fd;
	/* Where the task's outputs go (FT_PLUGIN_OUTPUT_FILES plugins): a
	 * descriptor above 2 open for writing on the file of its "stdout"
	 * (err_fd: "stderr"; both may be the same), which the command gets
	 * as its own; 0 for the usual pipe, kept up to output_cap.  The
	 * caller closes them and reads the files' tails afterwards. */
	int out_fd;
	int err_fd;
	/* Memory (FT_PLUGIN_RISKY plugins, which start processes): the
	 * task's processes may use MEM_LIMIT bytes together (0: no limit).
	 * With CGROUP_FD (FT_PLUGIN_MEMCG plugins: a descriptor above 2 of
	 * a memory cgroup's cgroup.procs, the limit set) each process the
	 * plugin starts for the task writes "0" to it before it runs the
	 * program (it enters the cgroup) and the kernel enforces the limit;
	 * without it (0) the plugin samples the RSS of the task's processes
	 * and kills them past the limit, failing the task with a reason that
	 * starts "memory:". */
	uint64_t mem_limit;
	int cgroup_fd;
};

/* What run() reports.  The caller zeroes it before the call and frees
 * out, err and value afterwards. */
struct ft_result {
	int ok;				/* 1: the task succeeded */
	int exit_code;			/* as a shell reports a process: its exit
					 * status, 128 + N when signal N killed
					 * it, 127 when it could not start;
					 * without such a status 0 when ok and
					 * -1 when not (timeout, cancel, a
					 * failure of the plugin's own work) */
	char *out;			/* malloc'd standard output (or NULL) */
	size_t out_len;
	char *err;			/* malloc'd standard error (or NULL) */
	size_t err_len;
	char reason[128];		/* why it failed: "exit 3", "timeout", ... */
	int signal;			/* the signal that ended the task's own
					 * process (exit_code 128 + it), 0 */
	/* What the task returned, beside what it printed: text of at most
	 * FT_VALUE_MAX bytes that goes into its result line as "value"
	 * (malloc'd, or NULL for none). */
	char *value;
	size_t value_len;
	/* The task took its worker down with it (a plugin's helper process
	 * that the task killed, or that died under it): the worker leaves
	 * at once without reporting the task, as if the task had killed it,
	 * and the master runs the task again or blames it. */
	int lost;
	/* What the task used (plugins with FT_PLUGIN_USAGE; the caller
	 * measures the others' thread itself): CPU seconds, user and
	 * system, of every process it ran that was waited for, and the peak
	 * resident set in bytes (the largest of one process's, or of all of
	 * them together where they were sampled). */
	double cpu_s;
	uint64_t max_rss;
};

/* The largest "value" of a result. */
#define FT_VALUE_MAX (96 * 1024)

/* A plugin's flags.  FT_PLUGIN_RISKY: its tasks start processes that may
 * kill their worker, so the results before each of its tasks are sent
 * before it starts (the master must not blame a task that finished for
 * the death that came after it). */
#define FT_PLUGIN_RISKY 1u
/* FT_PLUGIN_OUTPUT_FILES: its tasks may send their outputs to files
 * (their "stdout" and "stderr" keys): it honours ft_task's out_fd and
 * err_fd. */
#define FT_PLUGIN_OUTPUT_FILES 2u
/* FT_PLUGIN_USAGE: it fills ft_result's cpu_s and max_rss. */
#define FT_PLUGIN_USAGE 4u
/* FT_PLUGIN_MEMCG: each task's processes are new and may enter a
 * memory cgroup of the task's (ft_task's cgroup_fd); a plugin whose
 * process lives from task to task samples instead. */
#define FT_PLUGIN_MEMCG 8u

struct ft_plugin {
	uint32_t abi;			/* FT_PLUGIN_ABI */
	const char *name;		/* the task "type" it serves */
	/* Check the task object TASK found at PATH (its "type" already
	 * matched).  Every task may carry "type" and "timeout" (seconds, in
	 * (0, FT_TASK_TIMEOUT_MAX]); the plugin's own keys are its business.
	 * Returns 0, or -1 with ERR set.  Must not block or change the
	 * filesystem.  Submitted tasks and the tasks a job plans are both
	 * checked with it. */
	int (*validate)(const json_t *task, const char *path, struct jerr *err);
	/* Run TASK, fill RES.  Returns 0 when RES says what happened (even a
	 * failed task), -1 only if the plugin itself could not work (RES.reason
	 * set); the task then fails with that reason. */
	int (*run)(const struct ft_task *task, struct ft_result *res);
	/* Job hooks, for plugins that plan whole jobs; NULL otherwise. */
	const struct ft_job_ops *job;
	unsigned flags;			/* FT_PLUGIN_* */
};

/*
 * Job hooks (optional).  A batch {"name": ..., "job": {"type": NAME, ...}}
 * is handed to the plugin NAME, whose job runs in phases driven by the
 * master's phase engine:
 *
 *   init -> plan (phase 1) -> report|failed for each task -> plan (phase 2)
 *        -> ... -> plan appends nothing: the job is complete -> summary
 *        -> cleanup(ok) -> free
 *
 * A phase is planned once every task of the previous one has ended.  The
 * first failed task or hook error fails the job: no further phase is
 * planned, cleanup(0) runs, and the rest of the phase's tasks are only
 * counted.  Planned tasks are checked with the plugin's validate like
 * submitted ones.  The hooks run in the master's loop: they must be quick
 * (no pass over the data: the data is the workers' business).
 */
struct ft_job_ops {
	/* Check the job object at PATH ("job").  0 or -1 with ERR.  May look
	 * at the files it names (their existence, readability). */
	int (*validate)(const json_t *job, const char *path, struct jerr *err);
	/* The job's state for JOB (checked).  DIR is a directory of the
	 * batch's own, shared by the nodes, for the job's intermediate files.
	 * NULL with ERR. */
	void *(*init)(const json_t *job, const char *dir, char *err, size_t n);
	/* Append the next phase's task objects to TASKS; none: the job is
	 * complete.  0, or -1 with ERR. */
	int (*plan)(void *state, json_t *tasks, char *err, size_t n);
	/* Task INDEX of the current phase succeeded; REPORT is its standard
	 * output parsed as JSON (NULL when it is not JSON).  0, or -1 with
	 * ERR when the job cannot go on. */
	int (*report)(void *state, size_t index, const json_t *report,
		      char *err, size_t n);
	/* Task INDEX of the current phase failed for REASON: say in ERR why
	 * the job fails. */
	void (*failed)(void *state, size_t index, const char *reason, char *err,
		       size_t n);
	/* What the job produced, for summary.json (a new reference); called
	 * only for a complete job. */
	json_t *(*summary)(void *state);
	/* Remove what the job leaves behind; OK: it is complete. */
	void (*cleanup)(void *state, int ok);
	void (*free)(void *state);
	/* The job object's keys that name paths the job writes (NULL-
	 * terminated; NULL for none): they are refused inside the cluster's
	 * state dir. */
	const char *const *outputs;
};

typedef const struct ft_plugin *(*ft_plugin_fn)(void);

/* Define the exported ftfarm_plugin() of a plugin serving task type NAME
 * (JOB: its job hooks, or NULL; FLAGS: FT_PLUGIN_*). */
#define FT_PLUGIN_DEFINE(NAME, VALIDATE, RUN, JOB)			\
	FT_PLUGIN_DEFINE_FLAGS(NAME, VALIDATE, RUN, JOB, 0)
#define FT_PLUGIN_DEFINE_FLAGS(NAME, VALIDATE, RUN, JOB, FLAGS)		\
	__attribute__((visibility("default")))				\
	const struct ft_plugin *ftfarm_plugin(void);			\
	const struct ft_plugin *					\
	ftfarm_plugin(void)						\
	{								\
		static const struct ft_plugin plugin = {		\
			.abi = FT_PLUGIN_ABI, .name = (NAME),		\
			.validate = (VALIDATE), .run = (RUN),		\
			.job = (JOB), .flags = (FLAGS),			\
		};							\
		return &plugin;						\
	}

/* Every task's "timeout" key: seconds, or DEF when absent. */
double ft_task_timeout(const json_t *task, double def);

#endif

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

#include "jcheck.h"

#define FT_PLUGIN_ABI 1
#define FT_PLUGIN_SYMBOL "ftfarm_plugin"

struct ft_job_ops;

/* One task handed to run(). */
struct ft_task {
	uint64_t id;			/* the task's index in its batch */
	uint32_t attempt;		/* 1 for the first try */
	const json_t *spec;		/* the task object, already validated */
	const volatile int *cancel;	/* non-zero: stop as soon as possible */
	size_t output_cap;		/* keep at most this many bytes of each output */
};

/* What run() reports.  The caller zeroes it before the call and frees
 * out and err afterwards. */
struct ft_result {
	int ok;				/* 1: the task succeeded */
	int exit_code;			/* exit status of a process, else 0 or -1 */
	char *out;			/* malloc'd standard output (or NULL) */
	size_t out_len;
	char *err;			/* malloc'd standard error (or NULL) */
	size_t err_len;
	char reason[128];		/* why it failed: "exit 3", "timeout", ... */
};

struct ft_plugin {
	uint32_t abi;			/* FT_PLUGIN_ABI */
	const char *name;		/* the task "type" it serves */
	/* Check the task object TASK found at PATH (its "type" already
	 * matched).  Every task may carry "type" and "timeout" (seconds, a
	 * positive number); the plugin's own keys are its business.  Returns
	 * 0, or -1 with ERR set.  Must not block or touch the filesystem in a
	 * way that changes it. */
	int (*validate)(const json_t *task, const char *path, struct jerr *err);
	/* Run TASK, fill RES.  Returns 0 when RES says what happened (even a
	 * failed task), -1 only if the plugin itself could not work (RES.reason
	 * set); the task then fails with that reason. */
	int (*run)(const struct ft_task *task, struct ft_result *res);
	/* Job hooks, for plugins that plan whole jobs; NULL otherwise. */
	const struct ft_job_ops *job;
};

/*
 * Job hooks (optional).  A batch {"name": ..., "job": {"type": NAME, ...}}
 * is handed to the plugin NAME, which plans it into tasks of its own type
 * in phases: the master queues a phase's tasks, reports each task's first
 * result, and asks for the next phase once all of them have ended.  The
 * hooks run in the master's loop: they must be quick (no pass over the
 * data: the data is the workers' business).
 */
struct ft_job_ops {
	/* Check the job object at PATH ("job").  0 or -1 with ERR.  May look
	 * at the files it names (their existence, readability). */
	int (*validate)(const json_t *job, const char *path, struct jerr *err);
	/* Plan JOB.  DIR is a directory of the batch's own, shared by the
	 * nodes, for the job's intermediate files.  Appends the first phase's
	 * task objects to TASKS and returns the job's state, or NULL with ERR. */
	void *(*start)(const json_t *job, const char *dir, json_t *tasks,
		       char *err, size_t n);
	/* Task INDEX of the current phase ended (OK, its stdout OUT, or why it
	 * failed).  Returns 0, or -1 with ERR when the job cannot go on. */
	int (*task_done)(void *state, size_t index, int ok, const char *out,
			 size_t out_len, const char *reason, char *err, size_t n);
	/* The phase has ended: append the next phase's tasks to TASKS (none:
	 * the job is complete).  0, or -1 with ERR. */
	int (*next)(void *state, json_t *tasks, char *err, size_t n);
	/* What the job produced, for summary.json (a new reference). */
	json_t *(*summary)(void *state);
	void (*free)(void *state);
};

typedef const struct ft_plugin *(*ft_plugin_fn)(void);

/* Define the exported ftfarm_plugin() of a plugin serving task type NAME
 * (JOB: its job hooks, or NULL). */
#define FT_PLUGIN_DEFINE(NAME, VALIDATE, RUN, JOB)			\
	__attribute__((visibility("default")))				\
	const struct ft_plugin *ftfarm_plugin(void);			\
	const struct ft_plugin *					\
	ftfarm_plugin(void)						\
	{								\
		static const struct ft_plugin plugin = {		\
			.abi = FT_PLUGIN_ABI, .name = (NAME),		\
			.validate = (VALIDATE), .run = (RUN),		\
			.job = (JOB),					\
		};							\
		return &plugin;						\
	}

/* Every task's "timeout" key: seconds, or DEF when absent. */
double ft_task_timeout(const json_t *task, double def);

#endif

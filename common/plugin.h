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
};

typedef const struct ft_plugin *(*ft_plugin_fn)(void);

/* Every task's "timeout" key: seconds, or DEF when absent. */
double ft_task_timeout(const json_t *task, double def);

#endif

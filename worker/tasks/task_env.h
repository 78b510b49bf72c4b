/*
 * task_env: the environment of what a task plugin starts: the worker's,
 * less the MPI's variables, with the task's own and the worker's word on
 * the task (its node, slots, GPUs) over it.
 */
#ifndef FT_TASK_ENV_H
#define FT_TASK_ENV_H

#include <jansson.h>
#include <stddef.h>

/* The worker's environment less the MPI's variables, with ENV's members
 * (a JSON object of strings, or NULL) added or replacing, then EXTRA's
 * ("NAME=value" entries, NULL-terminated, or NULL) over both.  Entries
 * from *FIRST on are new strings, the caller's to free with the array.
 * Reads environ: the worker must not change its environment while tasks
 * run. */
char **task_env_build(const json_t *env, const char *const *extra,
		      size_t *first);
/* The PATH of environment ENVP, or the C library's default. */
const char *task_env_path(char **envp);
/* Free ENVP from task_env_build (its entries from FIRST on). */
void task_env_free(char **envp, size_t first);

#endif

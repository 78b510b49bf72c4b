/*
 * wordcount: the task type and job type that count words.
 *
 * As a job, {"type": "wordcount", "inputs": [...], "output": ...} (see
 * wc_job.h), it is planned in the master into map, reduce and merge tasks.
 * As a task type it runs those tasks on workers (see wc_task.h); a user
 * may submit such tasks by hand too, so they are validated like any task.
 *
 * Sources: wc_tok (what a word is, its hash), wc_table (the counts),
 * wc_file (record files, atomic writes), wc_map and wc_reduce (the task
 * modes), wc_plan (inputs, manifest, shards) and wc_job (the job hooks).
 * The plugin keeps no global state: jobs and tasks own everything they use.
 */
#include <string.h>

#include "plugin.h"
#include "wc_job.h"
#include "wc_task.h"

/* Run a wordcount task of any mode.  Always 0: RES says how it went. */
static int
wordcount_run(const struct ft_task *task, struct ft_result *res)
{
	const char *mode = jget_str(task->spec, "mode", "");

	if (strcmp(mode, "map") == 0)
		return wc_map_run(task, res);
	if (strcmp(mode, "reduce") == 0)
		return wc_reduce_run(task, res);
	if (strcmp(mode, "merge") == 0)
		return wc_merge_run(task, res);
	return wc_fail(res, "unknown mode \"%s\"", mode);
}

FT_PLUGIN_DEFINE("wordcount", wc_task_validate, wordcount_run, &wc_job_ops)

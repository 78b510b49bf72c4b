/* batch: what a submitted batch may contain. */
#include "batch.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "memsize.h"
#include "outpath.h"
#include "proto.h"
#include "statedir.h"
#include "util.h"

static const struct jfield batch_fields[] = {
	{ "name", JT_STRING, 0 },
	{ "tasks", JT_ARRAY, 0 },
	{ "job", JT_OBJECT, 0 },
	{ "priority", JT_INT, 0 },
	{ "open", JT_BOOL, 0 },
	{ "after", JT_ARRAY, 0 },
	{ "after_any", JT_ARRAY, 0 },
	{ NULL, 0, 0 },
};

int
ft_check_ids(const json_t *obj, const char *path, const char *key,
	     long long lo, struct jerr *err)
{
	const json_t *a = json_object_get(obj, key), *v;
	char at[300], el[320];
	size_t i;

	if (a == NULL)
		return 0;
	jpath_key(at, sizeof(at), path, key);
	if (!json_is_array(a))
		return jerr_set(err, at, "expected an array, got %s",
				jcheck_type_name(a));
	json_array_foreach(a, i, v) {
		jpath_index(el, sizeof(el), at, i);
		if (!json_is_integer(v))
			return jerr_set(err, el, "expected an integer, got %s",
					jcheck_type_name(v));
		if (json_integer_value(v) < lo ||
		    json_integer_value(v) > UINT32_MAX)
			return jerr_set(err, el, "must be %lld..%lu, got %lld",
					lo, (unsigned long)UINT32_MAX,
					(long long)json_integer_value(v));
	}
	return 0;
}

int
ft_batch_top_key(const char *key)
{
	size_t i;

	for (i = 0; batch_fields[i].key; i++)
		if (strcmp(batch_fields[i].key, key) == 0)
			return 1;
	return 0;
}

/* Check TASK's "cpus" and "gpus" at PATH.  0, or -1 with ERR. */
static int
check_counts(const json_t *task, const char *path, struct jerr *err)
{
	const char *keys[] = { "cpus", "gpus" };
	const long long lo[] = { 1, 0 }, hi[] = { FT_TASK_CPUS_MAX,
						 FT_TASK_GPUS_MAX };
	char at[300];
	int i;

	for (i = 0; i < 2; i++) {
		const json_t *v = json_object_get(task, keys[i]);

		if (v == NULL)
			continue;
		jpath_key(at, sizeof(at), path, keys[i]);
		if (!json_is_integer(v))
			return jerr_set(err, at, "expected an integer, got %s",
					jcheck_type_name(v));
		if (json_integer_value(v) < lo[i] ||
		    json_integer_value(v) > hi[i])
			return jerr_set(err, at, "must be %lld..%lld, got %lld",
					lo[i], hi[i],
					(long long)json_integer_value(v));
	}
	return 0;
}

/* TASK's "mem" (at PATH), when present: an amount (memsize.h). */
static int
check_mem(const json_t *task, const char *path, struct jerr *err)
{
	const json_t *v = json_object_get(task, "mem");
	uint64_t bytes;
	char at[300];

	if (v == NULL || memsize_json(v, &bytes) == 0)
		return 0;
	jpath_key(at, sizeof(at), path, "mem");
	if (!json_is_integer(v) && !json_is_string(v))
		return jerr_set(err, at, "expected an amount of memory, got %s",
				jcheck_type_name(v));
	return jerr_set(err, at, "must be bytes or a number with K, M, G or T "
			"(\"2G\"), more than 0 and at most 1 PiB");
}

/* TASK's "time_request" (at PATH), when present: seconds. */
static int
check_time_request(const json_t *task, const char *path, struct jerr *err)
{
	return jcheck_num_positive(task, path, "time_request",
				   FT_TASK_TIMEOUT_MAX, err);
}

/* TASK's "stdout" and "stderr" (at PATH), when present: path patterns,
 * for a task of plugin P, which must write its outputs to files. */
static int
check_outputs_of(const json_t *task, const char *path,
		 const struct ft_plugin *p, struct jerr *err)
{
	const char *keys[] = { "stdout", "stderr" };
	char at[300], why[200];
	int i;

	for (i = 0; i < 2; i++) {
		const json_t *v = json_object_get(task, keys[i]);

		if (v == NULL)
			continue;
		jpath_key(at, sizeof(at), path, keys[i]);
		if (!(p->flags & FT_PLUGIN_OUTPUT_FILES))
			return jerr_set(err, at, "tasks of type \"%s\" have no "
					"output to write to a file", p->name);
		if (!json_is_string(v))
			return jerr_set(err, at, "expected a path, got %s",
					jcheck_type_name(v));
		if (strlen(json_string_value(v)) != json_string_length(v))
			return jerr_set(err, at, "must not contain a NUL byte");
		if (outpath_check(json_string_value(v), why, sizeof(why)) == -1)
			return jerr_set(err, at, "%s", why);
	}
	return 0;
}

/* The keys any task may carry beside its plugin's own. */
static const char *const common_keys[] = {
	"cpus", "gpus", "mem", "after", "stdout", "stderr", "time_request",
};

/* Does TASK carry a key of common_keys?  One walk over its few keys,
 * cheaper than looking each up in its table. */
static int
has_need(const json_t *task)
{
	const char *k;
	json_t *v;
	size_t i;

	json_object_foreach((json_t *)task, k, v)
		for (i = 0; i < FT_ARRAY_LEN(common_keys); i++)
			if (k[0] == common_keys[i][0] &&
			    strcmp(k, common_keys[i]) == 0)
				return 1;
	return 0;
}

/* Let plugin P check TASK (at PATH) without the keys every task may have
 * beside its own (common_keys), which it does not know; NEED: what it
 * asks. */
static int
plugin_check(const struct ft_plugin *p, const json_t *task, const char *path,
	     struct ft_need *need, struct jerr *err)
{
	json_t *own;
	size_t i;
	int rc;

	need->cpus = 1;
	need->gpus = 0;
	need->mem = 0;
	need->files = 0;
	need->time_request = 0;
	if (!has_need(task))
		return p->validate(task, path, err);
	if (check_counts(task, path, err) == -1 ||
	    check_mem(task, path, err) == -1 ||
	    check_time_request(task, path, err) == -1 ||
	    check_outputs_of(task, path, p, err) == -1 ||
	    ft_check_ids(task, path, "after", 0, err) == -1)
		return -1;
	ft_task_need(task, need);
	own = json_copy((json_t *)task);
	for (i = 0; i < FT_ARRAY_LEN(common_keys); i++)
		json_object_del(own, common_keys[i]);
	rc = p->validate(own, path, err);
	json_decref(own);
	return rc;
}

int
ft_task_need(const json_t *task, struct ft_need *need)
{
	const json_t *mem = json_object_get(task, "mem");
	double t = jget_num(task, "time_request", 0);

	need->cpus = (int)jget_int(task, "cpus", 1);
	need->gpus = (int)jget_int(task, "gpus", 0);
	need->files = json_object_get(task, "stdout") != NULL ||
		      json_object_get(task, "stderr") != NULL;
	if (mem == NULL || memsize_json(mem, &need->mem) == -1)
		need->mem = 0;
	need->time_request = t > 0 && t <= FT_TASK_TIMEOUT_MAX ?
			     (uint32_t)ceil(t) : 0;
	return need->cpus > 1 || need->gpus > 0;
}

int
ft_batch_check_task(const json_t *task, const char *path,
		    const struct ft_plugins *pl, struct jerr *err)
{
	struct ft_need need;

	return ft_batch_check_task_need(task, path, pl, &need, err);
}

int
ft_batch_check_task_need(const json_t *task, const char *path,
			 const struct ft_plugins *pl, struct ft_need *need,
			 struct jerr *err)
{
	const json_t *type;
	char tpath[300];
	int kind;

	if (!json_is_object(task))
		return jerr_set(err, path, "expected an object, got %s",
				jcheck_type_name(task));
	type = json_object_get(task, "type");
	if (type == NULL)
		return jerr_set(err, path, "missing required key \"type\"");
	kind = ft_plugins_index(pl, json_string_value(type));
	if (kind >= 0)
		return plugin_check(pl->v[kind], task, path, need,
				    err) == -1 ? -1 : kind;
	jpath_key(tpath, sizeof(tpath), path, "type");
	if (!json_is_string(type))
		return jerr_set(err, tpath, "expected a string, got %s",
				jcheck_type_name(type));
	return jerr_set(err, tpath, "unknown task type \"%s\"",
			json_string_value(type));
}

static char *protected_dir;

void
ft_batch_protect(const char *dir)
{
	free(protected_dir);
	protected_dir = dir ? ft_strdup(dir) : NULL;
}

/* None of the paths the job P writes (its outputs) may lie in the
 * protected directory: a job must not write over the master's files. */
static int
check_outputs(const json_t *job, const struct ft_plugin *p, struct jerr *err)
{
	const char *const *k;
	char at[64];

	for (k = p->job->outputs; protected_dir && k && *k; k++) {
		const char *path = jget_str(job, *k, NULL);

		if (path == NULL || path[0] != '/' ||
		    !sd_contains(protected_dir, path))
			continue;
		jpath_key(at, sizeof(at), "job", *k);
		return jerr_set(err, at, "%s is inside the cluster's state dir "
				"%s", path, protected_dir);
	}
	return 0;
}

/* Check a job object: a "type" whose plugin plans jobs, then the
 * plugin's own rules. */
static int
check_job(const json_t *job, const struct ft_plugins *pl, struct jerr *err)
{
	const struct ft_plugin *p;
	const json_t *type = json_object_get(job, "type");

	if (type == NULL)
		return jerr_set(err, "job", "missing required key \"type\"");
	if (!json_is_string(type))
		return jerr_set(err, "job.type", "expected a string, got %s",
				jcheck_type_name(type));
	p = ft_plugins_find(pl, json_string_value(type));
	if (p == NULL && pl->other_jobs) {
		int rc = pl->other_jobs(pl->other_ctx, job, "job", err);

		if (rc <= 0)
			return rc;
	}
	if (p == NULL || p->job == NULL)
		return jerr_set(err, "job.type", "unknown job type \"%s\"",
				json_string_value(type));
	if (p->job->validate(job, "job", err) == -1)
		return -1;
	return check_outputs(job, p, err);
}

int
ft_batch_check_top(const json_t *batch, size_t ntasks,
		   const struct ft_plugins *pl, struct jerr *err)
{
	if (jcheck_object(batch, "", batch_fields, err) == -1 ||
	    jcheck_int_range(batch, "", "priority", FT_BATCH_PRIO_MIN,
			     FT_BATCH_PRIO_MAX, err) == -1 ||
	    ft_check_ids(batch, "", "after", 1, err) == -1 ||
	    ft_check_ids(batch, "", "after_any", 1, err) == -1)
		return -1;
	if (json_object_get(batch, "job")) {
		if (json_object_get(batch, "tasks"))
			return jerr_set(err, "", "a batch has \"tasks\" or a "
					"\"job\", not both");
		if (json_is_true(json_object_get(batch, "open")))
			return jerr_set(err, "open", "a job's batch cannot be "
					"open: tasks are added to a batch of "
					"tasks");
		if (json_object_get(batch, "after") ||
		    json_object_get(batch, "after_any"))
			return jerr_set(err, json_object_get(batch, "after") ?
					"after" : "after_any", "a job's batch "
					"does not wait for others: only a "
					"batch of tasks does");
		return check_job(json_object_get(batch, "job"), pl, err);
	}
	if (json_is_true(json_object_get(batch, "open")))
		return ntasks > FT_BATCH_MAX_TASKS ?
		       jerr_set(err, "tasks", "more than %d tasks",
				FT_BATCH_MAX_TASKS) : 0;
	if (json_object_get(batch, "tasks") == NULL)
		return jerr_set(err, "", "missing required key \"tasks\" "
				"(or \"job\")");
	if (ntasks == 0)
		return jerr_set(err, "tasks", "must hold at least one task");
	if (ntasks > FT_BATCH_MAX_TASKS)
		return jerr_set(err, "tasks", "more than %d tasks",
				FT_BATCH_MAX_TASKS);
	return 0;
}

int
ft_batch_check(const json_t *batch, const struct ft_plugins *pl,
	       struct jerr *err)
{
	const json_t *tasks = json_object_get(batch, "tasks"), *task;
	char path[64];
	size_t i;

	if (ft_batch_check_top(batch, json_array_size(tasks), pl, err) == -1)
		return -1;
	json_array_foreach(tasks, i, task) {
		jpath_index(path, sizeof(path), "tasks", i);
		if (ft_batch_check_task(task, path, pl, err) == -1)
			return -1;
	}
	return 0;
}

const struct ft_plugin *
ft_batch_job(const json_t *batch, const struct ft_plugins *pl)
{
	const json_t *job = json_object_get(batch, "job");

	if (job == NULL)
		return NULL;
	return ft_plugins_find(pl, jget_str(job, "type", ""));
}

const char *
ft_batch_name(const json_t *batch)
{
	return jget_str(batch, "name", "batch");
}

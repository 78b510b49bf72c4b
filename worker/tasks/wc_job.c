/* wc_job: the job hooks of the wordcount plugin (see wc_job.h). */
#include "wc_job.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"
#include "wc_file.h"
#include "wc_plan.h"
#include "wc_task.h"
#include "wc_tok.h"

#define MAX_DELIMITERS (1 << 20)	/* bytes of a delimiter file */
#define SHORT_PATH 96

/* The phase whose tasks are out (PH_NONE before the first plan). */
enum phase { PH_NONE, PH_MAP, PH_REDUCE, PH_MERGE, PH_DONE };

static const char *const phase_names[] = {
	"none", "map", "reduce", "merge", "done",
};

struct job {
	char *dir;		/* the job's directory */
	char *output;
	size_t reducers;
	char seps[WC_SEPS_HEX + 1];	/* "" for the default words */
	struct wc_plan plan;
	enum phase phase;
	uint64_t map_words, map_bytes;
	uint64_t reduce_words, reduce_distinct;
	uint64_t words, distinct;	/* from the merge */
};

/* ---- validate ---- */

static const struct jfield job_fields[] = {
	{ "type", JT_STRING, 1 },
	{ "inputs", JT_STRING_ARRAY, 1 },
	{ "output", JT_STRING, 1 },
	{ "shards", JT_INT, 0 },
	{ "shard_bytes", JT_INT, 0 },
	{ "reducers", JT_INT, 0 },
	{ "delimiters", JT_STRING, 0 },
	{ NULL, JT_ANY, 0 },
};

/* Input V (at AT): an existing, readable file or directory. */
static int
check_input(const json_t *v, const char *at, struct jerr *err)
{
	const char *path = json_string_value(v);
	struct stat st;

	if (jcheck_abs(v, at, err) == -1)
		return -1;
	if (stat(path, &st) == -1)
		return jerr_set(err, at, "%s: %s", path, strerror(errno));
	if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
		return jerr_set(err, at, "%s: not a regular file or a "
				"directory", path);
	if (access(path, S_ISDIR(st.st_mode) ? R_OK | X_OK : R_OK) == -1)
		return jerr_set(err, at, "%s: cannot read: %s", path,
				strerror(errno));
	return 0;
}

static int
check_inputs(const json_t *job, const char *path, struct jerr *err)
{
	const json_t *inputs = json_object_get(job, "inputs"), *v;
	char at[256], el[256];
	size_t i;

	jpath_key(at, sizeof(at), path, "inputs");
	if (json_array_size(inputs) == 0)
		return jerr_set(err, at, "must not be empty");
	json_array_foreach(inputs, i, v) {
		jpath_index(el, sizeof(el), at, i);
		if (check_input(v, el, err) == -1)
			return -1;
	}
	return 0;
}

/* "output": absolute, not a directory, in a writable directory. */
static int
check_output(const json_t *job, const char *path, struct jerr *err)
{
	const char *out = jget_str(job, "output", "");
	struct stat st;
	char at[256], why[160], *dir;
	int rc = 0;

	jpath_key(at, sizeof(at), path, "output");
	if (jcheck_abs_path(job, path, "output", err) == -1)
		return -1;
	if (stat(out, &st) == 0 && S_ISDIR(st.st_mode))
		return jerr_set(err, at, "%s: is a directory", out);
	dir = ft_dirname(out);
	if (ft_dir_writable(dir, why, sizeof(why)) == -1)
		rc = jerr_set(err, at, "directory %s: %s", dir, why);
	free(dir);
	return rc;
}

/* "delimiters", when present: a readable regular file, not too big. */
static int
check_delimiters(const json_t *job, const char *path, struct jerr *err)
{
	const json_t *v = json_object_get(job, "delimiters");
	const char *file = json_string_value(v);
	struct stat st;
	char at[256];

	if (v == NULL)
		return 0;
	jpath_key(at, sizeof(at), path, "delimiters");
	if (jcheck_abs(v, at, err) == -1)
		return -1;
	if (stat(file, &st) == -1)
		return jerr_set(err, at, "%s: %s", file, strerror(errno));
	if (!S_ISREG(st.st_mode))
		return jerr_set(err, at, "%s: not a regular file", file);
	if (st.st_size > MAX_DELIMITERS)
		return jerr_set(err, at, "%s: more than %d bytes", file,
				MAX_DELIMITERS);
	if (access(file, R_OK) == -1)
		return jerr_set(err, at, "%s: cannot read: %s", file,
				strerror(errno));
	return 0;
}

static int
job_validate(const json_t *job, const char *path, struct jerr *err)
{
	if (jcheck_object(job, path, job_fields, err) == -1)
		return -1;
	if (json_object_get(job, "shards") &&
	    json_object_get(job, "shard_bytes"))
		return jerr_set(err, path, "give \"shards\" or "
				"\"shard_bytes\", not both");
	if (jcheck_int_range(job, path, "shards", 1, WC_MAX_SHARDS,
			     err) == -1 ||
	    jcheck_int_range(job, path, "shard_bytes", 1, 1LL << 62,
			     err) == -1 ||
	    jcheck_int_range(job, path, "reducers", 1, WC_MAX_REDUCERS,
			     err) == -1 ||
	    check_inputs(job, path, err) == -1 ||
	    check_output(job, path, err) == -1 ||
	    check_delimiters(job, path, err) == -1)
		return -1;
	return 0;
}

/* ---- tasks ---- */

static json_t *
task_new(const struct job *j, const char *mode)
{
	return json_pack("{s:s, s:s, s:s}", "type", "wordcount", "mode", mode,
			 "dir", j->dir);
}

static void
set_int(json_t *o, const char *key, uint64_t v)
{
	json_object_set_new(o, key, json_integer((json_int_t)v));
}

static void
add_map_tasks(const struct job *j, json_t *tasks)
{
	const struct wc_plan *p = &j->plan;
	size_t i, f;
	json_t *t;

	for (i = 0; i < p->nshards; i++) {
		f = wc_plan_first_file(p, p->cut[i]);
		t = task_new(j, "map");
		set_int(t, "shard", i);
		set_int(t, "start", p->cut[i]);
		set_int(t, "end", p->cut[i + 1]);
		set_int(t, "file", f);
		set_int(t, "offset", f < p->nfiles ? p->files[f].line
						    : p->manifest_len);
		set_int(t, "reducers", j->reducers);
		if (j->seps[0])
			json_object_set_new(t, "separators",
					    json_string(j->seps));
		json_array_append_new(tasks, t);
	}
}

static void
add_reduce_tasks(const struct job *j, json_t *tasks)
{
	size_t r;
	json_t *t;

	for (r = 0; r < j->reducers; r++) {
		t = task_new(j, "reduce");
		set_int(t, "part", r);
		set_int(t, "shards", j->plan.nshards);
		json_array_append_new(tasks, t);
	}
}

static void
add_merge_task(const struct job *j, json_t *tasks)
{
	json_t *t = task_new(j, "merge");

	set_int(t, "reducers", j->reducers);
	json_object_set_new(t, "output", json_string(j->output));
	json_array_append_new(tasks, t);
}

/* ---- start ---- */

/* The separator set of the delimiter file PATH, as hex, into J.  0 or -1
 * with ERR. */
static int
read_delimiters(struct job *j, const char *path, char *err, size_t n)
{
	uint8_t set[32], *data;
	size_t len;

	data = wc_read_all(path, 0, &len, err, n);
	if (data == NULL)
		return -1;
	wc_set_of_bytes(data, len, set);
	wc_set_to_hex(set, j->seps);
	free(data);
	return 0;
}

static void
job_free(void *state)
{
	struct job *j = state;

	if (j == NULL)
		return;
	wc_plan_free(&j->plan);
	free(j->dir);
	free(j->output);
	free(j);
}

static void *
job_init(const json_t *spec, const char *dir, char *err, size_t n)
{
	struct job *j = ft_calloc(1, sizeof(*j));
	const char *delim = jget_str(spec, "delimiters", NULL);
	char *done = wc_job_file(dir, WC_DONE);

	unlink(done);		/* a job planned again in its directory */
	free(done);
	j->dir = ft_strdup(dir);
	j->output = ft_strdup(jget_str(spec, "output", ""));
	j->reducers = (size_t)jget_int(spec, "reducers", 2);
	if ((delim && read_delimiters(j, delim, err, n) == -1) ||
	    wc_plan_inputs(&j->plan, json_object_get(spec, "inputs"), err,
			   n) == -1 ||
	    wc_plan_shards(&j->plan, jget_int(spec, "shards", 0),
			   jget_int(spec, "shard_bytes", 0), err, n) == -1 ||
	    wc_plan_manifest(&j->plan, dir, err, n) == -1) {
		job_free(j);
		return NULL;
	}
	return j;
}

/* ---- progress ---- */

/* Why task INDEX of the current phase failed, as the job's error. */
static void
task_error(const struct job *j, size_t index, const char *reason, char *err,
	   size_t n)
{
	const struct wc_plan *p = &j->plan;
	char sb[SHORT_PATH + 1];
	size_t f;
	int more;

	if (j->phase == PH_MAP) {
		f = wc_plan_first_file(p, p->cut[index]);
		more = f + 1 < p->nfiles &&
		       p->files[f + 1].gstart < p->cut[index + 1];
		snprintf(err, n, "wordcount map of shard %zu of %zu (bytes %"
			 PRIu64 "-%" PRIu64 " of %s%s) failed: %s", index,
			 p->nshards, p->cut[index], p->cut[index + 1],
			 f < p->nfiles ? wc_short(p->files[f].path, sb,
						  SHORT_PATH) : "no file",
			 more ? " and the next files" : "", reason);
	} else if (j->phase == PH_REDUCE) {
		snprintf(err, n, "wordcount reduce of part %zu of %zu failed: "
			 "%s", index, j->reducers, reason);
	} else {
		snprintf(err, n, "wordcount merge into %s failed: %s",
			 wc_short(j->output, sb, SHORT_PATH), reason);
	}
}

/* The numbers a task reported ({"words": N, ...}).  0 or -1. */
static int
task_numbers(const json_t *r, uint64_t *words, uint64_t *distinct,
	     uint64_t *bytes)
{
	json_t *w = json_object_get(r, "words");

	*words = (uint64_t)json_integer_value(w);
	*distinct = (uint64_t)json_integer_value(json_object_get(r,
								 "distinct"));
	*bytes = (uint64_t)json_integer_value(json_object_get(r, "bytes"));
	return json_is_integer(w) ? 0 : -1;
}

static void
job_failed(void *state, size_t index, const char *reason, char *err,
	   size_t n)
{
	task_error(state, index, reason && *reason ? reason : "failed", err,
		   n);
}

static int
job_report(void *state, size_t index, const json_t *report, char *err,
	   size_t n)
{
	struct job *j = state;
	uint64_t words, distinct, bytes;

	if (task_numbers(report, &words, &distinct, &bytes) == -1) {
		task_error(j, index, "its output is not the expected JSON",
			   err, n);
		return -1;
	}
	if (j->phase == PH_MAP) {
		j->map_words += words;
		j->map_bytes += bytes;
	} else if (j->phase == PH_REDUCE) {
		j->reduce_words += words;
		j->reduce_distinct += distinct;
	} else {
		j->words = words;
		j->distinct = distinct;
	}
	return 0;
}

/* Remove the entries of directory DIR whose names start with PREFIX. */
static void
remove_prefixed(const char *dir, const char *prefix)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	size_t n = strlen(prefix);
	char *path;

	if (d == NULL)
		return;
	while ((e = readdir(d)) != NULL) {
		if (strncmp(e->d_name, prefix, n) != 0)
			continue;
		path = ft_asprintf("%s/%s", dir, e->d_name);
		unlink(path);
		free(path);
	}
	closedir(d);
}

/* Remove the intermediate files of a job that has succeeded, and the
 * temporary files its killed attempts left (in the job's directory, and
 * beside the output: those carry the job's mark).  The job's directory
 * keeps WC_DONE. */
static void
cleanup(const struct job *j)
{
	char mark[17], *dir = ft_dirname(j->output), *prefix;
	const char *base = strrchr(j->output, '/') + 1;
	char *done = wc_job_file(j->dir, WC_DONE);
	int fd = open(done, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);

	/* The mark first: a late attempt that writes after the removals below
	 * sees it and removes its own file (wc_task_write). */
	if (fd >= 0)
		close(fd);
	free(done);
	remove_prefixed(j->dir, "map-");
	remove_prefixed(j->dir, "run-");
	remove_prefixed(j->dir, "manifest");
	wc_job_mark(j->dir, mark);
	prefix = ft_asprintf("%s.tmp.%s.", base, mark);
	remove_prefixed(dir, prefix);
	free(prefix);
	free(dir);
}

/* The totals of the phase that ended must agree with the map's. */
static int
check_totals(const struct job *j, char *err, size_t n)
{
	uint64_t w = j->phase == PH_REDUCE ? j->reduce_words : j->words;

	if (j->phase == PH_MAP && j->map_bytes != j->plan.total)
		snprintf(err, n, "wordcount: the maps read %" PRIu64
			 " bytes of %" PRIu64, j->map_bytes, j->plan.total);
	else if (j->phase != PH_MAP && w != j->map_words)
		snprintf(err, n, "wordcount: the %s counted %" PRIu64
			 " words, the maps %" PRIu64, phase_names[j->phase], w,
			 j->map_words);
	else if (j->phase == PH_MERGE && j->distinct != j->reduce_distinct)
		snprintf(err, n, "wordcount: the merge wrote %" PRIu64
			 " words, the reducers had %" PRIu64, j->distinct,
			 j->reduce_distinct);
	else
		return 0;
	return -1;
}

static int
job_plan(void *state, json_t *tasks, char *err, size_t n)
{
	struct job *j = state;

	if (j->phase == PH_DONE)
		return 0;
	if (j->phase != PH_NONE && check_totals(j, err, n) == -1)
		return -1;
	if (j->phase == PH_NONE)
		add_map_tasks(j, tasks);
	else if (j->phase == PH_MAP)
		add_reduce_tasks(j, tasks);
	else if (j->phase == PH_REDUCE)
		add_merge_task(j, tasks);
	j->phase++;
	return 0;
}

/* A complete job's intermediate files go; a failed job's stay for a
 * look (a later run of the job in a new batch has its own directory). */
static void
job_cleanup(void *state, int ok)
{
	if (ok)
		cleanup(state);
}

static json_t *
job_summary(void *state)
{
	const struct job *j = state;

	return json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:I}",
			 "output", j->output,
			 "files", (json_int_t)j->plan.nfiles,
			 "bytes", (json_int_t)j->plan.total,
			 "words", (json_int_t)j->words,
			 "distinct", (json_int_t)j->distinct,
			 "shards", (json_int_t)j->plan.nshards,
			 "reducers", (json_int_t)j->reducers);
}

static const char *const wc_outputs[] = { "output", NULL };

const struct ft_job_ops wc_job_ops = {
	.validate = job_validate,
	.init = job_init,
	.plan = job_plan,
	.report = job_report,
	.failed = job_failed,
	.summary = job_summary,
	.cleanup = job_cleanup,
	.free = job_free,
	.outputs = wc_outputs,
};

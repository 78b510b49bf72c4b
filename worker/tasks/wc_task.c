/* wc_task: validation of wordcount task objects and result helpers. */
#include "wc_task.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"
#include "wc_file.h"
#include "wc_tok.h"

#define MAX_BYTES (1LL << 62)	/* any global byte offset */

static const struct jfield map_fields[] = {
	{ "type", JT_STRING, 1 },
	{ "mode", JT_STRING, 1 },
	{ "timeout", JT_NUMBER, 0 },
	{ "dir", JT_STRING, 1 },
	{ "shard", JT_INT, 1 },
	{ "start", JT_INT, 1 },
	{ "end", JT_INT, 1 },
	{ "file", JT_INT, 1 },
	{ "offset", JT_INT, 1 },
	{ "reducers", JT_INT, 1 },
	{ "separators", JT_STRING, 0 },
	{ NULL, JT_ANY, 0 },
};

static const struct jfield reduce_fields[] = {
	{ "type", JT_STRING, 1 },
	{ "mode", JT_STRING, 1 },
	{ "timeout", JT_NUMBER, 0 },
	{ "dir", JT_STRING, 1 },
	{ "part", JT_INT, 1 },
	{ "shards", JT_INT, 1 },
	{ NULL, JT_ANY, 0 },
};

static const struct jfield merge_fields[] = {
	{ "type", JT_STRING, 1 },
	{ "mode", JT_STRING, 1 },
	{ "timeout", JT_NUMBER, 0 },
	{ "dir", JT_STRING, 1 },
	{ "reducers", JT_INT, 1 },
	{ "output", JT_STRING, 1 },
	{ NULL, JT_ANY, 0 },
};

static int
check_map(const json_t *t, const char *path, struct jerr *err)
{
	const char *seps = jget_str(t, "separators", NULL);
	uint8_t set[32];
	char at[256];

	if (jcheck_object(t, path, map_fields, err) == -1 ||
	    jcheck_abs_path(t, path, "dir", err) == -1 ||
	    jcheck_int_range(t, path, "shard", 0, WC_MAX_SHARDS - 1,
			     err) == -1 ||
	    jcheck_int_range(t, path, "start", 0, MAX_BYTES, err) == -1 ||
	    jcheck_int_range(t, path, "end", jget_int(t, "start", 0),
			     MAX_BYTES, err) == -1 ||
	    jcheck_int_range(t, path, "file", 0, MAX_BYTES, err) == -1 ||
	    jcheck_int_range(t, path, "offset", 0, MAX_BYTES, err) == -1 ||
	    jcheck_int_range(t, path, "reducers", 1, WC_MAX_REDUCERS,
			     err) == -1)
		return -1;
	jpath_key(at, sizeof(at), path, "separators");
	if (seps && wc_set_from_hex(seps, set) == -1)
		return jerr_set(err, at, "must be %d hex digits", WC_SEPS_HEX);
	return 0;
}

static int
check_reduce(const json_t *t, const char *path, struct jerr *err)
{
	if (jcheck_object(t, path, reduce_fields, err) == -1 ||
	    jcheck_abs_path(t, path, "dir", err) == -1 ||
	    jcheck_int_range(t, path, "part", 0, WC_MAX_REDUCERS - 1,
			     err) == -1 ||
	    jcheck_int_range(t, path, "shards", 1, WC_MAX_SHARDS, err) == -1)
		return -1;
	return 0;
}

static int
check_merge(const json_t *t, const char *path, struct jerr *err)
{
	if (jcheck_object(t, path, merge_fields, err) == -1 ||
	    jcheck_abs_path(t, path, "dir", err) == -1 ||
	    jcheck_abs_path(t, path, "output", err) == -1 ||
	    jcheck_int_range(t, path, "reducers", 1, WC_MAX_REDUCERS,
			     err) == -1)
		return -1;
	return 0;
}

int
wc_task_validate(const json_t *task, const char *path, struct jerr *err)
{
	const json_t *m = json_object_get(task, "mode");
	const char *mode;
	char at[256];
	int rc;

	jpath_key(at, sizeof(at), path, "mode");
	if (m == NULL)
		return jerr_set(err, path, "missing required key \"mode\"");
	if (!json_is_string(m))
		return jerr_set(err, at, "expected a string, got %s",
				jcheck_type_name(m));
	mode = json_string_value(m);
	if (strcmp(mode, "map") == 0)
		rc = check_map(task, path, err);
	else if (strcmp(mode, "reduce") == 0)
		rc = check_reduce(task, path, err);
	else if (strcmp(mode, "merge") == 0)
		rc = check_merge(task, path, err);
	else
		return jerr_set(err, at, "must be \"map\", \"reduce\" or "
				"\"merge\", not \"%s\"", mode);
	if (rc == 0)
		rc = jcheck_num_positive(task, path, "timeout", FT_TASK_TIMEOUT_MAX,
					 err);
	return rc;
}

int
wc_fail(struct ft_result *res, const char *fmt, ...)
{
	va_list ap;
	char *msg;

	va_start(ap, fmt);
	if (vasprintf(&msg, fmt, ap) < 0)
		msg = NULL;
	va_end(ap);
	res->ok = 0;
	res->exit_code = -1;
	snprintf(res->reason, sizeof(res->reason), "%s",
		 msg ? msg : "out of memory");
	if (msg) {
		free(res->err);
		res->err_len = strlen(msg);
		res->err = msg;
	}
	return 0;
}

int
wc_ok(struct ft_result *res, const char *out)
{
	res->ok = 1;
	res->exit_code = 0;
	res->out = ft_strdup(out);
	res->out_len = strlen(out);
	return 0;
}

char *
wc_job_file(const char *dir, const char *fmt, ...)
{
	va_list ap;
	char *name, *path;

	va_start(ap, fmt);
	if (vasprintf(&name, fmt, ap) < 0)
		name = NULL;
	va_end(ap);
	if (name == NULL)
		return NULL;
	path = ft_asprintf("%s/%s", dir, name);
	free(name);
	return path;
}

int
wc_job_ended(const char *dir)
{
	char *path = wc_job_file(dir, WC_DONE);
	int ended = access(path, F_OK) == 0;

	free(path);
	return ended;
}

int
wc_task_write(struct ft_result *res, const char *dir, const char *name,
	      uint32_t attempt, const void *data, size_t len)
{
	char tag[128], err[512], *path;
	int rc = -1;

	if (wc_job_ended(dir))
		return wc_fail(res, "the job has ended") - 1;
	path = wc_job_file(dir, "%s", name);
	wc_attempt_tag(tag, sizeof(tag), attempt);
	if (wc_write_atomic(path, tag, data, len, err, sizeof(err)) == -1)
		wc_fail(res, "%s", err);
	else if (wc_job_ended(dir)) {
		unlink(path);
		wc_fail(res, "the job has ended");
	} else
		rc = 0;
	free(path);
	return rc;
}

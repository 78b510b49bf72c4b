/* relax_check: validation of relax jobs and tasks (see relax_check.h). */
#include "relax_check.h"

#include "plugin.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

#define MAX_FROM 1000000000000L		/* sweeps a checkpoint may hold */

static const struct jfield job_fields[] = {
	{ "type", JT_STRING, 1 },
	{ "n", JT_INT, 1 },
	{ "itmax", JT_INT, 1 },
	{ "maxeps", JT_NUMBER, 0 },
	{ "blocks", JT_INT, 1 },
	{ "checkpoint_every", JT_INT, 0 },
	{ "dir", JT_STRING, 1 },
	{ "output", JT_STRING, 1 },
	{ "matrix", JT_STRING, 0 },
	{ NULL, JT_ANY, 0 },
};

static const struct jfield task_fields[] = {
	{ "type", JT_STRING, 1 },
	{ "n", JT_INT, 1 },
	{ "blocks", JT_INT, 1 },
	{ "block", JT_INT, 1 },
	{ "from", JT_INT, 1 },
	{ "sweeps", JT_INT, 1 },
	{ "dir", JT_STRING, 1 },
	{ "save", JT_STRING, 1 },
	{ "matrix", JT_STRING, 0 },
	{ "drop", JT_INT, 0 },
	{ "timeout", JT_NUMBER, 0 },
	{ NULL, JT_ANY, 0 },
};

/* The directory member KEY of JOB. */
static int
check_dir(const json_t *job, const char *path, const char *key,
	  struct jerr *err)
{
	const char *dir = jget_str(job, key, "");
	char kpath[sizeof(err->path)], why[160];

	if (ft_dir_writable(dir, why, sizeof(why)) == 0)
		return 0;
	jpath_key(kpath, sizeof(kpath), path, key);
	return jerr_set(err, kpath, "%s: %s", dir, why);
}

/* The output file member KEY of JOB, if present: not a directory, in a
 * writable one. */
static int
check_out(const json_t *job, const char *path, const char *key,
	  struct jerr *err)
{
	const char *file = jget_str(job, key, NULL);
	char kpath[sizeof(err->path)], why[160], *dir;
	struct stat sb;
	int rc = 0;

	if (file == NULL)
		return 0;
	jpath_key(kpath, sizeof(kpath), path, key);
	if (stat(file, &sb) == 0 && S_ISDIR(sb.st_mode))
		return jerr_set(err, kpath, "%s: is a directory", file);
	dir = ft_dirname(file);
	if (ft_dir_writable(dir, why, sizeof(why)) == -1)
		rc = jerr_set(err, kpath, "%s: directory %s: %s", file, dir,
			      why);
	free(dir);
	return rc;
}

/* The numbers of a job: each in its range. */
static int
check_job_numbers(const json_t *job, const char *path, struct jerr *err)
{
	char kpath[sizeof(err->path)];
	long long n;

	if (jcheck_int_range(job, path, "n", 3, RELAX_N_MAX, err) == -1 ||
	    jcheck_int_range(job, path, "itmax", 1, INT_MAX, err) == -1 ||
	    jcheck_int_range(job, path, "checkpoint_every", 1, INT_MAX,
			     err) == -1)
		return -1;
	n = jget_int(job, "n", 0);
	if (jcheck_int_range(job, path, "blocks", 1, n - 2, err) == -1) {
		(void)ft_snprintf(err->msg, sizeof(err->msg), "must be between "
				  "1 and n-2 = %lld", n - 2);
		return -1;
	}
	if (jget_num(job, "maxeps", 0) < 0) {
		jpath_key(kpath, sizeof(kpath), path, "maxeps");
		return jerr_set(err, kpath, "must be 0 or more");
	}
	return 0;
}

int
relax_check_job(const json_t *job, const char *path, struct jerr *err)
{
	const char *matrix = jget_str(job, "matrix", NULL);
	char kpath[sizeof(err->path)];

	if (jcheck_object(job, path, job_fields, err) == -1 ||
	    check_job_numbers(job, path, err) == -1 ||
	    jcheck_abs_path(job, path, "dir", err) == -1 ||
	    jcheck_abs_path(job, path, "output", err) == -1 ||
	    jcheck_abs_path(job, path, "matrix", err) == -1)
		return -1;
	if (matrix && strcmp(matrix, jget_str(job, "output", "")) == 0) {
		jpath_key(kpath, sizeof(kpath), path, "matrix");
		return jerr_set(err, kpath, "must not be the output file");
	}
	if (check_dir(job, path, "dir", err) == -1 ||
	    check_out(job, path, "output", err) == -1 ||
	    check_out(job, path, "matrix", err) == -1)
		return -1;
	return 0;
}

/* The save mode and matrix of a task. */
static int
check_save(const json_t *task, const char *path, struct jerr *err)
{
	const char *save = jget_str(task, "save", "");
	char kpath[sizeof(err->path)];
	int output = strcmp(save, "output") == 0;

	if (!output && strcmp(save, "checkpoint") != 0) {
		jpath_key(kpath, sizeof(kpath), path, "save");
		return jerr_set(err, kpath, "must be \"checkpoint\" or "
				"\"output\", not \"%s\"", save);
	}
	if (!output && json_object_get(task, "matrix")) {
		jpath_key(kpath, sizeof(kpath), path, "matrix");
		return jerr_set(err, kpath, "only with \"save\": \"output\"");
	}
	return jcheck_abs_path(task, path, "matrix", err);
}

int
relax_check_task(const json_t *task, const char *path, struct jerr *err)
{
	long long n, blocks;

	if (jcheck_object(task, path, task_fields, err) == -1 ||
	    jcheck_int_range(task, path, "n", 3, RELAX_N_MAX, err) == -1)
		return -1;
	n = jget_int(task, "n", 0);
	if (jcheck_int_range(task, path, "blocks", 1, n - 2, err) == -1)
		return -1;
	blocks = jget_int(task, "blocks", 0);
	if (jcheck_int_range(task, path, "block", 0, blocks - 1, err) == -1 ||
	    jcheck_int_range(task, path, "from", 0, MAX_FROM, err) == -1 ||
	    jcheck_int_range(task, path, "sweeps", 0, RELAX_ROUND_MAX,
			     err) == -1 ||
	    jcheck_int_range(task, path, "drop", 1, MAX_FROM, err) == -1 ||
	    jcheck_abs_path(task, path, "dir", err) == -1 ||
	    check_save(task, path, err) == -1 ||
	    jcheck_num_positive(task, path, "timeout", FT_TASK_TIMEOUT_MAX,
				err) == -1)
		return -1;
	return 0;
}

void
relax_spec_get(const json_t *task, struct relax_spec *s)
{
	s->n = (long)jget_int(task, "n", 0);
	s->blocks = (long)jget_int(task, "blocks", 0);
	s->block = (long)jget_int(task, "block", 0);
	s->from = (long)jget_int(task, "from", 0);
	s->sweeps = (long)jget_int(task, "sweeps", 0);
	s->dir = jget_str(task, "dir", "");
	s->output = strcmp(jget_str(task, "save", ""), "output") == 0;
	s->matrix = jget_str(task, "matrix", NULL);
	s->drop = (long)jget_int(task, "drop", 0);
}

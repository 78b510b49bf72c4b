/* relax_job: planning a relax job in rounds (see relax_job.h). */
#include "relax_job.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "relax_block.h"
#include "relax_check.h"
#include "relax_io.h"
#include "util.h"

enum phase {
	PH_NONE = 0,		/* nothing planned yet */
	PH_ROUND,		/* sweeps, then a checkpoint */
	PH_LAST,		/* sweeps up to itmax, then the outputs */
	PH_FINAL,		/* the outputs at the sweep the job stops at */
};

struct relax_job {
	long n, itmax, blocks;
	long every;		/* sweeps in a round */
	double maxeps;
	char *dir;		/* the job's own directory */
	char *output;		/* the output JSON */
	char *matrix;		/* the matrix file, or NULL */
	char *matrix_tmp;	/* the output phase's matrix file, or NULL */
	char key[17];		/* the job's random id, in hex */
	/* The current phase: tasks advance every block from FROM by K. */
	enum phase phase;
	long from, k;
	long drop;		/* > 0: the checkpoint a round's tasks remove */
	double *geps;		/* K: the largest eps of each sweep so far */
	unsigned char *got;	/* BLOCKS: which blocks reported */
	long reported;
	/* The answer, once known. */
	long sweeps;
	double eps, sum;
	int done;
	long phases, tasks;
};

/* A random id for the job's file names. */
static void
make_key(char *key, size_t n)
{
	uint64_t v;

	if (getrandom(&v, sizeof(v), 0) != (ssize_t)sizeof(v))
		v = (uint64_t)time(NULL) * 2654435761u ^ (uint64_t)getpid() ^
		    (uint64_t)(uintptr_t)&v;
	snprintf(key, n, "%016" PRIx64, v);
}

/* Make the job's directory in PARENT.  0, or -1 with ERR. */
static int
make_dir(struct relax_job *j, const char *parent, char *err, size_t n)
{
	int tries;

	for (tries = 0; tries < 8; tries++) {
		make_key(j->key, sizeof(j->key));
		j->dir = ft_asprintf("%s/relax-%s", parent, j->key);
		if (mkdir(j->dir, 0755) == 0)
			return 0;
		snprintf(err, n, "%s: %s", j->dir, strerror(errno));
		free(j->dir);
		j->dir = NULL;
		if (errno != EEXIST)
			break;
	}
	return -1;
}

/* Remove what the job left: its directory and a matrix being written. */
static void
cleanup(struct relax_job *j)
{
	if (j->dir)
		relax_remove_dir(j->dir);
	if (j->matrix_tmp)
		unlink(j->matrix_tmp);
	free(j->matrix_tmp);
	j->matrix_tmp = NULL;
}

/* Start an output phase that ends at sweep F: make its matrix file (the
 * tasks fill it in; one per phase, see relax_job.h).  0, or -1 with ERR. */
static int
make_matrix(struct relax_job *j, long f, char *err, size_t n)
{
	off_t size = (off_t)j->n * j->n * (off_t)sizeof(double);
	int fd, rc = -1;

	if (j->matrix_tmp)
		unlink(j->matrix_tmp);
	free(j->matrix_tmp);
	j->matrix_tmp = NULL;
	if (j->matrix == NULL)
		return 0;
	j->matrix_tmp = ft_asprintf("%s.relax-%s-%ld", j->matrix, j->key, f);
	fd = open(j->matrix_tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
		  0644);
	if (fd != -1) {
		rc = ftruncate(fd, size);
		if (close(fd) == -1)
			rc = -1;
	}
	if (rc == -1)
		snprintf(err, n, "%s: %s", j->matrix_tmp, strerror(errno));
	return rc;
}

/* The task of block B in the current phase. */
static json_t *
task_json(const struct relax_job *j, long b)
{
	json_t *t = json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:s, s:s}",
			      "type", "relax", "n", (json_int_t)j->n,
			      "blocks", (json_int_t)j->blocks,
			      "block", (json_int_t)b,
			      "from", (json_int_t)j->from,
			      "sweeps", (json_int_t)j->k, "dir", j->dir,
			      "save", j->phase == PH_ROUND ? "checkpoint"
							    : "output");

	if (j->phase != PH_ROUND && j->matrix_tmp)
		json_object_set_new(t, "matrix", json_string(j->matrix_tmp));
	if (j->phase != PH_FINAL && j->drop > 0)
		json_object_set_new(t, "drop", json_integer(j->drop));
	return t;
}

/* Plan phase PHASE: every block from FROM by K sweeps, into TASKS.
 * 0, or -1 with ERR. */
static int
plan(struct relax_job *j, enum phase phase, long from, long k, json_t *tasks,
     char *err, size_t n)
{
	long b;

	j->phase = phase;
	j->from = from;
	j->k = k;
	if (phase != PH_ROUND && make_matrix(j, from + k, err, n) == -1)
		return -1;
	free(j->geps);
	j->geps = ft_calloc((size_t)k + 1, sizeof(double));
	memset(j->got, 0, (size_t)j->blocks);
	j->reported = 0;
	for (b = 0; b < j->blocks; b++)
		json_array_append_new(tasks, task_json(j, b));
	j->phases++;
	j->tasks += j->blocks;
	return 0;
}

/* The round after the checkpoint of FROM sweeps. */
static int
plan_round(struct relax_job *j, long from, json_t *tasks, char *err, size_t n)
{
	long k = j->itmax - from < j->every ? j->itmax - from : j->every;

	return plan(j, from + k == j->itmax ? PH_LAST : PH_ROUND, from, k,
		    tasks, err, n);
}

static void *
job_init(const json_t *job, const char *batch_dir, char *err, size_t n)
{
	struct relax_job *j = ft_calloc(1, sizeof(*j));
	long every = (long)jget_int(job, "checkpoint_every",
				    RELAX_EVERY_DEFAULT);

	(void)batch_dir;	/* the job's files go to its "dir" */
	j->n = (long)jget_int(job, "n", 0);
	j->itmax = (long)jget_int(job, "itmax", 0);
	j->blocks = (long)jget_int(job, "blocks", 0);
	j->every = every < RELAX_ROUND_MAX ? every : RELAX_ROUND_MAX;
	j->maxeps = jget_num(job, "maxeps", RELAX_MAXEPS_DEFAULT);
	j->output = ft_strdup(jget_str(job, "output", ""));
	if (jget_str(job, "matrix", NULL))
		j->matrix = ft_strdup(jget_str(job, "matrix", NULL));
	j->got = ft_calloc((size_t)j->blocks, 1);
	if (make_dir(j, jget_str(job, "dir", ""), err, n) == -1) {
		free(j->dir);
		free(j->output);
		free(j->matrix);
		free(j->got);
		free(j->geps);
		free(j);
		return NULL;
	}
	return j;
}

/* One eps: 16 hex digits, the bits of the double.  0 or -1. */
static int
parse_eps(const json_t *v, double *eps)
{
	const char *s = json_string_value(v);
	uint64_t bits;
	char *end;

	if (s == NULL || strlen(s) != 16)
		return -1;
	errno = 0;
	bits = strtoull(s, &end, 16);
	if (errno || *end != '\0')
		return -1;
	memcpy(eps, &bits, sizeof(*eps));
	return 0;
}

/* Take block B's report R into the phase's eps.  0, or -1 with ERR. */
static int
take_report(struct relax_job *j, long b, const json_t *r, char *err,
	    size_t n)
{
	const json_t *eps = json_object_get(r, "eps");
	double e;
	long t;

	if (r == NULL || jget_int(r, "block", -1) != b ||
	    jget_int(r, "from", -1) != j->from ||
	    jget_int(r, "sweeps", -1) != j->k ||
	    json_array_size(eps) != (size_t)j->k) {
		snprintf(err, n, "block %ld (sweeps %ld to %ld): unreadable "
			 "report (is output_cap too small?)", b, j->from,
			 j->from + j->k);
		return -1;
	}
	for (t = 0; t < j->k; t++) {
		if (parse_eps(json_array_get(eps, (size_t)t), &e) == -1) {
			snprintf(err, n, "block %ld: bad eps at sweep %ld", b,
				 j->from + t + 1);
			return -1;
		}
		if (e > j->geps[t])
			j->geps[t] = e;
	}
	return 0;
}

static int
job_report(void *state, size_t index, const json_t *report, char *err,
	   size_t n)
{
	struct relax_job *j = state;
	long b = (long)index;

	if (index >= (size_t)j->blocks || j->got[b]) {
		snprintf(err, n, "unexpected result for task %zu", index);
		return -1;
	}
	if (take_report(j, b, report, err, n) == -1)
		return -1;
	j->got[b] = 1;
	j->reported++;
	return 0;
}

static void
job_failed(void *state, size_t index, const char *reason, char *err,
	   size_t n)
{
	struct relax_job *j = state;

	snprintf(err, n, "block %zu (sweeps %ld to %ld) failed: %s", index,
		 j->from, j->from + j->k, reason);
}

/* The sweeps' verification sums in row order.  0, or -1 with ERR. */
static int
sum_rows(struct relax_job *j, char *err, size_t n)
{
	double *rs, sum = 0.0;
	long b, lo, hi, i;
	char *path;
	int rc = 0;

	for (b = 0; b < j->blocks && rc == 0; b++) {
		relax_out_rows(j->n, j->blocks, b, &lo, &hi);
		rs = ft_malloc((size_t)(hi - lo) * sizeof(double));
		path = relax_rs_path(j->dir, j->sweeps, b);
		rc = relax_read_at(path, rs, (size_t)(hi - lo) * sizeof(double),
				   0, err, n);
		for (i = 0; rc == 0 && i < hi - lo; i++)
			sum += rs[i];
		free(path);
		free(rs);
	}
	j->sum = sum;
	return rc;
}

/* The job's answer is known and its outputs are in files: sum, publish,
 * tidy up.  0, or -1 with ERR. */
static int
finish(struct relax_job *j, char *err, size_t n)
{
	char *text;
	int rc;

	if (sum_rows(j, err, n) == -1)
		return -1;
	if (j->matrix_tmp && rename(j->matrix_tmp, j->matrix) == -1) {
		snprintf(err, n, "%s: %s", j->matrix, strerror(errno));
		return -1;
	}
	free(j->matrix_tmp);
	j->matrix_tmp = NULL;
	text = ft_asprintf("{\"n\": %ld, \"sweeps\": %ld, \"eps\": %.17g, "
			   "\"S\": %.17g}\n", j->n, j->sweeps, j->eps, j->sum);
	rc = ft_write_file_atomic(j->output, text, strlen(text));
	free(text);
	if (rc == -1) {
		snprintf(err, n, "%s: %s", j->output, strerror(errno));
		return -1;
	}
	j->done = 1;
	cleanup(j);
	return 0;
}

/* The sweep of the phase the job stops at (1..K), or 0 to go on. */
static long
stop_sweep(const struct relax_job *j)
{
	long t;

	for (t = 0; t < j->k; t++)
		if (j->geps[t] < j->maxeps)
			return t + 1;
	return j->phase == PH_LAST ? j->k : 0;
}

/* A round has ended: the next round, the outputs, or the end. */
static int
after_round(struct relax_job *j, json_t *tasks, char *err, size_t n)
{
	long s = stop_sweep(j);

	if (s == 0) {
		/* The checkpoint this round started from is not needed once
		 * the next one is written: the next round's tasks drop it. */
		j->drop = j->from;
		return plan_round(j, j->from + j->k, tasks, err, n);
	}
	j->sweeps = j->from + s;
	j->eps = j->geps[s - 1];
	if (s == j->k && j->phase == PH_LAST)
		return finish(j, err, n);
	if (s == j->k)
		return plan(j, PH_FINAL, j->from + j->k, 0, tasks, err, n);
	return plan(j, PH_FINAL, j->from, s, tasks, err, n);
}

static int
job_plan(void *state, json_t *tasks, char *err, size_t n)
{
	struct relax_job *j = state;

	if (j->phase == PH_NONE)
		return plan_round(j, 0, tasks, err, n);
	if (j->done)
		return 0;
	if (j->reported != j->blocks) {
		snprintf(err, n, "%ld of %ld blocks reported", j->reported,
			 j->blocks);
		return -1;
	}
	if (j->phase == PH_FINAL)
		return finish(j, err, n);
	return after_round(j, tasks, err, n);
}

/* Whether complete or failed, the job's directory and a matrix being
 * written go (finish() has published what a complete job produced). */
static void
job_cleanup(void *state, int ok)
{
	(void)ok;
	cleanup(state);
}

static json_t *
job_summary(void *state)
{
	struct relax_job *j = state;
	json_t *s = json_pack("{s:I, s:I, s:f, s:f, s:s, s:I, s:I, s:I, s:I}",
			      "n", (json_int_t)j->n,
			      "sweeps", (json_int_t)j->sweeps,
			      "eps", j->eps, "S", j->sum,
			      "output", j->output,
			      "blocks", (json_int_t)j->blocks,
			      "checkpoint_every", (json_int_t)j->every,
			      "phases", (json_int_t)j->phases,
			      "tasks", (json_int_t)j->tasks);

	if (j->matrix)
		json_object_set_new(s, "matrix", json_string(j->matrix));
	return s;
}

static void
job_free(void *state)
{
	struct relax_job *j = state;

	if (j == NULL)
		return;
	if (!j->done)
		cleanup(j);
	free(j->dir);
	free(j->output);
	free(j->matrix);
	free(j->matrix_tmp);
	free(j->geps);
	free(j->got);
	free(j);
}

static const char *const relax_outputs[] = { "output", "dir", "matrix",
					     NULL };

const struct ft_job_ops relax_job_ops = {
	.validate = relax_check_job,
	.init = job_init,
	.plan = job_plan,
	.report = job_report,
	.failed = job_failed,
	.summary = job_summary,
	.cleanup = job_cleanup,
	.free = job_free,
	.outputs = relax_outputs,
};

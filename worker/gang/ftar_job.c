/* ftar_job: the ftallreduce job object, its checks and data (ftar_job.h). */
#include "ftar_job.h"

#include <stdlib.h>

#include "ftar_plan.h"
#include "gang_check.h"
#include "gang_data.h"
#include "util.h"

#define MAX_DELAY_MS 600000
#define MAX_TIMEOUT 1e7

static const struct jfield job_fields[] = {
	{ "type", JT_STRING, 1 },
	{ "ranks", JT_INT, 1 },
	{ "spares", JT_INT, 0 },
	{ "length", JT_INT, 1 },
	{ "input", JT_STRING, 0 },
	{ "seed", JT_INT, 0 },
	{ "output", JT_STRING, 1 },
	{ "step_delay_ms", JT_NUMBER, 0 },
	{ "bench_rounds", JT_INT, 0 },
	{ "mpi_rounds", JT_INT, 0 },
	{ "timeout", JT_NUMBER, 0 },
	{ NULL, JT_ANY, 0 },
};

/* Ranges of the numeric keys. */
static int
check_ranges(const json_t *job, const char *path, struct jerr *err)
{
	if (jcheck_int_range(job, path, "ranks", 1, FTAR_MAX_RANKS, err) ||
	    jcheck_int_range(job, path, "spares", 0, FTAR_MAX_RANKS, err) ||
	    jcheck_int_range(job, path, "length", 1, FTAR_MAX_LENGTH, err) ||
	    jcheck_int_range(job, path, "seed", 0, INT64_MAX, err) ||
	    jcheck_int_range(job, path, "bench_rounds", 0, 1000, err) ||
	    jcheck_int_range(job, path, "mpi_rounds", 0, 1000, err) ||
	    jcheck_num_range(job, path, "step_delay_ms", 0, MAX_DELAY_MS,
			     err) ||
	    jcheck_num_positive(job, path, "timeout", MAX_TIMEOUT, err))
		return -1;
	return 0;
}

int
ftar_validate(const json_t *job, const char *path, struct jerr *err)
{
	struct ftar_params p;

	if (jcheck_object(job, path, job_fields, err) == -1 ||
	    check_ranges(job, path, err) == -1 ||
	    gcheck_exclusive(job, path, "input", "seed", err) == -1 ||
	    gcheck_output(job, path, "output", err) == -1)
		return -1;
	ftar_params(job, &p);
	return gcheck_input(job, path, "input",
			    (uint64_t)p.ranks * p.length * sizeof(double), err);
}

void
ftar_params(const json_t *job, struct ftar_params *p)
{
	p->ranks = (int)jget_int(job, "ranks", 1);
	p->spares = (int)jget_int(job, "spares", 0);
	p->length = (size_t)jget_int(job, "length", 1);
	p->input = jget_str(job, "input", NULL);
	p->output = jget_str(job, "output", NULL);
	p->seed = (uint64_t)jget_int(job, "seed", 1);
}

int
ftar_load_row(const struct ftar_params *p, int i, double *out, char *err,
	      size_t n)
{
	uint64_t bytes = p->length * sizeof(double);

	if (p->input)
		return gdata_read_at(p->input, (uint64_t)i * bytes, out, bytes,
				     err, n);
	gdata_doubles(p->seed, (uint64_t)i * p->length, out, p->length);
	return 0;
}

int
ftar_load_leaf(const struct ftar_params *p, int b, double *out, char *err,
	       size_t n)
{
	int pp = ftar_pow2_floor(p->ranks), rc;
	double *hi;

	if (ftar_load_row(p, b, out, err, n) == -1)
		return -1;
	if (b + pp >= p->ranks)
		return 0;
	hi = ft_malloc(p->length * sizeof(double));
	rc = ftar_load_row(p, b + pp, hi, err, n);
	if (rc == 0)
		ftar_add(out, hi, out, p->length);
	free(hi);
	return rc;
}

void
ftar_add(const double *lo, const double *hi, double *out, size_t n)
{
	size_t j;

	for (j = 0; j < n; j++)
		out[j] = lo[j] + hi[j];
}

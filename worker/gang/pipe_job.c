/* pipe_job: the pipeline job object, its checks and data (pipe_job.h). */
#include "pipe_job.h"

#include <string.h>

#include "gang_check.h"
#include "gang_data.h"

#define DEFAULT_SIDE 8
#define DEFAULT_CHUNKS 32
#define MAX_DELAY_MS 600000
#define MAX_TIMEOUT 1e7

static const struct jfield job_fields[] = {
	{ "type", JT_STRING, 1 },
	{ "width", JT_INT, 0 },
	{ "height", JT_INT, 0 },
	{ "bytes", JT_INT, 1 },
	{ "chunks", JT_INT, 0 },
	{ "routes", JT_INT, 0 },
	{ "mode", JT_STRING, 0 },
	{ "input", JT_STRING, 0 },
	{ "seed", JT_INT, 0 },
	{ "output", JT_STRING, 1 },
	{ "step_delay_ms", JT_NUMBER, 0 },
	{ "timeout", JT_NUMBER, 0 },
	{ NULL, JT_ANY, 0 },
};

static int
check_ranges(const json_t *job, const char *path, struct jerr *err)
{
	if (jcheck_int_range(job, path, "width", 1, PIPE_MAX_SIDE, err) ||
	    jcheck_int_range(job, path, "height", 1, PIPE_MAX_SIDE, err) ||
	    jcheck_int_range(job, path, "bytes", 1, PIPE_MAX_BYTES, err) ||
	    jcheck_int_range(job, path, "chunks", 1, PIPE_MAX_CHUNKS, err) ||
	    jcheck_int_range(job, path, "routes", 1, 2, err) ||
	    jcheck_int_range(job, path, "seed", 0, INT64_MAX, err) ||
	    jcheck_num_range(job, path, "step_delay_ms", 0, MAX_DELAY_MS,
			     err) ||
	    jcheck_num_positive(job, path, "timeout", MAX_TIMEOUT, err))
		return -1;
	return 0;
}

/* The grid, mode and chunks go together. */
static int
check_shape(const json_t *job, const char *path, struct jerr *err)
{
	const char *mode = jget_str(job, "mode", "pipelined");
	struct pipe_params p;
	char kpath[sizeof(err->path)];

	pipe_params(job, &p);
	if (strcmp(mode, "pipelined") && strcmp(mode, "store_forward")) {
		jpath_key(kpath, sizeof(kpath), path, "mode");
		return jerr_set(err, kpath, "must be \"pipelined\" or "
				"\"store_forward\", not \"%s\"", mode);
	}
	if (p.grid.w * p.grid.h < 2)
		return jerr_set(err, path, "a grid of one node has nothing "
				"to send");
	if (p.grid.routes == 2 && (p.grid.w < 2 || p.grid.h < 2)) {
		jpath_key(kpath, sizeof(kpath), path, "routes");
		return jerr_set(err, kpath, "2 routes need a width and a "
				"height of at least 2");
	}
	if (json_object_get(job, "chunks") && (uint64_t)p.chunks > p.bytes) {
		jpath_key(kpath, sizeof(kpath), path, "chunks");
		return jerr_set(err, kpath, "more chunks than bytes");
	}
	return 0;
}

int
pipe_validate(const json_t *job, const char *path, struct jerr *err)
{
	struct pipe_params p;

	if (jcheck_object(job, path, job_fields, err) == -1 ||
	    check_ranges(job, path, err) == -1 ||
	    check_shape(job, path, err) == -1 ||
	    gcheck_exclusive(job, path, "input", "seed", err) == -1 ||
	    gcheck_output(job, path, "output", err) == -1)
		return -1;
	pipe_params(job, &p);
	return gcheck_input_min(job, path, "input", p.bytes, err);
}

void
pipe_params(const json_t *job, struct pipe_params *p)
{
	long long chunks = jget_int(job, "chunks", DEFAULT_CHUNKS);

	pipe_grid_init(&p->grid, (int)jget_int(job, "width", DEFAULT_SIDE),
		       (int)jget_int(job, "height", DEFAULT_SIDE),
		       (int)jget_int(job, "routes", 2));
	p->bytes = (uint64_t)jget_int(job, "bytes", 1);
	p->chunks = (uint64_t)chunks > p->bytes ? (int)p->bytes : (int)chunks;
	p->store_forward = strcmp(jget_str(job, "mode", "pipelined"),
				  "store_forward") == 0;
	p->input = jget_str(job, "input", NULL);
	p->output = jget_str(job, "output", NULL);
	p->seed = (uint64_t)jget_int(job, "seed", 1);
}

void
pipe_size(const json_t *job, int *active, int *spares)
{
	struct pipe_params p;

	pipe_params(job, &p);
	*active = p.grid.nranks;
	*spares = 0;
}

int
pipe_load(const struct pipe_params *p, uint64_t off, unsigned char *out,
	  size_t len, char *err, size_t n)
{
	if (p->input)
		return gdata_read_at(p->input, off, out, len, err, n);
	gdata_bytes(p->seed, off, out, len);
	return 0;
}

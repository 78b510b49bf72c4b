/*
 * relax: the relaxation of seed 003 (mpi_checkpoint_v2.c) as a job of
 * checkpointed block tasks.
 *
 *   {"name": "r", "job": {"type": "relax", "n": 4098, "itmax": 100,
 *    "blocks": 2, "dir": "/shared/tmp", "output": "/shared/r.json"}}
 *
 * The job (relax_job.c) plans rounds of block tasks; a task
 * (relax_block.c) advances one block of rows by a round of sweeps from the
 * previous round's checkpoint files and prints its eps of every sweep:
 *
 *   {"block": 1, "from": 10, "sweeps": 10, "eps": ["3f1a36e2eb1c432d", ...],
 *    "cached": true, "read_s": 0.001, "compute_s": 0.16, "write_s": 0.02,
 *    "started": 1795308623.386, "ended": 1795308623.571}
 *
 * each eps being the 16 hex digits of the double's bits, so that the master
 * decides where to stop on exactly the values a serial run compares (the
 * rest says where the time went; started/ended: wall clock).  The
 * result is bit-identical to a serial run for any block count and any
 * failures: the same matrix, the same sweep count, eps and S.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin.h"
#include "relax_block.h"
#include "relax_check.h"
#include "relax_job.h"
#include "util.h"

/* The report of a task that ran SPEC (see above). */
static void
report(struct ft_buf *b, const struct relax_spec *s, const double *eps,
       const struct relax_stats *st)
{
	uint64_t bits;
	long t;

	ft_buf_printf(b, "{\"block\": %ld, \"from\": %ld, \"sweeps\": %ld, "
		      "\"eps\": [", s->block, s->from, s->sweeps);
	for (t = 0; t < s->sweeps; t++) {
		memcpy(&bits, &eps[t], sizeof(bits));
		ft_buf_printf(b, "%s\"%016" PRIx64 "\"", t ? ", " : "", bits);
	}
	ft_buf_printf(b, "], \"cached\": %s, \"read_s\": %.6f, "
		      "\"compute_s\": %.6f, \"write_s\": %.6f, "
		      "\"started\": %.6f, \"ended\": %.6f}\n",
		      st->cached ? "true" : "false", st->read_s, st->compute_s,
		      st->write_s, st->started, st->ended);
}

/* Run a relax task: ok with its report, or failed with the reason.
 * Always returns 0. */
static int
relax_run(const struct ft_task *task, struct ft_result *res)
{
	struct relax_spec spec;
	struct relax_stats st;
	struct ft_buf out = { 0 };
	struct jerr jerr;
	double *eps;

	if (relax_check_task(task->spec, "task", &jerr) == -1) {
		(void)ft_snprintf(res->reason, sizeof(res->reason), "%s: %s",
				  jerr.path, jerr.msg);
		res->exit_code = -1;
		return 0;
	}
	relax_spec_get(task->spec, &spec);
	eps = ft_calloc((size_t)spec.sweeps + 1, sizeof(double));
	if (relax_block_run(&spec, task->cancel, eps, &st, res->reason,
			    sizeof(res->reason)) == -1) {
		res->exit_code = -1;
		free(eps);
		return 0;
	}
	report(&out, &spec, eps, &st);
	free(eps);
	if (out.len > task->output_cap) {
		/* Cut short, it would be unreadable: say why instead. */
		snprintf(res->reason, sizeof(res->reason), "report of %zu "
			 "bytes is over output_cap", out.len);
		res->exit_code = -1;
		ft_buf_free(&out);
		return 0;
	}
	res->out = out.data;
	res->out_len = out.len;
	res->ok = 1;
	return 0;
}

FT_PLUGIN_DEFINE("relax", relax_check_task, relax_run, &relax_job_ops)

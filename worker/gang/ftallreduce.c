/*
 * ftallreduce: the fault-tolerant recursive-doubling allreduce of seed 000
 * as a gang job (job object: ftar_job.h; order and layouts: ftar_plan.h).
 *
 * Every rank runs:
 *
 *   fold      the active ranks beyond pp send their vector to rank i - pp,
 *             which builds leaf i; they become free (step 0)
 *   steps     recursive doubling over the positions, level by level
 *             (step L + 1 for level L)
 *   distrib   each free rank gets the result from one position (step
 *             top + 1), then every rank reports its digest and serves
 *
 * Any notice of a death, at any moment (even after the report), makes
 * every survivor recover: it drops its pending requests, tells every other
 * survivor what it holds (STATE, all-to-all by point-to-point), computes
 * the same new layout as the others (ftar_layout_plan), takes part in the
 * transfers it calls for, and resumes the steps from the layout's level.
 * A newer notice during a recovery starts it over.  All of a recovery's
 * messages carry the notice's epoch in their tag, so nothing of an
 * abandoned round is ever taken for the next one.
 *
 * Values are write-once: a node is computed into a new buffer and never
 * changed, so a buffer handed to an abandoned request can stay MPI's.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ftar_job.h"
#include "ftar_plan.h"
#include "gang.h"
#include "gang_data.h"
#include "gang_plugin.h"
#include "gang_req.h"
#include "util.h"

/* Message kinds of gang_tag. */
enum { K_FOLD = 1, K_STEP, K_STATE, K_XFER, K_DIST, K_SYNC };

/* Outcomes of the phases below. */
enum ar_rc { AR_OK = 0, AR_RECOVER, AR_STOP, AR_FAIL };

struct ftar {
	struct gang *g;
	struct ftar_params p;
	int me, nranks, pp, top;
	double *row;			/* this active rank's vector */
	struct ftar_hold hold;		/* what this rank holds */
	double **node;			/* [top + 1]: node(L, hold.leaf >> L) */
	struct ftar_layout lo;		/* the layout followed */
	uint32_t epoch;			/* the notice it answers */
	int recoveries;
	double t0, seconds;
	int bench_rounds;		/* "bench_rounds" done before the run */
	double bench_median, bench_min;
	int mpi_rounds;			/* "mpi_rounds" of MPI_Allreduce */
	double mpi_median, mpi_min;
	struct gang_reqs rq;
	char why[256];			/* after AR_FAIL */
};

/* A gang_wait outcome as a phase outcome. */
static enum ar_rc
ar_wait(struct ftar *a)
{
	int rc = gang_wait(a->g, &a->rq, GANG_WAIT_ANY_DEATH, a->epoch);

	switch (rc) {
	case GANG_OK:
		gang_reqs_clear(&a->rq);
		return AR_OK;
	case GANG_DIED:
	case GANG_EPOCH:
		gang_abandon(a->g, &a->rq);
		return AR_RECOVER;
	case GANG_STOP:
		gang_abandon(a->g, &a->rq);
		return AR_STOP;
	}
	gang_abandon(a->g, &a->rq);
	snprintf(a->why, sizeof(a->why), "MPI error between gang ranks");
	return AR_FAIL;
}

/*
 * Vectors are recycled, never handed back to the system: a fresh 1 MiB
 * malloc is an mmap whose pages fault on first touch, and its free an
 * munmap; with them a 1 MiB allreduce on 8 ranks took 65-125 ms here,
 * with recycling 9-10 ms (MPI_Allreduce: 9-15 ms at the same load).
 * A vector given to an abandoned request is never recycled.
 */
static double **pool;
static int npool, cappool;

/* A vector of the job's length (not zeroed). */
static double *
vec(const struct ftar *a)
{
	if (npool > 0)
		return pool[--npool];
	return ft_malloc(a->p.length * sizeof(double));
}

/* V (a vector no request uses any more) can be used again. */
static void
vec_put(double *v)
{
	if (v == NULL)
		return;
	if (npool == cappool) {
		cappool = cappool ? 2 * cappool : 16;
		pool = ft_realloc(pool, cappool * sizeof(*pool));
	}
	pool[npool++] = v;
}

static int
count(const struct ftar *a)
{
	return (int)a->p.length;
}

/* Fail with the loader's message. */
static enum ar_rc
load_failed(struct ftar *a, const char *msg)
{
	snprintf(a->why, sizeof(a->why), "input: %s", msg);
	return AR_FAIL;
}

/* Load this active rank's vector (before any timing). */
static enum ar_rc
load_input(struct ftar *a)
{
	char msg[200];

	if (a->me >= a->p.ranks)
		return AR_OK;
	a->row = vec(a);
	if (ftar_load_row(&a->p, a->me, a->row, msg, sizeof(msg)) == -1)
		return load_failed(a, msg);
	return AR_OK;
}

/* Step 0: extras hand their vector to rank i - pp; bases build leaf i
 * (into a new buffer: the vector itself is never changed). */
static enum ar_rc
fold(struct ftar *a)
{
	double *w, *leaf = a->row;
	enum ar_rc rc;

	if (gang_step(a->g, 0) == GANG_STOP)
		return AR_STOP;
	if (a->me >= a->p.ranks)
		return AR_OK;
	if (a->me >= a->pp) {
		gang_isend(a->g, &a->rq, a->row, count(a), MPI_DOUBLE,
			   a->me - a->pp, gang_tag(0, K_FOLD, 0));
		if ((rc = ar_wait(a)) == AR_OK)
			gang_set_role(a->g, GANG_ROLE_SPARE);
		return rc;
	}
	if (a->me + a->pp < a->p.ranks) {
		w = vec(a);
		gang_irecv(a->g, &a->rq, w, count(a), MPI_DOUBLE,
			   a->me + a->pp, gang_tag(0, K_FOLD, 0));
		if ((rc = ar_wait(a)) != AR_OK)
			return rc;
		leaf = vec(a);
		ftar_add(a->row, w, leaf, a->p.length);
		vec_put(w);
	}
	a->node[0] = leaf;
	a->hold.leaf = a->me;
	a->hold.f = a->hold.l = 0;
	return AR_OK;
}

/* The exchange of level L: send ours, receive the partner's node, keep
 * node(L + 1). */
static enum ar_rc
step(struct ftar *a, int q, int L)
{
	int partner = a->lo.pos_rank[q ^ (a->lo.d << (L - a->lo.level))];
	int tag = gang_tag(a->epoch, K_STEP, L);
	double *theirs = vec(a);
	enum ar_rc rc;

	gang_isend(a->g, &a->rq, a->node[L], count(a), MPI_DOUBLE, partner,
		   tag);
	gang_irecv(a->g, &a->rq, theirs, count(a), MPI_DOUBLE, partner, tag);
	if ((rc = ar_wait(a)) != AR_OK)
		return rc;
	/* The sum goes over the partner's node, still in cache: node[L]
	 * stays, a survivor may need it in a recovery. */
	if (((a->hold.leaf >> L) & 1) == 0)
		ftar_add(a->node[L], theirs, theirs, a->p.length);
	else
		ftar_add(theirs, a->node[L], theirs, a->p.length);
	a->node[L + 1] = theirs;
	a->hold.l = L + 1;
	return AR_OK;
}

/* Recursive doubling from the layout's level to the top. */
static enum ar_rc
steps(struct ftar *a)
{
	int q = ftar_layout_pos(&a->lo, a->me), L;
	enum ar_rc rc;

	if (q < 0)
		return AR_OK;
	for (L = a->hold.l; L < a->top; L++) {
		if (gang_step(a->g, L + 1) == GANG_STOP)
			return AR_STOP;
		if ((rc = step(a, q, L)) != AR_OK)
			return rc;
	}
	return AR_OK;
}

/* The result to the free ranks that lack it. */
static enum ar_rc
distribute(struct ftar *a)
{
	int q = ftar_layout_pos(&a->lo, a->me);
	int j = ftar_layout_free_index(&a->lo, a->me), k;
	int tag = gang_tag(a->epoch, K_DIST, 0);
	double *res = NULL;
	enum ar_rc rc;

	if (gang_step(a->g, a->top + 1) == GANG_STOP)
		return AR_STOP;
	for (k = 0; q >= 0 && k < a->lo.nfree; k++)
		if (a->lo.free_src[k] == q)
			gang_isend(a->g, &a->rq, a->node[a->top], count(a),
				   MPI_DOUBLE, a->lo.free_rank[k], tag);
	if (j >= 0 && a->lo.free_src[j] >= 0) {
		res = vec(a);
		gang_irecv(a->g, &a->rq, res, count(a), MPI_DOUBLE,
			   a->lo.pos_rank[a->lo.free_src[j]], tag);
	}
	if ((rc = ar_wait(a)) != AR_OK || res == NULL)
		return rc;
	a->node[a->top] = res;
	a->hold = (struct ftar_hold){ 0, 0, a->top, a->top };
	return AR_OK;
}

/* Every survivor tells every other what it holds, for notice E.  STATES
 * gets [nranks][4]; the dead set is that of E once this returns AR_OK. */
static enum ar_rc
agree(struct ftar *a, int *states)
{
	int *mine = ft_malloc(4 * sizeof(int)), r;
	int tag = gang_tag(a->epoch, K_STATE, 0);

	mine[0] = a->hold.active;
	mine[1] = a->hold.leaf;
	mine[2] = a->hold.f;
	mine[3] = a->hold.l;
	memcpy(&states[4 * a->me], mine, 4 * sizeof(int));
	for (r = 0; r < a->nranks; r++) {
		if (r == a->me || gang_is_dead(a->g, r))
			continue;
		gang_isend(a->g, &a->rq, mine, 4, MPI_INT, r, tag);
		gang_irecv(a->g, &a->rq, &states[4 * r], 4, MPI_INT, r, tag);
	}
	return ar_wait(a);
}

/* The transfers of layout LO (epoch a->epoch): send the node we are the
 * source of, receive or rebuild ours.  On AR_OK *GOT is the node this
 * rank holds at LO's level (NULL for a free rank). */
static enum ar_rc
transfer(struct ftar *a, const struct ftar_layout *lo, double **got)
{
	int q = ftar_layout_pos(lo, a->me), k, src;
	double *buf = NULL;
	char msg[200];
	enum ar_rc rc;

	for (k = 0; k < lo->npos; k++)
		if (lo->pos_src[k] == a->me)
			gang_isend(a->g, &a->rq, a->node[lo->level], count(a),
				   MPI_DOUBLE, lo->pos_rank[k],
				   gang_tag(a->epoch, K_XFER, k));
	src = q >= 0 ? lo->pos_src[q] : FTAR_SRC_HELD;
	if (src >= 0 || src == FTAR_SRC_RELOAD)
		buf = vec(a);
	if (src >= 0)
		gang_irecv(a->g, &a->rq, buf, count(a), MPI_DOUBLE, src,
			   gang_tag(a->epoch, K_XFER, q));
	if (src == FTAR_SRC_RELOAD &&
	    ftar_load_leaf(&a->p, q / lo->d, buf, msg, sizeof(msg)) == -1) {
		gang_abandon(a->g, &a->rq);
		return load_failed(a, msg);
	}
	rc = ar_wait(a);
	*got = q < 0 ? NULL : buf ? buf : a->node[lo->level];
	return rc;
}

/* Follow layout LO from now on (its transfers done, GOT as above). */
static void
adopt(struct ftar *a, struct ftar_layout *lo, double *got)
{
	int q = ftar_layout_pos(lo, a->me);

	if (q >= 0 && got != a->node[lo->level]) {
		a->node[lo->level] = got;
		a->hold.leaf = (q / lo->d) << lo->level;
		a->hold.f = lo->level;
	}
	if (q >= 0)
		a->hold.l = lo->level;
	a->hold.active = q >= 0;
	gang_set_role(a->g, q >= 0 ? GANG_ROLE_ACTIVE : GANG_ROLE_SPARE);
	ftar_layout_free(&a->lo);
	a->lo = *lo;
}

/* One round of recovery for the current notice: AR_OK with the new layout
 * adopted, AR_RECOVER when a newer notice came meanwhile. */
static enum ar_rc
recover_round(struct ftar *a)
{
	int *states = ft_malloc(4 * a->nranks * sizeof(int)), r;
	unsigned char *dead = ft_calloc(a->nranks, 1);
	struct ftar_layout lo;
	struct ftar_hold *hold = (struct ftar_hold *)states;
	double *got;
	enum ar_rc rc;

	a->epoch = gang_epoch(a->g);
	if (gang_recovering(a->g, a->epoch) == GANG_STOP)
		rc = AR_STOP;
	else if (gang_epoch(a->g) != a->epoch)
		rc = AR_RECOVER;
	else
		rc = agree(a, states);
	if (rc == AR_OK && gang_epoch(a->g) != a->epoch)
		rc = AR_RECOVER;	/* the dead set must be that of the states */
	if (rc != AR_OK)
		goto out;
	for (r = 0; r < a->nranks; r++)
		dead[r] = (unsigned char)gang_is_dead(a->g, r);
	if (ftar_layout_plan(a->pp, hold, dead, a->nranks, &lo, a->why,
			     sizeof(a->why)) == -1) {
		rc = AR_FAIL;
		goto out;
	}
	if ((rc = transfer(a, &lo, &got)) == AR_OK)
		adopt(a, &lo, got);
	else
		ftar_layout_free(&lo);
out:
	free(dead);
	return rc;	/* STATES may still be MPI's: not freed */
}

/* Recover until a layout is adopted, the gang fails or stops. */
static enum ar_rc
recover(struct ftar *a)
{
	enum ar_rc rc;

	do
		rc = recover_round(a);
	while (rc == AR_RECOVER);
	if (rc == AR_OK)
		a->recoveries++;
	return rc;
}

/* The figures of this rank's run, as a JSON object. */
static char *
report_json(const struct ftar *a)
{
	return ft_asprintf("{\"seconds\": %.6f, \"recoveries\": %d, "
			   "\"positions\": %d, \"resumed_level\": %d, "
			   "\"epoch\": %" PRIu32 ", \"leaves\": %d, "
			   "\"bench_rounds\": %d, \"bench_median_seconds\": %.6f, "
			   "\"bench_min_seconds\": %.6f, \"mpi_rounds\": %d, "
			   "\"mpi_median_seconds\": %.6f, "
			   "\"mpi_min_seconds\": %.6f}",
			   a->seconds, a->recoveries, a->lo.npos, a->lo.level,
			   a->epoch, a->pp, a->bench_rounds, a->bench_median,
			   a->bench_min, a->mpi_rounds, a->mpi_median,
			   a->mpi_min);
}

static int
cmp_double(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;

	return a < b ? -1 : a > b;
}

/* Send RESULT: ok with the digest, or the failure in a->why. */
static void
report(struct ftar *a, int ok)
{
	char *json = ok ? report_json(a) : ft_strdup("");
	struct gang_result r = {
		.ok = (uint8_t)ok, .has_output = (uint8_t)ok,
		.epoch = a->epoch, .seconds = a->seconds,
		.reason = ok ? "" : a->why, .report = json,
	};

	if (ok)
		r.digest = gdata_digest(a->node[a->top],
					a->p.length * sizeof(double));
	r.reason_len = strlen(r.reason);
	r.report_len = strlen(json);
	gang_report(a->g, &r);
	free(json);
}

/* WRITE: the result to the job's output, on disk before WRITTEN (the
 * master records the task ok on it). */
static void
write_output(struct ftar *a)
{
	char why[200] = "";
	int ok = ft_write_file_durable(a->p.output,
				       (const char *)a->node[a->top],
				       a->p.length * sizeof(double), 1) == 0;

	if (!ok)
		snprintf(why, sizeof(why), "%s: %s", a->p.output,
			 strerror(errno));
	gang_written(a->g, ok, why);
}

/* After the report: serve until STOP (AR_STOP) or a notice (AR_RECOVER). */
static enum ar_rc
serve(struct ftar *a, int ok)
{
	for (;;) {
		switch (gang_await(a->g, a->epoch)) {
		case GANG_WRITE:
			if (ok)
				write_output(a);
			else
				gang_written(a->g, 0, a->why);
			break;
		case GANG_EPOCH:
			if (ok)
				return AR_RECOVER;
			a->epoch = gang_epoch(a->g);
			break;
		default:
			return AR_STOP;
		}
	}
}

/* Set up A for gang G and JOB. */
static void
ftar_setup(struct ftar *a, struct gang *g, const json_t *job)
{
	memset(a, 0, sizeof(*a));
	a->g = g;
	ftar_params(job, &a->p);
	a->me = gang_rank(g);
	a->nranks = gang_size(g);
	a->pp = ftar_pow2_floor(a->p.ranks);
	a->top = ftar_log2(a->pp);
	a->node = ft_calloc(a->top + 1, sizeof(double *));
	a->hold = (struct ftar_hold){ a->me < a->pp, -1, 0, -1 };
	ftar_layout_initial(a->p.ranks, a->p.spares, &a->lo);
	gang_reqs_init(&a->rq);
	gang_set_role(g, a->me < a->p.ranks ? GANG_ROLE_ACTIVE
					    : GANG_ROLE_SPARE);
}

/* The phases until this rank holds the result (or fails, or stops). */
static enum ar_rc
compute(struct ftar *a, enum ar_rc rc)
{
	while (rc == AR_RECOVER || rc == AR_OK) {
		if (rc == AR_RECOVER && (rc = recover(a)) != AR_OK)
			break;
		if ((rc = steps(a)) != AR_OK)
			continue;
		if ((rc = distribute(a)) == AR_OK)
			break;
	}
	return rc;
}

/* Rank 0 hears from every rank, then answers each: the ranks of a
 * benchmark round start together. */
static enum ar_rc
sync_all(struct ftar *a)
{
	unsigned char *b = ft_calloc(a->nranks, 1);
	enum ar_rc rc;
	int r;

	for (r = 1; a->me == 0 && r < a->nranks; r++)
		gang_irecv(a->g, &a->rq, &b[r], 1, MPI_BYTE, r,
			   gang_tag(0, K_SYNC, 0));
	if (a->me != 0)
		gang_isend(a->g, &a->rq, b, 1, MPI_BYTE, 0, gang_tag(0, K_SYNC, 0));
	if ((rc = ar_wait(a)) != AR_OK)
		return rc;
	for (r = 1; a->me == 0 && r < a->nranks; r++)
		gang_isend(a->g, &a->rq, b, 1, MPI_BYTE, r, gang_tag(0, K_SYNC, 1));
	if (a->me != 0)
		gang_irecv(a->g, &a->rq, b, 1, MPI_BYTE, 0, gang_tag(0, K_SYNC, 1));
	if ((rc = ar_wait(a)) == AR_OK)
		free(b);
	return rc;
}

/* Free what a finished fault-free round of B allocated. */
static void
release(struct ftar *b)
{
	int L;

	for (L = 0; L <= b->top; L++)
		if (b->node[L] != b->row)
			vec_put(b->node[L]);
	free(b->node);
	ftar_layout_free(&b->lo);
	gang_reqs_free(&b->rq);
}

/* One timed fault-free round on a fresh state (the job's vectors of A),
 * its seconds into *T.  A death fails the benchmark. */
static enum ar_rc
bench_round(struct ftar *a, const json_t *job, double *t)
{
	struct ftar b;
	enum ar_rc rc;
	double t0;

	ftar_setup(&b, a->g, job);
	b.row = a->row;
	rc = sync_all(&b);
	t0 = ft_now();
	if (rc == AR_OK)
		rc = fold(&b);
	if (rc == AR_OK)
		rc = steps(&b);
	if (rc == AR_OK)
		rc = distribute(&b);
	*t = ft_now() - t0;
	if (rc == AR_OK)
		release(&b);
	if (rc == AR_RECOVER) {
		snprintf(a->why, sizeof(a->why), "a rank died during the "
			 "benchmark rounds");
		rc = AR_FAIL;
	} else if (rc == AR_FAIL) {
		memcpy(a->why, b.why, sizeof(a->why));
	}
	return rc;
}

/* Sort the N round times T; their median and fastest. */
static void
summarize(double *t, int n, double *median, double *fastest)
{
	qsort(t, n, sizeof(double), cmp_double);
	*median = t[n / 2];
	*fastest = t[0];
}

/* The job's "bench_rounds" timed rounds: median and fastest. */
static enum ar_rc
bench(struct ftar *a, const json_t *job)
{
	int n = (int)jget_int(job, "bench_rounds", 0), i;
	double *t = ft_calloc(n + 1, sizeof(double));
	enum ar_rc rc = AR_OK;

	for (i = 0; i < n && rc == AR_OK; i++)
		rc = bench_round(a, job, &t[i]);
	if (rc == AR_OK && n > 0) {
		a->bench_rounds = n;
		summarize(t, n, &a->bench_median, &a->bench_min);
	}
	free(t);
	return rc;
}

/* One timed MPI_Allreduce of IN over C into OUT (N doubles): the
 * slowest rank's seconds into *T. */
static void
mpi_round(MPI_Comm c, const double *in, double *out, size_t n, double *t)
{
	double t0, mine;

	MPI_Barrier(c);
	t0 = ft_now();
	MPI_Allreduce(in, out, (int)n, MPI_DOUBLE, MPI_SUM, c);
	mine = ft_now() - t0;
	MPI_Allreduce(&mine, t, 1, MPI_DOUBLE, MPI_MAX, c);
}

/*
 * The job's "mpi_rounds": plain MPI_Allreduce of the same vectors over
 * the active ranks of the same processes, for benchmarks.  These are
 * blocking collectives: a death among them hangs the survivors until the
 * master gives up on the attempt (its timeout), so they are for fault-
 * free benchmark runs only.  They run before the job, and the master is
 * served between rounds.
 */
static enum ar_rc
mpi_bench(struct ftar *a, const json_t *job)
{
	int n = (int)jget_int(job, "mpi_rounds", 0), i;
	double *t = ft_calloc(n + 1, sizeof(double)), *out;
	MPI_Comm c;

	if (n == 0) {
		free(t);
		return AR_OK;
	}
	MPI_Comm_split(gang_comm(a->g), a->me < a->p.ranks ? 0 :
		       MPI_UNDEFINED, a->me, &c);
	if (c != MPI_COMM_NULL) {
		out = ft_malloc(a->p.length * sizeof(double));
		for (i = 0; i < n; i++) {
			mpi_round(c, a->row, out, a->p.length, &t[i]);
			if (gang_poll(a->g) == GANG_STOP)
				break;
		}
		free(out);
		MPI_Comm_free(&c);
		n = i < n ? i + 1 : n;
		a->mpi_rounds = n;
		summarize(t, n, &a->mpi_median, &a->mpi_min);
	}
	free(t);
	return AR_OK;
}

/* The plugin's run hook (see gang_plugin.h). */
static int
ftar_run(struct gang *g, const json_t *job, char *err, size_t n)
{
	struct ftar a;
	enum ar_rc rc;

	(void)err;
	(void)n;
	ftar_setup(&a, g, job);
	rc = load_input(&a);
	if (rc == AR_OK)
		rc = mpi_bench(&a, job);
	if (rc == AR_OK)
		rc = bench(&a, job);
	a.t0 = ft_now();
	if (rc == AR_OK)
		rc = compute(&a, fold(&a));
	while (rc == AR_OK || rc == AR_FAIL) {
		a.seconds = ft_now() - a.t0;
		report(&a, rc == AR_OK);
		rc = serve(&a, rc == AR_OK);
		if (rc == AR_RECOVER)
			rc = compute(&a, rc);
	}
	return 0;
}

/* The gang's processes: ranks active, spares watching. */
static void
ftar_size(const json_t *job, int *active, int *spares)
{
	*active = (int)jget_int(job, "ranks", 1);
	*spares = (int)jget_int(job, "spares", 0);
}

FT_GANG_PLUGIN_DEFINE("ftallreduce", ftar_validate, ftar_size, ftar_run)

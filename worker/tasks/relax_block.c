/* relax_block: one block advanced by a few sweeps (see relax_block.h). */
#include "relax_block.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "relax_io.h"
#include "relax_kernel.h"
#include "task_keep.h"
#include "util.h"

/* The matrix file is little-endian doubles, written as they lie in memory. */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
	       "relax writes native doubles as the little-endian matrix file");

#define HUGE_PAGE (2UL << 20)
#define KEEP_IDLE_S 30.0	/* an idle worker lets go of its block after
				 * this (FTFARM_RELAX_KEEP_S) */
#define CHUNK_BYTES (1UL << 20)	/* rows of the last sweep written at once,
				 * when the checkpoint is not mapped */

/* A task's rows [g0, g1) of the matrix, in two buffers of N per row. */
struct work {
	const struct relax_spec *s;
	long g0, g1;		/* rows held: own rows and halo */
	long lo, hi;		/* own rows */
	double *x;		/* the state */
	double *y;		/* the next state */
	const double *xown;	/* not NULL: the state's own rows are here */
	double *yown;		/* not NULL: the next state's own rows go here */
	struct relax_stats *st;
};

/* The buffers of the last task, and what they hold (see relax_block.h).
 * The last sweep of a checkpointing task stores the own rows straight
 * into the mapped checkpoint file, which the worker keeps mapped: its
 * next task of the block reads them there, and the task after that, which
 * takes that file over as its own checkpoint, finds its pages writable.
 * Tasks run one at a time on a worker; the lock is only a safeguard. */
static struct {
	pthread_mutex_t mu;
	double *a, *b;		/* two buffers */
	size_t cap;		/* doubles in each */
	struct relax_map cur;	/* the checkpoint last written, if mapped */
	struct relax_map old;	/* the one before it, if mapped */
	int valid;		/* a, or cur when mapped, holds the rows of: */
	char *dir;		/*   this job's */
	long n, blocks, block;	/*   block */
	long sweep;		/*   after this many sweeps */
	long g0;		/*   laid out from this row */
} keep = { .mu = PTHREAD_MUTEX_INITIALIZER };

static void forget(void);

/* An idle worker lets go of the kept block: the job may have ended or
 * failed meanwhile, and its removed checkpoints keep their disk space for
 * as long as they stay mapped. */
static struct task_keep keeper = {
	.mu = &keep.mu, .forget = forget, .env = "FTFARM_RELAX_KEEP_S",
	.default_s = KEEP_IDLE_S,
};

static double *
row(const struct work *w, double *buf, long i)
{
	return buf + (size_t)(i - w->g0) * (size_t)w->s->n;
}

/* Row I of the state, and of the next state: the own rows may lie in a
 * mapped checkpoint instead. */
static const double *
xrow(const struct work *w, long i)
{
	if (w->xown && i >= w->lo && i < w->hi)
		return w->xown + (size_t)(i - w->lo) * (size_t)w->s->n;
	return row(w, w->x, i);
}

static double *
yrow(const struct work *w, long i)
{
	if (w->yown && i >= w->lo && i < w->hi)
		return w->yown + (size_t)(i - w->lo) * (size_t)w->s->n;
	return row(w, w->y, i);
}

static long
max_l(long a, long b)
{
	return a > b ? a : b;
}

static long
min_l(long a, long b)
{
	return a < b ? a : b;
}

/* The rows task S needs: its own, and SWEEPS more on each side (the whole
 * boundary row when it gets that close). */
static void
geometry(struct work *w, const struct relax_spec *s, struct relax_stats *st)
{
	memset(w, 0, sizeof(*w));
	w->s = s;
	w->st = st;
	w->lo = relax_lo(s->n, s->blocks, s->block);
	w->hi = relax_lo(s->n, s->blocks, s->block + 1);
	w->g0 = w->lo - s->sweeps <= 1 ? 0 : w->lo - s->sweeps;
	w->g1 = w->hi + s->sweeps >= s->n - 1 ? s->n : w->hi + s->sweeps;
}

/* DOUBLES doubles on huge pages where the kernel allows (sweeps ran 8 %
 * faster on them here: fewer TLB misses).  NULL if out of memory. */
static double *
big_alloc(size_t doubles)
{
	size_t len = (doubles * sizeof(double) + HUGE_PAGE - 1) &
		     ~(HUGE_PAGE - 1);
	double *p = aligned_alloc(HUGE_PAGE, len);

	if (p)
		madvise(p, len, MADV_HUGEPAGE);
	return p;
}

/* Free the buffers: once a block is done with, so that an idle worker
 * holds no memory (the next job pays for touching new pages once). */
static void
forget(void)
{
	relax_map_drop(&keep.cur);
	relax_map_drop(&keep.old);
	free(keep.a);
	free(keep.b);
	free(keep.dir);
	keep.a = keep.b = NULL;
	keep.dir = NULL;
	keep.cap = 0;
	keep.valid = 0;
}

/* A task has ended: whatever the worker keeps, it keeps for the idle
 * time from now.  Called with keep.mu held. */
static void
keep_idle(void)
{
	task_keep_idle(&keeper,
		       keep.a || keep.b || keep.cur.rows || keep.old.rows);
}

/* Does the worker hold the own rows S starts from?  When they are in the
 * mapped checkpoint, that file must still have its name: a file taken
 * over is being rewritten (S is then a late attempt, whose result is not
 * wanted; it fails as it reads the halo). */
static int
kept(const struct relax_spec *s)
{
	char *path;
	int hit;

	if (!keep.valid || strcmp(keep.dir, s->dir) != 0 ||
	    keep.n != s->n || keep.blocks != s->blocks ||
	    keep.block != s->block || keep.sweep != s->from)
		return 0;
	if (keep.cur.rows == NULL)
		return 1;
	path = relax_cp_path(s->dir, s->from, s->block);
	hit = relax_map_is(&keep.cur, path);
	free(path);
	return hit;
}

/* Give W its buffers, with its own rows already in place when HIT.
 * 0, or -1 with ERR. */
static int
prepare(struct work *w, int hit, char *err, size_t n)
{
	size_t need = (size_t)(w->g1 - w->g0) * (size_t)w->s->n;
	size_t own = (size_t)(w->hi - w->lo) * (size_t)w->s->n;
	double *a, *b;

	if (keep.cap < need) {
		a = big_alloc(need);
		b = big_alloc(need);
		if (a == NULL || b == NULL) {
			free(a);
			free(b);
			forget();
			snprintf(err, n, "out of memory for %zu rows",
				 2 * (size_t)(w->g1 - w->g0));
			return -1;
		}
		if (hit && keep.cur.rows == NULL)
			memcpy(a + (size_t)(w->lo - w->g0) * w->s->n,
			       keep.a + (size_t)(w->lo - keep.g0) * w->s->n,
			       own * sizeof(double));
		free(keep.a);
		free(keep.b);
		keep.a = a;
		keep.b = b;
		keep.cap = need;
	} else if (hit && keep.cur.rows == NULL && keep.g0 != w->g0) {
		memmove(keep.a + (size_t)(w->lo - w->g0) * w->s->n,
			keep.a + (size_t)(w->lo - keep.g0) * w->s->n,
			own * sizeof(double));
	}
	if (hit && keep.cur.rows)
		w->xown = keep.cur.rows;
	if (!hit) {
		/* Another block, job or round: its mappings are of no use. */
		relax_map_drop(&keep.cur);
		relax_map_drop(&keep.old);
	}
	keep.valid = 0;
	w->x = keep.a;
	w->y = keep.b;
	return 0;
}

/* Read rows [R0, R1) of the checkpoint of W's start, from the files of the
 * blocks holding them.  0, or -1 with ERR. */
static int
read_rows(struct work *w, long r0, long r1, char *err, size_t n)
{
	const struct relax_spec *s = w->s;
	size_t rowb = (size_t)s->n * sizeof(double);
	long b, lo, a, z;
	char *path;
	int rc;

	for (b = relax_block_of(s->n, s->blocks, r0); r0 < r1; b++) {
		lo = relax_lo(s->n, s->blocks, b);
		a = r0;
		z = min_l(r1, relax_lo(s->n, s->blocks, b + 1));
		path = relax_cp_path(s->dir, s->from, b);
		rc = relax_read_at(path, row(w, w->x, a), (size_t)(z - a) * rowb,
				   (off_t)((size_t)(a - lo) * rowb), err, n);
		free(path);
		if (rc == -1)
			return -1;
		r0 = z;
	}
	return 0;
}

/* Fill W's state with the matrix after S->from sweeps (the own rows are
 * there already when HIT).  0, or -1 with ERR. */
static int
load(struct work *w, int hit, char *err, size_t n)
{
	const struct relax_spec *s = w->s;
	long i, a = max_l(w->g0, 1), z = min_l(w->g1, s->n - 1);

	for (i = w->g0; i < w->g1; i++) {
		/* The next state's boundary: never computed, always read. */
		row(w, w->y, i)[0] = row(w, w->y, i)[s->n - 1] = 0.0;
		if (i == 0 || i == s->n - 1) {
			rk_init_row(row(w, w->x, i), i, s->n);
			rk_init_row(row(w, w->y, i), i, s->n);
		}
	}
	if (s->from == 0) {
		for (i = a; i < z; i++)
			if (!hit || i < w->lo || i >= w->hi)
				rk_init_row(row(w, w->x, i), i, s->n);
		return 0;
	}
	if (!hit)
		return read_rows(w, a, z, err, n);
	if (read_rows(w, a, w->lo, err, n) == -1)
		return -1;
	return read_rows(w, w->hi, z, err, n);
}

/* Sweep rows [R0, R1) of W; the largest change, or EPS if larger. */
static double
sweep_rows(struct work *w, long r0, long r1, double eps)
{
	long i, n = w->s->n;

	for (i = r0; i < r1; i++)
		eps = rk_sweep_row(yrow(w, i), xrow(w, i - 1), xrow(w, i),
				   xrow(w, i + 1), n, eps);
	return eps;
}

/* Write W's own rows [R0, R1), which lie from FIRST on, to checkpoint CP
 * (at their place in the file).  0, or -1 with ERR. */
static int
write_rows(struct work *w, struct relax_file *cp, const double *first,
	   long r0, long r1, char *err, size_t n)
{
	size_t rowb = (size_t)w->s->n * sizeof(double);
	double t0 = ft_now();
	int rc;

	rc = relax_file_write(cp, first, (size_t)(r1 - r0) * rowb,
			      (off_t)((size_t)(r0 - w->lo) * rowb), err, n);
	w->st->write_s += ft_now() - t0;
	return rc;
}

/* Sweep T of K: the rows still exact after it, own rows last.  CP, when
 * not NULL (the last sweep of a checkpointing task whose file is not
 * mapped), receives the own rows in chunks as they are computed, while
 * they are in the cache.  W's eps of the sweep in *EPS.  0, or -1 with
 * ERR. */
static int
sweep(struct work *w, long t, long k, struct relax_file *cp, double *eps,
      char *err, size_t n)
{
	const struct relax_spec *s = w->s;
	long r0 = max_l(1, w->lo - (k - t)), r1 = min_l(s->n - 1, w->hi + (k - t));
	long chunk = max_l(1, (long)(CHUNK_BYTES / ((size_t)s->n * sizeof(double))));
	long i, z;
	double e = 0.0;

	sweep_rows(w, r0, w->lo, 0.0);
	sweep_rows(w, w->hi, r1, 0.0);
	for (i = w->lo; w->yown && i < w->hi; i++)	/* never swept */
		yrow(w, i)[0] = yrow(w, i)[s->n - 1] = 0.0;
	for (i = w->lo; i < w->hi; i = z) {
		z = cp ? min_l(w->hi, i + chunk) : w->hi;
		e = sweep_rows(w, i, z, e);
		if (cp && write_rows(w, cp, yrow(w, i), i, z, err, n) == -1)
			return -1;
	}
	*eps = e;
	return 0;
}

/* Write rows [LO, HI) of W's state at their place in FD, in pieces: the
 * own rows may lie apart from the others.  0, or -1 with errno. */
static int
write_state(const struct work *w, int fd, long lo, long hi)
{
	size_t rowb = (size_t)w->s->n * sizeof(double);
	long z;

	for (; lo < hi; lo = z) {
		z = hi;
		if (w->xown && lo < w->lo)
			z = min_l(hi, w->lo);
		else if (w->xown && lo < w->hi)
			z = min_l(hi, w->hi);
		if (relax_pwrite(fd, xrow(w, lo), (size_t)(z - lo) * rowb,
				 (off_t)((size_t)lo * rowb)) == -1)
			return -1;
	}
	return 0;
}

/* Write rows [LO, HI) of W's state into the matrix file.  The job made
 * the file: never create it here (a late attempt must not bring back a
 * file the job has moved on from).  0, or -1 with ERR. */
static int
write_matrix(struct work *w, long lo, long hi, char *err, size_t n)
{
	int fd = open(w->s->matrix, O_WRONLY | O_CLOEXEC);
	int rc = -1;

	if (fd != -1) {
		rc = write_state(w, fd, lo, hi);
		if (close(fd) == -1)
			rc = -1;
	}
	if (rc == -1)
		snprintf(err, n, "%s: %s", w->s->matrix, strerror(errno));
	return rc;
}

/* The job's outputs from W's final state: the rows' verification sums,
 * and the rows into the matrix file if there is one.  0, or -1 with ERR. */
static int
save_output(struct work *w, char *err, size_t n)
{
	const struct relax_spec *s = w->s;
	struct relax_file rs = { .fd = -1 };
	long lo, hi, i;
	double *sums;
	char *path;
	int rc = -1;

	relax_out_rows(s->n, s->blocks, s->block, &lo, &hi);
	sums = ft_malloc((size_t)(hi - lo) * sizeof(double));
	for (i = lo; i < hi; i++)
		sums[i - lo] = rk_row_sum(xrow(w, i), i, s->n);
	if (s->matrix && write_matrix(w, lo, hi, err, n) == -1)
		goto out;
	path = relax_rs_path(s->dir, s->from + s->sweeps, s->block);
	rc = relax_file_open(&rs, path, NULL, 0, err, n);
	free(path);
	if (rc == 0 && (relax_file_write(&rs, sums, (size_t)(hi - lo) *
					 sizeof(double), 0, err, n) == -1 ||
			relax_file_commit(&rs, err, n) == -1)) {
		relax_file_abort(&rs);
		rc = -1;
	}
out:
	free(sums);
	return rc;
}

/* Remember that W's own rows after its sweeps are in the checkpoint it
 * wrote, mapped as OUT, or else in the first buffer. */
static void
remember(const struct work *w, struct relax_map *out)
{
	const struct relax_spec *s = w->s;

	keep.a = w->x;
	keep.b = w->y;
	relax_map_drop(&keep.old);
	keep.old = keep.cur;
	keep.cur = *out;
	memset(out, 0, sizeof(*out));
	if (keep.dir == NULL || strcmp(keep.dir, s->dir) != 0) {
		free(keep.dir);
		keep.dir = ft_strdup(s->dir);
	}
	keep.n = s->n;
	keep.blocks = s->blocks;
	keep.block = s->block;
	keep.sweep = s->from + s->sweeps;
	keep.g0 = w->g0;
	keep.valid = 1;
}

/* The sweeps of W, writing the checkpoint CP (NULL for an output task)
 * during the last one: straight into its mapping OUT when there is one.
 * 0, or -1 with ERR. */
static int
run_sweeps(struct work *w, struct relax_file *cp, const struct relax_map *out,
	   const volatile int *cancel, double *eps, char *err, size_t n)
{
	long t, k = w->s->sweeps;
	double *tmp, t0 = ft_now(), w0 = w->st->write_s;

	for (t = 1; t <= k; t++) {
		if (*cancel) {
			snprintf(err, n, "cancelled");
			return -1;
		}
		if (t == k && cp && out->rows)
			w->yown = out->rows;
		if (sweep(w, t, k, t == k && !w->yown ? cp : NULL,
			  &eps[t - 1], err, n) == -1)
			return -1;
		tmp = w->x;
		w->x = w->y;
		w->y = tmp;
		w->xown = w->yown;
		w->yown = NULL;
	}
	w->st->compute_s = ft_now() - t0 - (w->st->write_s - w0);
	return 0;
}

/* Open the checkpoint file W writes, made of the one it may drop, and
 * map it into OUT when it is to be swept into (OUT stays empty where the
 * file cannot be mapped: it is written instead).  0, or -1 with ERR. */
static int
open_checkpoint(struct work *w, struct relax_file *cp, struct relax_map *out,
		char *err, size_t n)
{
	const struct relax_spec *s = w->s;
	size_t size = (size_t)(w->hi - w->lo) * (size_t)s->n * sizeof(double);
	char *path = relax_cp_path(s->dir, s->from + s->sweeps, s->block);
	char *old = s->drop > 0 ? relax_cp_path(s->dir, s->drop, s->block)
				: NULL;
	double t0 = ft_now();
	int rc = relax_file_open(cp, path, old, (off_t)size, err, n);

	if (rc == 0 && s->sweeps > 0)
		(void)relax_file_map(cp, size, out, &keep.old);
	w->st->write_s += ft_now() - t0;
	free(path);
	free(old);
	return rc;
}

/* Remove the checkpoint S no longer needs.  A late attempt of the round
 * before that still reads it either has it open (and reads on) or fails
 * to open it (and its result is not wanted anyway). */
static void
drop(const struct relax_spec *s)
{
	char *path = relax_cp_path(s->dir, s->drop, s->block);

	unlink(path);
	free(path);
}

/* Save W: its checkpoint CP (already written when it swept) or outputs.
 * 0; 1 when the checkpoint has another attempt's file, not this one's
 * (the same bytes, unless this attempt is a late one whose input was
 * taken over: either way W's rows are not to be remembered); or -1 with
 * ERR. */
static int
save(struct work *w, struct relax_file *cp, char *err, size_t n)
{
	double t0 = ft_now();
	int rc;

	if (w->s->output) {
		rc = save_output(w, err, n);
		if (rc == 0 && w->s->drop > 0)
			drop(w->s);
	} else if (w->s->sweeps == 0 &&
		   write_rows(w, cp, xrow(w, w->lo), w->lo, w->hi, err,
			      n) == -1) {
		rc = -1;
	} else {
		rc = relax_file_commit(cp, err, n);
	}
	w->st->write_s += ft_now() - t0;
	return rc;
}

int
relax_block_run(const struct relax_spec *s, const volatile int *cancel,
		double *eps, struct relax_stats *st, char *err, size_t n)
{
	struct relax_file cp = { .fd = -1 };
	struct relax_map out = { 0 };
	struct work w;
	double t0;
	int hit, saved, rc = -1;

	memset(st, 0, sizeof(*st));
	st->started = ft_wall();
	geometry(&w, s, st);
	pthread_mutex_lock(&keep.mu);
	hit = kept(s);
	if (prepare(&w, hit, err, n) == -1)
		goto out;
	st->cached = hit;
	t0 = ft_now();
	if (load(&w, hit, err, n) == -1)
		goto out;
	st->read_s = ft_now() - t0;
	if (!s->output && open_checkpoint(&w, &cp, &out, err, n) == -1)
		goto out;
	if (run_sweeps(&w, s->output ? NULL : &cp, &out, cancel, eps, err,
		       n) == -1 ||
	    (saved = save(&w, &cp, err, n)) == -1)
		goto out;
	if (s->output)
		forget();	/* the block is done with */
	else if (saved == 0)
		remember(&w, &out);
	rc = 0;
out:
	if (rc == -1)
		relax_file_abort(&cp);
	relax_map_drop(&out);	/* unless remembered */
	keep_idle();
	pthread_mutex_unlock(&keep.mu);
	st->ended = ft_wall();
	return rc;
}

/*
 * wc_reduce: the reduce and merge tasks of a wordcount job (see wc_task.h).
 *
 * Reduce P adds up partition P of every shard in a hash table and writes
 * it as a run sorted by count descending, then word bytes ascending.  The
 * partitions split words by hash, so a word is in one run only, and the
 * merge is a plain k-way merge of the runs into the text output.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>

#include "util.h"
#include "wc_file.h"
#include "wc_table.h"
#include "wc_task.h"

#define OUT_BYTES (1 << 20)	/* output buffer of the merge */

#define BATCH 256		/* records counted at once (prefetching) */
#define AHEAD_SLOTS 16		/* slots read ahead when writing a run */

/* Add the partition file PATH to T.  0, or -1 with RES failed. */
static int
reduce_file(struct wc_table *t, const char *path, struct ft_result *res)
{
	struct wc_word w[BATCH];
	uint64_t counts[BATCH];
	char err[512];
	const uint8_t *p;
	uint8_t *data;
	size_t len, n, k = 0;
	struct wc_in in;
	int rc;

	data = wc_read_all(path, WC_PAD, &len, err, sizeof(err));
	if (data == NULL)
		return wc_fail(res, "cannot read %s", err) - 1;
	if (t->slots == NULL)	/* sized by the first file: ~10 bytes a word */
		wc_table_init(t, len / 10);
	rc = wc_in_open(&in, data, len);
	while (rc == 0 && (rc = wc_in_next(&in, &p, &n, &counts[k])) == 1) {
		/* Partition files hold folded words. */
		wc_word_prep(&w[k], p, n, 1);
		if (++k == BATCH) {
			wc_table_add_batch(t, w, counts, k);
			k = 0;
		}
		rc = 0;
	}
	wc_table_add_batch(t, w, counts, k);
	free(data);
	if (rc == -1)
		return wc_fail(res, "%s: corrupt or truncated", path) - 1;
	return 0;
}

/* Write the words of T, sorted, as the run NAME of DIR.  0 or -1. */
static int
reduce_write(struct wc_table *t, const char *dir, const char *name,
	     const struct ft_task *task, struct ft_result *res)
{
	struct wc_slot **list = wc_table_list(t);
	struct wc_out out = { 0 };
	const uint8_t *w;
	size_t i, n;
	int rc = 0;

	wc_table_sort(list, t->used);
	wc_out_reserve(&out, wc_out_guess(t->used));
	for (i = 0; i < t->used; i++) {
		/* The sorted slots lie all over the table. */
		if (i + AHEAD_SLOTS < t->used)
			__builtin_prefetch(list[i + AHEAD_SLOTS]);
		w = wc_slot_word(list[i], &n);
		wc_out_slot_record(&out, w, n, wc_slot_count(list[i]));
	}
	wc_out_finish(&out, t->used);
	if (*task->cancel)
		rc = wc_fail(res, "cancelled") - 1;
	else
		rc = wc_task_write(res, dir, name, task->attempt, out.data,
				   out.len);
	wc_out_free(&out);
	free(list);
	return rc;
}

int
wc_reduce_run(const struct ft_task *task, struct ft_result *res)
{
	const char *dir = jget_str(task->spec, "dir", "");
	long long part = jget_int(task->spec, "part", 0);
	long long shards = jget_int(task->spec, "shards", 0), s;
	struct wc_table t;
	char out[128], name[64], *path;
	int rc = 0;

	wc_map_job_done(dir);
	memset(&t, 0, sizeof(t));
	for (s = 0; rc == 0 && s < shards; s++) {
		if (*task->cancel) {
			rc = wc_fail(res, "cancelled") - 1;
			break;
		}
		path = wc_job_file(dir, "map-%lld.%lld", s, part);
		rc = reduce_file(&t, path, res);
		free(path);
	}
	if (rc == 0 && t.slots == NULL)
		wc_table_init(&t, 0);
	if (rc == 0) {
		snprintf(name, sizeof(name), "run-%lld", part);
		rc = reduce_write(&t, dir, name, task, res);
	}
	if (rc == 0) {
		snprintf(out, sizeof(out), "{\"words\": %" PRIu64
			 ", \"distinct\": %zu}\n", t.words, t.used);
		wc_ok(res, out);
	}
	wc_table_free(&t);
	return 0;
}

/* ---- merge ---- */

#define RUN_PAD 32		/* readable bytes after a run's data */

/* One sorted run being merged. */
struct run {
	uint8_t *data;		/* the file, mapped, zeros after it */
	size_t len, span;	/* its size, and the mapping's */
	struct wc_in in;
	const uint8_t *w;	/* current record */
	size_t n;
	uint64_t count;
	uint64_t prefix;	/* its word's first 8 bytes, big-endian */
};

/* Read R's next record.  1, 0 at its end, -1 when corrupt.  The first 8
 * bytes of its word are readable even at the file's end: run_open maps
 * zeros after the file. */
static int
run_next(struct run *r)
{
	int rc = wc_in_next(&r->in, &r->w, &r->n, &r->count);

	if (rc == 1)
		r->prefix = wc_prefix(r->w, r->n);
	return rc;
}

/* Does run A's record come before run B's?  Count descending, then word
 * bytes ascending; the zero-padded prefixes settle most ties on count
 * (as in wc_table_sort), the words the rest. */
static inline int
before(const struct run *a, const struct run *b)
{
	int c;

	if (a->count != b->count)
		return a->count > b->count;
	if (a->prefix != b->prefix)
		return a->prefix < b->prefix;
	c = memcmp(a->w, b->w, a->n < b->n ? a->n : b->n);
	return c ? c < 0 : a->n < b->n;
}

/* Restore the heap order of H (N runs) below position I. */
static void
sift_down(struct run **h, size_t n, size_t i)
{
	struct run *x = h[i];
	size_t c;

	while ((c = 2 * i + 1) < n) {
		if (c + 1 < n && before(h[c + 1], h[c]))
			c++;
		if (!before(h[c], x))
			break;
		h[i] = h[c];
		i = c;
	}
	h[i] = x;
}

/* Map the run PATH into R, with a page of zeros after the file so that
 * reads a little past its end (RUN_PAD) are harmless, and read its first
 * record.  Mapped, not read: the runs hold every distinct word of the
 * job.  1 when it has a record, 0 when empty, -1 with RES failed. */
static int
run_open(struct run *r, const char *path, struct ft_result *res)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	char eb[64];
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC), e = 0, rc;

	if (fd < 0 || fstat(fd, &st) == -1) {
		e = errno;
	} else {
		r->len = (size_t)st.st_size;
		r->span = (r->len + page - 1) / page * page + page;
		r->data = mmap(NULL, r->span, PROT_READ,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (r->data == MAP_FAILED ||
		    (r->len > 0 && mmap(r->data, r->len, PROT_READ,
					MAP_PRIVATE | MAP_FIXED, fd, 0) ==
				   MAP_FAILED))
			e = errno;
	}
	if (fd >= 0)
		close(fd);
	if (r->data == MAP_FAILED)
		r->data = NULL;
	if (e)
		return wc_fail(res, "cannot read %s: %s", path,
			       wc_strerror(e, eb, sizeof(eb))) - 1;
	madvise(r->data, r->len, MADV_SEQUENTIAL);
	_Static_assert(RUN_PAD <= 4096, "the zero page covers RUN_PAD");
	if (wc_in_open(&r->in, r->data, r->len) == -1)
		return wc_fail(res, "%s: not a run file", path) - 1;
	rc = run_next(r);
	if (rc == -1)
		return wc_fail(res, "%s: corrupt or truncated", path) - 1;
	return rc;
}

/* Append "WORD\tCOUNT\n" to O, writing O out to F when it is full.
 * 0 or -1 with ERR. */
static int
emit(struct wc_out *o, struct wc_afile *f, const struct run *r, char *err,
     size_t n)
{
	char num[48];		/* digits end at 24; 24 bytes copied */
	int k = 24;
	uint64_t c = r->count;
	uint8_t *p;

	do
		num[--k] = (char)('0' + c % 10);
	while ((c /= 10) != 0);
	if (o->len + r->n + RUN_PAD + 26 > o->cap) {
		if (wc_afile_write(f, o->data, o->len, err, n) == -1)
			return -1;
		o->len = 0;
		if (r->n + RUN_PAD + 26 > o->cap)
			wc_out_reserve(o, r->n + RUN_PAD + 26);
	}
	p = o->data + o->len;
	if (r->n <= RUN_PAD)	/* RUN_PAD bytes are readable (run_open) */
		memcpy(p, r->w, RUN_PAD);
	else
		memcpy(p, r->w, r->n);
	p += r->n;
	*p++ = '\t';
	memcpy(p, num + k, 24);
	p += 24 - k;
	*p++ = '\n';
	o->len = (size_t)(p - o->data);
	return 0;
}

/* A merge in progress. */
struct merge {
	const struct ft_task *task;
	struct ft_result *res;
	struct run *runs;	/* all runs */
	size_t nruns;
	struct run **heap;	/* the runs with records left */
	size_t live;
	struct wc_afile f;	/* the output */
	struct wc_out o;	/* its buffer */
	uint64_t words, distinct;
};

/* Merge the live runs into the output.  0, or -1 with the task failed. */
static int
merge_loop(struct merge *m)
{
	char err[512];
	struct run *r;
	size_t i;
	int more;

	for (i = m->live; i-- > 0;)
		sift_down(m->heap, m->live, i);
	while (m->live > 0) {
		if (m->live == 2 && before(m->heap[1], m->heap[0])) {
			r = m->heap[0];	/* two runs (the default): no sift */
			m->heap[0] = m->heap[1];
			m->heap[1] = r;
		}
		r = m->heap[0];
		if ((m->distinct & 0xffff) == 0 && *m->task->cancel)
			return wc_fail(m->res, "cancelled") - 1;
		if (emit(&m->o, &m->f, r, err, sizeof(err)) == -1)
			return wc_fail(m->res, "%s", err) - 1;
		m->words += r->count;
		m->distinct++;
		more = run_next(r);
		if (more == -1)
			return wc_fail(m->res, "run-%zu: corrupt or truncated",
				       (size_t)(r - m->runs)) - 1;
		if (more == 0)
			m->heap[0] = m->heap[--m->live];
		if (m->live > 2)
			sift_down(m->heap, m->live, 0);
	}
	if (m->o.len > 0 &&
	    wc_afile_write(&m->f, m->o.data, m->o.len, err, sizeof(err)) == -1)
		return wc_fail(m->res, "%s", err) - 1;
	return 0;
}

/* Open the task's runs into M.  0 or -1. */
static int
merge_open(struct merge *m, const char *dir)
{
	char *path;
	size_t r;
	int rc = 0;

	m->runs = ft_calloc(m->nruns, sizeof(*m->runs));
	m->heap = ft_calloc(m->nruns, sizeof(*m->heap));
	for (r = 0; rc >= 0 && r < m->nruns; r++) {
		path = wc_job_file(dir, "run-%zu", r);
		rc = run_open(&m->runs[r], path, m->res);
		if (rc == 1)
			m->heap[m->live++] = &m->runs[r];
		free(path);
	}
	return rc < 0 ? -1 : 0;
}

static void
merge_close(struct merge *m)
{
	size_t r;

	for (r = 0; r < m->nruns; r++)
		if (m->runs[r].data)
			munmap(m->runs[r].data, m->runs[r].span);
	free(m->runs);
	free(m->heap);
	wc_out_free(&m->o);
}

int
wc_merge_run(const struct ft_task *task, struct ft_result *res)
{
	const char *dir = jget_str(task->spec, "dir", "");
	const char *output = jget_str(task->spec, "output", "");
	struct merge m;
	char mark[17], at[128], tag[160], err[512], out[128];

	wc_map_job_done(dir);
	memset(&m, 0, sizeof(m));
	m.task = task;
	m.res = res;
	m.nruns = (size_t)jget_int(task->spec, "reducers", 1);
	m.f.fd = -1;
	wc_job_mark(dir, mark);
	wc_attempt_tag(at, sizeof(at), task->attempt);
	snprintf(tag, sizeof(tag), "%s.%s", mark, at);
	wc_out_reserve(&m.o, OUT_BYTES);
	if (merge_open(&m, dir) == 0) {
		if (wc_afile_open(&m.f, output, tag, err, sizeof(err)) == -1)
			wc_fail(res, "%s", err);
		else if (merge_loop(&m) == -1)
			wc_afile_abort(&m.f);
		else if (*task->cancel || wc_job_ended(dir)) {
			/* A duplicate too late: the output is written. */
			wc_afile_abort(&m.f);
			wc_fail(res, *task->cancel ? "cancelled"
						   : "the job has ended");
		} else if (wc_afile_commit(&m.f, err, sizeof(err)) == -1)
			wc_fail(res, "%s", err);
		else {
			snprintf(out, sizeof(out), "{\"words\": %" PRIu64
				 ", \"distinct\": %" PRIu64 "}\n", m.words,
				 m.distinct);
			wc_ok(res, out);
		}
	}
	merge_close(&m);
	return 0;
}

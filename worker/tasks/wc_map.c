/*
 * wc_map: the map task of a wordcount job (see wc_task.h).
 *
 * A shard is the global byte range [start, end) of the concatenation of the
 * manifest's files.  A word belongs to the shard holding its first byte: a
 * shard that starts inside a word (the byte before it, in the same file, is
 * a word byte) skips that word, and the shard's last word is read to its
 * end, past `end` if need be, but never past the end of its file.
 *
 * Files are read with pread into one buffer (no mmap: a file truncated
 * under a mapping would kill the worker with SIGBUS).  A word that reaches
 * the end of the buffer is moved to its front before the next read, and
 * the buffer grows when a word fills half of it, so words have no length
 * limit.
 *
 * The scan works on blocks of 64 bytes: a 64-bit mask of word bytes per
 * block (SIMD where the CPU has it), whose bit transitions, found with
 * count-trailing-zeros, are word starts and ends.  That costs about one
 * mispredicted branch per block rather than two per word.  The words of
 * MASKS blocks are hashed as they are found, their slots prefetched at
 * once, and counted as a batch after the next batch's scan: a slot has the
 * time of a scan and a count to arrive from memory.
 *
 * A worker keeps its last map's table for the next map of the same job:
 * the shards of a job share most of their words, which are then found in
 * place rather than inserted again (each insertion a cache miss and a
 * mispredicted branch), and the table's pages are not made again.  Writing
 * the partitions sets every count back to 0; words with no count are
 * stale, never written.  A table where stale words outnumber the shard's
 * own (a job of ever new words) is not kept; a worker lets go of it when
 * it runs a reduce or merge of the job (the maps are over then), or once
 * idle (task_keep.h, FTFARM_WORDCOUNT_KEEP_S).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "task_keep.h"
#include "util.h"
#include "wc_file.h"
#include "wc_table.h"
#include "wc_task.h"

#define BUF_BYTES (64 << 10)	/* read size: a small part of L2, which
				 * the table's warm slots need more */
#define BUF_PAD 64		/* readable bytes after the data (one block) */
#define TAIL_READ 4096		/* read this far past the shard's end */
#define WORD_READ 65536		/* read size past the shard, inside a word */
#define MASKS 16		/* blocks scanned at once */
#define MAX_WORDS (MASKS * 32)	/* words they can hold */
#define SHORT_PATH 72		/* characters of a path in a reason */
#define KEEP_IDLE_S 30.0	/* an idle worker lets go of its table after
				 * this (FTFARM_WORDCOUNT_KEEP_S) */

/* wc_out_slot_record reads WC_SLOT_KEY bytes of a slot's word. */
_Static_assert(WC_SLOT_KEY <= sizeof(((struct wc_slot *)0)->key.w) &&
	       WC_SLOT_KEY <= WC_PAD, "a slot's word is shorter than read");

struct map {
	const struct ft_task *task;
	struct ft_result *res;
	struct wc_class cls;
	wc_masks_fn masks;
	struct wc_table tab;
	uint8_t *buf;		/* cap + BUF_PAD bytes */
	size_t cap;
	uint64_t start, end;	/* the shard */
	uint64_t lim;		/* the shard's end in the file being read */
	const char *path;	/* the file being read */
	uint64_t size;		/* its planned size */
	int fd;
	size_t distinct;	/* words of the shard (the table may hold
				 * stale ones too) */
};

/* The last map's table, all counts 0, and the job it counted for.  Tasks
 * run one at a time on a worker; the lock is shared with the idle thread
 * that lets go of the table (task_keep.h). */
static struct {
	pthread_mutex_t mu;
	struct wc_table tab;	/* slots NULL: none */
	char *dir;
} kept = { .mu = PTHREAD_MUTEX_INITIALIZER };

static void
kept_forget(void)
{
	if (kept.tab.slots)
		wc_table_free(&kept.tab);
	free(kept.dir);
	kept.dir = NULL;
}

static struct task_keep keeper = {
	.mu = &kept.mu, .forget = kept_forget,
	.env = "FTFARM_WORDCOUNT_KEEP_S", .default_s = KEEP_IDLE_S,
};

/* Fail the task for the file being read: "PATH: WHY". */
static int
file_fail(struct map *m, const char *why)
{
	char sb[SHORT_PATH + 1];

	wc_fail(m->res, "%s: %s", wc_short(m->path, sb, SHORT_PATH), why);
	return -1;
}

static int
file_errno(struct map *m, int e)
{
	char eb[64];

	return file_fail(m, wc_strerror(e, eb, sizeof(eb)));
}

/* The file changed size since it was planned. */
static int
size_fail(struct map *m)
{
	char sb[SHORT_PATH + 1];
	struct stat st;
	long long now = fstat(m->fd, &st) == 0 ? (long long)st.st_size : -1;

	wc_fail(m->res, "%s changed size: planned %" PRIu64 " bytes, now %lld",
		wc_short(m->path, sb, SHORT_PATH), m->size, now);
	return -1;
}

/* Read the file from offset OFF + *N into BUF[*N..cap), as much as fits
 * and the file has, but little past the shard's end: there only the last
 * word is read on (in reads at least as long as what the buffer holds, so
 * that carrying a long word costs linear time).  0, or -1 (task failed). */
static int
fill(struct map *m, uint64_t off, size_t *n)
{
	uint64_t at = off + *n;
	size_t want = m->cap - *n, past = *n > WORD_READ ? *n : WORD_READ;
	ssize_t r;

	if (m->size - at < want)
		want = (size_t)(m->size - at);
	if (at < m->lim && m->lim - at + TAIL_READ < want)
		want = (size_t)(m->lim - at + TAIL_READ);
	else if (at >= m->lim && want > past)
		want = past;
	while (want > 0) {
		if (*m->task->cancel) {
			wc_fail(m->res, "cancelled");
			return -1;
		}
		r = pread(m->fd, m->buf + *n, want, (off_t)at);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return file_errno(m, errno);
		if (r == 0)
			return size_fail(m);
		*n += (size_t)r;
		at += (uint64_t)r;
		want -= (size_t)r;
	}
	return 0;
}

/* The state of a scan through one file. */
struct scan {
	uint64_t off;		/* file offset of buf[0] */
	size_t n;		/* bytes in buf */
	size_t i;		/* next block starts here */
	size_t ws;		/* start of the current word, when in one */
	int in;			/* inside a word */
	uint64_t prev;		/* 1: the byte before buf[i] is a word byte */
};

/* The buffer is used up (S->i >= S->n).  Read on, keeping a word cut by
 * the buffer's end.  1: go on, 0: the shard's part of the file is done,
 * -1: failed. */
static int
scan_refill(struct map *m, struct scan *s)
{
	size_t keep;

	if (s->off + s->n >= m->size || (!s->in && s->off + s->n >= m->lim)) {
		if (s->in)
			wc_table_add(&m->tab, m->buf + s->ws, s->n - s->ws, 1);
		return 0;
	}
	if (!s->in) {
		s->off += s->n;
		s->n = s->i = 0;
		s->prev = 0;
		return fill(m, s->off, &s->n) == -1 ? -1 : 1;
	}
	keep = s->n - s->ws;
	memmove(m->buf, m->buf + s->ws, keep);
	s->off += s->ws;
	s->n = s->i = keep;
	s->ws = 0;
	s->prev = 1;
	if (keep > m->cap / 2) {
		m->cap *= 2;
		m->buf = ft_realloc(m->buf, m->cap + BUF_PAD);
	}
	return fill(m, s->off, &s->n) == -1 ? -1 : 1;
}

/* Make the bits of MASK from R (1..63) on repeat bit R - 1, so that the
 * partial last block of the buffer shows no transition past its data: a
 * word running to the end of the data stays open. */
static void
pad_mask(uint64_t *mask, size_t r)
{
	uint64_t keep = ~0ULL >> (64 - r);

	if (*mask >> (r - 1) & 1)
		*mask |= ~keep;
	else
		*mask &= keep;
}

/* Prepare the word BUF[WS..WE) into *W and start loading its slot of
 * SLOTS (a table of SHIFT, see wc_home), so that it is at hand when the
 * word is counted, a batch of words later. */
static inline void
found(const uint8_t *buf, const struct wc_slot *slots, unsigned shift,
      struct wc_word *w, size_t ws, size_t we)
{
	wc_word_prep(w, buf + ws, we - ws, 1);
	__builtin_prefetch(&slots[wc_home(w->h, shift)]);
}

/* Find the words of the NB blocks at S->i whose masks are MASKS, prepared
 * for counting, into W.  Their number; *DONE set when a word starts at or
 * after the shard's end.
 *
 * In a block, word starts and ends alternate: once a word carried in from
 * the block before has taken the first end, the k-th start pairs with the
 * k-th end.  Only the block holding the shard's end looks at it. */
static size_t
scan_words(const struct map *m, struct scan *s, const uint64_t *masks,
	   size_t nb, struct wc_word *w, int *done)
{
	const uint8_t *buf = m->buf;
	const struct wc_slot *slots = m->tab.slots;
	unsigned shift = m->tab.shift;
	size_t i = s->i, n = s->n, ws = s->ws, nw = 0, j;
	size_t stop = m->lim > s->off ? (size_t)(m->lim - s->off) : 0;
	uint64_t prev = s->prev, edge, starts, ends, late = 0;
	int in = s->in;

	for (j = 0; j < nb && !late; j++, i += 64) {
		edge = masks[j] << 1 | prev;
		starts = masks[j] & ~edge;
		ends = ~masks[j] & edge;
		prev = masks[j] >> 63;
		if (i + 64 > stop) {	/* starts from bit STOP - I are late */
			late = starts & ~0ULL << (stop > i ? stop - i : 0);
			starts &= ~late;
		}
		if (in && ends) {
			found(buf, slots, shift, &w[nw++], ws,
			      i + (size_t)__builtin_ctzll(ends));
			ends &= ends - 1;
			in = 0;
		}
		while (starts) {
			ws = i + (size_t)__builtin_ctzll(starts);
			starts &= starts - 1;
			if (ends == 0) {
				in = 1;	/* the word goes on past the block */
				break;
			}
			found(buf, slots, shift, &w[nw++], ws,
			      i + (size_t)__builtin_ctzll(ends));
			ends &= ends - 1;
		}
	}
	if (late) {
		*done = 1;
		i -= 64;
	}
	s->i = i < n ? i : n;
	s->ws = ws;
	s->in = in;
	s->prev = prev;
	return nw;
}

/* Scan the buffer from S->i on, reading on as needed, to the end of the
 * shard's part of the file.  0 or -1.
 *
 * The words of a batch are counted after the next batch is scanned, so
 * that the slots a batch prefetches have a whole scan to arrive, while
 * the counting, which mostly hits the cache, overlaps the next batch's
 * misses.  A pending batch is counted before the buffer is refilled: its
 * long words point into it. */
static int
scan_file(struct map *m, struct scan *s)
{
	uint64_t masks[MASKS];
	struct wc_word w[2][MAX_WORDS];
	size_t nb, nw[2] = { 0, 0 };
	int rc, done = 0, cur = 0;

	while (!done) {
		if (s->i >= s->n) {
			wc_table_add_batch(&m->tab, w[!cur], NULL, nw[!cur]);
			nw[!cur] = 0;
			rc = scan_refill(m, s);
			if (rc <= 0)
				return rc;
		}
		nb = (s->n - s->i + 63) / 64;
		if (nb > MASKS)
			nb = MASKS;
		m->masks(&m->cls, m->buf + s->i, nb, masks);
		if (s->n - s->i < 64 * nb)
			pad_mask(&masks[nb - 1], s->n - s->i - 64 * (nb - 1));
		nw[cur] = scan_words(m, s, masks, nb, w[cur], &done);
		cur = !cur;
		wc_table_add_batch(&m->tab, w[cur], NULL, nw[cur]);
		nw[cur] = 0;
	}
	wc_table_add_batch(&m->tab, w[!cur], NULL, nw[!cur]);
	return 0;
}

/* Skip the word that runs on from before local offset A (BUF holds the
 * file from *OFF = A - 1), up to the shard's end at most: past it no word
 * of the shard can start.  Leaves *I after it.  0 or -1. */
static int
skip_cut_word(struct map *m, uint64_t *off, size_t *n, size_t *i)
{
	const uint8_t *word = m->cls.word;
	size_t end;

	*i = 1;
	if (*n == 0 || !word[m->buf[0]])
		return 0;
	for (;;) {
		end = m->lim - *off < *n ? (size_t)(m->lim - *off) : *n;
		while (*i < end && word[m->buf[*i]])
			(*i)++;
		if (*i < *n || *off + *n >= m->size)
			return 0;
		*off += *n;
		*n = 0;
		*i = 0;
		if (fill(m, *off, n) == -1)
			return -1;
	}
}

/* Count the words of the open file (global offset GSTART) that belong to
 * the shard.  0 or -1. */
static int
count_file(struct map *m, uint64_t gstart)
{
	uint64_t a = (m->start > gstart ? m->start : gstart) - gstart;
	struct scan s;

	memset(&s, 0, sizeof(s));
	m->lim = (m->end < gstart + m->size ? m->end : gstart + m->size) -
		 gstart;
	s.off = a > 0 ? a - 1 : 0;
	if (fill(m, s.off, &s.n) == -1)
		return -1;
	if (a > 0 && skip_cut_word(m, &s.off, &s.n, &s.i) == -1)
		return -1;
	if (s.off + s.i >= m->lim)
		return 0;	/* the cut word ran past the shard */
	return scan_file(m, &s);
}

/* Open PATH, check it is the regular file of SIZE bytes that was planned,
 * count its words of the shard.  0 or -1. */
static int
map_file(struct map *m, const char *path, uint64_t gstart, uint64_t size)
{
	struct stat st;
	int rc = -1;

	m->path = path;
	m->size = size;
	m->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (m->fd < 0)
		return file_errno(m, errno);
	if (fstat(m->fd, &st) == -1)
		file_errno(m, errno);
	else if (!S_ISREG(st.st_mode))
		file_fail(m, "not a regular file any more");
	else if ((uint64_t)st.st_size != size)
		size_fail(m);
	else if (size == 0 || count_file(m, gstart) == 0)
		rc = 0;
	close(m->fd);
	m->fd = -1;
	return rc;
}

/* Parse a manifest line "GSTART SIZE PATH" (PATH escaped) in place. */
static int
parse_line(char *line, uint64_t *gstart, uint64_t *size, char **path)
{
	char *p = line, *end;
	size_t n = strlen(line);

	if (n > 0 && line[n - 1] == '\n')
		line[n - 1] = '\0';
	errno = 0;
	*gstart = strtoull(p, &end, 10);
	if (end == p || *end != ' ')
		return -1;
	p = end + 1;
	*size = strtoull(p, &end, 10);
	if (end == p || *end != ' ' || errno)
		return -1;
	*path = end + 1;
	return wc_path_unescape(*path);
}

/* Count the shard's words, file by file, from the manifest of DIR read
 * from byte OFFSET on.  0 or -1 (RES set). */
static int
map_files(struct map *m, const char *dir, long long offset)
{
	char *mpath = wc_job_file(dir, "manifest"), *line = NULL, *path;
	char eb[64];
	size_t cap = 0;
	uint64_t gstart, size;
	FILE *f = fopen(mpath, "re");
	int rc = 0;

	if (f == NULL || fseeko(f, (off_t)offset, SEEK_SET) == -1) {
		rc = wc_fail(m->res, "%s: %s", mpath,
			     wc_strerror(errno, eb, sizeof(eb))) - 1;
		goto out;
	}
	while (rc == 0 && getline(&line, &cap, f) > 0) {
		if (parse_line(line, &gstart, &size, &path) == -1) {
			rc = wc_fail(m->res, "%s: bad line at byte %lld", mpath,
				     (long long)ftello(f)) - 1;
			break;
		}
		if (gstart >= m->end && !(size == 0 && gstart == m->start))
			break;
		if (gstart + size > m->start || size == 0)
			rc = map_file(m, path, gstart, size);
	}
out:
	if (f)
		fclose(f);
	free(line);
	free(mpath);
	return rc;
}

/* Write the counts as partition files DIR/map-SHARD.r.  0 or -1. */
static int
map_write(struct map *m, const char *dir, unsigned shard, unsigned parts)
{
	struct wc_out *out = ft_calloc(parts, sizeof(*out));
	uint64_t *nrec = ft_calloc(parts, sizeof(*nrec));
	char name[64];
	const uint8_t *w;
	size_t i, len;
	unsigned p;
	int rc = 0;

	for (p = 0; p < parts; p++)
		wc_out_reserve(&out[p], wc_out_guess(m->tab.used / parts));
	for (i = 0; i <= m->tab.mask; i++) {
		struct wc_slot *s = &m->tab.slots[i];

		if (wc_slot_count(s) == 0)
			continue;	/* empty, or a stale word */
		p = (unsigned)(wc_slot_hash(s) >> 32) % parts;
		w = wc_slot_word(s, &len);
		wc_out_slot_record(&out[p], w, len, wc_slot_count(s));
		nrec[p]++;
		wc_slot_clear_count(s);
	}
	for (p = 0; p < parts; p++)
		m->distinct += nrec[p];
	for (p = 0; p < parts; p++) {
		wc_out_finish(&out[p], nrec[p]);
		snprintf(name, sizeof(name), "map-%u.%u", shard, p);
		if (rc == 0 && *m->task->cancel)
			rc = wc_fail(m->res, "cancelled") - 1;
		if (rc == 0)
			rc = wc_task_write(m->res, dir, name, m->task->attempt,
					   out[p].data, out[p].len);
		wc_out_free(&out[p]);
	}
	free(out);
	free(nrec);
	return rc;
}

/* A low guess of how many distinct words BYTES of text hold (Heaps' law,
 * under the benchmark corpus: 31k in 1 MB, 108k in 16 MB, and no more
 * beyond, where its vocabulary is used up).  A table sized too small grows
 * once; one sized too big costs cache and TLB misses on every probe. */
static size_t
distinct_guess(uint64_t bytes)
{
	double d = 20 * sqrt((double)bytes);

	return d < 1024 ? 1024 : d > (1 << 22) ? (1 << 22) : (size_t)d;
}

/* Start M's table: the one kept from the job's last map if there is
 * one, else an empty one sized for the shard. */
static void
table_take(struct map *m, const char *dir)
{
	pthread_mutex_lock(&kept.mu);
	if (kept.tab.slots && strcmp(kept.dir, dir) == 0) {
		m->tab = kept.tab;
		m->tab.words = 0;
		memset(&kept.tab, 0, sizeof(kept.tab));
	}
	kept_forget();		/* another job's: of no use */
	pthread_mutex_unlock(&kept.mu);
	if (m->tab.slots == NULL)
		wc_table_init(&m->tab, distinct_guess(m->end - m->start));
}

/* The map is over; OK: it wrote its partitions, so every count is 0.
 * Keep the table for the job's next map unless its stale words
 * outnumber the shard's, or free it. */
static void
table_give(struct map *m, const char *dir, int ok)
{
	int keep = ok && m->tab.used - m->distinct <= m->distinct;

	pthread_mutex_lock(&kept.mu);
	kept_forget();
	if (keep) {
		kept.tab = m->tab;
		kept.dir = ft_strdup(dir);
	} else {
		wc_table_free(&m->tab);
	}
	memset(&m->tab, 0, sizeof(m->tab));
	task_keep_idle(&keeper, kept.tab.slots != NULL);
	pthread_mutex_unlock(&kept.mu);
}

void
wc_map_job_done(const char *dir)
{
	pthread_mutex_lock(&kept.mu);
	if (kept.dir && strcmp(kept.dir, dir) == 0) {
		kept_forget();
		task_keep_idle(&keeper, 0);
	}
	pthread_mutex_unlock(&kept.mu);
}

/* Set the byte classes from the task's "separators", if any. */
static void
map_classes(struct map *m, const json_t *spec)
{
	const char *hex = jget_str(spec, "separators", NULL);
	uint8_t set[32];

	if (hex && wc_set_from_hex(hex, set) == 0)
		wc_class_from_set(&m->cls, set);
	else
		wc_class_default(&m->cls);
}

int
wc_map_run(const struct ft_task *task, struct ft_result *res)
{
	const json_t *spec = task->spec;
	const char *dir = jget_str(spec, "dir", "");
	struct map m;
	char out[160];

	memset(&m, 0, sizeof(m));
	m.task = task;
	m.res = res;
	m.fd = -1;
	m.start = (uint64_t)jget_int(spec, "start", 0);
	m.end = (uint64_t)jget_int(spec, "end", 0);
	m.cap = BUF_BYTES;
	m.buf = ft_malloc(m.cap + BUF_PAD);
	m.masks = wc_masks_pick();
	map_classes(&m, spec);
	table_take(&m, dir);
	if (map_files(&m, dir, jget_int(spec, "offset", 0)) == 0 &&
	    map_write(&m, dir, (unsigned)jget_int(spec, "shard", 0),
		      (unsigned)jget_int(spec, "reducers", 1)) == 0) {
		snprintf(out, sizeof(out),
			 "{\"words\": %" PRIu64 ", \"bytes\": %" PRIu64
			 ", \"distinct\": %zu}\n", m.tab.words,
			 m.end - m.start, m.distinct);
		wc_ok(res, out);
	}
	table_give(&m, dir, res->ok);
	free(m.buf);
	return 0;
}

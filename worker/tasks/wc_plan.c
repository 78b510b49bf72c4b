/* wc_plan: inputs, manifest and shards of a wordcount job (see wc_plan.h). */
#include "wc_plan.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"
#include "wc_file.h"
#include "wc_task.h"

#define MIB (1024ULL * 1024)
/*
 * The default number of shards.  The planner does not know how many
 * workers there are, so it aims at a dozen shards at least (6 per worker
 * with 2 workers, 4 with 3, 3 with 4: balance, and little work redone when
 * a worker is lost), of 32 MiB at most beyond that, and never smaller than
 * 1 MiB.  Each shard costs about 5 ms of CPU besides its bytes (its table,
 * its partition files, and its vocabulary again in the reducers), so more
 * shards than that cost throughput.
 */
#define SHARD_TARGET (32 * MIB)	/* largest default shard */
#define SHARD_MIN (1 * MIB)	/* smallest default shard */
#define SHARDS_MIN 12		/* default: at least this many shards */
#define SHARDS_MAX 1024		/* default: at most this many */

/* Directories seen in the walk of one input, by device and inode. */
struct seen {
	struct { dev_t dev; ino_t ino; } *v;
	size_t n, cap;		/* used, slots (a power of 2) */
};

static size_t
seen_slot(const struct seen *s, dev_t dev, ino_t ino)
{
	uint64_t h = ((uint64_t)ino * 0x9e3779b97f4a7c15ULL) ^ (uint64_t)dev;
	size_t i = (size_t)(h >> 17) & (s->cap - 1);

	while (s->v[i].ino != 0 &&
	       (s->v[i].dev != dev || s->v[i].ino != ino))
		i = (i + 1) & (s->cap - 1);
	return i;
}

/* Add (DEV, INO) to S: 1 if new, 0 if seen before. */
static int
seen_add(struct seen *s, dev_t dev, ino_t ino)
{
	size_t i, k;

	if (2 * (s->n + 1) > s->cap) {
		struct seen old = *s;

		s->cap = s->cap ? s->cap * 2 : 64;
		s->v = ft_calloc(s->cap, sizeof(*s->v));
		s->n = 0;
		for (k = 0; k < old.cap; k++)
			if (old.v[k].ino != 0)
				s->v[seen_slot(s, old.v[k].dev,
					       old.v[k].ino)] = old.v[k], s->n++;
		free(old.v);
	}
	i = seen_slot(s, dev, ino ? ino : (ino_t)-1);
	if (s->v[i].ino != 0)
		return 0;
	s->v[i].dev = dev;
	s->v[i].ino = ino ? ino : (ino_t)-1;
	s->n++;
	return 1;
}

static void
add_file(struct wc_plan *p, const char *path, uint64_t size)
{
	if (p->nfiles == p->cap) {
		p->cap = p->cap ? p->cap * 2 : 64;
		p->files = ft_realloc(p->files, p->cap * sizeof(*p->files));
	}
	p->files[p->nfiles].path = ft_strdup(path);
	p->files[p->nfiles].size = size;
	p->files[p->nfiles].gstart = p->total;
	p->files[p->nfiles].line = 0;
	p->total += size;
	p->nfiles++;
}

static int
cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names in directory PATH, sorted, NULL-terminated.  NULL with ERR. */
static char **
dir_names(const char *path, char *err, size_t n)
{
	DIR *d = opendir(path);
	struct dirent *e;
	char **v = NULL;
	size_t k = 0, cap = 0;

	if (d == NULL) {
		snprintf(err, n, "%s: %s", path, strerror(errno));
		return NULL;
	}
	while ((e = readdir(d)) != NULL) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (k + 1 >= cap) {
			cap = cap ? cap * 2 : 32;
			v = ft_realloc(v, cap * sizeof(*v));
		}
		v[k++] = ft_strdup(e->d_name);
	}
	closedir(d);
	v = ft_realloc(v, (k + 1) * sizeof(*v));
	v[k] = NULL;
	qsort(v, k, sizeof(*v), cmp_names);
	return v;
}

static int walk(struct wc_plan *p, struct seen *seen, const char *path,
		int top, char *err, size_t n);

/* Walk the entries of directory PATH.  0 or -1 with ERR. */
static int
walk_dir(struct wc_plan *p, struct seen *seen, const char *path, char *err,
	 size_t n)
{
	char **names = dir_names(path, err, n), *child;
	const char *sep = strcmp(path, "/") == 0 ? "" : "/";
	size_t i;
	int rc = 0;

	if (names == NULL)
		return -1;
	for (i = 0; names[i]; i++) {
		child = ft_asprintf("%s%s%s", path, sep, names[i]);
		if (rc == 0)
			rc = walk(p, seen, child, 0, err, n);
		free(child);
		free(names[i]);
	}
	free(names);
	return rc;
}

/* Add the regular files at PATH (an input when TOP).  0 or -1 with ERR. */
static int
walk(struct wc_plan *p, struct seen *seen, const char *path, int top,
     char *err, size_t n)
{
	struct stat st;

	if (stat(path, &st) == -1) {
		if (!top && (errno == ENOENT || errno == ELOOP))
			return 0;	/* a dangling link or a link loop */
		snprintf(err, n, "%s: %s", path, strerror(errno));
		return -1;
	}
	if (S_ISREG(st.st_mode)) {
		if (access(path, R_OK) == -1) {
			snprintf(err, n, "%s: %s", path, strerror(errno));
			return -1;
		}
		add_file(p, path, (uint64_t)st.st_size);
		return 0;
	}
	if (S_ISDIR(st.st_mode)) {
		if (!seen_add(seen, st.st_dev, st.st_ino))
			return 0;
		return walk_dir(p, seen, path, err, n);
	}
	if (top) {
		snprintf(err, n, "%s: not a regular file or a directory", path);
		return -1;
	}
	return 0;
}

static int
cmp_files(const void *a, const void *b)
{
	return strcmp(((const struct wc_pfile *)a)->path,
		      ((const struct wc_pfile *)b)->path);
}

/* Put files [FIRST, nfiles) in path order and recompute their offsets. */
static void
sort_files(struct wc_plan *p, size_t first)
{
	uint64_t at = first < p->nfiles ? p->files[first].gstart : p->total;
	size_t i;

	qsort(p->files + first, p->nfiles - first, sizeof(*p->files),
	      cmp_files);
	for (i = first; i < p->nfiles; i++) {
		p->files[i].gstart = at;
		at += p->files[i].size;
	}
}

int
wc_plan_inputs(struct wc_plan *p, const json_t *inputs, char *err, size_t n)
{
	const json_t *v;
	char *path;
	size_t i, first, len;
	int rc = 0;

	json_array_foreach(inputs, i, v) {
		struct seen seen = { 0 };

		path = ft_strdup(json_string_value(v));
		len = strlen(path);
		while (len > 1 && path[len - 1] == '/')
			path[--len] = '\0';
		first = p->nfiles;
		rc = walk(p, &seen, path, 1, err, n);
		if (rc == 0)
			sort_files(p, first);
		free(seen.v);
		free(path);
		if (rc == -1)
			return -1;
	}
	return 0;
}

uint64_t
wc_plan_default_shards(uint64_t total)
{
	uint64_t n = (total + SHARD_TARGET - 1) / SHARD_TARGET;
	uint64_t small = (total + SHARD_MIN - 1) / SHARD_MIN;

	if (n < SHARDS_MIN)
		n = small < SHARDS_MIN ? small : SHARDS_MIN;
	if (n > SHARDS_MAX)
		n = SHARDS_MAX;
	return n ? n : 1;
}

int
wc_plan_shards(struct wc_plan *p, long long shards, long long shard_bytes,
	       char *err, size_t n)
{
	uint64_t count, i, t = p->total;

	if (shard_bytes > 0)
		count = t ? (t + (uint64_t)shard_bytes - 1) / (uint64_t)shard_bytes
			  : 1;
	else if (shards > 0)
		count = (uint64_t)shards;
	else
		count = wc_plan_default_shards(t);
	if (count > (t ? t : 1))
		count = t ? t : 1;	/* no empty shards */
	if (count > WC_MAX_SHARDS) {
		snprintf(err, n, "%" PRIu64 " bytes in shards of %lld bytes "
			 "make %" PRIu64 " shards, more than %d", t, shard_bytes,
			 count, WC_MAX_SHARDS);
		return -1;
	}
	p->nshards = (size_t)count;
	p->cut = ft_calloc(count + 1, sizeof(*p->cut));
	for (i = 0; i <= count; i++) {
		if (shard_bytes > 0)
			p->cut[i] = i * (uint64_t)shard_bytes < t
				    ? i * (uint64_t)shard_bytes : t;
		else
			p->cut[i] = (uint64_t)((unsigned __int128)t * i / count);
	}
	return 0;
}

int
wc_plan_manifest(struct wc_plan *p, const char *dir, char *err, size_t n)
{
	struct ft_buf b = { 0 };
	char *path = wc_job_file(dir, "manifest");
	size_t i;
	int rc = 0;

	ft_buf_printf(&b, "%s %zu %" PRIu64 "\n", WC_MANIFEST_HEAD, p->nfiles,
		      p->total);
	for (i = 0; i < p->nfiles; i++) {
		p->files[i].line = b.len;
		ft_buf_printf(&b, "%" PRIu64 " %" PRIu64 " ", p->files[i].gstart,
			      p->files[i].size);
		wc_path_escape(&b, p->files[i].path);
		ft_buf_add(&b, "\n", 1);
	}
	p->manifest_len = b.len;
	if (ft_write_file_atomic(path, b.data, b.len) == -1) {
		snprintf(err, n, "%s: %s", path, strerror(errno));
		rc = -1;
	}
	ft_buf_free(&b);
	free(path);
	return rc;
}

size_t
wc_plan_first_file(const struct wc_plan *p, uint64_t start)
{
	size_t lo = 0, hi = p->nfiles, mid;
	const struct wc_pfile *f;

	/* The first file that ends after START or begins at or after it. */
	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		f = &p->files[mid];
		if (f->gstart + f->size > start || f->gstart >= start)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

void
wc_plan_free(struct wc_plan *p)
{
	size_t i;

	for (i = 0; i < p->nfiles; i++)
		free(p->files[i].path);
	free(p->files);
	free(p->cut);
	memset(p, 0, sizeof(*p));
}

/* journal: reading back results.jsonl after a restart (see journal.h). */
#include "journal.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crc32c.h"
#include "jsonl.h"
#include "log.h"
#include "util.h"

#define TAIL_LEN JSONL_CRC_TAIL_ALL	/* ,"crc":"XXXXXXXX"} */

/* ---- one line ---- */

/* Task and status of a line as ftfarm writes it: {"task":N,...,
 * "status":"ok"|"failed",...  NULL, or why not. */
static const char *
fields(const char *line, size_t len, uint32_t *task, int *ok)
{
	static const char key[] = "{\"task\":", st[] = "\"status\":\"";
	const char *p = line + sizeof(key) - 1, *end = line + len, *s;
	long long t;

	if (len < sizeof(key) || memcmp(line, key, sizeof(key) - 1) != 0 ||
	    (t = ft_parse_u32(&p, end)) < 0)
		return "no task index";
	s = memmem(p, (size_t)(end - p), st, sizeof(st) - 1);
	if (s == NULL)
		return "no status";
	s += sizeof(st) - 1;
	if ((size_t)(end - s) > 3 && memcmp(s, "ok\"", 3) == 0)
		*ok = 1;
	else if ((size_t)(end - s) > 7 && memcmp(s, "failed\"", 7) == 0)
		*ok = 0;
	else
		return "bad status";
	*task = (uint32_t)t;
	return NULL;
}

/* A line without a checksum (written before they existed): trusted if it
 * is a whole JSON object with a task and a status. */
static const char *
legacy(const char *line, size_t len, uint32_t *task, int *ok)
{
	json_t *o = json_loadb(line, len, 0, NULL);
	json_t *t = json_object_get(o, "task");
	const char *s = json_string_value(json_object_get(o, "status"));
	const char *why = NULL;

	if (!json_is_object(o))
		why = "not a JSON object (a torn or damaged line)";
	else if (!json_is_integer(t) || json_integer_value(t) < 0 ||
		 json_integer_value(t) > 0xffffffffLL)
		why = "no task index";
	else if (s == NULL || (strcmp(s, "ok") != 0 &&
			       strcmp(s, "failed") != 0))
		why = "bad status";
	else {
		*task = (uint32_t)json_integer_value(t);
		*ok = strcmp(s, "ok") == 0;
	}
	json_decref(o);
	return why;
}

const char *
journal_check_line(const char *line, size_t len, int legacy_ok,
		   uint32_t *task, int *ok)
{
	long long crc = jsonl_written_crc(line, len);

	if (crc < 0 && legacy_ok)
		return legacy(line, len, task, ok);
	if (crc < 0)
		return "no checksum";
	if (crc32c(0, line, len - TAIL_LEN) != (uint32_t)crc)
		return "checksum mismatch";
	return fields(line, len, task, ok);
}

/* ---- the file ---- */

static int
set_done(struct journal_results *r, uint32_t index)
{
	uint32_t byte = index / 8;
	uint8_t bit = (uint8_t)(1u << (index % 8));

	if (index >= r->ndone_bits) {
		uint32_t bits = r->ndone_bits ? r->ndone_bits : 1024;

		while (bits <= index && bits < 0x80000000u)
			bits *= 2;
		if (bits <= index)
			bits = 0xffffffffu;
		r->done = ft_realloc(r->done, bits / 8 + 1);
		r->bad = ft_realloc(r->bad, bits / 8 + 1);
		memset(r->done + r->ndone_bits / 8, 0,
		       bits / 8 + 1 - r->ndone_bits / 8);
		memset(r->bad + r->ndone_bits / 8, 0,
		       bits / 8 + 1 - r->ndone_bits / 8);
		r->ndone_bits = bits;
	}
	if (r->done[byte] & bit)
		return 0;
	r->done[byte] |= bit;
	return 1;
}

int
journal_failed(const struct journal_results *r, uint32_t index)
{
	return journal_done(r, index) &&
	       (r->bad[index / 8] & (1u << (index % 8)));
}

int
journal_done(const struct journal_results *r, uint32_t index)
{
	return index < r->ndone_bits &&
	       (r->done[index / 8] & (1u << (index % 8)));
}

static void
cut(struct journal_results *r, uint64_t offset, uint64_t bytes,
    const char *reason)
{
	r->cuts = ft_realloc(r->cuts, (r->ncuts + 1) * sizeof(*r->cuts));
	r->cuts[r->ncuts].offset = offset;
	r->cuts[r->ncuts].bytes = bytes;
	r->cuts[r->ncuts].reason = reason;
	r->ncuts++;
}

/* Keep LINE's report for the job (it checked).  0, or -1 if it does not
 * parse after all. */
static int
keep_line(struct journal_results *r, const char *line, size_t len,
	  uint32_t task, int ok)
{
	json_t *o = json_loadb(line, len, 0, NULL);
	const char *out = json_string_value(json_object_get(o, "stdout"));
	const char *why = json_string_value(json_object_get(o, "reason"));
	struct journal_line *l;

	if (o == NULL)
		return -1;
	r->lines = ft_realloc(r->lines, (r->nlines + 1) * sizeof(*r->lines));
	l = &r->lines[r->nlines++];
	l->task = task;
	l->ok = ok;
	l->out_len = out ? json_string_length(json_object_get(o, "stdout"))
			 : 0;
	l->out = ft_malloc(l->out_len + 1);
	memcpy(l->out, out ? out : "", l->out_len);
	l->out[l->out_len] = '\0';
	l->reason = why ? ft_strdup(why) : NULL;
	json_decref(o);
	return 0;
}

/* The number after KEY ("\"cpu_s\":") in LINE (LEN bytes), looked for
 * before its "stdout" only (where the master writes the usage: the
 * outputs that follow are the tasks' own bytes); 0 when absent. */
static double
line_number(const char *line, size_t len, const char *key)
{
	const char *end = memmem(line, len, "\"stdout\":", 9);
	const char *at = memmem(line, end ? (size_t)(end - line) : len, key,
				strlen(key));

	return at ? strtod(at + strlen(key), NULL) : 0;
}

/* Add the usage of result line LINE (LEN bytes) to R. */
static void
add_usage(struct journal_results *r, const char *line, size_t len)
{
	double rss = line_number(line, len, "\"max_rss\":");

	r->cpu_s += line_number(line, len, "\"cpu_s\":");
	r->seconds += line_number(line, len, "\"seconds\":");
	if (rss > (double)r->max_rss)
		r->max_rss = (uint64_t)rss;
}

/* One line at OFFSET (LEN bytes, newline not included). */
static void
take(struct journal_results *r, const char *line, size_t len,
     uint64_t offset, uint32_t max_task, int keep, int legacy_ok)
{
	uint32_t task = 0;
	int ok = 0;
	const char *why = journal_check_line(line, len, legacy_ok, &task, &ok);

	if (why == NULL && max_task > 0 && task >= max_task)
		why = "task index out of range";
	if (why == NULL && journal_done(r, task))
		why = "a second line for the task";
	if (why == NULL && keep && keep_line(r, line, len, task, ok) == -1)
		why = "not a JSON object";
	if (why) {
		cut(r, offset, len + 1, why);
		return;
	}
	set_done(r, task);
	add_usage(r, line, len);
	if (ok) {
		r->ok++;
	} else {
		r->failed++;
		r->bad[task / 8] |= (uint8_t)(1u << (task % 8));
	}
}

/* Does any line of TEXT end with a checksum?  Then every line must (a
 * line without one was damaged where its checksum was); else the file is
 * an older ftfarm's, whose whole lines are trusted as they are. */
static int
checksummed(const char *text, size_t size)
{
	size_t off = 0;

	while (off < size) {
		const char *nl = memchr(text + off, '\n', size - off);

		if (nl == NULL)
			return 0;
		if (jsonl_written_crc(text + off, (size_t)(nl - text - off)) >= 0)
			return 1;
		off = (size_t)(nl - text) + 1;
	}
	return 0;
}

static void
scan(struct journal_results *r, const char *text, size_t size,
     uint32_t max_task, int keep)
{
	int legacy_ok = !checksummed(text, size);
	size_t off = 0;

	while (off < size) {
		const char *nl = memchr(text + off, '\n', size - off);

		if (nl == NULL) {
			cut(r, off, size - off, "torn tail: no newline");
			break;
		}
		take(r, text + off, (size_t)(nl - text - off), off, max_task,
		     keep, legacy_ok);
		off = (size_t)(nl - text) + 1;
	}
}

int
journal_read(const char *path, uint32_t max_task, int keep,
	     struct journal_results *r, char *err, size_t n)
{
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	void *map;

	memset(r, 0, sizeof(*r));
	if (fd == -1 && errno == ENOENT)
		return 0;
	if (fd == -1 || fstat(fd, &st) == -1) {
		snprintf(err, n, "%s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	r->size = (uint64_t)st.st_size;
	if (r->size == 0) {
		close(fd);
		return 0;
	}
	map = mmap(NULL, (size_t)r->size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (map == MAP_FAILED) {
		snprintf(err, n, "%s: %s", path, strerror(errno));
		return -1;
	}
	madvise(map, (size_t)r->size, MADV_SEQUENTIAL);
	scan(r, map, (size_t)r->size, max_task, keep);
	munmap(map, (size_t)r->size);
	return 0;
}

/* ---- repair ---- */

/* Write the bytes of TEXT outside R's cuts to FD, the cut ones to
 * DAMAGED.  0 or -1. */
static int
split(const struct journal_results *r, const char *text, int fd,
      int damaged)
{
	uint64_t off = 0;
	size_t i;

	for (i = 0; i < r->ncuts; i++) {
		const struct journal_cut *c = &r->cuts[i];

		if (ft_write_all(fd, text + off, c->offset - off) == -1 ||
		    ft_write_all(damaged, text + c->offset, c->bytes) == -1)
			return -1;
		off = c->offset + c->bytes;
	}
	return ft_write_all(fd, text + off, r->size - off);
}

static int
sync_dir_of(const char *path)
{
	char *dir = ft_dirname(path);
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc = -1;

	if (fd >= 0) {
		rc = fsync(fd);
		close(fd);
	}
	free(dir);
	return rc;
}

/* PATH.damaged, where cut bytes are kept aside (appended). */
static int
open_damaged(const char *bad)
{
	return open(bad, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC,
		    0600);
}

/* Where R's cuts make one run of bytes to the end of the file (a torn
 * last line, a damaged one before it): its offset, else -1. */
static int64_t
tail_cut(const struct journal_results *r)
{
	uint64_t end = r->size;
	size_t i;

	for (i = r->ncuts; i > 0; i--) {
		const struct journal_cut *c = &r->cuts[i - 1];

		if (c->offset + c->bytes != end)
			return -1;
		end = c->offset;
	}
	return r->ncuts ? (int64_t)end : -1;
}

/* Cut PATH's tail at OFF in place, the bytes cut appended to BAD first
 * when they can be: a truncation needs no room on the disk, and a master
 * that restarts on a full disk after a crash mid-line must not give up on
 * the batch for want of room to copy it.  Bytes of a torn or damaged line
 * that cannot be kept aside are only logged: that task runs again. */
static int
trim_tail(const char *path, const char *bad, const struct journal_results *r,
	  uint64_t off, char *err, size_t n)
{
	int fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC), dfd;
	size_t len = (size_t)(r->size - off);
	char *text = ft_malloc(len + 1);
	struct stat st;

	if (fd == -1 || fstat(fd, &st) == -1) {
		snprintf(err, n, "%s: repair: %s", path, strerror(errno));
		goto fail;
	}
	if ((uint64_t)st.st_size != r->size) {
		snprintf(err, n, "%s: changed while being repaired", path);
		goto fail;
	}
	dfd = open_damaged(bad);
	if (pread(fd, text, len, (off_t)off) != (ssize_t)len || dfd == -1 ||
	    ft_write_all(dfd, text, len) == -1 || fsync(dfd) == -1)
		log_warnx("%s: the %zu damaged bytes at its end are not kept "
			  "in %s: %s", path, len, bad, strerror(errno));
	if (dfd >= 0)
		close(dfd);
	if (ftruncate(fd, (off_t)off) == -1 || fsync(fd) == -1) {
		snprintf(err, n, "%s: repair: %s", path, strerror(errno));
		goto fail;
	}
	free(text);
	close(fd);
	return 0;
fail:
	free(text);
	if (fd >= 0)
		close(fd);
	return -1;
}

int
journal_repair(const char *path, const struct journal_results *r, char *err,
	       size_t n)
{
	char *tmp = ft_asprintf("%s.repair", path);
	char *bad = ft_asprintf("%s.damaged", path);
	char *text = NULL;
	size_t len = 0;
	int64_t tail = tail_cut(r);
	int fd = -1, dfd = -1, rc = -1;

	if (tail >= 0) {
		rc = trim_tail(path, bad, r, (uint64_t)tail, err, n);
		goto out;
	}
	text = ft_read_file(path, &len);
	if (text == NULL || len != r->size) {
		snprintf(err, n, "%s: changed while being repaired", path);
		goto out;
	}
	unlink(tmp);
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
		  0600);
	dfd = open_damaged(bad);
	if (fd == -1 || dfd == -1 || split(r, text, fd, dfd) == -1 ||
	    fsync(fd) == -1 || fsync(dfd) == -1 || rename(tmp, path) == -1 ||
	    sync_dir_of(path) == -1) {
		snprintf(err, n, "%s: repair: %s", path, strerror(errno));
		unlink(tmp);
		goto out;
	}
	rc = 0;
out:
	if (fd >= 0)
		close(fd);
	if (dfd >= 0)
		close(dfd);
	free(text);
	free(tmp);
	free(bad);
	return rc;
}

void
journal_results_free(struct journal_results *r)
{
	size_t i;

	for (i = 0; i < r->nlines; i++) {
		free(r->lines[i].out);
		free(r->lines[i].reason);
	}
	free(r->lines);
	free(r->done);
	free(r->bad);
	free(r->cuts);
	memset(r, 0, sizeof(*r));
}

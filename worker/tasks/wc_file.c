/* wc_file: record files, atomic writes and manifest paths (see wc_file.h). */
#include "wc_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

#define SHORT_PATH 80		/* characters of a path in a message */

const char *
wc_strerror(int e, char *buf, size_t n)
{
	return strerror_r(e, buf, n);
}

void
wc_out_grow(struct wc_out *o, size_t more)
{
	size_t cap = o->cap ? o->cap : 4096;

	while (cap < o->len + more)
		cap *= 2;
	o->data = ft_realloc(o->data, cap);
	o->cap = cap;
}

void
wc_out_free(struct wc_out *o)
{
	free(o->data);
	memset(o, 0, sizeof(*o));
}

static void
out_magic(struct wc_out *o)
{
	if (o->len == 0) {
		wc_out_reserve(o, WC_MAGIC_LEN);
		memcpy(o->data, WC_MAGIC, WC_MAGIC_LEN);
		o->len = WC_MAGIC_LEN;
	}
}

void
wc_out_record(struct wc_out *o, const uint8_t *word, size_t n,
	      uint64_t count)
{
	out_magic(o);
	wc_out_reserve(o, n + 20);
	wc_out_varint(o, n);
	memcpy(o->data + o->len, word, n);
	o->len += n;
	wc_out_varint(o, count);
}

void
wc_out_finish(struct wc_out *o, uint64_t nrecords)
{
	out_magic(o);
	wc_out_reserve(o, 11);
	wc_out_varint(o, 0);
	wc_out_varint(o, nrecords);
}

int
wc_in_open(struct wc_in *in, const uint8_t *data, size_t len)
{
	if (len < WC_MAGIC_LEN || memcmp(data, WC_MAGIC, WC_MAGIC_LEN) != 0)
		return -1;
	in->p = data + WC_MAGIC_LEN;
	in->end = data + len;
	in->n = 0;
	return 0;
}

/* Decode a varint at IN into *V.  0 or -1 (truncated, too long). */
static int
in_varint(struct wc_in *in, uint64_t *v)
{
	uint64_t x = 0;
	int shift;

	for (shift = 0; shift < 64 && in->p < in->end; shift += 7) {
		uint8_t b = *in->p++;

		x |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*v = x;
			return 0;
		}
	}
	return -1;
}

int
wc_in_next_slow(struct wc_in *in, const uint8_t **word, size_t *n,
		uint64_t *count)
{
	uint64_t len, total;

	if (in_varint(in, &len) == -1)
		return -1;
	if (len == 0) {
		if (in_varint(in, &total) == -1 || total != in->n ||
		    in->p != in->end)
			return -1;
		return 0;
	}
	if (len > (uint64_t)(in->end - in->p))
		return -1;
	*word = in->p;
	*n = (size_t)len;
	in->p += len;
	if (in_varint(in, count) == -1)
		return -1;
	in->n++;
	return 1;
}

int
wc_afile_open(struct wc_afile *f, const char *path, const char *tag,
	      char *err, size_t n)
{
	char eb[64], sb[SHORT_PATH + 1];

	f->path = ft_strdup(path);
	f->tmp = ft_asprintf("%s.tmp.%s", path, tag);
	f->fd = open(f->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
	if (f->fd >= 0)
		return 0;
	snprintf(err, n, "cannot write %s: %s",
		 wc_short(path, sb, SHORT_PATH),
		 wc_strerror(errno, eb, sizeof(eb)));
	free(f->path);
	free(f->tmp);
	f->path = f->tmp = NULL;
	return -1;
}

int
wc_afile_write(struct wc_afile *f, const void *data, size_t len, char *err,
	       size_t n)
{
	char eb[64], sb[SHORT_PATH + 1];

	if (ft_write_all(f->fd, data, len) == 0)
		return 0;
	snprintf(err, n, "cannot write %s: %s",
		 wc_short(f->path, sb, SHORT_PATH),
		 wc_strerror(errno, eb, sizeof(eb)));
	return -1;
}

void
wc_afile_abort(struct wc_afile *f)
{
	if (f->fd >= 0)
		close(f->fd);
	if (f->tmp)
		unlink(f->tmp);
	free(f->path);
	free(f->tmp);
	f->fd = -1;
	f->path = f->tmp = NULL;
}

int
wc_afile_commit(struct wc_afile *f, char *err, size_t n)
{
	char eb[64], sb[SHORT_PATH + 1];
	int rc = close(f->fd);

	f->fd = -1;
	if (rc == -1) {
		snprintf(err, n, "cannot write %s: %s",
			 wc_short(f->path, sb, SHORT_PATH),
			 wc_strerror(errno, eb, sizeof(eb)));
		wc_afile_abort(f);
		return -1;
	}
	if (rename(f->tmp, f->path) == -1) {
		snprintf(err, n, "cannot write %s (rename): %s",
			 wc_short(f->path, sb, SHORT_PATH),
			 wc_strerror(errno, eb, sizeof(eb)));
		wc_afile_abort(f);
		return -1;
	}
	free(f->path);
	free(f->tmp);
	f->path = f->tmp = NULL;
	return 0;
}

int
wc_write_atomic(const char *path, const char *tag, const void *data,
		size_t len, char *err, size_t n)
{
	struct wc_afile f;

	if (wc_afile_open(&f, path, tag, err, n) == -1)
		return -1;
	if (wc_afile_write(&f, data, len, err, n) == -1) {
		wc_afile_abort(&f);
		return -1;
	}
	return wc_afile_commit(&f, err, n);
}

uint8_t *
wc_read_all(const char *path, size_t pad, size_t *len, char *err, size_t n)
{
	char eb[64], sb[SHORT_PATH + 1];
	struct stat st;
	uint8_t *buf = NULL;
	size_t cap = 0, got = 0;
	ssize_t r;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0 || fstat(fd, &st) == -1)
		goto fail;
	cap = (size_t)st.st_size + 1;
	buf = ft_malloc(cap + pad);
	for (;;) {
		if (got == cap) {
			cap *= 2;
			buf = ft_realloc(buf, cap + pad);
		}
		r = read(fd, buf + got, cap - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			goto fail;
		if (r == 0)
			break;
		got += (size_t)r;
	}
	close(fd);
	memset(buf + got, 0, pad);
	*len = got;
	return buf;
fail:
	snprintf(err, n, "%s: %s", wc_short(path, sb, SHORT_PATH),
		 wc_strerror(errno, eb, sizeof(eb)));
	if (fd >= 0)
		close(fd);
	free(buf);
	return NULL;
}

void
wc_path_escape(struct ft_buf *b, const char *path)
{
	const char *p;

	for (p = path; *p; p++) {
		if (*p == '\\')
			ft_buf_add(b, "\\\\", 2);
		else if (*p == '\n')
			ft_buf_add(b, "\\n", 2);
		else
			ft_buf_add(b, p, 1);
	}
}

int
wc_path_unescape(char *s)
{
	char *r = s, *w = s;

	while (*r) {
		if (*r != '\\') {
			*w++ = *r++;
			continue;
		}
		if (r[1] == '\\')
			*w++ = '\\';
		else if (r[1] == 'n')
			*w++ = '\n';
		else
			return -1;
		r += 2;
	}
	*w = '\0';
	return 0;
}

const char *
wc_short(const char *path, char *buf, size_t max)
{
	size_t n = strlen(path);

	if (n <= max)
		return path;
	snprintf(buf, max + 1, "...%s", path + n - (max - 3));
	return buf;
}

void
wc_attempt_tag(char *out, size_t n, uint32_t attempt)
{
	char host[64] = "host";

	gethostname(host, sizeof(host) - 1);
	host[sizeof(host) - 1] = '\0';
	snprintf(out, n, "%s.%ld.%u", host, (long)getpid(), attempt);
}

void
wc_job_mark(const char *dir, char out[17])
{
	uint64_t h = 0xcbf29ce484222325ULL;
	const unsigned char *p;

	for (p = (const unsigned char *)dir; *p; p++)
		h = (h ^ *p) * 0x100000001b3ULL;
	snprintf(out, 17, "%016llx", (unsigned long long)h);
}

/* jsonl: append-only files of one JSON object per line. */
#include "jsonl.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crc32c.h"

int
jsonl_open(struct jsonl *j, const char *path, int flags)
{
	struct stat st;

	memset(j, 0, sizeof(*j));
	j->crc = flags & JSONL_CRC;
	j->fd = open(path, O_RDWR | O_CREAT | O_APPEND | O_NOFOLLOW |
		     O_CLOEXEC, 0644);
	if (j->fd == -1)
		return -1;
	if (fstat(j->fd, &st) == 0)
		j->written = j->synced = (uint64_t)st.st_size;
	return 0;
}

void
jsonl_close(struct jsonl *j)
{
	if (j->fd >= 0)
		close(j->fd);
	ft_buf_free(&j->pending);
	j->fd = -1;
}

/* Bytes of PENDING in complete lines. */
size_t
jsonl_pending(const struct jsonl *j)
{
	return j->in_line ? j->line_start : j->pending.len;
}

static long
count_lines(const char *p, size_t n)
{
	long lines = 0;
	const char *end = p + n;

	while ((p = memchr(p, '\n', (size_t)(end - p))) != NULL) {
		lines++;
		p++;
	}
	return lines;
}

/* Drop the first N bytes of J's pending buffer. */
static void
consume(struct jsonl *j, size_t n)
{
	memmove(j->pending.data, j->pending.data + n, j->pending.len - n);
	j->pending.len -= n;
	if (j->in_line)
		j->line_start -= n;
}

long
jsonl_flush(struct jsonl *j)
{
	size_t n = jsonl_pending(j), done = 0;
	long lines;
	int rc = 0;

	if (j->fd < 0) {
		errno = EBADF;
		return n ? -1 : 0;
	}
	while (done < n) {
		ssize_t w = write(j->fd, j->pending.data + done, n - done);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			if (w == 0)
				errno = ENOSPC;
			rc = -1;
			break;
		}
		done += (size_t)w;
	}
	lines = count_lines(j->pending.data, done);
	j->written += done;
	j->lines += (uint64_t)lines;
	consume(j, done);
	return rc == -1 ? -1 : lines;
}

int
jsonl_unlinked(const struct jsonl *j)
{
	struct stat st;

	return j->fd >= 0 && fstat(j->fd, &st) == 0 && st.st_nlink == 0;
}

/* Copy what FROM holds (LEN bytes) to the end of TO.  0 or -1. */
static int
copy_all(int from, int to, uint64_t len)
{
	char buf[65536];
	uint64_t off = 0;

	while (off < len) {
		size_t want = len - off < sizeof(buf) ? (size_t)(len - off)
						      : sizeof(buf);
		ssize_t got = pread(from, buf, want, (off_t)off);

		if (got <= 0 || ft_write_all(to, buf, (size_t)got) == -1)
			return -1;
		off += (uint64_t)got;
	}
	return 0;
}

int
jsonl_reopen(struct jsonl *j, const char *path)
{
	struct stat st;
	int fd = open(path, O_RDWR | O_CREAT | O_APPEND | O_NOFOLLOW |
		      O_CLOEXEC, 0644);

	if (fd == -1)
		return -1;
	if (fstat(fd, &st) == -1 ||
	    (st.st_size == 0 && j->fd >= 0 &&
	     copy_all(j->fd, fd, j->written) == -1)) {
		int e = errno;

		close(fd);
		errno = e;
		return -1;
	}
	if (st.st_size != 0 || j->fd < 0)
		j->written = (uint64_t)st.st_size;
	j->synced = 0;
	if (j->fd >= 0)
		close(j->fd);
	j->fd = fd;
	j->gen++;
	return 0;
}

void
jsonl_begin(struct jsonl *j)
{
	j->line_start = j->pending.len;
	ft_buf_add(&j->pending, "{", 1);
	j->in_line = 1;
	j->first = 1;
}

void
jsonl_end(struct jsonl *j)
{
	if (j->crc) {
		uint32_t c = crc32c(0, j->pending.data + j->line_start,
				    j->pending.len - j->line_start);
		static const char hex[] = "0123456789abcdef";
		char tail[JSONL_CRC_END_LEN];
		int i;

		memcpy(tail, JSONL_CRC_TAIL, JSONL_CRC_TAIL_LEN);
		for (i = 0; i < 8; i++)
			tail[JSONL_CRC_TAIL_LEN + i] =
				hex[(c >> (28 - 4 * i)) & 15];
		memcpy(tail + JSONL_CRC_TAIL_LEN + 8, "\"}\n", 3);
		/* Without members the line has no comma before "crc". */
		ft_buf_add(&j->pending, tail + j->first,
			   JSONL_CRC_END_LEN - (size_t)j->first);
	} else {
		ft_buf_add(&j->pending, "}\n", 2);
	}
	j->in_line = 0;
}

/* ,"K": (no comma before the first member), with one reservation. */
static void
key(struct jsonl *j, const char *k)
{
	struct ft_buf *b = &j->pending;
	size_t n = strlen(k);
	char *p;

	ft_buf_reserve(b, n + 4);
	p = b->data + b->len;
	if (!j->first)
		*p++ = ',';
	j->first = 0;
	*p++ = '"';
	memcpy(p, k, n);
	p += n;
	*p++ = '"';
	*p++ = ':';
	*p = '\0';
	b->len = (size_t)(p - b->data);
}

/* Decimal digits of V, written backwards ending at END; returns the start.
 * (printf was most of the master's time per task.) */
static char *
digits(char *end, unsigned long long v)
{
	do {
		*--end = (char)('0' + v % 10);
		v /= 10;
	} while (v > 0);
	return end;
}

static void
put_int(struct ft_buf *b, long long v)
{
	char tmp[24], *end = tmp + sizeof(tmp), *p;

	p = digits(end, v < 0 ? 0ULL - (unsigned long long)v
			      : (unsigned long long)v);
	if (v < 0)
		*--p = '-';
	ft_buf_add(b, p, (size_t)(end - p));
}

/* V with six decimals ("12.000345"), for times in seconds. */
static void
put_fixed6(struct ft_buf *b, double v)
{
	char tmp[48], *end = tmp + sizeof(tmp), *p;
	unsigned long long u;
	int neg = v < 0, i;

	if (!isfinite(v) || fabs(v) >= 9e12) {
		ft_buf_printf(b, "%.6f", v);
		return;
	}
	u = (unsigned long long)llround(fabs(v) * 1e6);
	p = end;
	for (i = 0; i < 6; i++) {
		*--p = (char)('0' + u % 10);
		u /= 10;
	}
	*--p = '.';
	p = digits(p, u);
	if (neg)
		*--p = '-';
	ft_buf_add(b, p, (size_t)(end - p));
}

void
jsonl_int(struct jsonl *j, const char *k, long long v)
{
	key(j, k);
	put_int(&j->pending, v);
}

void
jsonl_secs(struct jsonl *j, const char *k, double v)
{
	key(j, k);
	put_fixed6(&j->pending, v);
}

void
jsonl_num(struct jsonl *j, const char *k, double v)
{
	key(j, k);
	if (isfinite(v))
		ft_buf_printf(&j->pending, "%.17g", v);
	else
		ft_buf_adds(&j->pending, "null");
}

void
jsonl_strn(struct jsonl *j, const char *k, const char *s, size_t n)
{
	key(j, k);
	ft_buf_add(&j->pending, "\"", 1);
	ft_buf_json_str(&j->pending, s, n);
	ft_buf_add(&j->pending, "\"", 1);
}

void
jsonl_str(struct jsonl *j, const char *k, const char *s)
{
	jsonl_strn(j, k, s, strlen(s));
}

void
jsonl_bool(struct jsonl *j, const char *k, int v)
{
	key(j, k);
	ft_buf_adds(&j->pending, v ? "true" : "false");
}

void
jsonl_raw(struct jsonl *j, const char *k, const char *v)
{
	key(j, k);
	ft_buf_adds(&j->pending, v);
}

void
jsonl_rawn(struct jsonl *j, const char *k, const char *v, size_t n)
{
	key(j, k);
	ft_buf_add(&j->pending, v, n);
}

void
jsonl_event(struct jsonl *j, const char *name, double ts)
{
	jsonl_begin(j);
	key(j, "ts");
	put_fixed6(&j->pending, ts);
	jsonl_str(j, "event", name);
}

static int
hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

long long
jsonl_written_crc(const char *line, size_t len)
{
	const char *t;
	uint32_t v = 0;
	int i;

	if (len < JSONL_CRC_TAIL_ALL + 2)
		return -1;
	t = line + len - JSONL_CRC_TAIL_ALL;
	if (memcmp(t, JSONL_CRC_TAIL, JSONL_CRC_TAIL_LEN) != 0 ||
	    memcmp(line + len - 2, "\"}", 2) != 0)
		return -1;
	for (i = 0; i < 8; i++) {
		int h = hexval(t[JSONL_CRC_TAIL_LEN + i]);

		if (h < 0)
			return -1;
		v = v << 4 | (uint32_t)h;
	}
	return v;
}

int
jsonl_crc_ok(const char *line, size_t len)
{
	long long crc = jsonl_written_crc(line, len);

	return crc >= 0 &&
	       crc32c(0, line, len - JSONL_CRC_TAIL_ALL) == (uint32_t)crc;
}

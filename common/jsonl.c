/* jsonl: append-only files of one JSON object per line. */
#include "jsonl.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

int
jsonl_open(struct jsonl *j, const char *path)
{
	memset(j, 0, sizeof(*j));
	j->fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW |
		     O_CLOEXEC, 0644);
	return j->fd == -1 ? -1 : 0;
}

void
jsonl_close(struct jsonl *j)
{
	if (j->fd >= 0) {
		jsonl_flush(j);
		close(j->fd);
	}
	ft_buf_free(&j->pending);
	j->fd = -1;
}

int
jsonl_flush(struct jsonl *j)
{
	size_t n = j->pending.len;
	int rc;

	if (j->in_line) {
		/* Keep the unfinished line for the next flush. */
		const char *nl = NULL;
		size_t i;

		for (i = n; i > 0; i--)
			if (j->pending.data[i - 1] == '\n') {
				nl = j->pending.data + i;
				break;
			}
		n = nl ? (size_t)(nl - j->pending.data) : 0;
	}
	if (n == 0 || j->fd < 0)
		return 0;
	rc = ft_write_all(j->fd, j->pending.data, n);
	memmove(j->pending.data, j->pending.data + n, j->pending.len - n);
	j->pending.len -= n;
	return rc;
}

void
jsonl_begin(struct jsonl *j)
{
	ft_buf_add(&j->pending, "{", 1);
	j->in_line = 1;
	j->first = 1;
}

void
jsonl_end(struct jsonl *j)
{
	ft_buf_add(&j->pending, "}\n", 2);
	j->in_line = 0;
}

static void
key(struct jsonl *j, const char *k)
{
	struct ft_buf *b = &j->pending;

	if (!j->first)
		ft_buf_add(b, ",", 1);
	j->first = 0;
	ft_buf_add(b, "\"", 1);
	ft_buf_adds(b, k);
	ft_buf_add(b, "\":", 2);
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
jsonl_event(struct jsonl *j, const char *name)
{
	jsonl_begin(j);
	key(j, "ts");
	put_fixed6(&j->pending, ft_wall());
	jsonl_str(j, "event", name);
}

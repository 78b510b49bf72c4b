/* adds: the journal of the tasks added to an open batch (see adds.h). */
#include "adds.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

#define ADD_HEAD "{\"first\":"
#define ADD_BODY ",\"add\":"
#define CLOSE_HEAD "{\"close\":"

void
adds_flatten(char *text, size_t len)
{
	char *p = text, *end = text + len;

	while ((p = memchr(p, '\n', (size_t)(end - p))) != NULL)
		*p++ = ' ';
}

void
adds_put(struct jsonl *j, uint32_t first, const char *body, size_t len)
{
	jsonl_begin(j);
	jsonl_int(j, "first", first);
	jsonl_rawn(j, "add", body, len);	/* BODY has no NUL after it */
	jsonl_end(j);
}

void
adds_put_close(struct jsonl *j, uint32_t total)
{
	jsonl_begin(j);
	jsonl_int(j, "close", total);
	jsonl_end(j);
}

/* Does LINE (LEN bytes) begin with HEAD?  *P: past it. */
static int
starts(const char *line, size_t len, const char *head, const char **p)
{
	size_t n = strlen(head);

	if (len < n || memcmp(line, head, n) != 0)
		return 0;
	*p = line + n;
	return 1;
}

/* Hand the record LINE (LEN bytes, no newline, its checksum good) to OPS.
 * 0, or -1 when it is not a record of ours. */
static int
record(const char *line, size_t len, const struct adds_ops *ops)
{
	const char *end = line + len - JSONL_CRC_TAIL_ALL, *p;
	long long v;
	char *text;
	size_t blen;

	if (starts(line, len, CLOSE_HEAD, &p)) {
		if ((v = ft_parse_u32(&p, end)) < 0 || p != end)
			return -1;
		ops->close(ops->ctx, (uint32_t)v);
		return 0;
	}
	if (!starts(line, len, ADD_HEAD, &p) || (v = ft_parse_u32(&p, end)) < 0 ||
	    (size_t)(end - p) < strlen(ADD_BODY) ||
	    memcmp(p, ADD_BODY, strlen(ADD_BODY)) != 0)
		return -1;
	p += strlen(ADD_BODY);
	blen = (size_t)(end - p);
	text = ft_malloc(blen + 1);
	memcpy(text, p, blen);
	text[blen] = '\0';
	return ops->add(ops->ctx, (uint32_t)v, text, blen);
}

int
adds_read(const char *path, const struct adds_ops *ops, uint64_t *good,
	  uint64_t *size, char *err, size_t n)
{
	size_t len = 0, off = 0;
	char *text = ft_read_file(path, &len);

	*good = *size = 0;
	if (text == NULL) {
		if (errno == ENOENT)
			return 0;
		snprintf(err, n, "%s: %s", path, strerror(errno));
		return -1;
	}
	*size = len;
	while (off < len) {
		char *nl = memchr(text + off, '\n', len - off);
		size_t l;

		if (nl == NULL)
			break;		/* a torn last record */
		l = (size_t)(nl - (text + off));
		if (!jsonl_crc_ok(text + off, l) ||
		    record(text + off, l, ops) == -1)
			break;
		off += l + 1;
	}
	*good = off;
	free(text);
	return 0;
}

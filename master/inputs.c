/* inputs: the values a task is given from the tasks it runs after (see
 * inputs.h). */
#include "inputs.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "batch_int.h"
#include "jsonl.h"
#include "proto.h"
#include "util.h"

#define AT_NONE UINT64_MAX		/* no line (yet) */
#define AT_FAILED (1ULL << 63)		/* its line says "failed" */
#define READ_STEP (64 * 1024)		/* bytes read at a time */

/* A spec made with its inputs, kept until its task ends. */
struct made {
	uint32_t index;
	char *text;
};

struct inputs {
	uint64_t *at;			/* per task: its line's offset, with
					 * AT_FAILED, or AT_NONE */
	uint32_t nat;
	int scanned;			/* the file's older lines are in AT */
	struct made *made;
	uint32_t nmade, capmade;
};

int
inputs_wanted(const struct batch *b)
{
	return b->inputs != NULL || b->open || b->deps != NULL;
}

static struct inputs *
get(struct batch *b)
{
	if (b->inputs == NULL)
		b->inputs = ft_calloc(1, sizeof(*b->inputs));
	return b->inputs;
}

/* Room in IN's offsets for task INDEX. */
static void
grow(struct inputs *in, uint32_t index)
{
	uint32_t n = in->nat, cap = n ? n : 256;

	if (index < n)
		return;
	while (cap <= index)
		cap = cap > UINT32_MAX / 2 ? UINT32_MAX : 2 * cap;
	in->at = ft_realloc(in->at, (size_t)cap * sizeof(*in->at));
	memset(in->at + n, 0xff, (size_t)(cap - n) * sizeof(*in->at));
	in->nat = cap;
}

/* Task INDEX's line is at OFF (FAILED: it failed), unless one is known. */
static void
note(struct inputs *in, uint32_t index, uint64_t off, int failed)
{
	grow(in, index);
	if (in->at[index] == AT_NONE)
		in->at[index] = off | (failed ? AT_FAILED : 0);
}

void
inputs_line(struct batch *b, uint32_t index, int ok)
{
	if (!inputs_wanted(b))
		return;
	note(get(b), index, b->out.written + b->out.pending.len, !ok);
}

/* Note the line LINE (LEN bytes, at OFF of the file): its task and
 * outcome, the first members of every result line. */
static void
scan_line(struct inputs *in, const char *line, size_t len, uint64_t off)
{
	static const char head[] = "{\"task\":", st[] = ",\"status\":\"";
	const char *p = line + strlen(head), *end = line + len, *s;
	long long task;

	if (len < strlen(head) || memcmp(line, head, strlen(head)) != 0 ||
	    (task = ft_parse_u32(&p, end)) < 0)
		return;
	/* ',"' is never inside a JSON string: the first is the key's. */
	s = memmem(p, (size_t)(end - p), st, strlen(st));
	if (s == NULL || (size_t)(end - s) <= strlen(st))
		return;
	note(in, (uint32_t)task, off, s[strlen(st)] != 'o');
}

/* Where the lines written before this master are: one pass over B's
 * results file up to what this master had found written.  0, or -1 with
 * ERR. */
static int
scan(struct batch *b, char *err, size_t n)
{
	struct inputs *in = get(b);
	uint64_t end = b->out.written, off = 0;
	struct ft_buf buf = { 0 };
	size_t start = 0;

	while (off < end) {
		size_t want = end - off < READ_STEP ? (size_t)(end - off)
						    : READ_STEP;
		ssize_t got;
		char *nl;

		ft_buf_reserve(&buf, want);
		got = pread(b->out.fd, buf.data + buf.len, want, (off_t)off);
		if (got <= 0) {
			snprintf(err, n, "%s: %s", b->results,
				 got == 0 ? "shorter than written"
					  : strerror(errno));
			ft_buf_free(&buf);
			return -1;
		}
		buf.len += (size_t)got;
		off += (uint64_t)got;
		while ((nl = memchr(buf.data + start, '\n',
				    buf.len - start)) != NULL) {
			size_t l = (size_t)(nl - (buf.data + start));

			scan_line(in, buf.data + start, l,
				  off - buf.len + start);
			start += l + 1;
		}
		memmove(buf.data, buf.data + start, buf.len - start);
		buf.len -= start;
		start = 0;
	}
	ft_buf_free(&buf);
	in->scanned = 1;
	return 0;
}

int
inputs_ended(struct batch *b, uint32_t index, int *ok, char *err, size_t n)
{
	struct inputs *in = get(b);

	if ((index >= in->nat || in->at[index] == AT_NONE) && !in->scanned &&
	    scan(b, err, n) == -1)
		return -1;
	if (index >= in->nat || in->at[index] == AT_NONE)
		return 0;
	*ok = !(in->at[index] & AT_FAILED);
	return 1;
}

/* The line at OFF of B's results (written or pending) into BUF, without
 * its newline.  0, or -1 with ERR. */
static int
line_at(struct batch *b, uint64_t off, struct ft_buf *buf, char *err,
	size_t n)
{
	const struct jsonl *o = &b->out;
	char *nl;

	buf->len = 0;
	if (off >= o->written) {
		size_t k = (size_t)(off - o->written);

		if (k >= o->pending.len ||
		    (nl = memchr(o->pending.data + k, '\n',
				 o->pending.len - k)) == NULL)
			goto gone;
		ft_buf_add(buf, o->pending.data + k,
			   (size_t)(nl - (o->pending.data + k)));
		return 0;
	}
	for (;;) {
		size_t had = buf->len;
		ssize_t got;

		ft_buf_reserve(buf, READ_STEP);
		got = pread(o->fd, buf->data + had, READ_STEP,
			    (off_t)(off + had));
		if (got < 0) {
			snprintf(err, n, "%s: %s", b->results, strerror(errno));
			return -1;
		}
		if (got == 0)
			goto gone;
		buf->len += (size_t)got;
		if ((nl = memchr(buf->data + had, '\n', (size_t)got)) != NULL) {
			buf->len = (size_t)(nl - buf->data);
			return 0;
		}
	}
gone:
	snprintf(err, n, "%s: no line at offset %llu", b->results,
		 (unsigned long long)off);
	return -1;
}

/* The "value" of task INDEX's result line (a new reference: a string, or
 * null), or NULL with ERR. */
static json_t *
value_of(struct batch *b, uint32_t index, struct ft_buf *buf, char *err,
	 size_t n)
{
	json_t *line, *v;
	json_error_t je;
	int ok = 0;

	if (inputs_ended(b, index, &ok, err, n) != 1 || !ok) {
		if (err[0] == '\0')
			snprintf(err, n, "task %u has no result", index);
		return NULL;
	}
	if (line_at(b, b->inputs->at[index] & ~AT_FAILED, buf, err, n) == -1)
		return NULL;
	line = json_loadb(buf->data, buf->len, 0, &je);
	if (line == NULL) {
		snprintf(err, n, "%s: task %u's line: %s", b->results, index,
			 je.text);
		return NULL;
	}
	v = json_object_get(line, "value");
	v = json_is_string(v) ? json_incref(v) : json_null();
	json_decref(line);
	return v;
}

/* The values of the tasks of AFTER (an array of indexes), as a JSON
 * array's text, or NULL with ERR. */
static char *
values_text(struct batch *b, const json_t *after, char *err, size_t n)
{
	json_t *arr = json_array(), *idx, *v;
	struct ft_buf buf = { 0 };
	char *text = NULL;
	size_t i;

	json_array_foreach(after, i, idx) {
		v = value_of(b, (uint32_t)json_integer_value(idx), &buf, err, n);
		if (v == NULL)
			goto out;
		json_array_append_new(arr, v);
	}
	text = json_dumps(arr, JSON_COMPACT);
out:
	ft_buf_free(&buf);
	json_decref(arr);
	return text;
}

/* SPEC (LEN bytes, an object) with the member KEY: RAW (JSON) added. */
static char *
with_member(const char *spec, uint32_t len, const char *key, const char *raw)
{
	const char *end = spec + len;

	while (end > spec && end[-1] != '}')
		end--;
	if (end > spec)
		end--;
	return ft_asprintf("%.*s,\"%s\":%s}", (int)(end - spec), spec, key,
			   raw);
}

/* SPEC (LEN bytes) with the member KEY: the string S. */
static char *
with_string(const char *spec, uint32_t len, const char *key, const char *s)
{
	json_t *t = json_string(s);
	char *quoted = json_dumps(t, JSON_ENCODE_ANY), *text;

	json_decref(t);
	text = with_member(spec, len, key, quoted);
	free(quoted);
	return text;
}

/* The values (TEXT, a JSON array) in a file of B's directory for task
 * INDEX; its path, or NULL with ERR. */
static char *
values_file(struct batch *b, uint32_t index, const char *text, char *err,
	    size_t n)
{
	char *dir = ft_asprintf("%s/inputs", b->dir);
	char *path = ft_asprintf("%s/%u", dir, index);

	if (ft_mkdirs(dir) == -1 ||
	    ft_write_file_atomic(path, text, strlen(text)) == -1) {
		snprintf(err, n, "%s: %s", path, strerror(errno));
		free(path);
		path = NULL;
	}
	free(dir);
	return path;
}

/* Keep TEXT, the spec made for task INDEX of IN's batch. */
static void
keep(struct inputs *in, uint32_t index, char *text)
{
	if (in->nmade == in->capmade) {
		in->capmade = in->capmade ? 2 * in->capmade : 16;
		in->made = ft_realloc(in->made, (size_t)in->capmade *
				      sizeof(*in->made));
	}
	in->made[in->nmade++] = (struct made){ index, text };
}

/* Does SPEC say "after_values": true (and carry an "after")?  *AFTER
 * then holds its parsed object. */
static int
wants_values(const char *spec, uint32_t len, json_t **obj)
{
	json_t *t;

	*obj = NULL;
	if (memmem(spec, len, "\"after_values\"", 14) == NULL)
		return 0;
	t = json_loadb(spec, len, 0, NULL);
	if (t == NULL || !json_is_true(json_object_get(t, "after_values")) ||
	    !json_is_array(json_object_get(t, "after"))) {
		json_decref(t);
		return 0;
	}
	*obj = t;
	return 1;
}

const char *
inputs_spec(struct batch *b, uint32_t index, const char *spec, uint32_t *len)
{
	char err[512] = "", *values, *text, *path;
	json_t *t;

	if (!wants_values(spec, *len, &t))
		return spec;
	values = values_text(b, json_object_get(t, "after"), err, sizeof(err));
	json_decref(t);
	text = values ? with_member(spec, *len, "inputs", values) : NULL;
	if (text && strlen(text) > FT_SPEC_MAX) {
		free(text);
		text = NULL;
		if ((path = values_file(b, index, values, err,
					sizeof(err))) != NULL) {
			text = with_string(spec, *len, "inputs_file", path);
			free(path);
		}
	}
	if (text == NULL)
		text = with_string(spec, *len, "inputs_error", err);
	free(values);
	keep(get(b), index, text);
	*len = (uint32_t)strlen(text);
	return text;
}

void
inputs_done(struct batch *b, uint32_t index)
{
	struct inputs *in = b->inputs;
	uint32_t i;

	if (in == NULL)
		return;
	for (i = in->nmade; i-- > 0;)
		if (in->made[i].index == index) {
			free(in->made[i].text);
			in->made[i] = in->made[--in->nmade];
			return;
		}
}

void
inputs_free(struct batch *b)
{
	struct inputs *in = b->inputs;
	uint32_t i;

	if (in == NULL)
		return;
	for (i = 0; i < in->nmade; i++)
		free(in->made[i].text);
	free(in->made);
	free(in->at);
	free(in);
	b->inputs = NULL;
}

/*
 * wc_file: the files of a wordcount job.
 *
 * Record files (map partitions and reduce runs) are binary:
 *
 *   "FTWC1\n"  then per word: varint(length) bytes varint(count)
 *              then varint(0) varint(number of records), end of file.
 *
 * The trailer makes a truncated or foreign file an error, not a silent
 * loss of words.  Every file is written under a temporary name in the same
 * directory, then renamed, so that a reader sees a whole file or none, and
 * a late or duplicate attempt replaces a file with the same content.
 *
 * Paths in the manifest are escaped so that one record is one line:
 * '\\' as "\\\\" and a newline as "\\n".
 */
#ifndef WC_FILE_H
#define WC_FILE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define WC_MAGIC "FTWC1\n"
#define WC_MAGIC_LEN 6

/* A growing output buffer. */
struct wc_out {
	uint8_t *data;
	size_t len, cap;
};

/* Make room for MORE bytes after the data (out of line: it grows). */
void wc_out_grow(struct wc_out *o, size_t more);

static inline void
wc_out_reserve(struct wc_out *o, size_t more)
{
	if (o->len + more > o->cap)
		wc_out_grow(o, more);
}

void wc_out_free(struct wc_out *o);

static inline void
wc_out_varint(struct wc_out *o, uint64_t v)
{
	uint8_t *p = o->data + o->len;

	while (v >= 0x80) {
		*p++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*p++ = (uint8_t)v;
	o->len = (size_t)(p - o->data);
}

/* Room enough for about N records of words of usual lengths (the buffer
 * still grows past it): reserving it first spares the copies of growing
 * one record at a time. */
static inline size_t
wc_out_guess(size_t n)
{
	return WC_MAGIC_LEN + 11 + (n + n / 4) * 16;
}

/* Append one record (the magic first when O is empty). */
void wc_out_record(struct wc_out *o, const uint8_t *word, size_t n,
		   uint64_t count);
/* Append the record of a table slot's word: WORD has at least
 * WC_SLOT_KEY readable bytes (a short word's zero-padded key, or a long
 * word's key and its padding: wc_table.h), so a short one is copied as
 * three 8-byte words. */
#define WC_SLOT_KEY 24
static inline void
wc_out_slot_record(struct wc_out *o, const uint8_t *word, size_t n,
		   uint64_t count)
{
	uint8_t *p;

	if (n > WC_SLOT_KEY || o->len == 0) {
		wc_out_record(o, word, n, count);
		return;
	}
	wc_out_reserve(o, WC_SLOT_KEY + 20);	/* and two varints */
	wc_out_varint(o, n);
	p = o->data + o->len;
	memcpy(p, word, 8);
	memcpy(p + 8, word + 8, 8);
	memcpy(p + 16, word + 16, 8);
	o->len += n;
	wc_out_varint(o, count);
}

/* Append the trailer after NRECORDS records (and the magic if none). */
void wc_out_finish(struct wc_out *o, uint64_t nrecords);

/* A reader over a record file held in memory. */
struct wc_in {
	const uint8_t *p, *end;
	uint64_t n;		/* records read so far */
};

/* Start reading DATA (LEN bytes).  0, or -1 when the magic is wrong. */
int wc_in_open(struct wc_in *in, const uint8_t *data, size_t len);
int wc_in_next_slow(struct wc_in *in, const uint8_t **word, size_t *n,
		    uint64_t *count);

/* The next record: 1 with WORD, N and COUNT set; 0 at a good end; -1 when
 * the file is corrupt or truncated.  Inline for the usual record (a word
 * under 128 bytes, a count under 16384, far from the end), which a reduce
 * reads a million times. */
static inline int
wc_in_next(struct wc_in *in, const uint8_t **word, size_t *n,
	   uint64_t *count)
{
	const uint8_t *p = in->p, *q;
	uint64_t c;

	if (in->end - p < 1 + 127 + 2 || p[0] == 0 || p[0] >= 0x80)
		return wc_in_next_slow(in, word, n, count);
	q = p + 1 + p[0];
	c = q[0];
	if (c >= 0x80) {
		if (q[1] >= 0x80)
			return wc_in_next_slow(in, word, n, count);
		c = (c & 0x7f) | (uint64_t)q[1] << 7;
		q++;
	}
	*word = p + 1;
	*n = p[0];
	*count = c;
	in->p = q + 1;
	in->n++;
	return 1;
}

/* A file being written under a temporary name. */
struct wc_afile {
	int fd;
	char *path;		/* final name */
	char *tmp;		/* temporary name, beside it */
};

/* Create PATH's temporary file (its name ends with ".tmp." TAG).  0, or -1
 * with ERR ("cannot create TMP: REASON"). */
int wc_afile_open(struct wc_afile *f, const char *path, const char *tag,
		  char *err, size_t n);
/* Write LEN bytes.  0 or -1 with ERR. */
int wc_afile_write(struct wc_afile *f, const void *data, size_t len,
		   char *err, size_t n);
/* Close and rename to the final name.  0 or -1 with ERR; the temporary
 * file is removed on failure. */
int wc_afile_commit(struct wc_afile *f, char *err, size_t n);
/* Give up: close and remove the temporary file. */
void wc_afile_abort(struct wc_afile *f);

/* Write LEN bytes of DATA as PATH, atomically (see above). */
int wc_write_atomic(const char *path, const char *tag, const void *data,
		    size_t len, char *err, size_t n);

/* Read PATH into a new buffer with PAD zero bytes after its LEN bytes.
 * NULL with ERR ("PATH: REASON"). */
uint8_t *wc_read_all(const char *path, size_t pad, size_t *len, char *err,
		     size_t n);

/* strerror for any thread. */
const char *wc_strerror(int e, char *buf, size_t n);

/* Escape PATH for the manifest into B (appended, no NUL). */
struct ft_buf;
void wc_path_escape(struct ft_buf *b, const char *path);
/* Undo wc_path_escape in place.  0, or -1 on a bad escape. */
int wc_path_unescape(char *s);

/* PATH, or its last characters after "..." when longer than MAX, into
 * BUF (MAX + 1 bytes).  For reasons, which are short. */
const char *wc_short(const char *path, char *buf, size_t max);

/* A tag unique to this attempt of this process: "HOST.PID.ATTEMPT". */
void wc_attempt_tag(char *out, size_t n, uint32_t attempt);

/* A short name of the job whose directory is DIR (16 hex digits), which
 * the merge puts in its temporary file's name beside the output, so that
 * the job can remove what killed attempts left there, and only that. */
void wc_job_mark(const char *dir, char out[17]);

#endif

/*
 * jparse: JSON text to jansson values, quickly for what task specs hold
 * (see jparse.h).
 *
 * A recursive descent over the bytes.  Every reader returns NULL (or -1)
 * both for a malformed text and for a case it does not take on; the
 * caller then hands the whole text to jansson, so no reader needs to say
 * why.  What a reader accepts must be exactly what jansson accepts there:
 * the grammar of its lexer (lex_scan_number, lex_scan_string) and its
 * limits (no NUL in strings, UTF-8 checked, integers in json_int_t, reals
 * that do not overflow).
 */
#include "jparse.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define INT_DIGITS 18		/* longer integers may overflow: jansson's */
#define REAL_MAX 64		/* longer reals: jansson's */

struct jp {
	const unsigned char *p, *end;
	int depth;
};

static json_t *read_value(struct jp *j);

static void
skip_ws(struct jp *j)
{
	while (j->p < j->end && (*j->p == ' ' || *j->p == '\n' ||
				 *j->p == '\t' || *j->p == '\r'))
		j->p++;
}

static int
is_digit(const struct jp *j)
{
	return j->p < j->end && *j->p >= '0' && *j->p <= '9';
}

/* The length of the valid UTF-8 sequence at P (its first byte is past
 * ASCII), or 0.  Valid as jansson has it: no overlong forms, no
 * surrogates, nothing past U+10FFFF. */
static size_t
utf8_len(const unsigned char *p, const unsigned char *end)
{
	uint32_t v;
	size_t n, i;

	if (*p >= 0xC2 && *p <= 0xDF)
		n = 2, v = *p & 0x1F;
	else if (*p >= 0xE0 && *p <= 0xEF)
		n = 3, v = *p & 0x0F;
	else if (*p >= 0xF0 && *p <= 0xF4)
		n = 4, v = *p & 0x07;
	else
		return 0;
	if ((size_t)(end - p) < n)
		return 0;
	for (i = 1; i < n; i++) {
		if ((p[i] & 0xC0) != 0x80)
			return 0;
		v = (v << 6) | (p[i] & 0x3F);
	}
	if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF) ||
	    (n == 3 && v < 0x800) || (n == 4 && v < 0x10000))
		return 0;
	return n;
}

/* The four hex digits at P.  0 and *V, or -1. */
static int
hex4(const unsigned char *p, uint32_t *v)
{
	int i;

	*v = 0;
	for (i = 0; i < 4; i++) {
		unsigned c = p[i], d;

		if (c >= '0' && c <= '9')
			d = c - '0';
		else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f')
			d = (c | 0x20) - 'a' + 10;
		else
			return -1;
		*v = *v << 4 | d;
	}
	return 0;
}

/* Decode the \u escape after *P (its "u" read) into *O as UTF-8: a
 * surrogate pair as one code point.  0, or -1 (also for \u0000, which
 * jansson refuses in its default mode). */
static int
unicode(const unsigned char **p, const unsigned char *end, char **o)
{
	uint32_t v, lo;
	unsigned char *u = (unsigned char *)*o;

	if (end - *p < 4 || hex4(*p, &v) == -1)
		return -1;
	*p += 4;
	if (v >= 0xDC00 && v <= 0xDFFF)
		return -1;
	if (v >= 0xD800 && v <= 0xDBFF) {
		if (end - *p < 6 || (*p)[0] != '\\' || (*p)[1] != 'u' ||
		    hex4(*p + 2, &lo) == -1 || lo < 0xDC00 || lo > 0xDFFF)
			return -1;
		*p += 6;
		v = 0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00);
	}
	if (v == 0)
		return -1;
	if (v < 0x80) {
		*u++ = (unsigned char)v;
	} else if (v < 0x800) {
		*u++ = (unsigned char)(0xC0 | v >> 6);
		*u++ = (unsigned char)(0x80 | (v & 0x3F));
	} else if (v < 0x10000) {
		*u++ = (unsigned char)(0xE0 | v >> 12);
		*u++ = (unsigned char)(0x80 | (v >> 6 & 0x3F));
		*u++ = (unsigned char)(0x80 | (v & 0x3F));
	} else {
		*u++ = (unsigned char)(0xF0 | v >> 18);
		*u++ = (unsigned char)(0x80 | (v >> 12 & 0x3F));
		*u++ = (unsigned char)(0x80 | (v >> 6 & 0x3F));
		*u++ = (unsigned char)(0x80 | (v & 0x3F));
	}
	*o = (char *)u;
	return 0;
}

/* Decode the string body P..END (between its quotes, with escapes) into
 * a malloc'd *OUT of *N bytes.  No escape decodes longer than it is
 * written.  0, or -1. */
static int
unescape(const unsigned char *p, const unsigned char *end, char **out,
	 size_t *n)
{
	char *buf = malloc((size_t)(end - p)), *o = buf;

	if (buf == NULL)
		return -1;
	while (p < end) {
		if (*p != '\\') {
			*o++ = (char)*p++;
			continue;
		}
		p++;		/* never the last byte: see read_string */
		switch (*p++) {
		case '"': *o++ = '"'; break;
		case '\\': *o++ = '\\'; break;
		case '/': *o++ = '/'; break;
		case 'b': *o++ = '\b'; break;
		case 'f': *o++ = '\f'; break;
		case 'n': *o++ = '\n'; break;
		case 'r': *o++ = '\r'; break;
		case 't': *o++ = '\t'; break;
		case 'u':
			if (unicode(&p, end, &o) == 0)
				break;
			/* fall through */
		default:
			free(buf);
			return -1;
		}
	}
	*out = buf;
	*n = (size_t)(o - buf);
	return 0;
}

/* Read the string at J's position (its opening quote): *S and *N are its
 * bytes, in the text when it has no escape, else decoded into *OWN
 * (malloc'd, for the caller to free; NULL otherwise).  0, or -1. */
static int
read_string(struct jp *j, const char **s, size_t *n, char **own)
{
	const unsigned char *p = j->p + 1, *start = p;
	int esc = 0;
	size_t k;

	*own = NULL;
	for (;;) {
		while (p < j->end && *p >= 0x20 && *p < 0x80 && *p != '"' &&
		       *p != '\\')
			p++;
		if (p >= j->end || *p < 0x20)
			return -1;
		if (*p == '"')
			break;
		if (*p == '\\') {
			/* The escaped byte is checked by unescape; a quote
			 * there does not end the string. */
			esc = 1;
			p += 2;
			continue;
		}
		if ((k = utf8_len(p, j->end)) == 0)
			return -1;
		p += k;
	}
	j->p = p + 1;
	if (!esc) {
		*s = (const char *)start;
		*n = (size_t)(p - start);
		return 0;
	}
	if (unescape(start, p, own, n) == -1)
		return -1;
	*s = *own;
	return 0;
}

/* Step over the digits at J's position; their value in *V (meaningful
 * for up to INT_DIGITS of them).  The number of digits. */
static int
digits(struct jp *j, uint64_t *v)
{
	int n = 0;

	while (is_digit(j)) {
		*v = *v * 10 + (uint64_t)(*j->p++ - '0');
		n++;
	}
	return n;
}

/* A number as jansson's lexer reads it: -?(0|[1-9][0-9]*) for an
 * integer, then .[0-9]+ and [eE][+-]?[0-9]+ make it real. */
static json_t *
read_number(struct jp *j)
{
	const unsigned char *start = j->p;
	char buf[REAL_MAX], *e;
	uint64_t v = 0, ignored = 0;
	int neg = 0, nd, real = 0;
	double d;

	if (*j->p == '-') {
		neg = 1;
		j->p++;
	}
	if (!is_digit(j))
		return NULL;
	if (*j->p == '0') {
		j->p++;
		nd = 1;
		if (is_digit(j))
			return NULL;
	} else {
		nd = digits(j, &v);
	}
	if (j->p < j->end && *j->p == '.') {
		j->p++;
		if (digits(j, &ignored) == 0)
			return NULL;
		real = 1;
	}
	if (j->p < j->end && (*j->p == 'e' || *j->p == 'E')) {
		j->p++;
		if (j->p < j->end && (*j->p == '+' || *j->p == '-'))
			j->p++;
		if (digits(j, &ignored) == 0)
			return NULL;
		real = 1;
	}
	if (!real)
		return nd > INT_DIGITS ? NULL :
		       json_integer(neg ? -(json_int_t)v : (json_int_t)v);
	if (j->p - start >= REAL_MAX)
		return NULL;
	memcpy(buf, start, (size_t)(j->p - start));
	buf[j->p - start] = '\0';
	d = strtod(buf, &e);
	/* A locale whose decimal point is not '.' stops strtod early. */
	if (e != buf + (j->p - start) || isinf(d))
		return NULL;
	return json_real(d);
}

/* The literal WORD (LEN bytes) at J's position as V, or NULL. */
static json_t *
read_word(struct jp *j, const char *word, size_t len, json_t *v)
{
	if ((size_t)(j->end - j->p) < len || memcmp(j->p, word, len) != 0)
		return NULL;
	j->p += len;
	return v;
}

static json_t *
read_object(struct jp *j)
{
	json_t *o = json_object(), *v;
	const char *key;
	char *own;
	size_t klen, size;

	j->p++;
	skip_ws(j);
	if (j->p < j->end && *j->p == '}') {
		j->p++;
		return o;
	}
	for (;;) {
		skip_ws(j);
		if (j->p >= j->end || *j->p != '"' ||
		    read_string(j, &key, &klen, &own) == -1)
			goto fail;
		skip_ws(j);
		if (j->p >= j->end || *j->p++ != ':' ||
		    (v = read_value(j)) == NULL)
			goto fail_key;
		/* A key seen before leaves the size as it was: jansson
		 * refuses it or keeps the last value, as its flags say. */
		size = json_object_size(o);
		if (json_object_setn_new_nocheck(o, key, klen, v) == -1 ||
		    json_object_size(o) == size)
			goto fail_key;
		free(own);
		skip_ws(j);
		if (j->p < j->end && *j->p == ',') {
			j->p++;
			continue;
		}
		if (j->p < j->end && *j->p == '}') {
			j->p++;
			return o;
		}
		goto fail;
	}
fail_key:
	free(own);
fail:
	json_decref(o);
	return NULL;
}

static json_t *
read_array(struct jp *j)
{
	json_t *a = json_array(), *v;

	j->p++;
	skip_ws(j);
	if (j->p < j->end && *j->p == ']') {
		j->p++;
		return a;
	}
	for (;;) {
		if ((v = read_value(j)) == NULL ||
		    json_array_append_new(a, v) == -1)
			break;
		skip_ws(j);
		if (j->p < j->end && *j->p == ',') {
			j->p++;
			continue;
		}
		if (j->p < j->end && *j->p == ']') {
			j->p++;
			return a;
		}
		break;
	}
	json_decref(a);
	return NULL;
}

static json_t *
read_container(struct jp *j, int object)
{
	json_t *v;

	if (j->depth >= JPARSE_DEPTH)
		return NULL;
	j->depth++;
	v = object ? read_object(j) : read_array(j);
	j->depth--;
	return v;
}

static json_t *
read_value(struct jp *j)
{
	const char *s;
	char *own;
	size_t n;
	json_t *v;

	skip_ws(j);
	if (j->p >= j->end)
		return NULL;
	switch (*j->p) {
	case '{':
		return read_container(j, 1);
	case '[':
		return read_container(j, 0);
	case '"':
		if (read_string(j, &s, &n, &own) == -1)
			return NULL;
		v = json_stringn_nocheck(s, n);
		free(own);
		return v;
	case 't':
		return read_word(j, "true", 4, json_true());
	case 'f':
		return read_word(j, "false", 5, json_false());
	case 'n':
		return read_word(j, "null", 4, json_null());
	default:
		return read_number(j);
	}
}

json_t *
jparse_fast(const char *s, size_t len, size_t flags)
{
	struct jp j = { (const unsigned char *)s,
			(const unsigned char *)s + len, 0 };
	json_t *v;

	if (flags & ~(size_t)(JSON_REJECT_DUPLICATES | JSON_DECODE_ANY))
		return NULL;
	skip_ws(&j);
	if (!(flags & JSON_DECODE_ANY) &&
	    (j.p >= j.end || (*j.p != '{' && *j.p != '[')))
		return NULL;
	if ((v = read_value(&j)) == NULL)
		return NULL;
	skip_ws(&j);
	if (j.p != j.end) {
		json_decref(v);
		return NULL;
	}
	return v;
}

json_t *
jparse(const char *s, size_t len, size_t flags, json_error_t *err)
{
	json_t *v = jparse_fast(s, len, flags);

	if (v == NULL)
		return json_loadb(s, len, flags, err);
	if (err) {
		/* As json_loadb leaves it after a good parse. */
		memset(err, 0, sizeof(*err));
		err->line = err->column = -1;
		strcpy(err->source, "<buffer>");
	}
	return v;
}

/*
 * jpos: where each value of a JSON text stands (line:column).
 *
 * One pass over the text records every value as a compact entry in document
 * (pre-)order: its byte offset and the index of its next sibling.  The first
 * child of a non-empty container is the entry right after it, so the tree
 * needs no other links.  Paths are not stored: a lookup walks the tree,
 * matching each object key against the path as it goes, and only then turns
 * the offset into line:column.  Building is O(n) in the text and costs 12
 * bytes per value plus a copy of the text; a lookup (done when reporting an
 * error) is linear in the text.
 *
 * Keys are matched verbatim, so a key holding '.' or '[' is still found;
 * when such a key makes a path ambiguous the lookup tries each reading in
 * document order and returns the first that resolves.
 */
#include "jpos.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define JP_NONE UINT32_MAX

enum {
	JP_OBJECT = 1,		/* the value is an object */
	JP_ARRAY = 2,		/* the value is an array */
	JP_KIDS = 4,		/* a container with at least one child */
};

struct jp_entry {
	uint32_t off;		/* a member's key quote, else the value */
	uint32_t next;		/* next sibling, or JP_NONE */
	uint8_t flags;		/* JP_* */
};

struct jpos {
	char *text;		/* a copy of the text, NUL-terminated */
	size_t len;
	struct jp_entry *ent;	/* ent[0] is the root */
	uint32_t nent, cap;
};

/* An open container while scanning. */
struct jp_frame {
	uint32_t self;		/* the container's entry */
	uint32_t last;		/* its last child so far, or JP_NONE */
};

struct jp_scan {
	struct jpos *jp;
	const char *s;		/* the text */
	size_t len, p;		/* its length and the read position */
	struct jp_frame *stack;
	size_t depth, stack_cap;
};

/* ---- building ---- */

static int
is_ws(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static void
skip_ws(struct jp_scan *sc)
{
	while (sc->p < sc->len && is_ws(sc->s[sc->p]))
		sc->p++;
}

static int
peek(const struct jp_scan *sc)
{
	return sc->p < sc->len ? (unsigned char)sc->s[sc->p] : -1;
}

static int
is_hex(int c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') ||
	       (c >= 'A' && c <= 'F');
}

/* Length of the escape at S[P] (just after a backslash) in a text of LEN
 * bytes, or 0 when it is not a JSON escape. */
static size_t
escape_len(const char *s, size_t p, size_t len)
{
	size_t i;

	if (p >= len)
		return 0;
	if (s[p] != 'u')
		return s[p] != '\0' && strchr("\"\\/bfnrt", s[p]) ? 1 : 0;
	if (len - p < 5)
		return 0;
	for (i = 1; i <= 4; i++)
		if (!is_hex(s[p + i]))
			return 0;
	return 5;
}

/* Step over the string starting at the quote under the read position.
 * 0, or -1 when it is unterminated or holds a bad escape or raw control
 * character. */
static int
skip_string(struct jp_scan *sc)
{
	size_t p = sc->p + 1, n;

	while (p < sc->len) {
		unsigned char c = (unsigned char)sc->s[p];

		if (c == '"') {
			sc->p = p + 1;
			return 0;
		}
		if (c < 0x20)
			return -1;
		if (c != '\\') {
			p++;
			continue;
		}
		if ((n = escape_len(sc->s, p + 1, sc->len)) == 0)
			return -1;
		p += 1 + n;
	}
	return -1;
}

static size_t
skip_digits(const struct jp_scan *sc, size_t p)
{
	while (p < sc->len && sc->s[p] >= '0' && sc->s[p] <= '9')
		p++;
	return p;
}

/* Step over a number (JSON's grammar).  0, or -1 when malformed. */
static int
skip_number(struct jp_scan *sc)
{
	size_t p = sc->p, q;

	if (p < sc->len && sc->s[p] == '-')
		p++;
	if (p < sc->len && sc->s[p] == '0')
		p++;
	else if ((q = skip_digits(sc, p)) > p)
		p = q;
	else
		return -1;
	if (p < sc->len && sc->s[p] == '.') {
		if ((q = skip_digits(sc, p + 1)) == p + 1)
			return -1;
		p = q;
	}
	if (p < sc->len && (sc->s[p] == 'e' || sc->s[p] == 'E')) {
		p++;
		if (p < sc->len && (sc->s[p] == '+' || sc->s[p] == '-'))
			p++;
		if ((q = skip_digits(sc, p)) == p)
			return -1;
		p = q;
	}
	sc->p = p;
	return 0;
}

static int
skip_word(struct jp_scan *sc, const char *w)
{
	size_t n = strlen(w);

	if (sc->len - sc->p < n || memcmp(sc->s + sc->p, w, n) != 0)
		return -1;
	sc->p += n;
	return 0;
}

/* Append an entry at OFF as the next child of the innermost open container
 * (if any).  Its index, or JP_NONE when out of room. */
static uint32_t
add_entry(struct jp_scan *sc, size_t off)
{
	struct jpos *jp = sc->jp;
	struct jp_frame *top = sc->depth ? &sc->stack[sc->depth - 1] : NULL;

	if (jp->nent == jp->cap) {
		uint32_t cap = jp->cap ? jp->cap * 2 : 64;
		struct jp_entry *e;

		if (cap <= jp->cap || cap >= JP_NONE)
			return JP_NONE;
		if ((e = realloc(jp->ent, (size_t)cap * sizeof(*e))) == NULL)
			return JP_NONE;
		jp->ent = e;
		jp->cap = cap;
	}
	jp->ent[jp->nent] = (struct jp_entry){ (uint32_t)off, JP_NONE, 0 };
	if (top != NULL) {
		if (top->last == JP_NONE)
			jp->ent[top->self].flags |= JP_KIDS;
		else
			jp->ent[top->last].next = jp->nent;
		top->last = jp->nent;
	}
	return jp->nent++;
}

static int
push(struct jp_scan *sc, uint32_t self, uint8_t kind)
{
	if (sc->depth == sc->stack_cap) {
		size_t cap = sc->stack_cap ? sc->stack_cap * 2 : 32;
		struct jp_frame *s = realloc(sc->stack, cap * sizeof(*s));

		if (s == NULL)
			return -1;
		sc->stack = s;
		sc->stack_cap = cap;
	}
	sc->jp->ent[self].flags |= kind;
	sc->stack[sc->depth++] = (struct jp_frame){ self, JP_NONE };
	return 0;
}

/* Read the value under the read position, recorded as entry SELF.  A
 * container is opened (pushed) and its first child, if any, is left for the
 * caller's loop.  0 or -1. */
static int
scan_value(struct jp_scan *sc, uint32_t self)
{
	switch (peek(sc)) {
	case '{':
	case '[': {
		uint8_t kind = peek(sc) == '{' ? JP_OBJECT : JP_ARRAY;

		sc->p++;
		return push(sc, self, kind);
	}
	case '"':
		return skip_string(sc);
	case 't':
		return skip_word(sc, "true");
	case 'f':
		return skip_word(sc, "false");
	case 'n':
		return skip_word(sc, "null");
	default:
		return skip_number(sc);
	}
}

/* Start the next child of the innermost container: for an object the
 * member's key, the colon and then the value; for an array the element.
 * 0 or -1. */
static int
scan_child(struct jp_scan *sc)
{
	uint8_t kind = sc->jp->ent[sc->stack[sc->depth - 1].self].flags;
	uint32_t self;

	skip_ws(sc);
	if ((self = add_entry(sc, sc->p)) == JP_NONE)
		return -1;
	if (kind & JP_OBJECT) {
		if (peek(sc) != '"' || skip_string(sc) == -1)
			return -1;
		skip_ws(sc);
		if (peek(sc) != ':')
			return -1;
		sc->p++;
		skip_ws(sc);
	}
	return scan_value(sc, self);
}

/* The bracket that closes the innermost container. */
static int
closer(const struct jp_scan *sc)
{
	uint32_t self = sc->stack[sc->depth - 1].self;

	return (sc->jp->ent[self].flags & JP_OBJECT) ? '}' : ']';
}

/* After a child of the innermost container: a comma (the next child) or the
 * closing bracket (pop).  0 or -1. */
static int
scan_after(struct jp_scan *sc)
{
	int close = closer(sc);

	skip_ws(sc);
	if (peek(sc) == ',') {
		sc->p++;
		return scan_child(sc);
	}
	if (peek(sc) != close)
		return -1;
	sc->p++;
	sc->depth--;
	return 0;
}

/* Scan the whole text.  0, or -1 when it is not well formed or memory ran
 * out. */
static int
scan(struct jp_scan *sc)
{
	uint32_t root;

	skip_ws(sc);
	if ((root = add_entry(sc, sc->p)) == JP_NONE)
		return -1;
	if (scan_value(sc, root) == -1)
		return -1;
	while (sc->depth > 0) {
		int rc;

		if (sc->stack[sc->depth - 1].last == JP_NONE) {
			/* just opened: empty, or its first child */
			skip_ws(sc);
			if (peek(sc) == closer(sc)) {
				sc->p++;
				sc->depth--;
				continue;
			}
			rc = scan_child(sc);
		} else {
			rc = scan_after(sc);
		}
		if (rc == -1)
			return -1;
	}
	skip_ws(sc);
	return sc->p == sc->len ? 0 : -1;
}

struct jpos *
jpos_build(const char *text, size_t len)
{
	struct jpos *jp = NULL;
	struct jp_scan sc = { 0 };

	/* offsets are 32-bit */
	if (len >= JP_NONE || (jp = calloc(1, sizeof(*jp))) == NULL)
		goto err;
	if ((jp->text = malloc(len + 1)) == NULL)
		goto err;
	memcpy(jp->text, text, len);
	jp->text[len] = '\0';
	jp->len = len;
	sc = (struct jp_scan){ .jp = jp, .s = jp->text, .len = len };
	if (scan(&sc) == -1)
		goto err;
	free(sc.stack);
	return jp;
err:
	free(sc.stack);
	jpos_free(jp);
	return NULL;
}

void
jpos_free(struct jpos *jp)
{
	if (jp == NULL)
		return;
	free(jp->text);
	free(jp->ent);
	free(jp);
}

/* ---- lookup ---- */

static unsigned
hex4(const char *s)
{
	unsigned v = 0;
	int i;

	for (i = 0; i < 4; i++) {
		int c = s[i];
		int d = c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10;

		v = v * 16 + (unsigned)d;
	}
	return v;
}

/* Decode the escape at S (just after the backslash) into OUT (UTF-8, as
 * jansson decodes it).  Returns the bytes written; *USED gets the escape's
 * length after the backslash. */
static size_t
unescape(const char *s, char *out, size_t *used)
{
	static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
	unsigned cp;

	if (*s != 'u') {
		*used = 1;
		out[0] = to[strchr(from, *s) - from];
		return 1;
	}
	cp = hex4(s + 1);
	*used = 5;
	if (cp >= 0xd800 && cp < 0xdc00 && s[5] == '\\' && s[6] == 'u') {
		unsigned lo = hex4(s + 7);

		if (lo >= 0xdc00 && lo < 0xe000) {
			cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
			*used = 11;
		}
	}
	if (cp < 0x80) {
		out[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (char)(0xc0 | cp >> 6);
		out[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		out[0] = (char)(0xe0 | cp >> 12);
		out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		out[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	out[0] = (char)(0xf0 | cp >> 18);
	out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
	out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
	out[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

/* Does the path at PATH begin with the decoded JSON string whose body
 * starts at Q?  The number of path bytes it covers, or -1. */
static long
key_prefix(const char *q, const char *path)
{
	const char *p = path;

	while (*q != '"') {
		char buf[4];
		size_t n, used, k;

		if (*q == '\\') {
			n = unescape(q + 1, buf, &used);
			used++;
		} else {
			buf[0] = *q;
			n = used = 1;
		}
		for (k = 0; k < n; k++)
			if (p[k] == '\0' || p[k] != buf[k])
				return -1;
		p += n;
		q += used;
	}
	return p - path;
}

static uint32_t resolve(const struct jpos *jp, uint32_t at, const char *path);

/* PATH ("[I]...") applied to the array entry AT. */
static uint32_t
resolve_index(const struct jpos *jp, uint32_t at, const char *path)
{
	unsigned long long i = 0;
	const char *p = path + 1;
	uint32_t kid;

	if (*path != '[' || *p < '0' || *p > '9')
		return JP_NONE;
	for (; *p >= '0' && *p <= '9'; p++)
		if ((i = i * 10 + (unsigned)(*p - '0')) > JP_NONE)
			return JP_NONE;
	if (*p != ']' || !(jp->ent[at].flags & JP_KIDS))
		return JP_NONE;
	for (kid = at + 1; i > 0 && kid != JP_NONE; i--)
		kid = jp->ent[kid].next;
	return kid == JP_NONE ? JP_NONE : resolve(jp, kid, p + 1);
}

/* PATH ("key..." for the root, ".key..." below it) applied to the object
 * entry AT: every member whose key is a prefix of the path is tried. */
static uint32_t
resolve_member(const struct jpos *jp, uint32_t at, const char *path)
{
	uint32_t kid;

	if (at != 0 && *path++ != '.')
		return JP_NONE;
	if (!(jp->ent[at].flags & JP_KIDS))
		return JP_NONE;
	for (kid = at + 1; kid != JP_NONE; kid = jp->ent[kid].next) {
		long n = key_prefix(jp->text + jp->ent[kid].off + 1, path);
		uint32_t found;

		if (n >= 0 && (found = resolve(jp, kid, path + n)) != JP_NONE)
			return found;
	}
	return JP_NONE;
}

/* The entry PATH names below entry AT, or JP_NONE. */
static uint32_t
resolve(const struct jpos *jp, uint32_t at, const char *path)
{
	if (*path == '\0')
		return at;
	if (jp->ent[at].flags & JP_ARRAY)
		return resolve_index(jp, at, path);
	if (jp->ent[at].flags & JP_OBJECT)
		return resolve_member(jp, at, path);
	return JP_NONE;
}

int
jpos_find(const struct jpos *jp, const char *path, int *line, int *col)
{
	uint32_t e;
	size_t i, off, bol = 0;
	int l = 1;

	if (jp == NULL || path == NULL || (e = resolve(jp, 0, path)) == JP_NONE)
		return -1;
	off = jp->ent[e].off;
	for (i = 0; i < off; i++) {
		if (jp->text[i] == '\n') {
			l++;
			bol = i + 1;
		}
	}
	*line = l;
	*col = (int)(off - bol) + 1;
	return 0;
}

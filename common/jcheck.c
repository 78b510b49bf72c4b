/*
 * jcheck: strict validation of decoded JSON objects.
 *
 * Messages are written for the person who wrote the file: "expected an
 * integer, got a string", "unknown key", "missing required key \"x\"",
 * "must be between 1 and 100".
 */
#include "jcheck.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

int
jerr_set(struct jerr *err, const char *path, const char *fmt, ...)
{
	va_list ap;

	(void)ft_snprintf(err->path, sizeof(err->path), "%s", path);
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	return -1;
}

void
jpath_key(char *out, size_t n, const char *parent, const char *key)
{
	size_t pl = strlen(parent), kl = strlen(key), dot = pl > 0;

	/* Called for every key of every task: no printf on the fast path. */
	if (pl + dot + kl >= n) {
		(void)ft_snprintf(out, n, "%s%s%s", parent, dot ? "." : "", key);
		return;
	}
	memmove(out, parent, pl);
	if (dot)
		out[pl] = '.';
	memcpy(out + pl + dot, key, kl + 1);
}

void
jpath_index(char *out, size_t n, const char *parent, size_t i)
{
	char digits[24];
	size_t pl = strlen(parent), dl = 0, k;

	do {
		digits[dl++] = (char)('0' + i % 10);
		i /= 10;
	} while (i > 0);
	if (pl + dl + 3 > n) {
		(void)ft_snprintf(out, n, "%s[...]", parent);
		return;
	}
	memmove(out, parent, pl);
	out[pl] = '[';
	for (k = 0; k < dl; k++)
		out[pl + 1 + k] = digits[dl - 1 - k];
	out[pl + 1 + dl] = ']';
	out[pl + 2 + dl] = '\0';
}

const char *
jcheck_type_name(const json_t *v)
{
	if (v == NULL)
		return "nothing";
	switch (json_typeof(v)) {
	case JSON_OBJECT: return "an object";
	case JSON_ARRAY: return "an array";
	case JSON_STRING: return "a string";
	case JSON_INTEGER: return "an integer";
	case JSON_REAL: return "a number";
	case JSON_TRUE:
	case JSON_FALSE: return "a boolean";
	case JSON_NULL: return "null";
	}
	return "a value";
}

/* What a field of type T must be, as users read it. */
static const char *
jtype_name(enum jtype t)
{
	switch (t) {
	case JT_ANY: return "a value";
	case JT_STRING: return "a string";
	case JT_INT: return "an integer";
	case JT_NUMBER: return "a number";
	case JT_BOOL: return "a boolean";
	case JT_OBJECT: return "an object";
	case JT_ARRAY: return "an array";
	case JT_STRING_ARRAY: return "an array of strings";
	}
	return "a value";
}

static int
jtype_ok(const json_t *v, enum jtype t)
{
	switch (t) {
	case JT_ANY: return 1;
	case JT_STRING: return json_is_string(v);
	case JT_INT: return json_is_integer(v);
	case JT_NUMBER: return json_is_number(v);
	case JT_BOOL: return json_is_boolean(v);
	case JT_OBJECT: return json_is_object(v);
	case JT_ARRAY:
	case JT_STRING_ARRAY: return json_is_array(v);
	}
	return 0;
}

static const struct jfield *
field_find(const struct jfield *fields, const char *key)
{
	for (; fields->key != NULL; fields++)
		if (strcmp(fields->key, key) == 0)
			return fields;
	return NULL;
}

/* Check V (at PATH) against field F.  0 or -1 with ERR set; for a string
 * array the path of the first bad element. */
static int
check_value(const json_t *v, const char *path, const struct jfield *f,
	    struct jerr *err)
{
	char epath[sizeof(err->path)];
	const json_t *el;
	size_t i;

	if (!jtype_ok(v, f->type))
		return jerr_set(err, path, "expected %s, got %s",
				jtype_name(f->type), jcheck_type_name(v));
	if (f->type != JT_STRING_ARRAY)
		return 0;
	json_array_foreach(v, i, el) {
		if (json_is_string(el))
			continue;
		jpath_index(epath, sizeof(epath), path, i);
		return jerr_set(err, epath, "expected a string, got %s",
				jcheck_type_name(el));
	}
	return 0;
}

/* Problems are reported in the file's order (jansson keeps keys in
 * insertion order), then missing keys in the table's order. */
int
jcheck_object(const json_t *obj, const char *path,
	      const struct jfield *fields, struct jerr *err)
{
	char kpath[sizeof(err->path)];
	const struct jfield *f;
	const char *key;
	json_t *v;

	if (!json_is_object(obj))
		return jerr_set(err, path, "expected an object, got %s",
				jcheck_type_name(obj));
	json_object_foreach((json_t *)obj, key, v) {
		jpath_key(kpath, sizeof(kpath), path, key);
		if ((f = field_find(fields, key)) == NULL)
			return jerr_set(err, kpath, "unknown key");
		if (check_value(v, kpath, f, err) == -1)
			return -1;
	}
	for (f = fields; f->key != NULL; f++)
		if (f->required && json_object_get(obj, f->key) == NULL)
			return jerr_set(err, path,
					"missing required key \"%s\"", f->key);
	return 0;
}

const char *
jget_str(const json_t *obj, const char *key, const char *def)
{
	const json_t *v = json_object_get(obj, key);

	return json_is_string(v) ? json_string_value(v) : def;
}

long long
jget_int(const json_t *obj, const char *key, long long def)
{
	const json_t *v = json_object_get(obj, key);

	return json_is_integer(v) ? (long long)json_integer_value(v) : def;
}

double
jget_num(const json_t *obj, const char *key, double def)
{
	const json_t *v = json_object_get(obj, key);

	return json_is_number(v) ? json_number_value(v) : def;
}

int
jget_bool(const json_t *obj, const char *key, int def)
{
	const json_t *v = json_object_get(obj, key);

	return json_is_boolean(v) ? json_is_true(v) : def;
}

int
jcheck_int_range(const json_t *obj, const char *path, const char *key,
		 long long lo, long long hi, struct jerr *err)
{
	const json_t *v = json_object_get(obj, key);
	char kpath[sizeof(err->path)];
	long long x;

	if (v == NULL)
		return 0;
	jpath_key(kpath, sizeof(kpath), path, key);
	if (!json_is_integer(v))
		return jerr_set(err, kpath, "expected an integer, got %s",
				jcheck_type_name(v));
	x = (long long)json_integer_value(v);
	if (x < lo || x > hi)
		return jerr_set(err, kpath, "must be between %lld and %lld",
				lo, hi);
	return 0;
}

/* X as users write it: "10000000", not "1e+07"; "0.5". */
static void
num_str(char *out, size_t n, double x)
{
	if (x == floor(x) && fabs(x) < 1e15)
		(void)ft_snprintf(out, n, "%.0f", x);
	else
		(void)ft_snprintf(out, n, "%g", x);
}

/* Fetch the number member KEY of OBJ into *V (NULL when absent) and its
 * path into KPATH.  0, or -1 with ERR set when it is not a number. */
static int
num_member(const json_t *obj, const char *path, const char *key,
	   char *kpath, size_t n, const json_t **v, struct jerr *err)
{
	*v = json_object_get(obj, key);
	jpath_key(kpath, n, path, key);
	if (*v != NULL && !json_is_number(*v))
		return jerr_set(err, kpath, "expected a number, got %s",
				jcheck_type_name(*v));
	return 0;
}

int
jcheck_num_range(const json_t *obj, const char *path, const char *key,
		 double lo, double hi, struct jerr *err)
{
	char kpath[sizeof(err->path)], a[32], b[32];
	const json_t *v;
	double x;

	if (num_member(obj, path, key, kpath, sizeof(kpath), &v, err) == -1)
		return -1;
	if (v == NULL)
		return 0;
	x = json_number_value(v);
	if (x >= lo && x <= hi)
		return 0;
	num_str(a, sizeof(a), lo);
	num_str(b, sizeof(b), hi);
	return jerr_set(err, kpath, "must be between %s and %s", a, b);
}

int
jcheck_num_positive(const json_t *obj, const char *path, const char *key,
		    double hi, struct jerr *err)
{
	char kpath[sizeof(err->path)], b[32];
	const json_t *v;
	double x;

	if (num_member(obj, path, key, kpath, sizeof(kpath), &v, err) == -1)
		return -1;
	if (v == NULL)
		return 0;
	x = json_number_value(v);
	if (x > 0 && x <= hi)
		return 0;
	num_str(b, sizeof(b), hi);
	return jerr_set(err, kpath, "must be greater than 0 and at most %s", b);
}

/* The position of PATH in JP, or failing that of its nearest enclosing
 * value that JP knows.  0 or -1. */
static int
find_near(const struct jpos *jp, const char *path, int *line, int *col)
{
	char p[sizeof(((struct jerr *)0)->path)];
	char *cut;

	(void)ft_snprintf(p, sizeof(p), "%s", path);
	for (;;) {
		if (jpos_find(jp, p, line, col) == 0)
			return 0;
		if (*p == '\0')
			return -1;
		cut = strrchr(p, '.');
		if (strrchr(p, '[') > cut)
			cut = strrchr(p, '[');
		if (cut == NULL)
			cut = p;
		*cut = '\0';
	}
}

char *
jcheck_format(const struct jerr *err, const char *file,
	      const struct jpos *jp, char *out, size_t n)
{
	const char *sep = *err->path ? ": " : "";
	int line, col;

	if (file == NULL)
		file = "<input>";
	if (jp != NULL && find_near(jp, err->path, &line, &col) == 0)
		(void)ft_snprintf(out, n, "%s:%d:%d: %s%s%s", file, line, col,
				  err->path, sep, err->msg);
	else
		(void)ft_snprintf(out, n, "%s: %s%s%s", file, err->path, sep,
				  err->msg);
	return out;
}

/* Line and column (1-based, counting bytes as jpos does) of the byte at
 * OFF in TEXT. */
static void
line_col(const char *text, size_t off, int *line, int *col)
{
	size_t i, bol = 0;

	*line = 1;
	for (i = 0; i < off; i++) {
		if (text[i] == '\n') {
			(*line)++;
			bol = i + 1;
		}
	}
	*col = (int)(off - bol) + 1;
}

/* jansson's error position: the last byte it read (its line:column count
 * characters, not bytes, so they are recomputed from the byte position),
 * in a parse of TEXT's LEN bytes from BASE on. */
static void
json_err_pos(const char *text, size_t base, size_t len,
	     const json_error_t *je, int *line, int *col)
{
	size_t pos = je->position > 0 ? (size_t)je->position - 1 : 0;

	if (pos <= len) {
		line_col(text, base + pos, line, col);
		return;
	}
	*line = je->line > 0 ? je->line : 1;
	*col = je->column > 0 ? je->column : 1;
}

char *
jcheck_json_error(const char *file, const char *text, size_t base,
		  size_t len, const json_error_t *je, char *out, size_t n)
{
	int line, col;

	json_err_pos(text, base, len, je, &line, &col);
	(void)ft_snprintf(out, n, "%s:%d:%d: invalid JSON: %s",
			  file ? file : "<input>", line, col, je->text);
	return out;
}

void
jcheck_line_col(const char *text, size_t off, int *line, int *col)
{
	line_col(text, off, line, col);
}

json_t *
jcheck_load_file(const char *file, char **text, char *out, size_t n)
{
	json_error_t je;
	json_t *root = NULL;
	char *buf;
	size_t len;

	if (text != NULL)
		*text = NULL;
	if ((buf = ft_read_file(file, &len)) == NULL) {
		(void)ft_snprintf(out, n, "%s: cannot read: %s", file,
				  strerror(errno));
		goto out;
	}
	/* the top-level type is the caller's to check, with a position */
	root = json_loadb(buf, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY,
			  &je);
	if (root == NULL) {
		jcheck_json_error(file, buf, 0, len, &je, out, n);
		goto out;
	}
	if (text != NULL) {
		*text = buf;
		buf = NULL;
	}
out:
	free(buf);
	return root;
}

int
jcheck_abs(const json_t *v, const char *at, struct jerr *err)
{
	const char *s = json_string_value(v);

	if (s == NULL)
		return jerr_set(err, at, "expected a string, got %s",
				jcheck_type_name(v));
	if (strlen(s) != json_string_length(v))
		return jerr_set(err, at, "must not contain a NUL byte");
	if (s[0] != '/')
		return jerr_set(err, at, "must be an absolute path, not \"%s\"",
				s);
	return 0;
}

int
jcheck_abs_path(const json_t *obj, const char *path, const char *key,
		struct jerr *err)
{
	const json_t *v = json_object_get(obj, key);
	char kpath[sizeof(err->path)];

	if (v == NULL)
		return 0;
	jpath_key(kpath, sizeof(kpath), path, key);
	return jcheck_abs(v, kpath, err);
}

/*
 * jcheck: strict validation of decoded JSON objects.
 *
 * Each object is checked against a table of fields: unknown keys, missing
 * required keys and values of the wrong type are refused, and the first
 * problem is reported as a path ("nodes[1].workers") and a message.  The
 * caller turns that into "FILE:LINE:COL: PATH: MESSAGE" with jcheck_format.
 */
#ifndef FT_JCHECK_H
#define FT_JCHECK_H

#include <jansson.h>
#include <stddef.h>

#include "jpos.h"

enum jtype {
	JT_ANY = 0,
	JT_STRING,
	JT_INT,		/* a JSON integer */
	JT_NUMBER,	/* a JSON integer or real */
	JT_BOOL,
	JT_OBJECT,
	JT_ARRAY,
	JT_STRING_ARRAY,	/* an array whose elements are all strings */
};

struct jfield {
	const char *key;
	enum jtype type;
	int required;
};

/* The first problem found: where and what. */
struct jerr {
	char path[256];		/* "" for the root */
	char msg[256];
};

/* Set ERR to PATH and a printf-style message; returns -1 for tail calls. */
int jerr_set(struct jerr *err, const char *path, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Join PARENT and KEY into OUT ("a" + "b" -> "a.b", "" + "b" -> "b"). */
void jpath_key(char *out, size_t n, const char *parent, const char *key);
/* Join PARENT and index I into OUT ("a" + 2 -> "a[2]"). */
void jpath_index(char *out, size_t n, const char *parent, size_t i);

/* Name of a JSON value's type as users read it: "a string", "an integer". */
const char *jcheck_type_name(const json_t *v);

/* Check that OBJ (at PATH) is an object whose keys are all in FIELDS
 * (terminated by a {NULL} entry), that required keys are present and that
 * each present key has the declared type.  0 if so, -1 with ERR set. */
int jcheck_object(const json_t *obj, const char *path,
		  const struct jfield *fields, struct jerr *err);

/* Typed getters for a key already checked by jcheck_object; return DEF
 * when the key is absent. */
const char *jget_str(const json_t *obj, const char *key, const char *def);
long long jget_int(const json_t *obj, const char *key, long long def);
double jget_num(const json_t *obj, const char *key, double def);
int jget_bool(const json_t *obj, const char *key, int def);

/* Check an integer member KEY of OBJ (at PATH) lies in [LO, HI]; absent is
 * fine.  0 or -1 with ERR set ("must be between LO and HI"). */
int jcheck_int_range(const json_t *obj, const char *path, const char *key,
		     long long lo, long long hi, struct jerr *err);
/* The same for a number. */
int jcheck_num_range(const json_t *obj, const char *path, const char *key,
		     double lo, double hi, struct jerr *err);
/* The same for a number in (0, HI]: "must be greater than 0 and at most
 * HI" (timeouts and the like, where 0 makes no sense). */
int jcheck_num_positive(const json_t *obj, const char *path, const char *key,
			double hi, struct jerr *err);

/* The string V (at AT) must be an absolute path without a NUL byte.  0 or
 * -1 with ERR set. */
int jcheck_abs(const json_t *v, const char *at, struct jerr *err);
/* The same for the string member KEY of OBJ (at PATH), when present. */
int jcheck_abs_path(const json_t *obj, const char *path, const char *key,
		    struct jerr *err);

/* Format ERR as "FILE:LINE:COL: PATH: MSG" (the position looked up in JP;
 * "FILE: PATH: MSG" when unknown; the path part left out when empty).
 * FILE may be NULL ("<input>").  Returns OUT. */
char *jcheck_format(const struct jerr *err, const char *file,
		    const struct jpos *jp, char *out, size_t n);

/* jansson's error JE, from a parse of LEN bytes of TEXT starting at BASE,
 * as "FILE:LINE:COL: invalid JSON: REASON" into OUT (the position counted
 * in the whole TEXT).  Returns OUT. */
char *jcheck_json_error(const char *file, const char *text, size_t base,
			size_t len, const json_error_t *je, char *out,
			size_t n);
/* The 1-based line and column of byte OFF of TEXT. */
void jcheck_line_col(const char *text, size_t off, int *line, int *col);

/* Load and parse FILE strictly (rejecting duplicate keys).  On failure
 * returns NULL and writes one line to OUT: "FILE: cannot read: REASON" or
 * "FILE:LINE:COL: invalid JSON: REASON".  On success *TEXT (if not NULL)
 * receives the file's bytes (malloc'd, NUL-terminated) for jpos_build. */
json_t *jcheck_load_file(const char *file, char **text, char *out, size_t n);

#endif

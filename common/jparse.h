/*
 * jparse: JSON text to jansson values, quickly for what task specs hold.
 *
 * json_loadb spends most of a small task's parse in its lexer: about
 * 0.9 us for {"type":"sleep","seconds":0}, of which building the values
 * takes 0.17 us.  Every task is parsed twice (the master checks it, a
 * worker runs it), so at a few hundred thousand tasks a second the lexer
 * is a good part of the farm's cost.  jparse reads the plain cases
 * itself, straight from the bytes: objects with unique keys, arrays,
 * strings (valid UTF-8, every escape but \u0000), integers of up to 18
 * digits, reals, true, false, null, nested up to JPARSE_DEPTH.
 *
 * Anything else (a malformed text, a duplicate key, a huge number, an
 * unsupported flag) is left to jansson, which reads the text from the
 * start: jparse returns what json_loadb returns for the same text and
 * flags, the same value or the same error.  tests/fuzz/fuzz_json holds it
 * to that.
 */
#ifndef FT_JPARSE_H
#define FT_JPARSE_H

#include <jansson.h>
#include <stddef.h>

#define JPARSE_DEPTH 64		/* deeper texts are jansson's */

/* json_loadb(S, LEN, FLAGS, ERR), faster where it can be. */
json_t *jparse(const char *s, size_t len, size_t flags, json_error_t *err);

/* The fast reading alone: the value, or NULL when jansson must read S
 * (not only when S is malformed).  FLAGS as for json_loadb; only
 * JSON_REJECT_DUPLICATES and JSON_DECODE_ANY are read here. */
json_t *jparse_fast(const char *s, size_t len, size_t flags);

#endif

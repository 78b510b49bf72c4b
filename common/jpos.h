/*
 * jpos: where each value of a JSON text stands (line:column).
 *
 * jansson tells line:column only for syntax errors.  A validator that finds a
 * wrong type or an unknown key after parsing asks this index where that key
 * was written, so that the user is pointed at the exact spot.
 *
 * Paths name values from the root: "" is the root, "nodes" a member of the
 * root object, "nodes[1].host" a member of the second element.  A key path
 * resolves to the position of the key itself (the opening quote); an array
 * element resolves to the first character of its value.
 */
#ifndef FT_JPOS_H
#define FT_JPOS_H

#include <stddef.h>

struct jpos;

/* Index TEXT (LEN bytes, already valid JSON).  Returns NULL on allocation
 * failure or when the text is not well formed. */
struct jpos *jpos_build(const char *text, size_t len);

/* Position of PATH: 0 and *LINE, *COL (1-based) set, or -1 when unknown. */
int jpos_find(const struct jpos *jp, const char *path, int *line, int *col);

void jpos_free(struct jpos *jp);

#endif

/* Unit tests of common/jparse.c: the fast JSON reader gives what jansson
 * gives, and reads the usual task specs itself. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "jparse.h"

#define STRICT JSON_REJECT_DUPLICATES

static char *
print(const json_t *v)
{
	return v ? json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT |
			      JSON_REAL_PRECISION(17)) : NULL;
}

/* jparse and json_loadb agree on TEXT (LEN bytes) under FLAGS: both
 * refuse it with the same message and position, or both give values that
 * print alike.  1 when the fast reading gave a value itself. */
static int
agree_n(const char *text, size_t len, size_t flags)
{
	json_error_t e1, e2;
	json_t *fast = jparse_fast(text, len, flags);
	json_t *a = jparse(text, len, flags, &e1);
	json_t *b = json_loadb(text, len, flags, &e2);
	char *pf = print(fast), *pa = print(a), *pb = print(b);
	int took = fast != NULL;

	if ((a == NULL) != (b == NULL))
		fail_msg("%s: jparse %s, json_loadb %s", text, pa ? pa : "-",
			 pb ? pb : e2.text);
	if (a && strcmp(pa, pb) != 0)
		fail_msg("%s: jparse %s, json_loadb %s", text, pa, pb);
	if (fast && strcmp(pf, pb) != 0)
		fail_msg("%s: jparse_fast %s, json_loadb %s", text, pf, pb);
	if (a == NULL && (strcmp(e1.text, e2.text) != 0 ||
			  e1.line != e2.line || e1.column != e2.column))
		fail_msg("%s: jparse error %d:%d %s, json_loadb %d:%d %s", text,
			 e1.line, e1.column, e1.text, e2.line, e2.column,
			 e2.text);
	free(pf);
	free(pa);
	free(pb);
	json_decref(fast);
	json_decref(a);
	json_decref(b);
	return took;
}

static int
agree(const char *text, size_t flags)
{
	return agree_n(text, strlen(text), flags);
}

/* TEXT is read by the fast path, and as jansson reads it. */
static void
fast(const char *text)
{
	if (!agree(text, STRICT))
		fail_msg("%s: not read by the fast path", text);
}

/* TEXT is left to jansson (malformed, or not the fast path's). */
static void
slow(const char *text, size_t flags)
{
	if (agree(text, flags))
		fail_msg("%s: read by the fast path", text);
}

static void
test_task_specs(void **state)
{
	(void)state;
	fast("{\"type\":\"sleep\",\"seconds\":0}");
	fast(" {\n\t\"type\": \"exec\",\r\n \"cmd\": \"sort -k2 in | uniq -c\","
	     " \"timeout\": 600 } ");
	fast("{\"type\":\"exec\",\"argv\":[\"/usr/bin/python3\",\"sim.py\","
	     "\"--seed\",\"17\"],\"env\":{\"OMP_NUM_THREADS\":\"1\"},"
	     "\"timeout\":12.5}");
	fast("{\"type\":\"wc_map\",\"files\":[{\"path\":\"/data/a\","
	     "\"off\":0,\"len\":67108864}],\"reducers\":2}");
	fast("[]");
	fast("{}");
	fast("[[[[]]],{\"\":{}}]");
}

static void
test_strings(void **state)
{
	(void)state;
	fast("[\"a\\\"b\\\\c\\/d\\be\\ff\\ng\\rh\\ti\"]");
	fast("[\"\\u00e9\\u20AC\\ud83d\\ude00 A\\u0041\"]");
	fast("[\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\", \"\x7f\"]");
	fast("{\"cl\\u00e9\":1,\"k\\n\":2}");
	/* Refused by jansson: its error comes back. */
	slow("[\"a\x01\"]", STRICT);
	slow("[\"\\x\"]", STRICT);
	slow("[\"\\u12\"]", STRICT);
	slow("[\"\\u12g4\"]", STRICT);
	slow("[\"\\ud800\"]", STRICT);
	slow("[\"\\ud800\\u0041\"]", STRICT);
	slow("[\"\\udc00\"]", STRICT);
	slow("[\"\\u0000\"]", STRICT);
	slow("{\"a\\u0000b\":1}", STRICT);
	slow("[\"\xc3\"]", STRICT);
	slow("[\"\xc0\xaf\"]", STRICT);
	slow("[\"\xe0\x80\xaf\"]", STRICT);
	slow("[\"\xed\xa0\x80\"]", STRICT);
	slow("[\"\xf4\x90\x80\x80\"]", STRICT);
	slow("[\"\xf5\x80\x80\x80\"]", STRICT);
	slow("[\"abc", STRICT);
	slow("[\"abc\\\"]", STRICT);
	slow("[\"abc\\", STRICT);
}

static void
test_numbers(void **state)
{
	(void)state;
	fast("[0,-0,1,-1,123456789012345678,-123456789012345678]");
	fast("[0.5,-0.0,1e3,1E-3,1.25e+2,2.2250738585072014e-308,4e-320]");
	fast("[1.7976931348623157e308,0.1,3.141592653589793238462643]");
	/* Too long for the fast path, still jansson's to take or refuse. */
	slow("[1234567890123456789]", STRICT);
	slow("[9223372036854775807]", STRICT);
	slow("[9223372036854775808]", STRICT);
	slow("[-9223372036854775809]", STRICT);
	slow("[1e400]", STRICT);
	slow("[-1e400]", STRICT);
	slow("[0.000000000000000000000000000000000000000000000000000000000000"
	     "000000001]", STRICT);
	slow("[01]", STRICT);
	slow("[-]", STRICT);
	slow("[1.]", STRICT);
	slow("[.5]", STRICT);
	slow("[1e]", STRICT);
	slow("[1e+]", STRICT);
	slow("[+1]", STRICT);
	slow("[1x]", STRICT);
	slow("[0x10]", STRICT);
	slow("[NaN]", STRICT);
	slow("[Infinity]", STRICT);
}

static void
test_structure(void **state)
{
	char deep[2 * JPARSE_DEPTH + 8];
	int i;

	(void)state;
	fast("[true,false,null]");
	slow("[truex]", STRICT);
	slow("[tru]", STRICT);
	slow("[nul]", STRICT);
	slow("", STRICT);
	slow("   ", STRICT);
	slow("{", STRICT);
	slow("[1,]", STRICT);
	slow("[1 2]", STRICT);
	slow("{\"a\" 1}", STRICT);
	slow("{\"a\":1,}", STRICT);
	slow("{a:1}", STRICT);
	slow("{\"a\":1}}", STRICT);
	slow("{\"a\":1} x", STRICT);
	slow("{\"a\":1}\n\n{}", STRICT);
	agree_n("{\"a\":1}\0", 8, STRICT);
	agree_n("[\"a\0b\"]", 7, STRICT);
	/* Top-level scalars only with JSON_DECODE_ANY. */
	slow("1", STRICT);
	slow("\"x\"", 0);
	if (!agree("\"x\"", JSON_DECODE_ANY) || !agree(" 1 ", JSON_DECODE_ANY) ||
	    !agree("null", JSON_DECODE_ANY | STRICT))
		fail_msg("a top-level scalar not read by the fast path");
	/* Deeper than JPARSE_DEPTH: jansson's. */
	for (i = 0; i <= JPARSE_DEPTH; i++)
		deep[i] = '[';
	for (i = 0; i <= JPARSE_DEPTH; i++)
		deep[JPARSE_DEPTH + 1 + i] = ']';
	deep[2 * JPARSE_DEPTH + 2] = '\0';
	slow(deep, STRICT);
	deep[JPARSE_DEPTH] = ' ';
	deep[JPARSE_DEPTH + 1] = ' ';
	fast(deep);
	/* Flags the fast path does not know: jansson's. */
	slow("[1]", JSON_DECODE_INT_AS_REAL);
	slow("[1]", JSON_DISABLE_EOF_CHECK);
}

static void
test_duplicates(void **state)
{
	(void)state;
	slow("{\"a\":1,\"a\":2}", STRICT);
	slow("{\"a\":1,\"a\":2}", 0);		/* jansson keeps the last */
	slow("{\"a\":1,\"\\u0061\":2}", STRICT);
	slow("[{\"x\":{\"b\":1,\"b\":1}}]", 0);
	fast("{\"a\":1,\"A\":2,\"a \":3}");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_task_specs),
		cmocka_unit_test(test_strings),
		cmocka_unit_test(test_numbers),
		cmocka_unit_test(test_structure),
		cmocka_unit_test(test_duplicates),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * libFuzzer harness: jparse against jansson.  For any bytes and each set
 * of flags the master and the workers use, jparse must return what
 * json_loadb returns: both nothing, or values that print the same (keys
 * in order, reals to 17 digits, so equal doubles and types).  The fast
 * reading alone may give up, but when it gives a value, jansson must give
 * the same one.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jparse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const size_t flag_sets[] = {
	0,
	JSON_REJECT_DUPLICATES,
	JSON_REJECT_DUPLICATES | JSON_DECODE_ANY,
	JSON_DECODE_ANY,
};

/* V printed, for comparison (malloc'd), or NULL for no value. */
static char *
print(const json_t *v)
{
	return v ? json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT |
			      JSON_REAL_PRECISION(17)) : NULL;
}

static void
compare(const char *s, size_t size, size_t flags)
{
	json_error_t je;
	json_t *fast = jparse_fast(s, size, flags);
	json_t *ours = jparse(s, size, flags, &je);
	json_t *ref = json_loadb(s, size, flags, NULL);
	char *pf = print(fast), *po = print(ours), *pr = print(ref);

	if ((ours == NULL) != (ref == NULL) ||
	    (po && strcmp(po, pr) != 0) ||
	    (pf && (pr == NULL || strcmp(pf, pr) != 0))) {
		fprintf(stderr, "flags %zx: jparse_fast %s, jparse %s, "
			"json_loadb %s\n", flags, pf ? pf : "(none)",
			po ? po : "(none)", pr ? pr : "(none)");
		abort();
	}
	free(pf);
	free(po);
	free(pr);
	json_decref(fast);
	json_decref(ours);
	json_decref(ref);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t k;

	for (k = 0; k < sizeof(flag_sets) / sizeof(flag_sets[0]); k++)
		compare((const char *)data, size, flag_sets[k]);
	return 0;
}

/*
 * libFuzzer harness: a batch file's bytes, as the master reads them
 * (batchtext.c: the top-level scan, each task parsed and checked by its
 * plugin, the error's position).  Whatever the bytes, reading must neither
 * crash nor leak, and the spans found must lie inside the text.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batchtext.h"
#include "util.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct ft_plugins pl;

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char err[512];

	(void)argc, (void)argv;
	if (ft_plugins_load(&pl, FT_TEST_BINDIR "/tasks", err,
			    sizeof(err)) == -1) {
		fprintf(stderr, "fuzz_batch: %s\n", err);
		exit(2);
	}
	return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct batch_text bt;
	char err[1024], *text = ft_malloc(size + 1);
	uint32_t i;

	memcpy(text, data, size);
	text[size] = '\0';
	if (batch_text_read(&bt, "fuzz.json", text, size, &pl, 1, err,
			    sizeof(err)) == 0) {
		for (i = 0; i < bt.ntasks; i++)
			if ((size_t)bt.spans[i].off + bt.spans[i].len > size)
				abort();
		batch_text_free(&bt);
	}
	return 0;
}

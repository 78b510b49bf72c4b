/*
 * libFuzzer harness: a batch file's bytes, as the master reads them
 * (batchtext.c: the top-level scan, each task parsed and checked by its
 * plugin, the error's position).  Whatever the bytes, reading must neither
 * crash nor leak, and it must agree with jansson reading the whole text:
 * a batch is accepted exactly when jansson parses it and the batch check
 * passes, and then each span is the task jansson found at its place.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batch.h"
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

/* Does jansson, reading all of DATA, find a batch that passes the check? */
static json_t *
whole_batch(const uint8_t *data, size_t size)
{
	struct jerr jerr;
	json_t *all = json_loadb((const char *)data, size,
				 JSON_REJECT_DUPLICATES | JSON_DECODE_ANY,
				 NULL);

	if (all && ft_batch_check(all, &pl, &jerr) == -1) {
		json_decref(all);
		return NULL;
	}
	return all;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct batch_text bt;
	char err[1024], *text = ft_malloc(size + 1);
	json_t *all = whole_batch(data, size), *tasks, *t;
	uint32_t i;
	int rc;

	memcpy(text, data, size);
	text[size] = '\0';
	rc = batch_text_read(&bt, "fuzz.json", text, size, &pl, 1, err,
			     sizeof(err));
	if ((rc == 0) != (all != NULL))
		abort();		/* the scan and jansson disagree */
	if (rc == 0) {
		tasks = json_object_get(all, "tasks");
		if (bt.job == NULL && json_array_size(tasks) != bt.ntasks)
			abort();
		for (i = 0; i < bt.ntasks; i++) {
			if ((size_t)bt.spans[i].off + bt.spans[i].len > size)
				abort();
			t = json_loadb(bt.text + bt.spans[i].off,
				       bt.spans[i].len, 0, NULL);
			if (!json_equal(t, json_array_get(tasks, i)))
				abort();
			json_decref(t);
		}
		batch_text_free(&bt);
	}
	json_decref(all);
	return 0;
}

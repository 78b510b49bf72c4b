/*
 * evfile: a cmocka fixture for unit tests of what writes events: an
 * events.jsonl in a temporary directory, and the events written so far
 * read back.  Included by one test file each (static functions); the
 * includer has already included cmocka.h and its prerequisites.
 */
#ifndef FT_TEST_EVFILE_H
#define FT_TEST_EVFILE_H

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "events.h"
#include "util.h"

struct fixture {
	char dir[64];
	char path[128];
	struct events ev;
};

static int
setup(void **state)
{
	struct fixture *f = ft_calloc(1, sizeof(*f));

	snprintf(f->dir, sizeof(f->dir), "/tmp/ftfarm-unit-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->path, sizeof(f->path), "%s/events.jsonl", f->dir);
	assert_int_equal(events_open(&f->ev, f->path, 1), 0);
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	struct fixture *f = *state;

	events_close(&f->ev);
	unlink(f->path);
	rmdir(f->dir);
	free(f);
	return 0;
}

/* The events written so far, as a JSON array (each line must parse). */
static json_t *
events_read(struct fixture *f)
{
	json_t *a = json_array();
	char *text, *line, *save = NULL;

	assert_int_equal(events_flush(&f->ev), 0);
	text = ft_read_file(f->path, NULL);
	assert_non_null(text);
	for (line = strtok_r(text, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		json_t *e = json_loads(line, 0, NULL);

		assert_non_null(e);
		json_array_append_new(a, e);
	}
	free(text);
	return a;
}

#endif

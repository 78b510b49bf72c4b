/* Unit tests of master/events.c: the lines the typed emitters write, the
 * task events left out when task_events is off, and the manual's list of
 * events (man/ftfarm-events.7) held to the declared list (names and fields, in order). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "events.h"
#include "util.h"

/* Emit a few events into a fresh file with TASK_EVENTS; its lines. */
static json_t *
emit(int task_events)
{
	char dir[] = "/tmp/ftfarm-events-unit-XXXXXX", *path, *text, *line;
	char *save = NULL;
	struct events ev;
	json_t *a = json_array();

	assert_non_null(mkdtemp(dir));
	path = ft_asprintf("%s/events.jsonl", dir);
	assert_int_equal(events_open(&ev, path, task_events), 0);
	ev_batch_submitted(&ev, 7, "n\"x", 3, NULL);
	ev_task_assigned(&ev, 7, 0, 1, 2, "h1", 1);
	ev_task_done(&ev, 7, 0, 1, 2, "h1", "ok");
	ev_batch_done(&ev, 7, 3, 2, 1, 0.5, "job failed");
	ev_master_stopped(&ev);
	events_close(&ev);
	text = ft_read_file(path, NULL);
	assert_non_null(text);
	for (line = strtok_r(text, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		json_t *e = json_loads(line, 0, NULL);

		assert_non_null(e);
		assert_true(json_is_real(json_object_get(e, "ts")));
		json_array_append_new(a, e);
	}
	free(text);
	unlink(path);
	rmdir(dir);
	free(path);
	return a;
}

static void
test_lines(void **state)
{
	json_t *a = emit(1), *e;

	(void)state;
	assert_int_equal(json_array_size(a), 5);
	e = json_array_get(a, 0);
	assert_string_equal(json_string_value(json_object_get(e, "event")),
			    "batch_submitted");
	assert_string_equal(json_string_value(json_object_get(e, "name")),
			    "n\"x");
	assert_null(json_object_get(e, "job"));		/* optional, absent */
	e = json_array_get(a, 1);
	assert_true(json_is_true(json_object_get(e, "duplicate")));
	e = json_array_get(a, 3);
	assert_string_equal(json_string_value(json_object_get(e, "error")),
			    "job failed");
	assert_true(json_number_value(json_object_get(e, "seconds")) == 0.5);
	json_decref(a);
	a = emit(0);
	assert_int_equal(json_array_size(a), 3);	/* no task events */
	json_decref(a);
}

/* The manual's events (man/ftfarm-events.7, section EVENTS): each a
 * ".B name" line after ".TP", then "Fields: f1, f2." ("none."), as
 * "name: f1 f2" each. */
static char **
page_rows(size_t *n)
{
	char *text = ft_read_file(FT_TEST_SRCDIR "/man/ftfarm-events.7", NULL);
	char *sec, *end, *line, *save = NULL, **rows = NULL;
	int after_tp = 0;
	char name[64] = "";

	assert_non_null(text);
	sec = strstr(text, "\n.SH EVENTS");
	assert_non_null(sec);
	end = strstr(sec + 1, "\n.SH ");
	if (end)
		*end = '\0';
	*n = 0;
	for (line = strtok_r(sec, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		char fields[256] = "", *p;

		if (after_tp && strncmp(line, ".B ", 3) == 0) {
			snprintf(name, sizeof(name), "%s", line + 3);
			after_tp = 0;
			continue;
		}
		after_tp = strcmp(line, ".TP") == 0;
		if (name[0] == '\0' || strncmp(line, "Fields: ", 8) != 0)
			continue;
		for (p = line + 8; *p; p++)
			if (*p != ',' && !(*p == '.' && p[1] == '\0'))
				strncat(fields, p, 1);
		if (strcmp(fields, "none") == 0)
			fields[0] = '\0';
		rows = ft_realloc(rows, (*n + 1) * sizeof(*rows));
		rows[(*n)++] = ft_asprintf("%s: %s", name, fields);
		name[0] = '\0';
	}
	free(text);
	return rows;
}

/* "a  b - " -> "a b" (single spaces, no "-", no ends). */
static void
squeeze(char *s)
{
	char *w = s, *r;
	int space = 1;

	for (r = s; *r; r++) {
		if (*r == '-' && (r[1] == ' ' || r[1] == '\0'))
			continue;
		if (*r == ' ') {
			if (!space)
				*w++ = ' ';
			space = 1;
			continue;
		}
		*w++ = *r;
		space = 0;
	}
	while (w > s && w[-1] == ' ')
		w--;
	*w = '\0';
}

static void
test_manual_matches_schema(void **state)
{
	size_t n, i;
	char **rows = page_rows(&n);

	(void)state;
	for (i = 0; i < events_nschema; i++) {
		size_t j, k = strlen(events_schema[i].name);

		for (j = 0; j < n; j++)
			if (strncmp(rows[j], events_schema[i].name, k) == 0 &&
			    rows[j][k] == ':')
				break;
		if (j == n)
			fail_msg("event %s (master/events.h) is missing from "
				 "man/ftfarm-events.7", events_schema[i].name);
	}
	assert_int_equal(n, events_nschema);
	for (i = 0; i < n; i++) {
		char *want = ft_asprintf("%s:%s", events_schema[i].name,
					 events_schema[i].fields);
		char *colon;

		colon = strchr(rows[i], ':');
		squeeze(colon + 1);
		colon = strchr(want, ':');
		squeeze(colon + 1);
		if (strcmp(rows[i], want) != 0)
			fail_msg("man/ftfarm-events.7 event %zu says \"%s\", "
				 "events.h \"%s\"",
				 i, rows[i], want);
		free(want);
		free(rows[i]);
	}
	free(rows);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lines),
		cmocka_unit_test(test_manual_matches_schema),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

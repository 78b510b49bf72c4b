/* alloc -c CFG [--json]; alloc pause|resume -c CFG QUEUE: the
 * allocation queues (master/alloc.h) and their allocations. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "ctl.h"
#include "util.h"

#define ANSWER_TIMEOUT 30.0

/* "1h02m" for SECONDS into BUF. */
static const char *
span(double s, char *buf, size_t n)
{
	long t = (long)s;

	if (t >= 3600)
		snprintf(buf, n, "%ldh%02ldm", t / 3600, t / 60 % 60);
	else
		snprintf(buf, n, "%ldm%02lds", t / 60, t % 60);
	return buf;
}

static void
print_queues(json_t *ans)
{
	json_t *q, *a;
	size_t i, k;
	char left[32];

	json_array_foreach(json_object_get(ans, "queues"), i, q) {
		const char *reason = jget_str(q, "reason", "");

		printf("queue %s: %s, %lld submitted, up to %lld nodes, %lld "
		       "pending at once, %s each%s%s\n",
		       jget_str(q, "name", ""), jget_str(q, "state", ""),
		       jget_int(q, "submissions", 0), jget_int(q, "max_nodes", 0),
		       jget_int(q, "backlog", 0),
		       span(jget_num(q, "time_limit_s", 0), left, sizeof(left)),
		       *reason ? ": " : "", reason);
		json_array_foreach(json_object_get(q, "allocations"), k, a) {
			json_t *tl = json_object_get(a, "time_left");

			printf("  %-10s %-8s %lld node%s %s%s%s\n",
			       jget_str(a, "id", ""), jget_str(a, "state", ""),
			       jget_int(a, "nodes", 0),
			       jget_int(a, "nodes", 0) == 1 ? " " : "s",
			       jget_str(a, "hosts", ""),
			       json_is_number(tl) ? " left " : "",
			       json_is_number(tl) ? span(json_number_value(tl),
							 left, sizeof(left))
						  : "");
		}
	}
}

int
cli_alloc(struct cli *c)
{
	json_t *req, *ans;
	int set = c->argc == 2 && (strcmp(c->argv[0], "pause") == 0 ||
				   strcmp(c->argv[0], "resume") == 0);

	if (c->argc != 0 && !set) {
		cli_err("usage: ftfarm alloc -c CFG [--json], or ftfarm alloc "
			"pause|resume -c CFG QUEUE");
		return 2;
	}
	if (set) {
		req = ctl_request_new(CTL_ALLOC_SET);
		json_object_set_new(req, "queue", json_string(c->argv[1]));
		json_object_set_new(req, "paused",
				    json_boolean(c->argv[0][0] == 'p'));
	} else {
		req = ctl_request_new(CTL_ALLOC);
	}
	ans = cli_call(c, req, ANSWER_TIMEOUT);
	json_decref(req);
	if (ans == NULL)
		return c->status;
	json_object_del(ans, "ok");
	if (c->json) {
		json_dumpf(ans, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
		putchar('\n');
	} else if (json_array_size(json_object_get(ans, "queues")) == 0) {
		printf("no allocation queue: the config has no "
		       "\"allocations\"\n");
	} else {
		print_queues(ans);
	}
	json_decref(ans);
	return 0;
}

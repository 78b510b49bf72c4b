/* The ftfarm commands for nodes and batches an operator acts on or asks
 * about: nodes, drain, undrain, reboot, cancel, batch, forget.  Each sends one
 * request; --json prints the answer as it came (less "ok"). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "ctl.h"
#include "memsize.h"
#include "util.h"

#define ANSWER_TIMEOUT 30.0	/* seconds for an answer that comes at once */
#define REBOOT_SLACK 120.0	/* beyond the config's drain and reboot bounds */

/* Print ANS (taken over) as JSON: the exit status 0. */
static int
print_json(json_t *ans)
{
	json_object_del(ans, "ok");
	json_dumpf(ans, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	putchar('\n');
	json_decref(ans);
	return 0;
}

/* "node2: drained (drained by an operator)" for node row ROW. */
static void
print_node(json_t *row)
{
	const char *reason = json_string_value(json_object_get(row, "reason"));

	printf("%s: %s, reboots %lld%s%s%s\n",
	       json_string_value(json_object_get(row, "name")),
	       json_string_value(json_object_get(row, "state")),
	       (long long)json_integer_value(json_object_get(row, "reboots")),
	       reason && *reason ? " (" : "", reason ? reason : "",
	       reason && *reason ? ")" : "");
}

/* nodes -c CFG [--json] */
int
cli_nodes(struct cli *c)
{
	json_t *req = ctl_request_new(CTL_NODES);
	json_t *ans = cli_call(c, req, ANSWER_TIMEOUT);

	json_decref(req);
	if (ans == NULL)
		return c->status;
	if (c->json)
		return print_json(ans);
	cli_print_table(ctl_node_cols, CTL_N_NCOLS,
			json_object_get(ans, "nodes"));
	json_decref(ans);
	return 0;
}

/* Send CMD about the node in c->argv[0] (USAGE when there is none);
 * a leave carries --grace when given. */
static int
node_request(struct cli *c, enum ctl_cmd cmd, const char *usage)
{
	json_t *req, *ans;

	if (c->argc != 1 || c->argv[0][0] == '\0') {
		cli_err("usage: ftfarm %s", usage);
		return 2;
	}
	req = ctl_request_new(cmd);
	json_object_set_new(req, "node", json_string(c->argv[0]));
	if (cmd == CTL_LEAVE && c->grace >= 0)
		json_object_set_new(req, "grace", json_real(c->grace));
	ans = cli_call(c, req, ANSWER_TIMEOUT);
	json_decref(req);
	if (ans == NULL)
		return c->status;
	if (c->json)
		return print_json(ans);
	print_node(json_object_get(ans, "node"));
	json_decref(ans);
	return 0;
}

/* leave -c CFG NODE [--grace S] [--json] */
int
cli_leave(struct cli *c)
{
	return node_request(c, CTL_LEAVE,
			    "leave -c CFG NODE [--grace S] [--json]");
}

/* drain -c CFG NODE [--json] */
int
cli_drain(struct cli *c)
{
	return node_request(c, CTL_DRAIN, "drain -c CFG NODE [--json]");
}

/* undrain -c CFG NODE [--json] */
int
cli_undrain(struct cli *c)
{
	return node_request(c, CTL_UNDRAIN, "undrain -c CFG NODE [--json]");
}

/* reboot -c CFG NODE|all [--force] [--json]: exit 0 once every node named
 * is back in service, 1 when one's reboot failed.  No node named is a
 * usage error: "all" must be spelled out. */
int
cli_reboot(struct cli *c)
{
	double bound = c->cfg.reboot_wait + REBOOT_SLACK;
	json_t *req, *ans, *row;
	size_t i;

	if (c->argc != 1 || c->argv[0][0] == '\0') {
		cli_err("usage: ftfarm reboot -c CFG NODE|all [--force] "
			"[--json] (\"all\" reboots every node)");
		return 2;
	}
	req = ctl_request_new(CTL_REBOOT);
	json_object_set_new(req, "node", json_string(c->argv[0]));
	if (c->force)
		json_object_set_new(req, "force", json_true());
	else
		bound += c->cfg.drain_timeout;
	ans = cli_call(c, req, bound);
	json_decref(req);
	if (ans == NULL)
		return c->status;
	if (c->json)
		return print_json(ans);
	json_array_foreach(json_object_get(ans, "nodes"), i, row)
		print_node(row);
	json_decref(ans);
	return 0;
}

/* The batch ids of C's operands (MIN to MAX of them) into a new array
 * *IDS; 0, or 2 after the usage line USAGE (an operand that is not an
 * id, or too few or too many). */
static int
batch_ids(const struct cli *c, const char *usage, long long **ids, int min,
	  int max)
{
	char *end;
	int i;

	*ids = NULL;
	if (c->argc < min || c->argc > max)
		goto bad;
	*ids = ft_calloc((size_t)c->argc, sizeof(**ids));
	for (i = 0; i < c->argc; i++)
		if (((*ids)[i] = strtoll(c->argv[i], &end, 10)) <= 0 || *end ||
		    end == c->argv[i])
			goto bad;
	return 0;
bad:
	free(*ids);
	*ids = NULL;
	cli_err("usage: ftfarm %s", usage);
	return 2;
}

/* Cancel batch ID: 0, or the exit status after saying why not. */
static int
cancel_one(struct cli *c, long long id)
{
	json_t *req = ctl_request_new(CTL_CANCEL), *ans;

	json_object_set_new(req, "batch", json_integer(id));
	ans = cli_call(c, req, ANSWER_TIMEOUT);
	json_decref(req);
	if (ans == NULL)
		return c->status;
	if (c->json)
		return print_json(ans);
	printf("batch %lld cancelled: %lld queued tasks dropped, %lld running "
	       "killed\n", id,
	       (long long)json_integer_value(json_object_get(ans, "queued")),
	       (long long)json_integer_value(json_object_get(ans, "running")));
	json_decref(ans);
	return 0;
}

/* cancel -c CFG BATCH_ID... [--json]: each batch in turn, one line (or
 * JSON object) each; a batch that has ended or does not exist is said and
 * the others cancelled all the same.  Exit 1 if any was not cancelled;
 * with the master gone, the rest are not tried. */
int
cli_cancel(struct cli *c)
{
	long long *ids;
	int i, rc, st = 0;

	if ((rc = batch_ids(c, "cancel -c CFG BATCH_ID... [--json]", &ids, 1,
			    INT_MAX)) != 0)
		return rc;
	for (i = 0; i < c->argc; i++) {
		if ((rc = cancel_one(c, ids[i])) == 0)
			continue;
		st = st ? st : rc;
		if (c->unreachable) {
			if (i + 1 < c->argc)
				cli_err("%d more batches not cancelled",
					c->argc - i - 1);
			break;
		}
	}
	free(ids);
	return st;
}

/* The usage line of batch ROW: what its tasks used together. */
static void
print_usage(const json_t *row)
{
	char rss[32];

	if (!json_is_number(json_object_get(row, "cpu_s")))
		return;		/* a batch of an older master */
	printf("  used %.2f CPU seconds in %.2f seconds of tasks; the largest "
	       "peak RSS %s\n",
	       json_number_value(json_object_get(row, "cpu_s")),
	       json_number_value(json_object_get(row, "task_seconds")),
	       memsize_format((uint64_t)json_integer_value(
			      json_object_get(row, "max_rss")), rss,
			      sizeof(rss)));
}

/* batch -c CFG BATCH_ID [--json] [--reconnect-timeout S]: --json prints
 * the batch's row as `status --json` lists it.  Across a restart of the
 * master it asks the next one, as wait does. */
int
cli_batch(struct cli *c)
{
	json_t *req, *ans, *row;
	char what[64];
	long long *ids, id;
	int rc;

	if ((rc = batch_ids(c, "batch -c CFG BATCH_ID [--json] "
			    "[--reconnect-timeout S]", &ids, 1, 1)) != 0)
		return rc;
	id = ids[0];
	free(ids);
	snprintf(what, sizeof(what), "batch %lld", id);
	req = ctl_request_new(CTL_BATCH);
	json_object_set_new(req, "batch", json_integer(id));
	ans = cli_call_across(c, req, ANSWER_TIMEOUT, what);
	json_decref(req);
	if (ans == NULL)
		return c->status;
	row = json_object_get(ans, "batch");
	if (c->json) {
		json_dumpf(row, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
		putchar('\n');
	} else {
		printf("batch %lld (%s): %s, %lld of %lld tasks done: %lld ok, "
		       "%lld failed\n", id,
		       json_string_value(json_object_get(row, "name")),
		       json_string_value(json_object_get(row, "state")),
		       (long long)json_integer_value(json_object_get(row, "done")),
		       (long long)json_integer_value(json_object_get(row,
								     "total")),
		       (long long)json_integer_value(json_object_get(row, "ok")),
		       (long long)json_integer_value(json_object_get(row,
								     "failed")));
		if (json_is_string(json_object_get(row, "error")))
			printf("  %s\n", json_string_value(
				       json_object_get(row, "error")));
		print_usage(row);
	}
	json_decref(ans);
	return 0;
}

/* forget -c CFG BATCH_ID */
int
cli_forget(struct cli *c)
{
	json_t *req, *ans;
	long long *ids, id;
	int rc;

	if ((rc = batch_ids(c, "forget -c CFG BATCH_ID", &ids, 1, 1)) != 0)
		return rc;
	id = ids[0];
	free(ids);
	req = ctl_request_new(CTL_FORGET);
	json_object_set_new(req, "batch", json_integer(id));
	ans = cli_call(c, req, ANSWER_TIMEOUT);
	json_decref(req);
	if (ans == NULL)
		return c->status;
	json_decref(ans);
	printf("batch %lld forgotten\n", id);
	return 0;
}

/* The ftfarm commands that talk to a running master. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "batch.h"
#include "batchtext.h"
#include "cli.h"
#include "ctl.h"
#include "jcheck.h"
#include "jpos.h"
#include "plugins.h"
#include "util.h"

json_t *
cli_call_body(struct cli *c, json_t *req, const void *body, size_t len,
	      double timeout)
{
	char err[1024];
	json_t *ans = ctl_request_body(c->cfg.state_dir, req, body, len,
				       timeout, err, sizeof(err));
	json_t *status;

	c->status = 1;
	if (ans == NULL) {
		cli_err("%s", err);
		return NULL;
	}
	if (json_integer_value(json_object_get(ans, "v")) != FT_CTL_VERSION) {
		cli_err("incompatible ftfarm and ftfarm-master versions: the "
			"master answered in another control protocol than %d",
			FT_CTL_VERSION);
		json_decref(ans);
		return NULL;
	}
	if (!json_is_true(json_object_get(ans, "ok"))) {
		const char *e = json_string_value(json_object_get(ans, "error"));

		/* A batch file's own error reads as if we had found it. */
		status = json_object_get(ans, "exit");
		if (json_integer_value(status) == 2)
			fprintf(stderr, "%s\n", e ? e : "bad input");
		else
			cli_err("%s", e ? e : "the master refused the request");
		if (json_is_integer(status))
			c->status = (int)json_integer_value(status);
		json_decref(ans);
		return NULL;
	}
	return ans;
}

json_t *
cli_call(struct cli *c, json_t *req, double timeout)
{
	return cli_call_body(c, req, NULL, 0, timeout);
}

/* Check BATCH against the task types installed beside this program.
 * 0, -1 with JERR set, or -2 when the plugins cannot be loaded (said). */
static int
check_batch(const json_t *batch, struct jerr *jerr)
{
	struct ft_plugins pl;
	char err[1024], *dir = ft_plugins_default_dir();
	int rc = ft_plugins_load(&pl, dir, err, sizeof(err));

	free(dir);
	if (rc == -1) {
		cli_err("%s", err);
		return -2;
	}
	rc = ft_batch_check(batch, &pl, jerr);
	ft_plugins_free(&pl);
	return rc;
}

/* Check the batch file PATH here, as the master would.  0, or 2 after
 * printing one line "FILE:LINE:COL: KEY: MESSAGE" (or 1 when the task
 * types cannot be loaded).  *NTASKS: its tasks. */
static int
check_file(const char *path, uint32_t *ntasks)
{
	struct batch_text bt;
	struct ft_plugins pl;
	char err[1024], *dir = ft_plugins_default_dir(), *text;
	size_t len;
	int rc = ft_plugins_load(&pl, dir, err, sizeof(err));

	free(dir);
	if (rc == -1) {
		cli_err("%s", err);
		return 1;
	}
	if ((text = ft_read_file(path, &len)) == NULL) {
		fprintf(stderr, "%s: cannot read: %s\n", path, strerror(errno));
		rc = 2;
	} else if (batch_text_read(&bt, path, text, len, &pl, 2, err,
				   sizeof(err)) == -1) {
		fprintf(stderr, "%s\n", err);
		rc = 2;
	} else {
		*ntasks = bt.ntasks;
		batch_text_free(&bt);
	}
	ft_plugins_free(&pl);
	return rc;
}

static void
print_summary(json_t *b)
{
	const char *error = json_string_value(json_object_get(b, "error"));

	fprintf(stderr, "batch %lld (%s): %lld ok, %lld failed of %lld in "
		"%.3f s\n",
		(long long)json_integer_value(json_object_get(b, "id")),
		json_string_value(json_object_get(b, "name")),
		(long long)json_integer_value(json_object_get(b, "ok")),
		(long long)json_integer_value(json_object_get(b, "failed")),
		(long long)json_integer_value(json_object_get(b, "total")),
		json_number_value(json_object_get(b, "seconds")));
	if (error)
		fprintf(stderr, "batch %lld: job failed: %s\n",
			(long long)json_integer_value(json_object_get(b, "id")),
			error);
}

/* Wait for batch ID (a progress line on stderr when it is a terminal);
 * 0 if every task succeeded, 1 otherwise. */
static int
wait_batch(struct cli *c, json_int_t id)
{
	json_t *req = ctl_request_new(CTL_WAIT);
	json_t *ans, *b;
	int rc;

	json_object_set_new(req, "batch", json_integer(id));
	if (isatty(STDERR_FILENO))
		ans = cli_wait_progress(c, id);
	else
		ans = cli_call(c, req, 0);
	json_decref(req);
	if (ans == NULL)
		return 1;
	b = json_object_get(ans, "batch");
	print_summary(b);
	if (json_object_get(b, "result")) {
		char *text = json_dumps(json_object_get(b, "result"),
					JSON_COMPACT | JSON_PRESERVE_ORDER);

		fprintf(stderr, "result: %s\n", text);
		free(text);
	}
	rc = json_integer_value(json_object_get(b, "failed")) == 0 &&
	     json_object_get(b, "error") == NULL ? 0 : 1;
	json_decref(ans);
	return rc;
}

/* Print the id in ANS (a submit's answer) and wait for the batch if
 * WAIT.  The exit status. */
static int
submitted(struct cli *c, json_t *ans, int wait)
{
	json_int_t id;

	if (ans == NULL)
		return c->status;
	id = json_integer_value(json_object_get(ans, "batch"));
	json_decref(ans);
	printf("%lld\n", (long long)id);
	fflush(stdout);
	return wait ? wait_batch(c, id) : 0;
}

/* Send BATCH (taken over), print its id, and wait for it if WAIT. */
static int
send_batch(struct cli *c, json_t *batch, int wait)
{
	json_t *req = ctl_request_new(CTL_SUBMIT), *ans;

	json_object_set_new(req, "batch", batch);
	ans = cli_call(c, req, 600);
	json_decref(req);
	return submitted(c, ans, wait);
}

/* submit -c CFG BATCH.json [--wait]: the file's bytes go to the master,
 * which checks them (as `check` does here) and reads them once. */
int
cli_submit(struct cli *c)
{
	json_t *req, *ans;
	uint32_t ntasks;
	size_t len;
	char *text;

	if (c->argc != 1) {
		cli_err("usage: ftfarm submit -c CFG BATCH.json [--wait]");
		return 2;
	}
	text = ft_read_file(c->argv[0], &len);
	if (text == NULL || len == 0) {
		free(text);
		return check_file(c->argv[0], &ntasks);
	}
	req = ctl_request_new(CTL_SUBMIT);
	json_object_set_new(req, "bytes", json_integer((json_int_t)len));
	json_object_set_new(req, "file", json_string(c->argv[0]));
	ans = cli_call_body(c, req, text, len, 600);
	json_decref(req);
	free(text);
	return submitted(c, ans, c->wait);
}

/* PATH made absolute against the working directory (a new string). */
static char *
absolute(const char *path)
{
	char *cwd, *abs;

	if (path[0] == '/')
		return ft_strdup(path);
	cwd = getcwd(NULL, 0);
	abs = ft_path_join(cwd ? cwd : ".", path);
	free(cwd);
	return abs;
}

static void
set_path(json_t *obj, const char *key, const char *path)
{
	char *abs = absolute(path);

	json_object_set_new(obj, key, json_string(abs));
	free(abs);
}

/* The job batch of `ftfarm wordcount`. */
static json_t *
wordcount_batch(struct cli *c)
{
	json_t *job = json_pack("{s:s, s:[]}", "type", "wordcount", "inputs");
	json_t *inputs = json_object_get(job, "inputs");
	int i;

	for (i = 0; i < c->argc; i++) {
		char *abs = absolute(c->argv[i]);

		json_array_append_new(inputs, json_string(abs));
		free(abs);
	}
	set_path(job, "output", c->output);
	if (c->delimiters)
		set_path(job, "delimiters", c->delimiters);
	if (c->shards)
		json_object_set_new(job, "shards", json_integer(c->shards));
	if (c->reducers)
		json_object_set_new(job, "reducers", json_integer(c->reducers));
	return json_pack("{s:s, s:o}", "name", "wordcount", "job", job);
}

/* wordcount -c CFG -o OUT [--shards N] [--reducers R] [--delimiters F]
 * INPUT...: submit a word-count job and wait for it. */
int
cli_wordcount(struct cli *c)
{
	json_t *batch;
	struct jerr jerr;
	int rc;

	if (c->output == NULL || c->argc < 1) {
		cli_err("usage: ftfarm wordcount -c CFG -o OUT [--shards N] "
			"[--reducers R] [--delimiters FILE] INPUT...");
		return 2;
	}
	batch = wordcount_batch(c);
	rc = check_batch(batch, &jerr);
	if (rc != 0) {
		if (rc == -1)
			cli_err("%s: %s", jerr.path, jerr.msg);
		json_decref(batch);
		return rc == -1 ? 2 : 1;
	}
	return send_batch(c, batch, 1);
}

/* wait -c CFG BATCH_ID */
int
cli_wait(struct cli *c)
{
	char *end;
	long long id;

	if (c->argc != 1 || (id = strtoll(c->argv[0], &end, 10)) <= 0 || *end) {
		cli_err("usage: ftfarm wait -c CFG BATCH_ID");
		return 2;
	}
	return wait_batch(c, (json_int_t)id);
}

/* One cell of column COL of ROW, as the column says. */
static void
print_cell(const struct ctl_col *col, json_t *row, int last)
{
	json_t *v = json_object_get(row, col->key);
	int w = last ? 0 : col->width;

	switch (col->type) {
	case JT_INT:
		printf("%*lld", w, (long long)json_integer_value(v));
		break;
	case JT_NUMBER:
		printf("%*.3f", w, json_number_value(v));
		break;
	default:
		printf("%*s", w, json_is_string(v) ? json_string_value(v) : "");
	}
	putchar(last ? '\n' : ' ');
}

/* ROWS as a table of the printed columns of COLS (N of them). */
static void
print_table(const struct ctl_col *cols, int n, json_t *rows)
{
	json_t *row;
	size_t i;
	int k, last = n - 1;

	while (last > 0 && cols[last].title == NULL)
		last--;
	for (k = 0; k <= last; k++)
		if (cols[k].title)
			printf("%*s%c", k == last ? 0 : cols[k].width,
			       cols[k].title, k == last ? '\n' : ' ');
	json_array_foreach(rows, i, row)
		for (k = 0; k <= last; k++)
			if (cols[k].title)
				print_cell(&cols[k], row, k == last);
}

/* status -c CFG [--json] */
int
cli_status(struct cli *c)
{
	const char *const *k = ctl_status_keys;
	json_t *req = ctl_request_new(CTL_STATUS);
	json_t *ans = cli_call(c, req, 30);

	json_decref(req);
	if (ans == NULL)
		return 1;
	if (c->json) {
		json_object_del(ans, "ok");
		json_dumpf(ans, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
		putchar('\n');
	} else {
		printf("cluster %s: %s launch, %s; up %.1f s; %lld queued, "
		       "%lld open\n",
		       json_string_value(json_object_get(ans, k[CTL_S_CLUSTER])),
		       json_string_value(json_object_get(ans, k[CTL_S_LAUNCH])),
		       json_string_value(json_object_get(ans, k[CTL_S_MPI])),
		       json_number_value(json_object_get(ans, k[CTL_S_UPTIME])),
		       (long long)json_integer_value(json_object_get(ans,
							k[CTL_S_QUEUED])),
		       (long long)json_integer_value(json_object_get(ans,
							k[CTL_S_OPEN])));
		if (json_is_string(json_object_get(ans, k[CTL_S_HTTP])))
			printf("status page and metrics: %s\n",
			       json_string_value(json_object_get(ans,
							k[CTL_S_HTTP])));
		putchar('\n');
		print_table(ctl_worker_cols, CTL_W_NCOLS,
			    json_object_get(ans, k[CTL_S_WORKERS]));
		putchar('\n');
		print_table(ctl_node_cols, CTL_N_NCOLS,
			    json_object_get(ans, k[CTL_S_NODES]));
		if (json_array_size(json_object_get(ans, k[CTL_S_BATCHES]))) {
			putchar('\n');
			print_table(ctl_batch_cols, CTL_B_NCOLS,
				    json_object_get(ans, k[CTL_S_BATCHES]));
		}
	}
	json_decref(ans);
	return 0;
}

/* check -c CFG [BATCH.json...] */
int
cli_check(struct cli *c)
{
	int i, rc = 0;

	for (i = 0; i < c->argc; i++) {
		uint32_t ntasks = 0;
		int r = check_file(c->argv[i], &ntasks);

		if (r != 0)
			rc = r;
		else
			printf("%s: batch OK (%u tasks)\n", c->argv[i], ntasks);
	}
	if (rc == 0)
		printf("%s: configuration OK (%d nodes, %d workers)\n",
		       c->config, c->cfg.nnodes, c->cfg.nworkers);
	return rc;
}

/* rotate -c CFG: master.log and events.jsonl go to .1, the master goes on
 * in new files (what SIGHUP to the master does too). */
int
cli_rotate(struct cli *c)
{
	json_t *req = ctl_request_new(CTL_ROTATE);
	json_t *ans = cli_call(c, req, 30);

	json_decref(req);
	if (ans == NULL)
		return c->status;
	json_decref(ans);
	printf("logs of cluster %s rotated\n", c->cfg.name);
	return 0;
}

/* The ftfarm commands that talk to a running master. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "batch.h"
#include "batchtext.h"
#include "cli.h"
#include "ctl.h"
#include "down.h"
#include "gang_load.h"
#include "jcheck.h"
#include "jpos.h"
#include "lease.h"
#include "plugins.h"
#include "supervise.h"
#include "util.h"

#define WAIT_SLICE 30.0	/* a wait longer than this checks the master answers */
#define PROBE_TIMEOUT 30.0	/* ... within this */
#define RETRY_MAX 1.0		/* longest pause between two reconnections */
#define DOWN_POLL 0.5		/* between looks at a down cluster's lease */

/* How a call to the master ended. */
enum call_end {
	CALL_OK,		/* it answered ok */
	CALL_REFUSED,		/* it answered with an error (printed) */
	CALL_BROKEN,		/* unreachable, or the connection broke */
};

/* Send REQ (and LEN bytes of BODY) to the master once, waiting TIMEOUT
 * seconds (<= 0: forever) for the answer.  CALL_OK with *ANS; CALL_REFUSED
 * after printing the refusal (c->status: the exit status it calls for);
 * CALL_BROKEN with ERR, nothing printed. */
static enum call_end
call_once(struct cli *c, json_t *req, const struct ctl_body *body,
	  double timeout, json_t **ans, char *err, size_t n)
{
	json_t *a = ctl_request_body(c->cfg.state_dir, req, body, timeout,
				     err, n);
	json_t *status;

	*ans = NULL;
	c->status = 1;
	c->unreachable = a == NULL;
	if (a == NULL)
		return CALL_BROKEN;
	if (json_integer_value(json_object_get(a, "v")) != FT_CTL_VERSION) {
		cli_err("incompatible ftfarm and ftfarm-master versions: the "
			"master answered in another control protocol than %d",
			FT_CTL_VERSION);
		json_decref(a);
		return CALL_REFUSED;
	}
	if (!json_is_true(json_object_get(a, "ok"))) {
		const char *e = json_string_value(json_object_get(a, "error"));

		/* A batch file's own error reads as if we had found it. */
		status = json_object_get(a, "exit");
		if (json_integer_value(status) == 2)
			fprintf(stderr, "%s\n", e ? e : "bad input");
		else
			cli_err("%s", e ? e : "the master refused the request");
		if (json_is_integer(status))
			c->status = (int)json_integer_value(status);
		json_decref(a);
		return CALL_REFUSED;
	}
	*ans = a;
	return CALL_OK;
}

/* The exit status of a call that got no answer: FT_EXIT_DOWN when the
 * cluster is DOWN (its lease says so: stopped, between two allocations,
 * nobody holds it), else 1 (a state dir of no cluster, a master gone in
 * the middle, or not answering). */
static int
broken_status(int down)
{
	return down ? FT_EXIT_DOWN : 1;
}

/* The master could not be reached (ERR): say so, or that the cluster is
 * down when its lease says so (down.h). */
static void
say_broken(struct cli *c, const char *err)
{
	char why[512];

	if (down_check(c->cfg.state_dir, why, sizeof(why)))
		cli_err("cluster %s is down (%s)", c->cfg.name, why);
	else
		cli_err("%s", err);
}

json_t *
cli_call_body(struct cli *c, json_t *req, const struct ctl_body *body,
	      double timeout)
{
	char err[1024];
	json_t *ans;

	if (call_once(c, req, body, timeout, &ans, err, sizeof(err)) ==
	    CALL_BROKEN)
		say_broken(c, err);
	return ans;
}

json_t *
cli_call(struct cli *c, json_t *req, double timeout)
{
	return cli_call_body(c, req, NULL, timeout);
}

/*
 * Across a master's restart: while a supervisor holds the lease, or a
 * standby may take it over, a client whose master went away waits for the
 * next one (saying so once), calling
 * again with a growing pause, up to a bound: --reconnect-timeout, or
 * lease_ms + start_timeout_s + restart_backoff_max_ms.
 *
 * Across a cluster's stop, and between two Slurm allocations of it: the
 * cluster is down (down.h).  Without --reconnect-timeout the client says
 * so and gives up; with it, it reads the lease until a supervisor holds
 * it again (the next start), then calls as across a restart, all within
 * that bound.
 */
struct reconnect {
	struct cli *c;
	const char *what;		/* "batch 7", for the message */
	struct lease lease;
	int have_lease;
	struct sup_watch watch;
	double until;			/* the bound of this outage; 0: none */
	double orphan_since;		/* no supervisor nor standby seen since */
	double pause;
	int down;			/* gave up: the cluster is down ... */
	char why[512];			/* ... why, in words */
};

static void
reconnect_init(struct reconnect *r, struct cli *c, const char *what)
{
	char err[256];

	memset(r, 0, sizeof(*r));
	r->c = c;
	r->what = what;
	r->have_lease = lease_open(&r->lease, c->cfg.state_dir, err,
				   sizeof(err)) == 0;
}

static void
reconnect_free(struct reconnect *r)
{
	if (r->have_lease)
		lease_close(&r->lease);
}

/* The master answered: a later outage has a bound of its own. */
static void
reconnect_ok(struct reconnect *r)
{
	r->until = 0;
}

/* Does a supervisor hold the lease REC (read at NOW), or may a standby
 * take it over? */
static int
lease_held(struct reconnect *r, const struct lease_rec *rec, double now)
{
	const struct ft_config *cfg = &r->c->cfg;

	return sup_watch_alive(&r->watch, rec, cfg->lease, now) ||
	       sup_standby_waiting(cfg->state_dir);
}

/* Has the lease REC been held by nobody for two lease periods?  (The
 * lease names the supervisor a standby replaces until it has; a takeover
 * under way is given that long to show.) */
static int
orphaned(struct reconnect *r, const struct lease_rec *rec, double now)
{
	if (lease_held(r, rec, now))
		r->orphan_since = 0;
	else if (r->orphan_since == 0)
		r->orphan_since = now;
	return r->orphan_since > 0 &&
	       now - r->orphan_since >= 2 * r->c->cfg.lease;
}

/* Give up on a cluster that is down: r->why says why (lease read as RC,
 * REC).  0. */
static int
give_up_down(struct reconnect *r, int rc, const struct lease_rec *rec)
{
	down_why(r->c->cfg.state_dir, rc, rec, r->why, sizeof(r->why));
	r->down = 1;
	return 0;
}

/* The cluster is down (lease read as RC, REC): 0 to give up, unless
 * --reconnect-timeout gave a bound: then read the lease until a
 * supervisor holds it again (1: call again) or the bound has passed
 * (0). */
static int
down_wait(struct reconnect *r, int rc, struct lease_rec *rec)
{
	double now = ft_now();

	if (r->c->reconnect < 0)
		return give_up_down(r, rc, rec);
	if (r->until == 0) {
		r->until = now + r->c->reconnect;
		fprintf(stderr, "ftfarm: cluster %s is down (%s); waiting up "
			"to %g s for it to start (%s)\n", r->c->cfg.name,
			down_why(r->c->cfg.state_dir, rc, rec, r->why,
				 sizeof(r->why)), r->c->reconnect, r->what);
	}
	while (now < r->until) {
		ft_sleep(fmin(DOWN_POLL, r->until - now));
		now = ft_now();
		rc = lease_read(&r->lease, rec);
		if (rc == 0 && rec->state == LEASE_ACTIVE &&
		    lease_held(r, rec, now)) {
			r->orphan_since = 0;
			r->pause = 0.05;
			return 1;
		}
	}
	return rc == -1 ? 0 : give_up_down(r, rc, rec);
}

/* The master is away: 1 after a pause when it is worth calling again (a
 * supervisor holds the lease, within the bound), 0 to give up (r->down
 * set when the cluster is down). */
static int
reconnect_wait(struct reconnect *r)
{
	const struct ft_config *cfg = &r->c->cfg;
	struct lease_rec rec;
	double now = ft_now(), bound = r->c->reconnect;
	int rc;

	if (!r->have_lease || (rc = lease_read(&r->lease, &rec)) == -1)
		return 0;
	if (down_lease(rc, &rec) || orphaned(r, &rec, now))
		return down_wait(r, rc, &rec);
	if (r->until == 0) {
		if (bound < 0)
			bound = cfg->lease + cfg->start_timeout +
				cfg->restart_backoff_max;
		r->until = now + bound;
		r->pause = 0.05;
		fprintf(stderr, "ftfarm: master restarting; waiting for it "
			"(%s)\n", r->what);
	}
	if (now >= r->until)
		return 0;
	ft_sleep(fmin(r->pause, r->until - now));
	r->pause = fmin(r->pause * 2, RETRY_MAX);
	return 1;
}

/* The cluster is down (R gave up on it): say why, and THEN. */
static void
say_down(struct cli *c, const struct reconnect *r, const char *then)
{
	cli_err("cluster %s is down (%s); %s; with --reconnect-timeout S "
		"this waits up to S seconds for its next start", c->cfg.name,
		r->why, then);
}

/* Does the master answer a status request? */
static int
master_alive(struct cli *c)
{
	json_t *req = ctl_request_new(CTL_STATUS), *ans;
	char err[256];

	ans = ctl_request(c->cfg.state_dir, req, PROBE_TIMEOUT, err,
			  sizeof(err));
	json_decref(req);
	json_decref(ans);
	return ans != NULL;
}

/* A random 128-bit token in hex into OUT (33 bytes). */
static void
new_token(char out[33])
{
	unsigned char b[16];
	size_t got = 0;
	int i;

	while (got < sizeof(b)) {
		ssize_t n = getrandom(b + got, sizeof(b) - got, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	if (got < sizeof(b)) {
		/* No entropy source: time and pid are unique enough here. */
		double t = ft_wall();

		memcpy(b, &t, sizeof(t));
		i = (int)getpid();
		memcpy(b + 8, &i, sizeof(i));
	}
	for (i = 0; i < 16; i++)
		snprintf(out + 2 * i, 3, "%02x", b[i]);
}

/* The ids of LIST ("3,4") as a JSON array into REQ's KEY.  0, or 2 after
 * saying what is wrong with OPTION. */
static int
add_ids(json_t *req, const char *key, const char *option, const char *list)
{
	json_t *ids = json_array();
	const char *p = list;

	while (*p) {
		char *end;
		long long id = strtoll(p, &end, 10);

		if (end == p || id < 1 || id > UINT32_MAX ||
		    (*end != ',' && *end != '\0')) {
			cli_err("--%s takes batch ids: ID[,ID...], not \"%s\"",
				option, list);
			json_decref(ids);
			return 2;
		}
		json_array_append_new(ids, json_integer(id));
		p = *end ? end + 1 : end;
	}
	json_object_set_new(req, key, ids);
	return 0;
}

/* --after and --after-any into REQ, a submit.  0, or 2 (said). */
static int
add_deps(const struct cli *c, json_t *req)
{
	if (c->after && add_ids(req, "after", "after", c->after) != 0)
		return 2;
	if (c->after_any && add_ids(req, "after_any", "after-any",
				    c->after_any) != 0)
		return 2;
	return 0;
}

/* Submit REQ (with LEN bytes of BODY; WHAT names it for messages) under
 * a token of its own: when the connection breaks before the answer, the
 * same bytes go again with the same token to the next master, which
 * answers with the batch id it already gave (or takes the batch).  The
 * answer, or NULL with c->status set (said). */
static json_t *
submit_call(struct cli *c, json_t *req, const struct ctl_body *body,
	    const char *what)
{
	struct reconnect r;
	char token[33], err[1024];
	json_t *ans = NULL;
	enum call_end end;
	int tries = 0;

	new_token(token);
	json_object_set_new(req, "token", json_string(token));
	reconnect_init(&r, c, what);
	while ((end = call_once(c, req, body, 600, &ans, err,
				sizeof(err))) == CALL_BROKEN) {
		tries++;
		if (reconnect_wait(&r))
			continue;
		/* Never connected: say why.  Cut off: say where the
		 * results are. */
		if (tries == 1 && r.down)
			say_down(c, &r, "nothing was submitted");
		else if (tries == 1 && strstr(err, "closed the connection") ==
			 NULL)
			cli_err("%s", err);
		else
			cli_err("the master stopped before it acknowledged %s; "
				"see `ftfarm status -c %s`", what, c->config);
		c->status = 1;
		break;
	}
	reconnect_free(&r);
	return end == CALL_OK ? ans : NULL;
}

/* A request that may go again as it is (it changes nothing): REQ sent
 * as cli_call sends it, and when the master is away, again to the next
 * one for as long as wait would wait (WHAT names it for the message).
 * The answer, or NULL with c->status set (said). */
json_t *
cli_call_across(struct cli *c, json_t *req, double timeout, const char *what)
{
	struct reconnect r;
	char err[1024];
	json_t *ans = NULL;

	reconnect_init(&r, c, what);
	while (call_once(c, req, NULL, timeout, &ans, err, sizeof(err)) ==
	       CALL_BROKEN)
		if (!reconnect_wait(&r)) {
			if (r.down)
				say_down(c, &r, "nothing was asked");
			else
				cli_err("%s", err);
			c->status = broken_status(r.down);
			break;
		}
	reconnect_free(&r);
	return ans;
}

/* ft_plugins.other_jobs: gang jobs, checked with the gang plugins
 * installed beside this program (the master refuses them under a static
 * world). */
static int
check_gang_job(void *ctx, const json_t *job, const char *path,
	       struct jerr *err)
{
	char *dir = gang_load_default_dir();
	int rc = gang_load_check(dir, job, path, NULL, NULL, err);

	(void)ctx;
	free(dir);
	return rc;
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
	pl.other_jobs = check_gang_job;
	rc = ft_batch_check(batch, &pl, jerr);
	ft_plugins_free(&pl);
	return rc;
}

/* Check the batch TEXT (LEN bytes, malloc'd: taken over) named NAME as
 * the master would, against c's config too, into BT (the caller's to
 * free).  0, or 2 after printing the error (1 when the task types cannot
 * be loaded), BT then empty. */
static int
check_text(const struct cli *c, const char *name, char *text, size_t len,
	   struct batch_text *bt)
{
	struct ft_plugins pl;
	char err[1024], *dir = ft_plugins_default_dir();
	int rc = ft_plugins_load(&pl, dir, err, sizeof(err));

	free(dir);
	memset(bt, 0, sizeof(*bt));
	if (rc == -1) {
		free(text);
		cli_err("%s", err);
		return 1;
	}
	pl.other_jobs = check_gang_job;
	if (batch_text_read(bt, name, text, len, &pl, 2, err,
			    sizeof(err)) == -1) {
		fprintf(stderr, "%s\n", err);
		rc = 2;
	} else if (batch_text_fit(bt, name, &c->cfg, err, sizeof(err)) == -1) {
		fprintf(stderr, "%s\n", err);
		batch_text_free(bt);
		rc = 2;
	}
	ft_plugins_free(&pl);
	return rc;
}

/* Check the batch file PATH here, as the master would.  0, or 2 after
 * printing one line "FILE:LINE:COL: KEY: MESSAGE" (or 1 when the task
 * types cannot be loaded).  *NTASKS: its tasks. */
static int
check_file(const struct cli *c, const char *path, uint32_t *ntasks)
{
	struct batch_text bt;
	char *text;
	size_t len;
	int rc;

	if ((text = ft_read_file(path, &len)) == NULL) {
		fprintf(stderr, "%s: cannot read: %s\n", path, strerror(errno));
		return 2;
	}
	if ((rc = check_text(c, path, text, len, &bt)) == 0) {
		*ntasks = bt.ntasks;
		batch_text_free(&bt);
	}
	return rc;
}

/* A line for each batch of BS whose wide task waits, and why. */
static void
print_waiting(const json_t *bs)
{
	const json_t *row;
	size_t i;

	json_array_foreach(bs, i, row)
		if (json_is_string(json_object_get(row, "waiting")))
			printf("batch %lld: %s\n",
			       (long long)json_integer_value(json_object_get(
				       row, "id")),
			       json_string_value(json_object_get(row,
								 "waiting")));
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

/* Wait for batch ID's answer, across restarts of the master.  The
 * answer, or NULL with c->status set (said). */
static json_t *
wait_call(struct cli *c, json_int_t id)
{
	struct reconnect r;
	char what[64], err[1024];
	json_t *req = ctl_request_new(CTL_WAIT), *ans = NULL;
	enum call_end end;
	double t0;
	int tries = 0;

	snprintf(what, sizeof(what), "batch %lld", (long long)id);
	json_object_set_new(req, "batch", json_integer(id));
	reconnect_init(&r, c, what);
	for (;;) {
		t0 = ft_now();
		end = call_once(c, req, NULL, WAIT_SLICE, &ans, err,
				sizeof(err));
		if (end != CALL_BROKEN)
			break;
		tries++;
		/* A long batch: is the master still there? */
		if (ft_now() - t0 >= WAIT_SLICE - 0.01 && master_alive(c)) {
			reconnect_ok(&r);
			continue;
		}
		if (reconnect_wait(&r))
			continue;
		/* Never connected: say why.  Cut off: say where the
		 * results are. */
		if (tries == 1 && strstr(err, "closed the connection") == NULL &&
		    !r.down)
			cli_err("%s", err);
		else if (tries > 1 || !r.down)
			cli_err("the master stopped before batch %lld finished; "
				"its results so far are in %s/batches/%lld",
				(long long)id, c->cfg.state_dir, (long long)id);
		c->status = broken_status(r.down);
		if (r.down) {
			snprintf(err, sizeof(err), "batch %lld goes on when it "
				 "starts again", (long long)id);
			say_down(c, &r, err);
		}
		break;
	}
	json_decref(req);
	reconnect_free(&r);
	return end == CALL_OK ? ans : NULL;
}

/* Wait for batch ID (a progress line on stderr when it is a terminal);
 * 0 if every task succeeded, 1 otherwise. */
static int
wait_batch(struct cli *c, json_int_t id)
{
	json_t *ans = NULL, *b;
	int rc, broken = 1;

	/* On a terminal, a progress line; once the connection breaks (a
	 * restart), the plain wait that reconnects. */
	if (isatty(STDERR_FILENO))
		ans = cli_wait_progress(c, id, &broken);
	if (ans == NULL && broken)
		ans = wait_call(c, id);
	if (ans == NULL)
		return c->status;	/* 1, or why no batch was waited for */
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

/* Submit BODY (the bytes of a batch called NAME, WHAT in messages) as
 * the bytes after a short request line, whatever its size: a line holds
 * no batch.  The answer, or NULL with c->status set (said). */
static json_t *
submit_body(struct cli *c, const struct ctl_body *body, const char *name,
	    const char *what)
{
	json_t *req = ctl_request_new(CTL_SUBMIT), *ans;

	json_object_set_new(req, "bytes", json_integer((json_int_t)body->len));
	json_object_set_new(req, "file", json_string(name));
	if (add_deps(c, req) != 0) {
		json_decref(req);
		c->status = 2;
		return NULL;
	}
	ans = submit_call(c, req, body, what);
	json_decref(req);
	return ans;
}

/* Submit the job batch BATCH (taken over): checked here, then sent as a
 * body. */
static int
cli_send_batch(struct cli *c, json_t *batch, int wait)
{
	struct ctl_body body = { .fd = -1 };
	char *text = json_dumps(batch, JSON_COMPACT);
	json_t *ans;

	json_decref(batch);
	if (text == NULL) {
		cli_err("out of memory");
		return 1;
	}
	body.data = text;
	body.len = strlen(text);
	ans = submit_body(c, &body, "<command line>", "the batch");
	free(text);
	return submitted(c, ans, wait);
}

/* submit -c CFG [OPTION...] -- COMMAND ARG...: the batch the command line
 * makes (cli_command_batch), checked here as a file would be, then sent
 * as a file's bytes are. */
static int
submit_command(struct cli *c)
{
	struct ft_buf text = { 0 };
	struct ctl_body body = { .fd = -1 };
	struct batch_text bt;
	json_t *ans;
	int rc = cli_command_batch(c, &text);

	if (rc != 0) {
		ft_buf_free(&text);
		return rc;
	}
	rc = check_text(c, "<command line>", text.data, text.len, &bt);
	if (rc != 0)
		return rc;
	body.data = bt.text;
	body.len = bt.len;
	ans = submit_body(c, &body, "<command line>", "the batch");
	batch_text_free(&bt);
	return submitted(c, ans, c->wait);
}

/* submit -c CFG BATCH.json [--wait]: the file's bytes go to the master,
 * which checks them (as `check` does here) and reads them once. */
int
cli_submit(struct cli *c)
{
	struct ctl_body body = { .fd = -1 };
	uint32_t ntasks;
	struct stat st;
	json_t *ans;

	if (c->cmdline)
		return submit_command(c);
	if (c->argc != 1) {
		cli_err("usage: ftfarm submit -c CFG BATCH.json [--wait]");
		return 2;
	}
	body.fd = open(c->argv[0], O_RDONLY | O_CLOEXEC);
	if (body.fd == -1 || fstat(body.fd, &st) == -1 ||
	    !S_ISREG(st.st_mode) || st.st_size == 0) {
		/* Not a file we can send: say why as `check` would. */
		if (body.fd != -1)
			close(body.fd);
		return check_file(c, c->argv[0], &ntasks);
	}
	body.len = (size_t)st.st_size;
	ans = submit_body(c, &body, c->argv[0], c->argv[0]);
	close(body.fd);
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
	return cli_send_batch(c, batch, 1);
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

/* An array of integers as "1,2,3" (at most N bytes into OUT). */
static void
join_ints(json_t *a, char *out, size_t n)
{
	size_t i, len = 0;
	json_t *v;

	out[0] = '\0';
	json_array_foreach(a, i, v)
		if (len < n)
			len += (size_t)snprintf(out + len, n - len, "%s%lld",
						i ? "," : "",
						(long long)json_integer_value(v));
}

/* One cell of column COL of ROW, as the column says. */
static void
print_cell(const struct ctl_col *col, json_t *row, int last)
{
	json_t *v = json_object_get(row, col->key);
	int w = last ? 0 : col->width;
	char buf[256];

	switch (col->type) {
	case JT_INT:
		printf("%*lld", w, (long long)json_integer_value(v));
		break;
	case JT_NUMBER:
		if (json_is_null(v))
			printf("%*s", w, "-");
		else
			printf("%*.3f", w, json_number_value(v));
		break;
	case JT_ARRAY:
		join_ints(v, buf, sizeof(buf));
		printf("%*s", w, buf);
		break;
	default:
		printf("%*s", w, json_is_string(v) ? json_string_value(v) :
				 json_is_null(v) ? "-" : "");
	}
	putchar(last ? '\n' : ' ');
}

void
cli_print_table(const struct ctl_col *cols, int n, json_t *rows)
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

/* A line when the state dir fails: no new task goes out meanwhile. */
static void
print_store(const json_t *st)
{
	const char *state = json_string_value(json_object_get(st, "state"));

	if (state == NULL || strcmp(state, "ok") == 0)
		return;
	printf("state dir %s: %s %s: %s (for %.0f s); no new tasks go out, "
	       "results are kept until it works again\n", state,
	       json_string_value(json_object_get(st, "op")),
	       json_string_value(json_object_get(st, "path")),
	       json_string_value(json_object_get(st, "error")),
	       ft_wall() - json_number_value(json_object_get(st, "since")));
}

/* PID (a number, or null while its process is not known yet) as text
 * in BUF: "-" for null. */
static const char *
pid_text(const json_t *pid, char *buf, size_t n)
{
	if (!json_is_integer(pid))
		return "-";
	snprintf(buf, n, "%lld", (long long)json_integer_value(pid));
	return buf;
}

/* One line per running gang: its task and each rank's pid, role, state. */
static void
print_gangs(const json_t *gangs)
{
	const json_t *g, *r;
	char pid[24];
	size_t i, j;

	json_array_foreach(gangs, i, g) {
		printf("\ngang: batch %lld task %lld attempt %lld (%s):",
		       (long long)json_integer_value(json_object_get(g, "batch")),
		       (long long)json_integer_value(json_object_get(g, "task")),
		       (long long)json_integer_value(json_object_get(g,
								   "attempt")),
		       json_string_value(json_object_get(g, "job")));
		json_array_foreach(json_object_get(g, "ranks"), j, r)
			printf(" %lld:%s/%s/%s",
			       (long long)json_integer_value(json_object_get(r,
								       "rank")),
			       pid_text(json_object_get(r, "pid"), pid,
					sizeof(pid)),
			       json_string_value(json_object_get(r, "role")),
			       json_string_value(json_object_get(r, "state")));
		putchar('\n');
	}
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
		print_store(json_object_get(ans, k[CTL_S_STORE]));
		putchar('\n');
		cli_print_table(ctl_worker_cols, CTL_W_NCOLS,
			    json_object_get(ans, k[CTL_S_WORKERS]));
		putchar('\n');
		cli_print_table(ctl_node_cols, CTL_N_NCOLS,
			    json_object_get(ans, k[CTL_S_NODES]));
		if (json_array_size(json_object_get(ans, k[CTL_S_BATCHES]))) {
			putchar('\n');
			cli_print_table(ctl_batch_cols, CTL_B_NCOLS,
				    json_object_get(ans, k[CTL_S_BATCHES]));
			print_waiting(json_object_get(ans, k[CTL_S_BATCHES]));
		}
		print_gangs(json_object_get(ans, k[CTL_S_GANGS]));
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
		int r = check_file(c, c->argv[i], &ntasks);

		if (r != 0)
			rc = r;
		else
			printf("%s: batch OK (%u tasks)\n", c->argv[i], ntasks);
	}
	if (rc == 0 && c->cfg.slurm && c->cfg.nnodes == 0)
		printf("%s: configuration OK (nodes: those of the Slurm "
		       "allocation it is started in)\n", c->config);
	else if (rc == 0 && c->cfg.no_nodes)
		printf("%s: configuration OK (no node of its own: nodes join "
		       "over TCP with `ftfarm join`)\n", c->config);
	else if (rc == 0)
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

/* commands: what the control socket's requests do (see commands.h). */
#include "commands.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "batch.h"
#include "control.h"
#include "ctl.h"
#include "farm.h"
#include "http.h"
#include "intake.h"
#include "log.h"
#include "subs.h"

/* A command handler: 0 with *ANS set, -1 with ERR set, or 1 when the
 * answer comes later (wait). */
typedef int (*cmd_fn)(struct master *m, struct client *c, json_t *req,
		      json_t **ans, char *err, size_t n);

/* ---- status ---- */

static json_t *
worker_row(const struct master *m, const struct worker *w)
{
	const struct ctl_col *c = ctl_worker_cols;
	json_t *o = json_object();

	ctl_row_int(o, &c[CTL_W_ID], w->id);
	ctl_row_str(o, &c[CTL_W_NODE], w->node_name);
	ctl_row_str(o, &c[CTL_W_HOST],
		    w->host[0] ? w->host : m->cfg.nodes[w->node].host);
	ctl_row_int(o, &c[CTL_W_PID], w->pid);
	ctl_row_str(o, &c[CTL_W_STATE], worker_state_name(w->state));
	ctl_row_int(o, &c[CTL_W_RESPAWNS], w->respawns);
	ctl_row_int(o, &c[CTL_W_DONE], (long long)w->tasks_done);
	ctl_row_int(o, &c[CTL_W_INFLIGHT], sched_inflight(m->sched, w->id));
	ctl_row_int(o, &c[CTL_W_START], (long long)w->start);
	return o;
}

static json_t *
node_row(const struct master *m, const struct node *nd)
{
	const struct ctl_col *c = ctl_node_cols;
	json_t *o = json_object();

	ctl_row_str(o, &c[CTL_N_NAME], nd->name);
	ctl_row_str(o, &c[CTL_N_HOST], m->cfg.nodes[nd->id].host);
	ctl_row_str(o, &c[CTL_N_STATE], node_state_name(nd->state));
	ctl_row_int(o, &c[CTL_N_REBOOTS], nd->reboots);
	ctl_row_int(o, &c[CTL_N_WORKERS], m->cfg.nodes[nd->id].workers);
	return o;
}

static json_t *
counters_json(const struct master *m)
{
	struct counters k = master_counters(m);
	json_t *o = json_object();

#define FT_COUNTER_SET(name, metric, help)			\
	json_object_set_new(o, #name, json_integer((json_int_t)k.name));
	FT_COUNTERS(FT_COUNTER_SET)
#undef FT_COUNTER_SET
	return o;
}

/* The rows of the batches in memory: every running one and, of the
 * finished ones, the last MAX_FINISHED (all if negative). */
static json_t *
batch_rows(const struct master *m, int max_finished)
{
	json_t *bs = json_array();
	int i, skip = 0;

	if (max_finished >= 0)
		skip = m->batches.nfinished - max_finished;
	for (i = 0; i < m->batches.n; i++) {
		const struct batch *b = m->batches.v[i];

		if (b == NULL || !batch_listed(b))
			continue;
		if (batch_finished(b) && skip-- > 0)
			continue;
		json_array_append_new(bs, batch_json(b));
	}
	return bs;
}

json_t *
commands_status(struct master *m, int max_finished)
{
	const char *const *k = ctl_status_keys;
	json_t *ws = json_array(), *ns = json_array(), *o = json_object();
	int i;

	for (i = 0; i < m->nworkers; i++)
		json_array_append_new(ws, worker_row(m, &m->workers[i]));
	for (i = 0; i < m->cfg.nnodes; i++)
		json_array_append_new(ns, node_row(m, &m->nodes[i]));
	json_object_set_new(o, k[CTL_S_CLUSTER], json_string(m->cfg.name));
	json_object_set_new(o, k[CTL_S_LAUNCH],
			    json_string(m->static_world ? "static" : "dynamic"));
	json_object_set_new(o, k[CTL_S_MPI], json_string(m->mpi_version));
	json_object_set_new(o, k[CTL_S_UPTIME],
			    json_real(ft_now() - m->started));
	json_object_set_new(o, k[CTL_S_QUEUED],
			    json_integer((json_int_t)sched_queued(m->sched)));
	json_object_set_new(o, k[CTL_S_OPEN],
			    json_integer((json_int_t)sched_open(m->sched)));
	json_object_set_new(o, k[CTL_S_WORKERS], ws);
	json_object_set_new(o, k[CTL_S_NODES], ns);
	json_object_set_new(o, k[CTL_S_BATCHES], batch_rows(m, max_finished));
	json_object_set_new(o, k[CTL_S_COUNTERS], counters_json(m));
	if (http_url(m->http))
		json_object_set_new(o, k[CTL_S_HTTP],
				    json_string(http_url(m->http)));
	return o;
}

/* status: the cluster, its workers, nodes and batches. */
static int
cmd_status(struct master *m, struct client *c, json_t *req, json_t **ans,
	   char *err, size_t n)
{
	json_t *st = commands_status(m, -1);

	(void)c, (void)req, (void)err, (void)n;
	*ans = json_pack("{s:b}", "ok", 1);
	json_object_update(*ans, st);
	json_decref(st);
	return 0;
}

/* subscribe {"events", "types", "since", "tail", "status", "batch"}: the
 * connection stays open for pushes (common/ctl.h). */
static int
cmd_subscribe(struct master *m, struct client *c, json_t *req, json_t **ans,
	      char *err, size_t n)
{
	return subs_subscribe(m->subs, c, req, ans, err, n);
}

/* ---- the other commands ---- */

/* The batch sent by client ID (ARG) was read: answer it. */
static void
submitted(struct master *m, void *arg, long id, const char *err, int status)
{
	struct client *c = control_client(m->control, (uint64_t)(uintptr_t)arg);
	json_t *ans;

	if (c == NULL)
		return;		/* gone meanwhile: the batch stands */
	if (id > 0)
		ans = json_pack("{s:b, s:I}", "ok", 1, "batch", (json_int_t)id);
	else
		ans = json_pack("{s:b, s:s, s:i}", "ok", 0, "error", err,
				"exit", status);
	control_send(c, ans);
	json_decref(ans);
	control_resume(c);
}

/* A batch file's bytes came: read them off the loop. */
static void
on_body(void *ctx, struct client *c, const char *file, char *data,
	size_t len)
{
	struct master *m = ctx;

	intake_submit(m, file, data, len, submitted,
		      (void *)(uintptr_t)control_client_id(c));
}

/* submit {"batch": {...}} | {"bytes": N, "file": NAME} and N bytes: queue
 * a batch, answer its id once it is read. */
static int
cmd_submit(struct master *m, struct client *c, json_t *req, json_t **ans,
	   char *err, size_t n)
{
	json_t *batch = json_object_get(req, "batch");
	json_t *bytes = json_object_get(req, "bytes");
	const char *file = json_string_value(json_object_get(req, "file"));
	char *text;

	(void)ans;
	if (m->stopping) {
		snprintf(err, n, "the master is stopping");
		return -1;
	}
	if ((batch == NULL) == (bytes == NULL)) {
		snprintf(err, n, "submit needs \"batch\" or \"bytes\"");
		return -1;
	}
	if (bytes) {
		json_int_t len = json_integer_value(bytes);

		if (len < 1 || (size_t)len > m->cfg.control.max_batch) {
			snprintf(err, n, "submit: the batch is %lld bytes; this "
				 "master takes 1 to %zu (control.max_batch_bytes)",
				 (long long)len, m->cfg.control.max_batch);
			return -1;
		}
		control_read_body(c, (size_t)len, file ? file : "batch",
				  on_body, m);
		return 1;
	}
	text = json_dumps(batch, JSON_COMPACT);
	if (text == NULL) {
		snprintf(err, n, "submit: cannot print the batch");
		return -1;
	}
	intake_submit(m, file ? file : "batch", text, strlen(text), submitted,
		      (void *)(uintptr_t)control_client_id(c));
	return 1;
}

/* wait {"batch": ID}: answer when the batch has finished. */
static int
cmd_wait(struct master *m, struct client *c, json_t *req, json_t **ans,
	 char *err, size_t n)
{
	long id = (long)json_integer_value(json_object_get(req, "batch"));
	int finished = 0;
	json_t *row = batches_lookup(&m->batches, id, &finished);

	if (row == NULL) {
		snprintf(err, n, "wait: no batch %ld", id);
		return -1;
	}
	if (finished) {
		*ans = json_pack("{s:b, s:o}", "ok", 1, "batch", row);
		return 0;
	}
	json_decref(row);
	control_set_waiting(c, id);
	return 1;
}

/* stop: stop the workers, then the master. */
static int
cmd_stop(struct master *m, struct client *c, json_t *req, json_t **ans,
	 char *err, size_t n)
{
	(void)c, (void)req, (void)err, (void)n;
	if (!m->stopping) {
		log_info("stop requested");
		m->stopping = 1;
		master_kick(m);
	}
	*ans = json_pack("{s:b}", "ok", 1);
	return 0;
}

/* log_level {"level": "debug"|"info"|"warn"} */
static int
cmd_log_level(struct master *m, struct client *c, json_t *req, json_t **ans,
	      char *err, size_t n)
{
	int level = log_level_parse(json_string_value(json_object_get(req,
								      "level")));

	(void)m, (void)c;
	if (level < 0) {
		snprintf(err, n, "log_level needs \"level\": debug, info or warn");
		return -1;
	}
	log_set_level((enum log_level)level);
	*ans = json_pack("{s:b}", "ok", 1);
	return 0;
}

/* rotate: master.log and events.jsonl to .1, and on in new files. */
static int
cmd_rotate(struct master *m, struct client *c, json_t *req, json_t **ans,
	   char *err, size_t n)
{
	(void)c, (void)req, (void)err, (void)n;
	farm_rotate(m, 0);
	*ans = json_pack("{s:b}", "ok", 1);
	return 0;
}

/* Indexed by enum ctl_cmd (common/ctl.h). */
static const cmd_fn handlers[CTL_NCMDS] = {
	[CTL_STATUS] = cmd_status,
	[CTL_SUBMIT] = cmd_submit,
	[CTL_WAIT] = cmd_wait,
	[CTL_STOP] = cmd_stop,
	[CTL_LOG_LEVEL] = cmd_log_level,
	[CTL_ROTATE] = cmd_rotate,
	[CTL_SUBSCRIBE] = cmd_subscribe,
};

/* May UID send commands of ROLE?  Reading is for everyone; submitting
 * runs code as the master's user, so it is for root, that user and the
 * config's submitters; the rest is for root and that user. */
static int
allowed(const struct master *m, uid_t uid, enum ctl_role role)
{
	int i;

	if (role == CTL_ROLE_READ || uid == 0 || uid == getuid())
		return 1;
	if (role != CTL_ROLE_SUBMIT)
		return 0;
	for (i = 0; i < m->cfg.control.nsubmitters; i++)
		if (m->cfg.control.submitters[i] == (unsigned)uid)
			return 1;
	return 0;
}

/* Refuse CMD to C's user: one line for the client, an event. */
static void
refused(struct master *m, struct client *c, const struct ctl_command *cmd)
{
	char msg[256];
	uid_t uid = control_peer_uid(c);

	snprintf(msg, sizeof(msg), "permission denied: %s is for %s; you are "
		 "uid %u", cmd->name, cmd->role == CTL_ROLE_SUBMIT ?
		 "root, the master's user and the config's control.submitters"
		 : "root and the master's user", (unsigned)uid);
	ev_request_refused(&m->events, uid, cmd->name);
	log_info("control: %s refused to uid %u", cmd->name, (unsigned)uid);
	control_error(c, msg);
}

/* Answer one request line. */
static void
on_request(void *ctx, struct client *c, const char *line, size_t len)
{
	struct master *m = ctx;
	const struct ctl_command *cmd;
	json_t *req = NULL, *ans = NULL;
	char err[512] = "";
	int rc;

	cmd = ctl_parse_request(line, len, &req, err, sizeof(err));
	if (cmd == NULL) {
		control_error(c, err);
		goto out;
	}
	if (!allowed(m, control_peer_uid(c), cmd->role)) {
		refused(m, c, cmd);
		goto out;
	}
	rc = handlers[cmd->cmd](m, c, req, &ans, err, sizeof(err));
	if (rc == -1)
		control_error(c, err);
	else if (rc == 0)
		control_send(c, ans);
	else
		control_hold(c);	/* answered later */
out:
	json_decref(ans);
	json_decref(req);
}

/* A client went: so does its subscription. */
static void
on_closed(void *ctx, struct client *c)
{
	struct master *m = ctx;

	subs_client_gone(m->subs, c);
}

/* Clients allowed at once: the config's, within the descriptors left
 * once the workers' connections, the files and a margin are counted (the
 * soft limit raised to the hard one first). */
static int
client_cap(const struct master *m)
{
	struct rlimit rl;
	long room;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
		getrlimit(RLIMIT_NOFILE, &rl);
	}
	room = (long)rl.rlim_cur - 4L * m->nworkers - 128;
	if (room < 4)
		room = 4;
	if (m->cfg.control.max_clients <= room)
		return m->cfg.control.max_clients;
	log_warnx("control: %d clients at most (descriptors: %ld), not %d",
		  (int)room, (long)rl.rlim_cur, m->cfg.control.max_clients);
	return (int)room;
}

int
commands_open(struct master *m, char *err, size_t n)
{
	struct control_ops ops = {
		.ctx = m, .request = on_request, .closed = on_closed,
	};
	const struct ft_control_cfg *cc = &m->cfg.control;
	struct control_limits lim = {
		.max_line = cc->max_request, .max_output = cc->max_output,
		.max_clients = client_cap(m),
		.max_per_uid = cc->max_clients_per_uid,
		.idle_timeout = cc->idle_timeout, .mode = cc->socket_mode,
		.group = cc->socket_group,
	};
	int rc;
	char *path = ctl_socket_path(m->cfg.state_dir);

	m->subs = subs_new(m);
	m->control = control_open(m->loop, path, &ops, &lim, err, n);
	free(path);
	if (m->control == NULL)
		return -1;
	rc = intake_init(m, err, n);
	return rc;
}

void
commands_tick(struct master *m, double now)
{
	control_tick(m->control, now);
}

void
commands_close(struct master *m)
{
	intake_free(m);
	control_close(m->control);
	m->control = NULL;
	subs_free(m->subs);
	m->subs = NULL;
}

struct done_arg {
	struct master *m;
	struct batch *b;
	json_t *ans;
};

static void
answer_waiter(struct client *c, void *arg)
{
	struct done_arg *d = arg;

	if (control_waiting(c) != batch_id(d->b))
		return;
	if (d->ans == NULL)
		d->ans = json_pack("{s:b, s:o}", "ok", 1, "batch",
				   batch_json(d->b));
	control_set_waiting(c, 0);
	control_send(c, d->ans);
	control_resume(c);
}

void
commands_batch_done(struct master *m, struct batch *b)
{
	struct done_arg d = { m, b, NULL };

	control_foreach(m->control, answer_waiter, &d);
	json_decref(d.ans);
}

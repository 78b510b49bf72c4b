/* commands: what the control socket's requests do (see commands.h). */
#include "commands.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "batch.h"
#include "control.h"
#include "ctl.h"
#include "gangs.h"
#include "health.h"
#include "http.h"
#include "intake.h"
#include "log.h"
#include "reaper.h"
#include "remote.h"
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

/* The slots of node ND's workers, as a JSON array. */
static json_t *
worker_ids(const struct master *m, const struct node *nd)
{
	json_t *a = json_array();
	int k;

	for (k = 0; k < m->nworkers; k++)
		if (m->workers[k].node == nd->id)
			json_array_append_new(a, json_integer(k));
	return a;
}

/* How node ND came ("via"), and a joined node's Slurm job and the time
 * it has left, into row O. */
static void
node_via(const struct master *m, const struct node *nd, json_t *o)
{
	const struct ctl_col *c = ctl_node_cols;
	const struct agent *a = &m->agents[nd->id];

	ctl_row_str(o, &c[CTL_N_VIA], a->tcp ? "tcp" : "mpi");
	if (a->tcp && a->alloc[0])
		ctl_row_str(o, &c[CTL_N_ALLOCATION], a->alloc);
	else
		json_object_set_new(o, c[CTL_N_ALLOCATION].key, json_null());
	if (a->tcp && a->alloc_end > 0)
		ctl_row_num(o, &c[CTL_N_TIME_LEFT],
			    fmax(0, a->alloc_end - ft_wall()));
	else
		json_object_set_new(o, c[CTL_N_TIME_LEFT].key, json_null());
}

static json_t *
node_row(const struct master *m, const struct node *nd)
{
	const struct ctl_col *c = ctl_node_cols;
	const struct ft_bmc *b = m->cfg.nodes[nd->id].bmc;
	json_t *o = json_object();
	char bmc[300] = "";

	if (b)
		snprintf(bmc, sizeof(bmc), "%s:%d", b->host, b->port);
	ctl_row_str(o, &c[CTL_N_NAME], nd->name);
	ctl_row_str(o, &c[CTL_N_HOST], m->cfg.nodes[nd->id].host);
	ctl_row_str(o, &c[CTL_N_STATE], node_state_name(nd->state));
	ctl_row_int(o, &c[CTL_N_REBOOTS], nd->reboots);
	ctl_row_int(o, &c[CTL_N_FAILURES], nd->strikes);
	json_object_set_new(o, c[CTL_N_WORKER_IDS].key, worker_ids(m, nd));
	ctl_row_int(o, &c[CTL_N_WORKERS], m->cfg.nodes[nd->id].workers);
	ctl_row_num(o, &c[CTL_N_SINCE], ft_now() - nd->since);
	ctl_row_num(o, &c[CTL_N_LAST_REBOOT], nd->last_reboot);
	ctl_row_str(o, &c[CTL_N_BMC], bmc);
	ctl_row_str(o, &c[CTL_N_AGENT],
		    agents_state_name(m->agents[nd->id].state));
	ctl_row_int(o, &c[CTL_N_AGENT_PID], m->agents[nd->id].pid);
	ctl_row_str(o, &c[CTL_N_AGENT_HOST], m->agents[nd->id].host);
	ctl_row_int(o, &c[CTL_N_AGENT_RESPAWNS], m->agents[nd->id].respawns);
	ctl_row_int(o, &c[CTL_N_MEM],
		    (long long)ft_node_mem(&m->cfg.nodes[nd->id], 0));
	ctl_row_int(o, &c[CTL_N_MEM_USED],
		    (long long)sched_mem_used(m->sched, nd->id) << 20);
	node_via(m, nd, o);
	ctl_row_str(o, &c[CTL_N_REASON], nd->reason);
	return o;
}

static json_t *
nodes_json(const struct master *m)
{
	json_t *ns = json_array();
	int i;

	for (i = 0; i < m->cfg.nnodes; i++)
		json_array_append_new(ns, node_row(m, &m->nodes[i]));
	return ns;
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

/* Why wide task W waits, in words, into BUF. */
static void
wait_text(const struct master *m, const struct sched_wait *w, char *buf,
	  size_t n)
{
	char need[96];
	size_t k;

	k = (size_t)snprintf(need, sizeof(need), "task %u needs %d cpus",
			     w->index, w->cpus);
	if (w->gpus)
		k += (size_t)snprintf(need + k, sizeof(need) - k, " and %d GPUs",
				      w->gpus);
	if (w->mem && k < sizeof(need))
		k += (size_t)snprintf(need + k, sizeof(need) - k, " and %u MiB",
				      w->mem);
	if (w->treq && k < sizeof(need))
		snprintf(need + k, sizeof(need) - k, " and %u s left on its "
			 "node", w->treq);
	if (w->why == SCHED_WAIT_RESERVED)
		snprintf(buf, n, "%s: node %s is kept for it until they are "
			 "free", need, m->cfg.nodes[w->node].name);
	else if (w->why == SCHED_WAIT_BUSY)
		snprintf(buf, n, "%s: every node that has them is busy or "
			 "kept for another task", need);
	else
		snprintf(buf, n, "%s: no node in service has them (drained, "
			 "inactive or down%s)", need,
			 ft_config_joinable(&m->cfg) ? ", or none has joined "
			 "yet" : "");
}

/* Each batch row of BS whose wide task heads its queue and waits gets
 * "waiting": why. */
static void
add_waiting(struct master *m, json_t *bs)
{
	struct sched_wait w[16];
	int n = sched_waiting(m->sched, w, 16), i;
	size_t k;
	json_t *row;
	char why[256];

	for (i = 0; i < n; i++) {
		json_array_foreach(bs, k, row) {
			if (json_integer_value(json_object_get(row, "id")) !=
			    (json_int_t)w[i].batch ||
			    json_object_get(row, "waiting"))
				continue;
			wait_text(m, &w[i], why, sizeof(why));
			json_object_set_new(row, "waiting", json_string(why));
		}
	}
}

json_t *
commands_status(struct master *m, int max_finished)
{
	const char *const *k = ctl_status_keys;
	json_t *ws = json_array(), *ns = nodes_json(m), *o = json_object();
	int i;

	for (i = 0; i < m->nworkers; i++)
		json_array_append_new(ws, worker_row(m, &m->workers[i]));
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
	add_waiting(m, json_object_get(o, k[CTL_S_BATCHES]));
	json_object_set_new(o, k[CTL_S_COUNTERS], counters_json(m));
	json_object_set_new(o, k[CTL_S_STORE], store_status(&m->store));
	json_object_set_new(o, k[CTL_S_EPOCH], json_integer((json_int_t)m->epoch));
	if (http_url(m->http))
		json_object_set_new(o, k[CTL_S_HTTP],
				    json_string(http_url(m->http)));
	json_object_set_new(o, k[CTL_S_GANGS], gangs_status());
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

/* What a submission whose bytes are still coming was sent with: its
 * token and dependencies, by client. */
struct pending {
	uint64_t client;
	char *token;			/* or NULL */
	json_t *deps;			/* or NULL */
};
static struct pending *pendings;
static int npendings;

static void
pending_put(uint64_t client, const char *token, json_t *deps)
{
	pendings = ft_realloc(pendings, (size_t)(npendings + 1) *
			      sizeof(*pendings));
	pendings[npendings].client = client;
	pendings[npendings].token = token ? ft_strdup(token) : NULL;
	pendings[npendings].deps = json_incref(deps);
	npendings++;
}

/* What client CLIENT sent with its batch (taken: the caller frees it);
 * all NULL when nothing. */
static struct pending
pending_take(uint64_t client)
{
	struct pending none = { client, NULL, NULL };
	int i;

	for (i = 0; i < npendings; i++)
		if (pendings[i].client == client) {
			struct pending p = pendings[i];

			pendings[i] = pendings[--npendings];
			return p;
		}
	return none;
}

/* Forget what clients gone before their bytes came sent. */
static void
tokens_sweep(struct master *m)
{
	int i;

	for (i = 0; i < npendings; i++)
		if (control_client(m->control, pendings[i].client) == NULL) {
			free(pendings[i].token);
			json_decref(pendings[i].deps);
			pendings[i--] = pendings[--npendings];
		}
}

/* A submission this master has seen (TOKEN, or NULL) gets the id it got
 * then: the client lost the first answer.  The answer, or NULL. */
static json_t *
again(struct master *m, const char *token)
{
	long id = batches_by_token(&m->batches, token);

	if (id <= 0)
		return NULL;
	log_info("a submission seen before (token %s): batch %ld", token, id);
	return json_pack("{s:b, s:I, s:b}", "ok", 1, "batch", (json_int_t)id,
			 "again", 1);
}

/* A batch file's bytes came: read them off the loop. */
static void
on_body(void *ctx, struct client *c, const char *file, char *data,
	size_t len)
{
	struct master *m = ctx;
	struct pending p = pending_take(control_client_id(c));
	json_t *ans = again(m, p.token);

	if (ans) {
		control_send(c, ans);
		json_decref(ans);
		free(data);
		control_resume(c);
	} else {
		intake_submit(m, file, data, len, p.token, p.deps, submitted,
			      (void *)(uintptr_t)control_client_id(c));
	}
	free(p.token);
	json_decref(p.deps);
}

/* The request's "after" and "after_any" as one object, or NULL when it
 * has neither; -1 in *BAD with ERR when one is not a list of ids. */
static json_t *
request_deps(json_t *req, int *bad, char *err, size_t n)
{
	struct jerr jerr;
	json_t *deps;

	*bad = 0;
	if (ft_check_ids(req, "submit", "after", 1, &jerr) == -1 ||
	    ft_check_ids(req, "submit", "after_any", 1, &jerr) == -1) {
		snprintf(err, n, "%s: %s", jerr.path, jerr.msg);
		*bad = 1;
		return NULL;
	}
	if (json_array_size(json_object_get(req, "after")) == 0 &&
	    json_array_size(json_object_get(req, "after_any")) == 0)
		return NULL;
	deps = json_object();
	if (json_object_get(req, "after"))
		json_object_set(deps, "after", json_object_get(req, "after"));
	if (json_object_get(req, "after_any"))
		json_object_set(deps, "after_any",
				json_object_get(req, "after_any"));
	return deps;
}

/* Is TOKEN a fit name for a submission (it is kept in a file)? */
static int
token_ok(const char *t)
{
	size_t i, len = strlen(t);

	if (len == 0 || len > 128)
		return 0;
	for (i = 0; i < len; i++)
		if (!isalnum((unsigned char)t[i]) && t[i] != '-' && t[i] != '_')
			return 0;
	return 1;
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
	const char *token = json_string_value(json_object_get(req, "token"));
	json_t *deps;
	char *text;
	int bad;

	if (m->stopping) {
		snprintf(err, n, "the master is stopping");
		return -1;
	}
	if (token && !token_ok(token)) {
		snprintf(err, n, "submit: \"token\" must be 1 to 128 letters, "
			 "digits, '-' or '_'");
		return -1;
	}
	if ((batch == NULL) == (bytes == NULL)) {
		snprintf(err, n, "submit needs \"batch\" or \"bytes\"");
		return -1;
	}
	deps = request_deps(req, &bad, err, n);
	if (bad)
		return -1;
	if (bytes) {
		json_int_t len = json_integer_value(bytes);

		if (len < 1 || (size_t)len > m->cfg.control.max_batch) {
			snprintf(err, n, "submit: the batch is %lld bytes; this "
				 "master takes 1 to %zu (control.max_batch_bytes)",
				 (long long)len, m->cfg.control.max_batch);
			json_decref(deps);
			*ans = json_pack("{s:b, s:s, s:i}", "ok", 0, "error", err,
					 "exit", 2);
			return 0;
		}
		if (token || deps)
			pending_put(control_client_id(c), token, deps);
		json_decref(deps);
		control_read_body(c, (size_t)len, file ? file : "batch",
				  on_body, m);
		return 1;
	}
	if ((*ans = again(m, token)) != NULL) {
		json_decref(deps);
		return 0;
	}
	text = json_dumps(batch, JSON_COMPACT);
	if (text == NULL) {
		snprintf(err, n, "submit: cannot print the batch");
		json_decref(deps);
		return -1;
	}
	intake_submit(m, file ? file : "batch", text, strlen(text), token,
		      deps, submitted, (void *)(uintptr_t)control_client_id(c));
	json_decref(deps);
	return 1;
}

/* The refusal for batch ID, which is not there (after PREFIX): no such
 * batch, or forgotten (its id was given; ids are never given again),
 * each with its exit status (ctl.h). */
static json_t *
no_batch(struct master *m, long id, const char *prefix)
{
	char err[256];
	int forgotten = batches_forgotten(&m->batches, id);

	if (forgotten)
		snprintf(err, sizeof(err), "%sbatch %ld was forgotten (retain_s, "
			 "or ftfarm forget): its results are gone", prefix, id);
	else
		snprintf(err, sizeof(err), "%sno batch %ld", prefix, id);
	return json_pack("{s:b, s:s, s:i}", "ok", 0, "error", err, "exit",
			 forgotten ? FT_EXIT_FORGOTTEN : FT_EXIT_NO_BATCH);
}

/* wait {"batch": ID}: answer when the batch has finished. */
static int
cmd_wait(struct master *m, struct client *c, json_t *req, json_t **ans,
	 char *err, size_t n)
{
	long id = (long)json_integer_value(json_object_get(req, "batch"));
	int finished = 0;
	json_t *row = batches_lookup(&m->batches, id, &finished);

	(void)err;
	(void)n;
	if (row == NULL) {
		*ans = no_batch(m, id, "wait: ");
		return 0;
	}
	if (finished) {
		*ans = json_pack("{s:b, s:o}", "ok", 1, "batch", row);
		return 0;
	}
	json_decref(row);
	control_set_waiting(c, id);
	return 1;
}

/* batch {"batch": ID}: its row, running or finished. */
static int
cmd_batch(struct master *m, struct client *c, json_t *req, json_t **ans,
	  char *err, size_t n)
{
	long id = (long)json_integer_value(json_object_get(req, "batch"));
	int finished = 0;
	json_t *row = batches_lookup(&m->batches, id, &finished);

	(void)c;
	(void)err;
	(void)n;
	if (row == NULL) {
		*ans = no_batch(m, id, "");
		return 0;
	}
	*ans = json_pack("{s:b, s:o}", "ok", 1, "batch", row);
	return 0;
}

/* forget {"batch": ID}: an ended batch out of memory, status and the
 * state dir now, rather than retain_s after it ended. */
static int
cmd_forget(struct master *m, struct client *c, json_t *req, json_t **ans,
	   char *err, size_t n)
{
	long id = (long)json_integer_value(json_object_get(req, "batch"));

	(void)c;
	if (batches_forget(&m->batches, id, err, n) == -1)
		return -1;
	*ans = json_pack("{s:b, s:I}", "ok", 1, "batch", (json_int_t)id);
	return 0;
}

/* stop: stop the workers, then the master. */
static int
cmd_stop(struct master *m, struct client *c, json_t *req, json_t **ans,
	 char *err, size_t n)
{
	(void)req, (void)err, (void)n;
	if (!m->stopping) {
		log_info("stop requested");
		alloc_stop(m);		/* the farm's allocations go too */
		snprintf(m->stop_reason, sizeof(m->stop_reason),
			 "stop requested by uid %u",
			 (unsigned)control_peer_uid(c));
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

/* ---- nodes ---- */

/* nodes: every node, its state, reboots, failures, workers and reason. */
static int
cmd_nodes(struct master *m, struct client *c, json_t *req, json_t **ans,
	  char *err, size_t n)
{
	(void)c, (void)req, (void)err, (void)n;
	*ans = json_pack("{s:b, s:o}", "ok", 1, "nodes", nodes_json(m));
	return 0;
}

/* The node named by REQ's "node", or NULL with ERR. */
static struct node *
req_node(struct master *m, json_t *req, char *err, size_t n)
{
	const char *name = json_string_value(json_object_get(req, "node"));
	struct node *nd = health_node(m, name);

	if (nd == NULL)
		snprintf(err, n, "no node \"%s\" in the config%s", name,
			 ft_config_joinable(&m->cfg) ? " nor among the nodes "
			 "that joined" : "");
	return nd;
}

/* A drain or undrain waiting for the nodes' state that holds it to be on
 * disk. */
struct save_wait {
	uint64_t client;
	uint64_t gen;			/* the generation to wait for */
	int node;
	struct save_wait *next;
};

static struct save_wait *saves;

/* Answer C's request about ND now if the nodes' state is on disk, else
 * once it is.  As a command handler returns. */
static int
answer_saved(struct master *m, struct client *c, struct node *nd,
	     json_t **ans)
{
	uint64_t gen = health_unsaved(m);
	struct save_wait *w;

	if (gen == 0) {
		*ans = json_pack("{s:b, s:o}", "ok", 1, "node",
				 node_row(m, nd));
		return 0;
	}
	w = ft_calloc(1, sizeof(*w));
	w->client = control_client_id(c);
	w->gen = gen;
	w->node = nd->id;
	w->next = saves;
	saves = w;
	return 1;
}

/* W's state is on disk (ERR 0), or could not be written (ERR). */
static void
answer_save(struct master *m, const struct save_wait *w, int err)
{
	struct client *c = control_client(m->control, w->client);
	const struct node *nd = &m->nodes[w->node];
	char why[512];
	json_t *ans;

	if (c == NULL)
		return;		/* gone meanwhile */
	if (err) {
		snprintf(why, sizeof(why), "node %s is %s, but the state dir "
			 "did not take its record (%s/nodes.state: %s); it "
			 "is written once the state dir takes writes again",
			 nd->name, node_state_name(nd->state),
			 m->cfg.state_dir, strerror(err));
		ans = json_pack("{s:b, s:s, s:o}", "ok", 0, "error", why,
				"node", node_row(m, nd));
	} else {
		ans = json_pack("{s:b, s:o}", "ok", 1, "node",
				node_row(m, nd));
	}
	control_send(c, ans);
	json_decref(ans);
	control_resume(c);
}

void
commands_state_saved(struct master *m, uint64_t gen, int err)
{
	struct save_wait **p = &saves, *w;

	while ((w = *p) != NULL) {
		if (w->gen > gen) {
			p = &w->next;
			continue;
		}
		*p = w->next;
		answer_save(m, w, err);
		free(w);
	}
}

/* drain {"node": NAME}: no new tasks for it; its running ones finish.
 * Answered once the drain is on disk. */
static int
cmd_drain(struct master *m, struct client *c, json_t *req, json_t **ans,
	  char *err, size_t n)
{
	struct node *nd = req_node(m, req, err, n);

	if (nd == NULL || health_drain(m, nd, err, n) == -1)
		return -1;
	return answer_saved(m, c, nd, ans);
}

/* undrain {"node": NAME}: back in service (an inactive node is probed).
 * Answered once the change is on disk. */
static int
cmd_undrain(struct master *m, struct client *c, json_t *req, json_t **ans,
	    char *err, size_t n)
{
	struct node *nd = req_node(m, req, err, n);

	if (nd == NULL || health_undrain(m, nd, err, n) == -1)
		return -1;
	return answer_saved(m, c, nd, ans);
}

/* leave {"node": NAME, "grace": S}: a joined node leaves; its running
 * tasks go on for S seconds (0 by default), then are interrupted and
 * given back.  Answered at once (the node is leaving). */
static int
cmd_leave(struct master *m, struct client *c, json_t *req, json_t **ans,
	  char *err, size_t n)
{
	struct node *nd = req_node(m, req, err, n);
	json_t *g = json_object_get(req, "grace");
	double grace = g ? json_number_value(g) : 0;

	(void)c;
	if (nd == NULL)
		return -1;
	if (!(grace >= 0 && grace <= 1e7)) {
		snprintf(err, n, "grace: seconds, 0 to 1e7");
		return -1;
	}
	if (health_leave(m, nd, grace, err, n) == -1)
		return -1;
	*ans = json_pack("{s:b, s:o}", "ok", 1, "node", node_row(m, nd));
	return 0;
}

/* alloc: the allocation queues and their allocations. */
static int
cmd_alloc(struct master *m, struct client *c, json_t *req, json_t **ans,
	  char *err, size_t n)
{
	(void)c, (void)req, (void)err, (void)n;
	*ans = alloc_json(m);
	json_object_set_new(*ans, "ok", json_true());
	return 0;
}

/* alloc_set {"queue": Q, "paused": B}: pause a queue, or resume it (a
 * dry run first: it pauses again with Slurm's words if that fails). */
static int
cmd_alloc_set(struct master *m, struct client *c, json_t *req, json_t **ans,
	      char *err, size_t n)
{
	const char *q = json_string_value(json_object_get(req, "queue"));

	(void)c;
	if (alloc_set(m, q, json_is_true(json_object_get(req, "paused")), err,
		      n) == -1)
		return -1;
	*ans = alloc_json(m);
	json_object_set_new(*ans, "ok", json_true());
	return 0;
}

/* A reboot request waiting for its nodes to end their reboots. */
struct reboot_wait {
	uint64_t client;
	char *want;			/* per node: its end is awaited */
	int nwant;			/* the nodes when it was asked */
	int pending;
	char error[512];		/* the first failure */
	struct reboot_wait *next;
};

static struct reboot_wait *waits;

static void
wait_free(struct reboot_wait *w)
{
	free(w->want);
	free(w);
}

/* Every node of W has ended its reboot: answer W's client. */
static void
answer_reboot(struct master *m, struct reboot_wait *w)
{
	struct client *c = control_client(m->control, w->client);
	json_t *ns = json_array(), *ans;
	int i;

	if (c == NULL) {
		json_decref(ns);
		return;		/* gone meanwhile */
	}
	for (i = 0; i < w->nwant; i++)
		if (w->want[i] == 2)
			json_array_append_new(ns, node_row(m, &m->nodes[i]));
	if (w->error[0])
		ans = json_pack("{s:b, s:s, s:o}", "ok", 0, "error", w->error,
				"nodes", ns);
	else
		ans = json_pack("{s:b, s:o}", "ok", 1, "nodes", ns);
	control_send(c, ans);
	json_decref(ans);
	control_resume(c);
}

void
commands_reboot_ended(struct master *m, struct node *nd, int ok,
		      const char *why)
{
	struct reboot_wait **p = &waits, *w;

	while ((w = *p) != NULL) {
		if (nd->id < w->nwant && w->want[nd->id] == 1) {
			w->want[nd->id] = 2;
			w->pending--;
			if (!ok && w->error[0] == '\0')
				snprintf(w->error, sizeof(w->error), "%s: %s",
					 nd->name, why);
		}
		if (w->pending > 0) {
			p = &w->next;
			continue;
		}
		*p = w->next;
		answer_reboot(m, w);
		wait_free(w);
	}
}

/* The nodes REQ's "node" names ("all": every one) into WANT; each must be
 * one that can be rebooted.  Their count, or -1 with ERR. */
static int
reboot_targets(struct master *m, json_t *req, char *want, char *err,
	       size_t n)
{
	const char *name = json_string_value(json_object_get(req, "node"));
	int i, count = 0, all = strcmp(name, "all") == 0;

	if (*name == '\0') {
		snprintf(err, n, "reboot needs a node's name, or \"all\"");
		return -1;
	}
	for (i = 0; i < m->cfg.nnodes; i++) {
		if (!all && strcmp(m->nodes[i].name, name) != 0)
			continue;
		if (health_can_reboot(m, &m->nodes[i], err, n) == -1)
			return -1;
		want[i] = 1;
		count++;
	}
	if (count == 0)
		snprintf(err, n, "no node \"%s\" in the config", name);
	return count ? count : -1;
}

/* reboot {"node": NAME | "all", "force": BOOL}: drain (unless forced),
 * power-cycle, bring the workers back; answer once every node named is
 * back, or has failed. */
static int
cmd_reboot(struct master *m, struct client *c, json_t *req, json_t **ans,
	   char *err, size_t n)
{
	struct reboot_wait *w = ft_calloc(1, sizeof(*w));
	int force = json_is_true(json_object_get(req, "force")), i;
	char *targets;

	(void)ans;
	w->want = ft_calloc((size_t)m->cfg.nnodes + 1, 1);
	w->nwant = m->cfg.nnodes;
	w->client = control_client_id(c);
	w->pending = reboot_targets(m, req, w->want, err, n);
	if (m->stopping || w->pending < 0) {
		if (m->stopping)
			snprintf(err, n, "the master is stopping");
		wait_free(w);
		return -1;
	}
	w->next = waits;
	waits = w;
	/* W may be answered (and freed) inside the loop: go by a copy. */
	targets = ft_malloc((size_t)m->cfg.nnodes + 1);
	memcpy(targets, w->want, (size_t)m->cfg.nnodes);
	for (i = 0; i < w->nwant; i++)
		if (targets[i] && health_reboot(m, &m->nodes[i], force, err,
						n) == -1)
			commands_reboot_ended(m, &m->nodes[i], 0, err);
	free(targets);
	return 1;
}

/* cancel {"batch": ID}: drop its queued tasks, kill its running ones. */
static int
cmd_cancel(struct master *m, struct client *c, json_t *req, json_t **ans,
	   char *err, size_t n)
{
	long id = (long)json_integer_value(json_object_get(req, "batch"));
	uint64_t queued, running;

	(void)c;
	if (batches_cancel(&m->batches, id, &queued, &running, err, n) == -1)
		return -1;
	*ans = json_pack("{s:b, s:I, s:I, s:I}", "ok", 1, "batch",
			 (json_int_t)id, "queued", (json_int_t)queued,
			 "running", (json_int_t)running);
	return 0;
}

/* ---- open batches: add, close ---- */

/* An add whose answer waits for its record to be durable. */
struct add_wait {
	uint64_t client;
	long batch;
	uint64_t lines;
	json_t *ans;
	struct add_wait *next;
};

static struct add_wait *add_waits, **add_waits_tail = &add_waits;

/* Answer the adds whose records are durable, in order (the answers of
 * one client keep its requests' order: its lines wait meanwhile). */
void
commands_adds_durable(struct master *m)
{
	struct add_wait *w;

	while ((w = add_waits) != NULL &&
	       batches_add_done(&m->batches, w->batch, w->lines)) {
		struct client *c = control_client(m->control, w->client);

		add_waits = w->next;
		if (add_waits == NULL)
			add_waits_tail = &add_waits;
		if (c) {
			control_send(c, w->ans);
			control_resume(c);
		}
		json_decref(w->ans);
		free(w);
	}
}

/* An add's body came (ARG: its batch << 32 | first). */
static void
on_add_body(void *ctx, struct client *c, const char *file, char *data,
	    size_t len)
{
	struct master *m = ctx;
	struct batches_added out;
	long id = control_body_tag(c) >> 32;
	uint32_t first = (uint32_t)control_body_tag(c);
	struct add_wait *w;
	char err[1024];

	(void)file;
	if (batches_add(&m->batches, id, first, data, len, &out, err,
			sizeof(err)) == -1) {
		json_t *ans = json_pack("{s:b, s:s, s:i}", "ok", 0, "error", err,
					"exit", out.status);

		control_send(c, ans);
		json_decref(ans);
		control_resume(c);
		return;
	}
	w = ft_calloc(1, sizeof(*w));
	w->client = control_client_id(c);
	w->batch = id;
	w->lines = out.lines;
	w->ans = json_pack("{s:b, s:I, s:I, s:I}", "ok", 1, "batch",
			   (json_int_t)id, "added", (json_int_t)out.added,
			   "total", (json_int_t)out.total);
	*add_waits_tail = w;
	add_waits_tail = &w->next;
	commands_adds_durable(m);
}

/* add {"batch": ID, "first": I, "bytes": N} and N bytes: more tasks for
 * an open batch, answered once their record is durable. */
static int
cmd_add(struct master *m, struct client *c, json_t *req, json_t **ans,
	char *err, size_t n)
{
	json_int_t id = json_integer_value(json_object_get(req, "batch"));
	json_int_t first = json_integer_value(json_object_get(req, "first"));
	json_int_t len = json_integer_value(json_object_get(req, "bytes"));

	(void)ans;
	if (m->stopping) {
		snprintf(err, n, "the master is stopping");
		return -1;
	}
	if (id <= 0 || id > UINT32_MAX || first < 0 || first > UINT32_MAX) {
		snprintf(err, n, "add: \"batch\" and \"first\" must be a "
			 "batch id and a task index");
		return -1;
	}
	if (len < 1 || (size_t)len > m->cfg.control.max_batch) {
		snprintf(err, n, "add: the tasks are %lld bytes; this master "
			 "takes 1 to %zu (control.max_batch_bytes)",
			 (long long)len, m->cfg.control.max_batch);
		return -1;
	}
	control_read_body_tagged(c, (size_t)len, "add", on_add_body, m,
				 (uint64_t)id << 32 | (uint64_t)first);
	return 1;
}

/* close {"batch": ID}: the open batch takes no more tasks. */
static int
cmd_close(struct master *m, struct client *c, json_t *req, json_t **ans,
	  char *err, size_t n)
{
	long id = (long)json_integer_value(json_object_get(req, "batch"));
	uint32_t total;

	(void)c;
	if (batches_seal(&m->batches, id, &total, err, n) == -1)
		return -1;
	*ans = json_pack("{s:b, s:I, s:I}", "ok", 1, "batch", (json_int_t)id,
			 "total", (json_int_t)total);
	return 0;
}

/* The log NAME of the state dir that other processes write (the
 * launcher's, the supervisors'): rotated past log_max_bytes, or at once
 * unless ONLY_BIG, by copying and cutting it (util.h). */
static void
rotate_shared(struct master *m, const char *name, int only_big)
{
	char *path = ft_asprintf("%s/%s", m->cfg.state_dir, name);
	struct stat st;

	if (lstat(path, &st) == 0 && S_ISREG(st.st_mode) &&
	    (!only_big || (size_t)st.st_size > m->cfg.log_max_bytes) &&
	    store_check_lease(&m->store, 0) == 0) {
		if (ft_rotate_shared(path, m->cfg.log_keep) == -1)
			log_warn("rotating %s", path);
		else
			log_info("rotated %s (%d kept)", name, m->cfg.log_keep);
	}
	free(path);
}

void
commands_rotate(struct master *m, int only_big)
{
	size_t max = m->cfg.log_max_bytes;
	int keep = m->cfg.log_keep;

	if (!only_big || (size_t)log_size() > max) {
		log_info("rotating master.log (%d kept)", keep);
		if (log_rotate(keep) == -1)
			log_warn("rotating master.log");
	}
	if (!only_big || (size_t)events_size(&m->events) > max) {
		if (events_rotate(&m->events, keep) == -1)
			log_warn("rotating events.jsonl");
		else
			log_info("rotated events.jsonl (%d kept)", keep);
	}
	rotate_shared(m, "mpirun.log", only_big);
	rotate_shared(m, "supervisor.log", only_big);
}

/* rotate: master.log and events.jsonl to .1, and on in new files. */
static int
cmd_rotate(struct master *m, struct client *c, json_t *req, json_t **ans,
	   char *err, size_t n)
{
	(void)c, (void)req, (void)err, (void)n;
	commands_rotate(m, 0);
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
	[CTL_NODES] = cmd_nodes,
	[CTL_DRAIN] = cmd_drain,
	[CTL_UNDRAIN] = cmd_undrain,
	[CTL_REBOOT] = cmd_reboot,
	[CTL_CANCEL] = cmd_cancel,
	[CTL_SUBSCRIBE] = cmd_subscribe,
	[CTL_ADD] = cmd_add,
	[CTL_CLOSE] = cmd_close,
	[CTL_BATCH] = cmd_batch,
	[CTL_FORGET] = cmd_forget,
	[CTL_LEAVE] = cmd_leave,
	[CTL_ALLOC] = cmd_alloc,
	[CTL_ALLOC_SET] = cmd_alloc_set,
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

/* Answer one request line.  A request that announced a body ("bytes")
 * and is not reading it is the connection's last: the bytes that follow
 * it cannot be told from request lines. */
static void
on_request(void *ctx, struct client *c, const char *line, size_t len)
{
	struct master *m = ctx;
	const struct ctl_command *cmd;
	json_t *req = NULL, *ans = NULL;
	char err[512] = "";
	int rc = -1;

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
	if (rc != 1 && json_is_object(req) && json_object_get(req, "bytes"))
		control_end(c);
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

void
commands_init(struct master *m)
{
	m->subs = subs_new(m);
	m->up.status = commands_status;
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

	if (m->subs == NULL)
		commands_init(m);
	remote_unpublish(m->cfg.state_dir);
	m->control = control_open(m->loop, path, &ops, &lim, err, n);
	free(path);
	if (m->control == NULL)
		return -1;
	if (cc->listen_host &&
	    (m->remote = remote_open(m->loop, m->control, &m->cfg, err,
				     n)) == NULL)
		return -1;
	rc = intake_init(m, err, n);
	if (rc == 0)
		rc = reaper_start(m, err, n);
	return rc;
}

void
commands_tick(struct master *m, double now)
{
	control_tick(m->control, now);
	tokens_sweep(m);
}

void
commands_close(struct master *m)
{
	subs_stopping(m->subs);
	while (add_waits) {
		struct add_wait *w = add_waits;

		add_waits = w->next;
		json_decref(w->ans);
		free(w);
	}
	add_waits_tail = &add_waits;
	while (waits) {
		struct reboot_wait *w = waits;

		waits = w->next;
		wait_free(w);
	}
	while (saves) {
		struct save_wait *w = saves;

		saves = w->next;
		free(w);
	}
	intake_free(m);
	reaper_stop(m);
	remote_close(m->remote);
	m->remote = NULL;
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

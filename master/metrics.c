/* metrics: the master's figures for /metrics (see metrics.h). */
#include "metrics.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "batches.h"
#include "control.h"
#include "expo.h"
#include "master.h"

#define P "ftfarm_"

/* ---- the master ---- */

static void
master_part(struct master *m, struct ft_buf *b)
{
	struct expo_label info[] = {
		{ "cluster", m->cfg.name },
		{ "launch", m->static_world ? "static" : "dynamic" },
		{ "mpi", m->mpi_version },
	};

	expo_family(b, P "info", "gauge", "The cluster's name, launch mode "
		    "and MPI (always 1)");
	expo_sample(b, P "info", info, 3, 1);
	expo_single(b, P "uptime_seconds", "gauge",
		    "Seconds since the master started",
		    ft_now() - m->started);
	expo_single(b, P "tasks_queued", "gauge",
		    "Tasks waiting for a worker",
		    (double)sched_queued(m->sched));
	expo_single(b, P "tasks_open", "gauge",
		    "Tasks neither done nor failed yet",
		    (double)sched_open(m->sched));
}

/* The master's counters (master.h). */
static void
counters_part(struct master *m, struct ft_buf *b)
{
	struct counters k = master_counters(m);

#define METRICS_COUNTER(name, metric, help)				\
	expo_single(b, P metric "_total", "counter", help, (double)k.name);
	FT_COUNTERS(METRICS_COUNTER)
#undef METRICS_COUNTER
}

/* ---- tasks by type ---- */

/* The name of task type K, or NULL when it has no slot of its own. */
static const char *
type_name(const struct master *m, int k)
{
	if (k < m->plugins.n && k < STATS_OTHER)
		return m->plugins.v[k]->name;
	return k == STATS_OTHER ? "other" : NULL;
}

/* One counter family over every type: FIELD's offset in type_stats. */
static void
type_counter(struct master *m, struct ft_buf *b, const char *name,
	     const char *help, size_t field)
{
	struct expo_label l = { "type", NULL };
	int k;

	expo_family(b, name, "counter", help);
	for (k = 0; k < STATS_MAX_TYPES; k++)
		if ((l.value = type_name(m, k)) != NULL)
			expo_sample(b, name, &l, 1, (double)*(uint64_t *)
				    ((char *)&m->stats.types[k] + field));
}

static void
types_part(struct master *m, struct ft_buf *b)
{
	struct expo_label l = { "type", NULL };
	int k;

	type_counter(m, b, P "tasks_submitted_total", "Tasks queued, by type",
		     offsetof(struct type_stats, submitted));
	type_counter(m, b, P "tasks_done_total", "Tasks ended ok, by type",
		     offsetof(struct type_stats, done));
	type_counter(m, b, P "tasks_failed_total", "Tasks ended failed, by "
		     "type", offsetof(struct type_stats, failed));
	type_counter(m, b, P "tasks_reassigned_total", "Task instances lost "
		     "and queued again, by type",
		     offsetof(struct type_stats, reassigned));
	expo_family(b, P "task_run_seconds", "histogram",
		    "Seconds tasks ran on their workers, by type");
	for (k = 0; k < STATS_MAX_TYPES; k++)
		if ((l.value = type_name(m, k)) != NULL)
			expo_histogram(b, P "task_run_seconds", &l, 1,
				       &m->stats.types[k].run);
}

/* ---- batches ---- */

/* The per-batch families, in the order of struct batch_vals.v. */
static const struct { const char *name, *type, *help; } batch_fams[] = {
	{ P "batch_tasks", "gauge", "Tasks of the batch so far" },
	{ P "batch_tasks_done_total", "counter", "Tasks of the batch ended "
	  "ok" },
	{ P "batch_tasks_failed_total", "counter", "Tasks of the batch ended "
	  "failed" },
	{ P "batch_tasks_reassigned_total", "counter", "Task instances of "
	  "the batch lost and queued again" },
	{ P "batch_running", "gauge", "1 while the batch runs" },
	{ P "batch_elapsed_seconds", "gauge", "Seconds the batch has run (its "
	  "duration once finished)" },
};
#define NBATCH_FAMS FT_ARRAY_LEN(batch_fams)

/* One batch's figures, from its status row. */
struct batch_vals {
	char id[24];
	json_t *row;			/* its name and job */
	double v[NBATCH_FAMS];
};

static void
batch_vals(const struct batch *bt, struct batch_vals *bv)
{
	json_t *row = batch_json(bt);

	snprintf(bv->id, sizeof(bv->id), "%ld", batch_id(bt));
	bv->row = row;
	bv->v[0] = batch_total(bt);
	bv->v[1] = (double)json_integer_value(json_object_get(row, "ok"));
	bv->v[2] = (double)json_integer_value(json_object_get(row, "failed"));
	bv->v[3] = (double)json_integer_value(json_object_get(row,
							      "reassigned"));
	bv->v[4] = !batch_finished(bt);
	bv->v[5] = json_number_value(json_object_get(row, "seconds"));
}

/* The figures of the batches shown: every running one and the latest
 * finished ones.  Their count; *BV a new array. */
static int
shown_batches(const struct master *m, struct batch_vals **bv)
{
	int i, n = 0, skip = m->batches.nfinished - METRICS_RECENT_BATCHES;

	*bv = ft_calloc((size_t)m->batches.n + 1, sizeof(**bv));
	for (i = 0; i < m->batches.n; i++) {
		const struct batch *bt = m->batches.v[i];

		if (bt == NULL || !batch_listed(bt))
			continue;
		if (batch_finished(bt) && skip-- > 0)
			continue;
		batch_vals(bt, &(*bv)[n++]);
	}
	return n;
}

static void
batches_part(struct master *m, struct ft_buf *b)
{
	struct expo_label l[3] = {
		{ "batch", NULL }, { "name", NULL }, { "job", NULL },
	};
	struct batch_vals *bv;
	int n = shown_batches(m, &bv), i;
	size_t f;

	expo_single(b, P "batches_submitted_total", "counter",
		    "Batches accepted",
		    (double)m->stats.batches_submitted);
	expo_single(b, P "batches_finished_total", "counter",
		    "Batches finished",
		    (double)m->stats.batches_finished);
	expo_family(b, P "batch_info", "gauge", "A batch's name and job type "
		    "(always 1)");
	for (i = 0; i < n; i++) {
		l[0].value = bv[i].id;
		l[1].value = json_string_value(json_object_get(bv[i].row,
							       "name"));
		l[2].value = json_string_value(json_object_get(bv[i].row,
							       "job"));
		expo_sample(b, P "batch_info", l, 3, 1);
	}
	for (f = 0; f < NBATCH_FAMS; f++) {
		expo_family(b, batch_fams[f].name, batch_fams[f].type,
			    batch_fams[f].help);
		for (i = 0; i < n; i++) {
			l[0].value = bv[i].id;
			expo_sample(b, batch_fams[f].name, l, 1, bv[i].v[f]);
		}
	}
	for (i = 0; i < n; i++)
		json_decref(bv[i].row);
	free(bv);
}

/* ---- workers and nodes ---- */

static void
workers_part(struct master *m, struct ft_buf *b)
{
	struct expo_label l = { "state", NULL };
	int count[W_NSTATES] = { 0 }, i;

	for (i = 0; i < m->nworkers; i++)
		count[m->workers[i].state]++;
	expo_family(b, P "workers", "gauge", "Worker slots, by state");
	for (i = 0; i < W_NSTATES; i++) {
		l.value = worker_state_name((enum wstate)i);
		expo_sample(b, P "workers", &l, 1, count[i]);
	}
}

/* Per node: respawns of its workers (in all), its reboots. */
static void
node_counters(struct master *m, struct ft_buf *b)
{
	struct expo_label l = { "node", NULL };
	int i, k, respawns;

	expo_family(b, P "worker_respawns_total", "counter",
		    "Worker processes started again after a failure, by node");
	for (i = 0; i < m->cfg.nnodes; i++) {
		respawns = 0;
		for (k = 0; k < m->nworkers; k++)
			if (m->workers[k].node == i)
				respawns += m->workers[k].respawns;
		l.value = m->nodes[i].name;
		expo_sample(b, P "worker_respawns_total", &l, 1, respawns);
	}
	expo_family(b, P "node_reboots_total", "counter",
		    "Power cycles of the node");
	for (i = 0; i < m->cfg.nnodes; i++) {
		l.value = m->nodes[i].name;
		expo_sample(b, P "node_reboots_total", &l, 1,
			    m->nodes[i].reboots);
	}
}

static void
nodes_part(struct master *m, struct ft_buf *b)
{
	struct expo_label l[2] = { { "node", NULL }, { "state", NULL } };
	int count[N_NSTATES] = { 0 }, i, s;

	for (i = 0; i < m->cfg.nnodes; i++)
		count[m->nodes[i].state]++;
	expo_family(b, P "nodes", "gauge", "Nodes, by state");
	for (s = 1; s < N_NSTATES; s++) {
		l[1].value = node_state_name((enum nstate)s);
		expo_sample(b, P "nodes", &l[1], 1, count[s]);
	}
	expo_family(b, P "node_state", "gauge",
		    "1 for the state each node is in, 0 for the others");
	for (i = 0; i < m->cfg.nnodes; i++)
		for (s = 1; s < N_NSTATES; s++) {
			l[0].value = m->nodes[i].name;
			l[1].value = node_state_name((enum nstate)s);
			expo_sample(b, P "node_state", l, 2,
				    m->nodes[i].state == (enum nstate)s);
		}
	node_counters(m, b);
}

/* ---- the loop, detection, I/O, clients ---- */

static void
health_part(struct master *m, struct ft_buf *b)
{
#define METRICS_HIST(field, metric, help)				\
	expo_family(b, P metric, "histogram", help);			\
	expo_histogram(b, P metric, NULL, 0, &m->stats.field);
	FT_HISTOGRAMS(METRICS_HIST)
#undef METRICS_HIST
	expo_single(b, P "loop_lag_max_seconds", "gauge",
		    "The worst lateness of the master's periodic timer since "
		    "the last snapshot",
		    stats_lag_max(&m->stats));
	expo_single(b, P "events_write_errors_total", "counter",
		    "Failed writes of events.jsonl",
		    (double)m->events.write_errors);
	expo_single(b, P "state_dir_writable", "gauge",
		    "1 while the state dir takes every write and sync, 0 while "
		    "results wait",
		    store_ok(&m->store));
	expo_single(b, P "state_dir_failures_total", "counter",
		    "Rounds of writes or syncs of the state dir that failed",
		    (double)m->store.failures);
	expo_single(b, P "epoch", "gauge",
		    "The lease epoch this master writes under (0: not "
		    "supervised)",
		    (double)m->epoch);
	expo_single(b, P "control_clients", "gauge",
		    "Clients connected to the control socket",
		    control_nclients(m->control));
	expo_single(b, P "subscribers", "gauge",
		    "Control clients subscribed to pushes",
		    m->up.subscribers(m->subs));
	expo_single(b, P "subscriber_events_dropped_total", "counter",
		    "Events skipped for subscribers that read too slowly",
		    (double)m->up.dropped(m->subs));
}

void
metrics_write(struct master *m, struct ft_buf *out)
{
	master_part(m, out);
	types_part(m, out);
	batches_part(m, out);
	workers_part(m, out);
	nodes_part(m, out);
	counters_part(m, out);
	health_part(m, out);
}

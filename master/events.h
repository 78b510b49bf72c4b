/*
 * events: <state_dir>/events.jsonl, the master's record of what happened,
 * one JSON object per line: {"ts": <epoch seconds>, "event": NAME, ...}.
 *
 * Every event is declared once, in FT_EVENTS below, with its fields; each
 * gets a typed emitter ev_NAME(ev, field...) and a row in events_schema
 * (a unit test holds the manual's list, man/ftfarm-events.7, to it).
 * Field types: int, str, num and bool are always written; ostr (NULL) and
 * obool (0) are left out when empty.  Task events (task_assigned, task_done) are written
 * only when the config's task_events is on.
 *
 * Lines are kept in memory and written by events_flush: from the cron,
 * and for events that matter at once (marked NOW) before the loop next
 * sleeps, after the result lines (farm_flush), through the store
 * (store.h).  While the state dir cannot be written, at most
 * EVENTS_MAX_PENDING bytes of events wait in memory; past that they are
 * counted, and an events_dropped event says how many once writing works
 * again.
 * A tap (the control socket's subscriptions) sees each line as it is
 * made, whatever becomes of the file.
 */
#ifndef FT_EVENTS_H
#define FT_EVENTS_H

#include <stddef.h>
#include <stdint.h>

#include "jsonl.h"

/* E(name, flags) per event; its fields are EV_FIELDS_<name>(F), one
 * F(type, key) per field, in the order they are written. */
#define FT_EVENTS(E)							\
	E(master_up, EVF_NOW)						\
	E(master_stopping, EVF_NOW)					\
	E(master_stopped, EVF_NOW)					\
	E(worker_up, 0)							\
	E(worker_respawned, 0)						\
	E(worker_dead, EVF_NOW)						\
	E(worker_inactive, EVF_NOW)					\
	E(worker_spawn_failed, 0)					\
	E(worker_slow, 0)						\
	E(worker_blamed, 0)						\
	E(agent_up, 0)							\
	E(agent_dead, EVF_NOW)						\
	E(node_suspect, EVF_NOW)					\
	E(node_draining, EVF_NOW)					\
	E(node_drained, EVF_NOW)					\
	E(node_power_cycle, EVF_NOW)					\
	E(node_power_on, EVF_NOW)					\
	E(node_ready, EVF_NOW)						\
	E(node_down, EVF_NOW)						\
	E(node_back, EVF_NOW)						\
	E(node_inactive, EVF_NOW)					\
	E(node_restored, EVF_NOW)					\
	E(node_joined, EVF_NOW)						\
	E(node_leaving, EVF_NOW)					\
	E(node_left, EVF_NOW)						\
	E(node_state_damaged, EVF_NOW)					\
	E(bmc_command, EVF_NOW)						\
	E(batch_submitted, 0)						\
	E(task_assigned, EVF_TASK)					\
	E(task_done, EVF_TASK)						\
	E(task_reassigned, 0)						\
	E(task_interrupted, EVF_NOW)					\
	E(task_failed, 0)						\
	E(batch_cancelled, EVF_NOW)					\
	E(batch_done, EVF_NOW)						\
	E(batch_forgotten, 0)						\
	E(gang_started, EVF_NOW)					\
	E(gang_rank_dead, EVF_NOW)					\
	E(gang_recovery, EVF_NOW)					\
	E(gang_ended, EVF_NOW)						\
	E(request_refused, EVF_NOW)					\
	E(journal_replayed, EVF_NOW)					\
	E(journal_repaired, EVF_NOW)					\
	E(store_failed, 0)						\
	E(store_recovered, EVF_NOW)					\
	E(events_dropped, 0)

#define EV_FIELDS_master_up(F)						\
	F(int, pid) F(str, mpi) F(str, launch) F(int, epoch)		\
	F(ostr, restart_reason)
/* The master began to stop (REASON: a stop request, a signal; the end
 * of a Slurm job named); RUNNING: the instances then out on workers. */
#define EV_FIELDS_master_stopping(F) F(str, reason) F(int, running)
#define EV_FIELDS_master_stopped(F)
#define EV_FIELDS_worker_up(F)						\
	F(int, worker) F(str, node) F(int, pid) F(str, host) F(int, respawns)
#define EV_FIELDS_worker_respawned(F) EV_FIELDS_worker_up(F)
#define EV_FIELDS_worker_dead(F)					\
	F(int, worker) F(str, node) F(int, pid) F(str, reason) F(bool, killed)
#define EV_FIELDS_worker_inactive(F) EV_FIELDS_worker_dead(F)
#define EV_FIELDS_worker_spawn_failed(F)				\
	F(int, worker) F(str, node) F(str, reason)
#define EV_FIELDS_worker_slow(F)					\
	F(int, worker) F(str, node) F(int, pid) F(int, batch) F(int, task)
#define EV_FIELDS_worker_blamed(F)					\
	F(int, worker) F(str, node) F(str, charged) F(str, reason)
#define EV_FIELDS_agent_up(F)						\
	F(str, node) F(int, pid) F(str, host) F(int, respawns)
#define EV_FIELDS_agent_dead(F)						\
	F(str, node) F(int, pid) F(str, reason) F(bool, killed)
#define EV_FIELDS_node_suspect(F)					\
	F(str, node) F(str, reason) F(int, failures)
#define EV_FIELDS_node_draining(F) F(str, node) F(str, reason)
#define EV_FIELDS_node_drained(F) F(str, node) F(str, reason)
#define EV_FIELDS_node_power_cycle(F)					\
	F(str, node) F(str, reason) F(int, reboots)
#define EV_FIELDS_node_power_on(F) F(str, node) F(num, seconds)
#define EV_FIELDS_node_ready(F) F(str, node) F(num, seconds)
#define EV_FIELDS_node_down(F) F(str, node) F(str, reason)
#define EV_FIELDS_node_back(F) F(str, node) F(str, reason) F(num, seconds)
#define EV_FIELDS_node_inactive(F) F(str, node) F(str, reason)
/* A node's state as a master before this one left it (nodes.state):
 * STATE now, WAS the state saved when it differs (a reboot under way is
 * brought to its end by a probe). */
#define EV_FIELDS_node_restored(F)					\
	F(str, node) F(str, state) F(str, reason) F(int, reboots)	\
	F(int, failures) F(obool, drained) F(ostr, was)
/* A node joined over TCP (ftfarm join): its agent's PID on HOST, its
 * SLOTS, its Slurm ALLOCATION; INCARNATION 1 for its first join. */
#define EV_FIELDS_node_joined(F)					\
	F(str, node) F(str, host) F(int, pid) F(int, slots)		\
	F(ostr, allocation) F(int, incarnation)
/* A joined node leaves (asked to, or its allocation ends): no new task;
 * it has left once its agent said bye (or died in the middle). */
#define EV_FIELDS_node_leaving(F) F(str, node) F(str, reason)
#define EV_FIELDS_node_left(F) F(str, node) F(str, reason)
/* A line of nodes.state (LINE 0: the whole file) not taken for REASON. */
#define EV_FIELDS_node_state_damaged(F)					\
	F(str, file) F(int, line) F(str, reason)
#define EV_FIELDS_bmc_command(F)					\
	F(str, node) F(str, command) F(int, exit) F(num, seconds)	\
	F(ostr, error)
#define EV_FIELDS_batch_submitted(F)					\
	F(int, batch) F(str, name) F(int, tasks) F(ostr, job)
#define EV_FIELDS_task_assigned(F)					\
	F(int, batch) F(int, task) F(int, attempt) F(int, worker)	\
	F(str, host) F(obool, duplicate)
#define EV_FIELDS_task_done(F)						\
	F(int, batch) F(int, task) F(int, attempt) F(int, worker)	\
	F(str, host) F(str, status)
#define EV_FIELDS_task_reassigned(F)					\
	F(int, batch) F(int, task) F(int, attempt) F(int, worker)	\
	F(str, host) F(str, reason)
/* An instance that ran, or may have, when its job ended (its slot got
 * SIGTERM) or the master stopped: the task goes back to the queue (or
 * to the next master's replay), with no result line and no attempt
 * charged. */
#define EV_FIELDS_task_interrupted(F)					\
	F(int, batch) F(int, task) F(int, attempt) F(int, worker)	\
	F(str, host) F(str, reason)
#define EV_FIELDS_task_failed(F) F(int, batch) F(int, task) F(str, reason)
#define EV_FIELDS_batch_cancelled(F)					\
	F(int, batch) F(int, queued) F(int, running)
#define EV_FIELDS_batch_done(F)						\
	F(int, batch) F(int, total) F(int, ok) F(int, failed)		\
	F(num, seconds) F(ostr, error)
/* An ended batch forgotten (retain_s, ftfarm forget): AGE seconds since
 * it ended (-1: not known). */
#define EV_FIELDS_batch_forgotten(F) F(int, batch) F(num, age)
/* A gang task's attempt: its processes all said hello and started; one
 * of them was declared dead (and killed); the survivors were told of the
 * dead of EPOCH (DEAD ranks so far) and recover; the attempt ended. */
#define EV_FIELDS_gang_started(F)					\
	F(int, batch) F(int, task) F(int, attempt) F(str, job)		\
	F(int, ranks) F(int, spares) F(num, spawn_seconds)
#define EV_FIELDS_gang_rank_dead(F)					\
	F(int, batch) F(int, task) F(int, attempt) F(int, rank)	\
	F(int, pid) F(str, reason)
#define EV_FIELDS_gang_recovery(F)					\
	F(int, batch) F(int, task) F(int, attempt) F(int, epoch)	\
	F(int, dead)
#define EV_FIELDS_gang_ended(F)						\
	F(int, batch) F(int, task) F(int, attempt) F(str, status)	\
	F(num, seconds) F(int, deaths) F(ostr, reason)
#define EV_FIELDS_request_refused(F) F(int, uid) F(str, request)
#define EV_FIELDS_journal_replayed(F)					\
	F(int, batches) F(int, done) F(int, pending) F(int, finished)	\
	F(num, seconds)
#define EV_FIELDS_journal_repaired(F)					\
	F(int, batch) F(str, file) F(int, offset) F(int, bytes)		\
	F(str, reason)
#define EV_FIELDS_store_failed(F) F(str, op) F(str, path) F(str, error)
#define EV_FIELDS_store_recovered(F) F(num, seconds) F(int, failures)
#define EV_FIELDS_events_dropped(F) F(int, count)

#define EVF_NOW 1		/* flushed at once */
#define EVF_TASK 2		/* a per-task event: only with task_events */

#define EVENTS_MAX_PENDING (16 << 20)	/* unwritten bytes kept at most */
/* Unwritten bytes of a busy loop turn (a chunk or more is written before
 * the loop reads more answers): 512 slots' no-op tasks reached 4 MiB. */
#define EVENTS_BURST_BYTES ((4 << 20) + (64 << 10))

struct store;

/* One number per declared event: EVT_master_up, ... */
enum ev_type {
#define EV_TYPE_ENUM(name, flags) EVT_##name,
	FT_EVENTS(EV_TYPE_ENUM)
#undef EV_TYPE_ENUM
	EVT_COUNT
};

/* Told of every event line written: its TYPE, its FLAGS (EVF_*), its
 * TS (the line's "ts"), and the line (LEN bytes, the newline included),
 * valid only during the call. */
typedef void (*events_tap_fn)(void *ctx, enum ev_type type, int flags,
			      double ts, const char *line, size_t len);

struct events {
	struct jsonl out;
	struct store *store;		/* writes go through it (NULL: direct) */
	unsigned long long dropped;	/* events not kept: too much unwritten */
	int urgent;			/* a NOW event, or JSONL_CHUNK bytes,
					 * wait: flush at the loop's next turn
					 * (results first) */
	int task_events;		/* write EVF_TASK events */
	char *path;
	events_tap_fn tap;		/* or NULL */
	void *tap_ctx;
	uint64_t write_errors;		/* flushes that failed */
};

/* Open PATH for appending (no tap yet).  0, or -1 with errno. */
int events_open(struct events *ev, const char *path, int task_events);
/* Write through S from now on (fenced, failures recorded). */
void events_set_store(struct events *ev, struct store *s);
/* Write what is pending.  0, or -1 (the store has the failure; without
 * a store it is logged once per errno). */
int events_flush(struct events *ev);
/* Flush (what cannot be written is lost) and close. */
void events_close(struct events *ev);
/* Bytes in events.jsonl now. */
long events_size(struct events *ev);
/* Rotate events.jsonl (ft_rotate, KEEP old files) and go on in a new
 * one.  0, or -1 with errno. */
int events_rotate(struct events *ev, int keep);
/* Tell FN(CTX, ...) of every event line from now on (NULL: nobody). */
void events_set_tap(struct events *ev, events_tap_fn fn, void *ctx);
/* The type called NAME, or -1. */
int events_type(const char *name);

#define EV_CTYPE_int long long
#define EV_CTYPE_str const char *
#define EV_CTYPE_ostr const char *
#define EV_CTYPE_num double
#define EV_CTYPE_bool int
#define EV_CTYPE_obool int
#define EV_PARAM(type, key) , EV_CTYPE_##type key
#define EV_PROTO(name, flags)						\
	void ev_##name(struct events *ev EV_FIELDS_##name(EV_PARAM));
FT_EVENTS(EV_PROTO)
#undef EV_PROTO

/* The declared events: NAME and its fields, space-separated, optional
 * ones with a trailing "?" ("batch name tasks job?"). */
struct event_schema {
	const char *name;
	const char *fields;
};
extern const struct event_schema events_schema[];
extern const size_t events_nschema;
/* Bit EVT_x set for each per-task event (EVF_TASK). */
extern const uint64_t events_task_types;

#endif

/*
 * ctl: the control socket between the ftfarm CLI and the master.
 *
 * A Unix stream socket at <state_dir>/control.sock.  The client writes one
 * JSON object per line, {"v": FT_CTL_VERSION, "cmd": NAME, ...}; the master
 * answers each with one line, {"ok": true, ...} or {"ok": false, "error":
 * "..."}.  A request of another version is refused.
 *
 * The commands, the keys each request may carry and the columns of the
 * status answer are defined once, here, and used by both ends: the master
 * checks a request against its command's fields and fills the status
 * answer with these keys; the CLI builds requests from the table and
 * prints the status tables from the same columns.
 */
#ifndef FT_CTL_H
#define FT_CTL_H

#include <jansson.h>
#include <signal.h>
#include <stddef.h>

#include "jcheck.h"
#include "util.h"

#define FT_CTL_VERSION 1

/* Exit statuses of the ftfarm command (ftfarm(1), EXIT STATUS) beside 0,
 * 1 (failure) and 2 (bad usage or input): what a script tells apart
 * without reading messages.  The master's refusals carry them as "exit". */
#define FT_EXIT_NO_BATCH 3		/* no such batch (never given) */
#define FT_EXIT_FORGOTTEN 4		/* the batch was forgotten */
#define FT_EXIT_DOWN 5			/* no master answers: cluster down */
/* Longest request line the master reads (batches of many tasks). */
#define FT_CTL_MAX_LINE (512 * 1024 * 1024)
/* Largest body of a request ("bytes": N after the line: a batch file). */
#define FT_CTL_MAX_BODY (1024 * 1024 * 1024)

/* Who may send a command: anyone who may connect (READ), those who may
 * run code as the master's user (SUBMIT), or its operators (ADMIN). */
enum ctl_role { CTL_ROLE_READ = 1, CTL_ROLE_SUBMIT, CTL_ROLE_ADMIN };

/* X(ENUM, name, role, fields): fields are the request's own keys beside
 * "v" and "cmd". */
#define CTL_COMMANDS(X)							\
	X(STATUS, "status", CTL_ROLE_READ, ctl_no_fields)		\
	X(SUBMIT, "submit", CTL_ROLE_SUBMIT, ctl_submit_fields)		\
	X(WAIT, "wait", CTL_ROLE_READ, ctl_wait_fields)			\
	X(STOP, "stop", CTL_ROLE_ADMIN, ctl_no_fields)			\
	X(LOG_LEVEL, "log_level", CTL_ROLE_ADMIN, ctl_log_level_fields)	\
	X(ROTATE, "rotate", CTL_ROLE_ADMIN, ctl_no_fields)		\
	X(NODES, "nodes", CTL_ROLE_READ, ctl_no_fields)			\
	X(DRAIN, "drain", CTL_ROLE_ADMIN, ctl_node_fields)		\
	X(UNDRAIN, "undrain", CTL_ROLE_ADMIN, ctl_node_fields)		\
	X(REBOOT, "reboot", CTL_ROLE_ADMIN, ctl_reboot_fields)		\
	X(CANCEL, "cancel", CTL_ROLE_SUBMIT, ctl_wait_fields)		\
	X(SUBSCRIBE, "subscribe", CTL_ROLE_READ, ctl_subscribe_fields)	\
	X(ADD, "add", CTL_ROLE_SUBMIT, ctl_add_fields)			\
	X(CLOSE, "close", CTL_ROLE_SUBMIT, ctl_wait_fields)		\
	X(BATCH, "batch", CTL_ROLE_READ, ctl_wait_fields)		\
	X(FORGET, "forget", CTL_ROLE_ADMIN, ctl_wait_fields)		\
	X(LEAVE, "leave", CTL_ROLE_ADMIN, ctl_leave_fields)		\
	X(ALLOC, "alloc", CTL_ROLE_READ, ctl_no_fields)			\
	X(ALLOC_SET, "alloc_set", CTL_ROLE_ADMIN, ctl_alloc_set_fields)

enum ctl_cmd {
	CTL_INVALID = 0,
#define CTL_ENUM(E, name, role, fields) CTL_##E,
	CTL_COMMANDS(CTL_ENUM)
#undef CTL_ENUM
	CTL_NCMDS
};

struct ctl_command {
	enum ctl_cmd cmd;
	const char *name;
	enum ctl_role role;
	const struct jfield *fields;	/* {NULL}-terminated, "v" and "cmd" included */
};

/* The command called NAME, or NULL. */
const struct ctl_command *ctl_command_find(const char *name);
const struct ctl_command *ctl_command(enum ctl_cmd cmd);
/* Check REQ against its command's fields: a known command, no unknown or
 * mistyped key.  The command, or NULL with ERR ("unknown command",
 * "batch: expected an integer, got a string"). */
const struct ctl_command *ctl_check_request(const json_t *req, char *err,
					    size_t n);
/* Parse one request LINE (LEN bytes): a JSON object of this protocol's
 * version and a known command with its fields.  The command, with *REQ
 * the request (the caller's to free, also on failure), or NULL with ERR. */
const struct ctl_command *ctl_parse_request(const char *line, size_t len,
					    json_t **req, char *err,
					    size_t n);
/* A new request {"cmd": NAME} for CMD ("v" is added when it is sent). */
json_t *ctl_request_new(enum ctl_cmd cmd);

/*
 * submit carries its batch either inline, {"batch": {...}} (bounded by
 * the request line's bound, max_request_bytes), or as the bytes of a
 * batch file right after the request line, {"bytes": N, "file": NAME}:
 * the master reads the file's own bytes, so that a batch of many tasks
 * is parsed once, on the master's side.  ftfarm sends every batch so,
 * those it makes of a command line too.  An error answer may carry
 * "exit": the CLI's exit status for it (2: bad input, or a request past
 * a bound).  A request line past max_request_bytes, or a submit whose
 * "bytes" pass max_batch_bytes, is answered with an error naming the
 * bound ("exit": 2) and the connection closed, what follows unread; so
 * is any refused request that announced bytes.
 */

/*
 * add {"batch": ID, "first": I, "bytes": N} then N bytes, {"tasks":
 * [...]}: more tasks for the open batch ID (a batch submitted with
 * "open": true), as its tasks I on.  Tasks come in order: an add whose
 * tasks the batch has already is answered as if taken (a client sends
 * again what it does not know to be taken), one that leaves a gap is
 * refused.  The answer, {"ok": true, "batch": ID, "added": K, "total":
 * T}, comes once the add's record is as durable as the fsync policy
 * wants; its tasks may run before.  close {"batch": ID}: no more tasks;
 * the batch ends once they have ({"ok": true, "batch": ID, "total": T}).
 */

/*
 * subscribe {"events": B, "task_events": B, "types": [NAME...], "since":
 * TS, "tail": N, "status": B, "batch": ID, "results": B, "offset": O}:
 * the connection stays open and
 * the master pushes lines to it, each an object whose first key is
 * "push":
 *
 *   {"push": "event", "ts": ..., "event": NAME, ...}
 *       an event, as its line in events.jsonl ("push" added), when
 *       "events" is true (per-task events too, unless "task_events" is
 *       false) or "types" names its type;
 *   {"push": "synced"}   the past events asked for have all been sent;
 *   {"push": "status", "cluster": ..., ...}
 *       the status answer's keys (batches: those running and the latest
 *       finished ones), when "status" is true: at once, then whenever
 *       something changed, at most every quarter second;
 *   {"push": "batch", "batch": ROW}
 *       batch ID's row, at once and whenever its counts moved;
 *   {"push": "result", "batch": ID, "task": I, ...}
 *       with "results": each result line of batch ID as in its
 *       results.jsonl ("push" and "batch" added), from byte O of the
 *       file ("offset", default 0: every result so far) on, in file
 *       order, each once it counts as done; never skipped: a client that
 *       reads slowly gets them later;
 *   {"push": "dropped", "events": N}
 *       N events were skipped: the client read too slowly for them;
 *   {"push": "alive", "ts": T}   after 10 s without another push;
 *   {"push": "stopping"}   the master is stopping: the connection ends
 *       after it (one that ends without it is a master gone astray).
 *
 * First comes the answer, {"ok": true, "oldest": TS} (TS: the oldest
 * event the master still holds, absent when none).  Past events are sent
 * first: those since TS ("since", epoch seconds) or the last N ("tail"),
 * from the master's memory of recent events (a few MiB; older ones are in
 * events.jsonl only), then "synced", then events as they happen.  What
 * waits for a client that does not read is bounded: events are skipped
 * (and counted in "dropped"), statuses coalesced.  Other requests may
 * share the connection (a wait after a batch subscription): an answer has
 * "ok", a push has "push".  A new subscribe replaces the connection's
 * subscription.
 */

/*
 * The status answer: {"ok", "cluster", "launch", "mpi", "uptime",
 * "queued", "open", "workers": [...], "nodes": [...], "batches": [...],
 * "counters": {...}, "http", "gangs"} ("http": the status page's URL, only
 * when the master listens for HTTP; "gangs": the gang tasks running, each
 * {"batch", "task", "attempt", "job", "ranks": [{"rank", "pid", "host",
 * "role": "active"|"spare", "state", "step", "epoch"}]}).  Each table's rows have the columns below:
 * X(ENUM, key, title, width, type); a title of NULL is not printed, a
 * negative width is left-aligned.
 */
#define CTL_WORKER_COLS(X)						\
	X(W_ID, "id", "WORKER", -6, JT_INT)				\
	X(W_NODE, "node", "NODE", -10, JT_STRING)			\
	X(W_HOST, "host", "HOST", -12, JT_STRING)			\
	X(W_PID, "pid", "PID", -8, JT_INT)				\
	X(W_STATE, "state", "STATE", -9, JT_STRING)			\
	X(W_RESPAWNS, "respawns", "RESPAWNS", -8, JT_INT)		\
	X(W_DONE, "tasks_done", "DONE", 0, JT_INT)			\
	X(W_INFLIGHT, "inflight", NULL, 0, JT_INT)			\
	X(W_START, "start", NULL, 0, JT_INT)

/* Nodes (also the rows of the nodes command): "worker_ids" are the
 * node's worker slots, "failures" those charged to it lately, "since" the
 * seconds in its state, "last_reboot" the epoch of its last (0: never),
 * "bmc" host:port (or ""), "reason" why it is in its state; "via" how
 * its agent came: "mpi" (started by the master) or "tcp" (it joined),
 * "allocation" the Slurm job a joined node's agent runs in (null: none)
 * and "time_left" the seconds before it leaves by itself (its job's end
 * less what it keeps to give its tasks back, or its --time-limit; null:
 * never, or not known). */
#define CTL_NODE_COLS(X)						\
	X(N_NAME, "name", "NODE", -10, JT_STRING)			\
	X(N_HOST, "host", "HOST", -12, JT_STRING)			\
	X(N_STATE, "state", "STATE", -9, JT_STRING)			\
	X(N_REBOOTS, "reboots", "REBOOTS", -7, JT_INT)			\
	X(N_FAILURES, "failures", "FAILURES", -8, JT_INT)		\
	X(N_WORKER_IDS, "worker_ids", "WORKER_IDS", -10, JT_ARRAY)	\
	X(N_WORKERS, "workers", NULL, 0, JT_INT)			\
	X(N_SINCE, "since", NULL, 0, JT_NUMBER)				\
	X(N_LAST_REBOOT, "last_reboot", NULL, 0, JT_NUMBER)		\
	X(N_BMC, "bmc", NULL, 0, JT_STRING)				\
	X(N_AGENT, "agent", "AGENT", -8, JT_STRING)			\
	X(N_AGENT_PID, "agent_pid", NULL, 0, JT_INT)			\
	X(N_AGENT_HOST, "agent_host", NULL, 0, JT_STRING)		\
	X(N_AGENT_RESPAWNS, "agent_respawns", NULL, 0, JT_INT)		\
	X(N_MEM, "mem", NULL, 0, JT_INT)				\
	X(N_MEM_USED, "mem_used", NULL, 0, JT_INT)			\
	X(N_VIA, "via", "VIA", -3, JT_STRING)				\
	X(N_ALLOCATION, "allocation", "ALLOC", -6, JT_STRING)		\
	X(N_TIME_LEFT, "time_left", "LEFT_S", 7, JT_NUMBER)		\
	X(N_REASON, "reason", "REASON", 0, JT_STRING)

/* Batches also carry, when they apply, "job", "error" and "result".
 * Their usage: "cpu_s" and "task_seconds" summed over the results
 * written, "max_rss" the largest of them. */
#define CTL_BATCH_COLS(X)						\
	X(B_ID, "id", "BATCH", -6, JT_INT)				\
	X(B_NAME, "name", "NAME", -20, JT_STRING)			\
	X(B_TOTAL, "total", "TOTAL", 8, JT_INT)				\
	X(B_DONE, "done", "DONE", 8, JT_INT)				\
	X(B_OK, "ok", NULL, 0, JT_INT)					\
	X(B_FAILED, "failed", "FAILED", 8, JT_INT)			\
	X(B_REASSIGNED, "reassigned", NULL, 0, JT_INT)			\
	X(B_STATE, "state", "STATE", -9, JT_STRING)			\
	X(B_SECONDS, "seconds", "SECONDS", 0, JT_NUMBER)		\
	X(B_CPU_S, "cpu_s", NULL, 0, JT_NUMBER)				\
	X(B_MAX_RSS, "max_rss", NULL, 0, JT_INT)			\
	X(B_TASK_SECONDS, "task_seconds", NULL, 0, JT_NUMBER)

#define CTL_STATUS_KEYS(X)						\
	X(S_CLUSTER, "cluster", JT_STRING)				\
	X(S_LAUNCH, "launch", JT_STRING)				\
	X(S_MPI, "mpi", JT_STRING)					\
	X(S_UPTIME, "uptime", JT_NUMBER)				\
	X(S_QUEUED, "queued", JT_INT)					\
	X(S_OPEN, "open", JT_INT)					\
	X(S_WORKERS, "workers", JT_ARRAY)				\
	X(S_NODES, "nodes", JT_ARRAY)					\
	X(S_BATCHES, "batches", JT_ARRAY)				\
	X(S_COUNTERS, "counters", JT_OBJECT)				\
	X(S_STORE, "store", JT_OBJECT)					\
	X(S_EPOCH, "epoch", JT_INT)					\
	X(S_HTTP, "http", JT_STRING)					\
	X(S_GANGS, "gangs", JT_ARRAY)

#define CTL_COL_ENUM(E, key, title, width, type) CTL_##E,
#define CTL_KEY_ENUM(E, key, type) CTL_##E,
enum ctl_worker_col { CTL_WORKER_COLS(CTL_COL_ENUM) CTL_W_NCOLS };
enum ctl_node_col { CTL_NODE_COLS(CTL_COL_ENUM) CTL_N_NCOLS };
enum ctl_batch_col { CTL_BATCH_COLS(CTL_COL_ENUM) CTL_B_NCOLS };
enum ctl_status_key { CTL_STATUS_KEYS(CTL_KEY_ENUM) CTL_S_NKEYS };
#undef CTL_COL_ENUM
#undef CTL_KEY_ENUM

struct ctl_col {
	const char *key;
	const char *title;		/* NULL: not printed */
	int width;			/* < 0: left-aligned */
	enum jtype type;
};

/* Indexed by the enums above. */
extern const struct ctl_col ctl_worker_cols[CTL_W_NCOLS];
extern const struct ctl_col ctl_node_cols[CTL_N_NCOLS];
extern const struct ctl_col ctl_batch_cols[CTL_B_NCOLS];
extern const char *const ctl_status_keys[CTL_S_NKEYS];

/* ROW[COL.key] = V, by the column's type (a JSON integer, real or string).
 * Strings are copied. */
void ctl_row_int(json_t *row, const struct ctl_col *col, long long v);
void ctl_row_num(json_t *row, const struct ctl_col *col, double v);
void ctl_row_str(json_t *row, const struct ctl_col *col, const char *v);

/* <state_dir>/control.sock (a new string). */
char *ctl_socket_path(const char *state_dir);
/* Connect to the master of STATE_DIR.  The fd, or -1 with ERR.  When its
 * socket cannot be connected to (another host sees the file of a shared
 * file system but cannot connect), the function set below is tried. */
int ctl_connect(const char *state_dir, char *err, size_t n);
/* Another way to the master of STATE_DIR: a connected fd speaking this
 * protocol, or -1, leaving ERR as it is (it holds why the socket failed)
 * when there is no other way, else saying why that way failed too. */
typedef int (*ctl_elsewhere_fn)(void *ctx, const char *state_dir, char *err,
				size_t n);
void ctl_set_elsewhere(ctl_elsewhere_fn fn, void *ctx);
/* Send REQ (a reference is taken: the caller still owns it, "v" is set)
 * and wait up to TIMEOUT seconds (<= 0: forever) for the answer line.
 * The answer, or NULL with ERR. */
json_t *ctl_call(int fd, json_t *req, double timeout, char *err, size_t n);
/* Bytes sent right after a request line: LEN bytes at DATA, or, when FD
 * is not -1, the first LEN bytes of the file FD (sent by the kernel from
 * the page cache: a batch of megabytes is never copied into the client). */
struct ctl_body {
	const void *data;
	int fd;
	size_t len;
};
/* The same with BODY (NULL: none) sent right after the request line. */
json_t *ctl_call_body(int fd, json_t *req, const struct ctl_body *body,
		      double timeout, char *err, size_t n);
/* Connect, call, close. */
json_t *ctl_request(const char *state_dir, json_t *req, double timeout,
		    char *err, size_t n);
json_t *ctl_request_body(const char *state_dir, json_t *req,
			 const struct ctl_body *body, double timeout,
			 char *err, size_t n);

/* A connection that carries pushes (subscribe) as well as answers: lines
 * are read one at a time, what follows a line kept for the next. */
struct ctl_stream {
	int fd;
	struct ft_buf in;
	size_t off;			/* where the next line starts in in */
	const char *line;		/* the last line read, as it came */
	size_t line_len;		/* (no newline; valid until the next) */
	/* When set, the signal mask while waiting (ppoll): a caller that
	 * blocks its stop signals elsewhere and unblocks them here cannot
	 * miss one between its check of a flag and the wait. */
	const sigset_t *wait_mask;
};

/* Connect to the master of STATE_DIR.  0, or -1 with ERR. */
int ctl_stream_open(struct ctl_stream *s, const char *state_dir, char *err,
		    size_t n);
void ctl_stream_close(struct ctl_stream *s);
/* Send REQ ("v" is set in it).  0, or -1 with ERR. */
int ctl_stream_send(struct ctl_stream *s, json_t *req, char *err, size_t n);
/* The next line as a JSON object (a new reference): 1 with *MSG; 0 when
 * TIMEOUT seconds (< 0: no limit) passed first or a signal came; -1 with
 * ERR when the master closed the connection or sent something else. */
int ctl_stream_next(struct ctl_stream *s, double timeout, json_t **msg,
		    char *err, size_t n);

#endif

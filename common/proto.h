/*
 * proto: the messages between the master, its node agents and their
 * slots.
 *
 * The master talks MPI to one agent per node (ftfarm-worker); the agent
 * starts the node's slots (ftfarm-slot, one per worker slot of the
 * config) as local processes and talks to each over a socket (frame.h).
 * Every master-agent message is one MPI message of MPI_BYTEs whose tag is
 * its type; between an agent and a slot the same payloads travel in
 * frames.  Tasks travel as small descriptors (their JSON text); bulk data
 * goes through files.  A message never exceeds FT_MSG_MAX bytes: the master
 * keeps one standing receive of that size per agent.
 *
 * Between the master and an agent (the agent's own messages):
 *   agent -> master    HELLO   version, node index (as slot), pid, host,
 *                               plugin names, the node's memory
 *   master -> agent    WELCOME output cap, silence limit, heartbeat and
 *                               ping timeout (the agent pings its slots),
 *                               how memory limits are enforced
 *   master -> agent    PING    sequence number
 *   agent -> master    PONG    sequence number, 0, live slots
 *   master -> agent    STOP    flags: the agent stops its slots, then
 *   agent -> master    BYE
 *   either way         RELAY   count x (slot, generation, tag, payload):
 *                               messages to or from slots
 *
 * A node that joins over TCP (ftfarm join) has an agent too, with no MPI:
 * its messages are frames (frame.h) on a TCP connection that opened with
 * the MUNGE greeting of the agent's role (rauth.h).  In place of HELLO:
 *   agent -> master    JOIN    version, slots, pid, start time, name,
 *                               host, GPU ids, Slurm job and its end,
 *                               its host's memory
 *   master -> agent    WELCOME as above (the node's name), or
 *   master -> agent    REFUSE  why (the connection then ends)
 * then as an MPI agent, and:
 *   master -> agent    LEAVE   grace: take no new task, interrupt the
 *                               running ones once the grace has passed
 *                               (their results say so), then STOP comes
 *   agent -> master    LEAVE   0, why: the agent leaves by itself (its
 *                               allocation ends: SIGTERM)
 *
 * Inside RELAY, master -> agent: SPAWN (start the slot as generation
 * GEN; no payload), KILL (SIGKILL it now; no payload), and for the slot
 * itself WELCOME, ASSIGN, CANCEL.  Agent -> master: the slot's HELLO,
 * RESULT and BYE, and EXITED (its process ended: whether the agent killed
 * it for a hang, and why).  Every entry carries the generation its SPAWN
 * gave, so the master can drop what comes from a slot it has given up on.
 *
 * Between an agent and a slot (frames):
 *   slot -> agent      HELLO   version, slot, pid, host, plugin names
 *   agent -> slot      WELCOME output cap, silence limit, memory
 *                               enforcement, default output files
 *   agent -> slot      ASSIGN  count x (task id, attempt, spec, cpus, gpus,
 *                               cpuset, batch, index)
 *   slot -> agent      RESULT  count x (task id, attempt, ok, exit, seconds,
 *                               reason, stdout, stderr, signal, value,
 *                               interrupted, cpu seconds, peak RSS,
 *                               output files' paths)
 *   agent -> slot      PING    sequence number
 *   slot -> agent      PONG    sequence number, running task id, queued
 *   agent -> slot      CANCEL  task id, attempt
 *   agent -> slot      STOP
 *   slot -> agent      BYE
 * A slot's messages are at most FT_SLOT_MSG_MAX bytes, so that each fits
 * in a RELAY entry.
 */
#ifndef FT_PROTO_H
#define FT_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include "util.h"

#define FT_PROTO_VERSION 8
/* What `ftfarm-worker --version` prints (with FT_PROTO_VERSION). */
#define FT_WORKER_VERSION_FMT "ftfarm-worker protocol %d"
/* Set in a worker's environment to its pid and its start time, so
 * inherited by its tasks: the pair names the worker for good. */
#define FT_WORKER_ENV "FTFARM_WORKER_PID"
#define FT_WORKER_START_ENV "FTFARM_WORKER_START"
/* Set in a node agent's environment, and so in every slot's and task's:
 * the agent's pid and start time, which name everything it started. */
#define FT_AGENT_ENV "FTFARM_AGENT_PID"
#define FT_AGENT_START_ENV "FTFARM_AGENT_START"
/* STOP's flags: leave without MPI_Finalize (a static world lost ranks and
 * Open MPI's finalize would wait for them). */
#define FT_STOP_NO_FINALIZE 1u
#define FT_MSG_MAX (512 * 1024)
/* What a RELAY entry adds to its payload, and so the largest message of
 * a slot. */
#define FT_RELAY_ROOM 64
#define FT_SLOT_MSG_MAX (FT_MSG_MAX - FT_RELAY_ROOM)
/* Largest task descriptor accepted at submit, so one always fits. */
#define FT_SPEC_MAX (256 * 1024)

enum ft_msg {
	FT_MSG_INVALID = 0,
	FT_MSG_HELLO,
	FT_MSG_WELCOME,
	FT_MSG_ASSIGN,
	FT_MSG_RESULT,
	FT_MSG_PING,
	FT_MSG_PONG,
	FT_MSG_CANCEL,
	FT_MSG_STOP,
	FT_MSG_BYE,
	FT_MSG_RELAY,
	FT_MSG_SPAWN,
	FT_MSG_KILL,
	FT_MSG_EXITED,
	FT_MSG_JOIN,
	FT_MSG_REFUSE,
	FT_MSG_LEAVE,
	FT_MSG_LAST
};

const char *proto_msg_name(int type);

struct proto_hello {
	uint32_t version;
	uint32_t slot;
	uint32_t pid;
	uint64_t start;			/* its start time (ft_proc_start) */
	const char *host;		/* points into the message */
	size_t host_len;
	const char *plugins;		/* comma-separated task types */
	size_t plugins_len;
	uint64_t mem;			/* an agent's: bytes its node's tasks
					 * may use (hostmem.h); a slot's: 0 */
};

struct proto_welcome {
	uint32_t output_cap;
	double master_timeout;		/* seconds of silence before a worker quits */
	double idle_nap;		/* longest nap of an idle worker, seconds */
	const char *node;		/* the worker's node (FTFARM_NODE) */
	size_t node_len;
	double heartbeat;		/* agent: seconds between slot pings */
	double ping_timeout;		/* agent: seconds a slot has to answer */
	uint32_t mem_enforce;		/* enum ft_mem_enforce (config.h) */
	const char *out_default;	/* slot: "task_stdout", or "" */
	size_t out_default_len;
	const char *err_default;	/* slot: "task_stderr", or "" */
	size_t err_default_len;
};

struct proto_task {
	uint64_t tid;
	uint32_t attempt;
	const char *spec;		/* JSON text, not NUL-terminated */
	size_t spec_len;
	uint32_t cpus;			/* slots it holds (FTFARM_CPUS), 0 = 1 */
	const char *gpus;		/* its GPU ids, comma-separated, or "" */
	size_t gpus_len;
	const char *cpuset;		/* CPUs to bind it to ("0,1"), or "" */
	size_t cpuset_len;
	uint32_t batch;			/* its batch's id and its index there */
	uint32_t index;			/* (its output files' names) */
};

struct proto_result {
	uint64_t tid;
	uint32_t attempt;
	uint8_t ok;
	int32_t exit_code;
	double seconds;
	const char *reason;
	size_t reason_len;
	const char *out;
	size_t out_len;
	const char *err;
	size_t err_len;
	int32_t signal;			/* that ended the task's process, 0 */
	const char *value;		/* what the task returned ("value") */
	size_t value_len;
	uint8_t interrupted;		/* enum proto_interrupted: not a result */
	double cpu_s;			/* CPU seconds its processes used */
	uint64_t max_rss;		/* their peak resident set, bytes */
	const char *out_path;		/* the file its stdout went to, or "" */
	size_t out_path_len;
	const char *err_path;		/* the same for stderr */
	size_t err_path_len;
};

/* A result that is none: the slot got SIGTERM (its job ends) and the
 * instance goes back to the queue, charged to nobody. */
enum proto_interrupted {
	PROTO_FINISHED = 0,		/* a result of the task's own */
	PROTO_INTERRUPTED,		/* it ran and was interrupted */
	PROTO_UNSTARTED,		/* it never started */
};

struct proto_pong {
	uint64_t seq;
	uint64_t running;		/* task id being run, 0 for none */
	uint32_t queued;		/* tasks waiting on the worker */
};

struct proto_cancel {
	uint64_t tid;
	uint32_t attempt;
};

/* One entry of a RELAY. */
struct proto_relay {
	uint32_t slot;
	uint32_t gen;			/* the slot's generation (its SPAWN's) */
	uint32_t tag;			/* enum ft_msg of the payload */
	const void *p;			/* points into the message */
	size_t n;
};

/* JOIN: a node's agent joins over TCP. */
struct proto_join {
	uint32_t version;
	uint32_t slots;			/* its worker slots */
	uint32_t pid;			/* the agent's */
	uint64_t start;			/* its start time (ft_proc_start) */
	const char *name;		/* the node's name (--name, or the host) */
	size_t name_len;
	const char *host;
	size_t host_len;
	const char *gpus;		/* device ids, comma-separated, or "" */
	size_t gpus_len;
	const char *alloc;		/* its Slurm job id, or "" */
	size_t alloc_len;
	double alloc_end;		/* when that job ends (epoch), 0: never
					 * or unknown */
	uint64_t mem;			/* its host's memory for tasks
					 * (hostmem.h) */
};

/* LEAVE, either way. */
struct proto_leave {
	double grace;			/* master -> agent: seconds running tasks
					 * may go on */
	const char *why;		/* agent -> master: why it leaves */
	size_t why_len;
};

/* EXITED: a slot's process has ended. */
struct proto_exited {
	uint32_t hung;			/* killed by its agent: no answer */
	const char *reason;		/* "killed by signal 9", "exit 1", ... */
	size_t reason_len;
};

void proto_put_hello(struct ft_buf *b, const struct proto_hello *m);
int proto_get_hello(const void *p, size_t n, struct proto_hello *m);
void proto_put_welcome(struct ft_buf *b, const struct proto_welcome *m);
int proto_get_welcome(const void *p, size_t n, struct proto_welcome *m);
void proto_put_pong(struct ft_buf *b, const struct proto_pong *m);
int proto_get_pong(const void *p, size_t n, struct proto_pong *m);
/* PING carries its sequence number, STOP its flags (FT_STOP_*), BYE
 * nothing but a reserved zero. */
void proto_put_ping(struct ft_buf *b, uint64_t seq);
int proto_get_ping(const void *p, size_t n, uint64_t *seq);
void proto_put_cancel(struct ft_buf *b, const struct proto_cancel *m);
int proto_get_cancel(const void *p, size_t n, struct proto_cancel *m);
void proto_put_stop(struct ft_buf *b, uint32_t flags);
int proto_get_stop(const void *p, size_t n, uint32_t *flags);
void proto_put_bye(struct ft_buf *b);
int proto_get_bye(const void *p, size_t n);
void proto_put_exited(struct ft_buf *b, const struct proto_exited *m);
int proto_get_exited(const void *p, size_t n, struct proto_exited *m);
void proto_put_join(struct ft_buf *b, const struct proto_join *m);
int proto_get_join(const void *p, size_t n, struct proto_join *m);
void proto_put_leave(struct ft_buf *b, const struct proto_leave *m);
int proto_get_leave(const void *p, size_t n, struct proto_leave *m);
/* REFUSE carries its reason (LEN bytes at WHY). */
void proto_put_refuse(struct ft_buf *b, const char *why, size_t len);
int proto_get_refuse(const void *p, size_t n, const char **why, size_t *len);

/* ASSIGN and RESULT carry a count then that many records.  The writer
 * reserves the count and patches it with proto_set_count; the reader is
 * an iterator.  proto_*_next returns 1 with M filled, 0 at a clean end,
 * -1 on a malformed message. */
void proto_begin_list(struct ft_buf *b);
void proto_set_count(struct ft_buf *b, uint32_t count);
void proto_put_task(struct ft_buf *b, const struct proto_task *m);
void proto_put_result(struct ft_buf *b, const struct proto_result *m);
/* Encoded size of a result, to keep messages under FT_MSG_MAX. */
size_t proto_result_size(const struct proto_result *m);
/* RELAY is a list too (proto_begin_list, proto_set_count). */
void proto_put_relay(struct ft_buf *b, const struct proto_relay *m);
/* Encoded size of a RELAY entry of N payload bytes (at most N +
 * FT_RELAY_ROOM). */
size_t proto_relay_size(size_t n);
/* The silence a slot takes before it leaves, given the master's
 * MASTER_SILENCE and HEARTBEAT: at least SLOT_SILENCE_HB heartbeats, so
 * that its agent may ping an idle slot rarely (slots.c).  A slot whose
 * agent dies sees the end of its socket at once. */
#define SLOT_SILENCE_HB 80
double proto_slot_silence(double master_silence, double heartbeat);

struct proto_iter {
	const unsigned char *p;
	size_t len;
	size_t off;
	uint32_t left;
};
int proto_iter_init(struct proto_iter *it, const void *p, size_t n);
int proto_next_task(struct proto_iter *it, struct proto_task *m);
int proto_next_result(struct proto_iter *it, struct proto_result *m);
int proto_next_relay(struct proto_iter *it, struct proto_relay *m);

#endif

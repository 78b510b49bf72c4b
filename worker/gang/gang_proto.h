/*
 * gang_proto: the messages between the master and the ranks of a gang.
 *
 * A gang is one MPI_Comm_spawn of ranks + spares processes of ftfarm-gang;
 * the master holds one intercommunicator to them and stays out of their
 * own traffic (on their MPI_COMM_WORLD).  Over the intercommunicator every
 * message is one MPI message of MPI_BYTEs whose tag is its type, at most
 * GANG_MSG_MAX bytes (the ranks keep one standing receive of that size).
 *
 *   rank -> master   HELLO     version, world rank, world size, pid, host
 *   master -> rank   START     attempt, master silence limit, job (JSON)
 *   master -> rank   PING      sequence number
 *   rank -> master   PONG      sequence number + the rank's status
 *   rank -> master   PROGRESS  the rank's status, sent at each step
 *   master -> rank   DEAD      epoch, every world rank declared dead so far
 *   rank -> master   RESULT    ok, has output, digest, reason, report
 *   master -> rank   WRITE     write your output now (one rank is asked)
 *   rank -> master   WRITTEN   ok, reason
 *   master -> rank   STOP      flags
 *
 * DEAD is cumulative: notice number E (the epoch) names every rank the
 * master has declared dead, so a rank that misses notice E-1 loses
 * nothing.  The master SIGKILLs a rank before declaring it dead, hung or
 * not, so a rank named dead never speaks again.
 */
#ifndef FT_GANG_PROTO_H
#define FT_GANG_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include "util.h"

#define GANG_PROTO_VERSION 1
/* A job descriptor is at most FT_SPEC_MAX (256 KiB) of JSON. */
#define GANG_MSG_MAX (272 * 1024)
/* The largest gang, so that a DEAD notice always fits. */
#define GANG_MAX_RANKS 4096
/* STOP's flags: no rank died, MPI_Finalize is safe (after a death it may
 * hang: leave with _exit instead). */
#define GANG_STOP_FINALIZE 1u

enum gang_msg {
	GANG_MSG_INVALID = 0,
	GANG_MSG_HELLO,
	GANG_MSG_START,
	GANG_MSG_PING,
	GANG_MSG_PONG,
	GANG_MSG_PROGRESS,
	GANG_MSG_DEAD,
	GANG_MSG_RESULT,
	GANG_MSG_WRITE,
	GANG_MSG_WRITTEN,
	GANG_MSG_STOP,
	GANG_MSG_LAST
};

/* What a rank is doing, as the master shows it. */
enum gang_role { GANG_ROLE_ACTIVE = 1, GANG_ROLE_SPARE };
enum gang_phase {
	GANG_PHASE_START = 1,	/* started, before the first step */
	GANG_PHASE_STEP,	/* running step number `step` */
	GANG_PHASE_RECOVER,	/* recovering from the deaths of `epoch` */
	GANG_PHASE_DONE,	/* result reported, serving until STOP */
};

const char *gang_msg_name(int type);
const char *gang_role_name(int role);
const char *gang_phase_name(int phase);

struct gang_hello {
	uint32_t version;
	uint32_t rank;			/* in the gang's MPI_COMM_WORLD */
	uint32_t size;
	uint32_t pid;
	const char *host;		/* points into the message */
	size_t host_len;
};

struct gang_start {
	uint32_t attempt;		/* 1 for the first run of the job */
	double silence;			/* seconds without a word from the
					 * master after which a rank leaves */
	const char *job;		/* JSON text, not NUL-terminated */
	size_t job_len;
};

/* The body of PONG (seq of the ping) and PROGRESS (seq 0). */
struct gang_status {
	uint64_t seq;
	uint32_t epoch;			/* the latest notice the rank acted on */
	int32_t step;			/* the algorithm's step, -1 before any */
	uint8_t role;			/* enum gang_role */
	uint8_t phase;			/* enum gang_phase */
};

struct gang_result {
	uint8_t ok;
	uint8_t has_output;		/* the rank can write the job's output */
	uint32_t epoch;
	uint64_t digest;		/* of the output bytes (gang_digest) */
	double seconds;			/* the algorithm's own time */
	const char *reason;		/* why not ok ("" when ok) */
	size_t reason_len;
	const char *report;		/* a JSON object of figures, or "" */
	size_t report_len;
};

struct gang_written {
	uint8_t ok;
	const char *reason;
	size_t reason_len;
};

/* Writers append to B; readers decode P (N bytes) strictly and return 0,
 * or -1 on a short, long or malformed message.  Strings point into P. */
void gang_put_hello(struct ft_buf *b, const struct gang_hello *m);
int gang_get_hello(const void *p, size_t n, struct gang_hello *m);
void gang_put_start(struct ft_buf *b, const struct gang_start *m);
int gang_get_start(const void *p, size_t n, struct gang_start *m);
void gang_put_u64(struct ft_buf *b, uint64_t v);	/* PING */
int gang_get_u64(const void *p, size_t n, uint64_t *v);
void gang_put_u32(struct ft_buf *b, uint32_t v);	/* STOP */
int gang_get_u32(const void *p, size_t n, uint32_t *v);
void gang_put_status(struct ft_buf *b, const struct gang_status *m);
int gang_get_status(const void *p, size_t n, struct gang_status *m);
/* DEAD: EPOCH and the N world ranks of DEAD. */
void gang_put_dead(struct ft_buf *b, uint32_t epoch, const int *dead, int n);
/* Fills DEAD (room for MAX) and *N; -1 also when more than MAX. */
int gang_get_dead(const void *p, size_t n, uint32_t *epoch, int *dead,
		  int max, int *count);
void gang_put_result(struct ft_buf *b, const struct gang_result *m);
int gang_get_result(const void *p, size_t n, struct gang_result *m);
void gang_put_written(struct ft_buf *b, const struct gang_written *m);
int gang_get_written(const void *p, size_t n, struct gang_written *m);

#endif

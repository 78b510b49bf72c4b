/*
 * gang: the runtime every rank of a gang links.
 *
 * A gang rank is one process of a single MPI_Comm_spawn made by the master.
 * The ranks talk among themselves on their own MPI_COMM_WORLD
 * (gang_comm()); the master only watches them over the intercommunicator:
 * it pings every rank, and when one dies or hangs it SIGKILLs it and sends
 * every survivor a cumulative notice "these ranks are dead" (gang_proto.h).
 *
 * Facts of Open MPI 4.1 this is built on (see DESIGN.md): a request with a
 * dead peer never completes and never fails, collectives over a
 * communicator holding a dead rank hang, and MPI_Finalize may hang once a
 * rank of the job died.  So a rank never blocks inside MPI: it uses
 * nonblocking point-to-point only, polls with naps (gang_req.h), and every
 * wait ends when the master's notice names a peer it waits on, when the
 * master says stop, or when the master stays silent past the limit it gave
 * in START.  After a death a rank leaves with _exit, not MPI_Finalize.
 *
 * The runtime never prints and never exits on its own: functions return a
 * gang_rc and the program (main.c) decides.
 */
#ifndef FT_GANG_H
#define FT_GANG_H

#include <jansson.h>
#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "gang_proto.h"

enum gang_rc {
	GANG_ERR = -1,		/* an MPI call failed: the data cannot be
				 * trusted, the rank should report failure */
	GANG_OK = 0,
	GANG_DIED,		/* a peer waited on was declared dead */
	GANG_EPOCH,		/* a new notice came (GANG_WAIT_ANY_DEATH) */
	GANG_STOP,		/* the master said stop or went silent */
	GANG_WRITE,		/* the master asks this rank for the output */
};

struct gang;

/* Initialise MPI, say hello to the master and wait (at most START_TIMEOUT
 * seconds) for START.  NULL with ERR when the process was not spawned by a
 * master, the master did not answer, or START is malformed. */
struct gang *gang_init(int *argc, char ***argv, double start_timeout,
		       char *err, size_t n);

int gang_rank(const struct gang *g);		/* in gang_comm() */
int gang_size(const struct gang *g);
MPI_Comm gang_comm(const struct gang *g);	/* the gang's world */
const json_t *gang_job(const struct gang *g);	/* START's job object */
uint32_t gang_attempt(const struct gang *g);
/* The latest notice received: 0 before any death. */
uint32_t gang_epoch(const struct gang *g);
/* Has the master declared RANK dead? */
int gang_is_dead(const struct gang *g, int rank);
/* The job's "step_delay_ms", in seconds (0 when absent). */
double gang_step_delay(const struct gang *g);
/* Why the rank stops (after GANG_STOP), "" otherwise. */
const char *gang_stop_reason(const struct gang *g);

/* A tag for the gang's own messages: notice EPOCH, message KIND (0-15),
 * SUB (0-65535; a step, a chunk).  Tags of different epochs never match,
 * so a message sent before a recovery is never taken for one after. */
int gang_tag(uint32_t epoch, int kind, int sub);

/* What the master shows for this rank. */
void gang_set_role(struct gang *g, enum gang_role role);
/* Say that step STEP starts, then pause the job's step_delay_ms while
 * serving the master.  GANG_OK or GANG_STOP. */
int gang_step(struct gang *g, int step);
/* Say that the rank recovers from the deaths of notice EPOCH, then pause
 * like gang_step.  GANG_OK or GANG_STOP. */
int gang_recovering(struct gang *g, uint32_t epoch);
/* Serve the master for SECONDS.  GANG_OK or GANG_STOP. */
int gang_pause(struct gang *g, double seconds);

/* Serve the master without blocking: answer pings, take notices, note
 * WRITE and STOP.  GANG_OK, or GANG_STOP (STOP came, the master was silent
 * too long, or it sent a malformed message). */
int gang_poll(struct gang *g);

/* Send RESULT (the rank's outcome; it stays in the gang until STOP). */
void gang_report(struct gang *g, const struct gang_result *r);
/* After gang_report: serve the master until it asks for the output
 * (GANG_WRITE), says stop (GANG_STOP) or sends a notice newer than EPOCH
 * (GANG_EPOCH: the rank may have to help the survivors again). */
int gang_await(struct gang *g, uint32_t epoch);
/* Answer WRITE. */
void gang_written(struct gang *g, int ok, const char *reason);

/* Keep BUF, which an abandoned MPI request may still write or read, out
 * of reach of free() until the process ends. */
void gang_retire(struct gang *g, void *buf);

/* Leave: wait (briefly) for the messages to the master to go out, then
 * MPI_Finalize when the master allowed it (no rank died) or _exit.
 * CODE is the exit status. */
void gang_leave(struct gang *g, int code) __attribute__((noreturn));

/* Idle loops back off: spin a little, then sleep 20 us doubling up to
 * 1 ms, so that waiting ranks leave the cores to working ones. */
struct gang_nap {
	int idle;
};
void gang_nap(struct gang_nap *n);
void gang_nap_reset(struct gang_nap *n);

#endif

/*
 * slots: the node agent's local side, the slot processes of its node.
 *
 * The agent starts each slot (ftfarm-slot) as a child with one end of a
 * socket, hears of its exit through a pidfd and of its hangs through
 * pings of its own, writes the master's messages for it without ever
 * blocking (a queue per slot) and hands whatever a slot says, and the news
 * of its end, to a callback that carries it to the master.  Every
 * descriptor is in one epoll set, so that any number of slots costs one
 * descriptor to sleep on.  Slots are named by the master's slot id and
 * the generation of their SPAWN: news of a generation is reported with
 * that generation, even after a newer one has started.
 */
#ifndef FT_SLOTS_H
#define FT_SLOTS_H

#include <stddef.h>
#include <stdint.h>

#include "proto.h"	/* FT_AGENT_ENV */


/* What a slot said (TAG: HELLO, RESULT, BYE), or EXITED when its process
 * has ended: always after everything it wrote. */
typedef void (*slots_emit_fn)(void *arg, uint32_t slot, uint32_t gen,
			      uint32_t tag, const void *p, size_t n);

struct slots;

/* Slots started from EXE, their news to EMIT(ARG, ...).  NULL, with WHY
 * filled, when the epoll set cannot be made. */
struct slots *slots_new(const char *exe, slots_emit_fn emit, void *arg,
			char *why, size_t n);
/* What slots are told on their command line (NULL: left out). */
void slots_set_names(struct slots *ss, const char *node, const char *state_dir);
/* Look for stopped slots every half HEARTBEAT and ping each slot every
 * few heartbeats (more often once it has work), within a third of SILENCE,
 * the slots' own limit (0: none); one that has not answered in
 * PING_TIMEOUT is killed and reported hung. */
void slots_set_timing(struct slots *ss, double heartbeat, double ping_timeout,
		      double silence);

/* Start SLOT as generation GEN (an older one still there is killed
 * first).  A slot that cannot start is reported EXITED at once. */
void slots_spawn(struct slots *ss, uint32_t slot, uint32_t gen);
/* SIGKILL SLOT (if GEN is its current one) and its tasks' processes. */
void slots_kill(struct slots *ss, uint32_t slot, uint32_t gen);
/* Queue a message of TAG for SLOT, if GEN is its live generation. */
void slots_send(struct slots *ss, uint32_t slot, uint32_t gen, uint32_t tag,
		const void *p, size_t n);
/* Tell every slot to stop (each says bye and exits); a slot not yet
 * welcomed is killed. */
void slots_stop(struct slots *ss);
/* SIGKILL every slot; their ends are reported as usual. */
void slots_kill_all(struct slots *ss);
/* SIGKILL every process this agent started, slots and tasks, with
 * nothing reported: for an agent that leaves at once. */
void slots_kill_everything(void);
/* The node leaves (its job ends): SIGTERM every slot, which then starts
 * nothing more and gives back what waits (runner.h); its running task
 * goes on. */
void slots_end(struct slots *ss);
/* SIGTERM every process this agent started: the tasks that run are
 * interrupted (their slots, ended, say so). */
void slots_term_everything(void);

/* Do what is due at NOW: write queued messages, read what slots said,
 * reap the dead, ping, kill the silent.  Returns 1 if anything happened. */
int slots_work(struct slots *ss, double now);
/* When slots_work has something to do next without news (INFINITY:
 * never). */
double slots_next(const struct slots *ss);
/* The descriptor to sleep on: readable when slots_work has news. */
int slots_fd(const struct slots *ss);
/* Slots of the current generation, and processes not yet reaped. */
uint32_t slots_live(const struct slots *ss);
uint32_t slots_procs(const struct slots *ss);
/* Is FD one of the slots' sockets (not the MPI library's)? */
int slots_owns(const struct slots *ss, int fd);
/* Close everything (call once no process is left, or after
 * slots_kill_everything). */
void slots_free(struct slots *ss);

#endif

/*
 * master: the state of ftfarm-master and the calls between its modules.
 *
 *   loop.c      the libev loop: adaptive MPI polling, the cron timer
 *   registry.c  workers: messages, pings, death, respawn
 *   launch.c    starting workers (MPI_Comm_spawn or a static world), probe
 *   nodes.c     node health: the re-initialisation ladder
 *   results.c   batches: submission, results.jsonl, completion
 *   control.c   the control socket the CLI talks to
 *   sched.c     the scheduler (no MPI, no I/O)
 */
#ifndef FT_MASTER_H
#define FT_MASTER_H

#include <ev.h>
#include <jansson.h>
#include <mpi.h>
#include <stdint.h>
#include <sys/types.h>

#include "config.h"
#include "jsonl.h"
#include "plugins.h"
#include "sched.h"
#include "treq.h"

enum wstate {
	W_STARTING = 1,			/* spawned, no hello yet */
	W_IDLE,
	W_BUSY,
	W_SLOW,
	W_DEAD,				/* failed; may be respawned */
	W_INACTIVE,			/* given up on (its node is inactive) */
	W_STOPPED,			/* said bye at shutdown */
};

struct master;

struct worker {
	struct master *m;
	int slot;			/* index in master.workers, its id */
	int node;			/* index in cfg.nodes */
	enum wstate state;
	MPI_Comm comm;			/* intercommunicator, or MPI_COMM_WORLD */
	int rank;			/* its rank in comm */
	pid_t pid;
	char host[64];
	int respawns;			/* times respawned */
	int failures;			/* failures since it last finished a task */
	int respawn_due;		/* respawn once respawn_at has come */
	double respawn_at;		/* not before: the old process must be gone */
	pid_t old_pid;			/* the process being replaced */
	const char *doomed;		/* declare dead at the next cron, why */
	int spawning;			/* its spawn runs on a spawner thread */
	unsigned spawn_gen;		/* which spawn is the current one */
	double started;			/* spawn time (monotonic) */
	double last_heard;
	double last_ping;
	uint64_t ping_seq;
	struct treq *ping;		/* the open ping exchange */
	struct treq *recv;		/* the standing receive */
	uint64_t tasks_done;
	int bye;
	int lingering;			/* dead, but its process was left alive */
};

enum nstate { N_UP = 1, N_INACTIVE };

struct node {
	enum nstate state;
	int reboots;
	int failures;			/* worker failures past the respawn limit */
};

struct batch;
struct control;

struct master {
	struct ft_config cfg;
	struct ft_plugins plugins;
	char *worker_exe;
	struct ev_loop *loop;
	struct treq_set treqs;
	struct sched *sched;
	struct worker *workers;
	int nworkers;
	struct node *nodes;
	struct jsonl events;
	struct batch **batches;
	int nbatches;
	struct control *control;
	int static_world;		/* launch == static */
	int can_kill;			/* may SIGKILL hung workers (not MPICH static) */
	int async_spawn;		/* respawns run on the spawner thread */
	char mpi_version[160];
	int stopping;			/* 1: stopping workers, 2: leave the loop */
	double stop_deadline;
	double started;
	int hot;			/* MPI traffic recently: poll eagerly */
	uint64_t msgs_in, msgs_out, results_in, duplicates, bad_msgs;
};

/* loop.c */
int loop_init(struct master *m);
void loop_run(struct master *m);
/* Something for MPI to do: poll eagerly for a while. */
void loop_kick(struct master *m);

/* registry.c */
void registry_init(struct master *m);
void registry_sched_ops(struct master *m, struct sched_ops *ops);
/* Begin a worker's life on COMM/RANK: post its receive, wait for hello. */
void registry_attach(struct master *m, struct worker *w, MPI_Comm comm,
		     int rank);
void registry_dispatch(struct master *m, struct worker *w);
void registry_dispatch_all(struct master *m);
/* WORKER failed for REASON: kill it, lose its tasks, climb the ladder. */
void registry_dead(struct master *m, struct worker *w, const char *reason);
/* Take W out of service for good (its node was given up on). */
void registry_retire(struct master *m, struct worker *w, const char *reason);
void registry_cron(struct master *m, double now);
void registry_stop_all(struct master *m);
/* Static launch only: has any rank of the world died? */
int registry_lost_ranks(const struct master *m);
int registry_all_stopped(struct master *m);
void registry_kill_leftovers(struct master *m);
const char *registry_state_name(enum wstate s);
int registry_live(const struct worker *w);

/* launch.c */
/* Is the MPI able to spawn processes?  Fills m->mpi_version. */
int launch_probe(struct master *m);
/* Spawn a process for W on its node.  0, or -1 with ERR. */
int launch_spawn(struct master *m, struct worker *w, char *err, size_t n);
/* Static mode: attach every rank of the world.  0 or -1 with ERR. */
int launch_static(struct master *m, char *err, size_t n);
/* Spawning on threads (needs MPI_THREAD_MULTIPLE): enable it (0, or -1:
 * spawn in the loop instead); is any spawn under way; start one for W
 * (0, or -1); take a finished one: its worker and the worker's spawn_gen
 * at the start (COMM its intercommunicator, or MPI_COMM_NULL with ERR),
 * or NULL if none has finished. */
int launch_async_init(struct master *m);
int launch_async_busy(void);
int launch_async_start(struct master *m, struct worker *w);
struct worker *launch_async_poll(struct master *m, MPI_Comm *comm,
				 unsigned *gen, char *err, size_t n);

/* nodes.c */
void nodes_init(struct master *m);
/* W failed past the respawn limit: decide for its node. */
void nodes_worker_failed(struct master *m, struct worker *w);
const char *nodes_state_name(enum nstate s);

/* results.c */
/* Accept a checked batch; returns its id, or -1 with ERR. */
long results_submit(struct master *m, json_t *batch, char *err, size_t n);
void results_record(struct master *m, uint64_t tid, int worker,
		    const void *result);
void results_fail(struct master *m, uint64_t tid, const char *reason);
struct batch *results_find(struct master *m, long id);
int results_finished(const struct batch *b);
json_t *results_batch_json(const struct batch *b);
void results_flush(struct master *m);
void results_close(struct master *m);

/* control.c */
int control_open(struct master *m, char *err, size_t n);
void control_close(struct master *m);
/* Batch B finished: answer whoever waits for it. */
void control_batch_done(struct master *m, struct batch *b);

/* events (events.c) */
void events_flush(struct master *m);

#endif

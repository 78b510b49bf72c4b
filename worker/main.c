/*
 * ftfarm-worker: the node agent, one MPI process per node.
 *
 * Spawned by the master (dynamic launch: `ftfarm-worker --node-index I
 * --node NAME --state-dir DIR`, the master rank 0 at the other end of the
 * parent intercommunicator) or started as rank I+1 of a static world
 * whose rank 0 is the master.  It runs no task itself: it starts the
 * node's slots (ftfarm-slot) and carries their messages.  --node and
 * --state-dir also say whose agent this is, to whoever looks at the
 * process list (an operator, a node's power control); --epoch is
 * accepted and ignored.
 */
#include <dlfcn.h>
#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "agent_mpi.h"
#include "hostmem.h"
#include "hugeheap.h"
#include "proto.h"

/* The agent naps between its polls of MPI by itself (agent.c): it
 * needs none of the sched_yield that Open MPI makes after each empty poll
 * when the launch asks for it (cli/launch.c, for the ranks that wait
 * inside MPI: the master's spawns, a gang's collectives).  On a node with
 * hundreds of runnable processes each yield sent the agent behind all of
 * them, and a ping waited up to a second for its answer.  Inside MPI_Init
 * it only waits, and yields there still: eight agents spinning in it on 2
 * CPUs slowed the start.  Open MPI exports the switch; other MPIs lack
 * the symbol, and keep their ways. */
static void
no_yield(void)
{
	void (*set)(bool);

	*(void **)&set = dlsym(RTLD_DEFAULT,
			       "opal_progress_set_yield_when_idle");
	if (set)
		set(false);
}

/* The end of the job (Slurm's time limit, scancel) sends SIGTERM to
 * every process of it at once.  The agent lives on, blocking it, so that
 * what its slots then report (their tasks interrupted, runner.h) still
 * reaches the master; the master's stop, or the SIGKILL that follows,
 * ends it.  Blocked before MPI_Init: MPI's threads inherit the mask, and
 * a thread that did not block it would take the signal's default.  The
 * slots start with an empty mask (slotproc.c). */
static void
outlive_term(void)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigprocmask(SIG_BLOCK, &set, NULL);
}

int
main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "node-index", required_argument, NULL, 'i' },
		{ "node", required_argument, NULL, 'n' },
		{ "state-dir", required_argument, NULL, 'd' },
		{ "epoch", required_argument, NULL, 'e' },
		{ "version", no_argument, NULL, 'v' },
		{ NULL, 0, NULL, 0 },
	};
	struct agent_args args = { .index = -1 };
	MPI_Comm parent;
	int c, rc;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c == 'v') {
			/* Without MPI: what a host probe checks. */
			printf(FT_WORKER_VERSION_FMT "\n", FT_PROTO_VERSION);
			return 0;
		}
		if (c == 'i')
			args.index = atoi(optarg);
		else if (c == 'n')
			args.node = optarg;
		else if (c == 'd')
			args.state_dir = optarg;
		else if (c != 'e')
			return 2;
	}
	hugeheap_exec(argv);	/* relay buffers in huge pages */
	hostmem_oom_protect();	/* its tasks go first (hostmem.h) */
	outlive_term();
	MPI_Init(&argc, &argv);
	no_yield();
	MPI_Comm_get_parent(&parent);
	args.comm = parent;
	if (parent == MPI_COMM_NULL) {
		args.comm = MPI_COMM_WORLD;
		MPI_Comm_rank(MPI_COMM_WORLD, &c);
		args.index = c - 1;
	}
	MPI_Comm_set_errhandler(args.comm, MPI_ERRORS_RETURN);
	if (args.index < 0) {
		fprintf(stderr, "ftfarm-worker: no --node-index given\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	rc = agent_mpi_run(&args);
	if (rc == AGENT_NO_FINALIZE)
		return 0;	/* ranks of our world died: finalize would hang */
	MPI_Finalize();
	return rc;
}

/*
 * ftfarm-worker: runs tasks for the master.
 *
 * Spawned by the master (dynamic launch: `ftfarm-worker --slot N --node
 * NAME --state-dir DIR`, the master at the other end of the parent
 * intercommunicator) or started as rank N+1 of a static world whose rank 0
 * is the master.  --node and --state-dir only say whose worker this is, to
 * whoever looks at the process list (an operator, a node's power
 * control).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"
#include "plugins.h"
#include "proto.h"
#include "util.h"

#define TUNABLES "GLIBC_TUNABLES"
#define HUGE_HEAP "glibc.malloc.hugetlb=1"
#define TUNABLES_WERE "FTFARM_WORKER_TUNABLES_WERE"	/* "-": unset */
#define THP_MODES "/sys/kernel/mm/transparent_hugepage/enabled"

/* Does the kernel give transparent huge pages to a range that asks? */
static int
thp_offered(void)
{
	char modes[128] = "";
	FILE *f = fopen(THP_MODES, "re");

	if (f == NULL)
		return 0;
	if (fgets(modes, sizeof(modes), f) == NULL)
		modes[0] = '\0';
	fclose(f);
	return strstr(modes, "[always]") || strstr(modes, "[madvise]");
}

/* Put GLIBC_TUNABLES back as it was before heap_huge_pages: the processes
 * of exec tasks inherit the environment, and theirs is the user's. */
static void
tunables_restore(const char *were)
{
	if (were[0] == '=')
		setenv(TUNABLES, were + 1, 1);
	else
		unsetenv(TUNABLES);
	unsetenv(TUNABLES_WERE);
}

/* Have glibc ask for transparent huge pages for the heap.  A task's big
 * buffers (a word count's partitions and sort keys, some MiB) are touched
 * afresh by the first task after the start, and by the first after the
 * runner has trimmed the heap; in 4 KiB pages that is about 800 faults
 * per job on each worker, and a fault costs about 15 us on a VM, against
 * one fault per 2 MiB.  glibc reads its tunables once, when the process
 * starts, so the worker execs itself once with glibc.malloc.hugetlb=1
 * added, before MPI_Init: the exec keeps the pid, the start time and the
 * descriptors the launcher gave.  Nothing changes when the kernel has
 * THP off, or the user set the tunable either way. */
static void
heap_huge_pages(char **argv)
{
	const char *were = getenv(TUNABLES_WERE), *old = getenv(TUNABLES);
	char self[4096], *want, *keep;
	ssize_t n;

	if (were) {
		tunables_restore(were);
		return;
	}
	if ((old && strstr(old, "glibc.malloc.hugetlb")) || !thp_offered())
		return;
	/* By its path: the process keeps its name (not "exe"). */
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0 || (size_t)n >= sizeof(self) - 1)
		return;
	self[n] = '\0';
	keep = old ? ft_asprintf("=%s", old) : ft_strdup("-");
	want = old && *old ? ft_asprintf("%s:" HUGE_HEAP, old)
			   : ft_strdup(HUGE_HEAP);
	setenv(TUNABLES_WERE, keep, 1);
	setenv(TUNABLES, want, 1);
	execv(self, argv);
	tunables_restore(keep);	/* no exec: small pages then */
	free(keep);
	free(want);
}

int
main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "slot", required_argument, NULL, 's' },
		{ "node", required_argument, NULL, 'n' },
		{ "state-dir", required_argument, NULL, 'd' },
		{ "epoch", required_argument, NULL, 'e' },
		{ "version", no_argument, NULL, 'v' },
		{ NULL, 0, NULL, 0 },
	};
	struct ft_plugins pl;
	MPI_Comm parent, comm;
	char err[512], *dir;
	int c, provided, slot = -1, rank, rc;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c == 'v') {
			/* Without MPI: what a host probe checks. */
			printf(FT_WORKER_VERSION_FMT "\n", FT_PROTO_VERSION);
			return 0;
		}
		if (c == 's')
			slot = atoi(optarg);
		else if (c != 'n' && c != 'd' && c != 'e')
			return 2;
	}
	heap_huge_pages(argv);
	/* Every process a task starts inherits this: when this worker is
	 * killed, the master finds and kills what its tasks left running. */
	snprintf(err, sizeof(err), "%d", (int)getpid());
	setenv(FT_WORKER_ENV, err, 1);
	snprintf(err, sizeof(err), "%llu", ft_proc_start(getpid()));
	setenv(FT_WORKER_START_ENV, err, 1);
	/* Memory a task frees stays for the next task until the runner has
	 * been idle a while (runner.c trims then), on one heap for every
	 * thread so that the trim gives all of it back. */
	ft_memory_keep(1);
	MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
	MPI_Comm_get_parent(&parent);
	if (parent != MPI_COMM_NULL) {
		comm = parent;
		rank = 0;
	} else {
		comm = MPI_COMM_WORLD;
		rank = 0;
		MPI_Comm_rank(MPI_COMM_WORLD, &c);
		slot = c - 1;
	}
	MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
	dir = ft_plugins_default_dir();
	if (slot < 0 || ft_plugins_load(&pl, dir, err, sizeof(err)) == -1) {
		fprintf(stderr, "ftfarm-worker: %s\n",
			slot < 0 ? "no --slot given" : err);
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	free(dir);
	rc = agent_run(comm, rank, slot, &pl);
	if (rc == AGENT_NO_FINALIZE)
		return 0;	/* ranks of our world died: finalize would hang */
	MPI_Finalize();
	ft_plugins_free(&pl);
	return rc;
}

/* launch: the MPI launcher's command line and environment (launch.h). */
#include "launch.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hosts.h"
#include "util.h"

extern char **environ;

void
ft_argv_add(struct ft_argv *a, const char *s)
{
	a->v = ft_realloc(a->v, (size_t)(a->n + 2) * sizeof(char *));
	a->v[a->n++] = ft_strdup(s);
	a->v[a->n] = NULL;
}

void
ft_argv_free(struct ft_argv *a)
{
	int i;

	for (i = 0; i < a->n; i++)
		free(a->v[i]);
	free(a->v);
	a->v = NULL;
	a->n = 0;
}

/* Does the config's own "mpirun_args" say WHAT already (an option or an
 * MCA name)?  Then it is the user's choice, not ours. */
static int
user_says(const struct ft_config *cfg, const char *what)
{
	int i;

	for (i = 0; i < cfg->nmpirun_args; i++)
		if (strcmp(cfg->mpirun_args[i], what) == 0)
			return 1;
	return 0;
}

int
launch_own_hostfile(const struct ft_config *cfg)
{
	return user_says(cfg, "--hostfile") || user_says(cfg, "-hostfile") ||
	       user_says(cfg, "--machinefile") || user_says(cfg, "-H") ||
	       user_says(cfg, "--host");
}

static void
add_mca(struct ft_argv *a, const char *name, const char *value)
{
	ft_argv_add(a, "--mca");
	ft_argv_add(a, name);
	ft_argv_add(a, value);
}

/* Where the job runs: the loopback when every node is this machine;
 * otherwise the hostfile of the state dir (hosts.h), reached through the
 * config's "ssh", with MPI traffic on its "network" when it names one. */
static void
host_args(struct ft_argv *a, const struct ft_config *cfg)
{
	const char *net = cfg->network;
	char *hf;

	if (!cfg->remote && net == NULL)
		net = "lo";
	if (net && !user_says(cfg, "btl_tcp_if_include"))
		add_mca(a, "btl_tcp_if_include", net);
	if (net && !user_says(cfg, "oob_tcp_if_include"))
		add_mca(a, "oob_tcp_if_include", net);
	if (cfg->slurm) {
		/* One lost node must cost only its own workers: without
		 * this srun kills every daemon of the job. */
		if (!user_says(cfg, "plm_slurm_args"))
			add_mca(a, "plm_slurm_args", "--no-kill");
		return;
	}
	if (!cfg->remote)
		return;
	if (!user_says(cfg, "plm_rsh_agent"))
		add_mca(a, "plm_rsh_agent", cfg->ssh);
	if (!launch_own_hostfile(cfg)) {
		hf = ft_asprintf("%s/%s", cfg->state_dir, HOSTS_FILE);
		ft_argv_add(a, "--hostfile");
		ft_argv_add(a, hf);
		free(hf);
	}
}

/* Open MPI's options: survive dead workers, share cores, stay on the
 * loopback when every node is this machine, hand the job's identity to
 * processes on other hosts too. */
static void
openmpi_args(struct ft_argv *a, const struct launch_job *j)
{
	static const char *mca[][2] = {
		{ "btl", "self,vader,tcp" },
		/* The ob1 messaging layer alone: without it every process's
		 * MPI_Init probes the others (cm, ucx) first, which made a
		 * spawn here cost four times as much. */
		{ "pml", "ob1" },
		{ "mpi_yield_when_idle", "1" },
		{ "orte_abort_on_non_zero_status", "0" },
		/* Every killed worker makes the master's TCP transport send
		 * "peer hung up" help messages to mpirun; under a stream of
		 * kills mpirun misread one ("Data unpack would read past end
		 * of buffer") and from then on a spawned worker hung in
		 * PMIx_Init and the master in MPI_Comm_spawn.  Quiet, it went
		 * through 380 respawns without a hang.  ftfarm reports MPI
		 * errors itself. */
		{ "orte_execute_quiet", "1" },
	};
	size_t i;

	if (geteuid() == 0)
		ft_argv_add(a, "--allow-run-as-root");
	ft_argv_add(a, "--oversubscribe");
	ft_argv_add(a, "--bind-to");
	ft_argv_add(a, "none");
	ft_argv_add(a, "--enable-recovery");
	for (i = 0; i < FT_ARRAY_LEN(mca); i++) {
		ft_argv_add(a, "--mca");
		ft_argv_add(a, mca[i][0]);
		ft_argv_add(a, mca[i][1]);
	}
	if (j->cfg == NULL) {
		add_mca(a, "btl_tcp_if_include", "lo");
		add_mca(a, "oob_tcp_if_include", "lo");
	} else {
		host_args(a, j->cfg);
	}
	if (j->epoch) {
		ft_argv_add(a, "-x");
		ft_argv_add(a, FT_STATE_DIR_ENV);
		ft_argv_add(a, "-x");
		ft_argv_add(a, FT_EPOCH_ENV);
	}
}

void
launch_argv(struct ft_argv *a, const struct launch_job *j)
{
	const struct ft_config *cfg = j->cfg;
	char *dir = ft_exe_dir();
	char *master = ft_asprintf("%s/ftfarm-master", dir);
	char *worker = ft_asprintf("%s/ftfarm-worker", dir);
	char num[32];
	int i;

	ft_argv_add(a, FT_MPIEXEC);
	if (strcmp(FT_MPI_FLAVOR, "openmpi") == 0)
		openmpi_args(a, j);
	for (i = 0; cfg && i < cfg->nmpirun_args; i++)
		ft_argv_add(a, cfg->mpirun_args[i]);
	ft_argv_add(a, "-n");
	ft_argv_add(a, "1");
	ft_argv_add(a, master);
	if (cfg == NULL) {
		ft_argv_add(a, "--probe");
	} else {
		ft_argv_add(a, "-c");
		ft_argv_add(a, j->config);
	}
	if (j->epoch) {
		snprintf(num, sizeof(num), "%llu", j->epoch);
		ft_argv_add(a, "--epoch");
		ft_argv_add(a, num);
	}
	if (j->restart_reason) {
		ft_argv_add(a, "--restart-reason");
		ft_argv_add(a, j->restart_reason);
	}
	if (cfg && cfg->launch == FT_LAUNCH_STATIC) {
		/* One agent per node: rank N + 1 is node N's. */
		snprintf(num, sizeof(num), "%d", cfg->nnodes);
		ft_argv_add(a, ":");
		ft_argv_add(a, "-n");
		ft_argv_add(a, num);
		ft_argv_add(a, worker);
		if (j->epoch) {
			snprintf(num, sizeof(num), "%llu", j->epoch);
			ft_argv_add(a, "--epoch");
			ft_argv_add(a, num);
		}
	}
	free(dir);
	free(master);
	free(worker);
}

char *
launch_dir_entry(const struct ft_config *cfg)
{
	char *real = realpath(cfg->state_dir, NULL);
	char *entry = ft_asprintf("%s=%s", FT_STATE_DIR_ENV,
				  real ? real : cfg->state_dir);

	free(real);
	return entry;
}

const char *
launch_epoch_entry(unsigned long long epoch, char *buf, size_t n)
{
	snprintf(buf, n, "%s=%llu", FT_EPOCH_ENV, epoch);
	return buf;
}

/* Is ENTRY "NAME=..."? */
static int
env_is(const char *entry, const char *name)
{
	size_t len = strlen(name);

	return strncmp(entry, name, len) == 0 && entry[len] == '=';
}

void
launch_env(struct ft_argv *e, const struct launch_job *j)
{
	char buf[64], **p;

	for (p = environ; p && *p; p++)
		if (!env_is(*p, FT_STATE_DIR_ENV) && !env_is(*p, FT_EPOCH_ENV))
			ft_argv_add(e, *p);
	if (j->cfg && j->epoch) {
		char *dir = launch_dir_entry(j->cfg);

		ft_argv_add(e, dir);
		ft_argv_add(e, launch_epoch_entry(j->epoch, buf, sizeof(buf)));
		free(dir);
	}
}

/* In the child: its own session, output to LOG, default signals, then
 * the launcher.  Never returns. */
static void
exec_launcher(struct ft_argv *a, struct ft_argv *e, const char *log)
{
	int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW, 0600);
	int null = open("/dev/null", O_RDONLY);
	sigset_t none;
	int sig;

	setsid();
	for (sig = 1; sig < NSIG; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			signal(sig, SIG_DFL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if (fd >= 0) {
		dup2(fd, 1);
		dup2(fd, 2);
	}
	if (null >= 0)
		dup2(null, 0);
	execvpe(a->v[0], a->v, e->v);
	fprintf(stderr, "ftfarm: cannot run %s: %s\n", a->v[0], strerror(errno));
	_exit(127);
}

pid_t
launch_spawn(const struct launch_job *j, const char *log)
{
	struct ft_argv a = { 0 }, e = { 0 };
	pid_t pid;
	int err;

	launch_argv(&a, j);
	launch_env(&e, j);
	pid = fork();
	if (pid == 0)
		exec_launcher(&a, &e, log);
	err = errno;
	ft_argv_free(&a);
	ft_argv_free(&e);
	errno = err;
	return pid;
}

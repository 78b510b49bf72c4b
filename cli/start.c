/*
 * Starting and stopping a cluster: ftfarm start, stop and probe.
 *
 * start runs the MPI launcher (FT_MPIEXEC, chosen at build time) on
 * ftfarm-master in a session of its own, output to <state_dir>/mpirun.log,
 * and returns once every worker has registered.  stop asks the master to
 * stop, waits for the launcher to end and kills any worker left behind.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "ctl.h"
#include "proto.h"
#include "statedir.h"
#include "util.h"

#define STOP_WAIT 30.0		/* seconds the launcher gets to finish */
#define MASTER_GONE_WAIT 3.0	/* ... once the master has left */

struct argv {
	char **v;
	int n;
};

static void
arg(struct argv *a, const char *s)
{
	a->v = ft_realloc(a->v, (size_t)(a->n + 2) * sizeof(char *));
	a->v[a->n++] = ft_strdup(s);
	a->v[a->n] = NULL;
}

static void
argv_free(struct argv *a)
{
	int i;

	for (i = 0; i < a->n; i++)
		free(a->v[i]);
	free(a->v);
}

static int
all_local(const struct ft_config *cfg)
{
	int i;

	for (i = 0; i < cfg->nnodes; i++)
		if (!ft_host_is_local(cfg->nodes[i].host))
			return 0;
	return 1;
}

/* Open MPI's options: survive dead workers, share cores, stay on the
 * loopback when every node is this machine. */
static void
openmpi_args(struct argv *a, const struct ft_config *cfg)
{
	static const char *mca[][2] = {
		{ "btl", "self,vader,tcp" },
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
		arg(a, "--allow-run-as-root");
	arg(a, "--oversubscribe");
	arg(a, "--bind-to");
	arg(a, "none");
	arg(a, "--enable-recovery");
	for (i = 0; i < FT_ARRAY_LEN(mca); i++) {
		arg(a, "--mca");
		arg(a, mca[i][0]);
		arg(a, mca[i][1]);
	}
	if (cfg == NULL || all_local(cfg)) {
		arg(a, "--mca");
		arg(a, "btl_tcp_if_include");
		arg(a, "lo");
		arg(a, "--mca");
		arg(a, "oob_tcp_if_include");
		arg(a, "lo");
	}
}

/* The launcher command for CFG (NULL: the probe). */
static void
launcher(struct argv *a, const struct ft_config *cfg, const char *config)
{
	char *dir = ft_exe_dir();
	char *master = ft_asprintf("%s/ftfarm-master", dir);
	char *worker = ft_asprintf("%s/ftfarm-worker", dir);
	char nw[16];
	int i;

	arg(a, FT_MPIEXEC);
	if (strcmp(FT_MPI_FLAVOR, "openmpi") == 0)
		openmpi_args(a, cfg);
	for (i = 0; cfg && i < cfg->nmpirun_args; i++)
		arg(a, cfg->mpirun_args[i]);
	arg(a, "-n");
	arg(a, "1");
	arg(a, master);
	if (cfg == NULL) {
		arg(a, "--probe");
	} else {
		arg(a, "-c");
		arg(a, config);
	}
	if (cfg && cfg->launch == FT_LAUNCH_STATIC) {
		snprintf(nw, sizeof(nw), "%d", cfg->nworkers);
		arg(a, ":");
		arg(a, "-n");
		arg(a, nw);
		arg(a, worker);
	}
	free(dir);
	free(master);
	free(worker);
}

/* Is the master of C's state dir answering? */
static int
master_answers(struct cli *c)
{
	char err[256];
	int fd = ctl_connect(c->cfg.state_dir, err, sizeof(err));

	if (fd == -1)
		return 0;
	close(fd);
	return 1;
}

/* In the child: own session, output to LOG, then the launcher. */
static void
exec_launcher(struct argv *a, const char *log)
{
	int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW, 0600);
	int null = open("/dev/null", O_RDONLY);

	setsid();
	if (fd >= 0) {
		dup2(fd, 1);
		dup2(fd, 2);
	}
	if (null >= 0)
		dup2(null, 0);
	execvp(a->v[0], a->v);
	fprintf(stderr, "ftfarm: cannot run %s: %s\n", a->v[0], strerror(errno));
	_exit(127);
}

/* Print the lines of LOG from OFFSET that say what went wrong. */
static void
show_failure(const char *log, size_t offset)
{
	size_t len = 0;
	char *text = ft_read_file(log, &len), *line, *save = NULL;
	int shown = 0;

	if (text == NULL || offset > len)
		goto out;
	for (line = strtok_r(text + offset, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save))
		if (strstr(line, "ftfarm") || strstr(line, "rror")) {
			fprintf(stderr, "  %s\n", line);
			shown++;
		}
	if (!shown)
		fprintf(stderr, "  (see %s)\n", log);
out:
	free(text);
}

/* Poll the master until every worker has registered.  0 when they have,
 * 1 when the launcher died or time ran out. */
static int
wait_ready(struct cli *c, pid_t pid, const char *log, size_t offset)
{
	double until = ft_now() + c->cfg.start_timeout + c->cfg.nworkers;
	int status;

	while (ft_now() < until) {
		json_t *req, *ans;
		char err[256];

		if (waitpid(pid, &status, WNOHANG) == pid) {
			cli_err("the master did not start:");
			show_failure(log, offset);
			return 1;
		}
		req = ctl_request_new(CTL_STATUS);
		ans = ctl_request(c->cfg.state_dir, req, 5, err, sizeof(err));
		json_decref(req);
		if (ans) {
			json_t *ws = json_object_get(ans, "workers"), *w;
			size_t i, up = 0;

			json_array_foreach(ws, i, w) {
				const char *s = json_string_value(
					json_object_get(w, "state"));

				up += strcmp(s, "idle") == 0 || strcmp(s, "busy") == 0;
			}
			if (up == json_array_size(ws)) {
				printf("cluster %s up: %zu workers on %d nodes "
				       "(%s launch, %s)\n", c->cfg.name, up,
				       c->cfg.nnodes,
				       json_string_value(json_object_get(ans, "launch")),
				       json_string_value(json_object_get(ans, "mpi")));
				json_decref(ans);
				return 0;
			}
			json_decref(ans);
		}
		ft_sleep(0.05);
	}
	cli_err("not every worker registered within %.0f s; see "
		"`ftfarm status -c %s` and %s", c->cfg.start_timeout, c->config,
		log);
	return 1;
}

/* start -c CFG [--foreground] */
int
cli_start(struct cli *c)
{
	struct argv a = { 0 };
	char *log;
	size_t offset = 0;
	pid_t pid;
	int rc;

	char err[512];
	pid_t holder;

	if (sd_prepare(c->cfg.state_dir, err, sizeof(err)) == -1) {
		cli_err("%s", err);
		return 1;
	}
	holder = sd_locked_by(c->cfg.state_dir);
	if (holder != 0 || master_answers(c)) {
		cli_err("cluster %s is already running (state dir %s, master "
			"pid %ld)", c->cfg.name, c->cfg.state_dir,
			(long)holder);
		return 1;
	}
	launcher(&a, &c->cfg, c->config);
	if (c->foreground) {
		execvp(a.v[0], a.v);
		cli_err("cannot run %s: %s", a.v[0], strerror(errno));
		return 1;
	}
	log = ft_asprintf("%s/mpirun.log", c->cfg.state_dir);
	free(ft_read_file(log, &offset));
	pid = fork();
	if (pid == 0)
		exec_launcher(&a, log);
	argv_free(&a);
	if (pid > 0)
		sd_write_pid(c->cfg.state_dir, "mpirun.pid", pid);
	rc = pid < 0 ? 1 : wait_ready(c, pid, log, offset);
	free(log);
	return rc;
}

/* The workers the master reported (their rows), so stop can check they
 * are gone. */
static json_t *
worker_rows(struct cli *c)
{
	json_t *req = ctl_request_new(CTL_STATUS);
	char err[256];
	json_t *ans = ctl_request(c->cfg.state_dir, req, 5, err, sizeof(err));
	json_t *rows = json_incref(json_object_get(ans, "workers"));

	json_decref(req);
	json_decref(ans);
	return rows ? rows : json_array();
}

/* Is PID, started at START, a live worker of the cluster of STATE_DIR? */
static int
is_worker(pid_t pid, unsigned long long start, const char *state_dir)
{
	char *path = ft_asprintf("/proc/%d/cmdline", (int)pid);
	size_t len = 0, i;
	char *text = ft_read_file(path, &len);
	int ours = 0;

	for (i = 0; text && i + 1 < len; i += strlen(text + i) + 1)
		if (strcmp(text + i, "--state-dir") == 0)
			ours = strcmp(text + i + strlen(text + i) + 1,
				      state_dir) == 0;
	free(path);
	free(text);
	return ours && ft_proc_is(pid, start);
}

static int
wait_gone(pid_t pid, double seconds)
{
	double until = ft_now() + seconds;

	while (ft_pid_alive(pid) && ft_now() < until)
		ft_sleep(0.02);
	return !ft_pid_alive(pid);
}

/* Wait for the launcher to finish: up to STOP_WAIT, or MASTER_GONE_WAIT
 * once the master has left (the launcher may then wait for a process that
 * will never finish).  1 if it finished. */
static int
wait_launcher(pid_t launcher, pid_t master)
{
	double until = ft_now() + STOP_WAIT, master_gone = 0;

	while (ft_pid_alive(launcher) && ft_now() < until) {
		if (master > 0 && !ft_pid_alive(master)) {
			if (master_gone == 0)
				master_gone = ft_now();
			else if (ft_now() - master_gone > MASTER_GONE_WAIT)
				break;
		}
		ft_sleep(0.02);
	}
	return !ft_pid_alive(launcher);
}

/* Kill the workers of ROWS (status rows) still alive, and what their
 * tasks started, if the master could not.  Returns how many. */
static int
kill_workers(json_t *rows, const char *state_dir)
{
	const struct ctl_col *col = ctl_worker_cols;
	char entry[64], entry2[64];
	int strays = 0;
	json_t *w;
	size_t i;

	json_array_foreach(rows, i, w) {
		pid_t pid = (pid_t)json_integer_value(json_object_get(w,
						col[CTL_W_PID].key));
		unsigned long long start = (unsigned long long)
			json_integer_value(json_object_get(w,
						col[CTL_W_START].key));

		if (pid <= 0 || start == 0)
			continue;
		if (is_worker(pid, start, state_dir) &&
		    kill(pid, SIGKILL) == 0)
			strays++;
		snprintf(entry, sizeof(entry), "%s=%d", FT_WORKER_ENV,
			 (int)pid);
		snprintf(entry2, sizeof(entry2), "%s=%llu",
			 FT_WORKER_START_ENV, start);
		strays += ft_kill_by_env(entry, entry2);
	}
	return strays;
}

/* stop -c CFG: ask the master to stop, wait for the launcher, and kill
 * what is left of the cluster, each process checked to be the one the
 * pid files and the master named (pid and start time), never a stranger
 * that reused a pid. */
int
cli_stop(struct cli *c)
{
	pid_t launcher_pid = sd_read_pid(c->cfg.state_dir, "mpirun.pid");
	pid_t master_pid = sd_read_pid(c->cfg.state_dir, "master.pid");
	json_t *rows = worker_rows(c), *req;
	char err[256], *path;
	int strays = 0;

	req = ctl_request_new(CTL_STOP);
	json_decref(ctl_request(c->cfg.state_dir, req, 5, err, sizeof(err)));
	json_decref(req);
	if (launcher_pid > 0 && !wait_launcher(launcher_pid, master_pid)) {
		cli_err("the launcher (pid %d) did not finish; terminating it",
			(int)launcher_pid);
		kill(-launcher_pid, SIGTERM);
		if (!wait_gone(launcher_pid, 5))
			kill(-launcher_pid, SIGKILL);
		wait_gone(launcher_pid, 5);
	}
	/* start ran the launcher as the leader of a session of its own:
	 * whatever is left in that session (a worker whose spawn never
	 * finished, a task's process) belongs to this cluster. */
	if (launcher_pid > 0)
		strays += ft_kill_session(launcher_pid);
	strays += kill_workers(rows, c->cfg.state_dir);
	json_decref(rows);
	if (strays)
		cli_err("killed %d processes left behind", strays);
	path = ft_asprintf("%s/mpirun.pid", c->cfg.state_dir);
	unlink(path);
	free(path);
	printf("cluster %s stopped\n", c->cfg.name);
	return 0;
}

/* probe: run the master once to ask the MPI what it can do. */
int
cli_probe(struct cli *c)
{
	struct argv a = { 0 };
	pid_t pid;
	int status = 1;

	(void)c;
	launcher(&a, NULL, NULL);
	pid = fork();
	if (pid == 0) {
		execvp(a.v[0], a.v);
		_exit(127);
	}
	argv_free(&a);
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		return 1;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

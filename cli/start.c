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

static pid_t
read_pid(const char *state_dir, const char *name)
{
	char *path = ft_asprintf("%s/%s", state_dir, name);
	char *text = ft_read_file(path, NULL);
	pid_t pid = text ? (pid_t)atoi(text) : 0;

	free(path);
	free(text);
	return pid;
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
	int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
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
	char *log, *pidfile, *text;
	size_t offset = 0;
	pid_t pid;
	int rc;

	if (ft_mkdirs(c->cfg.state_dir) == -1) {
		cli_err("%s: %s", c->cfg.state_dir, strerror(errno));
		return 1;
	}
	if (master_answers(c)) {
		cli_err("cluster %s is already running (state dir %s)",
			c->cfg.name, c->cfg.state_dir);
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
	pidfile = ft_asprintf("%s/mpirun.pid", c->cfg.state_dir);
	text = ft_asprintf("%d\n", (int)pid);
	ft_write_file_atomic(pidfile, text, strlen(text));
	rc = pid < 0 ? 1 : wait_ready(c, pid, log, offset);
	free(text);
	free(pidfile);
	free(log);
	return rc;
}

/* Worker processes the master reported, so stop can check they are gone. */
static json_t *
worker_pids(struct cli *c)
{
	json_t *req = ctl_request_new(CTL_STATUS);
	char err[256];
	json_t *ans = ctl_request(c->cfg.state_dir, req, 5, err, sizeof(err));
	json_t *pids = json_array(), *w;
	size_t i;

	json_decref(req);
	json_array_foreach(json_object_get(ans, "workers"), i, w)
		json_array_append(pids, json_object_get(w, "pid"));
	json_decref(ans);
	return pids;
}

/* Is PID a live ftfarm-worker? */
static int
is_worker(pid_t pid)
{
	char *path = ft_asprintf("/proc/%d/cmdline", (int)pid);
	char *text = ft_read_file(path, NULL);
	int yes = text && strstr(text, "ftfarm-worker") && ft_pid_alive(pid);

	free(path);
	free(text);
	return yes;
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

/* stop -c CFG */
int
cli_stop(struct cli *c)
{
	pid_t launcher_pid = read_pid(c->cfg.state_dir, "mpirun.pid");
	pid_t master_pid = read_pid(c->cfg.state_dir, "master.pid");
	json_t *pids = worker_pids(c), *p, *req;
	char err[256], *path;
	int strays = 0;
	size_t i;

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
	json_array_foreach(pids, i, p) {
		pid_t pid = (pid_t)json_integer_value(p);

		char entry[64];

		if (pid > 0 && is_worker(pid)) {
			kill(pid, SIGKILL);
			strays++;
		}
		/* And whatever its tasks started, if the master could not. */
		snprintf(entry, sizeof(entry), "%s=%d", FT_WORKER_ENV, (int)pid);
		if (pid > 0)
			strays += ft_kill_by_env(entry);
	}
	json_decref(pids);
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

/*
 * Starting and stopping a cluster: ftfarm start, stop and probe.
 *
 * start leaves a supervisor (supervise.h) that takes the state dir's
 * lease, runs the MPI launcher (launch.h) and restarts the job when it
 * dies; `ftfarm start` itself returns once every worker has registered,
 * with what the supervisor reported through a pipe.  stop sets the lease
 * stopping (no more restarts), asks the master to stop, waits for the
 * supervisor and any standby of this host to leave, then for the
 * launcher, and kills whatever is left of the cluster.
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
#include "hosts.h"
#include "launch.h"
#include "lease.h"
#include "proto.h"
#include "statedir.h"
#include "supervise.h"
#include "util.h"

#define STOP_WAIT 30.0		/* seconds the launcher gets to finish */
#define MASTER_GONE_WAIT 3.0	/* ... once the master has left */
#define SUP_WAIT (STOP_WAIT + 15.0)	/* ... the supervisor, to leave */
#define STANDBY_WAIT 5.0	/* ... a standby, beyond a lease */

/* In the supervisor's child after fork: a session of its own, stdin
 * /dev/null, output to supervisor.log, no descriptor but those and KEEP
 * (moved to 3).  0, or -1. */
static int
daemonize(struct cli *c, int keep)
{
	char *log = ft_asprintf("%s/supervisor.log", c->cfg.state_dir);
	int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW, 0600);
	int null = open("/dev/null", O_RDWR);

	free(log);
	keep = fcntl(keep, F_DUPFD_CLOEXEC, 10);
	if (keep < 0 || fd < 0 || null < 0 || setsid() == -1)
		return -1;
	if (dup2(null, 0) == -1 || dup2(fd, 1) == -1 || dup2(fd, 2) == -1 ||
	    dup2(keep, 3) == -1)
		return -1;
	fcntl(3, F_SETFD, FD_CLOEXEC);
	close_range(4, ~0U, 0);
	return 0;
}

/* Read the supervisor's report from FD and print it.  The exit status
 * it gives. */
static int
relay(struct cli *c, int fd)
{
	struct ft_buf b = { 0 };
	char buf[4096];
	ssize_t n;
	int status;

	while ((n = read(fd, buf, sizeof(buf))) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			break;
		ft_buf_add(&b, buf, (size_t)n);
	}
	close(fd);
	if (b.len == 0 || b.data[0] < '0' || b.data[0] > '9') {
		cli_err("the supervisor ended before it said how the start "
			"went; see %s/supervisor.log", c->cfg.state_dir);
		ft_buf_free(&b);
		return 1;
	}
	status = b.data[0] - '0';
	if (status == 0)
		printf("%s\n", b.data + 1);
	else
		cli_err("%s", b.data + 1);
	ft_buf_free(&b);
	return status;
}

/* start -c CFG [--standby] [--foreground] */
int
cli_start(struct cli *c)
{
	char err[512];
	int fds[2];
	pid_t pid;

	if (ft_config_has_nodes(&c->cfg, err, sizeof(err)) == -1) {
		fprintf(stderr, "%s\n", err);
		return 2;
	}
	if (sd_prepare(c->cfg.state_dir, err, sizeof(err)) == -1) {
		cli_err("%s", err);
		return 1;
	}
	if (c->foreground)
		return sup_main(c, c->standby, -1);
	if (pipe2(fds, O_CLOEXEC) == -1) {
		cli_err("pipe: %s", strerror(errno));
		return 1;
	}
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		close(fds[0]);
		if (daemonize(c, fds[1]) == -1)
			_exit(1);
		_exit(sup_main(c, c->standby, 3));
	}
	close(fds[1]);
	if (pid < 0) {
		cli_err("fork: %s", strerror(errno));
		close(fds[0]);
		return 1;
	}
	return relay(c, fds[0]);
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

/* The host of status row W ("" when unknown). */
static const char *
row_host(const json_t *w)
{
	const char *h = json_string_value(json_object_get(w,
					ctl_worker_cols[CTL_W_HOST].key));

	return h ? h : "";
}

/* Kill the workers of ROWS (status rows) still alive on this machine, and
 * what their tasks started, if the master could not.  Returns how many. */
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

		/* A pid of another host means nothing here. */
		if (pid <= 0 || start == 0 || !ft_host_is_local(row_host(w)))
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

/* The ssh command that kills, on HOST, the workers of ROWS that run
 * there, each only if it is still the process the master named (its
 * start time); exit 0 once there. */
static char *
remote_kill_cmd(json_t *rows, const char *host)
{
	const struct ctl_col *col = ctl_worker_cols;
	struct ft_buf b = { 0 };
	json_t *w;
	size_t i;
	char *cmd;

	json_array_foreach(rows, i, w) {
		int pid = (int)json_integer_value(json_object_get(w,
						col[CTL_W_PID].key));
		unsigned long long start = (unsigned long long)
			json_integer_value(json_object_get(w,
						col[CTL_W_START].key));

		if (pid > 0 && start != 0 && strcmp(row_host(w), host) == 0)
			ft_buf_printf(&b, "[ \"$(cut -d' ' -f22 /proc/%d/stat "
				      "2>/dev/null)\" = %llu ] && kill -9 %d; ",
				      pid, start, pid);
	}
	ft_buf_printf(&b, "true");
	cmd = ft_strdup(b.data);
	ft_buf_free(&b);
	return cmd;
}

/* Kill the workers of ROWS on other hosts over ssh, every remote host of
 * the config in parallel and bounded (HOSTS_PROBE_BOUND).  Says which
 * hosts could not be reached: what runs there ends when they answer
 * again (a worker leaves a master silent for master_silence_ms; mpirun's
 * daemon follows).  Returns how many could not be reached. */
static int
kill_remote_workers(struct cli *c, json_t *rows)
{
	const struct ft_config *cfg = &c->cfg;
	const char **host = ft_calloc((size_t)cfg->nnodes + 1, sizeof(char *));
	char **cmd = ft_calloc((size_t)cfg->nnodes + 1, sizeof(char *));
	char (*why)[160] = ft_calloc((size_t)cfg->nnodes + 1, sizeof(*why));
	int n = 0, i, k, failed = 0;

	for (i = 0; i < cfg->nnodes; i++) {
		const char *h = cfg->nodes[i].host;

		for (k = 0; k < n && strcmp(host[k], h) != 0; k++)
			;
		if (k < n || ft_host_is_local(h))
			continue;
		host[n] = h;
		cmd[n++] = remote_kill_cmd(rows, h);
	}
	if (n > 0)
		hosts_run(cfg, n, host, (const char *const *)cmd, why);
	for (k = 0; k < n; k++) {
		if (why[k][0] == '\0')
			continue;
		failed++;
		cli_err("could not clean up on %s: %s; what the cluster ran "
			"there (its workers, mpirun's daemon) ends once it "
			"answers again", host[k], why[k]);
	}
	for (k = 0; k < n; k++)
		free(cmd[k]);
	free(cmd);
	free(host);
	free(why);
	return failed;
}

/* Set LEASE stopping, so that no supervisor restarts anything more.
 * R: the record as it is then (state free if there is none). */
static void
lease_stopping(struct lease *l, struct lease_rec *r)
{
	struct lease_rec next;
	int i;

	for (i = 0; i < 20; i++) {
		if (lease_read(l, r) != 0) {
			memset(r, 0, sizeof(*r));
			return;
		}
		if (r->state != LEASE_ACTIVE)
			return;
		next = *r;
		next.state = LEASE_STOPPING;
		if (lease_swap(l, r, &next, NULL) == 0) {
			*r = next;
			return;
		}
	}
}

/* Wait for the supervisor of R to set the lease free and leave (on this
 * host: its process gone; elsewhere: the lease free), SIGKILL it past the
 * bound.  1 if it left by itself. */
static int
wait_supervisor(struct lease *l, const struct lease_rec *r)
{
	double until = ft_now() + SUP_WAIT;
	struct lease_rec now;

	while (ft_now() < until) {
		if (lease_id_local(&r->sup) ? !lease_id_alive(&r->sup) :
		    lease_read(l, &now) != 0 || now.state == LEASE_FREE)
			return 1;
		ft_sleep(0.02);
	}
	if (lease_id_alive(&r->sup)) {
		cli_err("the supervisor (pid %d) did not leave; killing it",
			(int)r->sup.pid);
		kill(r->sup.pid, SIGKILL);
	}
	return 0;
}

/* Wait for the standby of this host in DIR to leave (it sees the lease
 * stopping or free), SIGKILL it past the bound. */
static void
wait_standby(const char *dir, double lease)
{
	char *file = sup_standby_file();
	unsigned long long start = 0;
	pid_t pid = sup_pid_file(dir, file, &start);
	double until = ft_now() + lease + STANDBY_WAIT;

	while (ft_proc_is(pid, start) && ft_now() < until)
		ft_sleep(0.02);
	if (ft_proc_is(pid, start)) {
		cli_err("the standby (pid %d) did not leave; killing it",
			(int)pid);
		kill(pid, SIGKILL);
	}
	free(file);
}

/* Once everything is gone: a lease still stopping (its supervisor was
 * dead or killed) is set free. */
static void
lease_release(struct lease *l)
{
	struct lease_rec r, next;
	int i;

	for (i = 0; i < 20; i++) {
		if (lease_read(l, &r) != 0 || r.state != LEASE_STOPPING)
			return;
		memset(&next, 0, sizeof(next));
		next.epoch = r.epoch;
		next.seq = r.seq + 1;
		next.state = LEASE_FREE;
		if (lease_swap(l, &r, &next, NULL) == 0)
			return;
	}
}

/* Ask the master to stop.  0, or 1 when it refused (said). */
static int
ask_stop(struct cli *c)
{
	json_t *req = ctl_request_new(CTL_STOP);
	char err[256];
	json_t *ans = ctl_request(c->cfg.state_dir, req, 5, err, sizeof(err));
	int rc = 0;

	if (ans && !json_is_true(json_object_get(ans, "ok"))) {
		const char *e = json_string_value(json_object_get(ans, "error"));

		cli_err("%s", e ? e : "the master refused to stop");
		rc = 1;
	}
	json_decref(ans);
	json_decref(req);
	return rc;
}

/* The cluster's supervisor runs on another host (R: the lease): ask the
 * master to stop and wait for that supervisor to set the lease free; it
 * ends the job there.  Nothing of this host is touched: the pid files
 * name processes of that host. */
static int
stop_elsewhere(struct cli *c, struct lease *l, const struct lease_rec *r)
{
	char who[LEASE_HOST_MAX + 32];
	int rc = ask_stop(c);

	if (rc == 0 && !wait_supervisor(l, r)) {
		cli_err("the supervisor on %s did not finish the stop",
			lease_id_str(&r->sup, who, sizeof(who)));
		rc = 1;
	}
	lease_close(l);
	if (rc == 0)
		printf("cluster %s stopped\n", c->cfg.name);
	return rc;
}

/* stop -c CFG: set the lease stopping, ask the master to stop, wait for
 * the supervisor, a standby of this host and the launcher to end, and
 * kill what is left of the cluster, each process checked to be the one
 * the pid files and the master named (pid and start time), never a
 * stranger that reused a pid. */
int
cli_stop(struct cli *c)
{
	const char *dir = c->cfg.state_dir;
	unsigned long long launcher_start = 0;
	pid_t launcher_pid = sd_read_pid(dir, "mpirun.pid");
	pid_t master_pid = sd_read_pid(dir, "master.pid");
	json_t *rows = worker_rows(c);
	struct lease lease = { .fd = -1 };
	struct lease_rec rec = { 0 };
	char err[256], *path, *entry;
	int strays = 0, have_lease;

	sup_pid_file(dir, "mpirun.pid", &launcher_start);
	have_lease = lease_open(&lease, dir, err, sizeof(err)) == 0;
	if (have_lease)
		lease_stopping(&lease, &rec);
	if (have_lease && rec.sup.pid > 0 && !lease_id_local(&rec.sup)) {
		json_decref(rows);
		return stop_elsewhere(c, &lease, &rec);
	}
	if (ask_stop(c) != 0) {
		json_decref(rows);
		if (have_lease)
			lease_close(&lease);
		return 1;
	}
	if (launcher_pid > 0 && !wait_launcher(launcher_pid, master_pid)) {
		cli_err("the launcher (pid %d) did not finish; terminating it",
			(int)launcher_pid);
		/* With a host cut off, mpirun waits for its daemon there
		 * and ignores SIGTERM: across hosts, SIGKILL at once (its
		 * daemons on the other hosts leave with their ssh). */
		kill(-launcher_pid, c->cfg.remote ? SIGKILL : SIGTERM);
		if (!wait_gone(launcher_pid, 5))
			kill(-launcher_pid, SIGKILL);
		wait_gone(launcher_pid, 5);
	}
	if (have_lease && rec.sup.pid > 0 && rec.state == LEASE_STOPPING)
		wait_supervisor(&lease, &rec);
	if (have_lease)
		wait_standby(dir, c->cfg.lease);
	/* The launcher ran as the leader of a session of its own: whatever
	 * is left in that session (a worker whose spawn never finished, a
	 * task's process) belongs to this cluster, and so does every
	 * process that carries its state dir in its environment. */
	if (launcher_pid > 0)
		strays += sup_kill_session(launcher_pid, launcher_start);
	strays += kill_workers(rows, dir);
	if (c->cfg.remote)
		kill_remote_workers(c, rows);
	entry = launch_dir_entry(&c->cfg);
	strays += ft_kill_by_env(entry, NULL);
	free(entry);
	json_decref(rows);
	if (strays)
		cli_err("killed %d processes left behind", strays);
	if (have_lease) {
		lease_release(&lease);
		lease_close(&lease);
	}
	path = ft_asprintf("%s/mpirun.pid", dir);
	unlink(path);
	free(path);
	printf("cluster %s stopped\n", c->cfg.name);
	return 0;
}

/* probe: run the master once to ask the MPI what it can do. */
int
cli_probe(struct cli *c)
{
	struct launch_job j = { .cfg = NULL };
	struct ft_argv a = { 0 };
	pid_t pid;
	int status = 1;

	(void)c;
	launch_argv(&a, &j);
	pid = fork();
	if (pid == 0) {
		execvp(a.v[0], a.v);
		_exit(127);
	}
	ft_argv_free(&a);
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		return 1;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

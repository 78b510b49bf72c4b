/* supervise: the supervisor of a cluster's MPI job (see supervise.h). */
#include "supervise.h"

#include <errno.h>
#include <dirent.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ctl.h"
#include "down.h"
#include "hosts.h"
#include "launch.h"
#include "log.h"
#include "slurm.h"
#include "statedir.h"
#include "util.h"

#define TICK_MAX 0.25		/* seconds between looks at the lease, at most */
#define KILL_WAIT 10.0		/* seconds for a killed job to be gone */
#define STOP_WAIT 30.0		/* seconds the launcher gets to end on a stop */
#define HEALTHY 60.0		/* a job this old resets the backoff */
#define READY_POLL 0.5		/* longest wait for a status answer at start */
#define READY_TICK 0.05		/* seconds between status requests at start */
#define SWAP_TRIES 20		/* lease swaps lost to renewals in a row */
#define GONE_WAIT 1.0		/* seconds the state dir may be missing */

struct sup {
	struct cli *c;
	const struct ft_config *cfg;
	struct lease lease;
	struct lease_id self;
	struct lease_rec rec;		/* the record last seen */
	unsigned long long epoch;	/* ours; 0 before we hold the lease */
	unsigned long long last_seq;	/* seq of the record last seen */
	unsigned long long wrote_seq;	/* seq of our own last renewal */
	double renewed;			/* when we last renewed (monotonic) */
	double heard;			/* the master's last renewal (0: none yet) */
	int masters_renew;		/* a master of ours renewed: all will */
	double tick;			/* seconds between looks at the lease */
	char *dir_entry;		/* FTFARM_STATE_DIR=... */
	char *mpirun_log;
	size_t log_offset;		/* mpirun.log's size at the launch */
	pid_t mpirun;			/* 0: no job */
	int mpirun_fd;			/* its pidfd, -1 once it ended */
	int mpirun_status;		/* its wait status, -1 while it runs */
	struct lease_id master;		/* the job's master, once known */
	int master_fd;			/* its pidfd (master on this host) */
	int master_status;		/* -1: alive; -2: ended, status unknown */
	double launched;		/* when the job started (monotonic) */
	int restarts;
	double backoff;			/* the next restart's delay */
	int report_fd;			/* to `ftfarm start`; -1 once told */
	int report_pending;		/* the first start's outcome is owed */
	double ready_until;		/* ... until then */
	int sigfd;
	int stop_signal;		/* SIGTERM or SIGINT received */
	char stop_why[160];		/* why we stop (the note, down.h) */
	char ident[64];			/* the log's name for us */
	char (*down)[160];		/* per node: why its host was left out
					 * of the job (empty: it was not) */
	int ndown;
	dev_t dir_dev;			/* the state dir's identity at the start */
	ino_t dir_ino;
	double gone_since;		/* when it was first seen gone (0: not) */
};

/* ---- small helpers ---- */

static void
fd_close(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static char *
sd_path(const struct sup *s, const char *name)
{
	return ft_asprintf("%s/%s", s->cfg->state_dir, name);
}

static void
sd_unlink(const struct sup *s, const char *name)
{
	char *path = sd_path(s, name);

	unlink(path);
	free(path);
}

char *
sup_standby_file(void)
{
	char host[LEASE_HOST_MAX] = "";

	if (gethostname(host, sizeof(host) - 1) == -1 || host[0] == '\0')
		snprintf(host, sizeof(host), "localhost");
	return ft_asprintf("standby.%s.pid", host);
}

/* Describe a wait STATUS of a process called WHO into BUF. */
static void
describe_end(char *buf, size_t n, const char *who, int status)
{
	if (status == -2)
		snprintf(buf, n, "%s died", who);
	else if (WIFSIGNALED(status))
		snprintf(buf, n, "%s killed by signal %d", who,
			 WTERMSIG(status));
	else
		snprintf(buf, n, "%s exited %d", who, WEXITSTATUS(status));
}

/* The wait status of PID, a zombie its parent has not reaped yet, from
 * /proc/PID/stat (its exit_code field); -2 when it cannot be told (gone
 * already, or not a zombie). */
static int
zombie_status(pid_t pid)
{
	char path[64], *text, *p;
	int i, status = -2;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	text = ft_read_file(path, NULL);
	p = text ? strrchr(text, ')') : NULL;
	if (p == NULL || p[1] != ' ' || p[2] != 'Z')
		goto out;
	for (i = 3; i <= 52 && p; i++)
		p = strchr(p + 1, ' ');
	if (p)
		status = atoi(p + 1);
out:
	free(text);
	return status;
}

/* ---- reporting the start ---- */

/* Tell the waiting `ftfarm start` (or the terminal) how the start went:
 * STATUS is its exit status, the text its output (stdout when 0). */
static void __attribute__((format(printf, 3, 4)))
report(struct sup *s, int status, const char *fmt, ...)
{
	char text[4096];
	va_list ap;

	if (!s->report_pending)
		return;
	va_start(ap, fmt);
	vsnprintf(text + 1, sizeof(text) - 1, fmt, ap);
	va_end(ap);
	s->report_pending = 0;
	if (s->report_fd < 0) {
		fprintf(status ? stderr : stdout, "%s%s\n",
			status ? "ftfarm: " : "", text + 1);
		fflush(NULL);
		return;
	}
	text[0] = (char)('0' + status);
	if (ft_write_all(s->report_fd, text, strlen(text)) == -1)
		log_warn("cannot tell ftfarm start");
	fd_close(&s->report_fd);
}

/* The lines of mpirun.log since the launch that say what went wrong
 * (a new string). */
static char *
failure_lines(const struct sup *s)
{
	size_t len = 0;
	char *text = ft_read_file(s->mpirun_log, &len), *line, *save = NULL;
	struct ft_buf b = { 0 };

	ft_buf_adds(&b, "");
	if (text && s->log_offset <= len)
		for (line = strtok_r(text + s->log_offset, "\n", &save); line;
		     line = strtok_r(NULL, "\n", &save))
			if (strstr(line, "ftfarm") || strstr(line, "rror"))
				ft_buf_printf(&b, "\n  %s", line);
	if (b.len == 0)
		ft_buf_printf(&b, "\n  (see %s)", s->mpirun_log);
	free(text);
	return b.data;
}

/* ---- the lease ---- */

/* Note R, just seen: a change of seq that is not ours is the master's
 * renewal. */
static void
seen(struct sup *s, const struct lease_rec *r)
{
	if (s->epoch && r->epoch == s->epoch && r->seq != s->last_seq &&
	    r->seq != s->wrote_seq) {
		s->heard = ft_now();
		s->masters_renew = 1;
	}
	s->rec = *r;
	s->last_seq = r->seq;
}

/* What the lease says to the holder of an epoch. */
enum look { LOOK_OURS, LOOK_LOST, LOOK_STOPPING };

/* Read the lease.  LOOK_LOST when the epoch is no longer ours,
 * LOOK_STOPPING when `ftfarm stop` asked us to end; a lease that cannot
 * be read is taken as unchanged (and said, once). */
static enum look
look(struct sup *s)
{
	static int warned;
	struct lease_rec r;

	if (lease_read(&s->lease, &r) == -1) {
		if (!warned++)
			log_warn("cannot read the lease %s", s->lease.path);
		return LOOK_OURS;
	}
	warned = 0;
	seen(s, &r);
	if (r.epoch != s->epoch || r.state == LEASE_FREE)
		return LOOK_LOST;
	return r.state == LEASE_STOPPING ? LOOK_STOPPING : LOOK_OURS;
}

/* Renew the lease (seq + 1) when a quarter of a lease has passed without
 * a renewal of ours or of the master's; record the master's identity if
 * the lease has none yet.  The record as it is now is in s->rec. */
static void
renew(struct sup *s)
{
	double now = ft_now(), quarter = s->cfg->lease / 4;
	struct lease_rec next = s->rec, cur;
	int rc;

	if (now - s->renewed < quarter ||
	    (s->heard && now - s->heard < quarter && s->rec.master.pid > 0))
		return;
	next.seq++;
	if (next.master.pid <= 0 && s->master.pid > 0)
		next.master = s->master;
	rc = lease_swap(&s->lease, &s->rec, &next, &cur);
	if (rc == 0) {
		s->wrote_seq = next.seq;
		seen(s, &next);
		s->renewed = now;
	} else if (rc == 1) {
		seen(s, &cur);
	} else {
		log_warn("cannot renew the lease");
	}
}

/* The record of a new epoch after R, held by us. */
static void
new_record(const struct sup *s, const struct lease_rec *r,
	   struct lease_rec *next)
{
	memset(next, 0, sizeof(*next));
	next->epoch = r->epoch + 1;
	next->state = LEASE_ACTIVE;
	next->sup = s->self;
}

/* Replace EXPECT by a record of the next epoch, held by us.  0 when done
 * (our epoch is the new one); 1 when the lease had changed (s->rec holds
 * it); -1 with errno. */
static int
take(struct sup *s, const struct lease_rec *expect)
{
	struct lease_rec next, cur;
	int rc;

	new_record(s, expect, &next);
	rc = lease_swap(&s->lease, expect, &next, &cur);
	if (rc == 1)
		seen(s, &cur);
	if (rc != 0)
		return rc;
	s->epoch = next.epoch;
	s->wrote_seq = 0;
	s->heard = 0;
	s->renewed = ft_now();
	seen(s, &next);
	down_forget(s->cfg->state_dir);
	return 0;
}

/* Is ID nobody, or a process of this host that is gone? */
static int
id_dead(const struct lease_id *id)
{
	return id->pid <= 0 || (lease_id_local(id) && !lease_id_alive(id));
}

/* Is ID a live process of this host? */
static int
id_live_here(const struct lease_id *id)
{
	return id->pid > 0 && lease_id_alive(id);
}

/* ---- the job's processes ---- */

pid_t
sup_pid_file(const char *dir, const char *name, unsigned long long *start)
{
	char *path = ft_asprintf("%s/%s", dir, name);
	char *text = ft_read_file(path, NULL);
	long pid = 0;

	*start = 0;
	if (text == NULL || sscanf(text, "%ld %llu", &pid, start) != 2)
		pid = 0;
	free(path);
	free(text);
	return (pid_t)pid;
}

static pid_t
pid_file(const struct sup *s, const char *name, unsigned long long *start)
{
	return sup_pid_file(s->cfg->state_dir, name, start);
}

/* SIGKILL ID if it is a live process of this host.  1 if signalled. */
static int
kill_id(const struct lease_id *id)
{
	return id_live_here(id) && kill(id->pid, SIGKILL) == 0;
}

int
sup_kill_session(pid_t sid, unsigned long long start)
{
	if (sid <= 1)
		return 0;
	/* A session id names that session only while its leader lives or
	 * while no other process took its pid. */
	if (ft_proc_start(sid) != 0 && !ft_proc_is(sid, start))
		return 0;
	return ft_kill_session(sid);
}

/* SIGKILL everything of the job of EPOCH (0: of every epoch) on this
 * host and wait until it is gone.  Returns how many were signalled. */
static int
kill_job(struct sup *s, unsigned long long epoch)
{
	double until = ft_now() + KILL_WAIT;
	unsigned long long start = s->mpirun ? ft_proc_start(s->mpirun) : 0;
	char entry[64];
	int total = 0, n;

	if (epoch)
		launch_epoch_entry(epoch, entry, sizeof(entry));
	do {
		n = kill_id(&s->master);
		if (s->mpirun > 0)
			n += sup_kill_session(s->mpirun, start);
		n += ft_kill_by_env(s->dir_entry, epoch ? entry : NULL);
		total += n;
		if (n)
			ft_sleep(0.02);
	} while (n && ft_now() < until);
	if (n)
		log_warnx("processes of epoch %llu still there after %.0f s",
			  epoch, KILL_WAIT);
	if (s->mpirun > 0)
		while (waitpid(s->mpirun, NULL, 0) == -1 && errno == EINTR)
			;
	s->mpirun = 0;
	fd_close(&s->mpirun_fd);
	fd_close(&s->master_fd);
	memset(&s->master, 0, sizeof(s->master));
	return total;
}

/* Kill what earlier jobs of the state dir left on this host: every
 * process carrying its FTFARM_STATE_DIR, the session of the launcher in
 * mpirun.pid, the master in master.pid. */
static void
kill_remains(struct sup *s)
{
	struct lease_id old = { .pid = 0 };
	double until = ft_now() + KILL_WAIT;
	unsigned long long start;
	pid_t pid;
	int n = 0, k;

	lease_self(&old);
	old.pid = pid_file(s, "master.pid", &old.start);
	n += kill_id(&old);
	pid = pid_file(s, "mpirun.pid", &start);
	do {
		k = sup_kill_session(pid, start) + ft_kill_by_env(s->dir_entry, NULL);
		n += k;
		if (k)
			ft_sleep(0.02);
	} while (k && ft_now() < until);
	if (n)
		log_info("killed %d processes left by earlier jobs", n);
}

/* Does PID run ftfarm-master? */
static int
runs_master(pid_t pid)
{
	char path[64], *text;
	const char *base;
	int yes;

	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	text = ft_read_file(path, NULL);
	base = text ? strrchr(text, '/') : NULL;
	base = base ? base + 1 : text;
	yes = base && strcmp(base, "ftfarm-master") == 0;
	free(text);
	return yes;
}

/* The process running ftfarm-master among the children of PID and their
 * children (DEPTH levels: Open MPI's mpirun forks its local processes,
 * MPICH's mpiexec has a proxy in between), or 0. */
static pid_t
master_below(pid_t pid, int depth)
{
	char path[96], *kids, *p;
	struct dirent *e;
	pid_t found = 0, kid;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	if (depth <= 0 || (d = opendir(path)) == NULL)
		return 0;
	/* A process's children are listed by the thread that forked them. */
	while (found == 0 && (e = readdir(d)) != NULL) {
		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%.16s/children",
			 (int)pid, e->d_name);
		kids = ft_read_file(path, NULL);
		for (p = kids; found == 0 && p && *p; p += strspn(p, " \n")) {
			kid = (pid_t)strtol(p, &p, 10);
			if (kid <= 0)
				break;
			found = runs_master(kid) ? kid :
				master_below(kid, depth - 1);
		}
		free(kids);
	}
	closedir(d);
	return found;
}

/* Find the job's master: the lease's, once it renewed, or the launcher's
 * descendant running ftfarm-master. */
static void
find_master(struct sup *s)
{
	pid_t pid;

	if (s->master.pid > 0 || s->mpirun <= 0)
		return;
	if (s->rec.epoch == s->epoch && s->rec.master.pid > 0) {
		s->master = s->rec.master;
	} else {
		if ((pid = master_below(s->mpirun, 2)) == 0)
			return;
		lease_self(&s->master);
		s->master.pid = pid;
		s->master.start = ft_proc_start(pid);
	}
	s->master_status = -1;
	if (lease_id_local(&s->master))
		s->master_fd = ft_pidfd_open(s->master.pid);
	log_info("epoch %llu: master pid %d", s->epoch, (int)s->master.pid);
}

/* ---- watching the job ---- */

/* Note whether the launcher (our child) has ended, without reaping it:
 * its pid, and so its session id, stays ours until kill_job. */
static void
check_mpirun(struct sup *s)
{
	siginfo_t si;

	if (s->mpirun <= 0 || s->mpirun_status != -1)
		return;
	memset(&si, 0, sizeof(si));
	if (waitid(P_PID, (id_t)s->mpirun, &si, WEXITED | WNOHANG |
		   WNOWAIT) == -1 || si.si_pid != s->mpirun)
		return;
	s->mpirun_status = si.si_code == CLD_EXITED ?
		(si.si_status & 0xff) << 8 : si.si_status & 0x7f;
	fd_close(&s->mpirun_fd);
}

/* Note whether the master (on this host) has ended. */
static void
check_master(struct sup *s, int woke)
{
	if (s->master.pid <= 0 || s->master_status != -1 ||
	    !lease_id_local(&s->master))
		return;
	if (!woke && (s->master_fd >= 0 ||
		       ft_proc_is(s->master.pid, s->master.start)))
		return;
	/* Its parent reaps it: read its status while it is a zombie. */
	s->master_status = zombie_status(s->master.pid);
	fd_close(&s->master_fd);
}

static void
read_signal(struct sup *s)
{
	struct signalfd_siginfo si;

	while (read(s->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
		s->stop_signal = (int)si.ssi_signo;
}

/* Wait up to SECONDS for the launcher or the master to end, or for a
 * signal, and note what happened. */
static void
wait_events(struct sup *s, double seconds)
{
	struct pollfd p[3];
	int n = 0, i, master_woke = 0;

	p[n++] = (struct pollfd){ .fd = s->sigfd, .events = POLLIN };
	if (s->mpirun_fd >= 0)
		p[n++] = (struct pollfd){ .fd = s->mpirun_fd, .events = POLLIN };
	if (s->master_fd >= 0)
		p[n++] = (struct pollfd){ .fd = s->master_fd, .events = POLLIN };
	if (poll(p, (nfds_t)n, (int)ceil(seconds * 1000)) > 0)
		for (i = 0; i < n; i++) {
			if (p[i].revents == 0)
				continue;
			if (p[i].fd == s->sigfd)
				read_signal(s);
			else if (p[i].fd == s->master_fd)
				master_woke = 1;
		}
	check_master(s, master_woke);
	check_mpirun(s);
}

/* Why the job must be replaced, into WHY: 1 if it must, 0 while it is
 * well. */
static int
job_failed(struct sup *s, char *why, size_t n)
{
	double now = ft_now();
	double bound = s->cfg->start_timeout + s->cfg->nworkers + s->cfg->lease;

	if (s->mpirun <= 0)
		snprintf(why, n, "%s could not be started", FT_MPIEXEC);
	else if (s->master_status != -1)
		describe_end(why, n, "master", s->master_status);
	else if (s->mpirun_status != -1)
		describe_end(why, n, "mpirun", s->mpirun_status);
	else if (s->heard && now - s->heard > s->cfg->lease)
		snprintf(why, n, "master hung: no lease renewal for %.3g s",
			 now - s->heard);
	else if (!s->heard && s->masters_renew && now - s->launched > bound)
		snprintf(why, n, "master hung: no lease renewal within %.0f s "
			 "of its start", bound);
	else
		return 0;
	return 1;
}

/* Is the worker of status row W on a node whose host was left out? */
static int
left_out(const struct sup *s, const json_t *w)
{
	const char *node = json_string_value(json_object_get(w, "node"));
	int i;

	for (i = 0; node && i < s->cfg->nnodes; i++)
		if (s->down[i][0] && strcmp(s->cfg->nodes[i].name, node) == 0)
			return 1;
	return 0;
}

/* Is status row W the worker of a node given up on (inactive), as a
 * node a master before this one gave up on is, in the answer ANS? */
static int
given_up(const json_t *ans, const json_t *w)
{
	const char *node = json_string_value(json_object_get(w, "node"));
	const char *ws = json_string_value(json_object_get(w, "state"));
	const json_t *n;
	size_t i;

	if (node == NULL || ws == NULL || strcmp(ws, "inactive") != 0)
		return 0;
	json_array_foreach(json_object_get(ans, "nodes"), i, n) {
		const char *name = json_string_value(json_object_get(n, "name"));
		const char *st = json_string_value(json_object_get(n, "state"));

		if (name && st && strcmp(name, node) == 0)
			return strcmp(st, "inactive") == 0;
	}
	return 0;
}

/* The inactive nodes of answer ANS whose host was not left out, "node2
 * (why), ..." into BUF. */
static const char *
inactive_list(const struct sup *s, const json_t *ans, char *buf, size_t n)
{
	const json_t *nd;
	size_t i, len = 0;
	int k;

	buf[0] = '\0';
	json_array_foreach(json_object_get(ans, "nodes"), i, nd) {
		const char *name = json_string_value(json_object_get(nd, "name"));
		const char *st = json_string_value(json_object_get(nd, "state"));
		const char *why = json_string_value(json_object_get(nd,
								    "reason"));
		int out = 0;

		for (k = 0; name && k < s->cfg->nnodes; k++)
			out |= s->down[k][0] &&
			       strcmp(s->cfg->nodes[k].name, name) == 0;
		if (!name || !st || strcmp(st, "inactive") != 0 || out ||
		    len >= n)
			continue;
		len += (size_t)snprintf(buf + len, n - len, "%s%s (%s)",
					len ? ", " : "", name, why ? why : "");
	}
	return buf;
}

static const char *down_list(const struct sup *s, char *buf, size_t n);

/* The first start: once every worker registered (but those of nodes
 * whose host was left out, and those of nodes given up on, such as a
 * node a master before this one left inactive; each named), tell
 * `ftfarm start`. */
static void
check_ready(struct sup *s)
{
	json_t *req, *ans, *ws, *w;
	size_t i, up = 0, out = 0, off = 0;
	char err[256], missing[1024], inactive[1024];

	if (!s->report_pending)
		return;
	if (ft_now() > s->ready_until) {
		report(s, 1, "not every worker registered within %.0f s; see "
		       "`ftfarm status -c %s` and %s", s->cfg->start_timeout,
		       s->c->config, s->mpirun_log);
		return;
	}
	req = ctl_request_new(CTL_STATUS);
	ans = ctl_request(s->cfg->state_dir, req, READY_POLL, err, sizeof(err));
	json_decref(req);
	ws = json_object_get(ans, "workers");
	json_array_foreach(ws, i, w) {
		const char *st = json_string_value(json_object_get(w, "state"));

		if (left_out(s, w))
			out++;
		else if (given_up(ans, w))
			off++;
		else
			up += st && (strcmp(st, "idle") == 0 ||
				     strcmp(st, "busy") == 0);
	}
	if (ans && s->cfg->no_nodes) {
		/* No node of its own: up as soon as it answers. */
		log_info("epoch %llu: the master is up, with no node of its "
			 "own", s->epoch);
		report(s, 0, "cluster %s up with no node of its own: nodes join "
		       "with `ftfarm join -c %s` (%zu worker%s joined so far)"
		       "\nsupervisor pid %d (log: %s/%s)", s->cfg->name,
		       s->c->config, up, up == 1 ? "" : "s", (int)getpid(),
		       s->cfg->state_dir, SUP_LOG_FILE);
	} else if (ans && up > 0 && up + out + off == json_array_size(ws)) {
		inactive_list(s, ans, inactive, sizeof(inactive));
		log_info("epoch %llu: every worker registered", s->epoch);
		report(s, 0, "cluster %s up: %zu worker%s on %d node%s (%s "
		       "launch, %s)%s%s%s%s\nsupervisor pid %d (log: %s/%s)",
		       s->cfg->name, up, up == 1 ? "" : "s",
		       s->cfg->nnodes - s->ndown,
		       s->cfg->nnodes - s->ndown == 1 ? "" : "s",
		       json_string_value(json_object_get(ans, "launch")),
		       json_string_value(json_object_get(ans, "mpi")),
		       s->ndown ? "\nnodes missing (host did not answer; "
				  "brought in when it does): " : "",
		       down_list(s, missing, sizeof(missing)),
		       inactive[0] ? "\nnodes inactive (given up on; probed "
				     "again on their backoff, or `ftfarm "
				     "undrain`): " : "", inactive,
		       (int)getpid(), s->cfg->state_dir, SUP_LOG_FILE);
	}
	json_decref(ans);
}

/* ---- starting, stopping, stepping down ---- */

static void
probe_tick(void *arg)
{
	renew(arg);
}

/* Before a launch across hosts: probe them, leave out those that do not
 * answer (mpirun would give up on the whole job), write the hostfile
 * and the list of the hosts left out.  0, or -1 when they cannot be
 * written. */
static int
prepare_hosts(struct sup *s)
{
	char err[512], *hf, *dir, *worker;
	int i, rc;

	/* In a Slurm allocation mpirun launches through Slurm, which
	 * has given us the nodes. */
	if (!s->cfg->remote || s->cfg->slurm || launch_own_hostfile(s->cfg))
		return hosts_write_down(s->cfg, s->down, err, sizeof(err));
	dir = ft_exe_dir();
	worker = ft_asprintf("%s/ftfarm-worker", dir);
	s->ndown = hosts_probe(s->cfg, worker, s->down, probe_tick, s);
	free(worker);
	free(dir);
	for (i = 0; i < s->cfg->nnodes; i++)
		if (s->down[i][0])
			log_warnx("node %s: host %s left out: %s",
				  s->cfg->nodes[i].name, s->cfg->nodes[i].host,
				  s->down[i]);
	hf = sd_path(s, HOSTS_FILE);
	rc = hosts_write_hostfile(s->cfg, s->down, hf, err, sizeof(err));
	free(hf);
	if (rc == 0)
		rc = hosts_write_down(s->cfg, s->down, err, sizeof(err));
	if (rc == -1)
		log_warnx("%s", err);
	return rc;
}

/* The nodes left out, "node3 (h3: why), ..." into BUF. */
static const char *
down_list(const struct sup *s, char *buf, size_t n)
{
	size_t len = 0;
	int i;

	buf[0] = '\0';
	for (i = 0; i < s->cfg->nnodes && len < n; i++)
		if (s->down[i][0])
			len += (size_t)snprintf(buf + len, n - len, "%s%s (%s: "
						"%s)", len ? ", " : "",
						s->cfg->nodes[i].name,
						s->cfg->nodes[i].host,
						s->down[i]);
	return buf;
}

/* Start the job of our epoch (REASON: why, after a restart).  0, or -1
 * when the launcher could not be started. */
static int
launch(struct sup *s, const char *reason)
{
	struct launch_job j = {
		.cfg = s->cfg, .config = s->c->config, .epoch = s->epoch,
		.restart_reason = reason,
	};

	kill_remains(s);
	if (prepare_hosts(s) == -1)
		return -1;
	s->log_offset = 0;
	free(ft_read_file(s->mpirun_log, &s->log_offset));
	memset(&s->master, 0, sizeof(s->master));
	s->master_status = s->mpirun_status = -1;
	s->heard = 0;
	s->launched = ft_now();
	s->mpirun = launch_spawn(&j, s->mpirun_log);
	if (s->mpirun < 0) {
		log_warn("epoch %llu: cannot start %s", s->epoch, FT_MPIEXEC);
		s->mpirun = 0;
		return -1;
	}
	s->mpirun_fd = ft_pidfd_open(s->mpirun);
	if (sd_write_pid(s->cfg->state_dir, "mpirun.pid", s->mpirun) == -1)
		log_warn("%s/mpirun.pid", s->cfg->state_dir);
	log_info("epoch %llu: started %s (pid %d)%s%s", s->epoch, FT_MPIEXEC,
		 (int)s->mpirun, reason ? " after " : "", reason ? reason : "");
	return 0;
}

/* Set our lease free (a stop).  The record must be ours. */
static void
free_lease(struct sup *s)
{
	struct lease_rec next, cur;
	int i, rc = -1;

	for (i = 0; i < SWAP_TRIES && s->rec.epoch == s->epoch; i++) {
		memset(&next, 0, sizeof(next));
		next.epoch = s->rec.epoch;
		next.seq = s->rec.seq + 1;
		next.state = LEASE_FREE;
		rc = lease_swap(&s->lease, &s->rec, &next, &cur);
		if (rc == 0) {
			seen(s, &next);
			return;
		}
		if (rc == 1)
			seen(s, &cur);
		else
			ft_sleep(0.05);
	}
	if (s->rec.epoch == s->epoch)
		log_warn("cannot set the lease free");
}

/* The lease went to another epoch: kill our job's remains and leave,
 * touching no file of the state dir but the log. */
static void __attribute__((noreturn))
step_down(struct sup *s)
{
	char who[LEASE_HOST_MAX + 32];
	int n = kill_job(s, s->epoch);

	if (s->rec.epoch == s->epoch) {
		/* Set free under us (a stop that gave up waiting). */
		log_warnx("epoch %llu: the lease was set free; leaving (%d "
			  "processes killed)", s->epoch, n);
		sd_unlink(s, SUP_PID_FILE);
		report(s, 1, "the cluster was stopped while it started");
		exit(0);
	}
	log_warnx("lease taken by epoch %llu (%s); stepping down (%d "
		  "processes of epoch %llu killed)", s->rec.epoch,
		  lease_id_str(&s->rec.sup, who, sizeof(who)), n, s->epoch);
	report(s, 1, "lease taken by epoch %llu (%s) during the start",
	       s->rec.epoch, who);
	exit(3);
}

/* The job is gone: say why the cluster stopped to the clients that find
 * it down (down.h), and take back the address a killed master left
 * published, which nothing answers any more. */
static void
leave_note(struct sup *s)
{
	if (s->stop_why[0] == '\0')
		snprintf(s->stop_why, sizeof(s->stop_why), "ftfarm stop");
	sd_unlink(s, "control.tcp");
	if (down_note(s->cfg->state_dir, s->epoch, s->stop_why) == -1)
		log_warn("%s/%s", s->cfg->state_dir, DOWN_FILE);
}

/* `ftfarm stop` set the lease stopping: no more restarts.  Wait for the
 * launcher to end (the master is being stopped), kill what is left, set
 * the lease free, leave. */
static void __attribute__((noreturn))
finish_stop(struct sup *s)
{
	double until = ft_now() + STOP_WAIT;
	int n;

	log_info("epoch %llu: stopping; no more restarts", s->epoch);
	while (s->mpirun > 0 && s->mpirun_status == -1 && ft_now() < until) {
		wait_events(s, s->tick);
		if (look(s) == LOOK_LOST)
			step_down(s);
	}
	if (s->mpirun > 0 && s->mpirun_status == -1)
		log_warnx("%s did not end within %.0f s; killing the job",
			  FT_MPIEXEC, STOP_WAIT);
	n = kill_job(s, s->epoch);
	if (n)
		log_info("killed %d processes left by the job", n);
	leave_note(s);
	free_lease(s);
	sd_unlink(s, SUP_PID_FILE);
	sd_unlink(s, "mpirun.pid");
	report(s, 1, "the cluster was stopped while it started");
	log_info("stopped");
	exit(0);
}

/* A signal asked us to stop the cluster: as `ftfarm stop` would. */
static void __attribute__((noreturn))
begin_stop(struct sup *s)
{
	struct lease_rec next, cur;
	json_t *req = ctl_request_new(CTL_STOP);
	char err[256];
	int i;

	slurm_signal_reason(s->stop_signal, s->stop_why, sizeof(s->stop_why));
	log_info("%s: stopping the cluster; running tasks go back to the "
		 "queue, and its open batches go on at its next start",
		 s->stop_why);
	for (i = 0; i < SWAP_TRIES && s->rec.state == LEASE_ACTIVE &&
	     s->rec.epoch == s->epoch; i++) {
		next = s->rec;
		next.state = LEASE_STOPPING;
		if (lease_swap(&s->lease, &s->rec, &next, &cur) == 0)
			seen(s, &next);
		else if (look(s) == LOOK_LOST)
			step_down(s);
	}
	json_decref(ctl_request(s->cfg->state_dir, req, 5, err, sizeof(err)));
	json_decref(req);
	finish_stop(s);
}

/* Has the state dir been gone (removed, or another directory in its
 * place) for GONE_WAIT?  Its control socket and lease went with it:
 * nobody can reach or stop the job any more. */
static int
dir_gone(struct sup *s)
{
	struct stat st;
	int gone;

	if (stat(s->cfg->state_dir, &st) == 0)
		gone = st.st_dev != s->dir_dev || st.st_ino != s->dir_ino;
	else
		gone = errno == ENOENT || errno == ENOTDIR;
	if (!gone) {
		s->gone_since = 0;
		return 0;
	}
	if (s->gone_since == 0)
		s->gone_since = ft_now();
	return ft_now() - s->gone_since >= GONE_WAIT;
}

/* The state dir is gone: end the job rather than leave it running
 * unowned, and leave. */
static void __attribute__((noreturn))
abandon(struct sup *s)
{
	int n = kill_job(s, s->epoch);

	log_warnx("epoch %llu: the state dir %s is gone; the job ended (%d "
		  "processes killed)", s->epoch, s->cfg->state_dir, n);
	report(s, 1, "the state dir %s was removed during the start",
	       s->cfg->state_dir);
	exit(1);
}

/* Act on a stop signal, a state dir gone, or what the lease says: step
 * down, stop, or go on. */
static void
obey_lease(struct sup *s)
{
	if (s->stop_signal)
		begin_stop(s);
	if (dir_gone(s))
		abandon(s);
	switch (look(s)) {
	case LOOK_LOST:
		step_down(s);
	case LOOK_STOPPING:
		finish_stop(s);
	case LOOK_OURS:
		break;
	}
}

/* Wait SECONDS while keeping the lease. */
static void
idle(struct sup *s, double seconds)
{
	double until = ft_now() + seconds;

	while (ft_now() < until) {
		wait_events(s, fmin(s->tick, until - ft_now()));
		obey_lease(s);
		renew(s);
	}
}

/* Take the epoch after ours for a restart. */
static void
next_epoch(struct sup *s)
{
	struct lease_rec expect;
	int rc;

	for (;;) {
		expect = s->rec;
		rc = take(s, &expect);
		if (rc == 0)
			return;
		if (rc == -1) {
			log_warn("cannot take the next epoch");
			idle(s, s->tick);
		}
		obey_lease(s);
	}
}

/* The job failed for WHY: kill it and start the next one after the
 * backoff. */
static void
restart(struct sup *s, const char *why)
{
	double delay;
	char reason[512];
	int n;

	if (ft_now() - s->launched >= HEALTHY)
		s->backoff = s->cfg->restart_backoff;
	log_warnx("epoch %llu: %s; killing the job", s->epoch, why);
	n = kill_job(s, s->epoch);
	log_info("epoch %llu: %d processes killed", s->epoch, n);
	obey_lease(s);
	delay = s->backoff;
	s->backoff = fmin(s->backoff * 2, s->cfg->restart_backoff_max);
	s->restarts++;
	log_info("restart %d in %.3g s", s->restarts, delay);
	idle(s, delay);
	next_epoch(s);
	snprintf(reason, sizeof(reason), "restart %d: %s", s->restarts, why);
	launch(s, reason);
}

/* The first start failed for WHY: say so, clean up, leave. */
static void __attribute__((noreturn))
first_failed(struct sup *s, const char *why)
{
	char *lines = failure_lines(s);

	log_warnx("epoch %llu: the first start failed: %s", s->epoch, why);
	kill_job(s, s->epoch);
	free_lease(s);
	sd_unlink(s, SUP_PID_FILE);
	sd_unlink(s, "mpirun.pid");
	report(s, 1, "the master did not start (%s):%s", why, lines);
	free(lines);
	exit(1);
}

/* Watch the job for good. */
static void __attribute__((noreturn))
run(struct sup *s)
{
	char why[256];

	for (;;) {
		wait_events(s, s->report_pending ? READY_TICK : s->tick);
		obey_lease(s);
		renew(s);
		find_master(s);
		check_ready(s);
		if (!job_failed(s, why, sizeof(why)))
			continue;
		if (s->report_pending)
			first_failed(s, why);
		restart(s, why);
	}
}

/* ---- taking the lease ---- */

/* Fence the holders of R: SIGKILL those on this host and wait until they
 * are gone.  1 when one of them is on another host, where we cannot, 0
 * otherwise. */
static int
fence(struct sup *s, const struct lease_rec *r)
{
	const struct lease_id *ids[2] = { &r->sup, &r->master };
	char who[LEASE_HOST_MAX + 32];
	double until;
	int i, remote = 0;

	(void)s;
	for (i = 0; i < 2; i++) {
		const struct lease_id *id = ids[i];

		if (id->pid <= 0)
			continue;
		lease_id_str(id, who, sizeof(who));
		if (!lease_id_local(id)) {
			log_warnx("cannot fence %s from this host (no remote "
				  "fencing yet)", who);
			remote = 1;
			continue;
		}
		if (!kill_id(id))
			continue;
		log_info("fenced %s (%s): SIGKILL", who,
			 i == 0 ? "supervisor" : "master");
		until = ft_now() + KILL_WAIT;
		while (ft_proc_is(id->pid, id->start) && ft_now() < until)
			ft_sleep(0.01);
	}
	return remote;
}

/* Watch the lease for SECONDS: 1 if its (epoch, seq) stood still from R
 * all along, 0 if it moved (s->rec holds it then). */
static int
stands_still(struct sup *s, const struct lease_rec *r, double seconds)
{
	double until = ft_now() + seconds;
	struct lease_rec now;

	while (ft_now() < until) {
		wait_events(s, s->tick);
		if (lease_read(&s->lease, &now) != 0)
			continue;
		if (now.epoch != r->epoch || now.seq != r->seq ||
		    now.state != r->state) {
			seen(s, &now);
			return 0;
		}
	}
	return 1;
}

/* "supervisor pid P on H, master pid M" for R (LOCKED: the pid holding
 * master.lock) into BUF. */
static const char *
holders(const struct sup *s, const struct lease_rec *r, pid_t locked,
	char *buf, size_t n)
{
	long master = r->master.pid > 0 ? (long)r->master.pid : (long)locked;

	if (master <= 0)
		master = sd_read_pid(s->cfg->state_dir, "master.pid");
	if (r->sup.pid > 0)
		snprintf(buf, n, "supervisor pid %d on %s, master pid %ld",
			 (int)r->sup.pid, r->sup.host, master);
	else
		snprintf(buf, n, "no supervisor, master pid %ld", master);
	return buf;
}

static int
refuse_running(struct sup *s, const struct lease_rec *r, pid_t locked)
{
	char who[256];

	report(s, 1, "cluster %s is already running (%s); `ftfarm start "
	       "--standby` waits to take over", s->cfg->name,
	       holders(s, r, locked, who, sizeof(who)));
	return 1;
}

/* ftfarm start: take the lease under a new epoch, from a free one or
 * from holders that are dead (on this host) or silent for a lease
 * (elsewhere: fenced by waiting one more lease).  0 when taken; else the
 * exit status, after reporting why not. */
static int
take_first(struct sup *s)
{
	struct lease_rec r;
	pid_t locked;
	int i, rc;

	for (i = 0; i < SWAP_TRIES; i++) {
		rc = lease_read(&s->lease, &r);
		if (rc == -1 && errno != EBADMSG) {
			report(s, 1, "%s: %s", s->lease.path, strerror(errno));
			return 1;
		}
		if (rc == -1) {
			log_warnx("the lease %s is damaged; making it anew",
				  s->lease.path);
			memset(&r, 0, sizeof(r));
		}
		locked = sd_locked_by(s->cfg->state_dir);
		if (locked)
			return refuse_running(s, &r, locked);
		if (rc == 0 && r.state != LEASE_FREE &&
		    !(id_dead(&r.sup) && id_dead(&r.master))) {
			/* Alive here, or renewed from elsewhere. */
			if (id_live_here(&r.sup) || id_live_here(&r.master))
				return refuse_running(s, &r, 0);
			if (!stands_still(s, &r, s->cfg->lease))
				return refuse_running(s, &s->rec, 0);
			log_warnx("lease epoch %llu expired; taking it over",
				  r.epoch);
			if (fence(s, &r) &&
			    !stands_still(s, &r, s->cfg->lease))
				return refuse_running(s, &s->rec, 0);
		}
		rc = take(s, &r);
		if (rc == 0)
			return 0;
		if (rc == -1) {
			report(s, 1, "cannot take the lease %s: %s",
			       s->lease.path, strerror(errno));
			return 1;
		}
	}
	report(s, 1, "the lease %s keeps changing; is another start running?",
	       s->lease.path);
	return 1;
}

/* A standby may begin: the cluster runs and no other standby waits on
 * this host.  0, or the exit status after reporting why not. */
static int
standby_begin(struct sup *s)
{
	char *file = sup_standby_file(), who[LEASE_HOST_MAX + 32];
	struct lease_rec r;
	pid_t other = sd_read_pid(s->cfg->state_dir, file);
	int rc = lease_read(&s->lease, &r);

	if (rc == -1)
		report(s, 1, "%s: %s", s->lease.path, strerror(errno));
	else if (rc == 1 || r.state == LEASE_FREE)
		report(s, 1, "cluster %s is not running: no master to stand by "
		       "for (`ftfarm start -c %s` starts it)", s->cfg->name,
		       s->c->config);
	else if (r.state == LEASE_STOPPING)
		report(s, 1, "cluster %s is stopping", s->cfg->name);
	else if (other > 0)
		report(s, 1, "a standby for cluster %s already waits on this "
		       "host (pid %d)", s->cfg->name, (int)other);
	else if (sd_write_pid(s->cfg->state_dir, file, getpid()) == -1)
		report(s, 1, "%s/%s: %s", s->cfg->state_dir, file,
		       strerror(errno));
	else {
		seen(s, &r);
		log_info("standby for epoch %llu", r.epoch);
		report(s, 0, "standby for cluster %s: lease epoch %llu held by "
		       "%s", s->cfg->name, r.epoch, lease_id_str(r.sup.pid > 0 ?
		       &r.sup : &r.master, who, sizeof(who)));
		rc = 0;
	}
	free(file);
	return rc == 0 ? 0 : 1;
}

static void
standby_unlink(struct sup *s)
{
	char *file = sup_standby_file();

	sd_unlink(s, file);
	free(file);
}

static void __attribute__((noreturn))
standby_leave(struct sup *s, const char *why)
{
	log_info("%s; the standby leaves", why);
	standby_unlink(s);
	exit(0);
}

/* Wait until the lease can be taken over, fence its holders, take it.
 * WHY: the reason, for the new master. */
static void
standby_wait(struct sup *s, char *why, size_t n)
{
	char who[2][LEASE_HOST_MAX + 32];
	struct lease_rec r = s->rec;
	double moved = ft_now(), now;
	int dead;

	for (;;) {
		wait_events(s, s->tick);
		if (s->stop_signal)
			standby_leave(s, "signal received");
		if (dir_gone(s))
			standby_leave(s, "the state dir is gone");
		if (lease_read(&s->lease, &r) == -1)
			continue;
		if (r.state != LEASE_ACTIVE)
			standby_leave(s, r.state == LEASE_FREE ? "cluster "
				      "stopped" : "cluster stopping");
		now = ft_now();
		if (r.epoch != s->rec.epoch || r.seq != s->rec.seq)
			moved = now;
		seen(s, &r);
		dead = id_dead(&r.sup) && id_dead(&r.master);
		if (!dead && now - moved < s->cfg->lease)
			continue;
		lease_id_str(&r.sup, who[0], sizeof(who[0]));
		lease_id_str(&r.master, who[1], sizeof(who[1]));
		snprintf(why, n, "took over epoch %llu (supervisor %s, master "
			 "%s): %s", r.epoch, who[0], who[1], dead ?
			 "both dead" : "lease expired");
		log_warnx("%s", why);
		if (fence(s, &r) && !stands_still(s, &r, s->cfg->lease)) {
			log_info("lease renewed again; standing by");
			moved = ft_now();
			continue;
		}
		if (take(s, &r) == 0)
			return;
		moved = ft_now();
	}
}

/* ---- the process ---- */

/* Signals: SIGTERM and SIGINT come through a descriptor, SIGPIPE and
 * SIGHUP are ignored.  0 or -1. */
static int
setup_signals(struct sup *s)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigprocmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	s->sigfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	return s->sigfd < 0 ? -1 : 0;
}

/* Everything before the lease.  0, or -1 after reporting why. */
static int
setup(struct sup *s, struct cli *c, int standby, int report_fd)
{
	char err[512], *path;
	struct stat st;
	int rc;

	memset(s, 0, sizeof(*s));
	s->c = c;
	s->cfg = &c->cfg;
	s->report_fd = report_fd;
	s->report_pending = 1;
	s->mpirun_fd = s->master_fd = s->sigfd = -1;
	s->master_status = s->mpirun_status = -1;
	s->tick = fmin(s->cfg->lease / 8, TICK_MAX);
	s->backoff = s->cfg->restart_backoff;
	s->dir_entry = launch_dir_entry(s->cfg);
	s->mpirun_log = sd_path(s, "mpirun.log");
	s->down = ft_calloc((size_t)s->cfg->nnodes, sizeof(*s->down));
	lease_self(&s->self);
	umask(077);
	snprintf(s->ident, sizeof(s->ident), "ftfarm-%s[%d]",
		 standby ? "standby" : "supervisor", (int)getpid());
	path = report_fd >= 0 ? sd_path(s, SUP_LOG_FILE) : NULL;
	rc = log_init(path, s->ident);
	free(path);
	if (rc == -1 || setup_signals(s) == -1) {
		report(s, 1, "cannot set up the supervisor: %s", strerror(errno));
		return -1;
	}
	if (lease_open(&s->lease, s->cfg->state_dir, err, sizeof(err)) == -1) {
		report(s, 1, "%s", err);
		return -1;
	}
	if (stat(s->cfg->state_dir, &st) == -1) {
		report(s, 1, "%s: %s", s->cfg->state_dir, strerror(errno));
		return -1;
	}
	s->dir_dev = st.st_dev;
	s->dir_ino = st.st_ino;
	return 0;
}

int
sup_main(struct cli *c, int standby, int report_fd)
{
	static struct sup sup;
	struct sup *s = &sup;
	char why[512];

	if (setup(s, c, standby, report_fd) == -1)
		return 1;
	if (standby) {
		if (standby_begin(s) != 0)
			return 1;
		standby_wait(s, why, sizeof(why));
		standby_unlink(s);
		snprintf(s->ident, sizeof(s->ident), "ftfarm-supervisor[%d]",
			 (int)getpid());
	} else if (take_first(s) != 0) {
		return 1;
	}
	s->ready_until = ft_now() + s->cfg->start_timeout + s->cfg->nworkers;
	log_info("epoch %llu: lease taken", s->epoch);
	if (sd_write_pid(s->cfg->state_dir, SUP_PID_FILE, getpid()) == -1)
		log_warn("%s/%s", s->cfg->state_dir, SUP_PID_FILE);
	if (launch(s, standby ? why : NULL) == -1 && s->report_pending)
		first_failed(s, "cannot start the launcher");
	run(s);
}

/* ---- what clients see ---- */

int
sup_standby_waiting(const char *state_dir)
{
	char *mine = sup_standby_file();
	DIR *d = opendir(state_dir);
	struct dirent *e;
	int found = 0;

	while (d && !found && (e = readdir(d)) != NULL) {
		size_t len = strlen(e->d_name);

		if (strncmp(e->d_name, "standby.", 8) != 0 || len < 12 ||
		    strcmp(e->d_name + len - 4, ".pid") != 0)
			continue;
		/* Ours is checked; another host's is taken at its word. */
		found = strcmp(e->d_name, mine) != 0 ||
			sd_read_pid(state_dir, mine) > 0;
	}
	if (d)
		closedir(d);
	free(mine);
	return found;
}

int
sup_watch_alive(struct sup_watch *w, const struct lease_rec *r,
		double lease, double now)
{
	if (w->moved == 0 || r->epoch != w->epoch || r->seq != w->seq) {
		w->epoch = r->epoch;
		w->seq = r->seq;
		w->moved = now;
	}
	if (r->state != LEASE_ACTIVE || r->sup.pid <= 0)
		return 0;
	if (lease_id_local(&r->sup))
		return lease_id_alive(&r->sup);
	return now - w->moved < lease;
}

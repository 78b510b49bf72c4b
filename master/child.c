/* child: a program run by the master as a watched child (see child.h). */
#include "child.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util.h"

#define KILL_GRACE 1.0		/* seconds between SIGTERM and SIGKILL */

extern char **environ;

struct child {
	struct ev_loop *loop;
	pid_t pid;
	int fd;				/* the output pipe, -1 once closed */
	ev_child cw;
	ev_io iow;
	ev_timer tw;			/* the deadline, then the grace */
	int term_sent;
	double t0;
	child_done_fn done;
	void *arg;
	struct child_result r;
};

pid_t
child_pid(const struct child *c)
{
	return c->pid;
}

/* Kept out of a child's environment: the BMC's password, the marks by
 * which the supervisor finds the MPI job's processes (what the master
 * starts may outlive the job: a Slurm allocation it submits), and the
 * MPI runtime's own (a task on a node of such an allocation is no rank
 * of the master's job). */
static const char *const kept_out[] = {
	"IPMI_PASSWORD=", "FTFARM_STATE_DIR=", "FTFARM_EPOCH=", "OMPI_",
	"PMIX_", NULL,
};

static int
keep(const char *e)
{
	int i;

	for (i = 0; kept_out[i]; i++)
		if (strncmp(e, kept_out[i], strlen(kept_out[i])) == 0)
			return 0;
	return 1;
}

/* Our environment less what is kept out (a new array of borrowed
 * strings). */
static char **
child_env(void)
{
	size_t n = 0, k = 0;
	char **env;

	while (environ[n])
		n++;
	env = ft_calloc(n + 1, sizeof(*env));
	for (n = 0; environ[n]; n++)
		if (keep(environ[n]))
			env[k++] = environ[n];
	return env;
}

/* Spawn ARGV in DIR with its output into WFD.  0, or an errno. */
static int
spawn(pid_t *pid, char *const argv[], const char *dir, int wfd)
{
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	sigset_t none, all;
	char **env = child_env();
	int rc;

	sigemptyset(&none);
	sigfillset(&all);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, wfd, 1);
	posix_spawn_file_actions_adddup2(&fa, wfd, 2);
	posix_spawn_file_actions_addclosefrom_np(&fa, 3);
	if (dir)
		posix_spawn_file_actions_addchdir_np(&fa, dir);
	posix_spawnattr_init(&at);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSID |
				 POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
	posix_spawnattr_setsigmask(&at, &none);
	posix_spawnattr_setsigdefault(&at, &all);
	rc = posix_spawnp(pid, argv[0], &fa, &at, argv, env);
	posix_spawnattr_destroy(&at);
	posix_spawn_file_actions_destroy(&fa);
	free(env);
	return rc;
}

/* Read what the pipe has now; at its end (or on an error) close it. */
static void
drain(struct child *c)
{
	char buf[4096];
	ssize_t got;

	while (c->fd >= 0) {
		got = read(c->fd, buf, sizeof(buf));
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0 && errno == EAGAIN)
			return;
		if (got <= 0) {
			ev_io_stop(c->loop, &c->iow);
			close(c->fd);
			c->fd = -1;
			return;
		}
		if (c->r.out_len < CHILD_OUT_MAX) {
			size_t k = (size_t)got;

			if (k > CHILD_OUT_MAX - c->r.out_len)
				k = CHILD_OUT_MAX - c->r.out_len;
			memcpy(c->r.out + c->r.out_len, buf, k);
			c->r.out_len += k;
			c->r.out[c->r.out_len] = '\0';
		}
	}
}

/* Stop watching C, close its pipe, free it. */
static void
release(struct child *c)
{
	ev_child_stop(c->loop, &c->cw);
	ev_timer_stop(c->loop, &c->tw);
	if (c->fd >= 0) {
		ev_io_stop(c->loop, &c->iow);
		close(c->fd);
	}
	free(c);
}

static void
on_output(struct ev_loop *loop, ev_io *w, int revents)
{
	(void)loop, (void)revents;
	drain(w->data);
}

/* C has exited (STATUS) or could not start: report it, once. */
static void
finish(struct child *c)
{
	c->r.seconds = ft_now() - c->t0;
	if (c->r.started) {
		drain(c);
		/* What it left in its session goes with it. */
		kill(-c->pid, SIGKILL);
	}
	c->done(c->arg, &c->r);
	release(c);
}

static void
on_exit_status(struct ev_loop *loop, ev_child *w, int revents)
{
	struct child *c = w->data;

	(void)loop, (void)revents;
	if (WIFEXITED(w->rstatus)) {
		c->r.exit = WEXITSTATUS(w->rstatus);
	} else if (WIFSIGNALED(w->rstatus)) {
		c->r.exit = -1;
		c->r.signal = WTERMSIG(w->rstatus);
	} else {
		return;		/* stopped or continued: not the end */
	}
	finish(c);
}

/* The deadline: SIGTERM its session; a grace later, SIGKILL.  Also the
 * report of a child that could not start. */
static void
on_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct child *c = w->data;

	(void)revents;
	if (!c->r.started) {
		finish(c);
		return;
	}
	c->r.timed_out = 1;
	kill(-c->pid, c->term_sent ? SIGKILL : SIGTERM);
	c->term_sent = 1;
	ev_timer_set(w, KILL_GRACE, 0);
	ev_timer_start(loop, w);
}

struct child *
child_start(struct ev_loop *loop, char *const argv[], const char *dir,
	    double deadline, child_done_fn done, void *arg)
{
	struct child *c = ft_calloc(1, sizeof(*c));
	int p[2] = { -1, -1 };

	c->loop = loop;
	c->fd = -1;
	c->done = done;
	c->arg = arg;
	c->t0 = ft_now();
	c->tw.data = c->cw.data = c->iow.data = c;
	if (pipe2(p, O_CLOEXEC) == -1)
		c->r.err_no = errno;
	else
		c->r.err_no = spawn(&c->pid, argv, dir, p[1]);
	if (p[1] >= 0)
		close(p[1]);
	c->r.started = c->r.err_no == 0;
	if (!c->r.started) {
		if (p[0] >= 0)
			close(p[0]);
		c->pid = 0;
		ev_timer_init(&c->tw, on_timer, 0, 0);	/* report from the loop */
		ev_timer_start(loop, &c->tw);
		return c;
	}
	c->fd = p[0];
	fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK);
	ev_io_init(&c->iow, on_output, c->fd, EV_READ);
	ev_io_start(loop, &c->iow);
	ev_child_init(&c->cw, on_exit_status, c->pid, 0);
	ev_child_start(loop, &c->cw);
	/* The loop's clock may be stale (an MPI call that took long): the
	 * deadline counts from now. */
	ev_now_update(loop);
	ev_timer_init(&c->tw, on_timer, deadline, 0);
	ev_timer_start(loop, &c->tw);
	return c;
}

void
child_abandon(struct child *c)
{
	if (c == NULL)
		return;
	if (c->r.started)
		kill(-c->pid, SIGKILL);
	release(c);
}

/* The first line of R's output, without its newline, into OUT. */
static void
first_line(const struct child_result *r, char *out, size_t n)
{
	const char *s = r->out;
	size_t k;

	while (*s == '\n' || *s == '\r')
		s++;
	k = strcspn(s, "\r\n");
	snprintf(out, n, "%.*s", (int)k, s);
}

void
child_describe(const struct child_result *r, char *out, size_t n)
{
	char line[256];

	first_line(r, line, sizeof(line));
	if (!r->started)
		snprintf(out, n, "cannot run: %s", strerror(r->err_no));
	else if (r->timed_out)
		snprintf(out, n, "killed after %.1f s%s%s", r->seconds,
			 line[0] ? ": " : "", line);
	else if (r->signal)
		snprintf(out, n, "killed by signal %d%s%s", r->signal,
			 line[0] ? ": " : "", line);
	else
		snprintf(out, n, "exit %d%s%s", r->exit, line[0] ? ": " : "",
			 line);
}

/*
 * exec: the task type that runs a command.
 *
 *   {"type": "exec", "argv": ["sh", "-c", "..."], "env": {"K": "V"},
 *    "cwd": "/dir", "timeout": 10, "stdin": "data"}
 *
 * The command is looked up in PATH as execvp does (the PATH of its own
 * environment, so "env" may change it).  It runs in a process group of its
 * own, with the worker's environment less the MPI's variables (OMPI_*,
 * PMIX_*, ... see mpi_prefixes) plus "env", default signal
 * dispositions, an empty signal mask and no descriptors but 0, 1 and 2.
 * Standard input is "stdin" or /dev/null.  Each output goes to the file
 * the task's "stdout" or "stderr" names (the caller opens it: ft_task's
 * out_fd, err_fd), or through a pipe kept up to the task's output_cap
 * bytes; the rest is read and dropped so that the command never blocks on
 * a full pipe.
 *
 * What the task used is what its processes that were waited for used:
 * the command's own rusage (with its children's that it waited for) and
 * that of every other member of its group reaped here.  A memory limit
 * is the kernel's to enforce when the caller gives a cgroup (the command
 * enters it before exec); else the group's RSS is sampled and the group
 * killed past the limit.  Every command asks to be the OOM killer's first
 * choice (oom_score_adj 1000), before the worker and the master.
 *
 * The task ends when the command's own process ends, at the timeout, or on
 * cancel.  Whatever is left of its process group is then killed, so nothing
 * the task started outlives it (a process that left the group, with setsid
 * for instance, is not followed).  The exit status is always collected, and
 * so is that of every group member that is our child (orphans become our
 * children when the worker is a child subreaper).
 *
 * run() keeps no global state and uses no signal handlers, so that it is
 * safe on a worker's runner thread while other threads run.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>		/* also pthread_sigmask */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "plugin.h"
#include "task_env.h"
#include "task_io.h"
#include "task_mem.h"
#include "util.h"

extern char **environ;

#define SLICE_MS 50		/* longest wait between two looks at cancel */
#define SLICE_NOPIDFD_MS 2	/* the same while polling for exit by hand */
#define DRAIN_GRACE 0.1		/* seconds to wait for EOF after the kill */
#define WRITE_CHUNK 65536
#define FALLBACK_MAX_FD 65536	/* close bound when close_range is missing */

/* Where the child failed before the command ran, sent up the error pipe. */
enum stage { STAGE_SETUP = 1, STAGE_CHDIR, STAGE_EXEC, STAGE_CGROUP };

struct child_error {
	int stage;		/* enum stage */
	int err;		/* errno */
};

/* Everything the child needs, prepared before fork so that the child
 * itself only makes async-signal-safe calls. */
struct launch {
	char **argv;		/* NULL-terminated, strings of the spec */
	char **envp;		/* NULL: keep the worker's environment */
	size_t env_first;	/* envp[env_first..] are ours to free */
	const char *path;	/* PATH to search argv[0] in (envp's) */
	const char *cwd;	/* NULL: stay where the worker is */
	int fd[3];		/* the child's ends for 0, 1, 2 (all >= 3) */
	int errpipe;		/* write end of the error pipe (>= 3) */
	int max_fd;		/* close bound when close_range fails */
	struct sigaction dfl;	/* SIG_DFL, for every signal */
	sigset_t empty;		/* the child's signal mask */
	/* Signals the child sets to SIG_DFL, bit N - 1 for signal N: a
	 * plain mask, for sigaddset refuses the C library's own signals
	 * (32 and 33 in glibc), which may be ignored all the same. */
	unsigned long long reset;
	int pin;		/* bind the child to CPUS */
	cpu_set_t cpus;
	int cgroup_fd;		/* the task's cgroup.procs, or 0 */
};

/* The child's standard input. */
struct feed {
	int fd;			/* write end (non-blocking); -1 when done */
	const char *data;
	size_t len;
	size_t off;		/* bytes written so far */
};

/* A started child, which leads its own process group. */
struct proc {
	pid_t pid;		/* also the group id; -1 before fork */
	int pidfd;		/* readable once pid exits; -1 if unsupported */
	int pidfd_ready;	/* the last poll saw pidfd readable */
	int errpipe;		/* read end of the error pipe */
	int cancel_fd;		/* the task's (readable once cancelled), 0 */
	struct task_sink out;
	struct task_sink err;
	struct feed in;
	double cpu;		/* CPU seconds of the processes reaped */
	uint64_t rss;		/* their largest peak RSS, or the group's
				 * largest sample, bytes */
	uint64_t limit;		/* bytes the group may use, checked by
				 * sampling (0: not sampled) */
	double sample_at;	/* the next sample is due (ft_now) */
};

/* How the wait for the child ended. */
enum end { END_EXIT, END_TIMEOUT, END_CANCEL, END_MEMORY };

static int fail(struct ft_result *res, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Mark RES failed with exit code CODE and a formatted reason.  Returns -1. */
static int
fail(struct ft_result *res, int code, const char *fmt, ...)
{
	va_list ap;

	res->ok = 0;
	res->exit_code = code;
	va_start(ap, fmt);
	vsnprintf(res->reason, sizeof(res->reason), fmt, ap);
	va_end(ap);
	return -1;
}

/* strerror that is safe on any thread. */
static const char *
errstr(int e, char *buf, size_t n)
{
	return strerror_r(e, buf, n);
}

/* ---- validation ---- */


static const struct jfield exec_fields[] = {
	{ "type", JT_STRING, 1 },
	{ "argv", JT_STRING_ARRAY, 1 },
	{ "env", JT_OBJECT, 0 },
	{ "cwd", JT_STRING, 0 },
	{ "timeout", JT_NUMBER, 0 },
	{ "stdin", JT_STRING, 0 },
	{ NULL, JT_ANY, 0 },
};

/* V (at PATH) must be a string a C program can receive: no NUL inside
 * (jansson decodes "\u0000" only when asked to, but may be asked). */
static int
check_cstring(const json_t *v, const char *path, struct jerr *err)
{
	if (!json_is_string(v))
		return jerr_set(err, path, "expected a string, got %s",
				jcheck_type_name(v));
	if (strlen(json_string_value(v)) != json_string_length(v))
		return jerr_set(err, path, "must not contain a NUL byte");
	return 0;
}

/* "argv" (an array of strings): not empty, no NUL, argv[0] not "". */
static int
check_argv(const json_t *task, const char *path, struct jerr *err)
{
	const json_t *argv = json_object_get(task, "argv");
	const json_t *v;
	char at[256], el[256];
	size_t i;

	jpath_key(at, sizeof(at), path, "argv");
	if (json_array_size(argv) == 0)
		return jerr_set(err, at, "must not be empty");
	json_array_foreach(argv, i, v) {
		jpath_index(el, sizeof(el), at, i);
		if (check_cstring(v, el, err) == -1)
			return -1;
		if (i == 0 && json_string_length(v) == 0)
			return jerr_set(err, el, "must not be empty");
	}
	return 0;
}

/* "env" (an object): names without '=' mapped to strings. */
static int
check_env(const json_t *task, const char *path, struct jerr *err)
{
	json_t *env = json_object_get(task, "env");
	const char *key;
	json_t *v;
	char at[256], el[256];

	jpath_key(at, sizeof(at), path, "env");
	json_object_foreach(env, key, v) {
		jpath_key(el, sizeof(el), at, key);
		if (*key == '\0' || strchr(key, '='))
			return jerr_set(err, el,
					"is not a valid variable name");
		if (check_cstring(v, el, err) == -1)
			return -1;
	}
	return 0;
}

/* "cwd" (a string), when present: a non-empty path. */
static int
check_cwd(const json_t *task, const char *path, struct jerr *err)
{
	const json_t *cwd = json_object_get(task, "cwd");
	char at[256];

	if (cwd == NULL)
		return 0;
	jpath_key(at, sizeof(at), path, "cwd");
	if (check_cstring(cwd, at, err) == -1)
		return -1;
	if (json_string_length(cwd) == 0)
		return jerr_set(err, at, "must not be empty");
	return 0;
}

/* Check an exec task object (see the top of this file).  0, or -1 with ERR
 * set to the first problem. */
static int
exec_validate(const json_t *task, const char *path, struct jerr *err)
{
	if (jcheck_object(task, path, exec_fields, err) == -1 ||
	    jcheck_num_positive(task, path, "timeout", FT_TASK_TIMEOUT_MAX,
				err) == -1 ||
	    check_argv(task, path, err) == -1 ||
	    check_env(task, path, err) == -1 ||
	    check_cwd(task, path, err) == -1)
		return -1;
	return 0;
}

/* ---- preparing the launch ---- */

/* How far to close descriptors by hand if close_range is not there.
 * Asked once (a getrlimit each task is a system call that a short command
 * pays for nothing): the worker does not change its limit.  Atomic: two
 * runners may ask at once, and both find the same answer. */
static int
max_fd(void)
{
	static _Atomic int bound;
	long n;

	if (bound > 0)
		return bound;
	n = sysconf(_SC_OPEN_MAX);
	if (n < 1024)
		n = 1024;
	bound = n > FALLBACK_MAX_FD ? FALLBACK_MAX_FD : (int)n;
	return bound;
}

/* The CPUs of SET ("0,5": places, taken modulo the CPUs online) into
 * L->cpus; none given: L->pin stays 0. */
static void
cpus_init(struct launch *l, const char *set)
{
	long n, c;
	char *end;

	if (set == NULL || *set == '\0')
		return;		/* no pin: no read of /sys for the count */
	n = sysconf(_SC_NPROCESSORS_ONLN);
	if (n < 1)
		n = 1;
	if (n > CPU_SETSIZE)
		n = CPU_SETSIZE;
	CPU_ZERO(&l->cpus);
	while (*set) {
		c = strtol(set, &end, 10);
		if (end == set || c < 0)
			return;
		CPU_SET((int)(c % n), &l->cpus);
		l->pin = 1;
		set = *end == ',' ? end + 1 : end;
		if (*end != ',' && *end != '\0')
			return;
	}
}

/* Fill L from the (validated) task SPEC.  Cannot fail. */
static void
launch_init(struct launch *l, const json_t *spec, const char *const *extra)
{
	const json_t *argv = json_object_get(spec, "argv");
	size_t i, n = json_array_size(argv);

	memset(l, 0, sizeof(*l));
	l->argv = ft_calloc(n + 1, sizeof(*l->argv));
	for (i = 0; i < n; i++)
		l->argv[i] = (char *)json_string_value(json_array_get(argv, i));
	l->envp = task_env_build(json_object_get(spec, "env"), extra,
				 &l->env_first);
	l->path = task_env_path(l->envp ? l->envp : environ);
	l->cwd = jget_str(spec, "cwd", NULL);
	l->fd[0] = l->fd[1] = l->fd[2] = l->errpipe = -1;
	l->max_fd = max_fd();
	l->dfl.sa_handler = SIG_DFL;
	sigemptyset(&l->dfl.sa_mask);
	sigemptyset(&l->empty);
}

static void
launch_free(struct launch *l)
{
	task_env_free(l->envp, l->env_first);
	free(l->argv);
}

/* ---- the child, between fork and exec ---- */

/* Report where and why the child failed, and end it. */
static void
child_fail(int fd, int stage, int err)
{
	struct child_error ce = { stage, err };
	ssize_t n;

	do
		n = write(fd, &ce, sizeof(ce));
	while (n < 0 && errno == EINTR);
	_exit(127);
}

/* execvp with L's own environment and PATH: the PATH search by hand, in
 * a buffer on the stack (a vfork child must not allocate, nor change the
 * worker's environ).  Returns only on failure, with errno set. */
static void
child_execvp(const struct launch *l)
{
	char buf[PATH_MAX];
	char **envp = l->envp ? l->envp : environ;
	const char *file = l->argv[0], *p = l->path, *end;
	size_t flen = strlen(file), dlen;
	int denied = 0;

	if (strchr(file, '/')) {
		execve(file, l->argv, envp);
		return;
	}
	for (; p; p = *end ? end + 1 : NULL) {
		end = strchr(p, ':');
		if (end == NULL)
			end = p + strlen(p);
		dlen = (size_t)(end - p);
		if (dlen + flen + 2 > sizeof(buf))
			continue;
		memcpy(buf, dlen ? p : ".", dlen ? dlen : 1);
		dlen = dlen ? dlen : 1;
		buf[dlen] = '/';
		memcpy(buf + dlen + 1, file, flen + 1);
		execve(buf, l->argv, envp);
		if (errno == EACCES)
			denied = 1;
		else if (errno != ENOENT && errno != ENOTDIR &&
			 errno != ELOOP && errno != ENAMETOOLONG)
			return;
	}
	errno = denied ? EACCES : ENOENT;
}

/* The C library refuses to touch the signals it reserves for itself (32
 * and 33 in glibc), yet an ignored one would be inherited across exec: ask
 * the kernel directly. */
static void
kernel_default(int sig)
{
	struct {
		void *handler;
		unsigned long flags;
		void *restorer;
		unsigned long mask;
	} ksa = { 0 };

	syscall(SYS_rt_sigaction, sig, &ksa, NULL, sizeof(ksa.mask));
}

/* Default dispositions for the signals the worker changed and an empty
 * mask.  Signals the C library reserves refuse the change through
 * sigaction; the kernel takes it. */
static int
child_signals(const struct launch *l)
{
	int sig;

	for (sig = 1; sig <= 64 && sig < NSIG; sig++) {
		if (!(l->reset & (1ULL << (sig - 1))))
			continue;
		if (sigaction(sig, &l->dfl, NULL) == -1)
			kernel_default(sig);
	}
	return sigprocmask(SIG_SETMASK, &l->empty, NULL);
}

/* Install the three standard descriptors and have every other one closed
 * by exec (the error pipe must stay open until then). */
static int
child_fds(const struct launch *l)
{
	int fd;

	for (fd = 0; fd < 3; fd++)
		if (dup2(l->fd[fd], fd) < 0)
			return -1;
	if (close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) == 0)
		return 0;
	for (fd = 3; fd < l->max_fd; fd++)
		if (fd != l->errpipe)
			close(fd);
	return 0;
}

/* Become the command.  Never returns.  Runs in a vfork child, which
 * shares the worker's memory until exec: only async-signal-safe calls,
 * and no write to anything of the parent's (environ included). */
static void
child_exec(const struct launch *l)
{
	int stage = STAGE_SETUP;

	if (setpgid(0, 0) < 0 || child_signals(l) < 0)
		goto fail;
	stage = STAGE_CGROUP;
	if (l->cgroup_fd > 2 && write(l->cgroup_fd, "0", 1) != 1)
		goto fail;
	stage = STAGE_SETUP;
	task_mem_oom_first();
	if (child_fds(l) < 0 ||
	    (l->pin && sched_setaffinity(0, sizeof(l->cpus), &l->cpus) < 0))
		goto fail;
	stage = STAGE_CHDIR;
	if (l->cwd && chdir(l->cwd) < 0)
		goto fail;
	stage = STAGE_EXEC;
	child_execvp(l);
fail:
	child_fail(l->errpipe, stage, errno);
}

/* ---- the parent side ---- */

/* Move FD above the standard descriptors (so that the child's dup2 onto
 * 0..2 cannot clobber another of its sources), keeping it close-on-exec.
 * Returns the descriptor, or -1 with FD closed. */
static int
fd_lift(int fd)
{
	int nfd;

	if (fd < 0 || fd > 2)
		return fd;
	nfd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	close(fd);
	return nfd;
}

/* A close-on-exec pipe whose ends are both above 2.  0 or -1. */
static int
pipe_make(int p[2])
{
	if (pipe2(p, O_CLOEXEC) < 0) {
		p[0] = p[1] = -1;
		return -1;
	}
	p[0] = fd_lift(p[0]);
	p[1] = fd_lift(p[1]);
	return p[0] < 0 || p[1] < 0 ? -1 : 0;
}

/* The child's end of one output: a copy of FILE (the task's file, above
 * 2), or a pipe whose reading end goes to SINK.  0 or -1. */
static int
output_make(int file, int *child, struct task_sink *sink)
{
	int fds[2];

	if (file > 2) {
		*child = fcntl(file, F_DUPFD_CLOEXEC, 3);
		return *child < 0 ? -1 : 0;
	}
	if (pipe_make(fds) < 0)
		return -1;
	sink->fd = fds[0];
	*child = fds[1];
	return 0;
}

/* Pipes (or the task's files) for the child's three standard descriptors
 * and its error report: the child's ends go to L, ours to P.  0, or -1
 * (the caller closes what was opened). */
static int
proc_pipes(struct proc *p, struct launch *l, const struct ft_task *task)
{
	int fds[2] = { -1, -1 };

	if (output_make(task->out_fd, &l->fd[1], &p->out) < 0 ||
	    output_make(task->err_fd, &l->fd[2], &p->err) < 0)
		return -1;
	if (pipe_make(fds) < 0)
		goto fail;
	p->errpipe = fds[0], l->errpipe = fds[1];
	if (!p->in.data) {
		l->fd[0] = fd_lift(open("/dev/null", O_RDONLY | O_CLOEXEC));
		return l->fd[0] < 0 ? -1 : 0;
	}
	if (pipe_make(fds) < 0)
		goto fail;
	l->fd[0] = fds[0], p->in.fd = fds[1];
	return fcntl(p->in.fd, F_SETFL, O_NONBLOCK);
fail:
	task_fd_close(&fds[0]);
	task_fd_close(&fds[1]);
	return -1;
}

/* A descriptor that becomes readable when PID exits, or -1. */
static int
pidfd_get(pid_t pid)
{
#ifdef SYS_pidfd_open
	return (int)syscall(SYS_pidfd_open, pid, 0);
#else
	(void)pid;
	return -1;
#endif
}

/* vfork a child that becomes L.  Its pid, or -1.  On its own, so that
 * nothing of the caller's lives across vfork. */
static pid_t __attribute__((noinline))
child_start(const struct launch *l)
{
	pid_t pid = vfork();

	if (pid == 0)
		child_exec(l);
	return pid;
}

/* Add to SET the signals of the hexadecimal MASK ("0000000000004a03":
 * bit N-1 is signal N), as /proc/PID/status writes them. */
static void
mask_add(unsigned long long *set, const char *mask)
{
	*set |= strtoull(mask, NULL, 16);
}

/* The signals the worker ignores or catches (its SigIgn and SigCgt), the
 * only ones a child must set back to the default: the others already
 * are.  One read of /proc instead of a sigaction for each of 64 signals,
 * which a short command paid for while the worker waited in vfork.  When
 * /proc cannot tell: every signal, as before. */
static void
signals_to_reset(unsigned long long *set)
{
	char buf[4096], *ign, *cgt;
	ssize_t n = -1;
	int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);

	if (fd >= 0) {
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
	}
	buf[n > 0 ? n : 0] = '\0';
	ign = strstr(buf, "\nSigIgn:");
	cgt = strstr(buf, "\nSigCgt:");
	*set = 0;
	if (ign == NULL || cgt == NULL) {
		*set = ~0ULL;
		return;
	}
	mask_add(set, ign + 8);
	mask_add(set, cgt + 8);
}

/* Start the child described by L with vfork: the worker is a large MPI
 * process, and fork's copy of its page tables cost more than the short
 * commands users run.  All signals stay blocked on this thread across
 * vfork so that no handler of the worker runs in the child before the
 * child resets them.  0, or -1 with RES.reason set. */
static int
proc_start(struct proc *p, struct launch *l, const struct ft_task *task,
	   struct ft_result *res)
{
	sigset_t all, old;
	char eb[64];
	int rc = -1, e, i;

	if (proc_pipes(p, l, task) < 0) {
		fail(res, -1, "cannot make pipes: %s",
		     errstr(errno, eb, sizeof(eb)));
		goto cleanup;
	}
	signals_to_reset(&l->reset);
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	p->pid = child_start(l);
	e = errno;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (p->pid < 0) {
		fail(res, -1, "cannot fork: %s", errstr(e, eb, sizeof(eb)));
		goto cleanup;
	}
	setpgid(p->pid, p->pid);	/* the child does it too: no race */
	p->pidfd = pidfd_get(p->pid);
	rc = 0;
cleanup:
	for (i = 0; i < 3; i++)
		task_fd_close(&l->fd[i]);
	task_fd_close(&l->errpipe);
	return rc;
}

/* Wait for the child's report from before exec.  1 with CE filled when it
 * could not run the command, 0 once exec closed the pipe. */
static int
proc_exec_error(struct proc *p, struct child_error *ce)
{
	ssize_t n;

	do
		n = read(p->errpipe, ce, sizeof(*ce));
	while (n < 0 && errno == EINTR);
	task_fd_close(&p->errpipe);
	return n == (ssize_t)sizeof(*ce);
}

/* write() that cannot raise SIGPIPE in the worker when the child closed its
 * input: the signal is blocked on this thread for the call and one it
 * caused is taken off before the mask is restored. */
static ssize_t
write_nosigpipe(int fd, const void *buf, size_t n)
{
	static const struct timespec zero = { 0, 0 };
	sigset_t pipe_set, old;
	ssize_t w;
	int e;

	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
	w = write(fd, buf, n);
	e = errno;
	if (w < 0 && e == EPIPE)
		while (sigtimedwait(&pipe_set, NULL, &zero) < 0 &&
		       errno == EINTR)
			;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	errno = e;
	return w;
}

/* Write the next piece of F; close it when all is written or the child
 * does not want more. */
static void
feed_write(struct feed *f)
{
	size_t n = f->len - f->off;
	ssize_t w = 0;

	if (n > WRITE_CHUNK)
		n = WRITE_CHUNK;
	if (n > 0)
		w = write_nosigpipe(f->fd, f->data + f->off, n);
	if (w > 0)
		f->off += (size_t)w;
	if (f->off == f->len || (w < 0 && errno != EINTR && errno != EAGAIN))
		task_fd_close(&f->fd);
}

/* Wait up to MS ms for the pipes, the exit descriptor and a cancel, and
 * serve what is ready.  Returns how many of the child's descriptors had
 * news (0 when none). */
static int
proc_poll(struct proc *p, int ms)
{
	struct pollfd pfd[5] = {
		{ .fd = p->out.fd, .events = POLLIN },
		{ .fd = p->err.fd, .events = POLLIN },
		{ .fd = p->in.fd, .events = POLLOUT },
		{ .fd = p->pidfd, .events = POLLIN },
		{ .fd = p->cancel_fd > 0 ? p->cancel_fd : -1, .events = POLLIN },
	};
	int n = poll(pfd, 5, ms);

	p->pidfd_ready = 0;
	if (n <= 0)
		return 0;
	if (pfd[0].revents)
		task_sink_read(&p->out);
	if (pfd[1].revents)
		task_sink_read(&p->err);
	if (pfd[2].revents)
		feed_write(&p->in);
	p->pidfd_ready = pfd[3].revents != 0;
	return n - (pfd[4].revents != 0);	/* a cancel is no news of
						 * the child */
}

/* Has the child exited?  It is left a zombie, so that its pid (the group
 * id) cannot be reused before the group is killed. */
static int
proc_exited(struct proc *p)
{
	siginfo_t si;

	if (p->pidfd >= 0 && !p->pidfd_ready)
		return 0;
	si.si_pid = 0;
	if (waitid(P_PID, (id_t)p->pid, &si, WEXITED | WNOHANG | WNOWAIT) < 0)
		return errno != EINTR;
	return si.si_pid == p->pid;
}

/* How long the next poll may wait, with LEFT seconds to the deadline:
 * until then when a cancel and the exit both wake the poll, else a slice
 * (a look at the cancel flag, or at the child by hand). */
static int
slice_ms(const struct proc *p, double left)
{
	int ms = p->cancel_fd > 0 && p->pidfd >= 0 ? INT_MAX : SLICE_MS;

	if (p->pidfd < 0 && p->out.fd < 0 && p->err.fd < 0)
		ms = SLICE_NOPIDFD_MS;
	if (left * 1000 < ms)
		ms = (int)ceil(left * 1000);
	return ms;
}

/* Sample the RSS of P's group when due: 1 when it is past P's limit
 * (the group is then killed). */
static int
over_limit(struct proc *p, double now)
{
	uint64_t rss;

	if (p->limit == 0 || now < p->sample_at)
		return 0;
	p->sample_at = now + TASK_MEM_SAMPLE_S;
	rss = task_mem_group_rss(p->pid);
	if (rss > p->rss)
		p->rss = rss;
	if (rss <= p->limit)
		return 0;
	kill(-p->pid, SIGKILL);
	return 1;
}

/* Serve the child until it exits, TIMEOUT seconds pass (0: no limit),
 * the task is cancelled or its group goes past its memory limit. */
static enum end
proc_wait(struct proc *p, const struct ft_task *task, double timeout)
{
	double deadline = timeout > 0 ? ft_now() + timeout : INFINITY;
	double left, now;

	for (;;) {
		if (*task->cancel)
			return END_CANCEL;
		now = ft_now();
		if (over_limit(p, now))
			return END_MEMORY;
		left = deadline - now;
		if (left <= 0)
			return END_TIMEOUT;
		if (p->limit && left > p->sample_at - now)
			left = fmax(p->sample_at - now, 0.001);
		proc_poll(p, slice_ms(p, left));
		if (proc_exited(p))
			return END_EXIT;
	}
}

/* Tell the caller which process group runs TASK (0: none any more). */
static void
say_group(const struct ft_task *task, pid_t pgid)
{
	if (task->group)
		task->group(task, pgid);
}

/* Count what a reaped process used (RU) in P. */
static void
proc_used(struct proc *p, const struct rusage *ru)
{
	uint64_t rss = (uint64_t)ru->ru_maxrss * 1024;	/* KiB */

	p->cpu += (double)ru->ru_utime.tv_sec + ru->ru_utime.tv_usec * 1e-6 +
		  (double)ru->ru_stime.tv_sec + ru->ru_stime.tv_usec * 1e-6;
	if (rss > p->rss)
		p->rss = rss;
}

/* Reap the child and every other member of its group that is our child,
 * counting what they used.  The group must be dead or dying.  Returns
 * the child's wait status. */
static int
proc_reap(struct proc *p)
{
	struct rusage ru;
	int status = 0, st;
	pid_t pid;

	while ((pid = wait4(p->pid, &status, 0, &ru)) < 0 && errno == EINTR)
		;
	if (pid == p->pid)
		proc_used(p, &ru);
	while ((pid = wait4(-p->pid, &st, 0, &ru)) > 0 || errno == EINTR)
		if (pid > 0)
			proc_used(p, &ru);
	task_fd_close(&p->pidfd);
	return status;
}

/* Read what is left in the output pipes, until EOF or for DRAIN_GRACE
 * seconds at most (a process that left the group may hold a pipe open);
 * only what is ready at once when the task is cancelled. */
static void
proc_drain(struct proc *p, const struct ft_task *task)
{
	double end = ft_now() + DRAIN_GRACE;
	double left;
	int ms;

	while (p->out.fd >= 0 || p->err.fd >= 0) {
		left = end - ft_now();
		if (left < 0)
			break;
		ms = *task->cancel ? 0 : (int)ceil(left * 1000);
		if (proc_poll(p, ms) == 0)
			break;
	}
}

/* End the child's group, collect the exit statuses and the rest of the
 * outputs.  Returns the child's wait status. */
static int
proc_finish(struct proc *p, const struct ft_task *task)
{
	int status;

	kill(-p->pid, SIGKILL);
	task_fd_close(&p->in.fd);
	say_group(task, 0);
	status = proc_reap(p);
	proc_drain(p, task);
	return status;
}

static void
proc_init(struct proc *p, const struct ft_task *task)
{
	const json_t *in = json_object_get(task->spec, "stdin");

	memset(p, 0, sizeof(*p));
	p->pid = -1;
	p->pidfd = p->errpipe = p->out.fd = p->err.fd = p->in.fd = -1;
	p->out.cap = p->err.cap = task->output_cap;
	p->cancel_fd = task->cancel_fd;
	/* Sampled: the first sample a period in (a short command costs no
	 * scan of /proc, and nothing it could take meanwhile is missed for
	 * longer). */
	if (task->cgroup_fd <= 2 && task->mem_limit) {
		p->limit = task->mem_limit;
		p->sample_at = ft_now() + TASK_MEM_SAMPLE_S;
	}
	if (in) {
		p->in.data = json_string_value(in);
		p->in.len = json_string_length(in);
	}
}

/* Close what is open and free the outputs not handed over. */
static void
proc_free(struct proc *p)
{
	task_fd_close(&p->pidfd);
	task_fd_close(&p->errpipe);
	task_fd_close(&p->out.fd);
	task_fd_close(&p->err.fd);
	task_fd_close(&p->in.fd);
	free(p->out.data);
	free(p->err.data);
}

/* Hand the kept outputs to RES: NUL-terminated for callers that want a
 * string (the NUL is not counted in the length), NULL when empty. */
static void
proc_give_output(struct proc *p, struct ft_result *res)
{
	res->cpu_s = p->cpu;
	res->max_rss = p->rss;
	res->out = p->out.data;
	res->out_len = p->out.len;
	res->err = p->err.data;
	res->err_len = p->err.len;
	p->out.data = p->err.data = NULL;
}

/* RES for a child that could not run the command (CE). */
static void
result_child_error(struct ft_result *res, const struct launch *l,
		   const struct child_error *ce)
{
	char eb[64];
	const char *why = errstr(ce->err, eb, sizeof(eb));

	if (ce->stage == STAGE_EXEC)
		fail(res, 127, "cannot execute %s: %s", l->argv[0], why);
	else if (ce->stage == STAGE_CGROUP)
		fail(res, 127, "cannot enter the task's memory cgroup: %s", why);
	else if (ce->stage == STAGE_CHDIR)
		fail(res, 127, "cannot chdir to %s: %s", l->cwd, why);
	else
		fail(res, 127, "cannot set up the child process: %s", why);
}

/* RES for a wait of P that ended with END and, on exit, wait status
 * STATUS. */
static void
result_end(struct ft_result *res, const struct proc *p, enum end end,
	   int status, double timeout)
{
	if (end == END_MEMORY) {
		res->ok = 0;
		res->exit_code = 128 + SIGKILL;
		res->signal = SIGKILL;
		task_mem_reason(res->reason, sizeof(res->reason), p->rss,
				p->limit);
	} else if (end == END_TIMEOUT)
		fail(res, -1, "timeout after %g s", timeout);
	else if (end == END_CANCEL)
		fail(res, -1, "cancelled");
	else if (WIFSIGNALED(status)) {
		fail(res, 128 + WTERMSIG(status), "signal %d",
		     WTERMSIG(status));
		res->signal = WTERMSIG(status);
	} else if (WEXITSTATUS(status) != 0)
		fail(res, WEXITSTATUS(status), "exit %d", WEXITSTATUS(status));
	else
		res->ok = 1;
}

/* Run an exec task.  Returns 0 with RES describing the outcome, or -1 (RES
 * reason set) when no process could be started. */
static int
exec_run(const struct ft_task *task, struct ft_result *res)
{
	double timeout = ft_task_timeout(task->spec, 0);
	struct child_error ce;
	struct launch l;
	struct proc p;
	enum end end;
	int rc = -1, status;

	launch_init(&l, task->spec, task->env);
	l.cgroup_fd = task->cgroup_fd;
	cpus_init(&l, task->cpuset);
	proc_init(&p, task);
	if (l.argv[0] == NULL) {
		fail(res, -1, "no argv (the task was not validated)");
		goto cleanup;
	}
	if (proc_start(&p, &l, task, res) < 0)
		goto cleanup;
	say_group(task, p.pid);
	rc = 0;
	if (proc_exec_error(&p, &ce)) {
		say_group(task, 0);
		proc_reap(&p);
		result_child_error(res, &l, &ce);
		goto cleanup;
	}
	end = proc_wait(&p, task, timeout);
	status = proc_finish(&p, task);
	result_end(res, &p, end, status, timeout);
	proc_give_output(&p, res);
cleanup:
	proc_free(&p);
	launch_free(&l);
	return rc;
}

FT_PLUGIN_DEFINE_FLAGS("exec", exec_validate, exec_run, NULL,
		       FT_PLUGIN_RISKY | FT_PLUGIN_OUTPUT_FILES | FT_PLUGIN_USAGE |
		       FT_PLUGIN_MEMCG)

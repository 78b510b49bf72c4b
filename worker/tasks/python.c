/*
 * python: the task type that calls Python functions, in an interpreter
 * its slot keeps alive from task to task.
 *
 *   {"type": "python", "fn": BASE64 | "fn_file": PATH,
 *    "args": BASE64 | "args_file": PATH, "python": "python3",
 *    "dir": DIR, "call_timeout": S, "timeout": S, "after_values": B}
 *
 * With "after_values": true the master sends the task, once the tasks of
 * its "after" have succeeded, with their values: "inputs": [VALUE...]
 * (or "inputs_file": PATH of that array; master/inputs.h), which the
 * interpreter puts in place of the arguments that name them.
 * "fn" is a function pickled with cloudpickle (with the client's
 * sys.path and working directory: python/ftfarm/_calls.py), "args" a
 * pickled list of (args, kwargs) pairs: one call of the function each,
 * in order.  Either
 * is given inline (base64) or as a file (a big one).  The task's value
 * (its result line's "value") is the pickled list of the calls'
 * outcomes, "b64:..." inline or "file:PATH" in DIR when it is big; what
 * the calls print is the task's stdout and stderr, kept as exec keeps a
 * command's.  The task is ok when every call returned.  The ftfarm
 * Python package (python/ftfarm) writes and reads all of this: its
 * Executor is what users call.
 *
 * The first python task of a slot starts its interpreter: `PYTHON -m
 * ftfarm._slot` (python/ftfarm/_slot.py, found beside this plugin: the
 * checkout's python/ or an installation's lib/python3/dist-packages/),
 * in a process group of its own, with a socket as its standard input
 * and pipes as its outputs.  Each task is one request on the socket and
 * one reply, frames of a little-endian u32 length and JSON:
 *
 *   request  {"id": TASK_ID, "attempt": N, "env": {NAME: VALUE...},
 *             "value_max": BYTES, "task": SPEC}
 *   reply    {"ok": B, "value": TEXT, "reason": TEXT}
 *
 * The interpreter serves the slot's tasks one after another until the
 * slot goes (its parent's death kills it).  A task that asks for another
 * "python" gets a new interpreter.  What a task used is what the
 * interpreter measured around its calls (its reply's "cpu_s" and
 * "max_rss").  Its outputs go to the task's files, when it names them, as
 * they are read.  A task's memory limit ("mem") is kept by sampling the
 * interpreter's RSS while the task runs (the interpreter outlives its
 * tasks: it enters no cgroup of one of them): past it the interpreter is
 * killed and the task fails "memory: ...", the slot stays.  A cancelled task's call is
 * interrupted (SIGINT); at a task's timeout, or when an interrupted call
 * does not end within a second, the interpreter's group is killed and the
 * next task starts a new one.  An
 * interpreter that dies of a signal under a task (a call that kills it,
 * a crash, the OOM killer) takes the slot with it (ft_result.lost): the
 * master runs the task again elsewhere, or fails it as poison when it
 * kills every slot it runs on.  One that exits by itself fails the task
 * with its status and last words.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "plugin.h"
#include "task_env.h"
#include "task_io.h"
#include "task_mem.h"
#include "util.h"

#define SLICE_MS 1000		/* longest poll between looks at the clock */
#define CANCEL_GRACE 1.0	/* seconds a cancelled call has to stop */
#define REPLY_MAX (FT_VALUE_MAX + 64 * 1024)	/* a reply frame, at most */
#define SLOT_MODULE "ftfarm._slot"

/* The slot's interpreter.  Only the slot's runner thread touches it. */
struct interp {
	pid_t pid;			/* also its group; 0: none */
	int pidfd;			/* readable once it exits, or -1 */
	int sock;			/* requests out, replies in */
	struct task_sink out, err;	/* its standard output and error */
	char *python;			/* the program it runs */
	int serving;			/* it has answered a request: its
					 * SIGINT handler is in place */
};

static struct interp ip = { .pidfd = -1, .sock = -1,
			    .out = { .fd = -1 }, .err = { .fd = -1 } };

static int fail(struct ft_result *res, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* RES failed (exit -1) for the formatted reason.  Returns 0: RES says
 * what happened. */
static int
fail(struct ft_result *res, const char *fmt, ...)
{
	va_list ap;

	res->ok = 0;
	res->exit_code = -1;
	va_start(ap, fmt);
	vsnprintf(res->reason, sizeof(res->reason), fmt, ap);
	va_end(ap);
	return 0;
}

/* ---- validation ---- */

static const struct jfield python_fields[] = {
	{ "type", JT_STRING, 1 },
	{ "fn", JT_STRING, 0 },
	{ "fn_file", JT_STRING, 0 },
	{ "args", JT_STRING, 0 },
	{ "args_file", JT_STRING, 0 },
	{ "python", JT_STRING, 0 },
	{ "dir", JT_STRING, 0 },
	{ "call_timeout", JT_NUMBER, 0 },
	{ "timeout", JT_NUMBER, 0 },
	{ "after_values", JT_BOOL, 0 },
	{ "inputs", JT_ARRAY, 0 },
	{ "inputs_file", JT_STRING, 0 },
	{ "inputs_error", JT_STRING, 0 },
	{ NULL, JT_ANY, 0 },
};

/* Exactly one of the keys INLINE and FILE in TASK (at PATH). */
static int
check_one_of(const json_t *task, const char *path, const char *inl,
	     const char *file, struct jerr *err)
{
	int a = json_object_get(task, inl) != NULL;
	int b = json_object_get(task, file) != NULL;

	if (a == b)
		return jerr_set(err, path, a ? "has both \"%s\" and \"%s\""
				: "needs \"%s\" or \"%s\"", inl, file);
	return 0;
}

static int
python_validate(const json_t *task, const char *path, struct jerr *err)
{
	const json_t *ct = json_object_get(task, "call_timeout");
	const char *py = jget_str(task, "python", "python3");
	char at[256];

	if (jcheck_object(task, path, python_fields, err) == -1 ||
	    check_one_of(task, path, "fn", "fn_file", err) == -1 ||
	    check_one_of(task, path, "args", "args_file", err) == -1)
		return -1;
	if (ct && !(json_number_value(ct) > 0)) {
		jpath_key(at, sizeof(at), path, "call_timeout");
		return jerr_set(err, at, "must be more than 0");
	}
	if (*py == '\0' || strlen(py) >= PATH_MAX) {
		jpath_key(at, sizeof(at), path, "python");
		return jerr_set(err, at, "must name a program");
	}
	return 0;
}

/* ---- the interpreter ---- */

/* The directory that holds the ftfarm package beside this plugin
 * (NUL-terminated in DIR), or "" when there is none. */
static void
package_dir(char *dir, size_t n)
{
	static const char *const rel[] = {
		"/../../python",			/* a checkout: bin/tasks */
		"/../../python3/dist-packages",		/* P/lib/ftfarm/tasks */
	};
	char here[PATH_MAX], probe[PATH_MAX + 64];
	Dl_info info;
	size_t i;
	char *slash;

	dir[0] = '\0';
	if (dladdr((void *)package_dir, &info) == 0 || info.dli_fname == NULL ||
	    realpath(info.dli_fname, here) == NULL ||
	    (slash = strrchr(here, '/')) == NULL)
		return;
	*slash = '\0';
	for (i = 0; i < FT_ARRAY_LEN(rel); i++) {
		snprintf(probe, sizeof(probe), "%s%s/ftfarm/_slot.py", here,
			 rel[i]);
		if (access(probe, R_OK) == 0) {
			snprintf(dir, n, "%s%s", here, rel[i]);
			return;
		}
	}
}

/* Kill the interpreter's group, reap it, close what we hold of it. */
static void
interp_stop(void)
{
	if (ip.pid > 0) {
		kill(-ip.pid, SIGKILL);
		kill(ip.pid, SIGKILL);
		while (waitpid(ip.pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
	ip.pid = 0;
	task_fd_close(&ip.pidfd);
	task_fd_close(&ip.sock);
	task_fd_close(&ip.out.fd);
	task_fd_close(&ip.err.fd);
	free(ip.python);
	ip.python = NULL;
	ip.serving = 0;
}

/* The signals the interpreter starts with at their defaults: all that
 * may be set (the slot ignores or catches some). */
static void
default_signals(sigset_t *set)
{
	int sig;

	sigemptyset(set);
	for (sig = 1; sig < NSIG; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			sigaddset(set, sig);	/* refuses glibc's own */
}

/* The environment of a new interpreter: the worker's (task_env.h) with
 * TASK's entries, its package first in PYTHONPATH, and the slot's pid
 * (the interpreter leaves if its slot is gone).  *FIRST as there. */
static char **
interp_env(const struct ft_task *task, const char *pkg, size_t *first)
{
	const char *old = getenv("PYTHONPATH");
	char *extra[16], **envp;
	size_t k = 0, i;

	for (i = 0; task->env && task->env[i] && k < 12; i++)
		extra[k++] = (char *)task->env[i];
	extra[k++] = ft_asprintf("PYTHONPATH=%s%s%s", pkg,
				 old && *old ? ":" : "", old ? old : "");
	extra[k++] = ft_asprintf("FTFARM_SLOT_PID=%d", (int)getpid());
	extra[k] = NULL;
	envp = task_env_build(NULL, (const char *const *)extra, first);
	free(extra[k - 1]);
	free(extra[k - 2]);
	return envp;
}

/* Start PYTHON as the slot's interpreter.  0, or -1 with RES failed. */
static int
interp_start(const struct ft_task *task, const char *python,
	     struct ft_result *res)
{
	char *argv[] = { (char *)python, "-m", SLOT_MODULE, NULL };
	int sv[2] = { -1, -1 }, po[2] = { -1, -1 }, pe[2] = { -1, -1 }, rc;
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	char pkg[PATH_MAX], **envp;
	size_t first;
	sigset_t none, dfl;

	package_dir(pkg, sizeof(pkg));
	if (pkg[0] == '\0')
		return fail(res, "the ftfarm Python package is not installed "
			    "beside the python task plugin"), -1;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == -1 ||
	    pipe2(po, O_CLOEXEC) == -1 || pipe2(pe, O_CLOEXEC) == -1) {
		rc = errno;
		goto fds;
	}
	envp = interp_env(task, pkg, &first);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, sv[1], 0);
	posix_spawn_file_actions_adddup2(&fa, po[1], 1);
	posix_spawn_file_actions_adddup2(&fa, pe[1], 2);
	posix_spawn_file_actions_addclosefrom_np(&fa, 3);
	posix_spawnattr_init(&at);
	sigemptyset(&none);
	default_signals(&dfl);
	posix_spawnattr_setsigmask(&at, &none);
	posix_spawnattr_setsigdefault(&at, &dfl);
	posix_spawnattr_setpgroup(&at, 0);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP |
				 POSIX_SPAWN_SETSIGMASK |
				 POSIX_SPAWN_SETSIGDEF);
	rc = posix_spawnp(&ip.pid, python, &fa, &at, argv, envp);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	task_env_free(envp, first);
	if (rc != 0) {
		ip.pid = 0;
		goto fds;
	}
	ip.pidfd = (int)syscall(SYS_pidfd_open, ip.pid, 0);
	task_mem_oom_first_of(ip.pid);		/* before the slot (task_mem.h) */
	ip.sock = sv[0];
	ip.out.fd = po[0];
	ip.err.fd = pe[0];
	fcntl(ip.out.fd, F_SETFL, O_NONBLOCK);
	fcntl(ip.err.fd, F_SETFL, O_NONBLOCK);
	fcntl(ip.sock, F_SETFL, O_NONBLOCK);
	ip.python = ft_strdup(python);
	close(sv[1]);
	close(po[1]);
	close(pe[1]);
	return 0;
fds:
	task_fd_close(&sv[0]);
	task_fd_close(&sv[1]);
	task_fd_close(&po[0]);
	task_fd_close(&po[1]);
	task_fd_close(&pe[0]);
	task_fd_close(&pe[1]);
	fail(res, "cannot start %s: %s", python, strerror(rc));
	res->exit_code = 127;		/* as a shell says it */
	return -1;
}

/* ---- one task ---- */

/* How one request ended. */
enum end { END_REPLY, END_TIMEOUT, END_CANCEL, END_GONE, END_MEMORY };

/* The request frame of TASK in OUT.  0, or -1 (cannot print it). */
static int
request(const struct ft_task *task, struct ft_buf *out)
{
	json_t *env = json_object(), *o;
	char *head, *spec = NULL;
	const char *text = task->spec_text;
	size_t i, len = task->spec_len;
	uint32_t n;

	for (i = 0; task->env && task->env[i]; i++) {
		const char *eq = strchr(task->env[i], '=');

		if (eq)
			json_object_setn_new(env, task->env[i],
					     (size_t)(eq - task->env[i]),
					     json_string(eq + 1));
	}
	o = json_pack("{s:I, s:i, s:i, s:o}", "id", (json_int_t)task->id,
		      "attempt", (int)task->attempt, "value_max", FT_VALUE_MAX,
		      "env", env);
	head = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(o);
	if (text == NULL)
		text = spec = json_dumps(task->spec, JSON_COMPACT);
	if (head == NULL || text == NULL) {
		free(head);
		free(spec);
		return -1;
	}
	if (text == spec)
		len = strlen(spec);
	n = (uint32_t)(strlen(head) - 1 + 8 + len + 1);
	ft_buf_add(out, &n, 4);			/* little-endian hosts */
	ft_buf_add(out, head, strlen(head) - 1);	/* less its "}" */
	ft_buf_add(out, ",\"task\":", 8);
	ft_buf_add(out, text, len);
	ft_buf_add(out, "}", 1);
	free(head);
	free(spec);
	return 0;
}

/* Write all of B to the interpreter's socket (it reads as we write; a
 * full socket waits a moment).  0, or -1 when it is gone. */
static int
send_all(const struct ft_buf *b)
{
	size_t off = 0;

	while (off < b->len) {
		ssize_t n = send(ip.sock, b->data + off, b->len - off,
				 MSG_NOSIGNAL);

		if (n > 0) {
			off += (size_t)n;
		} else if (n < 0 && errno == EAGAIN) {
			struct pollfd p = { .fd = ip.sock, .events = POLLOUT };

			poll(&p, 1, SLICE_MS);
		} else if (n < 0 && errno != EINTR) {
			return -1;
		}
	}
	return 0;
}

/* Read what the socket has into REPLY.  1 once a whole frame is there,
 * 0 for more to come, -1 when the interpreter closed it or the frame is
 * too long. */
static int
read_reply(struct ft_buf *reply)
{
	uint32_t n;
	ssize_t got;

	for (;;) {
		ft_buf_reserve(reply, 65536);
		got = recv(ip.sock, reply->data + reply->len, 65536, 0);
		if (got > 0) {
			reply->len += (size_t)got;
		} else if (got == 0) {
			return -1;
		} else {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN)
				return -1;
			break;
		}
	}
	if (reply->len < 4)
		return 0;
	memcpy(&n, reply->data, 4);
	if (n > REPLY_MAX)
		return -1;
	return reply->len >= 4 + (size_t)n ? 1 : 0;
}

/* The interpreter's memory while TASK runs: when a sample is due (its
 * time in *AT), 1 when it is past the task's limit (*RSS: the most seen,
 * the interpreter then killed). */
static int
over_limit(const struct ft_task *task, double *at, uint64_t *rss)
{
	uint64_t now;

	if (task->mem_limit == 0 || ft_now() < *at)
		return 0;
	*at = ft_now() + TASK_MEM_SAMPLE_S;
	now = task_mem_group_rss(ip.pid);
	if (now > *rss)
		*rss = now;
	if (now <= task->mem_limit)
		return 0;
	kill(-ip.pid, SIGKILL);
	return 1;
}

/* Wait for the reply to the request just sent, reading the outputs
 * meanwhile, until the task's DEADLINE (monotonic), its memory limit
 * (*RSS: the most sampled) or, if STOPPABLE, its cancel. */
static enum end
wait_reply(const struct ft_task *task, double deadline, int stoppable,
	   struct ft_buf *reply, uint64_t *rss)
{
	double sample_at = ft_now() + TASK_MEM_SAMPLE_S;
	int slice = task->mem_limit ? (int)(TASK_MEM_SAMPLE_S * 1000) :
		    SLICE_MS;

	for (;;) {
		struct pollfd p[5] = {
			{ .fd = ip.sock, .events = POLLIN },
			{ .fd = ip.out.fd, .events = POLLIN },
			{ .fd = ip.err.fd, .events = POLLIN },
			{ .fd = task->cancel_fd > 0 ? task->cancel_fd : -1,
			  .events = POLLIN },
			{ .fd = ip.pidfd, .events = POLLIN },
		};
		double left = deadline - ft_now();
		int rc;

		if (stoppable && *task->cancel)
			return END_CANCEL;
		if (!stoppable)
			p[3].fd = -1;
		if (left <= 0)
			return END_TIMEOUT;
		if (stoppable && over_limit(task, &sample_at, rss))
			return END_MEMORY;
		rc = poll(p, 5, (int)fmin(ceil(left * 1000), slice));
		if (rc < 0 && errno != EINTR)
			return END_GONE;
		if (p[1].revents)
			task_sink_read(&ip.out);
		if (p[2].revents)
			task_sink_read(&ip.err);
		if (p[0].revents && (rc = read_reply(reply)) != 0)
			return rc == 1 ? END_REPLY : END_GONE;
		if (p[4].revents)
			return END_GONE;
	}
}

/* Read what the outputs hold now: all that was written before the
 * reply. */
static void
drain_outputs(void)
{
	while (ip.out.fd >= 0 && task_sink_read(&ip.out) > 0)
		;
	while (ip.err.fd >= 0 && task_sink_read(&ip.err) > 0)
		;
}

/* The interpreter is gone under the task: reap it and say how in RES (a
 * death by a signal takes the slot along: lost). */
static void
interp_gone(struct ft_result *res)
{
	int status = 0;
	char last[96] = "";
	const char *p;

	drain_outputs();
	if (ip.err.len) {
		p = ip.err.data + ip.err.len;
		while (p > ip.err.data && (p[-1] == '\n' || p[-1] == ' '))
			p--;
		while (p > ip.err.data && p[-1] != '\n')
			p--;
		snprintf(last, sizeof(last), ": %.*s", (int)strcspn(p, "\n"),
			 p);
	}
	kill(-ip.pid, SIGKILL);
	while (waitpid(ip.pid, &status, 0) < 0 && errno == EINTR)
		;
	ip.pid = 0;
	if (WIFSIGNALED(status)) {
		res->lost = 1;
		res->signal = WTERMSIG(status);
		fail(res, "its Python interpreter died of signal %d",
		     WTERMSIG(status));
		res->exit_code = 128 + WTERMSIG(status);
	} else {
		fail(res, "the Python interpreter exited with status %d%s",
		     WEXITSTATUS(status), last);
	}
	interp_stop();
}

/* The interpreter's REPLY (a whole frame) into RES.  0, or -1 when it is
 * not one (the interpreter is then not trusted: stopped). */
static int
take_reply(const struct ft_buf *reply, struct ft_result *res)
{
	uint32_t n;
	json_t *o, *v;

	memcpy(&n, reply->data, 4);
	o = json_loadb(reply->data + 4, n, 0, NULL);
	v = json_object_get(o, "value");
	if (!json_is_object(o) || !json_is_boolean(json_object_get(o, "ok")) ||
	    (v && !json_is_string(v))) {
		json_decref(o);
		interp_stop();
		return fail(res, "the Python interpreter answered something "
			    "else than a reply"), -1;
	}
	res->ok = json_is_true(json_object_get(o, "ok"));
	res->exit_code = res->ok ? 0 : -1;
	res->cpu_s = jget_num(o, "cpu_s", 0);
	res->max_rss = (uint64_t)jget_num(o, "max_rss", 0);
	if (v && json_string_length(v)) {
		res->value_len = json_string_length(v);
		res->value = ft_malloc(res->value_len + 1);
		memcpy(res->value, json_string_value(v), res->value_len + 1);
	}
	snprintf(res->reason, sizeof(res->reason), "%s",
		 jget_str(o, "reason", res->ok ? "" : "a call raised"));
	json_decref(o);
	return 0;
}

/* The task was cancelled (another worker ran it first, or its batch was
 * cancelled): interrupt the call (SIGINT raises KeyboardInterrupt in it:
 * _slot.py) and let the interpreter answer within CANCEL_GRACE; kill it
 * only if it does not.  A new interpreter costs a hundred times a short
 * call.  One that has not answered yet may still be starting, before its
 * handler is in place, where SIGINT would end it: it is left to answer
 * (a slot respawned after a death started an interpreter for its first
 * call, slower than the straggler rule's 50 ms; its copy on another slot
 * won, the SIGINT killed the starting interpreter, and every call of a
 * chain went the same way, a new interpreter each, 60 ms a link). */
static void
interrupt(const struct ft_task *task, struct ft_buf *reply)
{
	uint64_t rss = 0;

	if ((!ip.serving || kill(ip.pid, SIGINT) == 0) &&
	    wait_reply(task, ft_now() + CANCEL_GRACE, 0, reply, &rss) ==
	    END_REPLY) {
		drain_outputs();
		ip.serving = 1;
	} else {
		interp_stop();
	}
}

/* Hand the outputs kept to RES, and start the next task's afresh. */
static void
give_outputs(struct ft_result *res)
{
	res->out = ip.out.data;
	res->out_len = ip.out.len;
	res->err = ip.err.data;
	res->err_len = ip.err.len;
	ip.out.data = ip.err.data = NULL;
	ip.out.len = ip.err.len = ip.out.alloc = ip.err.alloc = 0;
}

static int
python_run(const struct ft_task *task, struct ft_result *res)
{
	const char *python = jget_str(task->spec, "python", "python3");
	double timeout = ft_task_timeout(task->spec, FT_TASK_TIMEOUT_MAX);
	double deadline = ft_now() + timeout;
	struct ft_buf req = { 0 }, reply = { 0 };
	uint64_t rss = 0;
	enum end end;

	if (ip.pid > 0 && strcmp(ip.python, python) != 0)
		interp_stop();
	if (ip.pid == 0 && interp_start(task, python, res) == -1)
		return 0;
	ip.out.cap = ip.err.cap = task->output_cap;
	ip.out.len = ip.err.len = 0;
	ip.out.file = task->out_fd;
	ip.err.file = task->err_fd;
	if (request(task, &req) == -1) {
		ft_buf_free(&req);
		return fail(res, "cannot print the request");
	}
	if (task->group)
		task->group(task, ip.pid);
	end = send_all(&req) == 0 ?
	      wait_reply(task, deadline, 1, &reply, &rss) : END_GONE;
	if (task->group)
		task->group(task, 0);
	ft_buf_free(&req);
	if (end == END_REPLY) {
		drain_outputs();
		ip.serving = 1;
		take_reply(&reply, res);
	} else if (end == END_GONE) {
		interp_gone(res);
	} else if (end == END_CANCEL) {
		interrupt(task, &reply);
		fail(res, "cancelled");
	} else if (end == END_MEMORY) {
		interp_stop();
		task_mem_reason(res->reason, sizeof(res->reason), rss,
				task->mem_limit);
		res->exit_code = 128 + SIGKILL;
		res->signal = SIGKILL;
		res->max_rss = rss;
	} else {
		interp_stop();
		fail(res, "timeout after %g s", timeout);
	}
	ft_buf_free(&reply);
	ip.out.file = ip.err.file = 0;
	give_outputs(res);
	return 0;
}

FT_PLUGIN_DEFINE_FLAGS("python", python_validate, python_run, NULL,
		       FT_PLUGIN_RISKY | FT_PLUGIN_OUTPUT_FILES | FT_PLUGIN_USAGE)

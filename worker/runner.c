/* runner: the thread that runs a worker's tasks. */
#include "runner.h"

#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "jparse.h"
#include "memcg.h"
#include "memsize.h"
#include "outfiles.h"
#include "proto.h"
#include "util.h"

struct runner {
	const struct ft_plugins *pl;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t work;		/* tasks arrived, or stop */
	pthread_cond_t sent;		/* the results taken went out */
	pthread_cond_t ended;		/* runner_end was called */
	int taking;			/* results taken, not yet sent */
	int efd;			/* eventfd: readable once results are
					 * due (see ring_due) */
	int rung;			/* efd is readable */
	double held_since;		/* when the oldest result not yet rung
					 * for was added */
	uint32_t nheld;			/* results waiting to be taken */
	int cfd;			/* eventfd: readable once the running
					 * task is cancelled */
	runner_deliver_fn deliver;	/* see runner_set_deliver */
	void *deliver_arg;
	struct runner_task *head, *tail;
	uint32_t queued;
	struct runner_task *running;
	struct runner_result *rhead, *rtail;
	size_t output_cap;
	char node_env[280];		/* "FTFARM_NODE=<its node>" */
	int slot;			/* its slot's id */
	int mem_enforce;		/* enum ft_mem_enforce */
	struct memcg *memcg;		/* the slot's cgroup, once made */
	int memcg_tried;		/* made or found impossible */
	char *out_default;		/* task_stdout, or NULL */
	char *err_default;		/* task_stderr, or NULL */
	int stop;
	int ending;			/* runner_end: the job ends */
	int ran;			/* a task ran since the last trim */
	atomic_int group;		/* the running task's process group, 0 */
};

#define TRIM_IDLE 1.0		/* seconds without a task before the
				 * memory tasks freed goes back */
/* Results of tasks shorter than SHORT_TASK are held while more tasks
 * wait, until they are as many as the tasks left or for HOLD_MAX seconds
 * at most, so that the slot wakes once or twice for many of them rather
 * than once or more per result: a wake-up across CPUs costs some 10 us on
 * a paravirtualized VM, ten times a no-op task.  Half of a window done is
 * when the master tops it up; later and the worker would run dry.  A
 * longer task's result, or the last of the queue, rings at once. */
#define SHORT_TASK 0.0001
#define HOLD_MAX 0.001
/* How long a task killed by SIGTERM waits for the slot's own SIGTERM
 * before it counts as failed: the job's end signals every process of it
 * one after the other, children before their parents under Slurm's
 * linuxproc tracking (a fraction of a millisecond apart here). */
#define TERM_GRACE 0.5

struct runner_task *
runner_task_new(const struct proto_task *pt)
{
	size_t len = pt->spec_len, glen = pt->gpus_len, clen = pt->cpuset_len;
	const char *spec = pt->spec, *gpus = pt->gpus, *cpuset = pt->cpuset;
	struct runner_task *t = ft_malloc(sizeof(*t) + len + glen + clen + 3);

	t->tid = pt->tid;
	t->attempt = pt->attempt;
	t->batch = pt->batch;
	t->index = pt->index;
	t->cancel = 0;
	t->next = NULL;
	t->cpus = pt->cpus ? pt->cpus : 1;
	t->spec_len = len;
	memcpy(t->spec, spec, len);
	t->spec[len] = '\0';
	if (glen)
		memcpy(t->spec + len + 1, gpus, glen);
	t->spec[len + 1 + glen] = '\0';
	t->gpus = t->spec + len + 1;
	if (clen)
		memcpy(t->spec + len + glen + 2, cpuset, clen);
	t->spec[len + glen + 2 + clen] = '\0';
	t->cpuset = t->spec + len + glen + 2;
	return t;
}

/* T's environment beside the worker's (struct ft_task's env): ENV (4
 * entries), in BUF (NBUF bytes) when T holds more than one slot or GPUs;
 * a one-slot task's is ready made. */
static void
task_env(const struct runner *r, const struct runner_task *t, char *buf,
	 size_t nbuf, const char *env[4])
{
	int k = 0, n;

	env[k++] = r->node_env;
	if (t->cpus == 1) {
		env[k++] = "FTFARM_CPUS=1";
	} else {
		n = snprintf(buf, nbuf, "FTFARM_CPUS=%u", t->cpus);
		env[k++] = buf;
		buf += n + 1;
		nbuf -= (size_t)n + 1;
	}
	if (*t->gpus) {
		snprintf(buf, nbuf, "CUDA_VISIBLE_DEVICES=%s", t->gpus);
		env[k++] = buf;
	}
	env[k] = NULL;
}

void
runner_task_free(struct runner_task *t)
{
	free(t);
}

void
runner_result_free(struct runner_result *res)
{
	while (res) {
		struct runner_result *next = res->next;

		free(res->res.out);
		free(res->res.err);
		free(res->res.value);
		free(res->out_path);
		free(res->err_path);
		free(res);
		res = next;
	}
}

/* The plugin's news of the running task's process group. */
static void
on_group(const struct ft_task *task, pid_t pgid)
{
	struct runner *r = task->caller;

	atomic_store(&r->group, (int)pgid);
}

/* Wait until every result of the tasks before is written to the agent.
 * A task that starts processes may kill its slot (`kill -9 $PPID`); the
 * master must have heard of the task before it, or it blames that one,
 * finished but unreported.  A moment next to a fork and an exec. */
static void hand_over(struct runner *r);

static void
wait_sent(struct runner *r)
{
	pthread_mutex_lock(&r->mu);
	if (r->rhead != NULL)
		hand_over(r);
	while (!r->stop && (r->rhead != NULL || r->taking))
		pthread_cond_wait(&r->sent, &r->mu);
	pthread_mutex_unlock(&r->mu);
}

/* Make the eventfd FD readable. */
static void
signal_fd(int fd)
{
	uint64_t one = 1;

	while (write(fd, &one, sizeof(one)) < 0 && errno == EINTR)
		;
}

/* Cancel the running task (R's lock held): its flag, and the descriptor
 * a plugin may sleep on. */
static void
cancel_running(struct runner *r)
{
	r->running->cancel = 1;
	signal_fd(r->cfd);
}

/* Take back the cancel of the task that just ended (R's lock held): the
 * descriptor is readable for that task only.  Read only then: a read per
 * task was a fifth of the time of 200,000 no-op tasks. */
static void
clear_cancel_fd(struct runner *r)
{
	uint64_t n;

	while (read(r->cfd, &n, sizeof(n)) < 0 && errno == EINTR)
		;
}

/* Task T took the worker down with it (RES.lost): leave now, as if it
 * had killed the worker, without a word of it to the master, which runs
 * it again or blames it.  What the tasks before it reported is written
 * already (its plugin is FT_PLUGIN_RISKY, or it would not be lost). */
static void __attribute__((noreturn))
leave_with(const struct runner_task *t, const struct ft_result *res)
{
	fprintf(stderr, "ftfarm-slot (pid %d): task id %llu attempt %u took "
		"the slot down: %s; exiting\n", (int)getpid(),
		(unsigned long long)t->tid, t->attempt, res->reason);
	_exit(1);
}

/* The slot's memory cgroup, made at the first task that needs it; NULL
 * when the node has none or it cannot be made (said once: its tasks'
 * memory is sampled instead). */
static struct memcg *
slot_memcg(struct runner *r)
{
	char why[300];

	if (!r->memcg_tried) {
		r->memcg_tried = 1;
		r->memcg = memcg_slot_open(r->slot, why, sizeof(why));
		if (r->memcg == NULL && getenv(MEMCG_ENV))
			fprintf(stderr, "ftfarm-slot %d (pid %d): %s; memory "
				"limits are kept by sampling\n", r->slot,
				(int)getpid(), why);
	}
	return r->memcg;
}

/* TASK's memory limit, its "mem" in SPEC, as the node keeps limits:
 * in the slot's cgroup when it has one and the plugin's processes may
 * enter it, else by the plugin's sampling; none for plugins that start
 * no process. */
static void
mem_setup(struct runner *r, const json_t *spec, const struct ft_plugin *p,
	  struct ft_task *task)
{
	struct memcg *c;
	uint64_t mem;

	task->mem_limit = 0;
	task->cgroup_fd = 0;
	if (r->mem_enforce == FT_MEM_NONE || !(p->flags & FT_PLUGIN_RISKY) ||
	    memsize_json(json_object_get(spec, "mem"), &mem) == -1)
		return;
	task->mem_limit = mem;
	if (r->mem_enforce == FT_MEM_AUTO && (p->flags & FT_PLUGIN_MEMCG) &&
	    (c = slot_memcg(r)) != NULL && memcg_limit(c, mem) == 0)
		task->cgroup_fd = memcg_procs_fd(c);
}

/* TASK, which ran in the slot's cgroup, ended as RES says: one that
 * failed while the kernel's OOM killer killed in the cgroup failed for
 * its memory.  What it left in the cgroup goes. */
static void
mem_judge(struct runner *r, const struct ft_task *task, struct ft_result *res)
{
	char u[32], l[32];

	if (task->cgroup_fd <= 2)
		return;
	if (memcg_oom_killed(r->memcg) && !res->ok && res->exit_code > 0)
		snprintf(res->reason, sizeof(res->reason), "memory: used %s, "
			 "at its limit of %s (the kernel's OOM killer ended it "
			 "in its cgroup)",
			 memsize_format(res->max_rss, u, sizeof(u)),
			 memsize_format(task->mem_limit, l, sizeof(l)));
	memcg_kill_all(r->memcg);
}

/* Open T's output files (SPEC's patterns, or the node's) for plugin P
 * into OF.  0, or -1 with RES failed (the task does not start). */
static int
files_open(struct runner *r, const struct runner_task *t,
	   const json_t *spec, const struct ft_plugin *p, struct outfiles *of,
	   struct runner_result *res)
{
	struct outfiles_who who = {
		.batch = t->batch, .index = t->index, .attempt = t->attempt,
		.node = r->node_env + strlen("FTFARM_NODE="),
		.out_default = r->out_default, .err_default = r->err_default,
	};

	memset(of, 0, sizeof(*of));
	if (!(p->flags & FT_PLUGIN_OUTPUT_FILES))
		return 0;
	who.node_len = strlen(who.node);
	if (outfiles_open(of, spec, &who, res->res.reason,
			  sizeof(res->res.reason)) == 0)
		return 0;
	res->res.ok = 0;
	res->res.exit_code = 127;	/* as a command that cannot start */
	return -1;
}

/* T's output files are written: RES keeps their tails and paths. */
static void
files_done(struct runner *r, struct outfiles *of, struct runner_result *res)
{
	outfiles_tails(of, r->output_cap, &res->res);
	outfiles_keep(of);
	outfiles_close(of);
	res->out_path = of->out_path;
	res->err_path = of->err_path;
}

/* CPU seconds of RU. */
static double
ru_cpu(const struct rusage *ru)
{
	return (double)ru->ru_utime.tv_sec + ru->ru_utime.tv_usec * 1e-6 +
	       (double)ru->ru_stime.tv_sec + ru->ru_stime.tv_usec * 1e-6;
}

/* Run TASK through plugin P into RES: what it used measured on this
 * thread when P does not say itself (it runs here). */
static void
run_measured(const struct ft_plugin *p, const struct ft_task *task,
	     struct ft_result *res)
{
	struct rusage before, after;
	int own = !(p->flags & FT_PLUGIN_USAGE);

	if (own)
		getrusage(RUSAGE_THREAD, &before);
	if (p->run(task, res) == -1)
		res->ok = 0;
	if (own && getrusage(RUSAGE_THREAD, &after) == 0) {
		res->cpu_s = ru_cpu(&after) - ru_cpu(&before);
		res->max_rss = (uint64_t)after.ru_maxrss * 1024;
	}
}

/* Run T through its plugin and describe the outcome in RES. */
static void
run_one(struct runner *r, struct runner_task *t, struct runner_result *res)
{
	json_error_t jerr;
	json_t *spec = jparse(t->spec, t->spec_len, 0, &jerr);
	const struct ft_plugin *p = NULL;
	struct outfiles of;
	struct ft_task task;
	double t0 = ft_now();
	char envbuf[2048];
	const char *env[4];

	if (spec)
		p = ft_plugins_find(r->pl, jget_str(spec, "type", ""));
	if (p == NULL) {
		snprintf(res->res.reason, sizeof(res->res.reason),
			 spec ? "no plugin for this task type on the worker"
			      : "malformed task");
		res->res.exit_code = -1;
		goto out;
	}
	if (p->flags & FT_PLUGIN_RISKY)
		wait_sent(r);
	if (files_open(r, t, spec, p, &of, res) == -1)
		goto out;
	memset(&task, 0, sizeof(task));
	task.id = t->tid;
	task.attempt = t->attempt;
	task.spec = spec;
	task.spec_text = t->spec;
	task.spec_len = t->spec_len;
	task.cancel = &t->cancel;
	task.output_cap = r->output_cap;
	task.group = on_group;
	task.caller = r;
	task_env(r, t, envbuf, sizeof(envbuf), env);
	task.env = env;
	task.cpuset = *t->cpuset ? t->cpuset : NULL;
	task.cancel_fd = r->cfd;
	task.out_fd = of.out_fd;
	task.err_fd = of.err_fd;
	mem_setup(r, spec, p, &task);
	run_measured(p, &task, &res->res);
	atomic_store(&r->group, 0);
	mem_judge(r, &task, &res->res);
	files_done(r, &of, res);
	if (res->res.value_len > FT_VALUE_MAX) {
		free(res->res.value);
		res->res.value = NULL;
		res->res.value_len = 0;
		res->res.ok = 0;
		res->res.exit_code = -1;
		snprintf(res->res.reason, sizeof(res->res.reason),
			 "the task's value is longer than %d bytes",
			 FT_VALUE_MAX);
	}
out:
	res->seconds = ft_now() - t0;
	json_decref(spec);
}

/* Has the slot a SIGTERM it has not read yet (blocked on every thread,
 * it is pending for the process)? */
static int
term_pending(void)
{
	sigset_t set;

	return sigpending(&set) == 0 && sigismember(&set, SIGTERM) == 1;
}

/* Did the task of RES die of SIGTERM (itself, or the shell that ran it
 * reporting its child's death the shell's way)? */
static int
died_of_term(const struct ft_result *res)
{
	return res->signal == SIGTERM || res->exit_code == 128 + SIGTERM;
}

/* Wait (R's lock held) up to TERM_GRACE for runner_end.  1 if it came. */
static int
wait_end(struct runner *r)
{
	struct timespec until;

	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_nsec += (long)(TERM_GRACE * 1e9);
	until.tv_sec += until.tv_nsec / 1000000000L;
	until.tv_nsec %= 1000000000L;
	while (!r->ending && !r->stop)
		if (pthread_cond_timedwait(&r->ended, &r->mu, &until) ==
		    ETIMEDOUT)
			break;
	return r->ending;
}

/* Did task T, which ended as RES says, fail only because the job ends
 * (R's lock held)?  A cancelled or successful one did not. */
static int
cut_short(struct runner *r, const struct runner_task *t,
	  const struct ft_result *res)
{
	if (t->cancel || res->ok)
		return 0;
	return r->ending || term_pending() || (died_of_term(res) &&
					       wait_end(r));
}

/* Task T ended as RES says (R's lock held).  One cut short by the job's
 * end is interrupted, not failed (runner_end); one whose plugin lost the
 * slot with it takes the slot down otherwise. */
static void
judge(struct runner *r, const struct runner_task *t,
      struct runner_result *res)
{
	if (cut_short(r, t, &res->res)) {
		res->interrupted = PROTO_INTERRUPTED;
		snprintf(res->res.reason, sizeof(res->res.reason),
			 "interrupted: SIGTERM (the job ends)");
		return;
	}
	if (res->res.lost)
		leave_with(t, &res->res);
}

/* Task T, taken from the queue after runner_end: reported unstarted. */
static struct runner_result *
unstarted(const struct runner_task *t)
{
	struct runner_result *res = ft_calloc(1, sizeof(*res));

	res->tid = t->tid;
	res->attempt = t->attempt;
	res->res.exit_code = -1;
	res->interrupted = PROTO_UNSTARTED;
	snprintf(res->res.reason, sizeof(res->res.reason),
		 "not started: SIGTERM (the job ends)");
	return res;
}

/* Make the results descriptor readable (R's lock held). */
static void
ring(struct runner *r)
{
	if (!r->rung) {
		r->rung = 1;
		signal_fd(r->efd);
	}
}

/* Whether the results waiting should wake the slot now that RES was
 * added (R's lock held): see SHORT_TASK. */
static int
ring_due(const struct runner *r, const struct runner_result *res,
	 double now)
{
	return r->head == NULL || res->seconds >= SHORT_TASK ||
	       r->nheld >= r->queued || now - r->held_since >= HOLD_MAX;
}

/* Wait for a task (R's lock held).  The memory a task freed stays for
 * the next one, which would otherwise fault its pages in again (about
 * 10 us a page on a paravirtualized VM); once no task has come for
 * TRIM_IDLE seconds it goes back to the system (main.c keeps glibc from
 * trimming on its own). */
static void
wait_work(struct runner *r)
{
	struct timespec until;

	if (!r->ran) {
		pthread_cond_wait(&r->work, &r->mu);
		return;
	}
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += (time_t)TRIM_IDLE;
	if (pthread_cond_timedwait(&r->work, &r->mu, &until) == ETIMEDOUT &&
	    !r->stop && r->head == NULL) {
		r->ran = 0;
		pthread_mutex_unlock(&r->mu);	/* the slot may push meanwhile */
		malloc_trim(0);
		pthread_mutex_lock(&r->mu);
	}
}

/* Results are due (R's lock held): the runner delivers them itself if
 * it may, else rings for them.  Delivering saves the slot's main thread a
 * wake-up per batch of results, which is most of what a slot spends on a
 * batch of short tasks when hundreds of slots share a few CPUs. */
static void
hand_over(struct runner *r)
{
	int taken;

	if (r->deliver == NULL || r->rung) {
		ring(r);
		return;
	}
	pthread_mutex_unlock(&r->mu);
	taken = r->deliver(r->deliver_arg);
	pthread_mutex_lock(&r->mu);
	if (!taken)
		ring(r);	/* for them, or for the rest of their bytes */
}

static void *
runner_main(void *arg)
{
	struct runner *r = arg;

	pthread_mutex_lock(&r->mu);
	for (;;) {
		struct runner_task *t;
		struct runner_result *res;

		while (!r->stop && r->head == NULL)
			wait_work(r);
		if (r->stop)
			break;
		r->ran = 1;
		t = r->head;
		r->head = t->next;
		if (r->head == NULL)
			r->tail = NULL;
		r->queued--;
		r->running = t;
		if (r->ending) {
			res = unstarted(t);
		} else {
			pthread_mutex_unlock(&r->mu);
			res = ft_calloc(1, sizeof(*res));
			res->tid = t->tid;
			res->attempt = t->attempt;
			run_one(r, t, res);
			pthread_mutex_lock(&r->mu);
			judge(r, t, res);
		}
		r->running = NULL;
		if (t->cancel) {
			clear_cancel_fd(r);
			runner_result_free(res);	/* the master moved on */
		} else {
			double now = ft_now();

			if (r->rtail) {
				r->rtail->next = res;
			} else {
				r->rhead = res;
				r->held_since = now;
			}
			r->rtail = res;
			r->nheld++;
			if (ring_due(r, res, now))
				hand_over(r);
		}
		runner_task_free(t);
	}
	pthread_mutex_unlock(&r->mu);
	return NULL;
}

struct runner *
runner_start(const struct ft_plugins *pl, int slot)
{
	struct runner *r = ft_calloc(1, sizeof(*r));
	pthread_condattr_t ca;

	strcpy(r->node_env, "FTFARM_NODE=");
	r->pl = pl;
	r->slot = slot;
	r->output_cap = 65536;
	r->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	r->cfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (r->efd < 0 || r->cfd < 0) {
		if (r->efd >= 0)
			close(r->efd);
		if (r->cfd >= 0)
			close(r->cfd);
		free(r);
		return NULL;
	}
	pthread_mutex_init(&r->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&r->work, &ca);
	pthread_cond_init(&r->ended, &ca);
	pthread_cond_init(&r->sent, NULL);
	pthread_condattr_destroy(&ca);
	if (pthread_create(&r->thread, NULL, runner_main, r) != 0) {
		close(r->efd);
		close(r->cfd);
		free(r);
		return NULL;
	}
	return r;
}

void
runner_set_node(struct runner *r, const char *node, size_t len)
{
	pthread_mutex_lock(&r->mu);
	snprintf(r->node_env, sizeof(r->node_env), "FTFARM_NODE=%.*s",
		 (int)(len < 256 ? len : 256), node ? node : "");
	pthread_mutex_unlock(&r->mu);
}

void
runner_set_deliver(struct runner *r, runner_deliver_fn deliver, void *arg)
{
	pthread_mutex_lock(&r->mu);
	r->deliver = deliver;
	r->deliver_arg = arg;
	pthread_mutex_unlock(&r->mu);
}

/* A new string of the LEN bytes at S, or NULL when there are none. */
static char *
text_or_null(const char *s, size_t len)
{
	return len ? ft_asprintf("%.*s", (int)len, s) : NULL;
}

void
runner_set_task_rules(struct runner *r, int mem_enforce, const char *out,
		      size_t olen, const char *err, size_t elen)
{
	pthread_mutex_lock(&r->mu);
	r->mem_enforce = mem_enforce;
	free(r->out_default);
	free(r->err_default);
	r->out_default = text_or_null(out, olen);
	r->err_default = text_or_null(err, elen);
	pthread_mutex_unlock(&r->mu);
}

void
runner_set_output_cap(struct runner *r, size_t cap)
{
	pthread_mutex_lock(&r->mu);
	r->output_cap = cap;
	pthread_mutex_unlock(&r->mu);
}

void
runner_push(struct runner *r, struct runner_task *list)
{
	struct runner_task *last = list;
	uint32_t n = 1;

	if (list == NULL)
		return;
	while (last->next) {
		last = last->next;
		n++;
	}
	pthread_mutex_lock(&r->mu);
	if (r->tail)
		r->tail->next = list;
	else
		r->head = list;
	r->tail = last;
	r->queued += n;
	pthread_cond_signal(&r->work);
	pthread_mutex_unlock(&r->mu);
}

struct runner_result *
runner_take(struct runner *r)
{
	struct runner_result *res;

	uint64_t n;

	pthread_mutex_lock(&r->mu);
	res = r->rhead;
	r->rhead = r->rtail = NULL;
	r->nheld = 0;
	r->taking = res != NULL;
	/* Drained under the lock: a result added later rings again. */
	if (r->rung) {
		while (read(r->efd, &n, sizeof(n)) < 0 && errno == EINTR)
			;
		r->rung = 0;
	}
	pthread_mutex_unlock(&r->mu);
	return res;
}

double
runner_held_until(struct runner *r)
{
	double until = 0;

	pthread_mutex_lock(&r->mu);
	if (r->rhead != NULL && !r->rung)
		until = r->held_since + HOLD_MAX;
	pthread_mutex_unlock(&r->mu);
	return until;
}

void
runner_sent(struct runner *r)
{
	pthread_mutex_lock(&r->mu);
	r->taking = 0;
	pthread_cond_broadcast(&r->sent);
	pthread_mutex_unlock(&r->mu);
}

int
runner_fd(const struct runner *r)
{
	return r->efd;
}

void
runner_cancel(struct runner *r, uint64_t tid, uint32_t attempt)
{
	struct runner_task **p, *drop = NULL;

	pthread_mutex_lock(&r->mu);
	if (r->running && r->running->tid == tid &&
	    r->running->attempt == attempt)
		cancel_running(r);
	for (p = &r->head; *p; p = &(*p)->next) {
		if ((*p)->tid != tid || (*p)->attempt != attempt)
			continue;
		drop = *p;
		*p = drop->next;
		if (r->tail == drop) {
			struct runner_task *t = r->head;

			while (t && t->next)
				t = t->next;
			r->tail = t;
		}
		r->queued--;
		break;
	}
	pthread_mutex_unlock(&r->mu);
	runner_task_free(drop);
}

void
runner_stop(struct runner *r)
{
	struct runner_task *t;

	pthread_mutex_lock(&r->mu);
	r->stop = 1;
	if (r->running)
		cancel_running(r);
	pthread_cond_signal(&r->work);
	pthread_cond_broadcast(&r->sent);
	pthread_cond_broadcast(&r->ended);
	pthread_mutex_unlock(&r->mu);
	pthread_join(r->thread, NULL);
	while ((t = r->head) != NULL) {
		r->head = t->next;
		runner_task_free(t);
	}
	runner_result_free(r->rhead);
	pthread_mutex_destroy(&r->mu);
	pthread_cond_destroy(&r->work);
	pthread_cond_destroy(&r->ended);
	pthread_cond_destroy(&r->sent);
	close(r->efd);
	close(r->cfd);
	memcg_slot_close(r->memcg);
	free(r->out_default);
	free(r->err_default);
	free(r);
}

void
runner_end(struct runner *r)
{
	pthread_mutex_lock(&r->mu);
	r->ending = 1;
	pthread_cond_broadcast(&r->ended);
	pthread_mutex_unlock(&r->mu);
}

uint64_t
runner_running(struct runner *r, uint32_t *queued)
{
	uint64_t tid;

	pthread_mutex_lock(&r->mu);
	tid = r->running ? r->running->tid : 0;
	*queued = r->queued;
	pthread_mutex_unlock(&r->mu);
	return tid;
}

void
runner_kill_group(struct runner *r)
{
	int pgid = atomic_load(&r->group);

	if (pgid > 1)
		kill(-(pid_t)pgid, SIGKILL);
}

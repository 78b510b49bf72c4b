/* store: the master's writes into its state dir (see store.h). */
#include "store.h"

#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "util.h"

/* A file in a sync round: a duplicate of its descriptor (the loop may
 * close its own meanwhile), and how far it had been written. */
struct sync_item {
	struct jsonl *j;
	unsigned gen;
	int fd;
	uint64_t bytes, lines;
	int err;
	char *path;
};

struct store_sync {
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int stop;
	int busy;			/* a round is on the thread */
	struct sync_item *round;	/* the round (the thread's while busy) */
	int nround;
	int done;			/* the thread finished the round */
	ev_async wake;
	struct store *s;
	/* The loop's: files written since they were last handed over. */
	struct sync_item *wait;
	int nwait, capwait;
};

/* ---- the sync thread ---- */

static void *
sync_main(void *arg)
{
	struct store_sync *y = arg;
	int i;

	pthread_mutex_lock(&y->mu);
	for (;;) {
		while (!y->stop && !(y->busy && !y->done))
			pthread_cond_wait(&y->cv, &y->mu);
		if (y->stop)
			break;
		pthread_mutex_unlock(&y->mu);
		for (i = 0; i < y->nround; i++) {
			struct sync_item *it = &y->round[i];

			it->err = fdatasync(it->fd) == -1 ? errno : 0;
		}
		pthread_mutex_lock(&y->mu);
		y->done = 1;
		ev_async_send(y->s->loop, &y->wake);
	}
	pthread_mutex_unlock(&y->mu);
	return NULL;
}

static void start_round(struct store *s);
static void schedule(struct store *s);
static void want(struct store *s, struct jsonl *j, const char *path);

/* The thread's round is over: record what is now on disk. */
static void
on_synced(struct ev_loop *loop, ev_async *w, int revents)
{
	struct store *s = w->data;
	struct store_sync *y = s->sync;
	int i, failed = 0;

	(void)loop, (void)revents;
	pthread_mutex_lock(&y->mu);
	if (!y->busy || !y->done) {
		pthread_mutex_unlock(&y->mu);
		return;
	}
	pthread_mutex_unlock(&y->mu);
	for (i = 0; i < y->nround; i++) {
		struct sync_item *it = &y->round[i];

		if (it->err) {
			store_fail(s, "fsync", it->path, it->err);
			failed = 1;
			if (it->j && it->j->gen == it->gen)
				want(s, it->j, it->path);	/* again */
		} else if (it->j && it->j->gen == it->gen &&
			 it->bytes > it->j->synced) {
			it->j->synced = it->bytes;
			it->j->synced_lines = it->lines;
		}
		close(it->fd);
		free(it->path);
	}
	y->nround = 0;
	y->busy = y->done = 0;
	if (!failed && s->ops.synced)
		s->ops.synced(s->ops.ctx);
	schedule(s);
}

/* ---- rounds ---- */

static int
find_wait(struct store_sync *y, const struct jsonl *j)
{
	int i;

	for (i = 0; i < y->nwait; i++)
		if (y->wait[i].j == j)
			return i;
	return -1;
}

/* Queue J (written up to now) for the next round. */
static void
want(struct store *s, struct jsonl *j, const char *path)
{
	struct store_sync *y = s->sync;
	int i = find_wait(y, j);

	if (i < 0) {
		if (y->nwait == y->capwait) {
			y->capwait = y->capwait ? y->capwait * 2 : 16;
			y->wait = ft_realloc(y->wait, (size_t)y->capwait *
					     sizeof(*y->wait));
		}
		i = y->nwait++;
		memset(&y->wait[i], 0, sizeof(y->wait[i]));
		y->wait[i].j = j;
		y->wait[i].path = ft_strdup(path);
	}
	y->wait[i].gen = j->gen;
	y->wait[i].bytes = j->written;
	y->wait[i].lines = j->lines;
	s->want_sync = 1;
}

/* Hand the waiting files to the thread, if it is free. */
static void
start_round(struct store *s)
{
	struct store_sync *y = s->sync;
	int i, n = 0;

	if (y->busy || y->nwait == 0)
		return;
	y->round = ft_realloc(y->round, (size_t)y->nwait * sizeof(*y->round));
	for (i = 0; i < y->nwait; i++) {
		struct sync_item *it = &y->wait[i];

		it->fd = it->j && it->j->fd >= 0 ? dup(it->j->fd) : -1;
		if (it->fd < 0) {
			free(it->path);
			continue;
		}
		y->round[n++] = *it;
	}
	y->nwait = 0;
	s->want_sync = 0;
	s->last_sync = ft_now();
	if (n == 0)
		return;
	pthread_mutex_lock(&y->mu);
	y->nround = n;
	y->busy = 1;
	y->done = 0;
	pthread_cond_signal(&y->cv);
	pthread_mutex_unlock(&y->mu);
}

static void
on_sync_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct store *s = w->data;

	(void)loop, (void)revents;
	start_round(s);
}

/* Start a round when the policy allows: at once for "always", else no
 * sooner than fsync_interval after the last one. */
static void
schedule(struct store *s)
{
	double wait;

	if (!s->want_sync || s->sync->busy || ev_is_active(&s->sync_timer))
		return;
	wait = s->cfg->fsync == FT_FSYNC_ALWAYS ? 0 :
	       s->last_sync + s->cfg->fsync_interval - ft_now();
	if (s->failed)		/* retries once a second, not in a spin */
		wait = fmax(wait, s->last_sync + 1.0 - ft_now());
	if (wait <= 0) {
		start_round(s);
		return;
	}
	ev_timer_set(&s->sync_timer, wait, 0);
	ev_timer_start(s->loop, &s->sync_timer);
}

void
store_sync_soon(struct store *s)
{
	if (s->sync == NULL || !s->want_sync || s->sync->busy || s->failed)
		return;
	ev_timer_stop(s->loop, &s->sync_timer);
	start_round(s);
}

/* ---- set-up ---- */

int
store_init(struct store *s, const struct ft_config *cfg,
	   struct ev_loop *loop, const struct store_ops *ops, char *err,
	   size_t n)
{
	struct store_sync *y;

	memset(s, 0, sizeof(*s));
	s->cfg = cfg;
	s->loop = loop;
	if (ops)
		s->ops = *ops;
	if (cfg->fsync == FT_FSYNC_NONE)
		return 0;
	y = ft_calloc(1, sizeof(*y));
	y->s = s;
	pthread_mutex_init(&y->mu, NULL);
	pthread_cond_init(&y->cv, NULL);
	ev_async_init(&y->wake, on_synced);
	y->wake.data = s;
	ev_async_start(loop, &y->wake);
	ev_timer_init(&s->sync_timer, on_sync_timer, 0, 0);
	s->sync_timer.data = s;
	if (pthread_create(&y->thread, NULL, sync_main, y) != 0) {
		snprintf(err, n, "cannot start the sync thread");
		ev_async_stop(loop, &y->wake);
		free(y);
		return -1;
	}
	s->sync = y;
	return 0;
}

void
store_free(struct store *s)
{
	struct store_sync *y = s->sync;
	int i;

	if (y) {
		pthread_mutex_lock(&y->mu);
		y->stop = 1;
		pthread_cond_signal(&y->cv);
		pthread_mutex_unlock(&y->mu);
		pthread_join(y->thread, NULL);
		ev_async_stop(s->loop, &y->wake);
		ev_timer_stop(s->loop, &s->sync_timer);
		for (i = 0; i < y->nwait; i++)
			free(y->wait[i].path);
		for (i = 0; y->busy && i < y->nround; i++) {
			close(y->round[i].fd);
			free(y->round[i].path);
		}
		free(y->wait);
		free(y->round);
		pthread_mutex_destroy(&y->mu);
		pthread_cond_destroy(&y->cv);
		free(y);
	}
	free(s->path);
	free(s->what);
	memset(s, 0, sizeof(*s));
}

/* ---- fencing ---- */

void
store_fence(struct store *s, struct lease *lease, unsigned long long epoch)
{
	s->lease = lease;
	s->epoch = epoch;
	s->checked = -1;
}

void
store_step_down(const struct lease_rec *cur)
{
	char who[LEASE_HOST_MAX + 16];

	fprintf(stderr, "ftfarm-master (pid %d): the state dir's lease went to "
		"epoch %llu (supervisor %s); stepping down without writing\n",
		(int)getpid(), cur->epoch, lease_id_str(&cur->sup, who,
							sizeof(who)));
	_exit(STORE_LOST_LEASE);
}

int
store_check_lease(struct store *s, int always)
{
	struct lease_rec cur;
	double now;
	int rc;

	if (s->lease == NULL)
		return 0;
	now = ev_now(s->loop);
	if (!always && now == s->checked)
		return 0;
	rc = lease_check(s->lease, s->epoch, &cur);
	if (rc == 1)
		store_step_down(&cur);
	if (rc == -1) {
		store_fail(s, "read", s->lease->path, errno);
		return -1;
	}
	s->checked = now;
	return 0;
}

/* ---- writing ---- */

long
store_write(struct store *s, struct jsonl *j, const char *path)
{
	long lines;

	if (jsonl_pending(j) == 0)
		return 0;
	if (store_check_lease(s, 0) == -1)
		return -1;
	lines = jsonl_flush(j);
	if (lines == -1) {
		store_fail(s, "write", path, errno);
		return -1;
	}
	if (jsonl_unlinked(j)) {
		/* Written into a file nobody can find any more. */
		store_fail(s, "write", path, ENOENT);
		return -1;
	}
	if (s->sync)
		want(s, j, path), schedule(s);
	else
		j->synced = j->written, j->synced_lines = j->lines;
	return lines;
}

uint64_t
store_done_lines(const struct store *s, const struct jsonl *j)
{
	return s->cfg->fsync == FT_FSYNC_ALWAYS ? j->synced_lines : j->lines;
}

uint64_t
store_done_bytes(const struct store *s, const struct jsonl *j)
{
	return s->cfg->fsync == FT_FSYNC_ALWAYS ? j->synced : j->written;
}

int
store_durable(const struct store *s, const struct jsonl *j)
{
	return jsonl_pending(j) == 0 &&
	       (s->cfg->fsync == FT_FSYNC_NONE || j->synced >= j->written);
}

void
store_forget(struct store *s, struct jsonl *j)
{
	struct store_sync *y = s->sync;
	int i;

	if (y == NULL)
		return;
	i = find_wait(y, j);
	if (i >= 0) {
		free(y->wait[i].path);
		y->wait[i] = y->wait[--y->nwait];
	}
	for (i = 0; y->busy && i < y->nround; i++)
		if (y->round[i].j == j)
			y->round[i].j = NULL;	/* the thread keeps its fd */
}

int
store_put(struct store *s, const char *path, const void *data, size_t len)
{
	if (store_check_lease(s, 0) == -1)
		return -1;
	if (ft_write_file_atomic(path, data, len) == -1) {
		store_fail(s, "write", path, errno);
		return -1;
	}
	return 0;
}

/* ---- failure ---- */

void
store_fail(struct store *s, const char *what, const char *path, int err)
{
	int was = s->failed;

	s->failures++;
	s->episode_failures++;
	if (was && s->err == err && strcmp(s->path, path) == 0)
		return;
	if (!was) {
		s->since = ft_wall();
		s->episode_failures = 1;
	}
	s->failed = 1;
	s->err = err;
	free(s->path);
	free(s->what);
	s->path = ft_strdup(path);
	s->what = ft_strdup(what);
	/* One warning and one event per failure, however many files it
	 * hits: the next file's failure is the same outage. */
	if (was)
		return;
	log_warnx("state dir %s: %s %s: %s; no new tasks go out until it "
		  "works again (what could not be written is kept)",
		  err == ENOSPC ? "full" : "failing", what, path,
		  strerror(err));
	if (s->ops.changed)
		s->ops.changed(s->ops.ctx, 1, 0);
}

void
store_recovered(struct store *s)
{
	if (!s->failed)
		return;
	log_info("state dir writable again after %.1f s (%llu writes had "
		 "failed, the last %s %s: %s); tasks go out again",
		 ft_wall() - s->since,
		 (unsigned long long)s->episode_failures, s->what, s->path,
		 strerror(s->err));
	s->failed = 0;
	if (s->ops.changed)
		s->ops.changed(s->ops.ctx, 0, ft_wall() - s->since);
}

int
store_ok(const struct store *s)
{
	return !s->failed;
}

/* A small file written, synced and removed: can the state dir take
 * writes again?  0 or -1 (errno). */
static int
probe(const struct store *s)
{
	char *path = ft_asprintf("%s/.probe", s->cfg->state_dir);
	char block[4096] = { 0 };
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW |
		      O_CLOEXEC, 0600), rc = -1, e;

	if (fd >= 0 && ft_write_all(fd, block, sizeof(block)) == 0 &&
	    fsync(fd) == 0)
		rc = 0;
	e = errno;
	if (fd >= 0)
		close(fd);
	unlink(path);
	free(path);
	errno = e;
	return rc;
}

void
store_tick(struct store *s)
{
	if (!s->failed)
		return;
	if (s->lease && store_check_lease(s, 1) == -1)
		return;
	if (s->ops.retry && s->ops.retry(s->ops.ctx) == -1)
		return;
	if (probe(s) == -1) {
		store_fail(s, "write", s->cfg->state_dir, errno);
		return;
	}
	store_recovered(s);
}

json_t *
store_status(const struct store *s)
{
	static const char *const policies[] = { "none", "batch", "always" };

	if (!s->failed)
		return json_pack("{s:s, s:s}", "state", "ok", "fsync",
				 policies[s->cfg->fsync]);
	return json_pack("{s:s, s:s, s:s, s:s, s:i, s:s, s:f, s:I}",
			 "state", s->err == ENOSPC ? "full" : "failing",
			 "fsync", policies[s->cfg->fsync],
			 "error", strerror(s->err), "path", s->path,
			 "errno", s->err, "op", s->what, "since", s->since,
			 "failures", (json_int_t)s->failures);
}

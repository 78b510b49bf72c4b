/* reaper: forgotten batches' directories removed off the loop (reaper.h). */
#include "reaper.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "master.h"
#include "util.h"

struct job {
	char *dir;
	long last_id;
	struct job *next;
};

static struct {
	struct master *m;
	pthread_t thread;
	int running, stop, pending;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct job *head, *tail;
	long written;			/* what batches/last_id says */
} rp;

/* May the thread write (the lease is still the master's)? */
static int
fenced(void)
{
	struct lease_rec cur;

	return rp.m->lease.fd >= 0 &&
	       lease_check(&rp.m->lease, rp.m->epoch, &cur) != 0;
}

/* batches/last_id says LAST (synced).  0 or -1. */
static int
write_last(long last)
{
	char *path = ft_asprintf("%s/batches/last_id", rp.m->cfg.state_dir);
	char text[32];
	int n = snprintf(text, sizeof(text), "%ld\n", last), rc;

	rc = ft_write_file_durable(path, text, (size_t)n,
				   rp.m->cfg.fsync != FT_FSYNC_NONE);
	if (rc == -1)
		log_warn("%s", path);
	free(path);
	return rc;
}

static void
do_job(struct job *j)
{
	if (fenced())
		return;		/* the loop steps down at its next write */
	if (j->last_id > rp.written) {
		if (write_last(j->last_id) == -1)
			return;	/* keep the directory: its id stays known */
		rp.written = j->last_id;
	}
	if (ft_rmtree(j->dir) == -1 && errno != ENOENT)
		log_warn("%s", j->dir);
}

static void *
reaper_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&rp.mu);
	for (;;) {
		struct job *j;

		while (!rp.stop && rp.head == NULL)
			pthread_cond_wait(&rp.cv, &rp.mu);
		if ((j = rp.head) == NULL)
			break;		/* stopping, and nothing left */
		rp.head = j->next;
		if (rp.head == NULL)
			rp.tail = NULL;
		pthread_mutex_unlock(&rp.mu);
		do_job(j);
		free(j->dir);
		free(j);
		pthread_mutex_lock(&rp.mu);
		rp.pending--;
	}
	pthread_mutex_unlock(&rp.mu);
	return NULL;
}

int
reaper_start(struct master *m, char *err, size_t n)
{
	memset(&rp, 0, sizeof(rp));
	rp.m = m;
	rp.written = 0;		/* written again at its first job */
	pthread_mutex_init(&rp.mu, NULL);
	pthread_cond_init(&rp.cv, NULL);
	if (pthread_create(&rp.thread, NULL, reaper_main, NULL) != 0) {
		snprintf(err, n, "cannot start the thread that removes "
			 "forgotten batches");
		return -1;
	}
	rp.running = 1;
	return 0;
}

void
reaper_remove(struct master *m, char *dir, long last_id)
{
	struct job *j = ft_calloc(1, sizeof(*j));

	(void)m;
	j->dir = dir;
	j->last_id = last_id;
	pthread_mutex_lock(&rp.mu);
	if (rp.tail)
		rp.tail->next = j;
	else
		rp.head = j;
	rp.tail = j;
	rp.pending++;
	pthread_cond_signal(&rp.cv);
	pthread_mutex_unlock(&rp.mu);
}

int
reaper_pending(void)
{
	int n;

	pthread_mutex_lock(&rp.mu);
	n = rp.pending;
	pthread_mutex_unlock(&rp.mu);
	return n;
}

void
reaper_stop(struct master *m)
{
	(void)m;
	if (!rp.running)
		return;
	pthread_mutex_lock(&rp.mu);
	rp.stop = 1;
	pthread_cond_signal(&rp.cv);
	pthread_mutex_unlock(&rp.mu);
	pthread_join(rp.thread, NULL);
	rp.running = 0;
}

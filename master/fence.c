/* fence: the master's hold on its state dir's lease (see fence.h). */
#include "fence.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "util.h"

static struct master *fm;		/* for the log guard */
static ev_timer renew_w;
static struct lease_id self;

/* Does ID name a process that may still run (alive here, or on another
 * host where it cannot be checked)? */
static int
held(const struct lease_id *id)
{
	return id->pid > 0 && (!lease_id_local(id) || lease_id_alive(id));
}

/* A master started by hand: the lease is ours to take when nobody alive
 * holds it.  0, or -1 with ERR. */
static int
take(struct master *m, char *err, size_t n)
{
	struct lease_rec cur, next;
	char who[LEASE_HOST_MAX + 16];
	int rc = lease_read(&m->lease, &cur);

	if (rc == -1 && errno != EBADMSG) {
		snprintf(err, n, "%s: %s", m->lease.path, strerror(errno));
		return -1;
	}
	if (rc == -1)
		memset(&cur, 0, sizeof(cur));	/* damaged: start over */
	if (cur.state != LEASE_FREE && (held(&cur.sup) || held(&cur.master))) {
		snprintf(err, n, "%s: the state dir is held by supervisor %s "
			 "(epoch %llu); stop it first", m->lease.path,
			 lease_id_str(&cur.sup, who, sizeof(who)), cur.epoch);
		return -1;
	}
	memset(&next, 0, sizeof(next));
	next.epoch = cur.epoch + 1;
	next.state = LEASE_ACTIVE;
	next.master = self;
	rc = lease_swap(&m->lease, &cur, &next, NULL);
	if (rc != 0) {
		snprintf(err, n, "%s: %s", m->lease.path, rc == 1 ?
			 "taken by someone else meanwhile" : strerror(errno));
		return -1;
	}
	m->epoch = next.epoch;
	return 0;
}

int
fence_take(struct master *m, unsigned long long epoch, char *err, size_t n)
{
	struct lease_rec cur;

	lease_self(&self);
	if (lease_open(&m->lease, m->cfg.state_dir, err, n) == -1)
		return -1;
	if (epoch == 0)
		return take(m, err, n);
	if (lease_check(&m->lease, epoch, &cur) != 0) {
		snprintf(err, n, "%s: the lease is at epoch %llu, not %llu: "
			 "another master took over", m->lease.path, cur.epoch,
			 epoch);
		return -1;
	}
	m->epoch = epoch;
	return 0;
}

static void
on_renew(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct master *m = w->data;
	struct lease_rec cur;
	int rc;

	(void)loop, (void)revents;
	rc = lease_renew(&m->lease, m->epoch, &self, &cur);
	if (rc == 1)
		store_step_down(&cur);
	if (rc == -1)
		store_fail(&m->store, "renew", m->lease.path, errno);
}

/* Before each log line. */
static void
guard(void)
{
	static int busy;		/* the check may log */

	if (fm && fm->store.loop && !busy) {
		busy = 1;
		store_check_lease(&fm->store, 0);
		busy = 0;
	}
}

void
fence_start(struct master *m)
{
	double every = m->cfg.lease / 4;

	fm = m;
	store_fence(&m->store, &m->lease, m->epoch);
	ev_timer_init(&renew_w, on_renew, 0, every);
	renew_w.data = m;
	ev_timer_start(m->loop, &renew_w);
	log_set_guard(guard);
}

void
fence_stalled(struct master *m)
{
	if (m->lease.fd >= 0)
		store_check_lease(&m->store, 1);
}

void
fence_release(struct master *m)
{
	struct lease_rec cur, next;

	if (m->lease.fd < 0 || lease_read(&m->lease, &cur) != 0 ||
	    cur.epoch != m->epoch || cur.sup.pid > 0)
		return;
	next = cur;
	next.state = LEASE_FREE;
	next.master.pid = 0;
	if (lease_swap(&m->lease, &cur, &next, NULL) != 0)
		log_warn("%s: cannot give the lease back", m->lease.path);
}

void
fence_stop(struct master *m)
{
	log_set_guard(NULL);
	fm = NULL;
	if (m->loop)
		ev_timer_stop(m->loop, &renew_w);
	lease_close(&m->lease);
}

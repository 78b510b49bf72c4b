/* lease: which supervisor and master own a state dir (see lease.h). */
#include "lease.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crc32c.h"
#include "util.h"

#define REC_LEN 256		/* the record's bytes on disk */
#define BODY_LEN (REC_LEN - 13)	/* then "crc=XXXXXXXX\n" */
#define LOCK_WAIT 1.0		/* seconds lease_swap waits for the lock */
#define READ_TRIES 5		/* a read racing a write may see it torn */

static const char *const state_names[] = {
	[LEASE_FREE] = "free",
	[LEASE_ACTIVE] = "active",
	[LEASE_STOPPING] = "stopping",
};

const char *
lease_state_name(enum lease_state s)
{
	return (unsigned)s < FT_ARRAY_LEN(state_names) ? state_names[s] : "?";
}

int
lease_open(struct lease *l, const char *state_dir, char *err, size_t n)
{
	l->path = ft_asprintf("%s/lease", state_dir);
	l->fd = open(l->path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (l->fd == -1) {
		snprintf(err, n, "%s: %s", l->path, strerror(errno));
		free(l->path);
		l->path = NULL;
		return -1;
	}
	return 0;
}

void
lease_close(struct lease *l)
{
	if (l->fd >= 0)
		close(l->fd);
	l->fd = -1;
	free(l->path);
	l->path = NULL;
}

/* ---- the record's text ---- */

static void
id_put(char *out, size_t n, const struct lease_id *id)
{
	snprintf(out, n, "%s/%d/%llu", id->host[0] ? id->host : "-",
		 (int)id->pid, id->start);
}

static int
id_get(const char *s, struct lease_id *id)
{
	int pid;

	memset(id, 0, sizeof(*id));
	if (sscanf(s, "%63[^/]/%d/%llu", id->host, &pid, &id->start) != 3)
		return -1;
	if (strcmp(id->host, "-") == 0)
		id->host[0] = '\0';
	id->pid = (pid_t)pid;
	return 0;
}

static void
format(const struct lease_rec *r, char *out)
{
	char sup[LEASE_HOST_MAX + 48], master[LEASE_HOST_MAX + 48];
	int len;

	id_put(sup, sizeof(sup), &r->sup);
	id_put(master, sizeof(master), &r->master);
	len = snprintf(out, BODY_LEN + 1, "ftfarm-lease 1 epoch=%llu seq=%llu "
		       "state=%s sup=%s master=%s", r->epoch, r->seq,
		       lease_state_name(r->state), sup, master);
	if (len < 0 || len > BODY_LEN)
		len = BODY_LEN;
	memset(out + len, ' ', (size_t)(BODY_LEN - len));
	snprintf(out + BODY_LEN, 14, "crc=%08x\n",
		 crc32c(0, out, BODY_LEN));
}

static int
parse(const char rec[REC_LEN], struct lease_rec *r)
{
	char body[BODY_LEN + 1], state[16], sup[128], master[128];
	unsigned crc;
	size_t i;

	if (sscanf(rec + BODY_LEN, "crc=%8x", &crc) != 1 ||
	    rec[REC_LEN - 1] != '\n' || crc != crc32c(0, rec, BODY_LEN))
		return -1;
	memcpy(body, rec, BODY_LEN);
	body[BODY_LEN] = '\0';
	memset(r, 0, sizeof(*r));
	if (sscanf(body, "ftfarm-lease 1 epoch=%llu seq=%llu state=%15s "
		   "sup=%127s master=%127s", &r->epoch, &r->seq, state, sup,
		   master) != 5 || id_get(sup, &r->sup) == -1 ||
	    id_get(master, &r->master) == -1)
		return -1;
	for (i = 0; i < FT_ARRAY_LEN(state_names); i++)
		if (strcmp(state, state_names[i]) == 0) {
			r->state = (enum lease_state)i;
			return 0;
		}
	return -1;
}

/* ---- reading and writing ---- */

/* Is L's descriptor still the file at its path? */
static int
still_there(const struct lease *l)
{
	struct stat a, b;

	if (fstat(l->fd, &a) == -1 || stat(l->path, &b) == -1)
		return 0;
	return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

int
lease_read(struct lease *l, struct lease_rec *r)
{
	char rec[REC_LEN];
	int i;

	if (!still_there(l)) {
		errno = ENOENT;
		return -1;
	}
	for (i = 0; i < READ_TRIES; i++) {
		ssize_t got = pread(l->fd, rec, REC_LEN, 0);

		if (got == 0) {
			memset(r, 0, sizeof(*r));
			return 1;
		}
		if (got == REC_LEN && parse(rec, r) == 0)
			return 0;
		if (got == -1 && errno != EINTR)
			return -1;
		ft_sleep(0.001);
	}
	errno = EBADMSG;
	return -1;
}

static int
put(struct lease *l, const struct lease_rec *r, int sync)
{
	char rec[REC_LEN + 1];

	format(r, rec);
	if (pwrite(l->fd, rec, REC_LEN, 0) != REC_LEN)
		return -1;
	return sync ? fdatasync(l->fd) : 0;
}

/* Take the file's lock, waiting up to LOCK_WAIT.  0 or -1. */
static int
lock(struct lease *l)
{
	double until = ft_now() + LOCK_WAIT;

	while (flock(l->fd, LOCK_EX | LOCK_NB) == -1) {
		if ((errno != EWOULDBLOCK && errno != EINTR) ||
		    ft_now() > until)
			return -1;
		ft_sleep(0.002);
	}
	return 0;
}

static void
unlock(struct lease *l)
{
	int e = errno;

	flock(l->fd, LOCK_UN);
	errno = e;
}

static int
same(const struct lease_rec *a, const struct lease_rec *b)
{
	return a->epoch == b->epoch && a->seq == b->seq &&
	       a->state == b->state;
}

int
lease_swap(struct lease *l, const struct lease_rec *expect,
	   const struct lease_rec *next, struct lease_rec *cur)
{
	struct lease_rec now;
	int rc;

	if (lock(l) == -1)
		return -1;
	rc = lease_read(l, &now);
	if (rc == -1 && errno == EBADMSG && expect->epoch == 0)
		rc = 1;		/* damaged: only a new lease may replace it */
	if (rc == -1)
		goto out;
	if (!same(&now, expect)) {
		if (cur)
			*cur = now;
		rc = 1;
		goto out;
	}
	rc = put(l, next, 1);
out:
	unlock(l);
	return rc;
}

int
lease_renew(struct lease *l, unsigned long long epoch,
	    const struct lease_id *master, struct lease_rec *cur)
{
	struct lease_rec now;
	int rc;

	if (lock(l) == -1)
		return -1;
	rc = lease_read(l, &now);
	if (rc == 0 && (now.epoch != epoch || now.state == LEASE_FREE))
		rc = 1;
	else if (rc == 0) {
		now.seq++;
		now.master = *master;
		rc = put(l, &now, 0);
	} else if (rc == 1) {
		rc = -1;	/* an empty lease is nobody's */
		errno = ENOENT;
	}
	if (rc == 1 && cur)
		*cur = now;
	unlock(l);
	return rc;
}

int
lease_check(struct lease *l, unsigned long long epoch, struct lease_rec *cur)
{
	struct lease_rec now;
	int rc = lease_read(l, &now);

	if (rc == 1) {
		errno = ENOENT;
		return -1;
	}
	if (rc == -1)
		return -1;
	if (cur)
		*cur = now;
	return now.epoch == epoch && now.state != LEASE_FREE ? 0 : 1;
}

/* ---- identities ---- */

void
lease_self(struct lease_id *id)
{
	memset(id, 0, sizeof(*id));
	if (gethostname(id->host, sizeof(id->host) - 1) == -1)
		snprintf(id->host, sizeof(id->host), "localhost");
	id->pid = getpid();
	id->start = ft_proc_start(id->pid);
}

int
lease_id_local(const struct lease_id *id)
{
	char host[LEASE_HOST_MAX] = "";

	if (id->pid <= 0 || gethostname(host, sizeof(host) - 1) == -1)
		return 0;
	return strcmp(host, id->host) == 0;
}

int
lease_id_alive(const struct lease_id *id)
{
	return lease_id_local(id) && ft_proc_is(id->pid, id->start);
}

const char *
lease_id_str(const struct lease_id *id, char *buf, size_t n)
{
	if (id->pid <= 0)
		snprintf(buf, n, "none");
	else
		snprintf(buf, n, "%s:%d", id->host, (int)id->pid);
	return buf;
}

/* join: nodes that join over TCP (see join.h). */
#include "join.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agents.h"
#include "farm.h"
#include "frame.h"
#include "log.h"
#include "proto.h"
#include "remote.h"
#include "util.h"

#define SLOTS_MAX 4096
#define GPUS_MAX 64

/* A connection waiting for its JOIN. */
struct pending {
	struct master *m;
	int fd;
	char peer[64];
	struct frame_reader in;
	ev_io io;
	ev_timer timeout;
	struct pending *next;
};

static struct pending *pendings;
static int npending;

static void
pending_free(struct pending *p)
{
	struct pending **q;

	for (q = &pendings; *q; q = &(*q)->next)
		if (*q == p) {
			*q = p->next;
			break;
		}
	npending--;
	ev_io_stop(p->m->loop, &p->io);
	ev_timer_stop(p->m->loop, &p->timeout);
	frame_reader_free(&p->in);
	free(p);
}

/* Answer P with REFUSE and WHY, close it, forget it. */
static void
refuse(struct pending *p, const char *why)
{
	struct frame_writer w = { 0 };
	struct ft_buf b = { 0 };

	log_info("join: %s refused: %s", p->peer, why);
	proto_put_refuse(&b, why, strlen(why));
	frame_put(&w, FT_MSG_REFUSE, b.data, b.len);
	ft_buf_free(&b);
	(void)!frame_flush(&w, p->fd);	/* a few bytes: a fresh socket
					 * takes them */
	frame_writer_free(&w);
	shutdown(p->fd, SHUT_WR);
	close(p->fd);
	pending_free(p);
}

/* The GPU ids of LIST (LEN bytes, comma-separated) into J (NULL-
 * terminated, new strings).  0, or -1 with WHY. */
static int
split_gpus(const char *list, size_t len, struct agent_join *j, char *why,
	   size_t n)
{
	char *copy = ft_asprintf("%.*s", (int)len, list), *save = NULL, *id;
	int k;

	j->gpus = ft_calloc(GPUS_MAX + 1, sizeof(char *));
	j->ngpus = 0;
	for (id = strtok_r(copy, ",", &save); id;
	     id = strtok_r(NULL, ",", &save)) {
		if (j->ngpus == GPUS_MAX || *id == '\0' ||
		    strpbrk(id, " \t\n")) {
			ft_snprintf(why, n, "gpus: at most %d ids without "
				    "blanks", GPUS_MAX);
			free(copy);
			return -1;
		}
		for (k = 0; k < j->ngpus; k++)
			if (strcmp(j->gpus[k], id) == 0) {
				ft_snprintf(why, n, "gpus: id \"%s\" twice", id);
				free(copy);
				return -1;
			}
		j->gpus[j->ngpus++] = ft_strdup(id);
	}
	free(copy);
	return 0;
}

static void
join_free(struct agent_join *j)
{
	int k;

	for (k = 0; j->gpus && k < j->ngpus; k++)
		free(j->gpus[k]);
	free(j->gpus);
	free((char *)j->name);
	free((char *)j->host);
	free((char *)j->alloc);
}

/* Frame F as a JOIN into J (new strings).  0, or -1 with WHY. */
static int
decode(const struct frame *f, struct agent_join *j, char *why, size_t n)
{
	struct proto_join pj;

	memset(j, 0, sizeof(*j));
	if (f->tag != FT_MSG_JOIN) {
		ft_snprintf(why, n, "expected a join, got a %s message",
			    proto_msg_name((int)f->tag));
		return -1;
	}
	if (proto_get_join(f->p, f->n, &pj) == -1) {
		ft_snprintf(why, n, "a malformed join, or of another version "
			    "than this master's protocol %d (the same ftfarm "
			    "on every host)", FT_PROTO_VERSION);
		return -1;
	}
	j->name = ft_asprintf("%.*s", (int)pj.name_len, pj.name);
	j->host = ft_asprintf("%.*s", (int)pj.host_len, pj.host);
	j->alloc = ft_asprintf("%.*s", (int)pj.alloc_len, pj.alloc);
	j->slots = (int)pj.slots;
	j->pid = (pid_t)pj.pid;
	j->start = pj.start;
	j->alloc_end = pj.alloc_end;
	j->mem = pj.mem;
	if (!ft_config_name_ok(j->name) || strlen(j->name) != pj.name_len ||
	    pj.name_len > 200) {
		ft_snprintf(why, n, "name \"%s\": letters, digits, \"_\", "
			    "\".\" and \"-\" only", j->name);
		return -1;
	}
	if (pj.slots < 1 || pj.slots > SLOTS_MAX) {
		ft_snprintf(why, n, "slots: 1 to %d, not %u", SLOTS_MAX,
			    pj.slots);
		return -1;
	}
	if (pj.host_len == 0 || pj.host_len > 200 || strlen(j->host) !=
	    pj.host_len || strlen(j->alloc) != pj.alloc_len ||
	    pj.alloc_len > 30) {
		ft_snprintf(why, n, "a malformed host or allocation");
		return -1;
	}
	return split_gpus(pj.gpus, pj.gpus_len, j, why, n);
}

/* P's first frame came: the node joins, or is refused. */
static void
on_join(struct pending *p, const struct frame *f)
{
	struct agent_join j;
	char why[512];
	int fd = p->fd;

	if (decode(f, &j, why, sizeof(why)) == -1 ||
	    farm_join(p->m, &j, fd, NULL, 0, why, sizeof(why)) == -1) {
		join_free(&j);
		refuse(p, why);
		return;
	}
	join_free(&j);
	p->fd = -1;		/* the node's link's now */
	pending_free(p);
}

static void
on_read(struct ev_loop *loop, ev_io *io, int revents)
{
	struct pending *p = io->data;
	enum frame_rc got;
	struct frame f;
	int rc;

	(void)loop, (void)revents;
	got = frame_fill(&p->in, p->fd);
	rc = frame_next(&p->in, &f);
	if (rc == 1) {
		/* An agent sends nothing after its JOIN before the welcome:
		 * bytes past it are a protocol error. */
		if (p->in.off != p->in.len)
			refuse(p, "bytes after the join, before the welcome");
		else
			on_join(p, &f);
		return;
	}
	if (rc == -1) {
		refuse(p, "a frame too large for a join");
		return;
	}
	if (got == FRAME_EOF || got == FRAME_ERROR) {
		log_info("join: %s closed before its join", p->peer);
		close(p->fd);
		pending_free(p);
	}
}

static void
on_timeout(struct ev_loop *loop, ev_timer *t, int revents)
{
	(void)loop, (void)revents;
	refuse(t->data, "no join in time");
}

/* remote_join_fn: an agent's connection, authenticated. */
static void
on_agent(void *ctx, int fd, const char *peer, const char *rest, size_t n)
{
	struct master *m = ctx;
	struct pending *p = ft_calloc(1, sizeof(*p));

	p->m = m;
	p->fd = fd;
	snprintf(p->peer, sizeof(p->peer), "%s", peer);
	frame_reader_init(&p->in, FT_SPEC_MAX);
	p->next = pendings;
	pendings = p;
	npending++;
	ev_io_init(&p->io, on_read, fd, EV_READ);
	ev_timer_init(&p->timeout, on_timeout, JOIN_TIMEOUT, 0);
	p->io.data = p->timeout.data = p;
	if (npending > JOIN_PENDING_MAX || fcntl(fd, F_SETFL, O_NONBLOCK)) {
		refuse(p, "too many nodes joining at once");
		return;
	}
	if (n)
		frame_reader_feed(&p->in, rest, n);
	ev_io_start(m->loop, &p->io);
	ev_timer_start(m->loop, &p->timeout);
	if (n)
		ev_feed_event(m->loop, &p->io, EV_READ);
}

void
join_open(struct master *m)
{
	if (m->remote && ft_config_joinable(&m->cfg))
		remote_set_joiner(m->remote, on_agent, m);
}

void
join_close(struct master *m)
{
	while (pendings) {
		close(pendings->fd);
		pending_free(pendings);
	}
	(void)m;
}

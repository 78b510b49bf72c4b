/* link_tcp: a joined node agent's link over TCP, frames under the loop
 * (link.h). */
#include "link.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "frame.h"
#include "proto.h"

/* Frames read in one wake-up before the loop gets its turn again. */
#define READS_PER_WAKE 64

struct link_tcp {
	struct link *l;
	int fd;
	ev_io rio, wio;
	ev_timer ping_t;		/* the open ping's deadline */
	ev_timer send_t;		/* bytes that wait must go by then */
	struct frame_reader in;
	struct frame_writer out;
	int busy;			/* in a callback that hands frames up */
	int dead;			/* closed meanwhile: free at its end */
};

static const struct link_impl tcp_impl;

static void
tcp_free(struct link_tcp *t)
{
	frame_reader_free(&t->in);
	frame_writer_free(&t->out);
	free(t);
}

static void
tcp_close(struct link *l)
{
	struct link_tcp *t = l->tcp;
	struct ev_loop *loop = l->ls->loop;

	if (t == NULL)
		return;
	l->tcp = NULL;
	ev_io_stop(loop, &t->rio);
	ev_io_stop(loop, &t->wio);
	ev_timer_stop(loop, &t->ping_t);
	ev_timer_stop(loop, &t->send_t);
	close(t->fd);
	t->fd = -1;
	if (t->busy)
		t->dead = 1;
	else
		tcp_free(t);
}

/* Hand the whole frames that came up, while the link lives.  0, or -1
 * when the link was closed on the way (T is freed by the caller). */
static int
hand_up(struct link_tcp *t)
{
	struct frame f;
	int rc;

	while (!t->dead && (rc = frame_next(&t->in, &f)) == 1)
		link_received(t->l, (int)f.tag, f.p, f.n);
	if (t->dead)
		return -1;
	if (rc == -1) {
		link_failed(t->l, "a malformed frame from the agent");
		return -1;
	}
	return 0;
}

/* Read what came, hand it up.  On the connection's end, the link fails. */
static void
read_some(struct link_tcp *t)
{
	int k;

	t->busy = 1;
	for (k = 0; k < READS_PER_WAKE; k++) {
		enum frame_rc got = frame_fill(&t->in, t->fd);

		if (hand_up(t) == -1)
			break;
		if (got == FRAME_AGAIN)
			break;
		if (got == FRAME_EOF || got == FRAME_ERROR) {
			char why[128];

			snprintf(why, sizeof(why), "%s", got == FRAME_EOF ?
				 "its connection closed" :
				 strerror(errno));
			link_failed(t->l, why);
			break;
		}
	}
	t->busy = 0;
	if (t->dead)
		tcp_free(t);
}

static void
on_read(struct ev_loop *loop, ev_io *w, int revents)
{
	(void)loop, (void)revents;
	read_some(w->data);
}

/* Write what waits; once nothing does, stop watching for room. */
static int
write_some(struct link_tcp *t)
{
	struct ev_loop *loop = t->l->ls->loop;
	int rc = frame_flush(&t->out, t->fd);

	if (rc == 1 && !ev_is_active(&t->wio)) {
		ev_io_start(loop, &t->wio);
		ev_timer_set(&t->send_t, t->l->ls->send_timeout, 0);
		ev_timer_start(loop, &t->send_t);
	} else if (rc != 1) {
		ev_io_stop(loop, &t->wio);
		ev_timer_stop(loop, &t->send_t);
	}
	return rc;
}

static void
on_write(struct ev_loop *loop, ev_io *w, int revents)
{
	struct link_tcp *t = w->data;

	(void)loop, (void)revents;
	if (write_some(t) == -1)
		link_failed(t->l, strerror(errno));
}

static void
on_send_timeout(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct link_tcp *t = w->data;

	(void)loop, (void)revents;
	link_failed(t->l, "a send did not complete in time");
}

/* The ping's deadline: its pong may wait unread in the socket (the loop
 * was late), so read first. */
static void
on_ping_timeout(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct link_tcp *t = w->data;
	struct link *l = t->l;

	(void)loop, (void)revents;
	read_some(t);
	if (l->tcp == t && l->pinging)
		link_ping_expired(l);
}

int
link_open_tcp(struct links *ls, int id, int fd, const void *rest, size_t n)
{
	struct link *l = ls->v[id];
	struct link_tcp *t = ft_calloc(1, sizeof(*t));
	int one = 1;

	if (fcntl(fd, F_SETFL, O_NONBLOCK) == -1) {
		close(fd);
		free(t);
		return -1;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	t->l = l;
	t->fd = fd;
	frame_reader_init(&t->in, FT_MSG_MAX);
	if (n)
		frame_reader_feed(&t->in, rest, n);
	ev_io_init(&t->rio, on_read, fd, EV_READ);
	ev_io_init(&t->wio, on_write, fd, EV_WRITE);
	ev_timer_init(&t->ping_t, on_ping_timeout, 0, 0);
	ev_timer_init(&t->send_t, on_send_timeout, 0, 0);
	t->rio.data = t->wio.data = t->ping_t.data = t->send_t.data = t;
	l->tcp = t;
	link_opened(l, &tcp_impl);
	ev_io_start(ls->loop, &t->rio);
	if (n)		/* what came along is read at the loop's next turn */
		ev_feed_event(ls->loop, &t->rio, EV_READ);
	return 0;
}

static int
tcp_send(struct link *l, int tag, struct ft_buf *msg)
{
	struct link_tcp *t = l->tcp;

	frame_put(&t->out, (uint32_t)tag, msg->data, msg->len);
	ft_buf_free(msg);
	return write_some(t) == -1 ? -1 : 0;
}

static int
tcp_ping(struct link *l, double now)
{
	struct link_tcp *t = l->tcp;
	struct ft_buf msg = { 0 };

	(void)now;
	proto_put_ping(&msg, l->ping_seq);
	if (tcp_send(l, FT_MSG_PING, &msg) == -1)
		return -1;
	ev_timer_set(&t->ping_t, l->ls->ping_timeout, 0);
	ev_timer_start(l->ls->loop, &t->ping_t);
	return 0;
}

static void
tcp_pong(struct link *l)
{
	ev_timer_stop(l->ls->loop, &l->tcp->ping_t);
}

static const struct link_impl tcp_impl = {
	.name = "tcp",
	.send = tcp_send,
	.ping = tcp_ping,
	.pong = tcp_pong,
	.close = tcp_close,
};

/* control: the socket the ftfarm CLI talks to (see control.h). */
#include "control.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "ctl.h"
#include "util.h"

/* Clients served at once.  Each `ftfarm wait` holds one for as long as
 * its batch runs; at the cap, the oldest client that never asked anything
 * makes room for a newcomer. */
#define MAX_CLIENTS 1024

struct client {
	struct control *ctl;
	uint64_t id;
	int fd;
	ev_io rio, wio;
	struct ft_buf in, out;
	long waiting;			/* batch id waited for, 0 for none */
	double since;			/* connected at (monotonic) */
	int spoke;			/* has sent a whole request */
	int closing;			/* close once out is written */
	int held;			/* an answer is owed: lines wait */
	/* A body being read: want bytes into body, then done(body_ctx). */
	size_t want;
	struct ft_buf body;
	control_body_fn done;
	void *body_ctx;
	struct client *next;
};

struct control {
	struct ev_loop *loop;
	struct control_ops ops;
	int fd;
	ev_io io;
	char *path;
	struct client *clients;
	int nclients;
	uint64_t last_id;
};

static void client_close(struct client *c);
static void consume(struct client *c);

/* ---- answers ---- */

void
control_send(struct client *c, const json_t *answer)
{
	char *text = json_dumps(answer, JSON_COMPACT);

	ft_buf_adds(&c->out, text ? text : "{\"ok\":false}");
	ft_buf_add(&c->out, "\n", 1);
	free(text);
	ev_io_start(c->ctl->loop, &c->wio);
}

void
control_push(struct client *c, const char *text, size_t len)
{
	if (c->closing)
		return;
	ft_buf_add(&c->out, text, len);
	ev_io_start(c->ctl->loop, &c->wio);
}

size_t
control_pending(const struct client *c)
{
	return c->out.len;
}

void
control_error(struct client *c, const char *msg)
{
	json_t *ans = json_pack("{s:b, s:s}", "ok", 0, "error", msg);

	control_send(c, ans);
	json_decref(ans);
}

long
control_waiting(const struct client *c)
{
	return c->waiting;
}

void
control_set_waiting(struct client *c, long batch)
{
	c->waiting = batch;
}

void
control_foreach(struct control *ctl, void (*fn)(struct client *c, void *arg),
		void *arg)
{
	struct client *c, *next;

	for (c = ctl ? ctl->clients : NULL; c; c = next) {
		next = c->next;
		fn(c, arg);
	}
}

int
control_nclients(const struct control *ctl)
{
	return ctl ? ctl->nclients : 0;
}

void *
control_owner(const struct client *c)
{
	return c->ctl->ops.ctx;
}

void
control_hold(struct client *c)
{
	c->held = 1;
}

void
control_resume(struct client *c)
{
	c->held = 0;
	consume(c);
}

uint64_t
control_client_id(const struct client *c)
{
	return c->id;
}

struct client *
control_client(struct control *ctl, uint64_t id)
{
	struct client *c;

	for (c = ctl ? ctl->clients : NULL; c; c = c->next)
		if (c->id == id)
			return c;
	return NULL;
}

void
control_read_body(struct client *c, size_t len, control_body_fn done,
		  void *ctx)
{
	c->want = len;
	c->done = done;
	c->body_ctx = ctx;
	ft_buf_free(&c->body);
	ft_buf_reserve(&c->body, len + 1);
}

/* Move what C's input holds of its body to the body; hand the body over
 * once whole. */
static void
take_body(struct client *c)
{
	size_t n = c->want - c->body.len;

	if (n > c->in.len)
		n = c->in.len;
	ft_buf_add(&c->body, c->in.data, n);
	memmove(c->in.data, c->in.data + n, c->in.len - n);
	c->in.len -= n;
	if (c->body.len < c->want)
		return;
	c->want = 0;
	c->done(c->body_ctx, c, c->body.data, c->body.len);
	c->body.data = NULL;
	c->body.len = c->body.cap = 0;
}

/* Handle the whole lines (and bodies) C's input holds. */
static void
consume(struct client *c)
{
	char *nl;

	for (;;) {
		if (c->want) {
			take_body(c);
			if (c->want)
				return;
			continue;
		}
		if (c->held)
			return;
		nl = memchr(c->in.data, '\n', c->in.len);
		if (nl == NULL)
			return;
		c->spoke = 1;
		c->ctl->ops.request(c->ctl->ops.ctx, c, c->in.data,
				    (size_t)(nl - c->in.data));
		c->in.len -= (size_t)(nl - c->in.data) + 1;
		memmove(c->in.data, nl + 1, c->in.len);
	}
}

/* Read into the body directly while one is expected: a batch of many
 * megabytes is copied once. */
static ssize_t
client_read(struct client *c)
{
	ssize_t r;

	if (c->want && c->in.len == 0) {
		r = read(c->fd, c->body.data + c->body.len,
			 c->want - c->body.len);
		if (r > 0)
			c->body.len += (size_t)r;
		return r;
	}
	ft_buf_reserve(&c->in, 65536);
	r = read(c->fd, c->in.data + c->in.len, c->in.cap - c->in.len - 1);
	if (r > 0)
		c->in.len += (size_t)r;
	return r;
}

/* ---- clients ---- */

static void
on_readable(struct ev_loop *loop, ev_io *io, int revents)
{
	struct client *c = io->data;
	ssize_t r;

	(void)loop, (void)revents;
	r = client_read(c);
	if (r == -1 && (errno == EINTR || errno == EAGAIN))
		return;
	if (r <= 0) {
		client_close(c);
		return;
	}
	if (c->want && c->body.len == c->want) {
		c->want = 0;
		c->done(c->body_ctx, c, c->body.data, c->body.len);
		c->body.data = NULL;
		c->body.len = c->body.cap = 0;
	}
	consume(c);
	if (c->in.len > FT_CTL_MAX_LINE) {
		control_error(c, "request too long");
		c->closing = 1;
		ev_io_stop(c->ctl->loop, &c->rio);
	}
}

static void
on_writable(struct ev_loop *loop, ev_io *io, int revents)
{
	struct client *c = io->data;
	ssize_t w;

	(void)revents;
	w = write(c->fd, c->out.data, c->out.len);
	if (w == -1 && (errno == EINTR || errno == EAGAIN))
		return;
	if (w <= 0) {
		client_close(c);
		return;
	}
	memmove(c->out.data, c->out.data + w, c->out.len - (size_t)w);
	c->out.len -= (size_t)w;
	if (c->out.len == 0) {
		ev_io_stop(loop, &c->wio);
		if (c->closing)
			client_close(c);
	}
}

static void
client_close(struct client *c)
{
	struct control *ctl = c->ctl;
	struct client **p;

	if (ctl->ops.closed)
		ctl->ops.closed(ctl->ops.ctx, c);
	for (p = &ctl->clients; *p; p = &(*p)->next)
		if (*p == c) {
			*p = c->next;
			break;
		}
	ctl->nclients--;
	ev_io_stop(ctl->loop, &c->rio);
	ev_io_stop(ctl->loop, &c->wio);
	close(c->fd);
	ft_buf_free(&c->in);
	ft_buf_free(&c->out);
	ft_buf_free(&c->body);
	free(c);
	if (ctl->fd >= 0)
		ev_io_start(ctl->loop, &ctl->io);	/* if EMFILE had paused it */
}

/* At the cap: close the oldest client that has not asked anything.
 * Returns 0 if one made room. */
static int
evict_silent(struct control *ctl)
{
	struct client *c, *oldest = NULL;

	for (c = ctl->clients; c; c = c->next)
		if (!c->spoke && c->out.len == 0 &&
		    (oldest == NULL || c->since < oldest->since))
			oldest = c;
	if (oldest == NULL)
		return -1;
	client_close(oldest);
	return 0;
}

/* Only our own user, or root, may talk to the master. */
static int
peer_allowed(int fd)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == -1)
		return 0;
	return cred.uid == 0 || cred.uid == getuid();
}

static void
on_accept(struct ev_loop *loop, ev_io *io, int revents)
{
	struct control *ctl = io->data;
	struct client *c;
	int fd;

	(void)revents;
	fd = accept4(ctl->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (fd == -1) {
		if (errno == EMFILE || errno == ENFILE)
			ev_io_stop(loop, io);	/* until a client leaves */
		return;
	}
	if (!peer_allowed(fd) ||
	    (ctl->nclients >= MAX_CLIENTS && evict_silent(ctl) == -1)) {
		close(fd);
		return;
	}
	c = ft_calloc(1, sizeof(*c));
	c->ctl = ctl;
	c->id = ++ctl->last_id;
	c->fd = fd;
	c->since = ft_now();
	ev_io_init(&c->rio, on_readable, fd, EV_READ);
	ev_io_init(&c->wio, on_writable, fd, EV_WRITE);
	c->rio.data = c->wio.data = c;
	ev_io_start(loop, &c->rio);
	c->next = ctl->clients;
	ctl->clients = c;
	ctl->nclients++;
}

/* ---- the socket ---- */

static int
listen_at(struct control *ctl, char *err, size_t n)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	mode_t old;

	if (ft_snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", ctl->path) < 0) {
		snprintf(err, n, "%s: path too long for a socket", ctl->path);
		return -1;
	}
	ctl->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (ctl->fd == -1) {
		snprintf(err, n, "socket: %s", strerror(errno));
		return -1;
	}
	unlink(ctl->path);
	old = umask(0077);
	if (bind(ctl->fd, (struct sockaddr *)&sa, sizeof(sa)) == -1 ||
	    listen(ctl->fd, 16) == -1) {
		umask(old);
		snprintf(err, n, "%s: %s", ctl->path, strerror(errno));
		return -1;
	}
	umask(old);
	return 0;
}

struct control *
control_open(struct ev_loop *loop, const char *path,
	     const struct control_ops *ops, char *err, size_t n)
{
	struct control *ctl = ft_calloc(1, sizeof(*ctl));

	ctl->loop = loop;
	ctl->ops = *ops;
	ctl->fd = -1;
	ctl->path = ft_strdup(path);
	if (listen_at(ctl, err, n) == -1) {
		if (ctl->fd >= 0)
			close(ctl->fd);
		free(ctl->path);
		free(ctl);
		return NULL;
	}
	ev_io_init(&ctl->io, on_accept, ctl->fd, EV_READ);
	ctl->io.data = ctl;
	ev_io_start(loop, &ctl->io);
	return ctl;
}

void
control_close(struct control *ctl)
{
	if (ctl == NULL)
		return;
	ev_io_stop(ctl->loop, &ctl->io);
	if (ctl->fd >= 0)
		close(ctl->fd);
	ctl->fd = -1;
	while (ctl->clients) {
		struct client *c = ctl->clients;

		/* Push out what is pending (stop's answer) before closing. */
		if (c->out.len)
			ft_write_all(c->fd, c->out.data, c->out.len);
		client_close(c);
	}
	unlink(ctl->path);
	free(ctl->path);
	free(ctl);
}

/* control: the socket the ftfarm CLI talks to (see control.h). */
#include "control.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "ctl.h"
#include "log.h"
#include "util.h"

#define READ_CHUNK 65536
/* Request lines served in one turn of the loop: a client that pipelines
 * thousands of requests does not hold up heartbeats and other clients. */
#define LINES_PER_TURN 32
/* A client that held this much gives the heap back when it goes: the
 * master keeps freed heap by design (ft_memory_keep), so the megabytes a
 * client that did not read made it hold would stay for good. */
#define TRIM_AFTER (1 << 20)
/* Request bytes read ahead of those served: past this, a client that
 * pipelines faster than it is served is not read until it is caught up
 * (its requests wait in its socket, not in the master's memory). */
#define READ_AHEAD_MAX (256 << 10)
/* Answers unread past this: the client's next requests wait (in its
 * socket) until it has read them, so a client that sends and never reads
 * costs the master this and one answer, not max_output_bytes.  Pushes to
 * subscribers are not requests: max_output_bytes still bounds them. */
#define OUT_PAUSE (256 << 10)

struct client {
	struct control *ctl;
	uint64_t id;
	int fd;
	uid_t uid;
	pid_t pid;
	ev_io rio, wio;
	struct ft_buf in, out;
	size_t out_off;			/* written bytes at the head of out */
	long waiting;			/* batch id waited for, 0 for none */
	double last;			/* last read or write (monotonic) */
	int closing;			/* close once out is written */
	int held;			/* an answer is owed: lines wait */
	int dropped_big;		/* dropped with its answers unread */
	/* A body being read: want bytes into body, then done(body_ctx). */
	size_t want;
	struct ft_buf body;
	control_body_fn done;
	void *body_ctx;
	char *body_name;
	uint64_t body_tag;		/* the caller's word on the body */
	ev_timer more;			/* lines left for the next turn */
	struct client *next;
};

struct control {
	struct ev_loop *loop;
	struct control_ops ops;
	struct control_limits lim;
	int fd;
	int reserve;			/* a spare descriptor for EMFILE */
	ev_io io;
	ev_timer retry;			/* accept again after EMFILE */
	char *path;
	struct client *clients;
	int nclients;
	uint64_t last_id;
	uint64_t dropped;
};

static void client_close(struct client *c);
static void consume(struct client *c);
static void too_long(struct client *c);

/* Has C more answers unread than OUT_PAUSE? */
static int
backlogged(const struct client *c)
{
	return c->out.len - c->out_off > OUT_PAUSE;
}

/* ---- answers ---- */

void
control_send(struct client *c, json_t *answer)
{
	char *text;

	if (c->closing)
		return;		/* it is being dropped */
	json_object_set_new(answer, "v", json_integer(FT_CTL_VERSION));
	text = json_dumps(answer, JSON_COMPACT);
	ft_buf_adds(&c->out, text ? text : "{\"ok\":false}");
	ft_buf_add(&c->out, "\n", 1);
	free(text);
	if (c->out.len - c->out_off > c->ctl->lim.max_output) {
		/* It does not read its answers: it goes, before it costs
		 * the master its memory. */
		log_warnx("control: client of uid %u dropped: more than %zu "
			  "bytes of answers unread", (unsigned)c->uid,
			  c->ctl->lim.max_output);
		c->ctl->dropped++;
		ft_buf_free(&c->out);
		c->out_off = 0;
		c->dropped_big = 1;
		c->closing = 1;
		ev_io_stop(c->ctl->loop, &c->rio);
		shutdown(c->fd, SHUT_RDWR);
	}
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
	return c->out.len - c->out_off;
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

uint64_t
control_ndropped(const struct control *ctl)
{
	return ctl ? ctl->dropped : 0;
}

void *
control_owner(const struct client *c)
{
	return c->ctl->ops.ctx;
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
		if (c->id == id && !c->closing)
			return c;
	return NULL;
}

uid_t
control_peer_uid(const struct client *c)
{
	return c->uid;
}

pid_t
control_peer_pid(const struct client *c)
{
	return c->pid;
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
	if (!c->closing && !ev_is_active(&c->rio))
		ev_io_start(c->ctl->loop, &c->rio);
	consume(c);
}

void
control_end(struct client *c)
{
	if (c->closing)
		return;
	c->closing = 1;
	c->in.len = 0;
	ev_io_stop(c->ctl->loop, &c->rio);
	ev_timer_stop(c->ctl->loop, &c->more);
	ev_io_start(c->ctl->loop, &c->wio);
}

void
control_read_body(struct client *c, size_t len, const char *name,
		  control_body_fn done, void *ctx)
{
	control_read_body_tagged(c, len, name, done, ctx, 0);
}

void
control_read_body_tagged(struct client *c, size_t len, const char *name,
			 control_body_fn done, void *ctx, uint64_t tag)
{
	c->body_tag = tag;
	c->want = len;
	c->done = done;
	c->body_ctx = ctx;
	free(c->body_name);
	c->body_name = ft_strdup(name);
	ft_buf_free(&c->body);
	ft_buf_reserve(&c->body, len + 1);
}

uint64_t
control_body_tag(const struct client *c)
{
	return c->body_tag;
}

/* ---- reading ---- */

/* The body is whole: hand it over. */
static void
body_done(struct client *c)
{
	char *data = c->body.data, *name = c->body_name;
	size_t len = c->body.len;

	c->want = 0;
	c->body.data = NULL;
	c->body.len = c->body.cap = 0;
	c->body_name = NULL;
	c->done(c->body_ctx, c, name, data, len);
	free(name);
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
	if (c->body.len == c->want)
		body_done(c);
}

/* Handle the whole lines (and bodies) C's input holds, LINES_PER_TURN at
 * most: the rest in the next turn of the loop. */
static void
consume(struct client *c)
{
	char *nl;
	int lines = 0;

	while (!c->closing) {
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
		if ((size_t)(nl - c->in.data) > c->ctl->lim.max_line) {
			too_long(c);
			return;
		}
		if (backlogged(c)) {
			/* on_writable serves it again once it has read. */
			ev_io_stop(c->ctl->loop, &c->rio);
			return;
		}
		if (++lines > LINES_PER_TURN) {
			ev_timer_start(c->ctl->loop, &c->more);
			return;
		}
		c->ctl->ops.request(c->ctl->ops.ctx, c, c->in.data,
				    (size_t)(nl - c->in.data));
		c->in.len -= (size_t)(nl - c->in.data) + 1;
		memmove(c->in.data, nl + 1, c->in.len);
	}
}

static void
on_more(struct ev_loop *loop, ev_timer *t, int revents)
{
	struct client *c = t->data;

	(void)revents;
	consume(c);
	if (!c->closing && !c->held && c->in.len <= READ_AHEAD_MAX &&
	    !backlogged(c) && !ev_is_active(&c->rio))
		ev_io_start(loop, &c->rio);
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
	ft_buf_reserve(&c->in, READ_CHUNK);
	r = read(c->fd, c->in.data + c->in.len, READ_CHUNK);
	if (r > 0)
		c->in.len += (size_t)r;
	return r;
}

/* A line past the limit: say so and close (a batch goes as a body).
 * The client's exit status for it is 2, as for any input past a bound. */
static void
too_long(struct client *c)
{
	char msg[200];
	json_t *ans;

	snprintf(msg, sizeof(msg), "request too long: more than %zu bytes in "
		 "a line (control.max_request_bytes; a batch goes as the bytes "
		 "after a short line)", c->ctl->lim.max_line);
	ans = json_pack("{s:b, s:s, s:i}", "ok", 0, "error", msg, "exit", 2);
	control_send(c, ans);
	json_decref(ans);
	control_end(c);
}

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
	c->last = ft_now();
	if (c->want && c->body.len == c->want)
		body_done(c);
	consume(c);
	if (!c->closing && !c->want && c->in.len > c->ctl->lim.max_line &&
	    memchr(c->in.data, '\n', c->in.len) == NULL)
		too_long(c);
	/* Held with lines waiting: read no more until they are served. */
	if (c->held && c->in.len > c->ctl->lim.max_line)
		ev_io_stop(loop, &c->rio);
	/* Lines wait for the next turn: read no more past the bound. */
	if (ev_is_active(&c->more) && c->in.len > READ_AHEAD_MAX)
		ev_io_stop(loop, &c->rio);
}

static void
on_writable(struct ev_loop *loop, ev_io *io, int revents)
{
	struct client *c = io->data;
	ssize_t w;

	(void)revents;
	w = write(c->fd, c->out.data + c->out_off, c->out.len - c->out_off);
	if (w == -1 && (errno == EINTR || errno == EAGAIN))
		return;
	if (w <= 0) {
		client_close(c);
		return;
	}
	c->last = ft_now();
	c->out_off += (size_t)w;
	if (c->out_off < c->out.len) {
		/* Keep the buffer from growing with a slow reader. */
		if (c->out_off > READ_CHUNK) {
			memmove(c->out.data, c->out.data + c->out_off,
				c->out.len - c->out_off);
			c->out.len -= c->out_off;
			c->out_off = 0;
		}
		return;
	}
	c->out.len = c->out_off = 0;
	ev_io_stop(loop, &c->wio);
	if (c->closing) {
		client_close(c);
		return;
	}
	if (!ev_is_active(&c->rio))
		ev_io_start(loop, &c->rio);
	consume(c);		/* the lines a backlog held back */
}

/* ---- clients ---- */

static void
client_close(struct client *c)
{
	struct control *ctl = c->ctl;
	struct client **p;
	int big = c->in.cap + c->out.cap + c->body.cap >= TRIM_AFTER ||
		  c->dropped_big;

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
	free(c->body_name);
	ev_timer_stop(ctl->loop, &c->more);
	free(c);
	if (big)
		malloc_trim(0);
	if (ctl->fd >= 0 && !ev_is_active(&ctl->io))
		ev_io_start(ctl->loop, &ctl->io);
}

void
control_tick(struct control *ctl, double now)
{
	struct client *c, *next;

	for (c = ctl ? ctl->clients : NULL; c; c = next) {
		next = c->next;
		/* Waiting for a batch or a batch's bytes is not idleness. */
		if (c->held || c->waiting || c->out.len > c->out_off)
			continue;
		if (now - c->last > ctl->lim.idle_timeout) {
			log_info("control: client of uid %u idle for %.0f s: "
				 "closed", (unsigned)c->uid, now - c->last);
			client_close(c);
		}
	}
}

/* Clients of UID now. */
static int
count_uid(const struct control *ctl, uid_t uid)
{
	const struct client *c;
	int n = 0;

	for (c = ctl->clients; c; c = c->next)
		n += c->uid == uid;
	return n;
}

/* Refuse the connection FD with one line, then close it. */
static void
refuse(int fd, const char *why)
{
	char line[256];
	int n = snprintf(line, sizeof(line), "{\"ok\":false,\"error\":\"%s\","
			 "\"v\":%d}\n", why, FT_CTL_VERSION);

	/* A client already gone is told nothing. */
	if (n > 0)
		(void)!write(fd, line, (size_t)n);
	close(fd);
}

/* Out of descriptors: give the reserve to the newcomer, tell it and close
 * it, take the reserve back; accept again a moment later. */
static void
starved(struct control *ctl)
{
	int fd;

	if (ctl->reserve >= 0) {
		close(ctl->reserve);
		ctl->reserve = -1;
		fd = accept4(ctl->fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd >= 0)
			refuse(fd, "the master is out of file descriptors");
		ctl->reserve = open("/dev/null", O_RDONLY | O_CLOEXEC);
	}
	log_warnx("control: out of file descriptors");
	ctl->dropped++;
	ev_io_stop(ctl->loop, &ctl->io);
	ev_timer_start(ctl->loop, &ctl->retry);
}

static void
on_retry(struct ev_loop *loop, ev_timer *t, int revents)
{
	struct control *ctl = t->data;

	(void)revents;
	if (ctl->fd >= 0)
		ev_io_start(loop, &ctl->io);
}

/* A new client on FD, of UID (process PID, 0 when unknown): set up, or
 * NULL when refused past the caps. */
static struct client *
welcome(struct control *ctl, int fd, uid_t uid, pid_t pid)
{
	struct client *c;

	if (ctl->nclients >= ctl->lim.max_clients) {
		ctl->dropped++;
		refuse(fd, "too many clients");
		return NULL;
	}
	/* Root and the master's user are bounded by the total alone. */
	if (uid != 0 && uid != getuid() &&
	    count_uid(ctl, uid) >= ctl->lim.max_per_uid) {
		ctl->dropped++;
		refuse(fd, "too many clients of this user");
		return NULL;
	}
	c = ft_calloc(1, sizeof(*c));
	c->ctl = ctl;
	c->id = ++ctl->last_id;
	c->fd = fd;
	c->uid = uid;
	c->pid = pid;
	c->last = ft_now();
	ev_io_init(&c->rio, on_readable, fd, EV_READ);
	ev_io_init(&c->wio, on_writable, fd, EV_WRITE);
	ev_timer_init(&c->more, on_more, 0, 0);
	c->rio.data = c->wio.data = c->more.data = c;
	ev_io_start(ctl->loop, &c->rio);
	c->next = ctl->clients;
	ctl->clients = c;
	ctl->nclients++;
	return c;
}

int
control_adopt(struct control *ctl, int fd, uid_t uid, const char *data,
	      size_t len)
{
	struct client *c = welcome(ctl, fd, uid, 0);

	if (c == NULL)
		return -1;
	if (len) {
		ft_buf_add(&c->in, data, len);
		consume(c);
	}
	return 0;
}

static void
on_accept(struct ev_loop *loop, ev_io *io, int revents)
{
	struct control *ctl = io->data;
	struct ucred cred;
	socklen_t len = sizeof(cred);
	int fd, k;

	(void)loop, (void)revents;
	for (k = 0; k < 64; k++) {
		fd = accept4(ctl->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd == -1) {
			if (errno == EMFILE || errno == ENFILE)
				starved(ctl);
			return;
		}
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == -1) {
			close(fd);
			continue;
		}
		welcome(ctl, fd, cred.uid, cred.pid);
	}
}

/* ---- the socket ---- */

/* Give the socket its mode and group.  0, or -1 with ERR. */
static int
socket_access(struct control *ctl, char *err, size_t n)
{
	struct group *gr;

	if (ctl->lim.group) {
		gr = getgrnam(ctl->lim.group);
		if (gr == NULL || chown(ctl->path, (uid_t)-1, gr->gr_gid) == -1) {
			snprintf(err, n, "%s: cannot give it group %s: %s",
				 ctl->path, ctl->lim.group,
				 gr ? strerror(errno) : "no such group");
			return -1;
		}
	}
	if (chmod(ctl->path, ctl->lim.mode) == -1) {
		snprintf(err, n, "%s: %s", ctl->path, strerror(errno));
		return -1;
	}
	return 0;
}

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
	    listen(ctl->fd, 256) == -1) {
		umask(old);
		snprintf(err, n, "%s: %s", ctl->path, strerror(errno));
		return -1;
	}
	umask(old);
	return socket_access(ctl, err, n);
}

struct control *
control_open(struct ev_loop *loop, const char *path,
	     const struct control_ops *ops, const struct control_limits *lim,
	     char *err, size_t n)
{
	struct control *ctl = ft_calloc(1, sizeof(*ctl));

	ctl->loop = loop;
	ctl->ops = *ops;
	ctl->lim = *lim;
	ctl->fd = -1;
	ctl->path = ft_strdup(path);
	ctl->reserve = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (listen_at(ctl, err, n) == -1) {
		if (ctl->fd >= 0)
			close(ctl->fd);
		if (ctl->reserve >= 0)
			close(ctl->reserve);
		free(ctl->path);
		free(ctl);
		return NULL;
	}
	ev_io_init(&ctl->io, on_accept, ctl->fd, EV_READ);
	ctl->io.data = ctl;
	ev_timer_init(&ctl->retry, on_retry, 0.1, 0);
	ctl->retry.data = ctl;
	ev_io_start(loop, &ctl->io);
	return ctl;
}

void
control_close(struct control *ctl)
{
	if (ctl == NULL)
		return;
	ev_io_stop(ctl->loop, &ctl->io);
	ev_timer_stop(ctl->loop, &ctl->retry);
	if (ctl->fd >= 0)
		close(ctl->fd);
	ctl->fd = -1;
	while (ctl->clients) {
		struct client *c = ctl->clients;

		/* Push out what is pending (stop's answer) before closing. */
		if (c->out.len > c->out_off)
			ft_write_all(c->fd, c->out.data + c->out_off,
				     c->out.len - c->out_off);
		client_close(c);
	}
	if (ctl->reserve >= 0)
		close(ctl->reserve);
	unlink(ctl->path);
	free(ctl->path);
	free(ctl);
}

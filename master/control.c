/*
 * control: the Unix socket the ftfarm CLI talks to.
 *
 * One JSON request per line, one JSON answer per line (see common/ctl.h).
 * Only the master's own user (or root) may connect.  A bad request gets an
 * error answer; it never disturbs the master.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "batch.h"
#include "ctl.h"
#include "log.h"
#include "master.h"

/* Clients served at once.  Each `ftfarm wait` holds one for as long as
 * its batch runs; at the cap, the oldest client that never asked anything
 * makes room for a newcomer. */
#define MAX_CLIENTS 1024

struct client {
	struct master *m;
	int fd;
	ev_io rio, wio;
	struct ft_buf in, out;
	long wait_batch;		/* batch id waited for, 0 for none */
	double since;			/* connected at (monotonic) */
	int spoke;			/* has sent a whole request */
	int closing;			/* close once out is written */
	struct client *next;
};

struct control {
	int fd;
	ev_io io;
	char *path;
	struct client *clients;
	int nclients;
};

/* A command handler: 0 with *ANS set, -1 with ERR set, or 1 when the
 * answer comes later (wait). */
typedef int (*cmd_fn)(struct client *c, json_t *req, json_t **ans, char *err,
		      size_t n);

static void client_close(struct client *c);

/* ---- answers ---- */

static void
client_send(struct client *c, json_t *ans)
{
	char *text = json_dumps(ans, JSON_COMPACT);

	ft_buf_adds(&c->out, text ? text : "{\"ok\":false}");
	ft_buf_add(&c->out, "\n", 1);
	free(text);
	ev_io_start(c->m->loop, &c->wio);
}

static void
client_error(struct client *c, const char *msg)
{
	json_t *ans = json_pack("{s:b, s:s}", "ok", 0, "error", msg);

	client_send(c, ans);
	json_decref(ans);
}

/* ---- commands ---- */

static json_t *
workers_json(struct master *m)
{
	json_t *a = json_array();
	int i;

	for (i = 0; i < m->nworkers; i++) {
		struct worker *w = &m->workers[i];

		json_array_append_new(a, json_pack(
			"{s:i, s:s, s:s, s:i, s:s, s:i, s:I, s:i}",
			"id", w->slot, "node", m->cfg.nodes[w->node].name,
			"host", w->host[0] ? w->host : m->cfg.nodes[w->node].host,
			"pid", (int)w->pid, "state", registry_state_name(w->state),
			"respawns", w->respawns, "tasks_done",
			(json_int_t)w->tasks_done,
			"inflight", sched_inflight(m->sched, w->slot)));
	}
	return a;
}

static json_t *
nodes_json(struct master *m)
{
	json_t *a = json_array();
	int i;

	for (i = 0; i < m->cfg.nnodes; i++)
		json_array_append_new(a, json_pack(
			"{s:s, s:s, s:s, s:i, s:i}",
			"name", m->cfg.nodes[i].name, "host", m->cfg.nodes[i].host,
			"state", nodes_state_name(m->nodes[i].state),
			"reboots", m->nodes[i].reboots,
			"workers", m->cfg.nodes[i].workers));
	return a;
}

/* status: the cluster, its workers, nodes and batches. */
static int
cmd_status(struct client *c, json_t *req, json_t **ans, char *err, size_t n)
{
	struct master *m = c->m;
	json_t *batches = json_array();
	int i;

	(void)req, (void)err, (void)n;
	for (i = 0; i < m->nbatches; i++)
		json_array_append_new(batches, results_batch_json(m->batches[i]));
	*ans = json_pack("{s:b, s:s, s:s, s:s, s:f, s:I, s:I, s:o, s:o, s:o, "
			 "s:{s:I, s:I, s:I, s:I, s:I}}",
		"ok", 1, "cluster", m->cfg.name,
		"launch", m->static_world ? "static" : "dynamic",
		"mpi", m->mpi_version, "uptime", ft_now() - m->started,
		"queued", (json_int_t)sched_queued(m->sched),
		"open", (json_int_t)sched_open(m->sched),
		"workers", workers_json(m), "nodes", nodes_json(m),
		"batches", batches, "counters",
		"msgs_in", (json_int_t)m->msgs_in,
		"msgs_out", (json_int_t)m->msgs_out,
		"results_in", (json_int_t)m->results_in,
		"duplicates", (json_int_t)m->duplicates,
		"bad_msgs", (json_int_t)m->bad_msgs);
	return 0;
}

/* submit {"batch": {...}}: queue a batch, answer its id. */
static int
cmd_submit(struct client *c, json_t *req, json_t **ans, char *err, size_t n)
{
	json_t *batch = json_object_get(req, "batch");
	struct jerr jerr;
	long id;

	if (c->m->stopping) {
		snprintf(err, n, "the master is stopping");
		return -1;
	}
	if (batch == NULL || !json_is_object(batch)) {
		snprintf(err, n, "submit needs \"batch\", an object");
		return -1;
	}
	if (ft_batch_check(batch, &c->m->plugins, &jerr) == -1) {
		jcheck_format(&jerr, "batch", NULL, err, n);
		return -1;
	}
	id = results_submit(c->m, batch, err, n);
	if (id < 0)
		return -1;
	*ans = json_pack("{s:b, s:I}", "ok", 1, "batch", (json_int_t)id);
	return 0;
}

/* wait {"batch": ID}: answer when the batch has finished. */
static int
cmd_wait(struct client *c, json_t *req, json_t **ans, char *err, size_t n)
{
	json_t *id = json_object_get(req, "batch");
	struct batch *b;

	if (!json_is_integer(id) ||
	    (b = results_find(c->m, (long)json_integer_value(id))) == NULL) {
		snprintf(err, n, "wait needs \"batch\", the id of a batch");
		return -1;
	}
	if (results_finished(b)) {
		*ans = json_pack("{s:b, s:o}", "ok", 1, "batch",
				 results_batch_json(b));
		return 0;
	}
	c->wait_batch = (long)json_integer_value(id);
	return 1;
}

/* stop: stop the workers, then the master. */
static int
cmd_stop(struct client *c, json_t *req, json_t **ans, char *err, size_t n)
{
	(void)req, (void)err, (void)n;
	if (!c->m->stopping) {
		log_info("stop requested");
		c->m->stopping = 1;
		loop_kick(c->m);
	}
	*ans = json_pack("{s:b}", "ok", 1);
	return 0;
}

/* log_level {"level": "debug"|"info"|"warn"} */
static int
cmd_log_level(struct client *c, json_t *req, json_t **ans, char *err, size_t n)
{
	const char *name = json_string_value(json_object_get(req, "level"));
	int level = name ? log_level_parse(name) : -1;

	(void)c;
	if (level < 0) {
		snprintf(err, n, "log_level needs \"level\": debug, info or warn");
		return -1;
	}
	log_set_level((enum log_level)level);
	*ans = json_pack("{s:b}", "ok", 1);
	return 0;
}

static const struct {
	const char *name;
	cmd_fn fn;
} commands[] = {
	{ "status", cmd_status },
	{ "submit", cmd_submit },
	{ "wait", cmd_wait },
	{ "stop", cmd_stop },
	{ "log_level", cmd_log_level },
};

/* Answer one request line. */
static void
handle_line(struct client *c, const char *line, size_t len)
{
	json_error_t jerr;
	json_t *req = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
	json_t *ans = NULL, *v;
	const char *cmd;
	char err[512] = "";
	size_t i;
	int rc = -1;

	if (req == NULL || !json_is_object(req)) {
		client_error(c, "malformed request: not a JSON object");
		goto out;
	}
	v = json_object_get(req, "v");
	if (!json_is_integer(v) || json_integer_value(v) != FT_CTL_VERSION) {
		client_error(c, "incompatible ftfarm and ftfarm-master versions");
		goto out;
	}
	cmd = json_string_value(json_object_get(req, "cmd"));
	for (i = 0; cmd && i < FT_ARRAY_LEN(commands); i++)
		if (strcmp(cmd, commands[i].name) == 0)
			break;
	if (cmd == NULL || i == FT_ARRAY_LEN(commands)) {
		client_error(c, "unknown command");
		goto out;
	}
	rc = commands[i].fn(c, req, &ans, err, sizeof(err));
	if (rc == -1)
		client_error(c, err);
	else if (rc == 0)
		client_send(c, ans);
out:
	json_decref(ans);
	json_decref(req);
}

/* ---- the socket ---- */

static void
on_readable(struct ev_loop *loop, ev_io *io, int revents)
{
	struct client *c = io->data;
	char *nl;
	ssize_t r;

	(void)loop, (void)revents;
	ft_buf_reserve(&c->in, 65536);
	r = read(c->fd, c->in.data + c->in.len, c->in.cap - c->in.len - 1);
	if (r == -1 && (errno == EINTR || errno == EAGAIN))
		return;
	if (r <= 0) {
		client_close(c);
		return;
	}
	c->in.len += (size_t)r;
	c->in.data[c->in.len] = '\0';
	while ((nl = memchr(c->in.data, '\n', c->in.len)) != NULL) {
		size_t len = (size_t)(nl - c->in.data);

		c->spoke = 1;
		handle_line(c, c->in.data, len);
		memmove(c->in.data, nl + 1, c->in.len - len - 1);
		c->in.len -= len + 1;
	}
	if (c->in.len > FT_CTL_MAX_LINE) {
		client_error(c, "request too long");
		c->closing = 1;
		ev_io_stop(c->m->loop, &c->rio);
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
	struct master *m = c->m;
	struct control *ctl = m->control;
	struct client **p;

	for (p = &ctl->clients; *p; p = &(*p)->next)
		if (*p == c) {
			*p = c->next;
			break;
		}
	ctl->nclients--;
	ev_io_stop(m->loop, &c->rio);
	ev_io_stop(m->loop, &c->wio);
	close(c->fd);
	ft_buf_free(&c->in);
	ft_buf_free(&c->out);
	free(c);
	if (ctl->fd >= 0)
		ev_io_start(m->loop, &ctl->io);	/* if EMFILE had paused it */
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
	struct master *m = io->data;
	struct control *ctl = m->control;
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
	c->m = m;
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

int
control_open(struct master *m, char *err, size_t n)
{
	struct control *ctl = ft_calloc(1, sizeof(*ctl));
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	mode_t old;

	m->control = ctl;
	ctl->fd = -1;
	ctl->path = ctl_socket_path(m->cfg.state_dir);
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
	ev_io_init(&ctl->io, on_accept, ctl->fd, EV_READ);
	ctl->io.data = m;
	ev_io_start(m->loop, &ctl->io);
	return 0;
}

void
control_close(struct master *m)
{
	struct control *ctl = m->control;

	if (ctl == NULL)
		return;
	ev_io_stop(m->loop, &ctl->io);
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
	m->control = NULL;
}

void
control_batch_done(struct master *m, struct batch *b)
{
	struct client *c;
	json_t *ans = NULL;

	for (c = m->control ? m->control->clients : NULL; c; c = c->next) {
		if (c->wait_batch == 0 ||
		    results_find(m, c->wait_batch) != b)
			continue;
		if (ans == NULL)
			ans = json_pack("{s:b, s:o}", "ok", 1, "batch",
					results_batch_json(b));
		c->wait_batch = 0;
		client_send(c, ans);
	}
	json_decref(ans);
}

/* ctl: the control socket between the ftfarm CLI and the master. */
#include "ctl.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/sendfile.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "util.h"

/* ---- the command table ---- */

static const struct jfield ctl_no_fields[] = {
	{ "v", JT_INT, 1 },
	{ "cmd", JT_STRING, 1 },
	{ NULL, 0, 0 },
};

static const struct jfield ctl_submit_fields[] = {
	{ "v", JT_INT, 1 },
	{ "cmd", JT_STRING, 1 },
	{ "batch", JT_OBJECT, 0 },	/* inline, or: */
	{ "bytes", JT_INT, 0 },		/* a body of so many bytes */
	{ "file", JT_STRING, 0 },	/* its name, for messages */
	{ "token", JT_STRING, 0 },	/* the client's name for this submission:
					 * sent again after a lost answer, it
					 * gets the same batch id */
	{ "after", JT_ARRAY, 0 },	/* batches it runs after (all ok) */
	{ "after_any", JT_ARRAY, 0 },	/* ... or once they end */
	{ NULL, 0, 0 },
};

static const struct jfield ctl_wait_fields[] = {
	{ "v", JT_INT, 1 },
	{ "cmd", JT_STRING, 1 },
	{ "batch", JT_INT, 1 },
	{ NULL, 0, 0 },
};

static const struct jfield ctl_log_level_fields[] = {
	{ "v", JT_INT, 1 },
	{ "cmd", JT_STRING, 1 },
	{ "level", JT_STRING, 1 },
	{ NULL, 0, 0 },
};

static const struct jfield ctl_node_fields[] = {
	{ "v", JT_INT, 1 },
	{ "cmd", JT_STRING, 1 },
	{ "node", JT_STRING, 1 },
	{ NULL, 0, 0 },
};

static const struct jfield ctl_leave_fields[] = {
	{ "v", JT_INT, 1 },
	{ "cmd", JT_STRING, 1 },
	{ "node", JT_STRING, 1 },
	{ "grace", JT_NUMBER, 0 },	/* seconds its running tasks go on */
	{ NULL, 0, 0 },
};

static const struct jfield ctl_reboot_fields[] = {
	{ "v", JT_INT, 1 },
	{ "cmd", JT_STRING, 1 },
	{ "node", JT_STRING, 1 },	/* a node's name, or "all" */
	{ "force", JT_BOOL, 0 },	/* skip the drain */
	{ NULL, 0, 0 },
};

static const struct jfield ctl_subscribe_fields[] = {
	{ "v", JT_INT, 1 },
	{ "cmd", JT_STRING, 1 },
	{ "events", JT_BOOL, 0 },		/* every event */
	{ "task_events", JT_BOOL, 0 },		/* false: but per-task ones */
	{ "types", JT_STRING_ARRAY, 0 },	/* or those of these types */
	{ "since", JT_NUMBER, 0 },		/* past ones since (epoch s) */
	{ "tail", JT_INT, 0 },			/* or the last so many */
	{ "status", JT_BOOL, 0 },		/* status pushes */
	{ "batch", JT_INT, 0 },			/* this batch's row */
	{ "results", JT_BOOL, 0 },		/* and its result lines */
	{ "offset", JT_INT, 0 },		/* from this byte on */
	{ NULL, 0, 0 },
};

static const struct jfield ctl_add_fields[] = {
	{ "v", JT_INT, 1 },
	{ "cmd", JT_STRING, 1 },
	{ "batch", JT_INT, 1 },
	{ "first", JT_INT, 1 },		/* the index of its first task */
	{ "bytes", JT_INT, 1 },		/* its body: {"tasks": [...]} */
	{ NULL, 0, 0 },
};

static const struct ctl_command commands[] = {
	{ CTL_INVALID, NULL, 0, NULL },
#define CTL_ROW(E, name, role, fields) { CTL_##E, name, role, fields },
	CTL_COMMANDS(CTL_ROW)
#undef CTL_ROW
};

const struct ctl_command *
ctl_command(enum ctl_cmd cmd)
{
	return cmd > CTL_INVALID && cmd < CTL_NCMDS ? &commands[cmd] : NULL;
}

const struct ctl_command *
ctl_command_find(const char *name)
{
	int i;

	for (i = CTL_INVALID + 1; name && i < CTL_NCMDS; i++)
		if (strcmp(commands[i].name, name) == 0)
			return &commands[i];
	return NULL;
}

const struct ctl_command *
ctl_check_request(const json_t *req, char *err, size_t n)
{
	const struct ctl_command *c;
	struct jerr jerr;

	c = ctl_command_find(json_string_value(json_object_get(req, "cmd")));
	if (c == NULL) {
		ft_snprintf(err, n, "unknown command");
		return NULL;
	}
	if (jcheck_object(req, "", c->fields, &jerr) == -1) {
		ft_snprintf(err, n, "%s: %s%s%s", c->name, jerr.path,
			    jerr.path[0] ? ": " : "", jerr.msg);
		return NULL;
	}
	return c;
}

const struct ctl_command *
ctl_parse_request(const char *line, size_t len, json_t **req, char *err,
		  size_t n)
{
	const struct ctl_command *c;
	json_error_t jerr;
	json_t *v;

	*req = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
	if (*req == NULL || !json_is_object(*req)) {
		ft_snprintf(err, n, "malformed request: not a JSON object");
		return NULL;
	}
	v = json_object_get(*req, "v");
	if (!json_is_integer(v) || json_integer_value(v) != FT_CTL_VERSION) {
		ft_snprintf(err, n, "incompatible ftfarm and ftfarm-master "
			    "versions: the request speaks control protocol "
			    "%lld, this master %d", json_is_integer(v) ?
			    (long long)json_integer_value(v) : 0LL,
			    FT_CTL_VERSION);
		return NULL;
	}
	c = ctl_check_request(*req, err, n);
	return c;
}

json_t *
ctl_request_new(enum ctl_cmd cmd)
{
	return json_pack("{s:s}", "cmd", ctl_command(cmd)->name);
}

/* ---- the status answer's columns ---- */

#define CTL_COL_ROW(E, key, title, width, type) { key, title, width, type },
const struct ctl_col ctl_worker_cols[CTL_W_NCOLS] = {
	CTL_WORKER_COLS(CTL_COL_ROW)
};
const struct ctl_col ctl_node_cols[CTL_N_NCOLS] = {
	CTL_NODE_COLS(CTL_COL_ROW)
};
const struct ctl_col ctl_batch_cols[CTL_B_NCOLS] = {
	CTL_BATCH_COLS(CTL_COL_ROW)
};
#undef CTL_COL_ROW

#define CTL_KEY_ROW(E, key, type) key,
const char *const ctl_status_keys[CTL_S_NKEYS] = {
	CTL_STATUS_KEYS(CTL_KEY_ROW)
};
#undef CTL_KEY_ROW

void
ctl_row_int(json_t *row, const struct ctl_col *col, long long v)
{
	json_object_set_new(row, col->key, col->type == JT_NUMBER ?
			    json_real((double)v) : json_integer(v));
}

void
ctl_row_num(json_t *row, const struct ctl_col *col, double v)
{
	json_object_set_new(row, col->key, json_real(v));
}

void
ctl_row_str(json_t *row, const struct ctl_col *col, const char *v)
{
	json_object_set_new(row, col->key, json_string(v ? v : ""));
}

/* ---- the client side ---- */

char *
ctl_socket_path(const char *state_dir)
{
	return ft_asprintf("%s/control.sock", state_dir);
}

/* Another way to the master when its socket cannot be used (ctl.h). */
static ctl_elsewhere_fn elsewhere;
static void *elsewhere_ctx;

void
ctl_set_elsewhere(ctl_elsewhere_fn fn, void *ctx)
{
	elsewhere = fn;
	elsewhere_ctx = ctx;
}

/* May the master be on another host when connect() failed with E?  (Its
 * socket file is there, as a shared file system shows it, but cannot be
 * connected to from here.  No file: no master runs.) */
static int
maybe_elsewhere(int e)
{
	return e == ECONNREFUSED || e == EACCES || e == EPERM ||
	       e == ENOTSOCK;
}

int
ctl_connect(const char *state_dir, char *err, size_t n)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char *path = ctl_socket_path(state_dir);
	int fd = -1;

	if (ft_snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path) < 0) {
		ft_snprintf(err, n, "%s: path too long for a socket", path);
		goto out;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd == -1 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == -1) {
		int e = errno;

		ft_snprintf(err, n, "no master is running for %s (%s)",
			    state_dir, strerror(e));
		if (fd != -1)
			close(fd);
		fd = -1;
		if (elsewhere && maybe_elsewhere(e))
			fd = elsewhere(elsewhere_ctx, state_dir, err, n);
	}
out:
	free(path);
	return fd;
}

/* Read one line from FD into B (without the newline).  0, or -1. */
static int
read_line(int fd, struct ft_buf *b, double timeout, char *err, size_t n)
{
	double end = ft_now() + timeout;

	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		int ms = timeout > 0 ? (int)((end - ft_now()) * 1000) : -1;
		ssize_t r;
		char *nl;

		if (timeout > 0 && ms <= 0) {
			ft_snprintf(err, n, "the master did not answer in %.0f s",
				    timeout);
			return -1;
		}
		r = poll(&pfd, 1, ms);
		if (r == -1 && errno != EINTR)
			return ft_snprintf(err, n, "poll: %s", strerror(errno)), -1;
		if (r <= 0)
			continue;	/* the deadline is checked above */
		ft_buf_reserve(b, 65536);
		r = read(fd, b->data + b->len, b->cap - b->len - 1);
		if (r == -1 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (r <= 0) {
			ft_snprintf(err, n, "the master closed the connection");
			return -1;
		}
		b->len += (size_t)r;
		b->data[b->len] = '\0';
		nl = memchr(b->data, '\n', b->len);
		if (nl) {
			*nl = '\0';
			b->len = (size_t)(nl - b->data);
			return 0;
		}
	}
}

json_t *
ctl_call(int fd, json_t *req, double timeout, char *err, size_t n)
{
	return ctl_call_body(fd, req, NULL, timeout, err, n);
}

/*
 * Sending a request.  The master may answer before it has read all of a
 * request (a line or a body past its bounds, a refused submission) and
 * close the connection: the client must not die of SIGPIPE writing the
 * rest, and must read that answer.  So the request goes out on the
 * socket made nonblocking, never raising SIGPIPE, while poll also
 * watches for the master's first bytes.
 */

/* What is left to send of one request. */
struct sender {
	int fd;
	const char *line;		/* the request line, newline included */
	size_t line_len, line_off;
	const struct ctl_body *body;	/* or NULL */
	size_t body_off;
	char chunk[65536];		/* file bytes read, when sendfile fails */
	size_t chunk_len, chunk_off;
	int plain;			/* no sendfile: pread and send */
};

/* send(2) of what is left of BUF (LEN bytes, *OFF sent) without SIGPIPE.
 * 0 when all is sent, 1 when the socket is full, -1 with errno. */
static int
send_buf(int fd, const char *buf, size_t len, size_t *off)
{
	while (*off < len) {
		ssize_t w = send(fd, buf + *off, len - *off, MSG_NOSIGNAL);

		if (w == -1 && errno == EINTR)
			continue;
		if (w == -1)
			return errno == EAGAIN ? 1 : -1;
		*off += (size_t)w;
	}
	return 0;
}

/* sendfile(2) of COUNT bytes of FROM at *OFF to the socket TO, with
 * SIGPIPE held back: a SIGPIPE it raises is taken, unless one was
 * pending already (it may raise one and still return the bytes it sent
 * before the peer closed).  As sendfile. */
static ssize_t
sendfile_quiet(int to, int from, off_t *off, size_t count)
{
	sigset_t pipe, old, pending;
	struct timespec zero = { 0, 0 };
	int had, e;
	ssize_t w;

	sigemptyset(&pipe);
	sigaddset(&pipe, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe, &old);
	sigpending(&pending);
	had = sigismember(&pending, SIGPIPE);
	w = sendfile(to, from, off, count);
	e = errno;
	sigpending(&pending);
	if (!had && sigismember(&pending, SIGPIPE))
		while (sigtimedwait(&pipe, NULL, &zero) == -1 && errno == EINTR)
			;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	errno = e;
	return w;
}

/* Read S's next file bytes into its chunk: 1 with some, 0 at the body's
 * end, -1 with errno (ENODATA: the file ended before its length). */
static int
fill_chunk(struct sender *s)
{
	size_t want = s->body->len - s->body_off;
	ssize_t r;

	if (want == 0)
		return 0;
	if (want > sizeof(s->chunk))
		want = sizeof(s->chunk);
	do
		r = pread(s->body->fd, s->chunk, want, (off_t)s->body_off);
	while (r == -1 && errno == EINTR);
	if (r <= 0) {
		if (r == 0)
			errno = ENODATA;
		return -1;
	}
	s->chunk_len = (size_t)r;
	s->chunk_off = 0;
	s->body_off += (size_t)r;
	return 1;
}

/* Send what the socket takes of S's file body by pread and send: as
 * send_file. */
static int
send_plain(struct sender *s)
{
	int rc;

	for (;;) {
		if (s->chunk_off == s->chunk_len && (rc = fill_chunk(s)) != 1)
			return rc;
		if ((rc = send_buf(s->fd, s->chunk, s->chunk_len,
				   &s->chunk_off)) != 0)
			return rc;
	}
}

/* Send what the socket takes of S's file body: 0 when all is sent, 1
 * when the socket is full, -1 with errno (ENODATA: the file ended before
 * its length). */
static int
send_file(struct sender *s)
{
	const struct ctl_body *b = s->body;
	off_t off;
	ssize_t w;

	while (!s->plain && s->body_off < b->len) {
		off = (off_t)s->body_off;
		w = sendfile_quiet(s->fd, b->fd, &off, b->len - s->body_off);
		if (w == -1 && errno == EINTR)
			continue;
		if (w == -1 && (errno == EINVAL || errno == ENOSYS)) {
			s->plain = 1;	/* no sendfile here */
			break;
		}
		if (w == -1)
			return errno == EAGAIN ? 1 : -1;
		if (w == 0) {
			errno = ENODATA;
			return -1;
		}
		s->body_off = (size_t)off;
	}
	return s->plain ? send_plain(s) : 0;
}

/* Send what the socket takes of S now: 0 when all is sent, 1 when it is
 * full, -1 with errno. */
static int
sender_step(struct sender *s)
{
	const struct ctl_body *b = s->body;
	int rc = send_buf(s->fd, s->line, s->line_len, &s->line_off);

	if (rc != 0 || b == NULL || b->len == 0)
		return rc;
	if (b->fd >= 0)
		return send_file(s);
	return send_buf(s->fd, b->data, b->len, &s->body_off);
}

/* Send LINE (LEN bytes, its newline included) and BODY (or NULL) on FD
 * within TIMEOUT seconds (<= 0: no limit).  0 when all was sent; 1 when the
 * master spoke or closed the connection first (its answer, if any, is
 * to be read; ERR says it closed); -1 with ERR. */
static int
send_request(int fd, const char *line, size_t len, const struct ctl_body *body,
	     double timeout, char *err, size_t n)
{
	struct sender s = { .fd = fd, .line = line, .line_len = len,
			    .body = body };
	double end = timeout > 0 ? ft_now() + timeout : 0;
	int flags = fcntl(fd, F_GETFL), rc;

	if (flags == -1 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) == -1)
		return ft_snprintf(err, n, "fcntl: %s", strerror(errno)), -1;
	while ((rc = sender_step(&s)) == 1) {
		struct pollfd p = { .fd = fd, .events = POLLIN | POLLOUT };
		int ms = end > 0 ? (int)ceil((end - ft_now()) * 1000) : -1;

		if (end > 0 && ms <= 0) {
			errno = ETIMEDOUT;
			break;
		}
		if (poll(&p, 1, ms) == -1 && errno != EINTR)
			break;
		if (p.revents & POLLIN) {
			rc = 2;		/* it answers before the end */
			break;
		}
	}
	fcntl(fd, F_SETFL, flags);
	if (rc == 0 || rc == 2)
		return rc ? 1 : 0;
	if (errno == EPIPE || errno == ECONNRESET) {
		ft_snprintf(err, n, "the master closed the connection");
		return 1;
	}
	if (errno == ENODATA)
		ft_snprintf(err, n, "the file got shorter while it was sent");
	else if (errno == ETIMEDOUT)
		ft_snprintf(err, n, "the master did not take the request in "
			    "%.0f s", timeout);
	else
		ft_snprintf(err, n, "cannot send to the master: %s",
			    strerror(errno));
	return -1;
}

json_t *
ctl_call_body(int fd, json_t *req, const struct ctl_body *body,
	      double timeout, char *err, size_t n)
{
	struct ft_buf line = { 0 };
	json_error_t jerr;
	json_t *ans = NULL;
	char *text;
	size_t len;

	json_object_set_new(req, "v", json_integer(FT_CTL_VERSION));
	text = json_dumps(req, JSON_COMPACT);
	if (text == NULL) {
		ft_snprintf(err, n, "cannot encode the request");
		return NULL;
	}
	len = strlen(text);
	text = ft_realloc(text, len + 2);
	memcpy(text + len++, "\n", 2);
	if (send_request(fd, text, len, body, timeout, err, n) == -1 ||
	    read_line(fd, &line, timeout, err, n) == -1)
		goto out;
	ans = json_loadb(line.data, line.len, 0, &jerr);
	if (ans == NULL || !json_is_object(ans)) {
		ft_snprintf(err, n, "the master sent a malformed answer");
		json_decref(ans);
		ans = NULL;
	}
out:
	free(text);
	ft_buf_free(&line);
	return ans;
}

json_t *
ctl_request(const char *state_dir, json_t *req, double timeout, char *err,
	    size_t n)
{
	return ctl_request_body(state_dir, req, NULL, timeout, err, n);
}

json_t *
ctl_request_body(const char *state_dir, json_t *req,
		 const struct ctl_body *body, double timeout, char *err,
		 size_t n)
{
	int fd = ctl_connect(state_dir, err, n);
	json_t *ans;

	if (fd == -1)
		return NULL;
	ans = ctl_call_body(fd, req, body, timeout, err, n);
	close(fd);
	return ans;
}

/* ---- streams: answers and pushes on one connection ---- */

int
ctl_stream_open(struct ctl_stream *s, const char *state_dir, char *err,
		size_t n)
{
	memset(s, 0, sizeof(*s));
	s->fd = ctl_connect(state_dir, err, n);
	return s->fd == -1 ? -1 : 0;
}

void
ctl_stream_close(struct ctl_stream *s)
{
	if (s->fd >= 0)
		close(s->fd);
	s->fd = -1;
	ft_buf_free(&s->in);
	s->off = 0;
}

int
ctl_stream_send(struct ctl_stream *s, json_t *req, char *err, size_t n)
{
	char *text;
	int rc;

	json_object_set_new(req, "v", json_integer(FT_CTL_VERSION));
	text = json_dumps(req, JSON_COMPACT);
	if (text == NULL) {
		ft_snprintf(err, n, "cannot encode the request");
		return -1;
	}
	rc = ft_send_all(s->fd, text, strlen(text));
	if (rc == 0)
		rc = ft_send_all(s->fd, "\n", 1);
	if (rc == -1)
		ft_snprintf(err, n, "cannot send to the master: %s",
			    strerror(errno));
	free(text);
	return rc;
}

/* The next whole line of S's input as an object: 1, 0 when there is no
 * whole line yet, -1 with ERR when the line is no JSON object. */
static int
stream_line(struct ctl_stream *s, json_t **msg, char *err, size_t n)
{
	char *start = s->in.data + s->off;
	char *nl = memchr(start, '\n', s->in.len - s->off);

	if (nl == NULL) {
		/* Keep only the unfinished line. */
		memmove(s->in.data, start, s->in.len - s->off);
		s->in.len -= s->off;
		s->off = 0;
		return 0;
	}
	s->off += (size_t)(nl - start) + 1;
	s->line = start;
	s->line_len = (size_t)(nl - start);
	*msg = json_loadb(start, (size_t)(nl - start), 0, NULL);
	if (*msg == NULL || !json_is_object(*msg)) {
		json_decref(*msg);
		*msg = NULL;
		ft_snprintf(err, n, "the master sent a malformed line");
		return -1;
	}
	return 1;
}

int
ctl_stream_next(struct ctl_stream *s, double timeout, json_t **msg,
		char *err, size_t n)
{
	struct pollfd pfd = { .fd = s->fd, .events = POLLIN };
	double end = ft_now() + timeout, left;
	struct timespec ts;
	ssize_t r;
	int rc;

	for (;;) {
		if (s->in.len > 0 && (rc = stream_line(s, msg, err, n)) != 0)
			return rc;
		left = fmax(0, end - ft_now());
		ts.tv_sec = (time_t)left;
		ts.tv_nsec = (long)((left - (double)ts.tv_sec) * 1e9);
		rc = ppoll(&pfd, 1, timeout < 0 ? NULL : &ts, s->wait_mask);
		if (rc == 0 || (rc == -1 && errno == EINTR))
			return 0;
		if (rc == -1)
			return ft_snprintf(err, n, "poll: %s", strerror(errno)), -1;
		ft_buf_reserve(&s->in, 65536);
		r = read(s->fd, s->in.data + s->in.len, s->in.cap - s->in.len - 1);
		if (r == -1 && (errno == EINTR || errno == EAGAIN))
			return 0;
		if (r <= 0) {
			ft_snprintf(err, n, "the master closed the connection");
			return -1;
		}
		s->in.len += (size_t)r;
	}
}

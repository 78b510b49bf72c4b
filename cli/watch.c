/*
 * watch -c CFG: the cluster live, from a subscription (status pushes and
 * events; the master pushes, the client never polls).
 *
 * On a terminal: a full screen redrawn in place (the alternate screen,
 * so that quitting leaves the terminal as it was): batches with a
 * progress bar, done/failed/total, rate and ETA; the workers and nodes;
 * the latest events.  q or Ctrl-C quits.  Otherwise: plain lines, one per
 * event and one per batch when it moves (at most every second), for logs.
 * It ends with the master: 0 when it stopped, 1 (said) when the
 * connection ended without its word.
 */
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "ctl.h"
#include "progress.h"
#include "util.h"

#define MAX_EVENTS 64			/* kept for the screen */
#define MAX_TRACKED 64			/* batches whose rate is measured */
#define RATE_WINDOW 10.0		/* seconds */
#define REDRAW_MIN 0.1			/* seconds between redraws */
#define PLAIN_EVERY 1.0			/* seconds between a batch's lines */
#define BAR 24				/* cells of a progress bar */

/* A batch seen in the statuses. */
struct tracked {
	long id;
	struct ft_rate rate;
	long long done;			/* when its last plain line was printed */
	double printed;			/* then (monotonic) */
	int finished;
};

struct view {
	json_t *status;			/* the latest status push */
	char *events[MAX_EVENTS];	/* formatted, a ring */
	int nevents;			/* in all (the ring holds the last) */
	struct tracked tr[MAX_TRACKED];
	int ntr;
	int tty;
	int rows, cols;
	double status_at;		/* when it came (monotonic) */
	int dirty;			/* the screen needs a redraw */
	double drawn;			/* when it was last drawn */
	int stopped;			/* the master said it stops */
};

static volatile sig_atomic_t quit, resized;
static struct termios saved_tio;
static int term_state;			/* 1: alternate screen; 2: and raw keys */

static void
on_signal(int sig)
{
	if (sig == SIGWINCH)
		resized = 1;
	else
		quit = 1;
}

/* ---- the terminal ---- */

/* Back to the normal screen, cursor and keys (idempotent: atexit too). */
static void
term_restore(void)
{
	if (term_state == 0)
		return;
	if (term_state == 2)
		tcsetattr(STDIN_FILENO, TCSANOW, &saved_tio);
	fputs("\033[?25h\033[?1049l", stdout);
	fflush(stdout);
	term_state = 0;
}

/* The alternate screen, no cursor, keys one at a time without echo. */
static void
term_setup(void)
{
	struct termios raw;

	fputs("\033[?1049h\033[?25l\033[H\033[2J", stdout);
	fflush(stdout);
	term_state = 1;
	atexit(term_restore);
	if (!isatty(STDIN_FILENO) || tcgetattr(STDIN_FILENO, &saved_tio) == -1)
		return;
	raw = saved_tio;
	raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
	raw.c_cc[VMIN] = 0;
	raw.c_cc[VTIME] = 0;
	if (tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0)
		term_state = 2;
}

static void
term_size(struct view *v)
{
	struct winsize ws;

	v->rows = 24;
	v->cols = 80;
	if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 4 &&
	    ws.ws_col > 20) {
		v->rows = ws.ws_row;
		v->cols = ws.ws_col;
	}
}

/* ---- what came ---- */

static struct tracked *
tracked(struct view *v, long id)
{
	int i;

	for (i = 0; i < v->ntr; i++)
		if (v->tr[i].id == id)
			return &v->tr[i];
	if (v->ntr == MAX_TRACKED) {
		memmove(v->tr, v->tr + 1, (MAX_TRACKED - 1) * sizeof(*v->tr));
		v->ntr--;
	}
	memset(&v->tr[v->ntr], 0, sizeof(v->tr[0]));
	v->tr[v->ntr].id = id;
	v->tr[v->ntr].done = -1;
	ft_rate_init(&v->tr[v->ntr].rate, RATE_WINDOW);
	return &v->tr[v->ntr++];
}

/* A batch row's progress. */
static struct ft_progress
progress_of(json_t *row)
{
	struct ft_progress p = {
		.total = json_integer_value(json_object_get(row, "total")),
		.done = json_integer_value(json_object_get(row, "done")),
		.failed = json_integer_value(json_object_get(row, "failed")),
		.elapsed = json_number_value(json_object_get(row, "seconds")),
	};
	const char *st = json_string_value(json_object_get(row, "state"));

	p.finished = st && strcmp(st, "finished") == 0;
	return p;
}

/* "HH:MM:SS" of epoch seconds TS. */
static void
clock_of(double ts, char *out, size_t n)
{
	time_t t = (time_t)ts;
	struct tm tm;

	localtime_r(&t, &tm);
	strftime(out, n, "%H:%M:%S", &tm);
}

/* EV as "HH:MM:SS name key=value ...". */
static char *
event_text(json_t *ev)
{
	struct ft_buf b = { 0 };
	const char *key;
	char when[16];
	json_t *val;

	clock_of(json_number_value(json_object_get(ev, "ts")), when,
		 sizeof(when));
	ft_buf_printf(&b, "%s %s", when,
		      json_string_value(json_object_get(ev, "event")));
	json_object_foreach(ev, key, val) {
		char *text;

		if (!strcmp(key, "ts") || !strcmp(key, "event") ||
		    !strcmp(key, "push"))
			continue;
		text = json_dumps(val, JSON_ENCODE_ANY | JSON_COMPACT);
		if (json_is_string(val) && !strchr(json_string_value(val), ' '))
			ft_buf_printf(&b, " %s=%s", key, json_string_value(val));
		else
			ft_buf_printf(&b, " %s=%s", key, text ? text : "?");
		free(text);
	}
	ft_buf_add(&b, "", 1);
	return b.data;
}

/* Event EV came: keep it for the screen, or print it. */
static void
got_event(struct view *v, json_t *ev)
{
	char *text = event_text(ev);
	int slot = v->nevents % MAX_EVENTS;

	if (!v->tty) {
		printf("%s\n", text);
		free(text);
		return;
	}
	free(v->events[slot]);
	v->events[slot] = text;
	v->nevents++;
	v->dirty = 1;
}

/* Plain output: a line for batch ROW when it moved (at most every
 * PLAIN_EVERY) or finished. */
static void
plain_batch(struct tracked *t, json_t *row)
{
	struct ft_progress p = progress_of(row);
	char text[160], when[16];
	double now = ft_now();

	if (p.done == t->done && p.finished == t->finished)
		return;
	if (!p.finished && t->done >= 0 && now - t->printed < PLAIN_EVERY)
		return;
	clock_of(ft_wall(), when, sizeof(when));
	ft_progress_text(&p, ft_rate_get(&t->rate), text, sizeof(text));
	printf("%s batch %lld (%s): %s\n", when,
	       (long long)json_integer_value(json_object_get(row, "id")),
	       json_string_value(json_object_get(row, "name")), text);
	t->done = p.done;
	t->finished = p.finished;
	t->printed = now;
}

/* A status push came. */
static void
got_status(struct view *v, json_t *st)
{
	json_t *rows = json_object_get(st, "batches"), *row;
	double now = ft_now();
	size_t i, nw = json_array_size(json_object_get(st, "workers"));
	size_t nn = json_array_size(json_object_get(st, "nodes"));

	if (!v->tty && v->status == NULL)
		printf("cluster %s: %zu worker%s on %zu node%s\n",
		       json_string_value(json_object_get(st, "cluster")),
		       nw, nw == 1 ? "" : "s", nn, nn == 1 ? "" : "s");
	json_array_foreach(rows, i, row) {
		struct tracked *t = tracked(v, (long)json_integer_value(
						    json_object_get(row, "id")));

		ft_rate_add(&t->rate, now, (double)json_integer_value(
				    json_object_get(row, "done")));
		if (!v->tty)
			plain_batch(t, row);
	}
	json_decref(v->status);
	v->status = json_incref(st);
	v->status_at = now;
	v->dirty = 1;
}

/* Handle one pushed line. */
static void
got(struct view *v, json_t *msg)
{
	if (cli_push_is(msg, "status"))
		got_status(v, msg);
	else if (cli_push_is(msg, "event"))
		got_event(v, msg);
	else if (cli_push_is(msg, "dropped") && !v->tty)
		printf("(%lld events skipped: too slow a reader)\n",
		       (long long)json_number_value(json_object_get(msg,
								    "events")));
	else if (cli_push_is(msg, "stopping"))
		v->stopped = quit = 1;
}

/* ---- the screen ---- */

/* One screen line: TEXT cut to the width, the rest of the line cleared. */
static void
line(struct ft_buf *scr, const struct view *v, const char *text)
{
	ft_buf_printf(scr, "%.*s\033[K\r\n", v->cols, text);
}

static void
header(struct ft_buf *scr, const struct view *v)
{
	json_t *st = v->status, *ws = json_object_get(st, "workers"), *w;
	char buf[512], up[32], now[16], states[256] = "";
	const char *names[16];
	int counts[16] = { 0 }, n = 0, k;
	size_t i;

	json_array_foreach(ws, i, w) {
		const char *s = json_string_value(json_object_get(w, "state"));

		for (k = 0; k < n && strcmp(names[k], s); k++)
			;
		if (k == n && n < 16)
			names[n++] = s;
		if (k < 16)
			counts[k]++;
	}
	for (k = 0; k < n; k++)
		snprintf(states + strlen(states), sizeof(states) - strlen(states),
			 "%s%d %s", k ? ", " : "", counts[k], names[k]);
	/* Statuses come when something changed: the clock runs on here. */
	ft_fmt_secs(json_number_value(json_object_get(st, "uptime")) +
		    ft_now() - v->status_at, up, sizeof(up));
	clock_of(ft_wall(), now, sizeof(now));
	snprintf(buf, sizeof(buf), "ftfarm watch  cluster %s, %s launch, up "
		 "%s  %s", json_string_value(json_object_get(st, "cluster")),
		 json_string_value(json_object_get(st, "launch")), up, now);
	line(scr, v, buf);
	snprintf(buf, sizeof(buf), "tasks: %lld queued, %lld open; workers: "
		 "%s%s%s",
		 (long long)json_integer_value(json_object_get(st, "queued")),
		 (long long)json_integer_value(json_object_get(st, "open")),
		 states, json_is_string(json_object_get(st, "http")) ? "; " : "",
		 json_is_string(json_object_get(st, "http")) ?
		 json_string_value(json_object_get(st, "http")) : "");
	line(scr, v, buf);
}

/* Batch ROW's line. */
static void
batch_line(struct ft_buf *scr, struct view *v, json_t *row)
{
	struct ft_progress p = progress_of(row);
	struct tracked *t = tracked(v, (long)json_integer_value(
					    json_object_get(row, "id")));
	double rate = ft_progress_rate(&p, ft_rate_get(&t->rate));
	double eta = ft_progress_eta(&p, ft_rate_get(&t->rate));
	char bar[BAR + 1], r[32] = "-", e[32] = "-", dt[48], buf[512];
	char state[48] = "running";

	ft_fmt_bar(p.total ? (double)p.done / (double)p.total : 0, BAR, bar,
		   sizeof(bar));
	if (p.finished) {
		rate = p.elapsed > 0 ? (double)p.done / p.elapsed : -1;
		ft_fmt_secs(p.elapsed, e, sizeof(e));
		snprintf(state, sizeof(state), "finished in %s", e);
		snprintf(e, sizeof(e), "-");
	} else if (eta >= 0) {
		ft_fmt_secs(eta, e, sizeof(e));
	}
	if (rate >= 0)
		ft_fmt_count(rate, r, sizeof(r));
	snprintf(dt, sizeof(dt), "%lld/%lld", p.done, p.total);
	snprintf(buf, sizeof(buf), "%-6lld %-18.18s %s %3.0f%% %15s %7lld "
		 "%8s/s %8s  %s",
		 (long long)json_integer_value(json_object_get(row, "id")),
		 json_string_value(json_object_get(row, "name")), bar,
		 p.total ? floor(100.0 * (double)p.done / (double)p.total) : 0.0,
		 dt, p.failed, r, e, state);
	line(scr, v, buf);
}

/* The batch rows in screen order: running ones first, then the finished
 * ones newest first.  Up to MAX of them into OUT; the count. */
static int
batch_order(json_t *rows, json_t **out, int max)
{
	int n = 0, pass;
	size_t i;

	for (pass = 0; pass < 2; pass++)
		for (i = json_array_size(rows); i-- > 0 && n < max;) {
			json_t *row = json_array_get(rows, i);
			int fin = progress_of(row).finished;

			if (fin == pass)
				out[n++] = row;
		}
	return n;
}

static void
batches(struct ft_buf *scr, struct view *v, int max)
{
	json_t *rows = json_object_get(v->status, "batches"), *order[32];
	int n = batch_order(rows, order, max < 32 ? max : 32), i;

	line(scr, v, "");
	line(scr, v, "BATCH  NAME               PROGRESS                      "
	     "DONE/TOTAL  FAILED       RATE      ETA  STATE");
	if (n == 0)
		line(scr, v, "(no batch yet: ftfarm submit -c CFG BATCH.json)");
	for (i = 0; i < n; i++)
		batch_line(scr, v, order[i]);
}

/* A row of a status table: the titled columns of COLS. */
static void
table_row(struct ft_buf *scr, const struct view *v,
	  const struct ctl_col *cols, int n, json_t *row)
{
	struct ft_buf b = { 0 };
	int k;

	for (k = 0; k < n; k++) {
		json_t *val = row ? json_object_get(row, cols[k].key) : NULL;
		int w = cols[k].width ? cols[k].width : 8;

		if (cols[k].title == NULL)
			continue;
		if (row == NULL)
			ft_buf_printf(&b, "%*s ", w, cols[k].title);
		else if (cols[k].type == JT_INT)
			ft_buf_printf(&b, "%*lld ", w,
				      (long long)json_integer_value(val));
		else
			ft_buf_printf(&b, "%*s ", w, json_is_string(val) ?
				      json_string_value(val) : "");
	}
	ft_buf_add(&b, "", 1);
	line(scr, v, b.data);
	ft_buf_free(&b);
}

/* The rows of status table KEY, at most MAX lines (a last one says what
 * did not fit). */
static void
table(struct ft_buf *scr, const struct view *v, const char *key,
      const struct ctl_col *cols, int n, int max)
{
	json_t *rows = json_object_get(v->status, key);
	size_t i, count = json_array_size(rows);
	char more[64];

	line(scr, v, "");
	table_row(scr, v, cols, n, NULL);
	for (i = 0; i < count; i++) {
		if ((int)i == max - 1 && count > (size_t)max) {
			snprintf(more, sizeof(more), "... and %zu more",
				 count - i);
			line(scr, v, more);
			break;
		}
		table_row(scr, v, cols, n, json_array_get(rows, i));
	}
}

static void
events(struct ft_buf *scr, const struct view *v, int max)
{
	int from = v->nevents > max ? v->nevents - max : 0, i;

	if (from < v->nevents - MAX_EVENTS)
		from = v->nevents - MAX_EVENTS;
	line(scr, v, "");
	line(scr, v, "EVENTS");
	for (i = from; i < v->nevents; i++)
		line(scr, v, v->events[i % MAX_EVENTS]);
}

/* Share the screen's rows: batches first, then nodes and events, the
 * workers what is left (the rest goes to events). */
static void
draw(struct view *v)
{
	struct ft_buf scr = { 0 };
	int left = v->rows - 12, nb, nn, nw, ne, have_w;

	nb = (int)json_array_size(json_object_get(v->status, "batches"));
	nb = nb < 1 ? 1 : nb > 10 ? 10 : nb;
	nn = (int)json_array_size(json_object_get(v->status, "nodes"));
	have_w = (int)json_array_size(json_object_get(v->status, "workers"));
	left -= nb;
	nn = nn > left / 3 ? (left / 3 > 1 ? left / 3 : 1) : nn;
	left -= nn;
	ne = 3;
	nw = have_w < left - ne ? have_w : left - ne;
	nw = nw < 1 ? 1 : nw;
	ne = left - nw > 3 ? left - nw : 3;
	ft_buf_add(&scr, "\033[H", 3);
	header(&scr, v);
	batches(&scr, v, nb);
	table(&scr, v, "workers", ctl_worker_cols, CTL_W_NCOLS, nw);
	table(&scr, v, "nodes", ctl_node_cols, CTL_N_NCOLS, nn);
	events(&scr, v, ne);
	ft_buf_adds(&scr, "\033[J\033[7m q: quit \033[0m");
	fwrite(scr.data, 1, scr.len, stdout);
	fflush(stdout);
	ft_buf_free(&scr);
	v->dirty = 0;
	v->drawn = ft_now();
}

/* ---- the loop ---- */

/* Keys typed: q quits. */
static void
keys(void)
{
	char k[64];
	ssize_t n = read(STDIN_FILENO, k, sizeof(k)), i;

	for (i = 0; i < n; i++)
		if (k[i] == 'q' || k[i] == 'Q')
			quit = 1;
}

/* Handle every line S has now.  0, or -1 when the master went away. */
static int
drain(struct ctl_stream *s, struct view *v, char *err, size_t n)
{
	json_t *msg;
	int rc;

	while ((rc = ctl_stream_next(s, 0, &msg, err, n)) == 1) {
		got(v, msg);
		json_decref(msg);
	}
	if (!v->tty)
		fflush(stdout);
	return rc == -1 ? -1 : 0;
}

/* How long poll may wait: a redraw is due, or the clock's next second. */
static int
wait_ms(const struct view *v)
{
	double due;

	if (!v->tty)
		return -1;
	if (v->dirty)
		due = v->drawn + REDRAW_MIN - ft_now();
	else
		due = 1.0;
	return due <= 0 ? 0 : (int)(due * 1000) + 1;
}

static int
run(struct ctl_stream *s, struct view *v, char *err, size_t n)
{
	struct pollfd pfd[2] = {
		{ .fd = s->fd, .events = POLLIN },
		{ .fd = STDIN_FILENO, .events = POLLIN },
	};
	int nfd = term_state == 2 ? 2 : 1;

	if (drain(s, v, err, n) == -1)
		return 1;
	while (!quit) {
		if (poll(pfd, (nfds_t)nfd, wait_ms(v)) == -1 && errno != EINTR)
			return 1;
		if (resized) {
			resized = 0;
			term_size(v);
			v->dirty = 1;
		}
		if ((pfd[0].revents & (POLLIN | POLLHUP | POLLERR)) &&
		    drain(s, v, err, n) == -1)
			return 1;
		if (nfd == 2 && (pfd[1].revents & POLLIN))
			keys();
		if (v->tty && v->status &&
		    (!v->dirty ? ft_now() - v->drawn >= 1.0 :
		     ft_now() - v->drawn >= REDRAW_MIN))
			draw(v);
	}
	return 0;
}

static int
subscribe(struct ctl_stream *s, const char *state_dir, char *err, size_t n)
{
	json_t *req = json_pack("{s:s, s:b, s:b, s:b, s:i}", "cmd",
				"subscribe", "status", 1, "events", 1,
				"task_events", 0, "tail", 20);
	json_t *ans = NULL;
	int rc = -1;

	if (ctl_stream_open(s, state_dir, err, n) == 0 &&
	    ctl_stream_send(s, req, err, n) == 0 &&
	    ctl_stream_next(s, 30, &ans, err, n) == 1) {
		if (json_is_true(json_object_get(ans, "ok")))
			rc = 0;
		else
			snprintf(err, n, "%s", json_string_value(
					 json_object_get(ans, "error")));
	}
	json_decref(ans);
	json_decref(req);
	return rc;
}

static void
view_free(struct view *v)
{
	int i;

	for (i = 0; i < MAX_EVENTS; i++)
		free(v->events[i]);
	json_decref(v->status);
}

int
cli_watch(struct cli *c)
{
	struct sigaction sa = { .sa_handler = on_signal };
	struct ctl_stream s;
	struct view v = { 0 };
	char err[512] = "the master did not answer";
	int rc;

	if (c->argc != 0) {
		cli_err("usage: ftfarm watch -c CFG");
		return 2;
	}
	if (subscribe(&s, c->cfg.state_dir, err, sizeof(err)) == -1) {
		cli_err("%s", err);
		ctl_stream_close(&s);
		return 1;
	}
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGWINCH, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	v.tty = isatty(STDOUT_FILENO);
	if (v.tty) {
		term_size(&v);
		term_setup();
	}
	snprintf(err, sizeof(err), "the master closed the connection");
	rc = run(&s, &v, err, sizeof(err));
	term_restore();
	if (v.stopped) {
		cli_err("the master stopped");
		rc = 0;
	} else if (rc != 0)
		cli_err("%s", err);
	ctl_stream_close(&s);
	view_free(&v);
	return rc;
}

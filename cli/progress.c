/*
 * progress: one progress line on stderr while `submit --wait`, `wait` and
 * `wordcount` wait for a batch, when stderr is a terminal.
 *
 * The batch's row is pushed by the master (a subscription with "batch")
 * on the connection that also carries the wait: the client never polls.
 */
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "cli.h"
#include "ctl.h"
#include "progress.h"
#include "util.h"

#define BAR_WIDTH 22

/* The terminal's width on stderr (80 when unknown). */
static int
columns(void)
{
	struct winsize ws;

	if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 10)
		return ws.ws_col;
	return 80;
}

/* Redraw the line for batch ROW, measured by RATE. */
static void
draw(json_t *row, struct ft_rate *rate)
{
	struct ft_progress p = {
		.total = json_integer_value(json_object_get(row, "total")),
		.done = json_integer_value(json_object_get(row, "done")),
		.failed = json_integer_value(json_object_get(row, "failed")),
		.elapsed = json_number_value(json_object_get(row, "seconds")),
	};
	char bar[BAR_WIDTH + 1], text[160], line[512];

	ft_rate_add(rate, ft_now(), (double)p.done);
	ft_fmt_bar(p.total ? (double)p.done / (double)p.total : 0, BAR_WIDTH,
		   bar, sizeof(bar));
	ft_progress_text(&p, ft_rate_get(rate), text, sizeof(text));
	snprintf(line, sizeof(line), "batch %lld (%s): %s %s",
		 (long long)json_integer_value(json_object_get(row, "id")),
		 json_string_value(json_object_get(row, "name")), bar, text);
	fprintf(stderr, "\r\033[K%.*s", columns() - 1, line);
	fflush(stderr);
}

/* The first line on S: the subscription's answer.  0, or -1 (said). */
static int
subscribed(struct ctl_stream *s, json_int_t id)
{
	json_t *req = ctl_request_new(CTL_SUBSCRIBE), *ans = NULL;
	char err[512] = "the master did not answer";
	int rc = -1;

	json_object_set_new(req, "batch", json_integer(id));
	if (ctl_stream_send(s, req, err, sizeof(err)) == -1 ||
	    ctl_stream_next(s, 30, &ans, err, sizeof(err)) != 1) {
		cli_err("%s", err);
	} else if (!json_is_true(json_object_get(ans, "ok"))) {
		rc = -2;	/* the plain wait says why, with its status */
	} else {
		rc = 0;
	}
	json_decref(req);
	json_decref(ans);
	return rc;
}

/* Read S until the wait's answer, drawing each pushed row. */
static json_t *
until_answer(struct ctl_stream *s, char *err, size_t n)
{
	struct ft_rate rate;
	json_t *msg = NULL;
	int drawn = 0;

	ft_rate_init(&rate, 10);
	for (;;) {
		int rc = ctl_stream_next(s, -1, &msg, err, n);

		if (rc == -1)
			break;
		if (rc == 0)
			continue;
		if (json_object_get(msg, "ok"))
			break;
		if (cli_push_is(msg, "batch")) {
			draw(json_object_get(msg, "batch"), &rate);
			drawn = 1;
		}
		json_decref(msg);
		msg = NULL;
	}
	if (drawn)
		fputs("\r\033[K", stderr);	/* the line goes */
	return msg;
}

json_t *
cli_wait_progress(struct cli *c, json_int_t id, int *broken)
{
	struct ctl_stream s;
	json_t *req = ctl_request_new(CTL_WAIT), *ans = NULL;
	char err[512] = "the master closed the connection";
	int rc;

	c->status = 1;
	*broken = 0;
	json_object_set_new(req, "batch", json_integer(id));
	if (ctl_stream_open(&s, c->cfg.state_dir, err, sizeof(err)) == -1) {
		*broken = 1;
		goto out;
	}
	if ((rc = subscribed(&s, id)) != 0) {
		*broken = rc == -2;
		goto out;
	}
	if (ctl_stream_send(&s, req, err, sizeof(err)) == 0)
		ans = until_answer(&s, err, sizeof(err));
	if (ans == NULL) {
		*broken = 1;	/* the caller's wait reconnects and says */
	} else if (!json_is_true(json_object_get(ans, "ok"))) {
		cli_err("%s", json_string_value(json_object_get(ans, "error")));
		if (json_is_integer(json_object_get(ans, "exit")))
			c->status = (int)json_integer_value(
				json_object_get(ans, "exit"));
		json_decref(ans);
		ans = NULL;
	}
out:
	ctl_stream_close(&s);
	json_decref(req);
	return ans;
}

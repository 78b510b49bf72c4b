/*
 * events -c CFG [--follow] [--since TS] [--type T]...: the master's events
 * as JSON lines, the lines of events.jsonl, from a subscription.
 *
 * Without --follow it prints the events the master holds (since TS if
 * given) and exits; with --follow it goes on with new ones until it is
 * interrupted or the master stops.  The file is never read: rotation
 * and another user's missing read access do not matter.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "ctl.h"
#include "util.h"

static volatile sig_atomic_t stop;

static void
on_stop(int sig)
{
	(void)sig;
	stop = 1;
}

int
cli_push_is(json_t *msg, const char *kind)
{
	const char *k = json_string_value(json_object_get(msg, "push"));

	return k && strcmp(k, kind) == 0;
}

/* TS: epoch seconds, or a time ago ("90s", "10m", "2h", "1d").  0, or -1
 * when it is neither. */
static int
parse_since(const char *s, double *ts)
{
	char *end;
	double v = strtod(s, &end);

	if (end == s || v < 0)
		return -1;
	if (*end == '\0') {
		*ts = v;
		return 0;
	}
	if (end[1] != '\0')
		return -1;
	switch (*end) {
	case 's': break;
	case 'm': v *= 60; break;
	case 'h': v *= 3600; break;
	case 'd': v *= 86400; break;
	default: return -1;
	}
	*ts = ft_wall() - v;
	return 0;
}

/* The subscribe request of C's options. */
static json_t *
request(struct cli *c, int have_since, double since)
{
	json_t *req = ctl_request_new(CTL_SUBSCRIBE), *types;
	int i;

	if (c->ntypes == 0) {
		json_object_set_new(req, "events", json_true());
	} else {
		types = json_array();
		for (i = 0; i < c->ntypes; i++)
			json_array_append_new(types, json_string(c->types[i]));
		json_object_set_new(req, "types", types);
	}
	/* Without --follow: what the master holds; with it: from now on. */
	if (have_since || !c->follow)
		json_object_set_new(req, "since",
				    json_real(have_since ? since : 0));
	return req;
}

/* Print event line LINE (LEN bytes, {"push":"event",...}) as it is in
 * events.jsonl.  0, or -1 when stdout is gone. */
static int
print_event(const char *line, size_t len)
{
	static const char head[] = "{\"push\":\"event\",";
	size_t skip = sizeof(head) - 1;

	if (len <= skip || memcmp(line, head, skip) != 0)
		return 0;
	putchar('{');
	fwrite(line + skip, 1, len - skip, stdout);
	putchar('\n');
	return ferror(stdout) ? -1 : 0;
}

/* Say (once) when events older than asked for are only in the file. */
static void
note_oldest(struct cli *c, json_t *ans, int have_since, double since)
{
	json_t *oldest = json_object_get(ans, "oldest");
	char when[64];
	time_t t;

	if (!have_since || !oldest || json_number_value(oldest) <= since)
		return;
	t = (time_t)json_number_value(oldest);
	strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", localtime(&t));
	cli_err("the master holds events since %s; older ones are in "
		"%s/events.jsonl*", when, c->cfg.state_dir);
}

/* Print the pushed events until "synced" (unless FOLLOW), an interrupt,
 * or the master's stop.  The exit status: 1 (said) when the connection
 * ended otherwise (the master died). */
static int
print_events(struct ctl_stream *s, int follow)
{
	char err[512];
	json_t *msg;
	int rc;

	while (!stop) {
		rc = ctl_stream_next(s, 0, &msg, err, sizeof(err));
		if (rc == 0) {
			/* Nothing more for now: out with what was printed.
			 * A stop signal taken in that last look is seen here;
			 * none can come between this check and the wait. */
			fflush(stdout);
			if (stop)
				break;
			rc = ctl_stream_next(s, -1, &msg, err, sizeof(err));
		}
		if (rc == -1) {
			fflush(stdout);
			cli_err("%s", err);
			return 1;
		}
		if (rc == 0)
			continue;
		if (cli_push_is(msg, "event") &&
		    print_event(s->line, s->line_len) == -1)
			stop = 1;
		else if (cli_push_is(msg, "dropped"))
			cli_err("%lld events skipped: this reader was too slow",
				(long long)json_number_value(json_object_get(
					msg, "events")));
		else if ((cli_push_is(msg, "synced") && !follow) ||
			 cli_push_is(msg, "stopping"))
			stop = 1;
		json_decref(msg);
	}
	fflush(stdout);
	return 0;
}

int
cli_events(struct cli *c)
{
	struct ctl_stream s;
	struct sigaction sa = { .sa_handler = on_stop };
	sigset_t stops, waiting;
	json_t *req, *ans = NULL;
	char err[512] = "the master did not answer";
	double since = 0;
	int rc = 1;

	if (c->argc != 0 || (c->since && parse_since(c->since, &since) == -1)) {
		cli_err("usage: ftfarm events -c CFG [--follow] [--since TS] "
			"[--type TYPE]...  (TS: epoch seconds, or 90s, 10m, "
			"2h, 1d ago)");
		return 2;
	}
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	/* The stop signals come only while waiting for the master: one
	 * that came between the check of the flag and the wait would
	 * otherwise be slept through. */
	sigemptyset(&stops);
	sigaddset(&stops, SIGINT);
	sigaddset(&stops, SIGTERM);
	sigprocmask(SIG_BLOCK, &stops, &waiting);
	sigdelset(&waiting, SIGINT);
	sigdelset(&waiting, SIGTERM);
	req = request(c, c->since != NULL, since);
	if (ctl_stream_open(&s, c->cfg.state_dir, err, sizeof(err)) == 0)
		s.wait_mask = &waiting;
	if (s.fd == -1 ||
	    ctl_stream_send(&s, req, err, sizeof(err)) == -1 ||
	    ctl_stream_next(&s, 30, &ans, err, sizeof(err)) != 1) {
		if (stop)
			rc = 0;		/* interrupted before the answer */
		else
			cli_err("%s", err);
	} else if (!json_is_true(json_object_get(ans, "ok"))) {
		cli_err("%s", json_string_value(json_object_get(ans, "error")));
		rc = 2;
	} else {
		note_oldest(c, ans, c->since != NULL, since);
		rc = print_events(&s, c->follow);
	}
	json_decref(ans);
	json_decref(req);
	ctl_stream_close(&s);
	return rc;
}

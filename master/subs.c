/* subs: the control socket's subscriptions (see subs.h). */
#include "subs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "control.h"
#include "evring.h"
#include "master.h"

#define OTHER_RING_BYTES (4 << 20)	/* the rare events */
#define TASK_RING_BYTES (2 << 20)	/* task_assigned, task_done */
#define PUSH_PERIOD 0.25		/* status and batch pushes, at most */
#define ALIVE_PERIOD 10.0		/* a push at least this often */
#define RECENT_FINISHED 20		/* finished batches in a status push */
#define READ_FIRST (256 * 1024)		/* a results read, at first */

enum { R_OTHER, R_TASK, R_N };

struct sub {
	struct client *c;
	uint64_t mask;			/* event types wanted: bit EVT_x */
	uint64_t pos[R_N];		/* cursor in each ring */
	uint64_t ord[R_N];		/* the ord of the record at pos */
	uint64_t missed;		/* events lost, not yet told */
	int synced;			/* "synced" was sent */
	int status;			/* wants status pushes */
	uint64_t status_gen;		/* the status it was last sent */
	long batch;			/* wants this batch's row, 0: none */
	uint64_t batch_mark;		/* the batch's counts last sent */
	int batch_over;			/* its final row was sent */
	int results;			/* streams the batch's result lines */
	int rfd;			/* its results.jsonl, or -1 */
	uint64_t roff;			/* the next byte of it to send */
	int rover;			/* all sent: the batch has finished */
	double last_push;		/* monotonic */
	struct sub *next;
};

struct subs {
	struct master *m;
	struct evring ring[R_N];
	uint64_t seq;			/* events seen */
	struct sub *list;
	int n;
	uint64_t dropped;		/* events skipped for slow subscribers */
	double last_build;
	uint64_t fingerprint;		/* of what the last status showed */
	uint64_t status_gen;		/* status_text's number */
	struct ft_buf status_text;	/* the last status push, one line */
	struct ft_buf scratch;
	struct ft_buf rbuf;		/* result lines read */
};

struct subs *
subs_new(struct master *m)
{
	struct subs *s = ft_calloc(1, sizeof(*s));

	s->m = m;
	evring_init(&s->ring[R_OTHER], OTHER_RING_BYTES);
	evring_init(&s->ring[R_TASK], TASK_RING_BYTES);
	events_set_tap(&m->events, subs_on_event, s);
	m->up.recent = subs_recent;
	m->up.subscribers = subs_count;
	m->up.dropped = subs_dropped;
	return s;
}

/* What SUB holds beyond itself goes: its results file and its watch. */
static void
sub_release(struct subs *s, struct sub *sub)
{
	if (sub->rfd >= 0) {
		close(sub->rfd);
		batches_watch(&s->m->batches, sub->batch, -1);
	}
	sub->rfd = -1;
}

void
subs_free(struct subs *s)
{
	if (s == NULL)
		return;
	events_set_tap(&s->m->events, NULL, NULL);
	while (s->list) {
		struct sub *next = s->list->next;

		sub_release(s, s->list);
		free(s->list);
		s->list = next;
	}
	evring_free(&s->ring[R_OTHER]);
	evring_free(&s->ring[R_TASK]);
	ft_buf_free(&s->status_text);
	ft_buf_free(&s->scratch);
	ft_buf_free(&s->rbuf);
	free(s);
}

int
subs_count(const struct subs *s)
{
	return s ? s->n : 0;
}

uint64_t
subs_dropped(const struct subs *s)
{
	return s ? s->dropped : 0;
}

/* ---- pushes ---- */

/* Push TEXT (one line, its newline included) to SUB. */
static void
push(struct sub *sub, const char *text, size_t len)
{
	control_push(sub->c, text, len);
	sub->last_push = ft_now();
}

static int
has_room(const struct sub *sub)
{
	return control_pending(sub->c) < SUBS_MAX_QUEUED;
}

/* Push event LINE as {"push":"event", ...the line's members}. */
static void
push_event(struct subs *s, struct sub *sub, const char *line, size_t len)
{
	static const char head[] = "{\"push\":\"event\",";

	s->scratch.len = 0;
	ft_buf_add(&s->scratch, head, sizeof(head) - 1);
	ft_buf_add(&s->scratch, line + 1, len - 1);	/* past its "{" */
	push(sub, s->scratch.data, s->scratch.len);
}

/* Push a small notice: {"push":"KIND"} or {"push":"KIND","KEY":V}. */
static void
push_notice(struct sub *sub, const char *kind, const char *key, double v)
{
	char line[128];
	int n;

	if (key)
		n = snprintf(line, sizeof(line), "{\"push\":\"%s\",\"%s\":%.17g}"
			     "\n", kind, key, v);
	else
		n = snprintf(line, sizeof(line), "{\"push\":\"%s\"}\n", kind);
	push(sub, line, (size_t)n);
}

/* ---- events: cursors in the rings ---- */

/* Move SUB's cursors that fell below their ring's oldest record up to it,
 * counting what was lost. */
static void
count_lost(struct subs *s, struct sub *sub)
{
	int k;

	for (k = 0; k < R_N; k++) {
		struct evring *r = &s->ring[k];

		if (sub->pos[k] >= evring_head(r))
			continue;
		sub->missed += r->head_ord - sub->ord[k];
		s->dropped += r->head_ord - sub->ord[k];
		sub->pos[k] = evring_head(r);
		sub->ord[k] = r->head_ord;
	}
}

/* The ring whose record at SUB's cursor comes first, or -1 when SUB has
 * seen everything. */
static int
next_ring(const struct subs *s, const struct sub *sub, struct evrec *rec,
	  const char **line)
{
	struct evrec a, b;
	const char *la, *lb;
	int have_a = sub->pos[R_OTHER] < evring_end(&s->ring[R_OTHER]);
	int have_b = sub->pos[R_TASK] < evring_end(&s->ring[R_TASK]);

	if (have_a)
		evring_get(&s->ring[R_OTHER], sub->pos[R_OTHER], &a, &la);
	if (have_b)
		evring_get(&s->ring[R_TASK], sub->pos[R_TASK], &b, &lb);
	if (have_a && (!have_b || a.seq < b.seq)) {
		*rec = a, *line = la;
		return R_OTHER;
	}
	if (have_b) {
		*rec = b, *line = lb;
		return R_TASK;
	}
	return -1;
}

/* Step SUB's cursor in ring K past the record REC. */
static void
advance(struct subs *s, struct sub *sub, int k, const struct evrec *rec)
{
	const char *line;
	struct evrec r;

	sub->pos[k] = evring_get(&s->ring[k], sub->pos[k], &r, &line);
	sub->ord[k] = rec->ord + 1;
}

static int
wants(const struct sub *sub, int type)
{
	return (sub->mask >> type) & 1;
}

/* Send SUB the events after its cursors while it has room: first what it
 * missed, then the events in order, then "synced" once caught up. */
static void
deliver(struct subs *s, struct sub *sub)
{
	struct evrec rec;
	const char *line;
	int k;

	count_lost(s, sub);
	if (sub->missed && has_room(sub)) {
		push_notice(sub, "dropped", "events", (double)sub->missed);
		sub->missed = 0;
	}
	while (has_room(sub) && (k = next_ring(s, sub, &rec, &line)) >= 0) {
		if (wants(sub, rec.type))
			push_event(s, sub, line, rec.len);
		advance(s, sub, k, &rec);
	}
	if (!sub->synced && next_ring(s, sub, &rec, &line) < 0 &&
	    has_room(sub)) {
		push_notice(sub, "synced", NULL, 0);
		sub->synced = 1;
	}
}

void
subs_on_event(void *ctx, enum ev_type type, int flags, double ts,
	      const char *line, size_t len)
{
	struct subs *s = ctx;
	struct sub *sub;

	s->seq++;
	evring_add(&s->ring[flags & EVF_TASK ? R_TASK : R_OTHER], s->seq, ts,
		   (int)type, line, len);
	for (sub = s->list; sub; sub = sub->next)
		if (sub->mask)
			deliver(s, sub);
}

/* Put SUB's cursors at the first events at or after SINCE. */
static void
seek_since(struct subs *s, struct sub *sub, double since)
{
	struct evrec rec;
	const char *line;
	int k;

	for (k = 0; k < R_N; k++) {
		struct evring *r = &s->ring[k];

		sub->pos[k] = evring_head(r);
		sub->ord[k] = r->head_ord;
		while (sub->pos[k] < evring_end(r)) {
			evring_get(r, sub->pos[k], &rec, &line);
			if (rec.ts >= since)
				break;
			advance(s, sub, k, &rec);
		}
	}
}

/* Keep only the last TAIL events SUB wants after its cursors. */
static void
seek_tail(struct subs *s, struct sub *sub, long tail)
{
	struct sub probe = *sub;
	struct evrec rec;
	const char *line;
	long wanted = 0;
	int k;

	while ((k = next_ring(s, &probe, &rec, &line)) >= 0) {
		wanted += wants(&probe, rec.type);
		advance(s, &probe, k, &rec);
	}
	while (wanted > tail && (k = next_ring(s, sub, &rec, &line)) >= 0) {
		wanted -= wants(sub, rec.type);
		advance(s, sub, k, &rec);
	}
}

/* Put SUB's cursors at the ends: only new events. */
static void
seek_end(struct subs *s, struct sub *sub)
{
	int k;

	for (k = 0; k < R_N; k++) {
		sub->pos[k] = evring_end(&s->ring[k]);
		sub->ord[k] = s->ring[k].nadded;
	}
}

/* ---- result lines ---- */

/* Push the whole lines of BUF (LEN bytes read at the cursor) to SUB as
 * {"push":"result","batch":ID,...}, while it has room.  The bytes
 * consumed. */
static size_t
push_lines(struct subs *s, struct sub *sub, const char *buf, size_t len)
{
	char head[64];
	int hn = snprintf(head, sizeof(head), "{\"push\":\"result\","
			  "\"batch\":%ld,", sub->batch);
	size_t off = 0;

	while (off < len && has_room(sub)) {
		const char *nl = memchr(buf + off, '\n', len - off);
		size_t l;

		if (nl == NULL)
			break;
		l = (size_t)(nl - (buf + off)) + 1;
		if (l > 2 && buf[off] == '{') {
			s->scratch.len = 0;
			ft_buf_add(&s->scratch, head, (size_t)hn);
			ft_buf_add(&s->scratch, buf + off + 1, l - 1);
			push(sub, s->scratch.data, s->scratch.len);
		}
		off += l;
	}
	return off;
}

/* Send SUB the result lines of its batch that count as done and it has
 * not had, while it has room. */
static void
deliver_results(struct subs *s, struct sub *sub)
{
	int over = 0;
	uint64_t done;
	size_t want = READ_FIRST;

	if (sub->rfd < 0 || sub->rover)
		return;
	done = batches_results_done(&s->m->batches, sub->batch, &over);
	while (has_room(sub) && sub->roff < done) {
		ssize_t got;
		size_t used;

		if ((uint64_t)want > done - sub->roff)
			want = (size_t)(done - sub->roff);
		ft_buf_reserve(&s->rbuf, want);
		got = pread(sub->rfd, s->rbuf.data, want, (off_t)sub->roff);
		if (got <= 0) {
			if (got == 0 && over)
				sub->rover = 1;		/* read to its end */
			break;
		}
		used = push_lines(s, sub, s->rbuf.data, (size_t)got);
		sub->roff += used;
		if (used == 0 && (size_t)got == want && has_room(sub))
			want *= 2;	/* a line longer than the read */
		else if (used == 0)
			break;		/* a line still being written */
	}
	if (over && sub->roff >= done)
		sub->rover = 1;
}

void
subs_results(struct subs *s, long batch)
{
	struct sub *sub;

	for (sub = s ? s->list : NULL; sub; sub = sub->next)
		if (sub->batch == batch && sub->rfd >= 0)
			deliver_results(s, sub);
}

/* Set SUB up to stream the result lines of its batch from byte OFFSET.
 * 0, or -1 with ERR. */
static int
results_open(struct subs *s, struct sub *sub, json_int_t offset, char *err,
	     size_t n)
{
	char *path = ft_asprintf("%s/batches/%ld/results.jsonl",
				 s->m->cfg.state_dir, sub->batch);

	if (offset < 0) {
		snprintf(err, n, "subscribe: \"offset\" must be 0 or more");
		free(path);
		return -1;
	}
	sub->rfd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (sub->rfd < 0) {
		snprintf(err, n, "subscribe: batch %ld's results: %s",
			 sub->batch, strerror(errno));
		free(path);
		return -1;
	}
	free(path);
	sub->roff = (uint64_t)offset;
	batches_watch(&s->m->batches, sub->batch, +1);
	return 0;
}

/* ---- status and batch pushes ---- */

static uint64_t
mix(uint64_t h, uint64_t v)
{
	return (h ^ v) * 0x100000001b3ULL;
}

/* What a status shows, in one number: when it is unchanged, so is the
 * status (but for the clocks). */
static uint64_t
fingerprint(const struct subs *s)
{
	const struct master *m = s->m;
	uint64_t h = 0xcbf29ce484222325ULL;
	int i;

	h = mix(h, s->seq);
	h = mix(h, m->counters.results_in);
	h = mix(h, sched_queued(m->sched));
	h = mix(h, sched_open(m->sched));
	h = mix(h, (uint64_t)m->batches.next);
	h = mix(h, m->batches.shown);
	for (i = 0; i < m->nworkers; i++)
		h = mix(mix(mix(h, m->workers[i].state),
			    (uint64_t)m->workers[i].pid),
			(uint64_t)m->workers[i].respawns);
	for (i = 0; i < m->cfg.nnodes; i++)
		h = mix(mix(h, m->nodes[i].state),
			(uint64_t)m->nodes[i].reboots);
	return h;
}

/* Build the status push (once for every subscriber). */
static void
build_status(struct subs *s)
{
	json_t *o = json_pack("{s:s}", "push", "status");
	json_t *st = s->m->up.status(s->m, RECENT_FINISHED);
	char *text;

	json_object_update(o, st);
	text = json_dumps(o, JSON_COMPACT);
	s->status_text.len = 0;
	if (text) {
		ft_buf_adds(&s->status_text, text);
		ft_buf_add(&s->status_text, "\n", 1);
	}
	s->status_gen++;
	free(text);
	json_decref(st);
	json_decref(o);
}

static void
push_status(struct subs *s, struct sub *sub)
{
	if (!sub->status || sub->status_gen == s->status_gen ||
	    s->status_text.len == 0 || !has_room(sub))
		return;
	push(sub, s->status_text.data, s->status_text.len);
	sub->status_gen = s->status_gen;
}

/* Push SUB's batch row if its counts moved since the last one. */
static void
push_batch(struct subs *s, struct sub *sub)
{
	struct batch *b = batches_find(&s->m->batches, sub->batch);
	uint64_t mark;
	json_t *row, *o;
	int finished = 1;
	char *text;

	if (sub->batch == 0 || sub->batch_over || !has_room(sub))
		return;
	mark = b ? mix(mix(batch_total(b), batch_ended(b)),
		       (uint64_t)batch_finished(b)) : 1;
	if (mark == sub->batch_mark)
		return;
	row = batches_lookup(&s->m->batches, sub->batch, &finished);
	if (row == NULL)
		return;
	o = json_pack("{s:s, s:o}", "push", "batch", "batch", row);
	text = json_dumps(o, JSON_COMPACT);
	if (text) {
		s->scratch.len = 0;
		ft_buf_adds(&s->scratch, text);
		ft_buf_add(&s->scratch, "\n", 1);
		push(sub, s->scratch.data, s->scratch.len);
	}
	free(text);
	json_decref(o);
	sub->batch_mark = mark;
	sub->batch_over = finished;
}

/* Status pushes to those who want them, if anything changed. */
static void
status_round(struct subs *s)
{
	struct sub *sub;
	uint64_t fp;
	int any = 0;

	for (sub = s->list; sub; sub = sub->next)
		any |= sub->status;
	if (!any)
		return;
	fp = fingerprint(s);
	if (fp != s->fingerprint || s->status_text.len == 0) {
		s->fingerprint = fp;
		build_status(s);
	}
	for (sub = s->list; sub; sub = sub->next)
		push_status(s, sub);
}

void
subs_stopping(struct subs *s)
{
	struct sub *sub;

	for (sub = s ? s->list : NULL; sub; sub = sub->next)
		push_notice(sub, "stopping", NULL, 0);
}

void
subs_tick(struct subs *s, double now)
{
	struct sub *sub;

	if (s == NULL || s->list == NULL)
		return;
	for (sub = s->list; sub; sub = sub->next) {
		if (sub->mask)
			deliver(s, sub);
		deliver_results(s, sub);
	}
	if (now - s->last_build >= PUSH_PERIOD) {
		s->last_build = now;
		status_round(s);
		for (sub = s->list; sub; sub = sub->next)
			push_batch(s, sub);
	}
	for (sub = s->list; sub; sub = sub->next)
		if (now - sub->last_push >= ALIVE_PERIOD && has_room(sub))
			push_notice(sub, "alive", "ts", ft_wall());
}

/* ---- subscribing ---- */

static struct sub *
find(const struct subs *s, const struct client *c)
{
	struct sub *sub;

	for (sub = s->list; sub; sub = sub->next)
		if (sub->c == c)
			return sub;
	return NULL;
}

void
subs_client_gone(struct subs *s, struct client *c)
{
	struct sub **p;

	for (p = s ? &s->list : NULL; p && *p; p = &(*p)->next)
		if ((*p)->c == c) {
			struct sub *gone = *p;

			*p = gone->next;
			sub_release(s, gone);
			free(gone);
			s->n--;
			return;
		}
}

/* The event types REQ asks for, into *MASK.  0, or -1 with ERR. */
static int
parse_mask(const json_t *req, uint64_t *mask, char *err, size_t n)
{
	const json_t *types = json_object_get(req, "types"), *v;
	size_t i;

	*mask = json_is_true(json_object_get(req, "events")) ?
		(1ULL << EVT_COUNT) - 1 : 0;
	if (json_is_false(json_object_get(req, "task_events")))
		*mask &= ~events_task_types;
	json_array_foreach(types, i, v) {
		int t = events_type(json_string_value(v));

		if (t < 0) {
			snprintf(err, n, "subscribe: types[%zu]: no event type "
				 "\"%s\"", i, json_string_value(v));
			return -1;
		}
		*mask |= 1ULL << t;
	}
	return 0;
}

/* The first pushes of a new subscription, right after its answer:
 * A is the client's id. */
static void
first_pushes(void *ctx, uint64_t a, uint64_t b, const char *text)
{
	struct master *m = ctx;
	struct client *c = control_client(m->control, a);
	struct sub *sub = c ? find(m->subs, c) : NULL;

	(void)b, (void)text;
	if (sub == NULL)
		return;
	if (sub->mask)
		deliver(m->subs, sub);
	if (sub->status) {
		build_status(m->subs);
		push_status(m->subs, sub);
	}
	deliver_results(m->subs, sub);
	push_batch(m->subs, sub);
}

int
subs_subscribe(struct subs *s, struct client *c, const json_t *req,
	       json_t **ans, char *err, size_t n)
{
	const json_t *since = json_object_get(req, "since");
	json_int_t tail = json_integer_value(json_object_get(req, "tail"));
	json_int_t batch = json_integer_value(json_object_get(req, "batch"));
	struct sub *sub, fresh = { .c = c, .rfd = -1 };
	struct evrec rec;
	const char *line;
	int finished;
	json_t *row;

	if (parse_mask(req, &fresh.mask, err, n) == -1)
		return -1;
	if (batch) {
		row = batches_lookup(&s->m->batches, (long)batch, &finished);
		if (row == NULL) {
			snprintf(err, n, "subscribe: no batch %lld",
				 (long long)batch);
			return -1;
		}
		json_decref(row);
	}
	fresh.batch = (long)batch;
	if (json_is_true(json_object_get(req, "results")) &&
	    (batch == 0 || results_open(s, &fresh, json_integer_value(
		    json_object_get(req, "offset")), err, n) == -1)) {
		if (batch == 0)
			snprintf(err, n, "subscribe: \"results\" needs a "
				 "\"batch\"");
		return -1;
	}
	fresh.status = json_is_true(json_object_get(req, "status"));
	fresh.last_push = ft_now();
	if (since)
		seek_since(s, &fresh, json_number_value(since));
	else if (tail > 0)
		seek_since(s, &fresh, 0);
	else
		seek_end(s, &fresh);
	if (tail > 0)
		seek_tail(s, &fresh, (long)tail);
	if ((sub = find(s, c)) == NULL) {
		sub = ft_calloc(1, sizeof(*sub));
		sub->rfd = -1;
		sub->next = s->list;
		s->list = sub;
		s->n++;
	}
	sub_release(s, sub);
	fresh.next = sub->next;
	*sub = fresh;
	*ans = json_pack("{s:b}", "ok", 1);
	if (evring_head(&s->ring[R_OTHER]) < evring_end(&s->ring[R_OTHER])) {
		evring_get(&s->ring[R_OTHER], evring_head(&s->ring[R_OTHER]),
			   &rec, &line);
		json_object_set_new(*ans, "oldest", json_real(rec.ts));
	}
	defer_call(&s->m->defer, first_pushes, control_client_id(c), 0, NULL);
	return 0;
}

/* ---- for the status page ---- */

void
subs_recent(const struct subs *s, int n, struct ft_buf *out)
{
	const struct evring *r = &s->ring[R_OTHER];
	uint64_t pos = evring_head(r), have = r->nadded - r->head_ord;
	struct evrec rec;
	const char *line;
	int first = 1;

	ft_buf_add(out, "[", 1);
	for (; pos < evring_end(r); have--) {
		uint64_t next = evring_get(r, pos, &rec, &line);

		if (have <= (uint64_t)n) {
			if (!first)
				ft_buf_add(out, ",", 1);
			ft_buf_add(out, line, rec.len - 1);	/* no newline */
			first = 0;
		}
		pos = next;
	}
	ft_buf_add(out, "]", 1);
}

/* opstate: the nodes' state that outlives a master (see opstate.h). */
#include "opstate.h"

#include <errno.h>
#include <glob.h>
#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jcheck.h"
#include "jsonl.h"
#include "lease.h"

#define COUNT_MAX 1000000000LL	/* reboots and failures, at most */
#define SECONDS_MAX 1e12	/* times and delays, at most */

/* ---- the text ---- */

/* R as a line of J. */
static void
put_rec(struct jsonl *j, const struct opstate_rec *r)
{
	jsonl_begin(j);
	jsonl_str(j, "node", r->node);
	jsonl_str(j, "state", r->state);
	jsonl_bool(j, "drained", r->drained);
	jsonl_str(j, "reason", r->reason);
	jsonl_int(j, "reboots", r->reboots);
	jsonl_secs(j, "last_reboot", r->last_reboot);
	jsonl_int(j, "failures", r->failures);
	jsonl_int(j, "episode_reboots", r->episode_reboots);
	jsonl_secs(j, "last_failure", r->last_failure);
	jsonl_secs(j, "probe_delay", r->probe_delay);
	jsonl_secs(j, "next_probe", r->next_probe);
	jsonl_end(j);
}

/* A line builder (no file) that starts with OUT's bytes. */
static void
builder(struct jsonl *j, struct ft_buf *out)
{
	memset(j, 0, sizeof(*j));
	j->fd = -1;
	j->crc = JSONL_CRC;
	j->pending = *out;
}

/* The header line of a file of N records, written under EPOCH. */
static void
put_header(struct jsonl *j, size_t n, unsigned long long epoch)
{
	jsonl_begin(j);
	jsonl_str(j, "file", OPSTATE_FILE);
	jsonl_int(j, "version", OPSTATE_VERSION);
	jsonl_int(j, "epoch", (long long)epoch);
	jsonl_int(j, "nodes", (long long)n);
	jsonl_end(j);
}

void
opstate_format(const struct opstate_rec *recs, size_t n,
	       unsigned long long epoch, struct ft_buf *out)
{
	struct jsonl j;
	size_t i;

	builder(&j, out);
	put_header(&j, n, epoch);
	for (i = 0; i < n; i++)
		put_rec(&j, &recs[i]);
	*out = j.pending;
}

int
opstate_rec_equal(const struct opstate_rec *a, const struct opstate_rec *b)
{
	return strcmp(a->node, b->node) == 0 &&
	       strcmp(a->state, b->state) == 0 && a->drained == b->drained &&
	       strcmp(a->reason, b->reason) == 0 &&
	       a->reboots == b->reboots && a->last_reboot == b->last_reboot &&
	       a->failures == b->failures &&
	       a->episode_reboots == b->episode_reboots &&
	       a->last_failure == b->last_failure &&
	       a->probe_delay == b->probe_delay &&
	       a->next_probe == b->next_probe;
}

/* ---- reading ---- */

static const struct jfield header_fields[] = {
	{ "file", JT_STRING, 1 },
	{ "version", JT_INT, 1 },
	{ "epoch", JT_INT, 1 },
	{ "nodes", JT_INT, 1 },
	{ "crc", JT_STRING, 1 },
	{ NULL, 0, 0 },
};

static const struct jfield node_fields[] = {
	{ "node", JT_STRING, 1 },
	{ "state", JT_STRING, 1 },
	{ "drained", JT_BOOL, 1 },
	{ "reason", JT_STRING, 1 },
	{ "reboots", JT_INT, 1 },
	{ "last_reboot", JT_NUMBER, 1 },
	{ "failures", JT_INT, 1 },
	{ "episode_reboots", JT_INT, 1 },
	{ "last_failure", JT_NUMBER, 1 },
	{ "probe_delay", JT_NUMBER, 1 },
	{ "next_probe", JT_NUMBER, 1 },
	{ "crc", JT_STRING, 1 },
	{ NULL, 0, 0 },
};

static void problem(struct opstate_read *r, int line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void
problem(struct opstate_read *r, int line, const char *fmt, ...)
{
	struct opstate_problem *p;
	va_list ap;

	r->problems = ft_realloc(r->problems, (r->nproblems + 1) *
				 sizeof(*r->problems));
	p = &r->problems[r->nproblems++];
	p->line = line;
	va_start(ap, fmt);
	vsnprintf(p->what, sizeof(p->what), fmt, ap);
	va_end(ap);
}

/* Line NO of the file, LINE (LEN bytes, no newline): its object if its
 * checksum matches, else NULL (a problem noted). */
static json_t *
check_line(struct opstate_read *r, int no, const char *line, size_t len)
{
	json_t *o;

	if (!jsonl_crc_ok(line, len)) {
		problem(r, no, jsonl_written_crc(line, len) < 0 ?
			"no checksum (a torn or damaged line)" :
			"checksum mismatch");
		return NULL;
	}
	o = json_loadb(line, len, JSON_REJECT_DUPLICATES, NULL);
	if (!json_is_object(o)) {
		json_decref(o);
		problem(r, no, "not a JSON object");
		return NULL;
	}
	return o;
}

/* The header O (line NO): its node count, or -1 when it is not one (a
 * problem noted), or -2 when the file is of another version. */
static long long
header(struct opstate_read *r, int no, const json_t *o)
{
	struct jerr e;
	long long v;

	if (jcheck_object(o, "", header_fields, &e) == -1 ||
	    jcheck_int_range(o, "", "nodes", 0, COUNT_MAX, &e) == -1) {
		problem(r, no, "not the header: %s%s%s", e.path,
			e.path[0] ? ": " : "", e.msg);
		return -1;
	}
	if (strcmp(jget_str(o, "file", ""), OPSTATE_FILE) != 0) {
		problem(r, no, "not the header: \"file\" is \"%s\"",
			jget_str(o, "file", ""));
		return -1;
	}
	v = jget_int(o, "version", 0);
	if (v != OPSTATE_VERSION) {
		problem(r, no, "version %lld; this ftfarm reads version %d: "
			"the file is not read", v, OPSTATE_VERSION);
		return -2;
	}
	r->epoch = (unsigned long long)jget_int(o, "epoch", 0);
	return jget_int(o, "nodes", 0);
}

/* Are O's fields a node's record (into REC)?  0, or -1 with WHY. */
static int
node_fields_ok(const json_t *o, struct opstate_rec *rec, char *why,
	       size_t n)
{
	static const char *const counts[] = { "reboots", "failures",
					       "episode_reboots" };
	static const char *const times[] = { "last_reboot", "last_failure",
					     "probe_delay", "next_probe" };
	struct jerr e = { "", "" };
	size_t i;
	int bad = jcheck_object(o, "", node_fields, &e) == -1;

	for (i = 0; !bad && i < FT_ARRAY_LEN(counts); i++)
		bad = jcheck_int_range(o, "", counts[i], 0, COUNT_MAX,
				       &e) == -1;
	for (i = 0; !bad && i < FT_ARRAY_LEN(times); i++)
		bad = jcheck_num_range(o, "", times[i], 0, SECONDS_MAX,
				       &e) == -1;
	if (!bad && *jget_str(o, "node", "") == '\0')
		bad = jerr_set(&e, "node", "an empty name") == -1;
	if (!bad && ft_snprintf(rec->state, sizeof(rec->state), "%s",
				jget_str(o, "state", "")) == -1)
		bad = jerr_set(&e, "state", "too long") == -1;
	if (bad) {
		snprintf(why, n, "%s%s%s", e.path, e.path[0] ? ": " : "",
			 e.msg);
		return -1;
	}
	snprintf(rec->reason, sizeof(rec->reason), "%s",
		 jget_str(o, "reason", ""));
	rec->drained = jget_bool(o, "drained", 0);
	rec->reboots = (int)jget_int(o, "reboots", 0);
	rec->last_reboot = jget_num(o, "last_reboot", 0);
	rec->failures = (int)jget_int(o, "failures", 0);
	rec->episode_reboots = (int)jget_int(o, "episode_reboots", 0);
	rec->last_failure = jget_num(o, "last_failure", 0);
	rec->probe_delay = jget_num(o, "probe_delay", 0);
	rec->next_probe = jget_num(o, "next_probe", 0);
	return 0;
}

/* The record of node NAME, or NULL. */
static const struct opstate_rec *
find(const struct opstate_read *r, const char *name)
{
	size_t i;

	for (i = 0; i < r->n; i++)
		if (strcmp(r->recs[i].node, name) == 0)
			return &r->recs[i];
	return NULL;
}

/* Node line NO, O: its record into R, or a problem. */
static void
node_line(struct opstate_read *r, int no, const json_t *o)
{
	struct opstate_rec rec;
	const char *name = jget_str(o, "node", "");
	char why[600];

	memset(&rec, 0, sizeof(rec));
	if (node_fields_ok(o, &rec, why, sizeof(why)) == -1) {
		problem(r, no, "not a node's record: %s", why);
		return;
	}
	if (find(r, name)) {
		problem(r, no, "node \"%s\" a second time", name);
		return;
	}
	rec.node = ft_strdup(name);
	r->recs = ft_realloc(r->recs, (r->n + 1) * sizeof(*r->recs));
	r->recs[r->n++] = rec;
}

/* Line NO of the file, O (NULL when damaged), into R: the header's node
 * count into *WANT, node lines counted in *LINES. */
static void
take_line(struct opstate_read *r, int no, const json_t *o, long long *want,
	  long long *lines)
{
	if (no == 1 && o && json_object_get(o, "node") == NULL) {
		*want = header(r, no, o);
		return;
	}
	if (no == 1 && o)
		problem(r, no, "no header");
	if (no > 1 || o)
		++*lines;
	if (o)
		node_line(r, no, o);
}

void
opstate_parse(const char *text, size_t len, struct opstate_read *r)
{
	size_t off = 0;
	long long want = -1, lines = 0;
	int no = 0;

	memset(r, 0, sizeof(*r));
	r->found = 1;
	if (len == 0)
		problem(r, 0, "the file is empty");
	while (off < len && want != -2) {
		const char *nl = memchr(text + off, '\n', len - off);
		size_t n = nl ? (size_t)(nl - text) - off : len - off;
		json_t *o;

		if (nl == NULL) {
			problem(r, ++no, "torn: no newline at its end");
			lines += no > 1;
			break;
		}
		o = check_line(r, ++no, text + off, n);
		off += n + 1;
		take_line(r, no, o, &want, &lines);
		json_decref(o);
	}
	if (want >= 0 && lines != want)
		problem(r, 0, "the header counts %lld nodes; %lld lines follow",
			want, lines);
}

int
opstate_read(const char *path, struct opstate_read *r, char *err, size_t n)
{
	size_t len;
	char *text = ft_read_file(path, &len);

	memset(r, 0, sizeof(*r));
	if (text == NULL && errno == ENOENT)
		return 0;
	if (text == NULL) {
		snprintf(err, n, "%s: %s", path, strerror(errno));
		return -1;
	}
	opstate_parse(text, len, r);
	free(text);
	return 0;
}

void
opstate_read_free(struct opstate_read *r)
{
	size_t i;

	for (i = 0; i < r->n; i++)
		free((char *)r->recs[i].node);
	free(r->recs);
	free(r->problems);
	memset(r, 0, sizeof(*r));
}

/* ---- the writer ---- */

struct opstate {
	char *path;
	struct store *store;		/* fencing and failures */
	struct opstate_ops ops;
	struct ev_loop *loop;
	ev_async wake;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;

	/* Under mu: what the thread is to write, and what came of it. */
	int stop;
	struct ft_buf todo;		/* the newest text, not taken yet */
	uint64_t todo_gen;		/* 0: nothing to write */
	uint64_t done_gen;		/* the last generation written or failed */
	uint64_t done_seq;		/* writes tried, in all */
	int done_err;			/* its errno, or 0 */
	int lost;			/* the lease went to another epoch */
	struct lease_rec lost_to;

	/* The loop's. */
	struct ft_buf body;		/* the node lines last handed over */
	uint64_t gen;			/* the last generation handed over */
	uint64_t durable;		/* the last one on disk */
	int failed;			/* the last write failed */
	uint64_t seen_seq;		/* done_seq last taken in */
	size_t nrecs;			/* records in body */
};

/* Write TEXT as O's file, synced, if the lease is still ours: 0, or an
 * errno.  *LOST (and *CUR) when another epoch has the lease. */
static int
write_text(struct opstate *o, const struct ft_buf *text, int *lost,
	   struct lease_rec *cur)
{
	int rc = o->store->lease ? lease_check(o->store->lease,
					       o->store->epoch, cur) : 0;

	*lost = rc == 1;
	if (rc == -1)
		return errno ? errno : EIO;
	if (rc == 1)
		return 0;
	if (ft_write_file_durable(o->path, text->data, text->len, 1) == -1)
		return errno;
	return 0;
}

/* The thread: write the newest text whole, each time there is one. */
static void *
writer(void *arg)
{
	struct opstate *o = arg;
	struct ft_buf text = { 0 };
	struct lease_rec cur;
	uint64_t gen;
	int err, lost;

	pthread_mutex_lock(&o->mu);
	while (o->todo_gen != 0 || !o->stop) {
		if (o->todo_gen == 0) {
			pthread_cond_wait(&o->cv, &o->mu);
			continue;
		}
		ft_buf_free(&text);
		text = o->todo;
		memset(&o->todo, 0, sizeof(o->todo));
		gen = o->todo_gen;
		o->todo_gen = 0;
		pthread_mutex_unlock(&o->mu);
		err = write_text(o, &text, &lost, &cur);
		pthread_mutex_lock(&o->mu);
		o->done_gen = gen;
		o->done_seq++;
		o->done_err = err;
		if (lost) {
			o->lost = 1;
			o->lost_to = cur;
		}
		ev_async_send(o->loop, &o->wake);
	}
	pthread_mutex_unlock(&o->mu);
	ft_buf_free(&text);
	return NULL;
}

/* Take in what the thread did: on disk, failed, or fenced off.  NOTIFY:
 * tell the owner. */
static void
take_news(struct opstate *o, int notify)
{
	uint64_t gen, seq;
	int err, lost;
	struct lease_rec to;

	pthread_mutex_lock(&o->mu);
	gen = o->done_gen;
	seq = o->done_seq;
	err = o->done_err;
	lost = o->lost;
	to = o->lost_to;
	pthread_mutex_unlock(&o->mu);
	if (lost)
		store_step_down(&to);
	if (seq == o->seen_seq)
		return;
	o->seen_seq = seq;
	o->failed = err != 0;
	if (err)
		store_fail(o->store, "write", o->path, err);
	else if (gen > o->durable)
		o->durable = gen;
	if (notify && o->ops.saved)
		o->ops.saved(o->ops.ctx, gen, err);
}

static void
on_wake(struct ev_loop *loop, ev_async *w, int revents)
{
	(void)loop, (void)revents;
	take_news(w->data, 1);
}

/* Hand generation GEN over to the thread: the header of N records,
 * then o->body. */
static void
hand_over(struct opstate *o, size_t n, uint64_t gen)
{
	struct ft_buf text = { 0 };
	struct jsonl j;

	builder(&j, &text);
	put_header(&j, n, o->store->epoch);
	ft_buf_add(&j.pending, o->body.data, o->body.len);
	pthread_mutex_lock(&o->mu);
	ft_buf_free(&o->todo);
	o->todo = j.pending;
	o->todo_gen = gen;
	pthread_cond_signal(&o->cv);
	pthread_mutex_unlock(&o->mu);
}

uint64_t
opstate_save(struct opstate *o, const struct opstate_rec *recs, size_t n)
{
	struct ft_buf body = { 0 };
	struct jsonl j;
	size_t i;

	builder(&j, &body);
	for (i = 0; i < n; i++)
		put_rec(&j, &recs[i]);
	body = j.pending;
	if (o->gen > 0 && body.len == o->body.len &&
	    memcmp(body.data, o->body.data, body.len) == 0) {
		ft_buf_free(&body);
		return o->gen;
	}
	ft_buf_free(&o->body);
	o->body = body;
	o->nrecs = n;
	/* Fenced: a master whose epoch has passed leaves here. */
	store_check_lease(o->store, 1);
	hand_over(o, n, ++o->gen);
	return o->gen;
}

uint64_t
opstate_handed(const struct opstate *o)
{
	return o ? o->gen : 0;
}

uint64_t
opstate_durable(const struct opstate *o)
{
	return o ? o->durable : 0;
}

int
opstate_retry(struct opstate *o)
{
	int busy;

	if (o == NULL || !o->failed)
		return 0;
	pthread_mutex_lock(&o->mu);
	busy = o->todo_gen != 0;
	pthread_mutex_unlock(&o->mu);
	if (!busy)
		hand_over(o, o->nrecs, o->gen);
	return -1;
}

int
opstate_set_aside(struct opstate *o)
{
	char *to = ft_asprintf("%s.damaged", o->path);
	int rc;

	store_check_lease(o->store, 1);
	rc = rename(o->path, to);
	if (rc == 0)
		rc = ft_fsync_parent(o->path);
	free(to);
	return rc;
}

/* Remove PATH.tmp.* (a master killed while it wrote one). */
static void
remove_leftovers(const char *path)
{
	char *pattern = ft_asprintf("%s.tmp.*", path);
	glob_t g;
	size_t i;

	if (glob(pattern, GLOB_NOSORT, NULL, &g) == 0) {
		for (i = 0; i < g.gl_pathc; i++)
			unlink(g.gl_pathv[i]);
		globfree(&g);
	}
	free(pattern);
}

struct opstate *
opstate_open(const char *path, struct ev_loop *loop, struct store *store,
	     const struct opstate_ops *ops, char *err, size_t n)
{
	struct opstate *o = ft_calloc(1, sizeof(*o));

	o->path = ft_strdup(path);
	o->store = store;
	o->loop = loop;
	if (ops)
		o->ops = *ops;
	pthread_mutex_init(&o->mu, NULL);
	pthread_cond_init(&o->cv, NULL);
	ev_async_init(&o->wake, on_wake);
	o->wake.data = o;
	if (pthread_create(&o->thread, NULL, writer, o) != 0) {
		snprintf(err, n, "%s: cannot start its writer thread", path);
		pthread_mutex_destroy(&o->mu);
		pthread_cond_destroy(&o->cv);
		free(o->path);
		free(o);
		return NULL;
	}
	ev_async_start(loop, &o->wake);
	remove_leftovers(path);
	return o;
}

void
opstate_close(struct opstate *o)
{
	if (o == NULL)
		return;
	pthread_mutex_lock(&o->mu);
	o->stop = 1;
	pthread_cond_signal(&o->cv);
	pthread_mutex_unlock(&o->mu);
	pthread_join(o->thread, NULL);
	take_news(o, 0);
	ev_async_stop(o->loop, &o->wake);
	pthread_mutex_destroy(&o->mu);
	pthread_cond_destroy(&o->cv);
	ft_buf_free(&o->todo);
	ft_buf_free(&o->body);
	free(o->path);
	free(o);
}

/*
 * batchtext: a batch file's bytes, checked and cut into task specs.
 *
 * The scan reads only the top level: the root object's keys, the
 * punctuation between members and between the elements of "tasks".  Every
 * value it steps over is parsed afterwards (the "name", the "job" by
 * jansson, each task by jparse, which agrees with jansson), so no byte
 * escapes a strict parse.  When the scan finds the text malformed,
 * jansson parses the whole text once more to say where and why, as it
 * would have for any batch file.
 */
#include "batchtext.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "batch.h"
#include "config.h"
#include "hostmem.h"
#include "jcheck.h"
#include "jparse.h"
#include "taskgraph.h"
#include "jpos.h"
#include "memsize.h"
#include "proto.h"
#include "util.h"

#define PER_THREAD_MIN 4096	/* fewer tasks than this: one thread */
#define SPANS_MAPPED (1 << 20)	/* span arrays this big are mapped */

struct scan {
	const char *s;
	size_t len, p;
};

static int
is_ws(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static void
skip_ws(struct scan *sc)
{
	while (sc->p < sc->len && is_ws(sc->s[sc->p]))
		sc->p++;
}

static int
peek(const struct scan *sc)
{
	return sc->p < sc->len ? (unsigned char)sc->s[sc->p] : -1;
}

/* Step over the string at the read position (its quote).  0, or -1 when it
 * does not end.  Its contents are jansson's to judge. */
static int
skip_string(struct scan *sc)
{
	size_t p = sc->p + 1;

	while (p < sc->len) {
		if (sc->s[p] == '\\')
			p += 2;
		else if (sc->s[p] == '"')
			break;
		else
			p++;
	}
	if (p >= sc->len)
		return -1;
	sc->p = p + 1;
	return 0;
}

/* Step over the value at the read position: its end is the byte after
 * its last.  Containers by bracket depth outside strings, scalars up to
 * the next delimiter.  0, or -1 when it does not end. */
static int
skip_value(struct scan *sc)
{
	int depth = 0, c;

	if (peek(sc) == '"')
		return skip_string(sc);
	if (peek(sc) != '{' && peek(sc) != '[') {
		size_t start = sc->p;

		while ((c = peek(sc)) != -1 && c != ',' && c != '}' &&
		       c != ']' && !is_ws((char)c))
			sc->p++;
		return sc->p > start ? 0 : -1;
	}
	while ((c = peek(sc)) != -1) {
		if (c == '"') {
			if (skip_string(sc) == -1)
				return -1;
			continue;
		}
		sc->p++;
		if (c == '{' || c == '[')
			depth++;
		else if ((c == '}' || c == ']') && --depth == 0)
			return 0;
	}
	return -1;
}

/* ---- the top level ---- */

/* What the scan found: the members' value spans by key. */
struct top {
	json_t *obj;			/* name, job; "tasks": []; unknown: null */
	struct bt_span *spans;
	size_t mapped;			/* bytes of the spans' mapping, or 0 */
	uint32_t n, cap;
	int has_tasks;
};

/* The spans of a big batch get a mapping of their own, grown with mremap
 * and unmapped when the batch's tasks are queued.  They are made on the
 * intake thread and dropped on the loop's: in the intake thread's heap
 * their pages would stay after them (the master keeps freed heap memory
 * for the next batch, main.c).  New pages are mapped in one call, not
 * faulted in one by one. */
static void
spans_grow(struct top *t, uint32_t cap)
{
	size_t bytes = (size_t)cap * sizeof(*t->spans), old = t->mapped;
	void *p;

	if (bytes < SPANS_MAPPED) {
		t->spans = ft_realloc(t->spans, bytes);
		t->cap = cap;
		return;
	}
	bytes = (bytes + SPANS_MAPPED - 1) & ~(size_t)(SPANS_MAPPED - 1);
	if (old)
		p = mremap(t->spans, old, bytes, MREMAP_MAYMOVE);
	else
		p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		fprintf(stderr, "ftfarm: out of memory (%zu bytes)\n", bytes);
		abort();
	}
#ifdef MADV_POPULATE_WRITE
	(void)madvise((char *)p + old, bytes - old, MADV_POPULATE_WRITE);
#endif
	if (!old) {
		memcpy(p, t->spans, (size_t)t->n * sizeof(*t->spans));
		free(t->spans);
	}
	t->spans = p;
	t->mapped = bytes;
	t->cap = (uint32_t)(bytes / sizeof(*t->spans));
}

static void
spans_free(struct bt_span *v, size_t mapped)
{
	if (mapped)
		munmap(v, mapped);
	else
		free(v);
}

static void
span_add(struct top *t, size_t off, size_t len)
{
	if (t->n == t->cap)
		spans_grow(t, t->cap ? t->cap * 2 : 1024);
	t->spans[t->n].off = (uint32_t)off;
	t->spans[t->n].len = (uint32_t)len;
	t->spans[t->n].timeout = 0;
	t->n++;
}

/* The elements of the array at the read position, as spans.  0 or -1. */
static int
scan_tasks(struct scan *sc, struct top *t)
{
	size_t start;

	sc->p++;			/* '[' */
	skip_ws(sc);
	if (peek(sc) == ']') {
		sc->p++;
		return 0;
	}
	for (;;) {
		skip_ws(sc);
		start = sc->p;
		if (skip_value(sc) == -1)
			return -1;
		span_add(t, start, sc->p - start);
		skip_ws(sc);
		if (peek(sc) == ']') {
			sc->p++;
			return 0;
		}
		if (peek(sc) != ',')
			return -1;
		sc->p++;
	}
}

/* Parse the LEN bytes at OFF as one JSON value (any type).  NULL when
 * they are not. */
static json_t *
parse_at(const char *s, size_t off, size_t len)
{
	return json_loadb(s + off, len, JSON_REJECT_DUPLICATES |
			  JSON_DECODE_ANY, NULL);
}

/* One member: KEY (parsed) and its value at the read position.  0, or -1
 * when the text is malformed there (or holds the key twice). */
static int
scan_member(struct scan *sc, struct top *t, const char *key)
{
	size_t start = sc->p;
	json_t *v;

	if (json_object_get(t->obj, key))
		return -1;		/* a duplicate: jansson will say so */
	if (strcmp(key, "tasks") == 0 && peek(sc) == '[') {
		t->has_tasks = 1;
		json_object_set_new(t->obj, key, json_array());
		return scan_tasks(sc, t);
	}
	if (skip_value(sc) == -1)
		return -1;
	if (!ft_batch_top_key(key)) {
		json_object_set_new(t->obj, key, json_null());
		return 0;		/* unknown: refused by the check */
	}
	if ((v = parse_at(sc->s, start, sc->p - start)) == NULL)
		return -1;
	json_object_set_new(t->obj, key, v);
	return 0;
}

/* Scan the root object of TEXT into T.  0, or -1 when malformed. */
static int
scan_top(const char *text, size_t len, struct top *t)
{
	struct scan sc = { text, len, 0 };
	size_t kstart;
	json_t *key;
	int rc;

	t->obj = json_object();
	skip_ws(&sc);
	if (peek(&sc) != '{')
		return -1;
	sc.p++;
	skip_ws(&sc);
	if (peek(&sc) == '}') {
		sc.p++;
		goto end;
	}
	for (;;) {
		skip_ws(&sc);
		kstart = sc.p;
		if (peek(&sc) != '"' || skip_string(&sc) == -1)
			return -1;
		if ((key = parse_at(text, kstart, sc.p - kstart)) == NULL ||
		    !json_is_string(key)) {
			json_decref(key);
			return -1;
		}
		skip_ws(&sc);
		if (peek(&sc) != ':') {
			json_decref(key);
			return -1;
		}
		sc.p++;
		skip_ws(&sc);
		rc = scan_member(&sc, t, json_string_value(key));
		json_decref(key);
		if (rc == -1)
			return -1;
		skip_ws(&sc);
		if (peek(&sc) == '}') {
			sc.p++;
			break;
		}
		if (peek(&sc) != ',')
			return -1;
		sc.p++;
	}
end:
	skip_ws(&sc);
	return sc.p == len ? 0 : -1;
}

/* ---- checking the tasks ---- */

struct part {
	const char *text;
	struct ft_buf deps;		/* records (task, count, idx...) of its
					 * tasks with "after", as uint32 */
	struct bt_span *spans;
	const struct ft_plugins *pl;
	const uint8_t *skip;		/* bit per task not to check, or NULL */
	uint32_t nskip;			/* bits in skip */
	uint32_t from, to;		/* its tasks */
	uint32_t bad;			/* the first bad task, or UINT32_MAX */
	json_error_t je;		/* its syntax error, if that */
	struct jerr jerr;		/* its check error, if that */
	int syntax;
};

/* Is task SP the same text as task LAST (NULL: none), found good? */
static int
same_as(const char *text, const struct bt_span *sp,
	const struct bt_span *last)
{
	return last != NULL && last->len == sp->len &&
	       memcmp(text + last->off, text + sp->off, sp->len) == 0;
}

int
batch_text_merge_after(struct batch_text *bt, const json_t *deps)
{
	const char *keys[2] = { "after", "after_any" };
	json_t **lists[2] = { &bt->after, &bt->after_any };
	int k;

	if (deps == NULL)
		return 0;
	for (k = 0; k < 2; k++) {
		json_t *more = json_object_get(deps, keys[k]);

		if (json_array_size(more) == 0)
			continue;
		if (*lists[k] == NULL) {
			*lists[k] = json_array();
		} else {
			json_t *own = json_copy(*lists[k]);

			json_decref(*lists[k]);
			*lists[k] = own;
		}
		json_array_extend(*lists[k], more);
	}
	return bt->job && (bt->after || bt->after_any) ? -1 : 0;
}

int
batch_text_strip(const json_t *task, char **text)
{
	json_t *own;
	char *s;
	int fits;

	if (json_object_get(task, "after") == NULL)
		return 0;
	own = json_copy((json_t *)task);
	json_object_del(own, "after");
	s = json_dumps(own, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(own);
	fits = s != NULL && strlen(s) <= FT_SPEC_MAX;
	if (fits && text)
		*text = s;
	else
		free(s);
	return fits;
}

/* Keep task I's "after" (checked, or NULL) in DEPS as a record: where it
 * starts, or SIZE_MAX when there is none. */
static size_t
keep_after(struct ft_buf *deps, uint32_t i, const json_t *after)
{
	size_t at = deps->len, k;
	uint32_t v;

	if (json_array_size(after) == 0)
		return SIZE_MAX;
	v = i;
	ft_buf_add(deps, &v, 4);
	v = (uint32_t)json_array_size(after);
	ft_buf_add(deps, &v, 4);
	for (k = 0; k < json_array_size(after); k++) {
		v = (uint32_t)json_integer_value(json_array_get(after, k));
		ft_buf_add(deps, &v, 4);
	}
	return at;
}

/* The record at REC again, for task I (the same text).  Where the new
 * one starts. */
static size_t
keep_again(struct ft_buf *deps, size_t rec, uint32_t i)
{
	uint32_t count;
	size_t at = deps->len;

	memcpy(&count, deps->data + rec + 4, 4);
	ft_buf_add(deps, &i, 4);
	ft_buf_reserve(deps, (size_t)(count + 1) * 4);
	ft_buf_add(deps, deps->data + rec + 4, (size_t)(count + 1) * 4);
	return at;
}

/* Check tasks FROM..TO of P, stopping at the first bad one.  A task
 * that is the same text as the last good one is good alike, and needs
 * what that one needs: batches of many identical tasks (the same command
 * over and over, no-ops) are parsed once, not once per task. */
static void *
check_part(void *arg)
{
	struct part *p = arg;
	const struct bt_span *last = NULL;
	char path[64];
	struct ft_need need;
	uint32_t i;
	int kind;

	size_t last_rec = SIZE_MAX;

	p->bad = UINT32_MAX;
	for (i = p->from; i < p->to; i++) {
		struct bt_span *sp = &p->spans[i];
		json_t *t;

		if (p->skip && i < p->nskip &&
		    (p->skip[i / 8] & (1u << (i % 8)))) {
			sp->kind = -1;
			continue;
		}
		if (same_as(p->text, sp, last)) {
			sp->timeout = last->timeout;
			sp->kind = last->kind;
			sp->cpus = last->cpus;
			sp->gpus = last->gpus;
			sp->mem = last->mem;
			sp->treq = last->treq;
			sp->files = last->files;
			if (last_rec != SIZE_MAX)
				last_rec = keep_again(&p->deps, last_rec, i);
			continue;
		}
		t = jparse(p->text + sp->off, sp->len,
			   JSON_REJECT_DUPLICATES, &p->je);
		if (t == NULL) {
			p->syntax = 1;
			p->bad = i;
			break;
		}
		jpath_index(path, sizeof(path), "tasks", i);
		if ((kind = ft_batch_check_task_need(t, path, p->pl, &need,
						     &p->jerr)) == -1) {
			json_decref(t);
			p->bad = i;
			break;
		}
		if (sp->len > FT_SPEC_MAX && !batch_text_strip(t, NULL)) {
			jerr_set(&p->jerr, path, "task is %u bytes, more than %d",
				 sp->len, FT_SPEC_MAX);
			json_decref(t);
			p->bad = i;
			break;
		}
		sp->timeout = ft_task_timeout(t, 0);
		sp->kind = (int8_t)kind;
		sp->cpus = (uint16_t)need.cpus;
		sp->gpus = (uint8_t)need.gpus & 0x7f;
		sp->mem = memsize_mib(need.mem);
		sp->treq = need.time_request;
		sp->files = need.files != 0;
		last_rec = keep_after(&p->deps, i, json_object_get(t, "after"));
		json_decref(t);
		last = sp;
	}
	return NULL;
}

/* Format the check error JERR of TEXT as "FILE:LINE:COL: KEY: MSG". */
static void
check_error(const char *file, const char *text, size_t len,
	    const struct jerr *jerr, char *err, size_t n)
{
	struct jpos *jp = jpos_build(text, len);

	jcheck_format(jerr, file, jp, err, n);
	jpos_free(jp);
}

/* The tasks of G, the batch's tasks BASE on, each wait only for a task
 * before it (an add's: tasks the batch has, or earlier ones of the add):
 * no cycle can be made.  0, or -1 with *TASK and WHY. */
static int
check_earlier(const struct taskgraph *g, uint32_t base, uint32_t *task,
	      char *why, size_t n)
{
	uint32_t i, k;

	for (i = 0; i < g->n; i++)
		for (k = g->off[i]; k < g->off[i + 1]; k++)
			if (g->idx[k] >= base + i) {
				*task = i;
				snprintf(why, n, "task %u is not before it (it is "
					 "task %u): a task added waits only for "
					 "tasks the batch has", g->idx[k],
					 base + i);
				return -1;
			}
	return 0;
}

/* BT's tasks' "after" lists from the records of its NT PARTS (in task
 * order), checked (taskgraph.h): none, no graph.  0, or -1 with ERR. */
static int
build_graph(struct batch_text *bt, struct part *parts, int nt,
	    const char *file, char *err, size_t n)
{
	struct taskgraph_builder b;
	struct jerr jerr;
	char why[200], at[64];
	uint32_t i = 0, task, rec[2];
	int k, any = 0;

	for (k = 0; k < nt; k++)
		any |= parts[k].deps.len > 0;
	if (!any)
		return 0;
	taskgraph_init(&b);
	for (k = 0; k < nt; k++) {
		size_t off = 0;

		while (off < parts[k].deps.len) {
			memcpy(rec, parts[k].deps.data + off, 8);
			while (i < rec[0]) {
				taskgraph_add(&b, NULL, 0);
				i++;
			}
			taskgraph_add(&b, (const uint32_t *)(void *)
				      (parts[k].deps.data + off + 8), rec[1]);
			i++;
			off += 8 + (size_t)rec[1] * 4;
		}
	}
	while (i < bt->ntasks) {
		taskgraph_add(&b, NULL, 0);
		i++;
	}
	taskgraph_take(&b, &bt->graph);
	if (bt->base > 0 ? check_earlier(&bt->graph, bt->base, &task, why,
					 sizeof(why)) == 0 :
	    taskgraph_check(&bt->graph, &task, why, sizeof(why)) == 0)
		return 0;
	jpath_index(at, sizeof(at), "tasks", task);
	jpath_key(jerr.path, sizeof(jerr.path), at, "after");
	snprintf(jerr.msg, sizeof(jerr.msg), "%s", why);
	check_error(file, bt->text, bt->len, &jerr, err, n);
	return -1;
}

/* Check every task of BT, on up to THREADS threads.  0, or -1 with ERR
 * (the first bad task's). */
static int
check_tasks(struct batch_text *bt, const char *file,
	    const struct ft_plugins *pl, int threads, const uint8_t *skip,
	    uint32_t nskip, char *err, size_t n)
{
	struct part parts[16];
	pthread_t tid[16];
	int k, nt = threads < 1 ? 1 : threads > 16 ? 16 : threads, started[16];
	struct part *first = NULL;

	if (bt->ntasks < (uint32_t)nt * PER_THREAD_MIN)
		nt = 1;
	for (k = 0; k < nt; k++) {
		parts[k] = (struct part){
			.text = bt->text, .spans = bt->spans, .pl = pl,
			.skip = skip, .nskip = nskip,
			.from = (uint32_t)((uint64_t)bt->ntasks * k / nt),
			.to = (uint32_t)((uint64_t)bt->ntasks * (k + 1) / nt),
		};
		started[k] = k > 0 &&
			     pthread_create(&tid[k], NULL, check_part,
					    &parts[k]) == 0;
	}
	check_part(&parts[0]);
	for (k = 1; k < nt; k++) {
		if (started[k])
			pthread_join(tid[k], NULL);
		else
			check_part(&parts[k]);
	}
	for (k = 0; k < nt && first == NULL; k++)
		if (parts[k].bad != UINT32_MAX)
			first = &parts[k];
	if (first == NULL) {
		int rc = build_graph(bt, parts, nt, file, err, n);

		for (k = 0; k < nt; k++)
			ft_buf_free(&parts[k].deps);
		return rc;
	}
	for (k = 0; k < nt; k++)
		ft_buf_free(&parts[k].deps);
	if (first->syntax)
		jcheck_json_error(file, bt->text, bt->spans[first->bad].off,
				  bt->spans[first->bad].len, &first->je, err, n);
	else
		check_error(file, bt->text, bt->len, &first->jerr, err, n);
	return -1;
}

/* The scan found the text malformed (or not an object): let jansson and
 * the batch check say where and why, as for any batch file. */
static void
syntax_error(const char *file, const char *text, size_t len,
	     const struct ft_plugins *pl, char *err, size_t n)
{
	json_error_t je;
	struct jerr jerr;
	json_t *all = json_loadb(text, len, JSON_REJECT_DUPLICATES |
				 JSON_DECODE_ANY, &je);

	if (all == NULL) {
		jcheck_json_error(file, text, 0, len, &je, err, n);
		return;
	}
	if (ft_batch_check(all, pl, &jerr) == -1)
		check_error(file, text, len, &jerr, err, n);
	else
		(void)ft_snprintf(err, n, "%s: cannot read the batch",
				  file ? file : "<input>");
	json_decref(all);
}

int
batch_text_scan(struct batch_text *bt, const char *file, char *text,
		size_t len, const struct ft_plugins *pl, char *err, size_t n)
{
	struct top t = { 0 };
	struct jerr jerr;

	memset(bt, 0, sizeof(*bt));
	bt->text = text;
	bt->len = len;
	if (len > UINT32_MAX) {
		(void)ft_snprintf(err, n, "%s: more than 4 GiB", file);
		goto fail;
	}
	if (scan_top(text, len, &t) == -1) {
		syntax_error(file, text, len, pl, err, n);
		goto fail;
	}
	if (ft_batch_check_top(t.obj, t.n, pl, &jerr) == -1) {
		check_error(file, text, len, &jerr, err, n);
		goto fail;
	}
	bt->spans = t.spans;
	bt->spans_mapped = t.mapped;
	bt->ntasks = t.n;
	t.spans = NULL;
	bt->name = ft_strdup(ft_batch_name(t.obj));
	bt->job = json_incref(json_object_get(t.obj, "job"));
	bt->priority = (int)jget_int(t.obj, "priority", 0);
	bt->open = json_is_true(json_object_get(t.obj, "open"));
	bt->after = json_incref(json_object_get(t.obj, "after"));
	bt->after_any = json_incref(json_object_get(t.obj, "after_any"));
	json_decref(t.obj);
	return 0;
fail:
	json_decref(t.obj);
	spans_free(t.spans, t.mapped);
	batch_text_free(bt);
	return -1;
}

int
batch_text_check(struct batch_text *bt, const char *file,
		 const struct ft_plugins *pl, int threads, const uint8_t *skip,
		 uint32_t nskip, char *err, size_t n)
{
	if (bt->job == NULL &&
	    check_tasks(bt, file, pl, threads, skip, nskip, err, n) == -1) {
		batch_text_free(bt);
		return -1;
	}
	return 0;
}

int
batch_text_read(struct batch_text *bt, const char *file, char *text,
		size_t len, const struct ft_plugins *pl, int threads,
		char *err, size_t n)
{
	if (batch_text_scan(bt, file, text, len, pl, err, n) == -1)
		return -1;
	return batch_text_check(bt, file, pl, threads, NULL, 0, err, n);
}

/* Does some node of CFG have CPUS slots, GPUS GPUs and MEM MiB (DEF:
 * what a node without "mem" has)?  0, or -1 with JERR set for the task
 * at PATH. */
static int
node_fits(const struct ft_config *cfg, int cpus, int gpus, uint32_t mem,
	  uint64_t def, const char *path, struct jerr *jerr)
{
	int i, most_c = 0, most_g = 0;
	uint64_t most_m = 0, m;
	char at[96], b1[32], b2[32];

	/* Where nodes may join, one that has them may yet come. */
	if (ft_config_joinable(cfg))
		return 0;
	for (i = 0; i < cfg->nnodes; i++) {
		const struct ft_node *nd = &cfg->nodes[i];

		m = ft_node_mem(nd, def);
		if (nd->workers >= cpus && nd->ngpus >= gpus &&
		    m >= (uint64_t)mem << 20)
			return 0;
		most_c = nd->workers > most_c ? nd->workers : most_c;
		most_g = nd->ngpus > most_g ? nd->ngpus : most_g;
		most_m = m > most_m ? m : most_m;
	}
	if (cpus > most_c) {
		jpath_key(at, sizeof(at), path, "cpus");
		return jerr_set(jerr, at, "no node has %d slots (the most: %d)",
				cpus, most_c);
	}
	if (((uint64_t)mem << 20) > most_m) {
		jpath_key(at, sizeof(at), path, "mem");
		return jerr_set(jerr, at, "no node has %s of memory (the most: "
				"%s)", memsize_format((uint64_t)mem << 20, b1,
						      sizeof(b1)),
				memsize_format(most_m, b2, sizeof(b2)));
	}
	jpath_key(at, sizeof(at), path, "gpus");
	if (gpus > most_g)
		return jerr_set(jerr, at, "no node has %d GPUs (the most: %d)",
				gpus, most_g);
	return jerr_set(jerr, at, "no node has %d slots, %d GPUs and that "
			"memory together", cpus, gpus);
}

/* Can a node of CFG ever have TREQ seconds left for task I?  Only a
 * farm whose nodes all come from its allocation queues knows the most
 * it will have: the longest a queue gives.  0, or -1 with JERR set. */
static int
time_fits(const struct ft_config *cfg, uint32_t treq, uint32_t i,
	  struct jerr *jerr)
{
	double most;
	char path[64], at[96];

	if (treq == 0 || !cfg->no_nodes || cfg->nqueues == 0 ||
	    treq <= (most = ft_config_longest(cfg)))
		return 0;
	jpath_index(path, sizeof(path), "tasks", i);
	jpath_key(at, sizeof(at), path, "time_request");
	return jerr_set(jerr, at, "no allocation queue gives a node %u s "
			"(the longest: %.0f s of a time_limit_s, less what an "
			"agent keeps to give its tasks back)", treq, most);
}

int
batch_text_fit(const struct batch_text *bt, const char *file,
	       const struct ft_config *cfg, char *err, size_t n)
{
	const struct bt_span *fit = NULL;	/* the last shape that fits */
	struct jerr jerr;
	char path[64];
	uint64_t def = 0;
	uint32_t i;

	for (i = 0; i < bt->ntasks; i++) {
		const struct bt_span *sp = &bt->spans[i];

		if (time_fits(cfg, sp->treq, i, &jerr) == -1) {
			check_error(file, bt->text, bt->len, &jerr, err, n);
			return -1;
		}
		if ((sp->cpus <= 1 && sp->gpus == 0 && sp->mem == 0) ||
		    (fit && fit->cpus == sp->cpus && fit->gpus == sp->gpus &&
		     fit->mem == sp->mem))
			continue;
		if (sp->mem && def == 0)
			def = hostmem_default();
		jpath_index(path, sizeof(path), "tasks", i);
		if (node_fits(cfg, sp->cpus, sp->gpus, sp->mem, def, path,
			      &jerr) == -1) {
			check_error(file, bt->text, bt->len, &jerr, err, n);
			return -1;
		}
		fit = sp;
	}
	return 0;
}

void
batch_text_free(struct batch_text *bt)
{
	free(bt->text);
	free(bt->name);
	spans_free(bt->spans, bt->spans_mapped);
	json_decref(bt->job);
	json_decref(bt->after);
	json_decref(bt->after_any);
	taskgraph_free(&bt->graph);
	memset(bt, 0, sizeof(*bt));
}

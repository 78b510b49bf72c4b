/* events: the master's events.jsonl (see events.h). */
#include "events.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "store.h"
#include "util.h"

int
events_open(struct events *ev, const char *path, int task_events)
{
	memset(ev, 0, sizeof(*ev));
	ev->task_events = task_events;
	ev->tap = NULL;
	ev->tap_ctx = NULL;
	ev->write_errors = 0;
	ev->path = ft_strdup(path);
	if (jsonl_open(&ev->out, path, 0) == -1) {
		free(ev->path);
		ev->path = NULL;
		return -1;
	}
	/* Room for the lines of a burst (a pass of tasks and the results
	 * of a poll, flushed by the chunk) from the start: grown by
	 * doubling, the buffer was copied a dozen times into fresh pages
	 * during the first big batch. */
	ft_buf_reserve(&ev->out.pending, EVENTS_BURST_BYTES);
	return 0;
}

void
events_set_store(struct events *ev, struct store *s)
{
	ev->store = s;
}

int
events_flush(struct events *ev)
{
	static int last_errno;
	long rc;

	if (ev->store) {
		rc = store_write(ev->store, &ev->out, ev->path);
	} else {
		rc = jsonl_flush(&ev->out);
		if (rc == -1 && errno != last_errno)
			log_warn("%s", ev->path ? ev->path : "events.jsonl");
		last_errno = rc == -1 ? errno : 0;
	}
	if (rc == -1) {
		ev->write_errors++;
		return -1;
	}
	if (ev->dropped && jsonl_pending(&ev->out) == 0) {
		unsigned long long n = ev->dropped;

		ev->dropped = 0;
		ev_events_dropped(ev, (long long)n);
	}
	return 0;
}

void
events_close(struct events *ev)
{
	events_flush(ev);
	if (ev->store)
		store_forget(ev->store, &ev->out);
	jsonl_close(&ev->out);
	free(ev->path);
	ev->path = NULL;
}

void
events_set_tap(struct events *ev, events_tap_fn fn, void *ctx)
{
	ev->tap = fn;
	ev->tap_ctx = ctx;
}

int
events_type(const char *name)
{
	size_t i;

	for (i = 0; name && i < events_nschema; i++)
		if (strcmp(events_schema[i].name, name) == 0)
			return (int)i;
	return -1;
}

/* Now, in whole microseconds: the "ts" the line shows (jsonl's six
 * decimals) is then exactly the number the tap is given, so that a
 * subscriber's "since" of a ts it was shown finds that event again. */
static double
event_ts(void)
{
	return (double)llround(ft_wall() * 1e6) / 1e6;
}

/* The line begun at START of the pending text, stamped TS, was ended:
 * show it to the tap. */
static void
tapped(struct events *ev, enum ev_type type, int flags, double ts,
       size_t start)
{
	if (ev->tap)
		ev->tap(ev->tap_ctx, type, flags, ts,
			ev->out.pending.data + start,
			ev->out.pending.len - start);
}

long
events_size(struct events *ev)
{
	return ev->out.fd >= 0 ? (long)lseek(ev->out.fd, 0, SEEK_END) : 0;
}

int
events_rotate(struct events *ev, int keep)
{
	int rc = 0;

	if (events_flush(ev) == -1)
		return -1;	/* nothing may be left behind in memory */
	if (ev->store)
		store_forget(ev->store, &ev->out);
	jsonl_close(&ev->out);
	if (ft_rotate(ev->path, keep) == -1)
		rc = -1;
	if (jsonl_open(&ev->out, ev->path, 0) == -1)
		rc = -1;
	return rc;
}

/* May another event be kept in memory?  Past EVENTS_MAX_PENDING unwritten
 * bytes (the state dir failing) events are counted, not kept. */
static int
room(struct events *ev)
{
	if (jsonl_pending(&ev->out) < EVENTS_MAX_PENDING)
		return 1;
	ev->dropped++;
	return 0;
}

/* ---- the emitters, generated from FT_EVENTS ---- */

#define EV_PUT_int(ev, key, v) jsonl_int(&(ev)->out, key, v)
#define EV_PUT_str(ev, key, v) jsonl_str(&(ev)->out, key, v ? v : "")
#define EV_PUT_num(ev, key, v) jsonl_num(&(ev)->out, key, v)
#define EV_PUT_bool(ev, key, v) jsonl_bool(&(ev)->out, key, v)
#define EV_PUT_ostr(ev, key, v)						\
	do {								\
		if (v)							\
			jsonl_str(&(ev)->out, key, v);			\
	} while (0)
#define EV_PUT_obool(ev, key, v)					\
	do {								\
		if (v)							\
			jsonl_bool(&(ev)->out, key, 1);			\
	} while (0)
#define EV_PUT(type, key) EV_PUT_##type(ev, #key, key);

#define EV_DEFINE(name, flags)						\
	void ev_##name(struct events *ev EV_FIELDS_##name(EV_PARAM))	\
	{								\
		size_t start_ = ev->out.pending.len;			\
		double ts_;						\
									\
		if ((((flags) & EVF_TASK) && !ev->task_events) ||	\
		    !room(ev))						\
			return;						\
		ts_ = event_ts();					\
		jsonl_event(&ev->out, #name, ts_);			\
		EV_FIELDS_##name(EV_PUT)				\
		jsonl_end(&ev->out);					\
		tapped(ev, EVT_##name, flags, ts_, start_);		\
		if (((flags) & EVF_NOW) && ev->store)			\
			ev->urgent = 1;					\
		else if ((flags) & EVF_NOW)				\
			events_flush(ev);				\
		else if (jsonl_pending(&ev->out) >= JSONL_CHUNK &&	\
			 ev->store && store_ok(ev->store))		\
			ev->urgent = 1;	/* a chunk: after the results */ \
	}
FT_EVENTS(EV_DEFINE)
#undef EV_DEFINE

/* ---- the schema, for the manual's list (man/ftfarm-events.7) ---- */

#define EV_SCHEMA_KEY_int(key) " " #key
#define EV_SCHEMA_KEY_str(key) " " #key
#define EV_SCHEMA_KEY_num(key) " " #key
#define EV_SCHEMA_KEY_bool(key) " " #key
#define EV_SCHEMA_KEY_ostr(key) " " #key "?"
#define EV_SCHEMA_KEY_obool(key) " " #key "?"
#define EV_SCHEMA_KEY(type, key) EV_SCHEMA_KEY_##type(key)
#define EV_SCHEMA_ROW(name, flags)					\
	{ #name, "" EV_FIELDS_##name(EV_SCHEMA_KEY) },
const struct event_schema events_schema[] = {
	FT_EVENTS(EV_SCHEMA_ROW)
};
#undef EV_SCHEMA_ROW
const size_t events_nschema = FT_ARRAY_LEN(events_schema);

#define EV_TASK_BIT(name, flags)					\
	| ((flags) & EVF_TASK ? 1ULL << EVT_##name : 0)
const uint64_t events_task_types = 0 FT_EVENTS(EV_TASK_BIT);
#undef EV_TASK_BIT

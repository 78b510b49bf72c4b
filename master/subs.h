/*
 * subs: the control socket's subscriptions (the protocol is in
 * common/ctl.h, "subscribe").
 *
 * Every event line the master writes also goes into one of two rings of
 * recent events kept in memory (task events in their own, so that a flood
 * of them does not push the rare ones out), each line with a sequence
 * number.  A subscriber is a client with a cursor in each ring: it is sent
 * the lines after its cursors, in sequence order, as long as less than
 * SUBS_MAX_QUEUED bytes wait to be written to it.  A subscriber that
 * keeps up gets each line as it is made; one that falls behind is caught
 * up from the rings by the cron, and one whose lines left the rings before
 * they could be sent is told how many it missed.  So past events ("since",
 * "tail") and live ones come the same way, in order, and nothing queued
 * for a client grows past the bound.
 *
 * Status and batch pushes are built by the cron at most every quarter
 * second, only when something changed, once for all who asked; a
 * subscriber whose queue is full skips one and gets the next.
 *
 * A batch's result lines are streamed from its results.jsonl itself: a
 * subscriber's cursor is a byte offset in the file, moved up to what
 * counts as done (store.h) as fast as the subscriber reads, so none is
 * ever skipped and none waits in the master's memory.
 */
#ifndef FT_SUBS_H
#define FT_SUBS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "events.h"
#include "util.h"

struct master;
struct client;
struct subs;

/* Bytes that may wait to be written to a subscriber before pushes wait. */
#define SUBS_MAX_QUEUED (256 * 1024)

/* Subscriptions of M, watching M's events (the events' tap is set). */
struct subs *subs_new(struct master *m);
void subs_free(struct subs *s);

/* subscribe REQ (checked against its fields) from client C: set up (or
 * replace) C's subscription.  0 with *ANS (the answer; pushes follow it),
 * or -1 with ERR. */
int subs_subscribe(struct subs *s, struct client *c, const json_t *req,
		   json_t **ans, char *err, size_t n);
/* Client C is going: forget its subscription. */
void subs_client_gone(struct subs *s, struct client *c);
/* More result lines of batch BATCH count as done: push them to those who
 * stream them. */
void subs_results(struct subs *s, long batch);
/* The master is stopping: tell every subscriber ({"push":"stopping"}),
 * so that its client can tell a stop from a master that died. */
void subs_stopping(struct subs *s);
/* Periodic work (the cron): catch up, status and batch pushes. */
void subs_tick(struct subs *s, double now);

/* The last N events (not task events) as a JSON array's text, appended
 * to OUT. */
void subs_recent(const struct subs *s, int n, struct ft_buf *out);
/* Subscribers now; events skipped for slow subscribers so far. */
int subs_count(const struct subs *s);
uint64_t subs_dropped(const struct subs *s);

/* The events tap (events.h). */
void subs_on_event(void *ctx, enum ev_type type, int flags, double ts,
		   const char *line, size_t len);

#endif

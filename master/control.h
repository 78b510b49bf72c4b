/*
 * control: the Unix socket the ftfarm CLI talks to (see common/ctl.h).
 *
 * One request per line in, one answer per line out.  Only the master's
 * own user (or root) may connect.  This module is the socket and its
 * clients: reading lines, queueing answers, closing; what a line means is
 * its owner's business (commands.h), handed each complete line.
 */
#ifndef FT_CONTROL_H
#define FT_CONTROL_H

#include <ev.h>
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

struct control;
struct client;

struct control_ops {
	void *ctx;
	/* Client C sent one request line (LEN bytes, no newline). */
	void (*request)(void *ctx, struct client *c, const char *line,
			size_t len);
	/* Client C is being closed (may be NULL: nobody is told). */
	void (*closed)(void *ctx, struct client *c);
};

/* Listen at PATH (a stale socket there is replaced).  The control, or
 * NULL with ERR. */
struct control *control_open(struct ev_loop *loop, const char *path,
			     const struct control_ops *ops, char *err,
			     size_t n);
/* Push out pending answers (bounded), close every client and the socket,
 * remove it. */
void control_close(struct control *ctl);

/* Handed a client's body: DATA (LEN bytes, malloc'd, taken over). */
typedef void (*control_body_fn)(void *ctx, struct client *c, char *data,
				size_t len);

/* The next LEN bytes C sends, after the request line being handled, are a
 * body and not request lines: hand them to DONE(CTX, ...) once they have
 * all come.  LEN must be at most FT_CTL_MAX_BODY. */
void control_read_body(struct client *c, size_t len, control_body_fn done,
		       void *ctx);
/* The CTX the control was opened with, from one of its clients. */
void *control_owner(const struct client *c);
/* C's id, unique for the master's life; the client of ID, or NULL once it
 * has gone. */
uint64_t control_client_id(const struct client *c);
struct client *control_client(struct control *ctl, uint64_t id);

/* C's request is answered later (a wait, a batch being read): its next
 * request lines wait, so that answers keep the order of the requests,
 * until control_resume(C) after that answer. */
void control_hold(struct client *c);
void control_resume(struct client *c);

/* Queue ANSWER (one line) for C. */
void control_send(struct client *c, const json_t *answer);
/* Queue TEXT (LEN bytes: whole lines, newlines included) for C as it is:
 * a push to a subscriber, not an answer. */
void control_push(struct client *c, const char *text, size_t len);
/* Bytes queued for C and not yet written. */
size_t control_pending(const struct client *c);
/* Queue {"ok": false, "error": MSG} for C. */
void control_error(struct client *c, const char *msg);
/* The batch C waits for (0 for none); set it. */
long control_waiting(const struct client *c);
void control_set_waiting(struct client *c, long batch);
/* Call FN(C, ARG) for every client. */
void control_foreach(struct control *ctl, void (*fn)(struct client *c,
						      void *arg), void *arg);
/* Clients connected now. */
int control_nclients(const struct control *ctl);

#endif

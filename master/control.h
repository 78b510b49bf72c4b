/*
 * control: the Unix socket the ftfarm CLI talks to (see common/ctl.h).
 *
 * One request per line in, one answer per line out, in order.  Any local
 * user may connect (the socket's mode and group come from the config);
 * what a user may ask is decided above, from the peer's credentials this
 * layer reads at accept (SO_PEERCRED).  This module is the socket and its
 * clients, within limits: a request line's size, what may wait to be
 * written to a client that does not read (past it the client is dropped),
 * clients in all and per user, and how long a client may stay idle.  When
 * descriptors run out, a reserve one lets the newcomer be told and closed
 * instead of leaving the socket to fill up.  What a line means is its
 * owner's business (commands.h), handed each complete line.
 */
#ifndef FT_CONTROL_H
#define FT_CONTROL_H

#include <ev.h>
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

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

struct control_limits {
	size_t max_line;		/* a request line, bytes */
	size_t max_output;		/* answers waiting for a client, bytes */
	int max_clients;		/* clients at once */
	int max_per_uid;		/* clients of one user at once */
	double idle_timeout;		/* seconds a client may say nothing */
	unsigned mode;			/* the socket's mode */
	const char *group;		/* the socket's group, or NULL */
};

/* Listen at PATH (a stale socket there is replaced: the caller holds the
 * state dir's lock).  The control, or NULL with ERR. */
struct control *control_open(struct ev_loop *loop, const char *path,
			     const struct control_ops *ops,
			     const struct control_limits *lim, char *err,
			     size_t n);
/* Push out pending answers (bounded), close every client and the socket,
 * remove it. */
void control_close(struct control *ctl);
/* Periodic work: clients idle past the timeout go.  NOW monotonic. */
void control_tick(struct control *ctl, double now);

/* Take over FD, a connection authenticated elsewhere as UID (remote.h),
 * as a client; DATA (LEN bytes) is what it sent already.  0, or -1 when
 * it is refused over the caps (FD then told so and closed). */
int control_adopt(struct control *ctl, int fd, uid_t uid, const char *data,
		  size_t len);

/* Handed a client's body NAME: DATA (LEN bytes, malloc'd, taken over). */
typedef void (*control_body_fn)(void *ctx, struct client *c,
				const char *name, char *data, size_t len);

/* The next LEN bytes C sends, after the request line being handled, are a
 * body called NAME and not request lines: hand them to DONE(CTX, ...) once
 * they have all come. */
void control_read_body(struct client *c, size_t len, const char *name,
		       control_body_fn done, void *ctx);
/* The same with TAG, the caller's word on the body, for DONE to read
 * with control_body_tag(C). */
void control_read_body_tagged(struct client *c, size_t len, const char *name,
			      control_body_fn done, void *ctx, uint64_t tag);
uint64_t control_body_tag(const struct client *c);
/* The CTX the control was opened with, from one of its clients. */
void *control_owner(const struct client *c);
/* C's id, unique for the master's life; the client of ID, or NULL once it
 * has gone. */
uint64_t control_client_id(const struct client *c);
struct client *control_client(struct control *ctl, uint64_t id);
/* The user and process at the other end of C (SO_PEERCRED at accept). */
uid_t control_peer_uid(const struct client *c);
pid_t control_peer_pid(const struct client *c);

/* C's request is answered later (a wait, a batch being read): its next
 * request lines wait, so that answers keep the order of the requests,
 * until control_resume(C) after that answer. */
void control_hold(struct client *c);
void control_resume(struct client *c);

/* C is done with: the answers queued for it are written, then it is
 * closed; nothing it sends from now on is read (the rest of a request
 * refused before its end: a line past the bound, a body not taken). */
void control_end(struct client *c);
/* Queue ANSWER (one line; "v" is set in it) for C.  A client whose queue
 * passes the output limit is dropped. */
void control_send(struct client *c, json_t *answer);
/* Queue TEXT (LEN bytes: whole lines, newlines included) for C as it is:
 * a push to a subscriber, not an answer (subs.h bounds what it queues). */
void control_push(struct client *c, const char *text, size_t len);
/* Bytes queued for C and not yet written. */
size_t control_pending(const struct client *c);
/* Queue {"ok": false, "error": MSG} for C. */
void control_error(struct client *c, const char *msg);
/* The batch C waits for (0 for none); set it. */
long control_waiting(const struct client *c);
void control_set_waiting(struct client *c, long batch);
/* Call FN(C, ARG) for every client (FN may close C). */
void control_foreach(struct control *ctl, void (*fn)(struct client *c,
						      void *arg), void *arg);
/* Clients connected now, and dropped so far for limits. */
int control_nclients(const struct control *ctl);
uint64_t control_ndropped(const struct control *ctl);

#endif

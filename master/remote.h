/*
 * remote: control clients over TCP, authenticated by MUNGE.
 *
 * With "control": {"listen": "HOST:PORT"} the master also listens on TCP.
 * A connection starts unauthenticated: it is sent a fresh nonce and must
 * answer, within RAUTH_TIMEOUT seconds and RAUTH_MAX_LINE bytes, with a
 * MUNGE credential whose payload is that nonce (rauth.h).  munged decodes
 * it (a replayed credential is refused by its replay cache) into the
 * peer's uid and gid; a user the control socket's mode and group would
 * not let connect is refused too.  Until then the connection is told
 * nothing of the cluster and can ask nothing.  Once authenticated it is
 * handed to the control layer as a client of that uid, the same as one
 * of the unix socket, and is bound by the same limits.
 *
 * A connection that greets as a node's agent (ftfarm join) must be the
 * cluster's owner (our uid): no other user's credential makes one.  It
 * is handed to the joiner set with remote_set_joiner, which reads its
 * JOIN (join.h); without a joiner, agents are refused.
 *
 * How to reach the listener is published in <state_dir>/control.tcp
 * (readable by all): {"v": 1, "host": H, "port": P}, H an address of
 * this host on the config's "network" when one is given.
 */
#ifndef FT_REMOTE_H
#define FT_REMOTE_H

#include <ev.h>
#include <stddef.h>

#include "config.h"

struct remote;
struct control;

/* Listen as CFG's "control" says and publish the address in its state
 * dir; authenticated clients go to CTL.  The listener, or NULL with ERR. */
struct remote *remote_open(struct ev_loop *loop, struct control *ctl,
			   const struct ft_config *cfg, char *err, size_t n);
/* An authenticated agent's connection FD (blocking as accepted, its
 * peer's address PEER), with the N bytes at REST it sent after its
 * greeting: the joiner's from now on. */
typedef void (*remote_join_fn)(void *ctx, int fd, const char *peer,
			       const char *rest, size_t n);
void remote_set_joiner(struct remote *r, remote_join_fn fn, void *ctx);
/* Remove what an earlier master of STATE_DIR published (it may have died
 * without removing it). */
void remote_unpublish(const char *state_dir);
/* Close the listener and every connection not yet authenticated; remove
 * the published address. */
void remote_close(struct remote *r);

#endif

/*
 * rdial: reaching a master over TCP from another host (the CLI, and a
 * node's agent that joins).
 *
 * A master with control over TCP publishes its address in
 * <state_dir>/control.tcp; whoever connects proves who it is with a MUNGE
 * credential bound to the master's nonce (rauth.h), as a control client
 * or as a node's agent.  Blocking calls with bounded waits: no event
 * loop needed.  Links with libmunge.
 */
#ifndef FT_RDIAL_H
#define FT_RDIAL_H

#include <stddef.h>

#include "rauth.h"

#define RDIAL_CONNECT_TIMEOUT 5.0

/* The address the master of STATE_DIR published: 0 with HOST and PORT,
 * 1 when there is none, -1 with ERR (unreadable, malformed). */
int rdial_published(const char *state_dir, char *host, size_t hn,
		    char *port, size_t pn, char *err, size_t n);
/* Connect to HOST:PORT within RDIAL_CONNECT_TIMEOUT.  The (blocking)
 * fd, or -1 with ERR. */
int rdial_connect(const char *host, const char *port, char *err, size_t n);
/* Greet the master on FD as ROLE: its nonce, our credential (from munged
 * at SOCKET, NULL: libmunge's default), its verdict.  0; -2 when the
 * master refused us (ERR: "refused: " and its reason); -1 with ERR when
 * the greeting failed otherwise. */
int rdial_greet(int fd, const char *socket, enum rauth_role role, char *err,
		size_t n);

#endif

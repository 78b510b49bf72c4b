/*
 * link: the master's side of each node agent's connection, one link per
 * node, whatever carries it.
 *
 * Two kinds of link stand behind one interface: MPI (link_mpi.c: the
 * agent the master spawned or started in its world; an intercommunicator
 * or the world, a rank, timed requests) and TCP (link_tcp.c: the agent of
 * a node that joined from anywhere; a socket under the loop, frames).
 * Above this interface nothing knows which a node has: both receive
 * messages whole, send within a deadline, carry at most one ping at a
 * time and report a dead peer the same way.  A send that does not
 * complete in time, a ping not answered in time, a failed receive or a
 * connection closed make the link report failure to its owner, which
 * decides what that means for the node.  Nothing here knows the message
 * contents beyond PING/PONG bookkeeping: messages are the owner's
 * (proto.h).
 *
 * Links live apart (an array of pointers): a link's address is stable
 * while more nodes join (links_grow), for requests and watchers hold it.
 */
#ifndef FT_LINK_H
#define FT_LINK_H

#include <ev.h>
#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "treq.h"
#include "util.h"

struct links;
struct link;
struct link_tcp;

/* What a kind of link does. */
struct link_impl {
	const char *name;		/* "mpi", "tcp" */
	/* Send MSG (taken over) with TAG.  0, or -1 when refused. */
	int (*send)(struct link *l, int tag, struct ft_buf *msg);
	/* Send a PING of l->ping_seq, answered by NOW + the ping timeout
	 * (else link_ping_expired).  0, or -1. */
	int (*ping)(struct link *l, double now);
	/* The open ping was answered. */
	void (*pong)(struct link *l);
	/* Abandon everything of the link (it is closed). */
	void (*close)(struct link *l);
};

struct link {
	struct links *ls;
	int id;
	int open;
	const struct link_impl *impl;	/* what it is while open */
	uint64_t ping_seq;
	int pinging;			/* a ping waits for its pong */
	double last_ping;		/* monotonic */
	double last_heard;
	/* MPI: */
	MPI_Comm comm;			/* intercommunicator, or MPI_COMM_WORLD */
	int rank;			/* the agent's rank in comm */
	struct treq *recv;		/* the standing receive */
	struct treq *ping;		/* the open ping exchange */
	/* TCP: */
	struct link_tcp *tcp;
};

struct link_ops {
	void *ctx;
	/* A message of type TAG arrived from agent ID (its next receive is
	 * already posted). */
	void (*message)(void *ctx, int id, int tag, const void *p, size_t n);
	/* Agent ID's link failed for REASON: a send or ping expired, a
	 * receive failed, the connection closed.  The link stays open until
	 * the owner closes it. */
	void (*failed)(void *ctx, int id, const char *reason);
	/* Agent ID has not answered a ping in time: is it only waiting for
	 * a CPU?  1 spares it this once (the next round pings it again).
	 * NULL: never. */
	int (*starved)(void *ctx, int id);
};

struct links {
	struct treq_set *treqs;
	struct ev_loop *loop;
	struct link **v;
	int n;
	struct link_ops ops;
	int own_comms;			/* free each communicator on close */
	double send_timeout;		/* seconds a send may take */
	double ping_timeout;		/* seconds a ping may wait for its pong */
	uint64_t msgs_in, msgs_out;
	uint64_t work_in;		/* messages in that are not pongs */
};

void links_init(struct links *ls, int n, struct treq_set *treqs,
		struct ev_loop *loop, const struct link_ops *ops,
		int own_comms, double send_timeout, double ping_timeout);
/* N links from now on (more than before: the new ones closed). */
void links_grow(struct links *ls, int n);
void links_free(struct links *ls);

/* Agent ID talks MPI on COMM/RANK from now on: post its receive.  0, or
 * -1 (the link stays closed).  (link_mpi.c) */
int link_open(struct links *ls, int id, MPI_Comm comm, int rank);
/* Agent ID talks on the connected TCP socket FD (taken over) from now
 * on; the N bytes at REST came on it already.  0, or -1 (FD closed, the
 * link closed).  (link_tcp.c) */
int link_open_tcp(struct links *ls, int id, int fd, const void *rest,
		  size_t n);
/* Abandon agent ID's requests or connection, and free its communicator
 * when the links own them (a static world's stays usable for a last
 * STOP).  Never disconnects MPI: that would wait for a dead peer. */
void link_close(struct links *ls, int id);
/* Send MSG (taken over) with TAG.  0, or -1 when the transport refused
 * it. */
int link_send(struct links *ls, int id, int tag, struct ft_buf *msg);
/* Ping agent ID (sequence number up by one).  0, or -1 when refused. */
int link_ping(struct links *ls, int id, double now);
/* A pong with SEQ came from agent ID: close the open ping if it matches. */
void link_pong(struct links *ls, int id, uint64_t seq);
/* Does agent ID have a ping waiting for its pong? */
int link_pinging(const struct links *ls, int id);
/* The kind of agent ID's link ("mpi", "tcp"; "" while closed). */
const char *link_kind(const struct links *ls, int id);
/* Abandon every link and free the communicators they own (shutdown). */
void links_close_all(struct links *ls);

/* For the kinds of link (they call this module; it calls them only
 * through l->impl): L is open as IMPL from now on. */
void link_opened(struct link *l, const struct link_impl *impl);
/* A message of TAG came on L. */
void link_received(struct link *l, int tag, const void *p, size_t n);
/* L's open ping found no answer by its deadline: fail it, unless it was
 * heard from meanwhile or is only starved. */
void link_ping_expired(struct link *l);
/* L failed for REASON (its owner is told). */
void link_failed(struct link *l, const char *reason);

#endif

/*
 * link: the MPI side of each worker, one link per worker slot.
 *
 * A link is a communicator and a rank, a standing receive and at most one
 * open ping.  Every send is a timed request (treq.h); a send that does not
 * complete in time, a ping not answered in time and a failed receive make
 * the link report failure to its owner, which decides what that means for
 * the worker.  Nothing here knows the message contents beyond PING/PONG
 * bookkeeping: messages are the owner's (proto.h).
 */
#ifndef FT_LINK_H
#define FT_LINK_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "treq.h"
#include "util.h"

struct links;

struct link {
	struct links *ls;
	int id;
	MPI_Comm comm;			/* intercommunicator, or MPI_COMM_WORLD */
	int rank;			/* the worker's rank in comm */
	int open;
	struct treq *recv;		/* the standing receive */
	struct treq *ping;		/* the open ping exchange */
	uint64_t ping_seq;
	double last_ping;		/* monotonic */
	double last_heard;
};

struct link_ops {
	void *ctx;
	/* A message of type TAG arrived from worker ID (its next receive is
	 * already posted). */
	void (*message)(void *ctx, int id, int tag, const void *p, size_t n);
	/* Worker ID's link failed for REASON: a send or ping expired, or a
	 * receive failed.  The link stays open until the owner closes it. */
	void (*failed)(void *ctx, int id, const char *reason);
	/* Worker ID has not answered a ping in time: is it only waiting for
	 * a CPU?  1 spares it this once (the next round pings it again).
	 * NULL: never. */
	int (*starved)(void *ctx, int id);
};

struct links {
	struct treq_set *treqs;
	struct link *v;
	int n;
	struct link_ops ops;
	int own_comms;			/* free each communicator on close */
	double send_timeout;		/* seconds a send may take */
	double ping_timeout;		/* seconds a ping may wait for its pong */
	uint64_t msgs_in, msgs_out;
	uint64_t work_in;		/* messages in that are not pongs */
};

void links_init(struct links *ls, int n, struct treq_set *treqs,
		const struct link_ops *ops, int own_comms, double send_timeout,
		double ping_timeout);
void links_free(struct links *ls);

/* Worker ID talks on COMM/RANK from now on: post its receive.  0, or -1
 * (the link stays closed). */
int link_open(struct links *ls, int id, MPI_Comm comm, int rank);
/* Abandon worker ID's requests, and free its communicator when the links
 * own them (a static world's stays usable for a last STOP).  Never
 * disconnects: that would wait for a dead peer. */
void link_close(struct links *ls, int id);
/* Send MSG (taken over) with TAG.  0, or -1 when MPI refused it. */
int link_send(struct links *ls, int id, int tag, struct ft_buf *msg);
/* Ping worker ID (sequence number up by one).  0, or -1 when MPI refused. */
int link_ping(struct links *ls, int id, double now);
/* A pong with SEQ came from worker ID: close the open ping if it matches. */
void link_pong(struct links *ls, int id, uint64_t seq);
/* Abandon the links' requests and free the communicators they own (at
 * shutdown). */
void links_close_all(struct links *ls);

#endif

/*
 * treq: timed MPI requests.
 *
 * Every exchange with a worker is a nonblocking MPI request with a deadline.
 * treq_test() completes what MPI finished and expires what ran past its
 * deadline, never blocking.  An expired or abandoned request is cancelled
 * (receives) or freed (sends) and *retired*: its buffer is kept until
 * treq_set_destroy(), after MPI_Finalize, because MPI may still touch the
 * buffer of a request it never completed (a send to a killed process).
 *
 * An exchange that waits for an answer (a ping waiting for its pong) is a
 * send marked "awaiting": it completes only when treq_reply() says the
 * answer came, and expires if that does not happen by the deadline.
 */
#ifndef FT_TREQ_H
#define FT_TREQ_H

#include <mpi.h>
#include <stdint.h>

#include "util.h"

enum treq_outcome { TREQ_DONE = 1, TREQ_EXPIRED };

struct treq;
/* Called once per request, from treq_test (or never, if retired).  For a
 * completed receive, BUF and COUNT describe the message and ST its status.
 * The callback may start and retire requests; T is freed after it returns. */
typedef void (*treq_cb)(struct treq *t, enum treq_outcome outcome, void *arg);

struct treq {
	MPI_Request req;
	MPI_Comm comm;
	int peer;			/* destination or source rank */
	int tag;
	int is_recv;
	int awaiting;			/* send that waits for treq_reply */
	int sent;			/* the MPI part has completed */
	double deadline;		/* monotonic seconds; INFINITY for none */
	void *buf;
	size_t len;
	int count;			/* bytes received */
	MPI_Status status;
	int error;			/* MPI error of a completed request */
	treq_cb cb;
	void *arg;
	uint64_t key;			/* the caller's tag for treq_find */
	int idx;			/* position in the set's arrays */
};

struct treq_set {
	MPI_Request *reqs;		/* parallel to items, for MPI_Testsome */
	struct treq **items;
	int n, cap;
	int *done_idx;
	MPI_Status *done_st;
	void **retired;			/* buffers of abandoned requests */
	int nretired, capretired;
	uint64_t completed, expired;	/* counters */
	struct treq **ready;		/* detached, callback pending */
	int nready;
};

void treq_set_init(struct treq_set *s);
/* Free everything, retired buffers included: call after MPI_Finalize. */
void treq_set_destroy(struct treq_set *s);

/* Send MSG (its data is taken over and freed when done) to PEER on COMM.
 * AWAITING: the request stays open until treq_reply().  NULL on MPI error
 * (MSG freed). */
struct treq *treq_isend(struct treq_set *s, struct ft_buf *msg, int peer,
			int tag, MPI_Comm comm, double deadline, int awaiting,
			treq_cb cb, void *arg);
/* Receive into a new buffer of LEN bytes from PEER (or MPI_ANY_SOURCE)
 * with TAG (or MPI_ANY_TAG).  NULL on MPI error. */
struct treq *treq_irecv(struct treq_set *s, size_t len, int peer, int tag,
			MPI_Comm comm, double deadline, treq_cb cb, void *arg);

/* Complete and expire requests.  Returns how many callbacks ran. */
int treq_test(struct treq_set *s, double now);
/* The earliest deadline among open requests (INFINITY if none). */
double treq_next_deadline(const struct treq_set *s);

/* The answer to awaiting request T came: it completes at the next
 * treq_test once its send is done. */
void treq_reply(struct treq *t);
/* Find the open request with COMM, PEER, TAG and KEY, or NULL. */
struct treq *treq_find(struct treq_set *s, MPI_Comm comm, int peer, int tag,
		       uint64_t key);

/* Push every open deadline DT seconds later (after the loop was blocked,
 * during which no answer could be read). */
void treq_delay_all(struct treq_set *s, double dt);

/* Abandon T without calling its callback. */
void treq_retire(struct treq_set *s, struct treq *t);
/* Abandon every open request with PEER on COMM (a worker given up on). */
void treq_retire_peer(struct treq_set *s, MPI_Comm comm, int peer);

#endif

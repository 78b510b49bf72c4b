/*
 * gang_req: sets of nonblocking requests between gang ranks, and the wait
 * that never hangs on a dead peer.
 *
 * A set holds the Isends and Irecvs of one step.  gang_wait() polls them
 * (MPI_Testsome, naps with backoff) while serving the master, and returns
 * as soon as
 *   - every request is done (GANG_OK; with GANG_WAIT_SOME: as soon as one
 *     more is done),
 *   - the master's notice names the peer of a request still pending
 *     (GANG_DIED, the peer in set->dead_peer),
 *   - with GANG_WAIT_ANY_DEATH: the gang's epoch differs from the caller's
 *     (GANG_EPOCH: someone died, even a rank the caller does not wait on),
 *   - the master says stop or goes silent (GANG_STOP),
 *   - a request fails (GANG_ERR).
 * Requests left pending stay in the set: wait again, or gang_abandon().
 *
 * Buffers: a pending request owns its buffer.  gang_abandon() gives the
 * buffers of the requests it drops to MPI for good (a dead peer's
 * receive may be half-matched and can then neither be cancelled nor
 * completed): the caller must neither reuse nor free them.
 */
#ifndef FT_GANG_REQ_H
#define FT_GANG_REQ_H

#include <mpi.h>
#include <stdint.h>

#include "gang.h"

#define GANG_WAIT_ANY_DEATH 1u
#define GANG_WAIT_SOME 2u

struct gang_req {
	int peer;		/* world rank at the other end */
	int is_recv;
	int done;		/* completed (status in st) */
	MPI_Status st;
	void *buf;		/* the caller's buffer (see above) */
};

struct gang_reqs {
	struct gang_req *v;
	MPI_Request *mpi;	/* parallel to v, for MPI_Testsome */
	int *idx;
	MPI_Status *sts;
	int n, cap;
	int pending;
	int dead_peer;		/* after GANG_DIED */
};

void gang_reqs_init(struct gang_reqs *s);
/* Forget every request (none may be pending: wait or abandon first). */
void gang_reqs_clear(struct gang_reqs *s);
void gang_reqs_free(struct gang_reqs *s);

/* Start an Isend / Irecv of COUNT items of TYPE with PEER (world rank)
 * and TAG on the gang's world, added to S.  Its index in S, or -1 when
 * MPI refused it. */
int gang_isend(struct gang *g, struct gang_reqs *s, const void *buf,
	       int count, MPI_Datatype type, int peer, int tag);
int gang_irecv(struct gang *g, struct gang_reqs *s, void *buf, int count,
	       MPI_Datatype type, int peer, int tag);

/* Wait as described above; EPOCH is the caller's epoch (for
 * GANG_WAIT_ANY_DEATH).  Returns a gang_rc. */
int gang_wait(struct gang *g, struct gang_reqs *s, unsigned flags,
	      uint32_t epoch);

/* Drop every pending request of S (receives cancelled, all freed) and
 * retire their buffers (gang_retire).  The set is empty afterwards. */
void gang_abandon(struct gang *g, struct gang_reqs *s);

#endif

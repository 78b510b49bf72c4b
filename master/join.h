/*
 * join: nodes that join the running master over TCP (ftfarm join).
 *
 * An agent's connection comes from the TCP listener (remote.h) once its
 * MUNGE greeting proved it the cluster's owner.  Its first frame must be
 * a JOIN (proto.h), within JOIN_TIMEOUT: the node's name, its slots and
 * GPUs, its agent's pid and start time, its host, its Slurm job and the
 * job's end.  A JOIN that is malformed, of another protocol version, or
 * that the farm does not take (farm_join: a name of the config's MPI
 * nodes, a name whose agent is up elsewhere, past join.max_nodes) is
 * answered with REFUSE and its reason, and the connection closed;
 * nothing of the farm changes.  A JOIN taken makes the connection the
 * node's link (link.h) and the node one of the farm's (farm_join).
 */
#ifndef FT_JOIN_H
#define FT_JOIN_H

#include "master.h"

#define JOIN_TIMEOUT 10.0	/* seconds for the JOIN after the greeting */
#define JOIN_PENDING_MAX 256	/* connections waiting for their JOIN */

/* Take agents' connections from the TCP listener, if there is one and
 * nodes may join.  Call once the listener is open. */
void join_open(struct master *m);
/* Close the connections still waiting for their JOIN. */
void join_close(struct master *m);

#endif

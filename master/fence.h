/*
 * fence: the master's hold on its state dir's lease (lease.h).
 *
 * A master started by the supervisor gets its epoch (--epoch): the lease
 * must name it, or the master leaves at once.  A master started by hand
 * takes the lease itself, when it is free or every holder is dead on
 * this host.  Then the master renews the lease every quarter of lease_ms
 * and checks it before each write (store.h), before each log line, and
 * first thing when it wakes from a stall (a SIGSTOP, a frozen host):
 * once another epoch has the lease, it exits, status 3, writing nothing.
 */
#ifndef FT_FENCE_H
#define FT_FENCE_H

#include <stddef.h>

#include "master.h"

/* Take or check the lease for EPOCH (0: none given; take it).  0, or -1
 * with ERR. */
int fence_take(struct master *m, unsigned long long epoch, char *err,
	       size_t n);
/* Renew from the loop, guard the log.  After store_init. */
void fence_start(struct master *m);
/* The loop was stalled: check the lease before anything else. */
void fence_stalled(struct master *m);
/* A clean stop: give the lease back when no supervisor holds it. */
void fence_release(struct master *m);
void fence_stop(struct master *m);

#endif

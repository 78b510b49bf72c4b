/*
 * commands: what the control socket's requests do (the table of commands
 * and their fields is common/ctl.h, shared with the CLI).
 *
 *   status                  the cluster: workers, nodes, batches, counters
 *   submit {"batch": {...}} queue a batch; answer its id
 *   wait {"batch": ID}      answer once the batch has finished
 *   stop                    stop the workers, then the master
 *   log_level {"level": L}  debug, info or warn
 *   rotate                  rotate master.log and events.jsonl
 *   nodes                   the nodes: state, reboots, failures, workers
 *   drain {"node": N}       no new tasks for N; its running ones finish
 *   undrain {"node": N}     N back in service (an inactive one is probed)
 *                           (both answered once the nodes' state that
 *                           holds the change is on disk)
 *   reboot {"node": N|"all", "force": B}
 *                           drain, power-cycle, workers back; answered
 *                           once every node named is back or has failed
 *   cancel {"batch": ID}    queued tasks dropped, running ones killed
 *   subscribe {...}         stay connected for pushed events, status and
 *                           a batch's results (subs.h)
 *   add {"batch", "first", "bytes"} and a body
 *                           more tasks for an open batch; answered once
 *                           their record is durable
 *   close {"batch": ID}     the open batch takes no more tasks
 *
 * A bad request gets an error answer; it never disturbs the master.
 */
#ifndef FT_COMMANDS_H
#define FT_COMMANDS_H

#include <stdint.h>

#include "master.h"

/* Start keeping events for subscribers: before the first event. */
void commands_init(struct master *m);
/* Open the control socket of M's state dir.  0, or -1 with ERR. */
int commands_open(struct master *m, char *err, size_t n);
void commands_close(struct master *m);
/* Periodic work (every second or so): idle clients go. */
void commands_tick(struct master *m, double now);
/* The status answer's keys (but "ok"): a new object.  Of the finished
 * batches in memory only the last MAX_FINISHED (all if negative). */
json_t *commands_status(struct master *m, int max_finished);
/* Rotate master.log and events.jsonl (SIGHUP, `ftfarm rotate`), or only
 * those past the config's log_max_bytes when ONLY_BIG. */
void commands_rotate(struct master *m, int only_big);
/* Answer the adds whose records have become durable (after a write or
 * a sync round). */
void commands_adds_durable(struct master *m);
/* Batch B has finished: answer whoever waits for it. */
void commands_batch_done(struct master *m, struct batch *b);
/* The reboot of node N has ended: back (OK) or WHY not.  Answer the
 * reboot requests that wait for it. */
void commands_reboot_ended(struct master *m, struct node *n, int ok,
			   const char *why);
/* The nodes' state of generation GEN is on disk (ERR 0), or its write
 * failed with errno ERR: answer the drains and undrains that wait for
 * it. */
void commands_state_saved(struct master *m, uint64_t gen, int err);

#endif

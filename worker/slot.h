/*
 * slot: the loop of ftfarm-slot, one worker slot of a node.
 *
 * It talks to its node agent in frames over one socket (frame.h): says
 * hello, takes its welcome, hands tasks to the runner thread and sends
 * their results back in batches, and answers the agent's pings at once
 * even while a task runs.  It sleeps in poll(2) on the socket and the
 * runner's descriptor with no wake-up of its own but its silence limit,
 * so an idle slot costs no CPU.  It leaves, killing its running task's
 * processes, when the agent closes the socket or falls silent for the
 * welcome's master_timeout.  SIGTERM does not end it: it is the end of
 * the job, and from then on the slot reports its tasks interrupted
 * (runner.h) until it is stopped or its agent goes.
 */
#ifndef FT_SLOT_H
#define FT_SLOT_H

#include "plugins.h"

/* Serve the agent on the socket FD as slot ID until told to stop.
 * Returns the process exit status (it exits itself when the agent is
 * gone). */
int slot_run(int fd, int id, const struct ft_plugins *pl);

#endif

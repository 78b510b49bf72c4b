/*
 * slotproc: starting and ending one slot process (for slots.c).
 */
#ifndef FT_SLOTPROC_H
#define FT_SLOTPROC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Raise this process's soft limit on descriptors to its hard limit: an
 * agent holds two per slot.  Slots get the limit as it was. */
void slotproc_more_fds(void);
/* Start ARGV (ARGV[0] a path) with FD as its descriptor 3 and nothing
 * else of ours but 0-2; it dies with this process (PR_SET_PDEATHSIG).
 * Returns its pid with *PIDFD a pidfd of it, or -1 with WHY filled. */
pid_t slotproc_start(char *const argv[], int fd, int *pidfd, char *why,
		     size_t n);
/* Start the node's zygote (zygote.h) with ARGV (ARGV[0] a path, and
 * --zygote) as this process's child: its pid, with *CTL the socket to ask
 * it on, or -1 with WHY. */
pid_t slotproc_zygote(char *const argv[], int *ctl, char *why, size_t n);
/* Has the zygote on CTL said it is ready?  1 if so, 0 if not yet, -1 if
 * it is gone. */
int slotproc_zygote_ready(int ctl);
/* Have the zygote on CTL fork slot SLOT with FD as its socket (FD stays
 * the caller's), waiting TIMEOUT seconds at most: the new slot's pid (a
 * child of this process) with *PIDFD, or -1 with WHY, and *BROKEN set
 * when CTL is of no more use (the zygote gone, late or confused). */
pid_t slotproc_fork(int ctl, uint32_t slot, int fd, double timeout,
		    int *pidfd, int *broken, char *why, size_t n);
/* Describe a wait status: "killed by signal 9", "exited with status 1". */
void slotproc_reason(int status, char *buf, size_t n);
/* SIGKILL PID (started at START) and every process its tasks left: they
 * carry its pid and start in their environment (FT_WORKER_ENV). */
void slotproc_kill(pid_t pid, unsigned long long start);

#endif

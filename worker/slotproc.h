/*
 * slotproc: starting and ending one slot process (for slots.c).
 */
#ifndef FT_SLOTPROC_H
#define FT_SLOTPROC_H

#include <stddef.h>
#include <sys/types.h>

/* Raise this process's soft limit on descriptors to its hard limit: an
 * agent holds two per slot.  Slots get the limit as it was. */
void slotproc_more_fds(void);
/* Start ARGV (ARGV[0] a path) with FD as its descriptor 3 and nothing
 * else of ours but 0-2; it dies with this process (PR_SET_PDEATHSIG).
 * Returns its pid with *PIDFD a pidfd of it, or -1 with WHY filled. */
pid_t slotproc_start(char *const argv[], int fd, int *pidfd, char *why,
		     size_t n);
/* Describe a wait status: "killed by signal 9", "exited with status 1". */
void slotproc_reason(int status, char *buf, size_t n);
/* SIGKILL PID (started at START) and every process its tasks left: they
 * carry its pid and start in their environment (FT_WORKER_ENV). */
void slotproc_kill(pid_t pid, unsigned long long start);

#endif

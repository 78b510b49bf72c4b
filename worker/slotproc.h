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
 * it on (non-blocking), or -1 with WHY. */
pid_t slotproc_zygote(char *const argv[], int *ctl, char *why, size_t n);
/* Ask the zygote on CTL (without blocking) to fork slot SLOT with FD as
 * its socket (FD stays the caller's).  0, or -1 with errno (EAGAIN: its
 * queue is full). */
int slotproc_zygote_ask(int ctl, uint32_t slot, int fd);
/* Take the zygote's next answer, without blocking: 1 with *SLOT and *PID
 * (the new slot's, a child of this process, or minus an errno), 0 when
 * there is none yet, -1 when CTL failed (the zygote is gone). */
int slotproc_zygote_answer(int ctl, uint32_t *slot, int *pid);
/* Describe a wait status: "killed by signal 9", "exited with status 1". */
void slotproc_reason(int status, char *buf, size_t n);
/* SIGKILL PID (started at START) and every process its tasks left: they
 * carry its pid and start in their environment (FT_WORKER_ENV). */
void slotproc_kill(pid_t pid, unsigned long long start);

#endif

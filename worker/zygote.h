/*
 * zygote: an ftfarm-slot that starts its node's other slots by forking.
 *
 * A slot started with exec pays for the exec, the dynamic linker and the
 * loading of every task plugin: some 4 ms of CPU alone, and 11-12 ms
 * each when a node's slots all start at once on a virtual machine, whose
 * hypervisor charges for each page-table change and TLB flush.  The agent
 * starts one zygote per node (ftfarm-slot --zygote): it loads what every
 * slot needs once, then for each request forks a copy of itself that
 * becomes the slot.
 *
 * The copy is made with clone(CLONE_PARENT), so that its parent is the
 * agent, as if the agent had started it: the agent reaps it, reads its
 * exit status, finds it stopped (waitid), and it dies with the agent
 * (PR_SET_PDEATHSIG).  The zygote is single-threaded and holds no lock
 * when it forks.  glibc's own fork cannot make such a copy: this one is
 * the raw system call, after which glibc's record of the main thread's
 * id in the copy is the zygote's (glibc itself asks the kernel wherever
 * that matters to a process like the slot: raise, abort; nothing in the
 * slot acts on its main thread by pthread id).
 *
 * Requests and answers go over a SOCK_SEQPACKET socket, answered in
 * order: a request is the slot id with the slot's socket (SCM_RIGHTS), an
 * answer the slot id and the new pid, or minus an errno.  The zygote
 * first says it is ready (an answer for ZYGOTE_READY): until then the
 * agent starts slots by exec.
 */
#ifndef FT_ZYGOTE_H
#define FT_ZYGOTE_H

#include <stdint.h>
#include <sys/types.h>

#define ZYGOTE_READY UINT32_MAX	/* the slot of the first answer */

struct zygote_ask {
	uint32_t slot;
};

struct zygote_answer {
	uint32_t slot;
	int32_t pid;			/* > 0, or -errno */
};

/* Serve the agent on CTL (the zygote's loop).  Returns 1 in each new
 * slot, with *SLOT and *FD (its socket to the agent) set; 0 in the zygote
 * once the agent has closed CTL; -1 on a failure of CTL. */
int zygote_serve(int ctl, uint32_t *slot, int *fd);

#endif

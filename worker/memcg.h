/*
 * memcg: memory cgroups for a node's tasks, where the host lets the node
 * agent make them.
 *
 * The agent makes the node's directory beside it: ftfarm-<agent pid> in
 * its own memory cgroup (version 1), or, under version 2, in the cgroup
 * it runs in once it has moved itself into a leaf of it (ftfarm-<pid>/
 * agent) and turned the memory controller on for the children (which
 * version 2 allows only when the agent is alone in its cgroup: a master
 * or a shell beside it keeps it from doing so).  It names the directory to
 * its slots in the environment (MEMCG_ENV).  Each slot makes a cgroup of
 * its own there, s<slot>-<pid>, which its tasks with a memory limit enter
 * before they run their program, the limit set first (the slot stays
 * outside: a task past its limit is what the kernel kills, not the slot).
 * Where none of this can be done the slot samples instead (task_mem.h).
 *
 * Library code: errors are returned with a reason, never logged.
 */
#ifndef FT_MEMCG_H
#define FT_MEMCG_H

#include <stddef.h>
#include <stdint.h>

/* The node's directory, as the agent names it to its slots. */
#define MEMCG_ENV "FTFARM_CGROUP"

/* Agent: make the node's directory (and name it in MEMCG_ENV), after
 * removing what agents gone before left beside it.  0, or -1 with WHY
 * (the slots then sample). */
int memcg_node_open(char *why, size_t n);
/* Agent: remove the node's directory and what its slots left in it. */
void memcg_node_close(void);

struct memcg;

/* Slot SLOT: its cgroup in the node's directory (MEMCG_ENV).  NULL with
 * WHY when there is none (no directory named, or it cannot be made). */
struct memcg *memcg_slot_open(int slot, char *why, size_t n);
/* Set C's limit to BYTES (> 0), unless it is so already.  0, or -1 with
 * errno. */
int memcg_limit(struct memcg *c, uint64_t bytes);
/* The descriptor of C's cgroup.procs: what enters it writes "0" there. */
int memcg_procs_fd(const struct memcg *c);
/* Has the kernel's OOM killer killed a process in C since the last call
 * (or the open)?  1 or 0. */
int memcg_oom_killed(struct memcg *c);
/* SIGKILL what is left in C (a task's process that left its group). */
void memcg_kill_all(struct memcg *c);
/* Kill what is left, remove C's cgroup and free C. */
void memcg_slot_close(struct memcg *c);

#endif

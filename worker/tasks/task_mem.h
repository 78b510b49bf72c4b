/*
 * task_mem: the memory of a task's processes, for plugins that start
 * them, where no memory cgroup holds the task (ft_task.cgroup_fd 0).
 *
 * The kernel does not list a process group's members; /proc is read
 * whole (about 10 us a process here), so a sample costs a millisecond on
 * a host of a hundred processes: plugins take one every SAMPLE_S at most.
 */
#ifndef FT_TASK_MEM_H
#define FT_TASK_MEM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Seconds between two samples of a task's RSS, and from its start to
 * the first. */
#define TASK_MEM_SAMPLE_S 0.1

/* The resident memory of the processes of group PGID together (bytes; 0
 * when none is found). */
uint64_t task_mem_group_rss(pid_t pgid);
/* The reason of a task killed for going past LIMIT: "memory: used ...,
 * over its limit of ... (killed by ftfarm)", into BUF. */
void task_mem_reason(char *buf, size_t n, uint64_t used, uint64_t limit);
/* Make the calling process the kernel's first choice when memory runs
 * out (oom_score_adj 1000: any process may raise its own).  For a
 * child between fork and exec: async-signal-safe, errors ignored. */
void task_mem_oom_first(void);
/* The same for process PID, from its parent (raising a child's score
 * needs no privilege either). */
void task_mem_oom_first_of(pid_t pid);

#endif

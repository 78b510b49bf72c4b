/*
 * blame: who is charged with a worker's death, the task it ran or its
 * node.  Pure rules and a small record per task, no MPI and no I/O.
 *
 * A death is the task's when the task is the likely cause:
 *   - the task has now killed workers on two different nodes (poison), or
 *   - the worker died (not hung) while running it on a node with no other
 *     failure charged to it (healthy otherwise).
 * Everything else is the node's: a death while idle or starting, a hang
 * (the process was still there), a death on a node already suspect.
 * A task charged with deaths on one node only that then succeeds on
 * another node was not the cause after all: those deaths go back to the
 * node (blame_task_ok says which).
 *
 * A record is kept only for tasks charged with a death, and dropped when
 * the task ends (blame_task_ok, blame_task_failed): memory follows the
 * open tasks that killed workers, not the history.
 */
#ifndef FT_BLAME_H
#define FT_BLAME_H

#include <stddef.h>
#include <stdint.h>

enum blame_verdict { BLAME_NODE = 1, BLAME_TASK };

/* Nodes remembered per task: a task that killed workers on more nodes
 * than this is poison many times over. */
#define BLAME_NODES_MAX 8

struct blame;

struct blame *blame_new(void);
void blame_free(struct blame *b);

/* A worker of node NODE died.  TID: the task it was running (0: none);
 * HUNG: its process was still there; NODE_HEALTHY: no other failure is
 * charged to NODE.  Records a death charged to the task; WHY (N bytes)
 * says who is charged and why.  Returns the verdict. */
enum blame_verdict blame_death(struct blame *b, uint64_t tid, int node,
			       int hung, int node_healthy, char *why,
			       size_t n);
/* Task TID succeeded on node NODE.  When every death charged to it was on
 * one other node, that node is returned (its death is the node's after
 * all), else -1.  Forgets TID. */
int blame_task_ok(struct blame *b, uint64_t tid, int node);
/* Task TID ended without success.  When deaths were charged to it, WHY
 * gets "poison: killed its worker on NODE, NODE" (names from NAMES, by
 * node index) and 1 is returned, else 0.  Forgets TID. */
int blame_task_failed(struct blame *b, uint64_t tid,
		      const char *const *names, char *why, size_t n);
/* Deaths charged to task TID so far. */
int blame_task_deaths(const struct blame *b, uint64_t tid);
/* Tasks with a record (for tests: memory stays bounded). */
size_t blame_records(const struct blame *b);

#endif

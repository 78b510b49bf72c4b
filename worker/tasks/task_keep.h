/*
 * task_keep: memory a plugin keeps from one task to the next, let go of
 * once the worker has run none of the plugin's tasks for a while.
 *
 * A plugin keeps what its next task would otherwise build again (relax:
 * a block's buffers and mapped checkpoints; wordcount: a map's table of
 * the job's words) under a lock of its own.  After each task, with that
 * lock held, it calls task_keep_idle(); a thread, started with the first
 * task, calls the plugin's forget() under the same lock once IDLE seconds
 * pass without another call.  So an idle worker holds nothing for long:
 * the job may have ended or failed meanwhile.
 *
 * The idle time is the environment variable ENV when set to a positive
 * number of seconds, else DEFAULT_S.  The thread's code lives in the
 * plugin, so the first task pins the plugin (a worker closes its plugins
 * on its way out, and the thread must not wake up in unmapped code);
 * without a thread (none to be had, or no pin) a worker keeps what it
 * has until the plugin's next task, as it always may.
 */
#ifndef TASK_KEEP_H
#define TASK_KEEP_H

#include <pthread.h>

struct task_keep {
	pthread_mutex_t *mu;	/* the plugin's lock of what it keeps */
	void (*forget)(void);	/* let go of it all (called with *mu held) */
	const char *env;	/* the idle time's environment variable */
	double default_s;	/* the idle time without it */
	/* The keeper's own, zero at first: */
	int started;		/* the thread was tried */
	double idle_s;
	double until;		/* > 0: forget then (ft_now) */
	pthread_cond_t cv;	/* until changed */
};

/* A task ends, with *K->mu held: start the thread if not yet tried, and
 * forget in K->idle_s from now if the plugin is HOLDING anything. */
void task_keep_idle(struct task_keep *k, int holding);

#endif

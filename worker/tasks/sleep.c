/*
 * sleep: the task type that waits.
 *
 *   {"type": "sleep", "seconds": 1.5, "timeout": 10}
 *
 * "seconds": 0 is the no-op task of the throughput benchmarks: it succeeds
 * at once without a system call.  Longer sleeps are cut in slices so that
 * cancel is seen within SLICE seconds.  A "timeout" shorter than the sleep
 * makes the task fail once the timeout has passed, as any task would.
 *
 * What a sleep uses is nothing worth measuring: its result says 0 CPU
 * seconds and 0 bytes (FT_PLUGIN_USAGE).  Two reads of the thread's CPU
 * clock (a system call each, a microsecond here) would halve the rate of
 * no-op tasks.
 */
#include <stdio.h>

#include "plugin.h"
#include "util.h"

#define SLICE 0.02		/* longest sleep between two looks at cancel */
#define MAX_SECONDS 1e6

static const struct jfield sleep_fields[] = {
	{ "type", JT_STRING, 1 },
	{ "seconds", JT_NUMBER, 1 },
	{ "timeout", JT_NUMBER, 0 },
	{ NULL, JT_ANY, 0 },
};

/* Check a sleep task object.  0, or -1 with ERR set. */
static int
sleep_validate(const json_t *task, const char *path, struct jerr *err)
{
	if (jcheck_object(task, path, sleep_fields, err) == -1 ||
	    jcheck_num_range(task, path, "seconds", 0, MAX_SECONDS,
			     err) == -1 ||
	    jcheck_num_positive(task, path, "timeout", FT_TASK_TIMEOUT_MAX, err) == -1)
		return -1;
	return 0;
}

/* Sleep until ft_now() reaches END or CANCEL is set.  1 if cancelled. */
static int
sleep_until(double end, const volatile int *cancel)
{
	double left;

	while (!*cancel) {
		left = end - ft_now();
		if (left <= 0)
			return 0;
		ft_sleep(left < SLICE ? left : SLICE);
	}
	return 1;
}

/* Run a sleep task: ok after "seconds", failed on timeout or cancel.
 * Always returns 0. */
static int
sleep_run(const struct ft_task *task, struct ft_result *res)
{
	double seconds = jget_num(task->spec, "seconds", 0);
	double timeout;

	if (seconds <= 0) {
		res->ok = 1;
		return 0;
	}
	timeout = ft_task_timeout(task->spec, 0);
	if (timeout > 0 && timeout < seconds)
		seconds = timeout;
	else
		timeout = 0;
	if (sleep_until(ft_now() + seconds, task->cancel)) {
		res->exit_code = -1;
		snprintf(res->reason, sizeof(res->reason), "cancelled");
	} else if (timeout > 0) {
		res->exit_code = -1;
		snprintf(res->reason, sizeof(res->reason),
			 "timeout after %g s", timeout);
	} else {
		res->ok = 1;
	}
	return 0;
}

FT_PLUGIN_DEFINE_FLAGS("sleep", sleep_validate, sleep_run, NULL,
		       FT_PLUGIN_USAGE)

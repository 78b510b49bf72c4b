/*
 * child: a program run by the master as a watched child (ipmitool, a
 * node's ready command), never through a shell, never blocking the loop.
 *
 * The child is started with posix_spawnp from an argv array, in a session
 * of its own, in a given working directory, with stdin from /dev/null,
 * stdout and stderr into one pipe, no descriptor of the master's beyond
 * 2, and IPMI_PASSWORD, the MPI job's marks (FTFARM_STATE_DIR,
 * FTFARM_EPOCH) and the MPI runtime's variables (OMPI_*, PMIX_*) out of
 * its environment.  The libev loop hears of
 * its exit (ev_child) and its output (ev_io); at its deadline (ev_timer)
 * its session gets SIGTERM, and SIGKILL a moment later.  Once it has
 * exited, whatever is left of its session is killed and DONE is called,
 * once, from the loop (also when it could not be started at all).
 */
#ifndef FT_CHILD_H
#define FT_CHILD_H

#include <ev.h>
#include <stddef.h>
#include <sys/types.h>

#define CHILD_OUT_MAX 2048	/* bytes of output kept (the first ones) */

struct child_result {
	int started;			/* 0: could not be started (err_no) */
	int err_no;			/* why not */
	int exit;			/* its exit status, -1 if killed */
	int signal;			/* the signal that ended it, or 0 */
	int timed_out;			/* killed at its deadline */
	double seconds;			/* from start to exit */
	char out[CHILD_OUT_MAX + 1];	/* stdout and stderr, NUL-terminated */
	size_t out_len;
};

typedef void (*child_done_fn)(void *arg, const struct child_result *r);

struct child;

/* Run ARGV (ARGV[0] searched in PATH unless it holds a slash) in DIR
 * (NULL: the master's), killed after DEADLINE seconds; DONE(ARG, result)
 * once it has ended.  Returns the child (for child_abandon). */
struct child *child_start(struct ev_loop *loop, char *const argv[],
			  const char *dir, double deadline, child_done_fn done,
			  void *arg);
/* Kill C's session and forget it: DONE will not be called. */
void child_abandon(struct child *c);
/* The pid of C (0 when it could not be started). */
pid_t child_pid(const struct child *c);
/* R as one line for logs and events: "exit 1: <first output line>",
 * "killed after 5 s", "cannot run: No such file or directory". */
void child_describe(const struct child_result *r, char *out, size_t n);

#endif

/*
 * launch: the MPI launcher's command line and environment for a cluster.
 *
 * A job of a cluster is `FT_MPIEXEC ... ftfarm-master -c CFG` (dynamic
 * launch) or `... -n 1 ftfarm-master -c CFG : -n N ftfarm-worker` (static
 * launch), run in a session of its own with its output in
 * <state_dir>/mpirun.log.  Under a supervisor every job has an epoch: the
 * master gets `--epoch E` (and `--restart-reason TEXT` after a restart)
 * and the launcher's environment carries FTFARM_STATE_DIR and
 * FTFARM_EPOCH, which the master, the workers and their tasks inherit, so
 * that whatever is left of a job on this host can be found by them.
 */
#ifndef FT_LAUNCH_H
#define FT_LAUNCH_H

#include <stddef.h>
#include <sys/types.h>

#include "config.h"

#define FT_STATE_DIR_ENV "FTFARM_STATE_DIR"
#define FT_EPOCH_ENV "FTFARM_EPOCH"

/* A NULL-terminated list of strings (argv or envp). */
struct ft_argv {
	char **v;
	int n;
};

void ft_argv_add(struct ft_argv *a, const char *s);
void ft_argv_free(struct ft_argv *a);

/* What a job is started with. */
struct launch_job {
	const struct ft_config *cfg;	/* NULL: `ftfarm probe` */
	const char *config;		/* the config's path, as given */
	unsigned long long epoch;	/* 0: none (no --epoch) */
	const char *restart_reason;	/* NULL on a first start */
};

/* Does CFG's "mpirun_args" place the processes itself (--hostfile,
 * --host...)?  Then ftfarm neither probes the hosts nor writes its own
 * hostfile. */
int launch_own_hostfile(const struct ft_config *cfg);

/* The launcher's argv for J into A. */
void launch_argv(struct ft_argv *a, const struct launch_job *j);
/* This process's environment, less any FTFARM_STATE_DIR and FTFARM_EPOCH,
 * plus those of J, into E. */
void launch_env(struct ft_argv *e, const struct launch_job *j);
/* "FTFARM_STATE_DIR=<the state dir, symbolic links resolved>" of CFG
 * (a new string): the entry every process of its jobs carries. */
char *launch_dir_entry(const struct ft_config *cfg);
/* "FTFARM_EPOCH=<E>" into BUF. */
const char *launch_epoch_entry(unsigned long long epoch, char *buf, size_t n);

/* Start J's launcher in a session of its own (its leader), output
 * appended to LOG, stdin /dev/null, default signal dispositions and an
 * empty signal mask.  Its pid, or -1 with errno. */
pid_t launch_spawn(const struct launch_job *j, const char *log);

#endif

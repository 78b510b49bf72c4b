/*
 * hosts: the hosts of a cluster as the MPI launcher sees them.
 *
 * A cluster whose nodes are not all this machine is launched through
 * mpirun over ssh: a hostfile in the state dir lists this machine first
 * (the master's slot and its local workers) and then every remote host
 * that answered a bounded ssh probe, with as many slots as its nodes have
 * workers.  mpirun starts a daemon on every host of its hostfile at
 * launch and gives up on the whole job when one does not answer, so a
 * host that did not answer is left out and written in
 * <state_dir>/hosts-down ("NODE HOST REASON" lines) for the master, which
 * brings it in later (spawn info "add-host") once it answers again.
 */
#ifndef FT_HOSTS_H
#define FT_HOSTS_H

#include <stddef.h>

#include "config.h"

#define HOSTS_FILE "hostfile"
#define HOSTS_DOWN_FILE "hosts-down"
#define HOSTS_CONNECT_TIMEOUT 3	/* ssh ConnectTimeout of a probe, seconds */
#define HOSTS_PROBE_BOUND 8.0	/* a probe is killed after this long */

/* The argv (NULL-terminated, new; free with hosts_argv_free) that runs
 * the shell command CMD on HOST: through CFG's "ssh", bounded in its
 * connect and banner exchange and never asking for a password; or, with
 * "nodes": "slurm", a step of our allocation on that node (srun
 * --overlap: mpirun's daemons hold the allocation's CPUs). */
char **hosts_remote_argv(const struct ft_config *cfg, const char *host,
		      const char *cmd);
void hosts_argv_free(char **v);

/* The probe's shell command (a new string): it exits 0 when WORKER (the
 * ftfarm-worker program, the same path on every host) is there and
 * speaks our protocol, else 3 with a line saying what is wrong. */
char *hosts_probe_cmd(const char *worker);

/* Probe the remote hosts of CFG in parallel with hosts_probe_cmd(WORKER)
 * (two tries, each bounded by HOSTS_PROBE_BOUND), calling TICK(ARG) (if
 * not NULL) at least every quarter second meanwhile.  For each node i,
 * WHY[i] is left empty when its host answered (or is this machine), else
 * says why not.  Returns the number of nodes whose host did not answer. */
int hosts_probe(const struct ft_config *cfg, const char *worker,
		char (*why)[160], void (*tick)(void *), void *arg);

/* Run CMD[i] on HOST[i] over ssh for i < N, in parallel, each bounded by
 * HOSTS_PROBE_BOUND.  WHY[i] is left empty when it ran and exited 0,
 * else says why not.  Returns the number that did not. */
int hosts_run(const struct ft_config *cfg, int n, const char *const *host,
	      const char *const *cmd, char (*why)[160]);

/* Write the hostfile of CFG, less the nodes whose WHY is set (WHY may be
 * NULL), to PATH.  0, or -1 with ERR. */
int hosts_write_hostfile(const struct ft_config *cfg, char (*why)[160],
			 const char *path, char *err, size_t n);

/* Write <state_dir>/hosts-down from WHY (removed when no node is down).
 * 0, or -1 with ERR. */
int hosts_write_down(const struct ft_config *cfg, char (*why)[160],
		     char *err, size_t n);
/* Read <state_dir>/hosts-down into WHY (one per node, emptied first).
 * Returns the number of nodes down (0 without the file). */
int hosts_read_down(const struct ft_config *cfg, char (*why)[160]);

#endif

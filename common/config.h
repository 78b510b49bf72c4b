/*
 * config: the cluster configuration file (JSON).
 *
 * Loading validates strictly: bad JSON, an unreadable file, a missing
 * required key, a value of the wrong type or out of range and an unknown key
 * are all refused with one line "FILE:LINE:COL: KEY: MESSAGE".  Relative
 * paths in the file are taken relative to the file's own directory.
 */
#ifndef FT_CONFIG_H
#define FT_CONFIG_H

#include <stddef.h>

enum ft_launch {
	FT_LAUNCH_DYNAMIC = 1,		/* master spawns each worker (MPI_Comm_spawn) */
	FT_LAUNCH_STATIC,		/* one mpiexec world: rank 0 master, others workers */
};

struct ft_node {
	char *name;			/* unique, [A-Za-z0-9_.-]+ */
	char *host;			/* host name MPI places its workers on */
	int workers;			/* worker processes on the node, >= 1 */
};

struct ft_config {
	char *path;			/* the file as given */
	char *name;			/* "name", default: the file's base name */
	char *state_dir;		/* absolute */
	enum ft_launch launch;		/* "launch": "dynamic" | "static" */
	struct ft_node *nodes;		/* "nodes": non-empty, names unique */
	int nnodes;
	int nworkers;			/* sum of nodes[].workers */
	double heartbeat;		/* "heartbeat_ms" / 1000, default 1.0 */
	double heartbeat_timeout;	/* "heartbeat_timeout_ms" / 1000, default 3/4 heartbeat */
	double task_timeout;		/* "task_timeout_s", default 3600 */
	double slow_timeout;		/* "slow_timeout_s", default 60 */
	double start_timeout;		/* "start_timeout_s", default 60 */
	int max_attempts;		/* "max_attempts", default 3, 1..100 */
	int respawn_limit;		/* "respawn_limit", default 1, 0..1000 */
	size_t output_cap;		/* "output_cap" bytes, default 65536, 0..131072 */
	int task_events;		/* "task_events": log per-task events, default true */
	char **mpirun_args;		/* "mpirun_args": extra launcher arguments */
	int nmpirun_args;
	char *log_level;		/* "log_level": "debug"|"info"|"warn", default "info" */
	/* "http": {"listen": "HOST:PORT"}: the master's HTTP listener
	 * (metrics, status page); off without "http". */
	int http;			/* "http" is there */
	char *http_host;		/* default 127.0.0.1 */
	int http_port;			/* default 9750; 0: any free port */
};

/* Load and validate PATH into CFG.  Returns 0, or -1 with one line in ERR
 * (CFG then holds nothing to free). */
int ft_config_load(const char *path, struct ft_config *cfg, char *err, size_t n);

void ft_config_free(struct ft_config *cfg);

/* The node called NAME, or NULL. */
const struct ft_node *ft_config_node(const struct ft_config *cfg, const char *name);

#endif

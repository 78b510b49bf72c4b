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

#include <math.h>
#include <stddef.h>
#include <stdint.h>

enum ft_launch {
	FT_LAUNCH_DYNAMIC = 1,		/* master spawns each worker (MPI_Comm_spawn) */
	FT_LAUNCH_STATIC,		/* one mpiexec world: rank 0 master, others workers */
};

/* A node's BMC ("bmc"), reached with ipmitool over the LAN. */
struct ft_bmc {
	char *host;			/* "host", required */
	int port;			/* "port", default 623 */
	char *user;			/* "user", required */
	char *password_file;		/* "password_file", absolute; ipmitool -f */
	char *interface;		/* "interface": "lanplus" (default) | "lan" */
	int cipher_suite;		/* "cipher_suite" (lanplus -C), default 3 */
	int timeout;			/* "timeout_s" (-N), default 1 */
	int retries;			/* "retries" (-R), default 1 */
	double deadline;		/* "deadline_s": kill ipmitool after, default
					 * 2*R*N + R*(R-1) + 3 (what -N/-R allow, and slack) */
	double min_gap;			/* "min_gap_s" between two commands, default 5 */
	char *ipmitool;			/* "ipmitool": the program, default "ipmitool"
					 * (searched in PATH) */
};

struct ft_node {
	char *name;			/* unique, [A-Za-z0-9_.-]+ */
	char *host;			/* host name MPI places its workers on */
	int workers;			/* worker processes on the node, >= 1 */
	struct ft_bmc *bmc;		/* "bmc", or NULL: no power control */
	char **ready_command;		/* "ready_command" argv, or NULL */
	char **gpus;			/* "gpus": device ids (a count n: "0".."n-1") */
	int ngpus;			/* how many, 0..64 */
	int pin;			/* "pin": each task bound to its slots' CPUs */
	uint64_t mem;			/* "mem": bytes its tasks' "mem" may add
					 * up to at once, or 0: what its agent
					 * finds (hostmem.h) */
	uint64_t mem_found;		/* what its agent found, once it said
					 * so (set by the master; read it with
					 * ft_node_mem) */
	int joined;			/* not the config's: it joined over TCP
					 * (ftfarm join), added at run time */
};

/* The memory of node ND for its tasks: its "mem", else what its agent
 * found, else DEF (what this host has, hostmem_default).  The master's
 * loop sets mem_found while its intake thread checks batches. */
static inline uint64_t
ft_node_mem(const struct ft_node *nd, uint64_t def)
{
	uint64_t found = __atomic_load_n(&nd->mem_found, __ATOMIC_RELAXED);

	return nd->mem ? nd->mem : found ? found : def;
}

/* "mem_enforce": how a task's "mem" is held to. */
enum ft_mem_enforce {
	FT_MEM_AUTO = 0,		/* a memory cgroup of its own where the
					 * agent may make one, else sampling */
	FT_MEM_SAMPLE,			/* sampling its RSS, always */
	FT_MEM_NONE,			/* not at all: placement only */
};

/* "join": nodes that join a running master over TCP (ftfarm join). */
struct ft_join_cfg {
	int max_nodes;			/* "max_nodes": joined nodes the master
					 * keeps at most, default 1024; 0:
					 * none may join */
	/* "hosts": {HOST: {"bmc", "ready_command"}}: the power control of a
	 * host that nodes join from (name: the host) */
	struct ft_node *hosts;
	int nhosts;
};

/* One of "allocations": a queue of Slurm allocations the master submits
 * while work waits (alloc.h), each running `ftfarm join` on its nodes. */
struct ft_alloc_queue {
	char *name;			/* "name", required, unique */
	char **sbatch;			/* "sbatch": sbatch's arguments, as they are */
	int nsbatch;
	int nodes;			/* "nodes" per allocation, default 1 */
	double time_limit;		/* "time_limit_s", required, at least 60 */
	int max_nodes;			/* "max_nodes" of the queue's allocations
					 * at once, default "nodes" */
	int backlog;			/* "backlog": allocations pending at once,
					 * default 1 */
	double idle;			/* "idle_s": a node with nothing to do
					 * leaves after it, default 300 */
	int slots;			/* "slots" of each node, 0: what Slurm
					 * gives (join's default) */
	char *gpus;			/* "gpus": a count or ids, as join takes
					 * them, or NULL: the allocation's */
	char *start_command;		/* "start_command": a shell command run
					 * on each node before its agent, or NULL */
};

/* "control": the control socket's access and limits. */
struct ft_control_cfg {
	unsigned socket_mode;		/* "socket_mode", octal string, default 0666 */
	char *socket_group;		/* "socket_group": a group name, or NULL */
	unsigned *submitters;		/* "submitters": uids that may submit */
	int nsubmitters;
	size_t max_request;		/* "max_request_bytes", default 1 MiB */
	size_t max_batch;		/* "max_batch_bytes", default 1 GiB */
	size_t max_output;		/* "max_output_bytes" queued per client */
	int max_clients;		/* "max_clients", default 256 */
	int max_clients_per_uid;	/* "max_clients_per_uid", default 64 */
	double idle_timeout;		/* "idle_timeout_s", default 60 */
	/* "listen": "HOST:PORT": control over TCP too, each client
	 * authenticated by MUNGE; NULL: the unix socket alone.  The host
	 * defaults to 0.0.0.0, port 0 is any free port. */
	char *listen_host;
	int listen_port;
	char *munge_socket;		/* "munge_socket": munged's socket, or
					 * NULL: libmunge's default */
};

/* When result lines and other records reach the disk (store.h). */
enum ft_fsync {
	FT_FSYNC_NONE = 0,		/* written: the kernel's page cache */
	FT_FSYNC_BATCH,			/* synced at most fsync_interval apart */
	FT_FSYNC_ALWAYS,		/* synced before anyone is told */
};

struct ft_config {
	char *path;			/* the file as given */
	char *name;			/* "name", default: the file's base name */
	char *state_dir;		/* absolute */
	char *dir;			/* the config file's directory, absolute:
					 * relative paths of the file, and the
					 * working directory of ready commands */
	enum ft_launch launch;		/* "launch": "dynamic" | "static" */
	struct ft_node *nodes;		/* "nodes", names unique; then the
					 * nodes joined at run time */
	int nnodes;
	int no_nodes;			/* "nodes": []: every node joins */
	int nworkers;			/* sum of nodes[].workers */
	double heartbeat;		/* "heartbeat_ms" / 1000, default 1.0 */
	double heartbeat_timeout;	/* "heartbeat_timeout_ms" / 1000, default 3/4 heartbeat */
	double task_timeout;		/* "task_timeout_s", default 3600 */
	double open_idle;		/* "open_idle_s", default 600 */
	double retain;			/* "retain_s", default 7 days */
	double slow_timeout;		/* "slow_timeout_s", default 60 */
	double start_timeout;		/* "start_timeout_s", default 60 */
	int max_attempts;		/* "max_attempts", default 3, 1..100 */
	int respawn_limit;		/* "respawn_limit", default 1, 0..1000 */
	int max_reboots;		/* "max_reboots" the ladder may do, default 1 */
	double reboot_wait;		/* "reboot_wait_s", default 300 */
	double drain_timeout;		/* "drain_timeout_s", default 600 */
	double failure_window;		/* "failure_window_s", default 600 */
	double probe_min;		/* "probe_min_s", default 30 */
	double probe_max;		/* "probe_max_s", default 3600 */
	size_t output_cap;		/* "output_cap" bytes, default 65536, 0..131072 */
	char *task_stdout;		/* "task_stdout": the pattern of a task's
					 * stdout file when it names none
					 * (outpath.h), absolute, or NULL */
	char *task_stderr;		/* "task_stderr": the same for stderr */
	enum ft_mem_enforce mem_enforce; /* "mem_enforce", default "auto" */
	int task_events;		/* "task_events": log per-task events, default true */
	char **mpirun_args;		/* "mpirun_args": extra launcher arguments */
	int nmpirun_args;
	char *ssh;			/* "ssh": the remote shell mpirun (and the
					 * host probes) use, default "ssh" */
	char *network;			/* "network": CIDR subnet of MPI traffic,
					 * or NULL: the loopback when every node
					 * is local, else Open MPI's choice */
	int remote;			/* some node's host is not this machine */
	int slurm;			/* "nodes": "slurm": the nodes are those of
					 * the Slurm allocation we run in, and
					 * mpirun launches through Slurm */
	char *log_level;		/* "log_level": "debug"|"info"|"warn", default "info" */
	size_t log_max_bytes;		/* "log_max_bytes": rotate logs past it */
	int log_keep;			/* "log_keep": rotated files kept, default 3 */
	struct ft_control_cfg control;	/* "control" */
	struct ft_join_cfg join;	/* "join" */
	struct ft_alloc_queue *queues;	/* "allocations" */
	int nqueues;
	enum ft_fsync fsync;		/* "fsync": "none"|"batch"|"always", default "batch" */
	double fsync_interval;		/* "fsync_interval_ms" / 1000, default 0.1 */
	double lease;			/* "lease_ms" / 1000, default 5 */
	double restart_backoff;		/* "restart_backoff_ms" / 1000, default 0.5 */
	double restart_backoff_max;	/* "restart_backoff_max_ms" / 1000, default 30 */
	double master_silence;		/* "master_silence_ms" / 1000: workers leave a
					 * master silent this long, default
					 * max(30 s, 10 heartbeats) */
	/* "http": {"listen": "HOST:PORT"}: the master's HTTP listener
	 * (metrics, status page); off without "http". */
	int http;			/* "http" is there */
	char *http_host;		/* default 127.0.0.1 */
	int http_port;			/* default 9750; 0: any free port */
};

/* Load and validate PATH into CFG.  Returns 0, or -1 with one line in ERR
 * (CFG then holds nothing to free). */
int ft_config_load(const char *path, struct ft_config *cfg, char *err, size_t n);
/* Does CFG name its nodes?  A "nodes": "slurm" config read outside a
 * Slurm allocation has none (every command but start works without
 * them).  0, or -1 with ERR saying so. */
int ft_config_has_nodes(const struct ft_config *cfg, char *err, size_t n);

void ft_config_free(struct ft_config *cfg);

/* The node called NAME, or NULL. */
const struct ft_node *ft_config_node(const struct ft_config *cfg, const char *name);

/* May nodes join CFG's master over TCP (control over TCP is on and
 * join.max_nodes is not 0)? */
static inline int
ft_config_joinable(const struct ft_config *cfg)
{
	return cfg->control.listen_host != NULL && cfg->join.max_nodes > 0;
}
/* The seconds of an allocation of TIME_LIMIT seconds that a task may
 * be sure of: Slurm counts in whole minutes, an agent leaves a little
 * before the end (a tenth, at most 30 s) to give its tasks back, and
 * its start may take a while (a tenth, at most 60 s, is kept for it). */
static inline double
ft_alloc_usable(double time_limit)
{
	double slurm = ceil(time_limit / 60) * 60;

	return slurm - fmin(30, slurm / 10) - fmin(60, slurm / 10);
}

/* The longest time request a queue of CFG can serve, 0: no queue. */
static inline double
ft_config_longest(const struct ft_config *cfg)
{
	double t = 0;
	int i;

	for (i = 0; i < cfg->nqueues; i++)
		t = fmax(t, ft_alloc_usable(cfg->queues[i].time_limit));
	return t;
}
/* Is NAME a usable node name ([A-Za-z0-9_.-]+, not "." or "..")? */
int ft_config_name_ok(const char *name);
/* Append a node that joined: NAME on HOST with WORKERS slots and the
 * NGPUS device ids GPUS, the power control of join.hosts' entry for
 * HOST (or for HOST's short name) copied.  Its index in CFG->nodes
 * (which may move). */
int ft_config_add_joined(struct ft_config *cfg, const char *name,
			 const char *host, int workers, char **gpus,
			 int ngpus);
/* Give joined node I (its name kept) WORKERS slots and the GPUS of a new
 * incarnation, and HOST's power control. */
void ft_config_rejoin(struct ft_config *cfg, int i, const char *host,
		      int workers, char **gpus, int ngpus);

#endif

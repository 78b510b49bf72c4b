/*
 * slurm: the nodes of the Slurm allocation ftfarm runs in.
 *
 * Inside salloc/sbatch, SLURM_JOB_NODELIST names the allocated hosts in
 * Slurm's compressed form ("sl[1-3]", "a1,b[01-02,7]") and
 * SLURM_TASKS_PER_NODE their tasks in node order ("2(x3)", "3,1(x2)").
 * A config with "nodes": "slurm" gets one node per allocated host, named
 * as Slurm names it, with as many workers as the host has tasks.
 */
#ifndef FT_SLURM_H
#define FT_SLURM_H

#include <stddef.h>

/* Expand the node list LIST into *NAMES (a new NULL-terminated array of
 * new strings).  The number of names, or -1 with ERR (bad syntax). */
int slurm_hostlist(const char *list, char ***names, char *err, size_t n);

/* Expand the tasks-per-node string TPN into COUNTS (N of them).  0, or
 * -1 with ERR when it does not give exactly N counts >= 1. */
int slurm_tasks(const char *tpn, int *counts, int n, char *err, size_t len);

/* The GPUs of each allocated node: the ids of JOB_GPUS (SLURM_JOB_GPUS,
 * "0,1"), else GPUS_ON_NODE of them (SLURM_GPUS_ON_NODE, "2"), else the
 * count of the gpu GRES in TRES (SLURM_TRES_PER_NODE, "gres/gpu:2" or
 * "gres/gpu:a100:2"); any may be NULL.  *IDS: a new NULL-terminated array
 * of new strings (ids "0".."n-1" for a count).  The count, 0 when none
 * says, or -1 with ERR (bad syntax). */
int slurm_gpus(const char *job_gpus, const char *gpus_on_node,
	       const char *tres, char ***ids, char *err, size_t len);

void slurm_names_free(char **names);

/* Slurm's time S ("2026-11-29T03:45:12", local time) into *T (epoch
 * seconds).  0, or -1 ("N/A", "Unknown", "UNLIMITED", malformed). */
int slurm_parse_time(const char *s, double *t);
/* When Slurm job JOBID ends (its end time from squeue), or 0 when it has
 * none or squeue does not say within a few seconds; *START (may be NULL)
 * when it started, or 0. */
double slurm_job_end(const char *jobid, double *start);

/* The job id in what `sbatch --parsable` printed (OUT, its output and
 * errors mixed: the first line of digits, "812" or "812;cluster") into
 * ID.  0, or -1 when there is none. */
int slurm_parse_jobid(const char *out, char *id, size_t n);

/* One line of `squeue -h -o "%i|%T|%e|%j|%N"`. */
#define SLURM_SQUEUE_FORMAT "%i|%T|%e|%j|%N"
struct slurm_job {
	char id[32];
	char state[32];			/* PENDING, RUNNING, COMPLETING, ... */
	double end;			/* its end (epoch), 0: unknown */
	char name[128];			/* its name */
	char nodes[256];		/* its node list, compressed, or "" */
};
/* LINE (LEN bytes) into J.  0, or -1 (malformed). */
int slurm_parse_squeue(const char *line, size_t len, struct slurm_job *j);
/* Has a job in STATE (squeue's word) ended? */
int slurm_state_ended(const char *state);
/* Does a job in STATE run (or end its run)? */
int slurm_state_running(const char *state);

/* Why signal SIGNUM ends a process, in words, into BUF: in a Slurm job
 * (SLURM_JOB_ID set) SIGTERM is the job's end, which every process of it
 * gets at once (its time limit, scancel, preemption): "SIGTERM: the end
 * of Slurm job 812"; else "signal 15".  BUF. */
const char *slurm_signal_reason(int signum, char *buf, size_t n);

#endif

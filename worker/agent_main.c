/*
 * ftfarm-agent: the agent of a node that joins a running master over
 * TCP (agent_tcp.h), started by `ftfarm join`:
 *
 *   ftfarm-agent --config CFG [--name NAME] [--slots N] [--gpus LIST]
 *                [--reconnect-timeout S] [--time-limit S]
 *
 * Defaults, for a node inside a Slurm allocation or not: the name is the
 * host's; the slots are the CPUs Slurm gave this node
 * (SLURM_CPUS_ON_NODE), else those this process may run on; the GPUs are
 * the allocation's (SLURM_JOB_GPUS, ...), else none; the allocation is
 * SLURM_JOB_ID, its end what squeue says.  No MPI here.
 *
 * The agent leaves by itself (its tasks given back) a little before its
 * allocation ends: a tenth of the allocation's time, at most RESERVE_MAX
 * seconds, so that no task is killed by Slurm's limit (the master gives
 * a task that asks for time only to a node that has that much before
 * this); or after --time-limit seconds, if sooner.
 */
#include <errno.h>
#include <math.h>
#include <getopt.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent_tcp.h"
#include "config.h"
#include "hugeheap.h"
#include "slurm.h"
#include "util.h"

#define RECONNECT_DEFAULT 600.0
#define RESERVE_MAX 30.0	/* seconds: see the top */

static int
usage(const char *why)
{
	fprintf(stderr, "ftfarm-agent: %s\nusage: ftfarm-agent --config CFG "
		"[--name NAME] [--slots N] [--gpus LIST] "
		"[--reconnect-timeout S] [--time-limit S]\n", why);
	return 2;
}

/* The CPUs this node gives us: Slurm's count, else our affinity's. */
static int
default_slots(void)
{
	const char *s = getenv("SLURM_CPUS_ON_NODE");
	cpu_set_t set;

	if (s && atoi(s) > 0)
		return atoi(s);
	if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
		return CPU_COUNT(&set);
	return 1;
}

/* LIST ("0,1", or a count "2") as comma-separated ids into OUT.  0, or
 * -1 (malformed). */
static int
gpu_list(const char *list, char *out, size_t n)
{
	char *end;
	long k = strtol(list, &end, 10);
	size_t len = 0;

	out[0] = '\0';
	if (*list != '\0' && *end == '\0' && strchr(list, ',') == NULL) {
		if (k < 0 || k > 64)
			return -1;
		for (long i = 0; i < k; i++)
			len += (size_t)snprintf(out + len, n - len, "%s%ld",
						i ? "," : "", i);
		return 0;
	}
	if (strspn(list, " \t") == strlen(list) || strstr(list, ",,") ||
	    list[0] == ',' || list[strlen(list) - 1] == ',' ||
	    strpbrk(list, " \t") || strlen(list) >= n)
		return -1;
	snprintf(out, n, "%s", list);
	return 0;
}

/* The allocation's GPUs, as slurm_gpus reads them, into OUT. */
static void
default_gpus(char *out, size_t n)
{
	char why[256], **ids;
	size_t len = 0;
	int k = slurm_gpus(getenv("SLURM_JOB_GPUS"),
			   getenv("SLURM_GPUS_ON_NODE"),
			   getenv("SLURM_TRES_PER_NODE"), &ids, why,
			   sizeof(why));

	out[0] = '\0';
	for (int i = 0; i < k && len < n; i++)
		len += (size_t)snprintf(out + len, n - len, "%s%s",
					i ? "," : "", ids[i]);
	if (k >= 0)
		slurm_names_free(ids);
}

/* When the agent leaves by itself (epoch; 0: never): before the end of
 * Slurm job ALLOC ("": none) by its reserve, or LIMIT (0: none) seconds
 * from now, the sooner. */
static double
leave_time(const char *alloc, double limit)
{
	double start = 0, end = 0;
	int i;

	/* squeue may not answer at once (a busy controller): a few tries. */
	for (i = 0; *alloc && end == 0 && i < 5; i++)
		if ((end = slurm_job_end(alloc, &start)) == 0)
			ft_sleep(0.5 * (i + 1));
	if (*alloc && end == 0)
		fprintf(stderr, "ftfarm join: the end of job %s is unknown "
			"(squeue did not say): the node stays until it is "
			"stopped\n", alloc);
	if (end > 0)
		end -= fmin(RESERVE_MAX, start > 0 ? (end - start) / 10 : 0);
	if (limit > 0 && (end == 0 || ft_wall() + limit < end))
		end = ft_wall() + limit;
	return end;
}

int
main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "name", required_argument, NULL, 'n' },
		{ "slots", required_argument, NULL, 's' },
		{ "gpus", required_argument, NULL, 'g' },
		{ "reconnect-timeout", required_argument, NULL, 'r' },
		{ "time-limit", required_argument, NULL, 't' },
		{ NULL, 0, NULL, 0 },
	};
	struct agent_tcp_args a = { .reconnect = RECONNECT_DEFAULT };
	const char *config = NULL, *gpus = NULL;
	char host[256] = "", err[1024], gbuf[1024], *end;
	double limit = 0;
	struct ft_config cfg;
	int c, rc;

	hugeheap_exec(argv);	/* relay buffers in huge pages */
	while ((c = getopt_long(argc, argv, "c:", opts, NULL)) != -1) {
		switch (c) {
		case 'c': config = optarg; break;
		case 'n': a.name = optarg; break;
		case 'g': gpus = optarg; break;
		case 's':
			a.slots = (int)strtol(optarg, &end, 10);
			if (*end || a.slots < 1 || a.slots > 4096)
				return usage("--slots takes 1 to 4096");
			break;
		case 'r':
			a.reconnect = strtod(optarg, &end);
			if (*end || !(a.reconnect >= 0 && a.reconnect <= 1e7))
				return usage("--reconnect-timeout takes "
					     "seconds, 0 to 1e7");
			break;
		case 't':
			limit = strtod(optarg, &end);
			if (*end || end == optarg || !(limit > 0 && limit <= 1e9))
				return usage("--time-limit takes seconds, more "
					     "than 0");
			break;
		default: return usage("bad option");
		}
	}
	if (config == NULL || optind != argc)
		return usage(config ? "unexpected operand" : "no --config");
	if (gpus && gpu_list(gpus, gbuf, sizeof(gbuf)) == -1)
		return usage("--gpus takes a count or a list of ids (0,1)");
	if (gpus == NULL)
		default_gpus(gbuf, sizeof(gbuf));
	if (ft_config_load(config, &cfg, err, sizeof(err)) == -1) {
		fprintf(stderr, "ftfarm-agent: %s\n", err);
		return 2;
	}
	gethostname(host, sizeof(host) - 1);
	if (a.name == NULL)
		a.name = host;
	if (!ft_config_name_ok(a.name)) {
		ft_config_free(&cfg);
		return usage("--name: letters, digits, \"_\", \".\" and \"-\" "
			     "only");
	}
	a.cfg = &cfg;
	a.gpus = gbuf;
	if (a.slots == 0)
		a.slots = default_slots();
	a.alloc = getenv("SLURM_JOB_ID") ? getenv("SLURM_JOB_ID") : "";
	a.alloc_end = leave_time(a.alloc, limit);
	rc = agent_tcp_run(&a);
	ft_config_free(&cfg);
	return rc;
}

/* join -c CFG [--slots N] [--gpus LIST] [--name NAME]
 * [--reconnect-timeout S]: this host becomes a node of the running
 * master.  The agent is ftfarm-agent (worker/agent_tcp.h), beside this
 * program: exec'd in place, so that the process that was started (by
 * srun, ssh, a shell) is the agent, signals and all. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "util.h"

int
cli_join(struct cli *c)
{
	char *dir = ft_exe_dir(), *exe, slots[16], reconnect[32], limit[32];
	const char *argv[16];
	int k = 0;

	if (c->argc != 0) {
		cli_err("usage: ftfarm join -c CFG [--slots N] [--gpus LIST] "
			"[--name NAME] [--reconnect-timeout S] "
			"[--time-limit S]");
		return 2;
	}
	if (!ft_config_joinable(&c->cfg)) {
		cli_err("%s: nodes join over TCP: the config needs \"control\": "
			"{\"listen\": \"HOST:PORT\"} (and join.max_nodes above 0)",
			c->config);
		return 2;
	}
	exe = ft_asprintf("%s/ftfarm-agent", dir);
	free(dir);
	argv[k++] = "ftfarm-agent";
	argv[k++] = "--config";
	argv[k++] = c->config;
	if (c->name) {
		argv[k++] = "--name";
		argv[k++] = c->name;
	}
	if (c->slots) {
		snprintf(slots, sizeof(slots), "%d", c->slots);
		argv[k++] = "--slots";
		argv[k++] = slots;
	}
	if (c->gpu_list) {
		argv[k++] = "--gpus";
		argv[k++] = c->gpu_list;
	}
	if (c->reconnect >= 0) {
		snprintf(reconnect, sizeof(reconnect), "%g", c->reconnect);
		argv[k++] = "--reconnect-timeout";
		argv[k++] = reconnect;
	}
	if (c->time_limit > 0) {
		snprintf(limit, sizeof(limit), "%.17g", c->time_limit);
		argv[k++] = "--time-limit";
		argv[k++] = limit;
	}
	argv[k] = NULL;
	fflush(NULL);
	execv(exe, (char *const *)argv);
	cli_err("cannot run %s: %s", exe, strerror(errno));
	free(exe);
	return 1;
}

/*
 * ftfarm-slot: one worker slot of a node, started by the node's agent
 * (ftfarm-worker) as `ftfarm-slot --slot N --node NAME --state-dir DIR
 * --fd 3`, its end of a socket to the agent on descriptor 3.  No MPI:
 * the agent carries its messages to the master.  --node and --state-dir
 * only say whose slot this is, to whoever looks at the process list.
 * With --zygote (and no --slot) it is the node's zygote, which forks the
 * node's slots on the agent's request (zygote.h); they keep its command
 * line.
 */
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "hugeheap.h"
#include "plugins.h"
#include "proto.h"
#include "slot.h"
#include "util.h"
#include "zygote.h"

/* Name this process in the environment its tasks inherit: when it is
 * killed, whoever kills it finds and kills what its tasks left running. */
static void
name_self(void)
{
	char v[32];

	snprintf(v, sizeof(v), "%d", (int)getpid());
	setenv(FT_WORKER_ENV, v, 1);
	snprintf(v, sizeof(v), "%llu", ft_proc_start(getpid()));
	setenv(FT_WORKER_START_ENV, v, 1);
}

/* The socket to the agent: non-blocking, and not inherited by tasks (a
 * task left running would hold the agent's end of file back). */
static int
take_socket(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl == -1 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) == -1 ||
	    fcntl(fd, F_SETFD, FD_CLOEXEC) == -1)
		return -1;
	return 0;
}

int
main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "slot", required_argument, NULL, 's' },
		{ "node", required_argument, NULL, 'n' },
		{ "state-dir", required_argument, NULL, 'd' },
		{ "fd", required_argument, NULL, 'f' },
		{ "zygote", no_argument, NULL, 'z' },
		{ NULL, 0, NULL, 0 },
	};
	struct ft_plugins pl;
	char err[512], *dir;
	int c, slot = -1, fd = -1, zygote = 0, rc;
	uint32_t id;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c == 's')
			slot = atoi(optarg);
		else if (c == 'f')
			fd = atoi(optarg);
		else if (c == 'z')
			zygote = 1;
		else if (c != 'n' && c != 'd')
			return 2;
	}
	/* First: the exec keeps the socket only while it is inheritable. */
	hugeheap_exec(argv);
	if ((slot < 0 && !zygote) || fd < 0 ||
	    (!zygote && take_socket(fd) == -1)) {
		fprintf(stderr, "ftfarm-slot: %s\n", fd < 0 || !zygote
			? "usage: ftfarm-slot --slot N --fd FD [--node NAME] "
			  "[--state-dir DIR] | --zygote --fd FD ..."
			: "no socket on --fd");
		return 2;
	}
	if (!zygote)
		name_self();
	/* Memory a task frees stays for the next task until the runner has
	 * been idle a while (runner.c trims then), on one heap for every
	 * thread so that the trim gives all of it back. */
	ft_memory_keep(1);
	dir = ft_plugins_default_dir();
	rc = ft_plugins_load(&pl, dir, err, sizeof(err));
	free(dir);
	if (rc == -1) {
		fprintf(stderr, "ftfarm-slot %d: %s\n", slot, err);
		return 2;
	}
	if (zygote) {
		rc = zygote_serve(fd, &id, &fd);
		if (rc <= 0) {
			ft_plugins_free(&pl);
			return rc == 0 ? 0 : 1;
		}
		/* A new slot, the agent's child (zygote.h). */
		slot = (int)id;
		if (take_socket(fd) == -1)
			return 2;
		name_self();
	}
	rc = slot_run(fd, slot, &pl);
	ft_plugins_free(&pl);
	return rc;
}

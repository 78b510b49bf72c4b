/*
 * ftfarm-slot: one worker slot of a node, started by the node's agent
 * (ftfarm-worker) as `ftfarm-slot --slot N --node NAME --state-dir DIR
 * --fd 3`, its end of a socket to the agent on descriptor 3.  No MPI:
 * the agent carries its messages to the master.  --node and --state-dir
 * only say whose slot this is, to whoever looks at the process list.
 * With --zygote (and no --slot) it is the node's zygote, which forks the
 * node's slots on the agent's request (zygote.h); each rewrites the
 * command line it inherits into a slot's, without the --fd it does not
 * have.
 */
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/* Append WORD and its NUL to the ROOM bytes at BUF (*LEN used): 0 when
 * it does not fit. */
static int
add_word(char *buf, size_t room, size_t *len, const char *word)
{
	size_t n = strlen(word) + 1;

	if (*len + n > room)
		return 0;
	memcpy(buf + *len, word, n);
	*len += n;
	return 1;
}

/* A slot the zygote forked shows the zygote's command line (ps, pgrep,
 * and `ftfarm start`'s search for a cluster's leftover slots by their
 * --state-dir): write over it, in place, the words an exec'd slot has,
 * less --fd (the socket is not on 3 here).  They take fewer bytes than
 * the zygote's ("--slot N" for "--zygote", no "--fd 3"); if not, the
 * line stays as it was. */
static void
retitle(int argc, char **argv, int slot, const char *node, const char *dir)
{
	char *lo = argv[0], *hi = argv[0], *buf, num[16];
	size_t room, len = 0;
	int i, ok;

	for (i = 0; i < argc; i++) {	/* getopt may have moved them */
		if (argv[i] < lo)
			lo = argv[i];
		if (argv[i] + strlen(argv[i]) + 1 > hi)
			hi = argv[i] + strlen(argv[i]) + 1;
	}
	room = (size_t)(hi - lo);
	buf = ft_malloc(room);
	snprintf(num, sizeof(num), "%d", slot);
	ok = add_word(buf, room, &len, argv[0]) &&
	     add_word(buf, room, &len, "--slot") &&
	     add_word(buf, room, &len, num) &&
	     (!node || (add_word(buf, room, &len, "--node") &&
			add_word(buf, room, &len, node))) &&
	     (!dir || (add_word(buf, room, &len, "--state-dir") &&
		       add_word(buf, room, &len, dir)));
	if (ok) {
		memcpy(lo, buf, len);
		memset(lo + len, 0, room - len);
	}
	free(buf);
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
	char err[512], *dir, *node = NULL, *state_dir = NULL;
	int c, slot = -1, fd = -1, zygote = 0, rc;
	uint32_t id;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c == 's')
			slot = atoi(optarg);
		else if (c == 'f')
			fd = atoi(optarg);
		else if (c == 'z')
			zygote = 1;
		else if (c == 'n')
			node = optarg;
		else if (c == 'd')
			state_dir = optarg;
		else
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
		retitle(argc, argv, slot, node, state_dir);
		name_self();
	}
	rc = slot_run(fd, slot, &pl);
	ft_plugins_free(&pl);
	return rc;
}

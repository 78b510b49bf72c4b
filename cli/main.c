/* ftfarm: the user's command.  See cli.h for the commands. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batch.h"
#include "cli.h"
#include "memsize.h"
#include "remote.h"

/* The commands, as data: what runs each, whether it needs the config
 * loaded, its usage (after "ftfarm ") and what it does, for the list,
 * `ftfarm help CMD` and `ftfarm CMD --help`. */
static const struct command {
	const char *name;
	int (*fn)(struct cli *c);
	int needs_config;
	const char *usage;
	const char *what;
} commands[] = {
	{ "start", cli_start, 1, "start -c CFG [--standby] [--foreground]",
	  "Start the cluster (supervisor, master, workers); return once every "
	  "worker has registered." },
	{ "stop", cli_stop, 1, "stop -c CFG",
	  "Stop the cluster: supervisor, standby, master, workers, tasks." },
	{ "submit", cli_submit, 1, "submit -c CFG BATCH.json [--wait] "
	  "[--reconnect-timeout S] [--after ID,...] [--after-any ID,...]\n"
	  "  ftfarm submit -c CFG [--wait] [--name N] "
	  "[--cpus K] [--gpus G] [--mem M] [--timeout S] "
	  "[--time-request S] [--priority P] [--stdout PATTERN] [--stderr PATTERN] "
	  "[--after ID,...] [--after-any ID,...] "
	  "[--each-line FILE | --array A-B] -- COMMAND ARG...",
	  "Submit a batch file, or exec tasks typed on the command line, and "
	  "print the batch id; --wait: exit 0 only when every task succeeded; "
	  "--after: run once those batches succeeded (else never), "
	  "--after-any: once they ended." },
	{ "cat", cli_cat, 1, "cat -c CFG BATCH [TASK...] [--stderr]",
	  "Print the tasks' standard output (or error) in task order." },
	{ "wait", cli_wait, 1, "wait -c CFG BATCH_ID [--reconnect-timeout S]",
	  "Wait for a batch to finish and print its summary." },
	{ "wordcount", cli_wordcount, 1, "wordcount -c CFG -o OUT [--shards N] "
	  "[--reducers R] [--delimiters FILE] INPUT...",
	  "Count the words of the INPUT files and directories into OUT." },
	{ "status", cli_status, 1, "status -c CFG [--json]",
	  "Show the workers, nodes and batches." },
	{ "nodes", cli_nodes, 1, "nodes -c CFG [--json]",
	  "Show the nodes: state, reboots, failures, workers, reason." },
	{ "drain", cli_drain, 1, "drain -c CFG NODE [--json]",
	  "Give NODE no new tasks; its running ones finish." },
	{ "undrain", cli_undrain, 1, "undrain -c CFG NODE [--json]",
	  "Put NODE back in service." },
	{ "reboot", cli_reboot, 1, "reboot -c CFG NODE|all [--force] [--json]",
	  "Drain NODE, power-cycle it over its BMC, wait for its workers." },
	{ "cancel", cli_cancel, 1, "cancel -c CFG BATCH_ID... [--json]",
	  "Drop the batches' queued tasks and kill their running ones." },
	{ "forget", cli_forget, 1, "forget -c CFG BATCH_ID",
	  "Forget an ended batch now: its directory, results and row go "
	  "(retain_s does it by itself)." },
	{ "batch", cli_batch, 1, "batch -c CFG BATCH_ID [--json] "
	  "[--reconnect-timeout S]",
	  "Show one batch: its state (waiting, running, finished, cancelled) "
	  "and counts; asks the next master across a restart." },
	{ "join", cli_join, 1, "join -c CFG [--slots N] [--gpus LIST] "
	  "[--name NAME] [--reconnect-timeout S] [--time-limit S]",
	  "Join this host to the running master as a node, over TCP with "
	  "MUNGE (as the cluster's owner), and run its tasks until the master "
	  "stops it, it is asked to leave, or SIGTERM (its allocation ends); "
	  "joins again when the master restarts.  Defaults: the host's name, "
	  "the CPUs and GPUs Slurm gave this node (else those of this host), "
	  "600 s of reconnecting." },
	{ "leave", cli_leave, 1, "leave -c CFG NODE [--grace S] [--json]",
	  "Ask a joined node to leave: no new task; its running ones go on "
	  "for S seconds (default 0), then are interrupted and given back, "
	  "unfinished; then its agent exits." },
	{ "alloc", cli_alloc, 1, "alloc -c CFG [--json]\n"
	  "  ftfarm alloc pause|resume -c CFG QUEUE",
	  "Show the allocation queues (state, reason, submissions) and their "
	  "Slurm allocations (id, state, nodes, time left); pause a queue, or "
	  "resume it (after a dry run of its sbatch)." },
	{ "watch", cli_watch, 1, "watch -c CFG",
	  "A live view of batches, workers, nodes and events; q quits." },
	{ "events", cli_events, 1, "events -c CFG [--follow] [--since TS] "
	  "[--type TYPE]...",
	  "Print the master's events as JSON lines." },
	{ "check", cli_check, 1, "check -c CFG [BATCH.json...]",
	  "Check a config (and batches) without running anything." },
	{ "rotate", cli_rotate, 1, "rotate -c CFG",
	  "Rotate master.log and events.jsonl." },
	{ "probe", cli_probe, 0, "probe",
	  "Say what the installed MPI can do." },
};
#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

/* The list of commands on OUT; returns STATUS. */
static int
usage(FILE *out, int status)
{
	size_t i;

	fprintf(out, "usage: ftfarm COMMAND [OPTION...] [ARG...]\n");
	for (i = 0; i < NCOMMANDS; i++)
		fprintf(out, "  ftfarm %s\n", commands[i].usage);
	fprintf(out, "CFG may also come from $FTFARM_CONFIG.  "
		"`ftfarm help COMMAND` says more; see ftfarm(1).\n");
	return status;
}

/* The command called NAME, or NULL. */
static const struct command *
command_named(const char *name)
{
	size_t i;

	for (i = 0; i < NCOMMANDS; i++)
		if (strcmp(name, commands[i].name) == 0)
			return &commands[i];
	return NULL;
}

/* One command's usage and what it does, on stdout: exit status 0. */
static int
command_help(const struct command *cmd)
{
	printf("usage: ftfarm %s\n%s\n", cmd->usage, cmd->what);
	if (cmd->needs_config)
		printf("CFG may also come from $FTFARM_CONFIG.\n");
	printf("Exit status: 0 success, 1 failure, 2 bad usage or input.  "
	       "See ftfarm(1).\n");
	return 0;
}

/* The options CMD's usage names ("-c", "--wait", ...), one a line, and
 * --help: what a shell completes after "ftfarm CMD -". */
static void
list_options(const struct command *cmd)
{
	const char *p = cmd->usage, *q;
	char seen[2048] = " --help ", word[64];

	puts("--help");
	while ((p = strchr(p, '-')) != NULL) {
		if (p > cmd->usage && strchr(" [|", p[-1]) == NULL) {
			p++;
			continue;	/* a dash inside a word: "each-line" */
		}
		for (q = p; *q == '-' || (*q >= 'a' && *q <= 'z') ||
		     (*q >= '0' && *q <= '9'); q++)
			;
		if (q - p > 2 || (q - p == 2 && p[1] != '-')) {
			snprintf(word, sizeof(word), " %.*s ", (int)(q - p), p);
			if (strstr(seen, word) == NULL &&
			    strlen(seen) + strlen(word) < sizeof(seen)) {
				strcat(seen, word + 1);
				printf("%.*s\n", (int)(q - p), p);
			}
		}
		p = q;
	}
}

/* What CMD's operands are, from its usage: "node", "batch", "file", or
 * nothing (printed). */
static void
print_operand(const struct command *cmd)
{
	const char *u = cmd->usage;

	if (strstr(u, " NODE"))
		puts("node");
	else if (strstr(u, " BATCH_ID") || strstr(u, " BATCH ") ||
		 strstr(u, " BATCH\n"))
		puts("batch");
	else if (strstr(u, ".json") || strstr(u, "FILE") || strstr(u, "INPUT"))
		puts("file");
}

/* help --commands | --options CMD | --operand CMD: for the shell's
 * completion (scripts/completion/ftfarm), from the table above, so that a
 * command added there is completed with its options.  -1 when ARGV is no
 * such request. */
static int
help_completion(int argc, char **argv)
{
	const struct command *cmd;
	size_t i;

	if (argc == 3 && strcmp(argv[2], "--commands") == 0) {
		for (i = 0; i < NCOMMANDS; i++)
			puts(commands[i].name);
		puts("help");
		return 0;
	}
	if (argc != 4 || (strcmp(argv[2], "--options") != 0 &&
			  strcmp(argv[2], "--operand") != 0))
		return -1;
	if ((cmd = command_named(argv[3])) == NULL)
		return 2;
	if (strcmp(argv[2], "--options") == 0)
		list_options(cmd);
	else
		print_operand(cmd);
	return 0;
}

/* ftfarm help [COMMAND] */
static int
help(int argc, char **argv)
{
	const struct command *cmd;
	int rc;

	if (argc < 3)
		return usage(stdout, 0);
	if ((rc = help_completion(argc, argv)) != -1)
		return rc;
	if (argc > 3 || (cmd = command_named(argv[2])) == NULL) {
		cli_err("help: %s", argc > 3 ? "one command at most" :
			"unknown command");
		return usage(stderr, 2);
	}
	return command_help(cmd);
}

/* --type A,B: each name of LIST added to c->types. */
static void
add_types(struct cli *c, char *list)
{
	char *save = NULL, *t;

	for (t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		c->types = realloc(c->types, (size_t)(c->ntypes + 2) *
				   sizeof(*c->types));
		if (c->types == NULL)
			abort();
		c->types[c->ntypes++] = t;
		c->types[c->ntypes] = NULL;
	}
}

/* Long options without a letter. */
enum {
	OPT_STANDBY = 256,
	OPT_RECONNECT,
	OPT_FORCE,
	OPT_FOLLOW,
	OPT_SINCE,
	OPT_TYPE,
	OPT_NAME,
	OPT_CPUS,
	OPT_GPUS,
	OPT_TIMEOUT,
	OPT_PRIORITY,
	OPT_EACH_LINE,
	OPT_ARRAY,
	OPT_STDERR,
	OPT_AFTER,
	OPT_AFTER_ANY,
	OPT_MEM,
	OPT_STDOUT_FILE,
	OPT_STDERR_FILE,
	OPT_SLOTS,
	OPT_GRACE,
	OPT_TIME_REQUEST,
	OPT_TIME_LIMIT,
};

/* The whole number OPTARG of option NAME into *V, within LO..HI.  0, or
 * -1 (said). */
static int
int_opt(const char *name, const char *arg, long lo, long hi, int *v)
{
	char *end;
	long x = strtol(arg, &end, 10);

	if (*end || end == arg || x < lo || x > hi) {
		cli_err("--%s takes a whole number %ld..%ld", name, lo, hi);
		return -1;
	}
	*v = (int)x;
	return 0;
}

/* The options of submit's command form and of cat. */
static int
task_opt(struct cli *c, int o, char *arg)
{
	char *end;

	switch (o) {
	case OPT_NAME: c->name = arg; return 0;
	case OPT_CPUS: return int_opt("cpus", arg, 1, FT_TASK_CPUS_MAX, &c->cpus);
	case OPT_GPUS:
		if (c->cmd && strcmp(c->cmd, "join") == 0) {
			c->gpu_list = arg;	/* ids, or a count */
			return 0;
		}
		return int_opt("gpus", arg, 0, FT_TASK_GPUS_MAX, &c->gpus);
	case OPT_PRIORITY:
		return int_opt("priority", arg, FT_BATCH_PRIO_MIN,
			       FT_BATCH_PRIO_MAX, &c->priority);
	case OPT_EACH_LINE: c->each_line = arg; return 0;
	case OPT_ARRAY: c->array = arg; return 0;
	case OPT_STDERR: c->stderr_out = 1; return 0;
	case OPT_STDOUT_FILE: c->stdout_file = arg; return 0;
	case OPT_STDERR_FILE: c->stderr_file = arg; return 0;
	case OPT_MEM:
		if (memsize_parse(arg, &c->mem) == -1) {
			cli_err("--mem takes bytes or a number with K, M, G or "
				"T (\"2G\"), not \"%s\"", arg);
			return -1;
		}
		return 0;
	case OPT_TIME_REQUEST:
		c->time_request = strtod(arg, &end);
		if (*end || end == arg || !(c->time_request > 0 &&
					    c->time_request <=
					    FT_TASK_TIMEOUT_MAX)) {
			cli_err("--time-request takes seconds (more than 0, at "
				"most %g)", (double)FT_TASK_TIMEOUT_MAX);
			return -1;
		}
		return 0;
	default:
		c->timeout = strtod(arg, &end);
		if (*end || end == arg || !(c->timeout > 0)) {
			cli_err("--timeout takes seconds (more than 0)");
			return -1;
		}
		return 0;
	}
}

/* The options of command C->cmd in ARGV: submit's --stderr names a
 * file (cat's prints the tasks' stderr). */
static int
parse(struct cli *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "json", no_argument, NULL, 'j' },
		{ "wait", no_argument, NULL, 'w' },
		{ "foreground", no_argument, NULL, 'f' },
		{ "standby", no_argument, NULL, OPT_STANDBY },
		{ "reconnect-timeout", required_argument, NULL, OPT_RECONNECT },
		{ "force", no_argument, NULL, OPT_FORCE },
		{ "help", no_argument, NULL, 'h' },
		{ "output", required_argument, NULL, 'o' },
		{ "shards", required_argument, NULL, 's' },
		{ "reducers", required_argument, NULL, 'r' },
		{ "delimiters", required_argument, NULL, 'd' },
		{ "follow", no_argument, NULL, OPT_FOLLOW },
		{ "since", required_argument, NULL, OPT_SINCE },
		{ "type", required_argument, NULL, OPT_TYPE },
		{ "name", required_argument, NULL, OPT_NAME },
		{ "cpus", required_argument, NULL, OPT_CPUS },
		{ "gpus", required_argument, NULL, OPT_GPUS },
		{ "timeout", required_argument, NULL, OPT_TIMEOUT },
		{ "priority", required_argument, NULL, OPT_PRIORITY },
		{ "each-line", required_argument, NULL, OPT_EACH_LINE },
		{ "array", required_argument, NULL, OPT_ARRAY },
		{ "stderr", no_argument, NULL, OPT_STDERR },
		{ "after", required_argument, NULL, OPT_AFTER },
		{ "after-any", required_argument, NULL, OPT_AFTER_ANY },
		{ "mem", required_argument, NULL, OPT_MEM },
		{ "stdout", required_argument, NULL, OPT_STDOUT_FILE },
		{ "slots", required_argument, NULL, OPT_SLOTS },
		{ "grace", required_argument, NULL, OPT_GRACE },
		{ "time-request", required_argument, NULL, OPT_TIME_REQUEST },
		{ "time-limit", required_argument, NULL, OPT_TIME_LIMIT },
		{ NULL, 0, NULL, 0 },
	};
	struct option mine[FT_ARRAY_LEN(opts)];
	char *end;
	int o;
	size_t k;

	memcpy(mine, opts, sizeof(opts));
	for (k = 0; mine[k].name; k++)
		if (strcmp(mine[k].name, "stderr") == 0 && c->cmd &&
		    strcmp(c->cmd, "submit") == 0) {
			mine[k].has_arg = required_argument;
			mine[k].val = OPT_STDERR_FILE;
		}
	/* A command's own options come after "--", where getopt stops. */
	while ((o = getopt_long(argc, argv, "c:ho:", mine, NULL)) != -1) {
		switch (o) {
		case 'c': c->config = optarg; break;
		case 'o': c->output = optarg; break;
		case 'd': c->delimiters = optarg; break;
		case 's':
		case 'r':
			*(o == 's' ? &c->shards : &c->reducers) =
				strtol(optarg, &end, 10);
			if (*end || end == optarg || strtol(optarg, NULL, 10) < 1) {
				cli_err("--%s takes a positive whole number",
					o == 's' ? "shards" : "reducers");
				return -1;
			}
			break;
		case 'h': c->help = 1; break;
		case 'j': c->json = 1; break;
		case 'w': c->wait = 1; break;
		case 'f': c->foreground = 1; break;
		case OPT_STANDBY: c->standby = 1; break;
		case OPT_RECONNECT:
			c->reconnect = strtod(optarg, &end);
			if (*end || end == optarg || !(c->reconnect >= 0)) {
				cli_err("--reconnect-timeout takes seconds "
					"(0 or more)");
				return -1;
			}
			break;
		case OPT_FORCE: c->force = 1; break;
		case OPT_FOLLOW: c->follow = 1; break;
		case OPT_SINCE: c->since = optarg; break;
		case OPT_TYPE: add_types(c, optarg); break;
		case OPT_AFTER: c->after = optarg; break;
		case OPT_SLOTS:
			if (int_opt("slots", optarg, 1, 4096, &c->slots) == -1)
				return -1;
			break;
		case OPT_GRACE:
			c->grace = strtod(optarg, &end);
			if (*end || end == optarg || !(c->grace >= 0 &&
						       c->grace <= 1e7)) {
				cli_err("--grace takes seconds, 0 to 1e7");
				return -1;
			}
			break;
		case OPT_AFTER_ANY: c->after_any = optarg; break;
		case OPT_TIME_LIMIT:
			c->time_limit = strtod(optarg, &end);
			if (*end || end == optarg || !(c->time_limit > 0 &&
						       c->time_limit <= 1e9)) {
				cli_err("--time-limit takes seconds (more than "
					"0)");
				return -1;
			}
			break;
		case OPT_NAME: case OPT_CPUS: case OPT_GPUS: case OPT_TIMEOUT:
		case OPT_PRIORITY: case OPT_EACH_LINE: case OPT_ARRAY:
		case OPT_STDERR: case OPT_MEM: case OPT_STDOUT_FILE:
		case OPT_STDERR_FILE: case OPT_TIME_REQUEST:
			if (task_opt(c, o, optarg) == -1)
				return -1;
			c->cmdline |= o != OPT_STDERR && !c->gpu_list;
			break;
		default: return -1;
		}
	}
	c->cmdline |= optind > 1 && strcmp(argv[optind - 1], "--") == 0;
	c->argc = argc - optind;
	c->argv = argv + optind;
	return 0;
}

int
main(int argc, char **argv)
{
	struct cli c = { .reconnect = -1, .grace = -1 };
	const struct command *cmd;
	char err[1024];
	int rc;

	if (argc < 2)
		return usage(stderr, 2);
	if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)
		return usage(stdout, 0);
	if (strcmp(argv[1], "help") == 0)
		return help(argc, argv);
	if ((cmd = command_named(argv[1])) == NULL) {
		cli_err("unknown command \"%s\"", argv[1]);
		return usage(stderr, 2);
	}
	c.cmd = cmd->name;
	if (parse(&c, argc - 1, argv + 1) == -1) {
		fprintf(stderr, "usage: ftfarm %s\n", cmd->usage);
		rc = 2;
		goto out;
	}
	if (c.help) {
		rc = command_help(cmd);
		goto out;
	}
	if (c.config == NULL)
		c.config = getenv("FTFARM_CONFIG");
	if (cmd->needs_config) {
		if (c.config == NULL) {
			cli_err("%s needs a config: -c CFG", argv[1]);
			rc = 2;
			goto out;
		}
		if (ft_config_load(c.config, &c.cfg, err, sizeof(err)) == -1) {
			fprintf(stderr, "%s\n", err);
			rc = 2;
			goto out;
		}
		ft_batch_protect(c.cfg.state_dir);
		/* start runs where the master will: never over TCP. */
		if (cmd->fn != cli_start)
			cli_remote_init(&c.cfg);
	}
	rc = cmd->fn(&c);
	ft_config_free(&c.cfg);
out:
	free(c.types);
	return rc;
}

/* ftfarm: the user's command.  See cli.h for the commands. */
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batch.h"
#include "cli.h"
#include "remote.h"

/* Which commands need the config loaded. */
static const struct {
	const char *name;
	int (*fn)(struct cli *c);
	int needs_config;
	const char *usage;
} commands[] = {
	{ "start", cli_start, 1, "start -c CFG [--standby] [--foreground]" },
	{ "stop", cli_stop, 1, "stop -c CFG" },
	{ "submit", cli_submit, 1, "submit -c CFG BATCH.json [--wait] "
	  "[--reconnect-timeout S]" },
	{ "wait", cli_wait, 1, "wait -c CFG BATCH_ID [--reconnect-timeout S]" },
	{ "wordcount", cli_wordcount, 1, "wordcount -c CFG -o OUT [--shards N] "
	  "[--reducers R] [--delimiters FILE] INPUT..." },
	{ "status", cli_status, 1, "status -c CFG [--json]" },
	{ "nodes", cli_nodes, 1, "nodes -c CFG [--json]" },
	{ "drain", cli_drain, 1, "drain -c CFG NODE [--json]" },
	{ "undrain", cli_undrain, 1, "undrain -c CFG NODE [--json]" },
	{ "reboot", cli_reboot, 1, "reboot -c CFG NODE|all [--force] [--json]" },
	{ "cancel", cli_cancel, 1, "cancel -c CFG BATCH_ID [--json]" },
	{ "watch", cli_watch, 1, "watch -c CFG" },
	{ "events", cli_events, 1, "events -c CFG [--follow] [--since TS] "
	  "[--type TYPE]..." },
	{ "check", cli_check, 1, "check -c CFG [BATCH.json...]" },
	{ "rotate", cli_rotate, 1, "rotate -c CFG" },
	{ "probe", cli_probe, 0, "probe" },
};

void
cli_err(const char *fmt, ...)
{
	va_list ap;

	fputs("ftfarm: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static int
usage(void)
{
	size_t i;

	fprintf(stderr, "usage:\n");
	for (i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(stderr, "  ftfarm %s\n", commands[i].usage);
	fprintf(stderr, "CFG may also come from $FTFARM_CONFIG.\n");
	return 2;
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
};

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
		{ NULL, 0, NULL, 0 },
	};
	char *end;
	int o;

	while ((o = getopt_long(argc, argv, "c:ho:", opts, NULL)) != -1) {
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
		default: return -1;
		}
	}
	c->argc = argc - optind;
	c->argv = argv + optind;
	return 0;
}

int
main(int argc, char **argv)
{
	struct cli c = { .reconnect = -1 };
	char err[1024];
	size_t i;
	int rc;

	if (argc < 2 || strcmp(argv[1], "-h") == 0 ||
	    strcmp(argv[1], "--help") == 0)
		return usage();
	for (i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (strcmp(argv[1], commands[i].name) == 0)
			break;
	if (i == sizeof(commands) / sizeof(commands[0])) {
		cli_err("unknown command \"%s\"", argv[1]);
		return usage();
	}
	if (parse(&c, argc - 1, argv + 1) == -1)
		return usage();
	if (c.config == NULL)
		c.config = getenv("FTFARM_CONFIG");
	if (commands[i].needs_config) {
		if (c.config == NULL) {
			cli_err("%s needs a config: -c CFG", argv[1]);
			return 2;
		}
		if (ft_config_load(c.config, &c.cfg, err, sizeof(err)) == -1) {
			fprintf(stderr, "%s\n", err);
			return 2;
		}
		ft_batch_protect(c.cfg.state_dir);
		/* start runs where the master will: never over TCP. */
		if (commands[i].fn != cli_start)
			cli_remote_init(&c.cfg);
	}
	rc = commands[i].fn(&c);
	ft_config_free(&c.cfg);
	free(c.types);
	return rc;
}

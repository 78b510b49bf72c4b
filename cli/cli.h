/*
 * cli: ftfarm, the user's command.
 *
 *   ftfarm start  -c CFG [--standby] [--foreground]
 *                                          start the supervisor, the master and
 *                                          its workers (--standby: a supervisor
 *                                          that takes over when the active one
 *                                          is gone)
 *   ftfarm stop   -c CFG                   stop them, leave no process behind
 *   ftfarm submit -c CFG BATCH.json [--wait] [--reconnect-timeout S]
 *                 [--after ID,...] [--after-any ID,...]
 *   ftfarm wait   -c CFG BATCH_ID [--reconnect-timeout S]
 *   ftfarm wordcount -c CFG -o OUT [--shards N] [--reducers R]
 *                    [--delimiters FILE] INPUT...
 *   ftfarm status -c CFG [--json]
 *   ftfarm nodes  -c CFG [--json]         the nodes, their states and reboots
 *   ftfarm drain  -c CFG NODE [--json]    no new tasks for NODE
 *   ftfarm undrain -c CFG NODE [--json]   NODE back in service
 *   ftfarm reboot -c CFG NODE|all [--force] [--json]
 *                                          drain, power-cycle, workers back
 *   ftfarm cancel -c CFG BATCH_ID... [--json]
 *   ftfarm batch -c CFG BATCH_ID [--json] [--reconnect-timeout S]
 *                                          one batch: state and counts
 *   ftfarm forget -c CFG BATCH_ID          an ended batch forgotten now
 *   ftfarm join   -c CFG [--slots N] [--gpus LIST] [--name NAME]
 *                 [--reconnect-timeout S]  this host joins the farm as a
 *                                          node, over TCP (ftfarm-agent)
 *   ftfarm leave  -c CFG NODE [--grace S] [--json]
 *                                          a joined node leaves
 *   ftfarm alloc  -c CFG [--json]          the allocation queues
 *   ftfarm alloc pause|resume -c CFG QUEUE
 *   ftfarm watch  -c CFG                   a live view, redrawn in place
 *   ftfarm events -c CFG [--follow] [--since TS] [--type T]...
 *   ftfarm check  -c CFG [BATCH.json...]  validate without running anything
 *   ftfarm probe                           what the installed MPI can do
 *   ftfarm rotate -c CFG                   rotate master.log, events.jsonl
 *   ftfarm help [CMD], ftfarm CMD --help   the commands, or one's usage
 *                                          (from the table in main.c)
 *
 * Exit status: 0 success, 1 failure, 2 bad usage or bad input.
 */
#ifndef FT_CLI_H
#define FT_CLI_H

#include <jansson.h>
#include <stdint.h>

#include "config.h"
#include "ctl.h"
#include "err.h"

struct cli {
	const char *config;		/* -c */
	struct ft_config cfg;		/* loaded when the command needs it */
	int help;			/* --help, -h */
	int json;			/* --json */
	int wait;			/* --wait */
	int foreground;			/* --foreground */
	int standby;			/* --standby */
	double reconnect;		/* --reconnect-timeout, < 0 for the default */
	int force;			/* --force */
	const char *output;		/* -o */
	long shards;			/* --shards, 0 for the default */
	long reducers;			/* --reducers, 0 for the default */
	const char *delimiters;		/* --delimiters */
	int follow;			/* --follow */
	const char *since;		/* --since */
	char **types;			/* --type, each (NULL-terminated) */
	int ntypes;
	const char *name;		/* --name */
	int cpus, gpus;			/* --cpus, --gpus (0: not given) */
	double timeout;			/* --timeout (0: not given) */
	double time_request;		/* submit --time-request (0: not given) */
	double time_limit;		/* join --time-limit (0: not given) */
	int priority;			/* --priority */
	const char *each_line;		/* --each-line FILE */
	const char *array;		/* --array A-B */
	const char *after;		/* --after ID[,ID...] */
	const char *after_any;		/* --after-any ID[,ID...] */
	int stderr_out;			/* --stderr (cat) */
	const char *stdout_file;	/* submit --stdout PATTERN */
	const char *stderr_file;	/* submit --stderr PATTERN */
	uint64_t mem;			/* submit --mem (0: not given) */
	const char *cmd;		/* the command's name */
	int slots;			/* --slots (0: not given) */
	const char *gpu_list;		/* join --gpus LIST */
	double grace;			/* --grace (< 0: not given) */
	int cmdline;			/* submit's operands are a command */
	int argc;			/* operands after the options */
	char **argv;
	int status;			/* exit status of the last failed call */
	int unreachable;		/* the last call found no master */
};

int cli_start(struct cli *c);
int cli_stop(struct cli *c);
int cli_submit(struct cli *c);
int cli_wait(struct cli *c);
int cli_wordcount(struct cli *c);
int cli_status(struct cli *c);
int cli_nodes(struct cli *c);
int cli_drain(struct cli *c);
int cli_undrain(struct cli *c);
int cli_reboot(struct cli *c);
int cli_cancel(struct cli *c);
int cli_batch(struct cli *c);
int cli_forget(struct cli *c);
int cli_join(struct cli *c);
int cli_leave(struct cli *c);
int cli_alloc(struct cli *c);
int cli_watch(struct cli *c);
int cli_events(struct cli *c);
int cli_check(struct cli *c);
/* The text of the batch of exec tasks that submit's command-line form
 * describes (-- COMMAND ARG..., --each-line, --array), unchecked,
 * appended to OUT; 0, or the exit status after printing the error. */
int cli_command_batch(const struct cli *c, struct ft_buf *out);
int cli_cat(struct cli *c);
int cli_probe(struct cli *c);
int cli_rotate(struct cli *c);

/* Send REQ to the master (timeout in seconds, <= 0 forever).  The answer
 * if it says ok; otherwise prints the error and returns NULL with
 * c->status the exit status it calls for (2: bad input, else 1). */
json_t *cli_call(struct cli *c, json_t *req, double timeout);
/* The same with BODY after the request line. */
json_t *cli_call_body(struct cli *c, json_t *req, const struct ctl_body *body,
		      double timeout);
/* cli_call for a request that changes nothing: while the master restarts
 * (a supervisor holds the lease), it goes again to the next one, as wait
 * does (--reconnect-timeout); WHAT names it in the message said then. */
json_t *cli_call_across(struct cli *c, json_t *req, double timeout,
			const char *what);
/* ROWS as a table of the titled columns of COLS (N of them). */
struct ctl_col;
void cli_print_table(const struct ctl_col *cols, int n, json_t *rows);
/* Wait for batch ID showing one progress line on stderr (a terminal)
 * while it runs: the wait's answer if it says ok, else NULL, said, or
 * unsaid with *BROKEN set when the connection failed or broke. */
json_t *cli_wait_progress(struct cli *c, json_int_t id, int *broken);
/* Is MSG a push of KIND ({"push": KIND, ...})? */
int cli_push_is(json_t *msg, const char *kind);

#endif

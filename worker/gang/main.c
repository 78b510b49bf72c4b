/*
 * ftfarm-gang: one rank of a gang task.
 *
 *   ftfarm-gang [PLUGIN_DIR]
 *
 * Only a master starts it, with one MPI_Comm_spawn of the whole gang.  It
 * says hello, gets the job in START, loads the plugin of the job's type
 * (PLUGIN_DIR/TYPE.so, by default bin/gangs/ beside this program), checks
 * the job again and runs the plugin, which reports the rank's RESULT and
 * serves the master until STOP.  A job this rank cannot run is reported
 * as a failed RESULT.  Exit status: 0, or 1 when the rank could not work.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gang.h"
#include "gang_load.h"
#include "gang_plugin.h"
#include "util.h"

#define START_TIMEOUT 60.0	/* seconds from hello to START */

/* Report a failed RESULT for WHY, serve until STOP.  Returns 1. */
static int
refuse(struct gang *g, const char *why)
{
	struct gang_result r = {
		.ok = 0, .reason = why, .reason_len = strlen(why),
		.report = "", .report_len = 0,
	};

	gang_report(g, &r);
	for (;;) {
		int rc = gang_await(g, gang_epoch(g));

		if (rc == GANG_STOP)
			return 1;
		if (rc == GANG_WRITE)
			gang_written(g, 0, why);
	}
}

/* Load, check and run the job's plugin from DIR (NULL: the default). */
static int
run_job(struct gang *g, const char *dir)
{
	const json_t *job = gang_job(g);
	const struct ft_gang_plugin *pl;
	char err[512], *dflt = dir ? NULL : gang_load_default_dir();
	struct jerr je;
	void *handle;
	int active, spares, rc;

	pl = gang_load(dir ? dir : dflt, jget_str(job, "type", ""), &handle,
		       err, sizeof(err));
	free(dflt);
	if (pl == NULL)
		return refuse(g, err);
	memset(&je, 0, sizeof(je));
	if (pl->validate(job, "job", &je) == -1) {
		char msg[sizeof(je.path) + sizeof(je.msg) + 2];

		snprintf(msg, sizeof(msg), "%s: %s", je.path, je.msg);
		return refuse(g, msg);
	}
	pl->size(job, &active, &spares);
	if (active + spares != gang_size(g)) {
		snprintf(err, sizeof(err), "gang of %d ranks, the job needs %d",
			 gang_size(g), active + spares);
		return refuse(g, err);
	}
	rc = pl->run(g, job, err, sizeof(err));
	if (rc != 0)
		fprintf(stderr, "ftfarm-gang: rank %d: %s\n", gang_rank(g), err);
	return rc;
}

int
main(int argc, char **argv)
{
	char err[256];
	struct gang *g;
	const char *why;
	int code;

	g = gang_init(&argc, &argv, START_TIMEOUT, err, sizeof(err));
	if (g == NULL) {
		fprintf(stderr, "ftfarm-gang: %s\n", err);
		_exit(1);
	}
	code = run_job(g, argc > 1 ? argv[1] : NULL);
	why = gang_stop_reason(g);
	if (strcmp(why, "the master said stop") != 0)
		fprintf(stderr, "ftfarm-gang: rank %d: %s\n", gang_rank(g),
			why);
	gang_leave(g, code);
}

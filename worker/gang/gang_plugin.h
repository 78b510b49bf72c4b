/*
 * gang_plugin: the C ABI of gang algorithms.
 *
 * A gang job type ("ftallreduce", "pipeline") is a shared object in
 * bin/gangs/ (sources in worker/gang/) exporting one function,
 * ftfarm_gang_plugin(), that returns a static struct ft_gang_plugin, in
 * the style of the task plugins (common/plugin.h).
 *
 * The master and the CLI load it to check a submitted job and to learn how
 * many processes its gang needs (validate, size: no MPI, no gang runtime
 * called); each rank of the gang (ftfarm-gang) loads it to run the
 * algorithm.  run() calls the gang runtime (gang.h, gang_req.h), which the
 * ftfarm-gang executable exports, and MPI: load the plugin with RTLD_LAZY
 * in a process that only validates.
 */
#ifndef FT_GANG_PLUGIN_H
#define FT_GANG_PLUGIN_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "jcheck.h"

#define FT_GANG_ABI 1
#define FT_GANG_SYMBOL "ftfarm_gang_plugin"

struct gang;

struct ft_gang_plugin {
	uint32_t abi;			/* FT_GANG_ABI */
	const char *name;		/* the job "type" it serves */
	/* Check the job object JOB found at PATH (its "type" already
	 * matched).  May look at the files it names.  0, or -1 with ERR. */
	int (*validate)(const json_t *job, const char *path, struct jerr *err);
	/* The processes of a gang for JOB (checked): *ACTIVE working ranks
	 * and *SPARES watching ones; the gang is one spawn of their sum,
	 * active ranks first (world ranks 0 .. *ACTIVE - 1). */
	void (*size)(const json_t *job, int *active, int *spares);
	/* Run this rank's part of JOB on gang G: the algorithm, the RESULT
	 * (gang_report), then serve the master (WRITE, notices) until it says
	 * stop.  Returns the rank's exit status: 0, or 1 with ERR set when the
	 * plugin itself could not work (its RESULT, when it sent one, says
	 * why too). */
	int (*run)(struct gang *g, const json_t *job, char *err, size_t n);
};

typedef const struct ft_gang_plugin *(*ft_gang_plugin_fn)(void);

/* Define the exported ftfarm_gang_plugin() of a gang plugin. */
#define FT_GANG_PLUGIN_DEFINE(NAME, VALIDATE, SIZE, RUN)		\
	__attribute__((visibility("default")))				\
	const struct ft_gang_plugin *ftfarm_gang_plugin(void);		\
	const struct ft_gang_plugin *					\
	ftfarm_gang_plugin(void)					\
	{								\
		static const struct ft_gang_plugin plugin = {		\
			.abi = FT_GANG_ABI, .name = (NAME),		\
			.validate = (VALIDATE), .size = (SIZE),		\
			.run = (RUN),					\
		};							\
		return &plugin;						\
	}

#endif

/*
 * plugins: loading the task types (the .so files in bin/tasks).
 */
#ifndef FT_PLUGINS_H
#define FT_PLUGINS_H

#include <stddef.h>

#include "plugin.h"

/* A checker of jobs whose type no task plugin serves (gang jobs, served
 * by processes of their own: worker/gang/): 0, -1 with ERR, or 1 when
 * the type is none of its own either.  Called from any thread. */
typedef int (*ft_job_check_fn)(void *ctx, const json_t *job, const char *path,
			       struct jerr *err);

struct ft_plugins {
	const struct ft_plugin **v;
	void **handles;
	int n;
	ft_job_check_fn other_jobs;	/* or NULL (set by the caller) */
	void *other_ctx;
};

/* The default plugin directory: "tasks" beside the running executable
 * (the build tree), else "../lib/ftfarm/tasks" from it (installed); a new
 * string. */
char *ft_plugins_default_dir(void);
/* Load every *.so in DIR, in name order.  0, or -1 with one line in ERR
 * (a plugin that cannot be loaded, has a wrong ABI or a duplicate name). */
int ft_plugins_load(struct ft_plugins *p, const char *dir, char *err, size_t n);
const struct ft_plugin *ft_plugins_find(const struct ft_plugins *p,
					const char *name);
/* The index in p->v of the type called NAME, or -1 (NAME may be NULL). */
int ft_plugins_index(const struct ft_plugins *p, const char *name);
/* "exec,sleep" (a new string). */
char *ft_plugins_names(const struct ft_plugins *p);
void ft_plugins_free(struct ft_plugins *p);

#endif

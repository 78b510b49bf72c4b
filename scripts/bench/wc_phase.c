/*
 * wc_phase: two builds of the wordcount plugin side by side, task by task,
 * in one process (no cluster, no MPI): what a change to the plugin's map,
 * reduce or merge costs, without the dispatch and the machine's drift
 * between cluster runs.  Driven by wc_phase.py, which builds it.
 *
 *   wc_phase OLD.so NEW.so CORPUS DIR PHASE ROUNDS
 *
 * Plans a wordcount job over CORPUS in DIR with OLD's job hooks, runs the
 * phases before PHASE (0 map, 1 reduce, 2 merge) with OLD, then ROUNDS
 * times each task of PHASE with both builds, the order alternating from
 * task to task.  Every run must succeed; the last merge's output is
 * DIR/out.txt.  Prints one line per run: "old|new TASK SECONDS".
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "plugin.h"

static double
now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static const struct ft_plugin *
load(const char *path)
{
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	ft_plugin_fn fn;

	if (h == NULL) {
		fprintf(stderr, "wc_phase: %s\n", dlerror());
		exit(2);
	}
	fn = (ft_plugin_fn)dlsym(h, "ftfarm_plugin");
	if (fn == NULL) {
		fprintf(stderr, "wc_phase: %s: no ftfarm_plugin\n", path);
		exit(2);
	}
	return fn();
}

/* Run TASK (index I) with P; its seconds.  Exits on a failed task. */
static double
run(const struct ft_plugin *p, const json_t *task, size_t i, json_t **report)
{
	volatile int cancel = 0;
	struct ft_task t = { .id = i, .attempt = 1, .spec = task,
			     .cancel = &cancel, .output_cap = 65536 };
	struct ft_result r;
	double t0;

	memset(&r, 0, sizeof(r));
	t0 = now();
	p->run(&t, &r);
	t0 = now() - t0;
	if (!r.ok) {
		fprintf(stderr, "wc_phase: task %zu failed: %s\n", i, r.reason);
		exit(1);
	}
	if (report)
		*report = json_loadb(r.out, r.out_len, 0, NULL);
	free(r.out);
	free(r.err);
	return t0;
}

/* The next phase's tasks, after reporting every task of TASKS with P. */
static json_t *
next_phase(const struct ft_plugin *p, void *job, json_t *tasks)
{
	json_t *t, *rep, *next = json_array();
	char err[512];
	size_t i;

	json_array_foreach(tasks, i, t) {
		run(p, t, i, &rep);
		if (p->job->report(job, i, rep, err, sizeof(err)) == -1) {
			fprintf(stderr, "wc_phase: report: %s\n", err);
			exit(1);
		}
		json_decref(rep);
	}
	if (p->job->plan(job, next, err, sizeof(err)) == -1) {
		fprintf(stderr, "wc_phase: plan: %s\n", err);
		exit(1);
	}
	json_decref(tasks);
	return next;
}

int
main(int argc, char **argv)
{
	const struct ft_plugin *p[2];
	json_t *spec, *t, *tasks = json_array();
	char err[512], out[4096];
	void *job;
	int phase, rounds, r, k, ph;
	size_t i;

	if (argc != 7) {
		fprintf(stderr, "usage: wc_phase OLD.so NEW.so CORPUS DIR "
			"PHASE ROUNDS\n");
		return 2;
	}
	p[0] = load(argv[1]);
	p[1] = load(argv[2]);
	phase = atoi(argv[5]);
	rounds = atoi(argv[6]);
	snprintf(out, sizeof(out), "%s/out.txt", argv[4]);
	spec = json_pack("{s:s, s:[s], s:s}", "type", "wordcount", "inputs",
			 argv[3], "output", out);
	job = p[0]->job->init(spec, argv[4], err, sizeof(err));
	if (job == NULL || p[0]->job->plan(job, tasks, err, sizeof(err))) {
		fprintf(stderr, "wc_phase: %s\n", err);
		return 1;
	}
	for (ph = 0; ph < phase; ph++)
		tasks = next_phase(p[0], job, tasks);
	for (r = 0; r < rounds; r++)
		json_array_foreach(tasks, i, t)
			for (k = 0; k < 2; k++) {
				int b = (int)(((size_t)r + i + (size_t)k) & 1);

				printf("%s %zu %.6f\n", b ? "new" : "old", i,
				       run(p[b], t, i, NULL));
			}
	json_decref(tasks);
	p[0]->job->free(job);
	json_decref(spec);
	return 0;
}

/*
 * place: the scheduler's cost per task (master/sched.c alone, no MPI, no
 * I/O), for one-slot tasks and with many multi-slot tasks pending.
 *
 *   place [--nodes N] [--slots S] [--gpus G] [--tasks T] [--mix]
 *
 * N nodes of S workers (G GPUs each).  T tasks are queued at once, then
 * the workers are served round by round as the master's registry would:
 * each worker reports what it holds (1 ms of service each) and takes what
 * the scheduler gives; when the scheduler lets held workers go, every
 * worker is offered tasks again (registry_wake).  Without --mix every task
 * needs one slot; with it, of every 8 tasks 4 need 1 slot, 2 need 2, 1
 * needs S (a whole node) and 1 needs a GPU.  Prints one line: tasks,
 * seconds, nanoseconds per task.  Built by scripts/bench/place.py;
 * with -DPLACE_ONE_SLOT_ONLY against a scheduler without resources (an
 * older tree's), for one-slot tasks only.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sched.h"

#define HOLD_MAX 64

struct held {
	struct sched_pick p[HOLD_MAX];
	int n;
};

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static long
arg(int argc, char **argv, const char *name, long def)
{
	int i;

	for (i = 1; i + 1 < argc; i++)
		if (strcmp(argv[i], name) == 0)
			return atol(argv[i + 1]);
	return def;
}

static int
flag(int argc, char **argv, const char *name)
{
	int i;

	for (i = 1; i < argc; i++)
		if (strcmp(argv[i], name) == 0)
			return 1;
	return 0;
}

/* Offer worker W tasks; what it gets joins H. */
static void
offer(struct sched *s, int w, double t, struct held *h)
{
	int room = HOLD_MAX - h->n;

	if (room > 0)
		h->n += sched_take(s, w, t, h->p + h->n, room);
}

int
main(int argc, char **argv)
{
	int nodes = (int)arg(argc, argv, "--nodes", 16);
	int slots = (int)arg(argc, argv, "--slots", 4);
	int gpus = (int)arg(argc, argv, "--gpus", 2);
	long ntasks = arg(argc, argv, "--tasks", 200000), i, ended = 0;
	int mix = flag(argc, argv, "--mix"), nw = nodes * slots, w, k;
	struct sched_params prm;
	struct held *held = calloc((size_t)nw, sizeof(*held));
	int *node_of = calloc((size_t)nw, sizeof(int));
	struct sched *s;
	double t0, t = 0;
	static const char spec[] = "{}";

	sched_params_default(&prm);
	s = sched_new(nw, &prm, NULL);
	for (w = 0; w < nw; w++)
		node_of[w] = w / slots;
#ifndef PLACE_ONE_SLOT_ONLY
	sched_set_nodes(s, node_of, nodes);
	for (k = 0; k < nodes; k++)
		sched_set_gpus(s, k, gpus);
#else
	(void)gpus;
	if (mix) {
		fprintf(stderr, "--mix needs a scheduler with resources\n");
		return 2;
	}
#endif
	for (w = 0; w < nw; w++)
		sched_worker_up(s, w);
	t0 = now_s();
	for (i = 0; i < ntasks; i++) {
#ifndef PLACE_ONE_SLOT_ONLY
		static const int cpus[8] = { 1, 1, 1, 1, 2, 2, 0, 1 };
		struct sched_need need = { .cpus = 1 };

		if (mix) {
			need.cpus = cpus[i % 8] ? cpus[i % 8] : slots;
			need.gpus = i % 8 == 7 && gpus > 0;
		}
		sched_add_need(s, 1, (uint32_t)i, spec, 2, 100, &need);
#else
		sched_add(s, 1, (uint32_t)i, spec, 2, 100);
#endif
	}
	while (ended < ntasks) {
		t += 1e-3;
		for (w = 0; w < nw; w++) {
			struct held *h = &held[w];

			for (k = 0; k < h->n; k++)
				ended += sched_done(s, w, h->p[k].tid,
						    h->p[k].attempt, 1e-3, t) ==
					 SCHED_ACCEPTED;
			h->n = 0;
			offer(s, w, t, h);
		}
#ifndef PLACE_ONE_SLOT_ONLY
		if (sched_wake(s))
			for (w = 0; w < nw; w++)
				offer(s, w, t, &held[w]);
#endif
		sched_reclaim(s);
	}
	t0 = now_s() - t0;
	printf("%ld tasks, %.3f s, %.0f ns per task\n", ntasks, t0,
	       t0 / (double)ntasks * 1e9);
	sched_free(s);
	free(held);
	free(node_of);
	return 0;
}

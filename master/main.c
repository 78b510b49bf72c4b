/*
 * ftfarm-master: the long-running master of a cluster.
 *
 * Started by `ftfarm start` under the MPI launcher, once (dynamic launch)
 * or as rank 0 of a static world.  It reads the cluster config, starts or
 * attaches the workers, and serves batches until it is told to stop.
 *
 * usage: ftfarm-master -c CONFIG
 *        ftfarm-master --probe
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "master.h"

static void
usage(void)
{
	fprintf(stderr, "usage: ftfarm-master -c CONFIG | --probe\n");
	exit(2);
}

/* Print the MPI's abilities in one line. */
static int
probe(struct master *m, int dynamic)
{
	printf("MPI: %s; dynamic processes: %s; launch modes: %s\n",
	       m->mpi_version, dynamic ? "yes" : "no",
	       dynamic ? "dynamic, static" : "static");
	return 0;
}

/* Everything before the workers: config, state dir, logs, plugins.
 * 0, or -1 with ERR (exit status 2 then). */
static int
setup(struct master *m, const char *config, char *err, size_t n)
{
	char *path, *dir;
	int level;

	if (ft_config_load(config, &m->cfg, err, n) == -1)
		return -1;
	if (ft_mkdirs(m->cfg.state_dir) == -1) {
		snprintf(err, n, "%s: %s", m->cfg.state_dir, strerror(errno));
		return -1;
	}
	path = ft_asprintf("%s/master.log", m->cfg.state_dir);
	log_init(path, "ftfarm-master");
	free(path);
	level = log_level_parse(m->cfg.log_level);
	log_set_level(level < 0 ? LOG_INFO : (enum log_level)level);
	path = ft_asprintf("%s/events.jsonl", m->cfg.state_dir);
	if (jsonl_open(&m->events, path) == -1) {
		snprintf(err, n, "%s: %s", path, strerror(errno));
		free(path);
		return -1;
	}
	free(path);
	dir = ft_plugins_default_dir();
	if (ft_plugins_load(&m->plugins, dir, err, n) == -1) {
		free(dir);
		return -1;
	}
	free(dir);
	dir = ft_exe_dir();
	m->worker_exe = ft_asprintf("%s/ftfarm-worker", dir);
	free(dir);
	return 0;
}

static void
write_pid(struct master *m)
{
	char *path = ft_asprintf("%s/master.pid", m->cfg.state_dir);
	char *text = ft_asprintf("%d\n", (int)getpid());

	ft_write_file_atomic(path, text, strlen(text));
	free(path);
	free(text);
}

/* Spawn every worker (dynamic) or attach the world's ranks (static). */
static int
start_workers(struct master *m, char *err, size_t n)
{
	int i, up = 0;

	if (m->static_world)
		return launch_static(m, err, n);
	for (i = 0; i < m->nworkers; i++) {
		struct worker *w = &m->workers[i];

		if (launch_spawn(m, w, err, n) == 0) {
			up++;
			continue;
		}
		log_warnx("worker %d: spawn failed: %s", w->slot, err);
		w->failures = 1;
		w->respawn_due = 1;
		w->respawn_at = ft_now() + 1;
	}
	return up > 0 ? 0 : -1;
}

static void
shutdown_master(struct master *m)
{
	int i;

	control_close(m);
	results_close(m);
	jsonl_event(&m->events, "master_stopped");
	jsonl_end(&m->events);
	jsonl_close(&m->events);
	for (i = 0; i < m->nworkers; i++)
		if (m->workers[i].comm != MPI_COMM_NULL) {
			treq_retire_peer(&m->treqs, m->workers[i].comm,
					 m->workers[i].rank);
			if (!m->static_world)
				MPI_Comm_free(&m->workers[i].comm);
		}
	log_info("stopped");
}

static int
run(struct master *m, int dynamic)
{
	struct sched_params sp;
	struct sched_ops ops;
	char err[1024];

	m->static_world = m->cfg.launch == FT_LAUNCH_STATIC;
	m->can_kill = !(m->static_world && strcmp(FT_MPI_FLAVOR, "mpich") == 0);
	log_info("MPI: %s; dynamic processes: %s; launch: %s", m->mpi_version,
		 dynamic ? "yes" : "no", m->static_world ? "static" : "dynamic");
	if (!m->static_world && !dynamic) {
		snprintf(err, sizeof(err), "%s: launch \"dynamic\" needs an MPI "
			 "that can spawn processes, and %s cannot; use "
			 "\"launch\": \"static\"", m->cfg.path, m->mpi_version);
		goto fail;
	}
	sched_params_default(&sp);
	sp.max_attempts = m->cfg.max_attempts;
	sp.slow_timeout = m->cfg.slow_timeout;
	sp.grace = m->cfg.heartbeat + m->cfg.heartbeat_timeout + 1;
	registry_sched_ops(m, &ops);
	m->sched = sched_new(m->cfg.nworkers, &sp, &ops);
	registry_init(m);
	nodes_init(m);
	if (m->static_world || (m->async_spawn && launch_async_init(m) == -1))
		m->async_spawn = 0;
	if (loop_init(m) == -1 || control_open(m, err, sizeof(err)) == -1)
		goto fail;
	jsonl_event(&m->events, "master_up");
	jsonl_int(&m->events, "pid", getpid());
	jsonl_str(&m->events, "mpi", m->mpi_version);
	jsonl_str(&m->events, "launch", m->static_world ? "static" : "dynamic");
	jsonl_end(&m->events);
	events_flush(m);
	if (start_workers(m, err, sizeof(err)) == -1)
		goto fail;
	write_pid(m);
	loop_run(m);
	shutdown_master(m);
	return 0;
fail:
	fprintf(stderr, "ftfarm-master: %s\n", err);
	log_warnx("%s", err);
	if (m->control)
		control_close(m);
	return 2;
}

int
main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "probe", no_argument, NULL, 'p' },
		{ NULL, 0, NULL, 0 },
	};
	static struct master m;
	const char *config = NULL;
	char err[1024];
	int c, provided, dynamic, rc, only_probe = 0;

	while ((c = getopt_long(argc, argv, "c:", opts, NULL)) != -1) {
		if (c == 'c')
			config = optarg;
		else if (c == 'p')
			only_probe = 1;
		else
			usage();
	}
	if (config == NULL && !only_probe)
		usage();
	m.started = ft_now();
	treq_set_init(&m.treqs);
	/* Multiple: respawns run on a thread of their own (launch.c). */
	MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
	m.async_spawn = provided == MPI_THREAD_MULTIPLE;
	dynamic = launch_probe(&m);
	if (only_probe)
		rc = probe(&m, dynamic);
	else if (setup(&m, config, err, sizeof(err)) == -1) {
		fprintf(stderr, "ftfarm-master: %s\n", err);
		rc = 2;
	} else
		rc = run(&m, dynamic);
	MPI_Comm_size(MPI_COMM_WORLD, &c);
	if (rc == 2 && c > 1)
		MPI_Abort(MPI_COMM_WORLD, 2);	/* static workers wait for us */
	if (m.workers && registry_lost_ranks(&m))
		return rc;	/* finalize would wait for the dead ranks */
	if (m.async_spawn && launch_async_busy()) {
		/* A spawn hangs in MPI: finalize would wait for it. */
		log_warnx("a worker spawn never finished; leaving without "
			  "MPI_Finalize");
		log_flush();
		_exit(rc);
	}
	MPI_Finalize();
	treq_set_destroy(&m.treqs);
	return rc;
}

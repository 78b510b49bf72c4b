/*
 * ftfarm-master: the long-running master of a cluster.
 *
 * Started by `ftfarm start` under the MPI launcher, once (dynamic launch)
 * or as rank 0 of a static world.  It reads the cluster config, starts or
 * attaches the workers, and serves batches until it is told to stop.
 *
 * usage: ftfarm-master -c CONFIG [--epoch E] [--restart-reason TEXT]
 *        ftfarm-master --probe
 *
 * --epoch and --restart-reason come from the supervisor (cli/supervise.h):
 * the lease's epoch this master was started under, and why the job before
 * it was replaced.
 *
 * Exit status: 0 after a stop, 2 when it could not start, 3 when another
 * master took its state dir over (fence.h).
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "batch.h"
#include "commands.h"
#include "farm.h"
#include "gangs.h"
#include "fence.h"
#include "health.h"
#include "join.h"
#include "http.h"
#include "hostmem.h"
#include "hugeheap.h"
#include "log.h"
#include "loop.h"
#include "master.h"
#include "registry.h"
#include "spawn.h"
#include "statedir.h"

#define TCP_THREAD_ENV "OMPI_MCA_btl_tcp_progress_thread"

static void
usage(void)
{
	fprintf(stderr, "usage: ftfarm-master -c CONFIG [--epoch E] "
		"[--restart-reason TEXT] | --probe\n");
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
setup(struct master *m, const char *config, unsigned long long epoch,
      char *err, size_t n)
{
	char *path, *dir;
	int level, rc;

	if (ft_config_load(config, &m->cfg, err, n) == -1 ||
	    ft_config_has_nodes(&m->cfg, err, n) == -1)
		return -1;
	/* What the master writes is its own: 0600 files, 0700 directories
	 * (the state dir itself 0711, the control socket its own mode). */
	umask(077);
	if (sd_prepare(m->cfg.state_dir, err, n) == -1 ||
	    (m->lock_fd = sd_lock(m->cfg.state_dir, err, n)) == -1 ||
	    fence_take(m, epoch, err, n) == -1)
		return -1;
	ft_batch_protect(m->cfg.state_dir);
	path = ft_asprintf("%s/master.log", m->cfg.state_dir);
	log_init(path, "ftfarm-master");
	free(path);
	level = log_level_parse(m->cfg.log_level);
	log_set_level(level < 0 ? LOG_INFO : (enum log_level)level);
	path = ft_asprintf("%s/events.jsonl", m->cfg.state_dir);
	rc = events_open(&m->events, path, m->cfg.task_events);
	if (rc == -1)
		snprintf(err, n, "%s: %s", path, strerror(errno));
	free(path);
	if (rc == -1)
		return -1;
	dir = ft_plugins_default_dir();
	rc = ft_plugins_load(&m->plugins, dir, err, n);
	free(dir);
	if (rc == -1)
		return -1;
	dir = ft_exe_dir();
	m->worker_exe = ft_asprintf("%s/ftfarm-worker", dir);
	free(dir);
	return 0;
}

static void
write_pid(struct master *m)
{
	if (sd_write_pid(m->cfg.state_dir, "master.pid", getpid()) == -1)
		log_warn("%s/master.pid", m->cfg.state_dir);
}

static void
shutdown_master(struct master *m)
{
	m->lost_ranks = registry_lost_ranks(m);
	join_close(m);
	http_close(m);
	commands_close(m);
	if (farm_flush(m) == -1)
		log_warnx("stopping with lines the state dir would not take");
	farm_free(m);
	ev_master_stopped(&m->events);
	events_close(&m->events);
	store_free(&m->store);
	log_info("stopped");
	fence_release(m);
	fence_stop(m);
}

/* The journal: batches a master before us left unfinished.  0, or -1
 * with ERR. */
static int
replay(struct master *m, char *err, size_t n)
{
	struct replay_stats st;
	double t0 = ft_now();

	if (batches_replay(&m->batches, &st, err, n) == -1)
		return -1;
	if (st.batches == 0)
		return 0;
	log_info("journal replayed in %.3f s: %d unfinished batches, %llu "
		 "tasks done, %llu to run, %d finished now%s", ft_now() - t0,
		 st.batches, (unsigned long long)st.done,
		 (unsigned long long)st.pending, st.finished,
		 st.cuts ? "; damaged lines were cut out" : "");
	ev_journal_replayed(&m->events, st.batches, (long long)st.done,
			    (long long)st.pending, st.finished, ft_now() - t0);
	return 0;
}

static int
run(struct master *m, int dynamic)
{
	char err[1024];

	m->static_world = m->cfg.launch == FT_LAUNCH_STATIC;
	m->can_kill = !(m->static_world && strcmp(FT_MPI_FLAVOR, "mpich") == 0);
	if (m->static_world)
		m->async_spawn = 0;
	log_info("MPI: %s; dynamic processes: %s; launch: %s", m->mpi_version,
		 dynamic ? "yes" : "no", m->static_world ? "static" : "dynamic");
	if (!m->static_world && !dynamic) {
		snprintf(err, sizeof(err), "%s: launch \"dynamic\" needs an MPI "
			 "that can spawn processes, and %s cannot; use "
			 "\"launch\": \"static\"", m->cfg.path, m->mpi_version);
		goto fail;
	}
	/* The loop first: the links of joined nodes live under it. */
	if (loop_init(m) == -1) {
		snprintf(err, sizeof(err), "cannot make the event loop");
		goto fail;
	}
	farm_init(m);
	if (farm_open_store(m, err, sizeof(err)) == -1)
		goto fail;
	fence_start(m);
	commands_init(m);
	ev_master_up(&m->events, getpid(), m->mpi_version,
		     m->static_world ? "static" : "dynamic", (long long)m->epoch,
		     m->restart_reason);
	if (replay(m, err, sizeof(err)) == -1 ||
	    commands_open(m, err, sizeof(err)) == -1 ||
	    http_open(m, err, sizeof(err)) == -1)
		goto fail;
	join_open(m);
	health_hosts_left_out(m);
	health_restore(m);
	alloc_init(m);
	health_check_power(m);
	if (registry_start(m, err, sizeof(err)) == -1)
		goto fail;
	write_pid(m);
	loop_run(m);
	shutdown_master(m);
	return 0;
fail:
	fprintf(stderr, "ftfarm-master: %s\n", err);
	log_warnx("%s", err);
	join_close(m);
	http_close(m);
	commands_close(m);
	return 2;
}

int
main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "probe", no_argument, NULL, 'p' },
		{ "epoch", required_argument, NULL, 'e' },
		{ "restart-reason", required_argument, NULL, 'r' },
		{ NULL, 0, NULL, 0 },
	};
	static struct master m;
	const char *config = NULL;
	unsigned long long epoch = 0;
	char *end;
	char err[1024];
	int c, provided, dynamic, rc, only_probe = 0, thread_ours;

	while ((c = getopt_long(argc, argv, "c:", opts, NULL)) != -1) {
		if (c == 'c') {
			config = optarg;
		} else if (c == 'p') {
			only_probe = 1;
		} else if (c == 'e') {
			epoch = strtoull(optarg, &end, 10);
			if (*end || end == optarg || epoch == 0)
				usage();
		} else if (c == 'r') {
			m.restart_reason = optarg;
		} else {
			usage();
		}
	}
	if (config == NULL && !only_probe)
		usage();
	if (!only_probe)
		hugeheap_exec(argv);	/* a batch's tasks in huge pages */
	/* A task that fills the host's memory, not the master, is what the
	 * kernel kills (hostmem.h); where the master may not lower its
	 * score, the tasks' own of 1000 does it. */
	hostmem_oom_protect();
	m.started = ft_now();
	m.lease.fd = -1;
	/* Freed memory stays for the next batch to reuse until the master
	 * goes quiet (batches_trim gives it back): glibc would otherwise trim
	 * the heap as soon as a batch's task chunks are freed, and the next
	 * batch would fault every page in again. */
	ft_memory_keep(0);
	treq_set_init(&m.treqs);
	/* Open MPI's TCP transport reads its sockets on a thread of its own
	 * in the master: read only from the loop's polls, pongs that had
	 * come in time were seen too late now and then (32 idle workers on 2
	 * loaded cores: idle nodes lost in 5 starts of 8; none in 16 with the
	 * thread).  A user's own setting wins.  Ours is taken back once MPI
	 * has read it: MPI_Comm_spawn hands the caller's OMPI_MCA_ variables
	 * to the workers, whose agent wants no such thread (a thread that
	 * drains the socket first steals the agent's wake-up hint, doze.h). */
	thread_ours = getenv(TCP_THREAD_ENV) == NULL;
	if (thread_ours)
		setenv(TCP_THREAD_ENV, "1", 1);
	/* Multiple: respawns run on threads of their own (spawn.h). */
	MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
	if (thread_ours)
		unsetenv(TCP_THREAD_ENV);
	m.async_spawn = provided == MPI_THREAD_MULTIPLE;
	dynamic = spawn_probe(m.mpi_version, sizeof(m.mpi_version));
	if (only_probe)
		rc = probe(&m, dynamic);
	else if (setup(&m, config, epoch, err, sizeof(err)) == -1) {
		fprintf(stderr, "ftfarm-master: %s\n", err);
		rc = 2;
	} else
		rc = run(&m, dynamic);
	MPI_Comm_size(MPI_COMM_WORLD, &c);
	if (rc == 2 && c > 1)
		MPI_Abort(MPI_COMM_WORLD, 2);	/* static workers wait for us */
	if (m.lost_ranks || (m.workers && registry_lost_ranks(&m)))
		return rc;	/* finalize would wait for the dead ranks */
	if (gangs_leave()) {
		/* A gang was cut off, or its spawn hangs: finalize could wait
		 * for its processes (worker/gang/README.md). */
		log_warnx("a gang was running; leaving without MPI_Finalize");
		log_flush();
		_exit(rc);
	}
	if (m.async_spawn && spawn_async_busy()) {
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

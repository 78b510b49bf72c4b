/*
 * launch: starting workers.
 *
 * Dynamic launch spawns each worker with its own MPI_Comm_spawn, so that
 * each has its own intercommunicator and a dead worker breaks only that
 * one.  Static launch finds the workers already running as ranks 1..N of
 * MPI_COMM_WORLD (for MPIs that cannot spawn, such as Debian 12's MPICH).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "master.h"

/* First line of the MPI library's version string, into M. */
static void
library_version(struct master *m)
{
	char v[MPI_MAX_LIBRARY_VERSION_STRING];
	int len = 0;
	char *nl;

	MPI_Get_library_version(v, &len);
	v[len < (int)sizeof(v) ? len : (int)sizeof(v) - 1] = '\0';
	nl = strpbrk(v, "\n,");
	if (nl)
		*nl = '\0';
	for (nl = v; *nl; nl++)	/* MPICH puts a tab in it */
		if (*nl == '\t')
			*nl = ' ';
	v[sizeof(m->mpi_version) - 1] = '\0';
	memcpy(m->mpi_version, v, strlen(v) + 1);
}

int
launch_probe(struct master *m)
{
	char port[MPI_MAX_PORT_NAME];
	int ok;

	library_version(m);
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
	/* An MPI that cannot open a port cannot connect new processes. */
	ok = MPI_Open_port(MPI_INFO_NULL, port) == MPI_SUCCESS;
	if (ok)
		MPI_Close_port(port);
	return ok;
}

/* The MPI error text of RC into ERR. */
static void
mpi_error(int rc, const char *what, char *err, size_t n)
{
	char text[MPI_MAX_ERROR_STRING];
	int len = 0;

	MPI_Error_string(rc, text, &len);
	text[len] = '\0';
	snprintf(err, n, "%s: %s", what, text);
}

int
launch_spawn(struct master *m, struct worker *w, char *err, size_t n)
{
	const struct ft_node *node = &m->cfg.nodes[w->node];
	char slot[16];
	char *argv[] = { "--slot", slot, NULL };
	MPI_Comm comm = MPI_COMM_NULL;
	MPI_Info info;
	int rc, code = MPI_SUCCESS;

	snprintf(slot, sizeof(slot), "%d", w->slot);
	MPI_Info_create(&info);
	MPI_Info_set(info, "host", node->host);
	MPI_Info_set(info, "bind_to", "none");
	rc = MPI_Comm_spawn(m->worker_exe, argv, 1, info, 0, MPI_COMM_SELF,
			    &comm, &code);
	MPI_Info_free(&info);
	if (rc != MPI_SUCCESS || code != MPI_SUCCESS) {
		mpi_error(rc != MPI_SUCCESS ? rc : code, "MPI_Comm_spawn", err, n);
		return -1;
	}
	MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
	snprintf(w->host, sizeof(w->host), "%s", node->host);
	registry_attach(m, w, comm, 0);
	return 0;
}

int
launch_static(struct master *m, char *err, size_t n)
{
	int size, i;

	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (size != m->nworkers + 1) {
		snprintf(err, n, "static launch: the MPI world has %d processes, "
			 "the config asks for 1 master + %d workers", size,
			 m->nworkers);
		return -1;
	}
	for (i = 0; i < m->nworkers; i++) {
		snprintf(m->workers[i].host, sizeof(m->workers[i].host), "%s",
			 m->cfg.nodes[m->workers[i].node].host);
		registry_attach(m, &m->workers[i], MPI_COMM_WORLD, i + 1);
	}
	return 0;
}

/*
 * Respawns run on threads of their own when the MPI allows it
 * (MPI_THREAD_MULTIPLE).  Under a stream of kills Open MPI's spawn has been
 * seen to hang in PMIx until its 300 s timeout; on a thread of its own that
 * costs one slot, not the loop that serves every other worker, and the
 * registry gives up on it and spawns again on another thread.  Each spawn
 * has its own duplicate of MPI_COMM_SELF, as MPI forbids concurrent
 * collectives on one communicator.
 */
struct spawn_req {
	struct worker *w;
	unsigned gen;			/* w->spawn_gen when it was asked for */
	MPI_Comm self;
	char exe[4096], host[256], slot[16];
	int rc, code;
	MPI_Comm comm;
	struct spawn_req *next;
};

static pthread_mutex_t sp_mu = PTHREAD_MUTEX_INITIALIZER;
static struct spawn_req *sp_finished;
static int sp_running;
static int sp_available;

static void *
spawn_thread(void *arg)
{
	struct spawn_req *r = arg;
	char *argv[] = { "--slot", r->slot, NULL };
	MPI_Info info;

	MPI_Info_create(&info);
	MPI_Info_set(info, "host", r->host);
	MPI_Info_set(info, "bind_to", "none");
	r->comm = MPI_COMM_NULL;
	r->code = MPI_SUCCESS;
	r->rc = MPI_Comm_spawn(r->exe, argv, 1, info, 0, r->self, &r->comm,
			       &r->code);
	MPI_Info_free(&info);
	pthread_mutex_lock(&sp_mu);
	r->next = sp_finished;
	sp_finished = r;
	pthread_mutex_unlock(&sp_mu);
	return NULL;
}

int
launch_async_init(struct master *m)
{
	(void)m;
	sp_available = 1;
	return 0;
}

int
launch_async_busy(void)
{
	int busy;

	pthread_mutex_lock(&sp_mu);
	busy = sp_running > 0;
	pthread_mutex_unlock(&sp_mu);
	return busy;
}

int
launch_async_start(struct master *m, struct worker *w)
{
	struct spawn_req *r;
	pthread_attr_t attr;
	pthread_t t;
	int rc;

	if (!sp_available)
		return -1;
	r = ft_calloc(1, sizeof(*r));
	r->w = w;
	r->gen = ++w->spawn_gen;
	snprintf(r->exe, sizeof(r->exe), "%s", m->worker_exe);
	snprintf(r->host, sizeof(r->host), "%s", m->cfg.nodes[w->node].host);
	snprintf(r->slot, sizeof(r->slot), "%d", w->slot);
	if (MPI_Comm_dup(MPI_COMM_SELF, &r->self) != MPI_SUCCESS) {
		free(r);
		return -1;
	}
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_mutex_lock(&sp_mu);
	rc = pthread_create(&t, &attr, spawn_thread, r);
	if (rc == 0)
		sp_running++;
	pthread_mutex_unlock(&sp_mu);
	pthread_attr_destroy(&attr);
	if (rc != 0) {
		MPI_Comm_free(&r->self);
		free(r);
		return -1;
	}
	return 0;
}

struct worker *
launch_async_poll(struct master *m, MPI_Comm *comm, unsigned *gen, char *err,
		  size_t n)
{
	struct spawn_req *r;
	struct worker *w;

	(void)m;
	pthread_mutex_lock(&sp_mu);
	r = sp_finished;
	if (r) {
		sp_finished = r->next;
		sp_running--;
	}
	pthread_mutex_unlock(&sp_mu);
	if (r == NULL)
		return NULL;
	w = r->w;
	*gen = r->gen;
	*comm = r->comm;
	if (r->rc != MPI_SUCCESS || r->code != MPI_SUCCESS) {
		mpi_error(r->rc != MPI_SUCCESS ? r->rc : r->code,
			  "MPI_Comm_spawn", err, n);
		*comm = MPI_COMM_NULL;
	} else {
		MPI_Comm_set_errhandler(*comm, MPI_ERRORS_RETURN);
	}
	MPI_Comm_free(&r->self);
	free(r);
	return w;
}

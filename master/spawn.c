/* spawn: starting worker processes (see spawn.h). */
#include "spawn.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

int
spawn_probe(char *version, size_t n)
{
	char v[MPI_MAX_LIBRARY_VERSION_STRING], port[MPI_MAX_PORT_NAME];
	int len = 0, ok;
	char *nl;

	MPI_Get_library_version(v, &len);
	v[len < (int)sizeof(v) ? len : (int)sizeof(v) - 1] = '\0';
	nl = strpbrk(v, "\n,");
	if (nl)
		*nl = '\0';
	for (nl = v; *nl; nl++)	/* MPICH puts a tab in it */
		if (*nl == '\t')
			*nl = ' ';
	snprintf(version, n, "%s", v);
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

/* A spawn's own copy of its arguments, for a thread. */
struct spawn_req {
	char exe[4096], host[256], node[256], state_dir[4096], index[16];
	int nindex, add_host;
	unsigned gen;
	MPI_Comm self;			/* its own duplicate of MPI_COMM_SELF */
	int rc, code;
	MPI_Comm comm;
	struct spawn_req *next;
};

static void
req_fill(struct spawn_req *r, const struct spawn_args *a)
{
	snprintf(r->exe, sizeof(r->exe), "%s", a->exe);
	snprintf(r->host, sizeof(r->host), "%s", a->host);
	snprintf(r->node, sizeof(r->node), "%s", a->node);
	snprintf(r->state_dir, sizeof(r->state_dir), "%s", a->state_dir);
	snprintf(r->index, sizeof(r->index), "%d", a->node_index);
	r->nindex = a->node_index;
	r->add_host = a->add_host;
}

/* Run R's MPI_Comm_spawn on R->self (the caller's thread). */
static void
req_spawn(struct spawn_req *r)
{
	char *argv[] = { "--node-index", r->index, "--node", r->node,
			 "--state-dir", r->state_dir, NULL };
	MPI_Info info;

	MPI_Info_create(&info);
	/* A host outside the hostfile is "already filled" for "host";
	 * "add-host" starts a daemon there first. */
	MPI_Info_set(info, r->add_host ? "add-host" : "host", r->host);
	MPI_Info_set(info, "bind_to", "none");
	r->comm = MPI_COMM_NULL;
	r->code = MPI_SUCCESS;
	r->rc = MPI_Comm_spawn(r->exe, argv, 1, info, 0, r->self, &r->comm,
			       &r->code);
	MPI_Info_free(&info);
}

/* R's outcome: 0 with *COMM, or -1 with ERR. */
static int
req_result(struct spawn_req *r, MPI_Comm *comm, char *err, size_t n)
{
	*comm = MPI_COMM_NULL;
	if (r->rc != MPI_SUCCESS || r->code != MPI_SUCCESS) {
		mpi_error(r->rc != MPI_SUCCESS ? r->rc : r->code,
			  "MPI_Comm_spawn", err, n);
		return -1;
	}
	MPI_Comm_set_errhandler(r->comm, MPI_ERRORS_RETURN);
	*comm = r->comm;
	return 0;
}

int
spawn_one(const struct spawn_args *a, MPI_Comm *comm, char *err, size_t n)
{
	struct spawn_req *r = ft_calloc(1, sizeof(*r));
	int rc;

	req_fill(r, a);
	r->self = MPI_COMM_SELF;
	req_spawn(r);
	rc = req_result(r, comm, err, n);
	free(r);
	return rc;
}

int
spawn_static_check(int nagents, char *err, size_t n)
{
	int size;

	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (size == nagents + 1)
		return 0;
	snprintf(err, n, "static launch: the MPI world has %d processes, the "
		 "config asks for 1 master + %d node agents", size, nagents);
	return -1;
}

/* ---- spawning on threads ---- */

static pthread_mutex_t sp_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t dup_mu = PTHREAD_MUTEX_INITIALIZER;
static struct spawn_req *sp_finished;
static int sp_running;

/* The spawn's own duplicate of MPI_COMM_SELF: MPI forbids concurrent
 * collectives on one communicator, so the duplications take turns.  On
 * the spawn's thread, not the loop's: while another spawn hangs in Open
 * MPI, a duplication has been seen to wait for it. */
static int
dup_self(struct spawn_req *r)
{
	int rc;

	pthread_mutex_lock(&dup_mu);
	rc = MPI_Comm_dup(MPI_COMM_SELF, &r->self);
	pthread_mutex_unlock(&dup_mu);
	return rc;
}

static void *
spawn_thread(void *arg)
{
	struct spawn_req *r = arg;

	r->self = MPI_COMM_NULL;
	if ((r->rc = dup_self(r)) == MPI_SUCCESS)
		req_spawn(r);
	pthread_mutex_lock(&sp_mu);
	r->next = sp_finished;
	sp_finished = r;
	pthread_mutex_unlock(&sp_mu);
	return NULL;
}

int
spawn_async_busy(void)
{
	int busy;

	pthread_mutex_lock(&sp_mu);
	busy = sp_running > 0;
	pthread_mutex_unlock(&sp_mu);
	return busy;
}

int
spawn_async_start(const struct spawn_args *a, unsigned gen)
{
	struct spawn_req *r = ft_calloc(1, sizeof(*r));
	pthread_attr_t attr;
	pthread_t t;
	int rc;

	req_fill(r, a);
	r->gen = gen;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_mutex_lock(&sp_mu);
	rc = pthread_create(&t, &attr, spawn_thread, r);
	if (rc == 0)
		sp_running++;
	pthread_mutex_unlock(&sp_mu);
	pthread_attr_destroy(&attr);
	if (rc != 0) {
		free(r);
		return -1;
	}
	return 0;
}

int
spawn_async_poll(int *id, unsigned *gen, MPI_Comm *comm, char *err,
		 size_t n)
{
	struct spawn_req *r;

	pthread_mutex_lock(&sp_mu);
	r = sp_finished;
	if (r) {
		sp_finished = r->next;
		sp_running--;
	}
	pthread_mutex_unlock(&sp_mu);
	if (r == NULL)
		return 0;
	*id = r->nindex;
	*gen = r->gen;
	req_result(r, comm, err, n);
	if (r->self != MPI_COMM_NULL)
		MPI_Comm_free(&r->self);
	free(r);
	return 1;
}

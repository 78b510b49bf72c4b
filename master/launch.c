/*
 * launch: starting workers.
 *
 * Dynamic launch spawns each worker with its own MPI_Comm_spawn, so that
 * each has its own intercommunicator and a dead worker breaks only that
 * one.  Static launch finds the workers already running as ranks 1..N of
 * MPI_COMM_WORLD (for MPIs that cannot spawn, such as Debian 12's MPICH).
 */
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

/* task_env: the environment of what a task plugin starts (task_env.h). */
#include "task_env.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"

extern char **environ;

/* Does ENV set the variable of environment entry ENTRY ("NAME=value")? */
static int
env_overrides(const json_t *env, const char *entry)
{
	const char *eq = strchr(entry, '=');
	size_t n = eq ? (size_t)(eq - entry) : strlen(entry);

	return json_object_getn(env, entry, n) != NULL;
}

/* Does EXTRA ("NAME=value" entries, NULL-terminated, or NULL) set the
 * variable named by the N bytes at NAME? */
static int
extra_sets(const char *const *extra, const char *name, size_t n)
{
	size_t i;

	for (i = 0; extra && extra[i]; i++)
		if (strncmp(extra[i], name, n) == 0 && extra[i][n] == '=')
			return 1;
	return 0;
}

static size_t
name_len(const char *entry)
{
	const char *eq = strchr(entry, '=');

	return eq ? (size_t)(eq - entry) : strlen(entry);
}

/* The MPI library's and its launcher's variables: tasks do not see them
 * (a task that runs an MPI program of its own must not take the worker's
 * place in the worker's job). */
static const char *const mpi_prefixes[] = {
	"OMPI_", "PMIX_", "ORTE_", "OPAL_", "PRTE_", "HYDRA_", "HYDI_",
	"PMI_", "MPIR_", "MPICH_", "MPIEXEC_", "I_MPI_", "MV2_",
};

static int
is_mpi_var(const char *entry)
{
	size_t i;

	for (i = 0; i < FT_ARRAY_LEN(mpi_prefixes); i++)
		if (strncmp(entry, mpi_prefixes[i], strlen(mpi_prefixes[i])) == 0)
			return 1;
	return 0;
}

char **
task_env_build(const json_t *env, const char *const *extra, size_t *first)
{
	const char *key;
	json_t *v;
	char **envp;
	size_t n = 0, k = 0, i, nx = 0;

	while (environ && environ[n])
		n++;
	while (extra && extra[nx])
		nx++;
	envp = ft_calloc(n + json_object_size(env) + nx + 1, sizeof(*envp));
	for (i = 0; i < n; i++)
		if (!is_mpi_var(environ[i]) &&
		    !(env && env_overrides(env, environ[i])) &&
		    !extra_sets(extra, environ[i], name_len(environ[i])))
			envp[k++] = environ[i];
	*first = k;
	json_object_foreach((json_t *)env, key, v)
		if (!extra_sets(extra, key, strlen(key)))
			envp[k++] = ft_asprintf("%s=%s", key,
						json_string_value(v));
	for (i = 0; i < nx; i++)
		envp[k++] = ft_strdup(extra[i]);
	return envp;
}

const char *
task_env_path(char **envp)
{
	size_t i;

	for (i = 0; envp && envp[i]; i++)
		if (strncmp(envp[i], "PATH=", 5) == 0)
			return envp[i] + 5;
	return "/bin:/usr/bin";
}


void
task_env_free(char **envp, size_t first)
{
	size_t i;

	for (i = first; envp && envp[i]; i++)
		free(envp[i]);
	free(envp);
}

/* plugins: loading the task types. */
#include "plugins.h"

#include <dirent.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

char *
ft_plugins_default_dir(void)
{
	char *dir = ft_exe_dir();
	char *path = ft_asprintf("%s/tasks", dir);

	/* Installed (make install): PREFIX/bin and PREFIX/lib/ftfarm/tasks;
	 * in the build tree: bin/ and bin/tasks. */
	if (access(path, F_OK) != 0) {
		free(path);
		path = ft_asprintf("%s/../lib/ftfarm/tasks", dir);
	}
	free(dir);
	return path;
}

static int
is_so(const struct dirent *d)
{
	size_t n = strlen(d->d_name);

	return n > 3 && strcmp(d->d_name + n - 3, ".so") == 0;
}

/* Load one plugin file.  0 or -1 with ERR. */
static int
load_one(struct ft_plugins *p, const char *path, char *err, size_t n)
{
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	ft_plugin_fn fn;
	const struct ft_plugin *pl;

	if (h == NULL) {
		ft_snprintf(err, n, "%s", dlerror());
		return -1;
	}
	*(void **)&fn = dlsym(h, FT_PLUGIN_SYMBOL);
	pl = fn ? fn() : NULL;
	if (pl == NULL || pl->abi != FT_PLUGIN_ABI || pl->name == NULL ||
	    pl->validate == NULL || pl->run == NULL) {
		ft_snprintf(err, n, "%s: not an ftfarm task plugin (ABI %d)",
			    path, FT_PLUGIN_ABI);
		dlclose(h);
		return -1;
	}
	if (ft_plugins_find(p, pl->name)) {
		ft_snprintf(err, n, "%s: task type \"%s\" is defined twice",
			    path, pl->name);
		dlclose(h);
		return -1;
	}
	p->v = ft_realloc(p->v, (p->n + 1) * sizeof(*p->v));
	p->handles = ft_realloc(p->handles, (p->n + 1) * sizeof(void *));
	p->v[p->n] = pl;
	p->handles[p->n] = h;
	p->n++;
	return 0;
}

int
ft_plugins_load(struct ft_plugins *p, const char *dir, char *err, size_t n)
{
	struct dirent **names = NULL;
	int count, i, rc = 0;

	memset(p, 0, sizeof(*p));
	count = scandir(dir, &names, is_so, alphasort);
	if (count < 0) {
		ft_snprintf(err, n, "%s: cannot read the plugin directory", dir);
		return -1;
	}
	for (i = 0; i < count; i++) {
		char *path = ft_asprintf("%s/%s", dir, names[i]->d_name);

		if (rc == 0 && load_one(p, path, err, n) == -1)
			rc = -1;
		free(path);
		free(names[i]);
	}
	free(names);
	if (rc == 0 && p->n == 0) {
		ft_snprintf(err, n, "%s: no task plugins found", dir);
		rc = -1;
	}
	if (rc == -1)
		ft_plugins_free(p);
	return rc;
}

const struct ft_plugin *
ft_plugins_find(const struct ft_plugins *p, const char *name)
{
	int i = ft_plugins_index(p, name);

	return i < 0 ? NULL : p->v[i];
}

int
ft_plugins_index(const struct ft_plugins *p, const char *name)
{
	int i;

	for (i = 0; name && i < p->n; i++)
		if (strcmp(p->v[i]->name, name) == 0)
			return i;
	return -1;
}

char *
ft_plugins_names(const struct ft_plugins *p)
{
	struct ft_buf b = { 0 };
	int i;

	ft_buf_adds(&b, "");
	for (i = 0; i < p->n; i++) {
		if (i)
			ft_buf_add(&b, ",", 1);
		ft_buf_adds(&b, p->v[i]->name);
	}
	return b.data;
}

void
ft_plugins_free(struct ft_plugins *p)
{
	int i;

	for (i = 0; i < p->n; i++)
		dlclose(p->handles[i]);
	free(p->v);
	free(p->handles);
	memset(p, 0, sizeof(*p));
}

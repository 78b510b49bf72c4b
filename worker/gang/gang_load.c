/* gang_load: finding and loading gang plugins (see gang_load.h). */
#include "gang_load.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

char *
gang_load_default_dir(void)
{
	char *dir = ft_exe_dir();
	char *path = ft_asprintf("%s/gangs", dir);

	free(dir);
	return path;
}

/* Is TYPE a plain job type name? */
static int
plain_name(const char *type)
{
	size_t n = strlen(type);

	return n > 0 && n < 64 &&
	       strspn(type, "abcdefghijklmnopqrstuvwxyz0123456789_") == n;
}

const struct ft_gang_plugin *
gang_load(const char *dir, const char *type, void **handle, char *err,
	  size_t n)
{
	const struct ft_gang_plugin *pl = NULL;
	ft_gang_plugin_fn fn;
	char *path;
	void *h;

	if (!plain_name(type)) {
		ft_snprintf(err, n, "\"%s\" is not a gang job type", type);
		return NULL;
	}
	path = ft_asprintf("%s/%s.so", dir, type);
	h = dlopen(path, RTLD_LAZY | RTLD_LOCAL);
	if (h == NULL) {
		ft_snprintf(err, n, "no gang job type \"%s\": %s", type,
			    dlerror());
		goto out;
	}
	*(void **)&fn = dlsym(h, FT_GANG_SYMBOL);
	pl = fn ? fn() : NULL;
	if (pl == NULL || pl->abi != FT_GANG_ABI || pl->name == NULL ||
	    strcmp(pl->name, type) != 0 || !pl->validate || !pl->size ||
	    !pl->run) {
		ft_snprintf(err, n, "%s: not an ftfarm gang plugin (ABI %d) "
			    "for \"%s\"", path, FT_GANG_ABI, type);
		dlclose(h);
		pl = NULL;
		goto out;
	}
	*handle = h;
out:
	free(path);
	return pl;
}

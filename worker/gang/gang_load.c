/* gang_load: finding and loading gang plugins (see gang_load.h). */
#include "gang_load.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

char *
gang_load_default_dir(void)
{
	char *dir = ft_exe_dir();
	char *path = ft_asprintf("%s/gangs", dir);

	/* Installed (make install): PREFIX/bin and PREFIX/lib/ftfarm/gangs;
	 * in the build tree: bin/ and bin/gangs. */
	if (access(path, F_OK) != 0) {
		free(path);
		path = ft_asprintf("%s/../lib/ftfarm/gangs", dir);
	}
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

int
gang_load_check(const char *dir, const json_t *job, const char *path,
		int *active, int *spares, struct jerr *err)
{
	const char *type = json_string_value(json_object_get(job, "type"));
	const struct ft_gang_plugin *pl;
	char msg[512], *file, key[256];
	void *h = NULL;
	int a = 0, s = 0, rc = -1;

	if (type == NULL || !plain_name(type))
		return 1;
	file = ft_asprintf("%s/%s.so", dir, type);
	rc = access(file, F_OK) == 0 ? -1 : 1;
	free(file);
	if (rc == 1)
		return 1;
	snprintf(key, sizeof(key), "%s.type", path);
	if ((pl = gang_load(dir, type, &h, msg, sizeof(msg))) == NULL)
		return jerr_set(err, key, "%s", msg);
	rc = pl->validate(job, path, err);
	if (rc == 0)
		pl->size(job, &a, &s);
	dlclose(h);
	if (active)
		*active = a;
	if (spares)
		*spares = s;
	return rc;
}

/*
 * gang_load: finding and loading gang plugins (gang_plugin.h).
 *
 * The plugin of job type T is DIR/T.so; the default DIR is "gangs" beside
 * the running executable.  Plugins are loaded with RTLD_LAZY, since their
 * run hook refers to the gang runtime that only ftfarm-gang provides.
 */
#ifndef FT_GANG_LOAD_H
#define FT_GANG_LOAD_H

#include <stddef.h>

#include "gang_plugin.h"

/* "gangs" beside the running executable (a new string). */
char *gang_load_default_dir(void);
/* The plugin serving job type TYPE from DIR; *HANDLE gets the dlopen
 * handle.  NULL with ERR when TYPE is not a plain name ([a-z0-9_]), the
 * file is missing or is not a gang plugin of this ABI. */
const struct ft_gang_plugin *gang_load(const char *dir, const char *type,
				       void **handle, char *err, size_t n);
/* Check the job object JOB at PATH against the gang plugin of its type in
 * DIR, and learn its size (*ACTIVE, *SPARES; either may be NULL).  0, -1
 * with ERR, or 1 when DIR has no plugin of that type.  Thread-safe. */
int gang_load_check(const char *dir, const json_t *job, const char *path,
		    int *active, int *spares, struct jerr *err);

#endif

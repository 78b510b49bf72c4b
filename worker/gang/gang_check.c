/* gang_check: checks shared by the gang job types (see gang_check.h). */
#include "gang_check.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util.h"

int
gcheck_abs(const json_t *job, const char *path, const char *key,
	   struct jerr *err)
{
	const char *v = jget_str(job, key, NULL);
	char kpath[sizeof(err->path)];

	if (v == NULL || (v[0] == '/' && strlen(v) > 1))
		return 0;
	jpath_key(kpath, sizeof(kpath), path, key);
	return jerr_set(err, kpath, "must be an absolute path, not \"%s\"", v);
}

/* The input file KEY, when present: a regular file whose size passes
 * (EXACT: == SIZE, else >= SIZE). */
static int
check_size(const json_t *job, const char *path, const char *key,
	   uint64_t size, int exact, struct jerr *err)
{
	const char *file = jget_str(job, key, NULL);
	char kpath[sizeof(err->path)];
	struct stat sb;

	if (file == NULL)
		return 0;
	if (gcheck_abs(job, path, key, err) == -1)
		return -1;
	jpath_key(kpath, sizeof(kpath), path, key);
	if (stat(file, &sb) == -1)
		return jerr_set(err, kpath, "%s: %s", file, strerror(errno));
	if (!S_ISREG(sb.st_mode))
		return jerr_set(err, kpath, "%s: not a regular file", file);
	if (exact ? (uint64_t)sb.st_size != size : (uint64_t)sb.st_size < size)
		return jerr_set(err, kpath, "%s: %lld bytes, expected %s%" PRIu64,
				file, (long long)sb.st_size,
				exact ? "" : "at least ", size);
	return 0;
}

int
gcheck_input(const json_t *job, const char *path, const char *key,
	     uint64_t size, struct jerr *err)
{
	return check_size(job, path, key, size, 1, err);
}

int
gcheck_input_min(const json_t *job, const char *path, const char *key,
		 uint64_t size, struct jerr *err)
{
	return check_size(job, path, key, size, 0, err);
}

int
gcheck_output(const json_t *job, const char *path, const char *key,
	      struct jerr *err)
{
	const char *file = jget_str(job, key, NULL);
	char kpath[sizeof(err->path)], *dir;
	struct stat sb;
	int rc = 0;

	if (file == NULL)
		return 0;
	if (gcheck_abs(job, path, key, err) == -1)
		return -1;
	jpath_key(kpath, sizeof(kpath), path, key);
	if (stat(file, &sb) == 0 && S_ISDIR(sb.st_mode))
		return jerr_set(err, kpath, "%s: is a directory", file);
	dir = ft_dirname(file);
	if (stat(dir, &sb) == -1)
		rc = jerr_set(err, kpath, "%s: %s", dir, strerror(errno));
	else if (!S_ISDIR(sb.st_mode))
		rc = jerr_set(err, kpath, "%s: not a directory", dir);
	free(dir);
	return rc;
}

int
gcheck_exclusive(const json_t *job, const char *path, const char *key_a,
		 const char *key_b, struct jerr *err)
{
	char kpath[sizeof(err->path)];

	if (!json_object_get(job, key_a) || !json_object_get(job, key_b))
		return 0;
	jpath_key(kpath, sizeof(kpath), path, key_b);
	return jerr_set(err, kpath, "cannot be given with \"%s\"", key_a);
}

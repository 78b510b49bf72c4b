/* cgroup: this process's memory cgroup (cgroup.h). */
#include "cgroup.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

/* Is NAME one of the comma-separated words of LIST (LEN bytes)? */
static int
has_word(const char *list, size_t len, const char *name)
{
	size_t k = strlen(name), i = 0;

	while (i < len) {
		size_t j = i;

		while (j < len && list[j] != ',' && list[j] != ' ' &&
		       list[j] != '\n')
			j++;
		if (j - i == k && memcmp(list + i, name, k) == 0)
			return 1;
		i = j + 1;
	}
	return 0;
}

/* The path of our cgroup in the v1 hierarchy of the memory controller
 * (V1: 1) or in the unified one (V1: 0), from /proc/self/cgroup's TEXT,
 * into OUT.  0, or -1 when there is none. */
static int
self_path(const char *text, int v1, char *out, size_t n)
{
	const char *line = text;

	while (line && *line) {
		const char *c1 = strchr(line, ':'), *c2, *eol;

		eol = strchr(line, '\n');
		if (eol == NULL)
			eol = line + strlen(line);
		c2 = c1 && c1 < eol ? memchr(c1 + 1, ':', (size_t)(eol - c1 - 1))
				    : NULL;
		if (c2 && (v1 ? has_word(c1 + 1, (size_t)(c2 - c1 - 1), "memory")
			      : (c1 - line == 1 && line[0] == '0' &&
				 c2 == c1 + 1)))
			return ft_snprintf(out, n, "%.*s", (int)(eol - c2 - 1),
					   c2 + 1);
		line = *eol ? eol + 1 : NULL;
	}
	return -1;
}

/* Copy mountinfo's field S (LEN bytes, octal escapes such as \040 for a
 * blank) into OUT. */
static void
unescape(const char *s, size_t len, char *out, size_t n)
{
	size_t i = 0, o = 0;

	while (i < len && o + 1 < n) {
		if (s[i] == '\\' && i + 3 < len && s[i + 1] >= '0' &&
		    s[i + 1] <= '3') {
			out[o++] = (char)(((s[i + 1] - '0') << 6) |
					  ((s[i + 2] - '0') << 3) |
					  (s[i + 3] - '0'));
			i += 4;
		} else {
			out[o++] = s[i++];
		}
	}
	out[o] = '\0';
}

/* The N-th blank-separated field of LINE (up to EOL): its start and
 * *LEN, or NULL. */
static const char *
field(const char *line, const char *eol, int nth, size_t *len)
{
	const char *p = line;
	int k;

	for (k = 0; k <= nth; k++) {
		const char *start;

		while (p < eol && *p == ' ')
			p++;
		start = p;
		while (p < eol && *p != ' ')
			p++;
		if (p == start)
			return NULL;
		if (k == nth) {
			*len = (size_t)(p - start);
			return start;
		}
	}
	return NULL;
}

/* The mount of the v1 memory hierarchy (V1) or of the unified one, from
 * mountinfo's TEXT: its mount point into MOUNT and the cgroup its root
 * shows into ROOT.  0 or -1. */
static int
find_mount(const char *text, int v1, char *mount, char *root, size_t n)
{
	const char *line = text;

	while (line && *line) {
		const char *eol = strchr(line, '\n'), *dash, *f;
		size_t len;

		if (eol == NULL)
			eol = line + strlen(line);
		dash = strstr(line, " - ");
		if (dash && dash < eol &&
		    (f = field(dash + 3, eol, 0, &len)) != NULL &&
		    ((v1 && len == 6 && memcmp(f, "cgroup", 6) == 0 &&
		      (f = field(dash + 3, eol, 2, &len)) != NULL &&
		      has_word(f, len, "memory")) ||
		     (!v1 && len == 7 && memcmp(f, "cgroup2", 7) == 0))) {
			f = field(line, eol, 3, &len);
			unescape(f, len, root, n);
			f = field(line, eol, 4, &len);
			unescape(f, len, mount, n);
			return 0;
		}
		line = *eol ? eol + 1 : NULL;
	}
	return -1;
}

/* Does the unified hierarchy mounted at MOUNT have the memory
 * controller? */
static int
v2_has_memory(const char *mount)
{
	char path[PATH_MAX + 32], *text;
	size_t len;
	int yes;

	snprintf(path, sizeof(path), "%s/cgroup.controllers", mount);
	if ((text = ft_read_file(path, &len)) == NULL)
		return 0;
	yes = has_word(text, len, "memory");
	free(text);
	return yes;
}

/* W's directory: the mount point and PATH less the part ROOT, which the
 * mount shows as its top (a bind mount of a subtree). */
static int
join_dir(struct cg_where *w, const char *root, const char *path)
{
	size_t r = strlen(root);

	if (strcmp(root, "/") != 0 && strncmp(path, root, r) == 0 &&
	    (path[r] == '/' || path[r] == '\0'))
		path += r;
	if (strcmp(path, "/") == 0)
		path = "";
	return ft_snprintf(w->dir, sizeof(w->dir), "%s%s", w->mount, path);
}

int
cg_locate(const char *cgroup_text, const char *mountinfo_text, int mem_on_v2,
	  struct cg_where *w)
{
	char path[PATH_MAX], root[PATH_MAX];

	memset(w, 0, sizeof(*w));
	if (self_path(cgroup_text, 1, path, sizeof(path)) == 0 &&
	    find_mount(mountinfo_text, 1, w->mount, root, sizeof(root)) == 0) {
		w->v = CG_V1;
	} else if (self_path(cgroup_text, 0, path, sizeof(path)) == 0 &&
		   find_mount(mountinfo_text, 0, w->mount, root,
			      sizeof(root)) == 0 &&
		   (mem_on_v2 >= 0 ? mem_on_v2 : v2_has_memory(w->mount))) {
		w->v = CG_V2;
	} else {
		w->v = CG_NONE;
		return -1;
	}
	if (join_dir(w, root, path) == -1) {
		w->v = CG_NONE;
		return -1;
	}
	return 0;
}

int
cg_self(struct cg_where *w)
{
	size_t len;
	char *cg = ft_read_file("/proc/self/cgroup", &len);
	char *mi = ft_read_file("/proc/self/mountinfo", &len);
	int rc = cg && mi ? cg_locate(cg, mi, -1, w) : -1;

	if (!(cg && mi))
		memset(w, 0, sizeof(*w));
	free(cg);
	free(mi);
	return rc;
}

/* The text of the small file PATH into BUF (N bytes, NUL-terminated).
 * Its length, or -1 with errno. */
static ssize_t
read_small(const char *path, char *buf, size_t n)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t got;

	if (fd < 0)
		return -1;
	got = read(fd, buf, n - 1);
	close(fd);
	if (got < 0)
		return -1;
	buf[got] = '\0';
	return got;
}

int
cg_read_u64(const char *path, uint64_t *v)
{
	char buf[64];

	if (read_small(path, buf, sizeof(buf)) <= 0)
		return -1;
	*v = strncmp(buf, "max", 3) == 0 ? UINT64_MAX :
	     strtoull(buf, NULL, 10);
	return 0;
}

int
cg_read_key(const char *path, const char *key, uint64_t *v)
{
	char buf[1024], *p;
	size_t k = strlen(key);

	if (read_small(path, buf, sizeof(buf)) <= 0)
		return -1;
	for (p = buf; p != NULL; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (strncmp(p, key, k) == 0 && p[k] == ' ') {
			*v = strtoull(p + k + 1, NULL, 10);
			return 0;
		}
	return -1;
}

int
cg_write(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC), rc, e;

	if (fd < 0)
		return -1;
	rc = ft_write_all(fd, text, strlen(text));
	e = errno;
	close(fd);
	errno = e;
	return rc < 0 ? -1 : 0;
}

uint64_t
cg_mem_limit(const struct cg_where *w)
{
	const char *file = w->v == CG_V2 ? "memory.max" : "memory.limit_in_bytes";
	char dir[PATH_MAX], path[PATH_MAX + 32], *slash;
	size_t m = strlen(w->mount);
	uint64_t least = UINT64_MAX, v;

	if (w->v == CG_NONE)
		return UINT64_MAX;
	snprintf(dir, sizeof(dir), "%s", w->dir);
	for (;;) {
		snprintf(path, sizeof(path), "%s/%s", dir, file);
		/* v1 says "no limit" with a page-rounded LLONG_MAX. */
		if (cg_read_u64(path, &v) == 0 && v < (1ULL << 62) && v < least)
			least = v;
		if (strlen(dir) <= m || (slash = strrchr(dir, '/')) == NULL ||
		    (size_t)(slash - dir) < m)
			break;
		*slash = '\0';
	}
	return least;
}

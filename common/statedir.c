/* statedir: a cluster's state directory (see statedir.h). */
#include "statedir.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

#define LOCK_FILE "master.lock"

int
sd_prepare(const char *dir, char *err, size_t n)
{
	struct stat st;

	if (lstat(dir, &st) == -1) {
		if (errno != ENOENT || ft_mkdirs(dir) == -1 ||
		    chmod(dir, 0711) == -1 || lstat(dir, &st) == -1) {
			snprintf(err, n, "state dir %s: %s", dir,
				 strerror(errno));
			return -1;
		}
	}
	if (S_ISLNK(st.st_mode) || !S_ISDIR(st.st_mode)) {
		snprintf(err, n, "state dir %s: not a directory (a symbolic "
			 "link is refused)", dir);
		return -1;
	}
	if (st.st_uid != geteuid()) {
		snprintf(err, n, "state dir %s: owned by uid %u, not by this "
			 "user (uid %u)", dir, (unsigned)st.st_uid,
			 (unsigned)geteuid());
		return -1;
	}
	if (st.st_mode & 022) {
		snprintf(err, n, "state dir %s: writable by its group or by "
			 "others (mode %04o); make it 0711 or 0700", dir,
			 (unsigned)(st.st_mode & 07777));
		return -1;
	}
	return 0;
}

/* What the lock file says of its holder: "PID START". */
static pid_t
holder(int fd, unsigned long long *start)
{
	char buf[64] = "";
	long pid = 0;

	if (pread(fd, buf, sizeof(buf) - 1, 0) > 0 &&
	    sscanf(buf, "%ld %llu", &pid, start) == 2)
		return (pid_t)pid;
	return 0;
}

int
sd_lock(const char *dir, char *err, size_t n)
{
	char *path = ft_asprintf("%s/%s", dir, LOCK_FILE), text[64];
	unsigned long long start = 0;
	int fd, len;
	pid_t pid;

	fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd == -1) {
		snprintf(err, n, "%s: %s", path, strerror(errno));
		free(path);
		return -1;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) == -1) {
		pid = holder(fd, &start);
		snprintf(err, n, "state dir %s is in use by the master with pid "
			 "%ld; stop it first (ftfarm stop)", dir, (long)pid);
		close(fd);
		free(path);
		return -1;
	}
	free(path);
	len = snprintf(text, sizeof(text), "%ld %llu\n", (long)getpid(),
		       ft_proc_start(getpid()));
	if (ftruncate(fd, 0) == -1 || pwrite(fd, text, (size_t)len, 0) != len) {
		snprintf(err, n, "state dir %s: cannot write its lock: %s", dir,
			 strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

pid_t
sd_locked_by(const char *dir)
{
	char *path = ft_asprintf("%s/%s", dir, LOCK_FILE);
	unsigned long long start = 0;
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	pid_t pid = 0;

	free(path);
	if (fd == -1)
		return 0;
	if (flock(fd, LOCK_SH | LOCK_NB) == -1) {
		pid = holder(fd, &start);
		if (pid <= 0)
			pid = -1;	/* held, by whom unknown */
	}
	close(fd);
	return pid;
}

int
sd_write_pid(const char *dir, const char *name, pid_t pid)
{
	char *path = ft_asprintf("%s/%s", dir, name);
	char *text = ft_asprintf("%ld %llu\n", (long)pid, ft_proc_start(pid));
	int rc = ft_write_file_atomic(path, text, strlen(text));

	free(path);
	free(text);
	return rc;
}

pid_t
sd_read_pid(const char *dir, const char *name)
{
	char *path = ft_asprintf("%s/%s", dir, name);
	char *text = ft_read_file(path, NULL);
	unsigned long long start = 0;
	long pid = 0;

	free(path);
	if (text == NULL || sscanf(text, "%ld %llu", &pid, &start) != 2)
		pid = 0;
	free(text);
	return pid > 0 && ft_proc_is((pid_t)pid, start) ? (pid_t)pid : 0;
}

/* PATH with its longest existing prefix resolved (a new string). */
static char *
resolve(const char *path)
{
	char *dir = ft_strdup(path), *real, *rest, *out;
	size_t len = strlen(dir);

	for (;;) {
		real = realpath(dir, NULL);
		if (real || len <= 1)
			break;
		while (len > 1 && dir[len - 1] != '/')
			len--;
		if (len > 1)
			len--;		/* drop the slash */
		dir[len] = '\0';
	}
	if (real == NULL) {
		free(dir);
		return ft_strdup(path);
	}
	rest = (char *)path + strlen(dir);
	out = ft_asprintf("%s%s", real, strcmp(real, "/") == 0 && *rest == '/'
			  ? rest + 1 : rest);
	free(real);
	free(dir);
	return out;
}

int
sd_contains(const char *dir, const char *path)
{
	char *d = resolve(dir), *p = resolve(path);
	size_t n = strlen(d);
	int in = strncmp(p, d, n) == 0 && (p[n] == '\0' || p[n] == '/' ||
					   strcmp(d, "/") == 0);

	free(d);
	free(p);
	return in;
}

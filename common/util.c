/* util: small helpers every program of ftfarm uses. */
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "plugin.h"

double
ft_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double
ft_wall(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void
ft_sleep(double s)
{
	struct timespec ts;

	if (s <= 0)
		return;
	ts.tv_sec = (time_t)s;
	ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
}

static void
oom(size_t n)
{
	fprintf(stderr, "ftfarm: out of memory (%zu bytes)\n", n);
	abort();
}

void *
ft_malloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (p == NULL)
		oom(n);
	return p;
}

void *
ft_calloc(size_t nmemb, size_t size)
{
	void *p = calloc(nmemb ? nmemb : 1, size ? size : 1);

	if (p == NULL)
		oom(nmemb * size);
	return p;
}

void *
ft_realloc(void *p, size_t n)
{
	void *q = realloc(p, n ? n : 1);

	if (q == NULL)
		oom(n);
	return q;
}

char *
ft_strdup(const char *s)
{
	size_t n = strlen(s) + 1;

	return memcpy(ft_malloc(n), s, n);
}

char *
ft_asprintf(const char *fmt, ...)
{
	va_list ap;
	char *s;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (n < 0)
		oom(0);
	return s;
}

int
ft_snprintf(char *out, size_t n, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = vsnprintf(out, n, fmt, ap);
	va_end(ap);
	return (r < 0 || (size_t)r >= n) ? -1 : 0;
}

int
ft_mkdirs(const char *dir)
{
	char path[PATH_MAX];
	char *p;

	if (ft_snprintf(path, sizeof(path), "%s", dir) < 0) {
		errno = ENAMETOOLONG;
		return -1;
	}
	for (p = path + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(path, 0755) == -1 && errno != EEXIST)
			return -1;
		*p = '/';
	}
	if (mkdir(path, 0755) == -1 && errno != EEXIST)
		return -1;
	return 0;
}

char *
ft_dirname(const char *path)
{
	const char *slash = strrchr(path, '/');

	if (slash == NULL)
		return ft_strdup(".");
	if (slash == path)
		return ft_strdup("/");
	return strndup(path, (size_t)(slash - path));
}

char *
ft_path_join(const char *base, const char *path)
{
	if (path[0] == '/')
		return ft_strdup(path);
	return ft_asprintf("%s/%s", base, path);
}

char *
ft_exe_dir(void)
{
	char buf[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);

	if (n <= 0)
		return ft_strdup(".");
	buf[n] = '\0';
	return ft_dirname(buf);
}

int
ft_dir_writable(const char *dir, char *why, size_t n)
{
	struct stat sb;
	char *probe;
	int fd, e;

	if (stat(dir, &sb) == -1) {
		snprintf(why, n, "%s", strerror(errno));
		return -1;
	}
	if (!S_ISDIR(sb.st_mode)) {
		snprintf(why, n, "not a directory");
		return -1;
	}
	probe = ft_asprintf("%s/.ftfarm-probe.XXXXXX", dir);
	fd = mkstemp(probe);
	e = errno;
	if (fd == -1) {
		snprintf(why, n, "not writable: %s", strerror(e));
	} else {
		close(fd);
		unlink(probe);
	}
	free(probe);
	return fd == -1 ? -1 : 0;
}

/* Remove the entries of the open directory DFD (then closed). */
static int
rmtree_at(int dfd)
{
	DIR *d = fdopendir(dfd);
	struct dirent *e;
	int rc = 0;

	if (d == NULL) {
		close(dfd);
		return -1;
	}
	while ((e = readdir(d)) != NULL) {
		int sub;

		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (unlinkat(dfd, e->d_name, 0) == 0)
			continue;
		sub = openat(dfd, e->d_name, O_RDONLY | O_DIRECTORY |
			     O_NOFOLLOW | O_CLOEXEC);
		if (sub < 0 || rmtree_at(sub) == -1 ||
		    unlinkat(dfd, e->d_name, AT_REMOVEDIR) == -1)
			rc = -1;
	}
	closedir(d);
	return rc;
}

int
ft_rmtree(const char *path)
{
	int fd;

	if (unlink(path) == 0 || errno == ENOENT)
		return 0;
	fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -1;
	if (rmtree_at(fd) == -1)
		return -1;
	return rmdir(path);
}

int
ft_rotate(const char *path, int keep)
{
	char *from, *to;
	int k, rc = 0;

	for (k = keep; k >= 1; k--) {
		from = k == 1 ? ft_strdup(path) : ft_asprintf("%s.%d", path,
							       k - 1);
		to = ft_asprintf("%s.%d", path, k);
		if (rename(from, to) == -1 && errno != ENOENT)
			rc = -1;
		free(from);
		free(to);
	}
	if (keep == 0 && unlink(path) == -1 && errno != ENOENT)
		rc = -1;
	return rc;
}

/* Copy the file FROM into a new file TO (0600).  0, or -1 with errno. */
static int
copy_file(const char *from, const char *to)
{
	int in = open(from, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	int out = in < 0 ? -1 : open(to, O_WRONLY | O_CREAT | O_TRUNC |
				      O_CLOEXEC | O_NOFOLLOW, 0600);
	ssize_t n = 0;
	int rc = -1, e;

	if (in >= 0 && out >= 0) {
		while ((n = copy_file_range(in, NULL, out, NULL, 1 << 20,
					    0)) > 0)
			;
		rc = n == 0 ? 0 : -1;
	}
	e = errno;
	if (in >= 0)
		close(in);
	if (out >= 0)
		close(out);
	errno = e;
	return rc;
}

int
ft_rotate_shared(const char *path, int keep)
{
	char *from, *to;
	int k, rc = 0;

	for (k = keep; k >= 2; k--) {
		from = ft_asprintf("%s.%d", path, k - 1);
		to = ft_asprintf("%s.%d", path, k);
		if (rename(from, to) == -1 && errno != ENOENT)
			rc = -1;
		free(from);
		free(to);
	}
	if (keep > 0) {
		to = ft_asprintf("%s.1", path);
		if (copy_file(path, to) == -1 && errno != ENOENT)
			rc = -1;
		free(to);
	}
	if (truncate(path, 0) == -1 && errno != ENOENT)
		rc = -1;
	return rc;
}

/* Write all N bytes of BUF to FD: with send(MSG_NOSIGNAL) when SOCK.
 * 0, or -1 with errno. */
static int
put_all(int fd, const void *buf, size_t n, int sock)
{
	const char *p = buf;

	while (n > 0) {
		ssize_t w = sock ? send(fd, p, n, MSG_NOSIGNAL) :
			    write(fd, p, n);

		if (w == -1) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

int
ft_write_all(int fd, const void *buf, size_t n)
{
	return put_all(fd, buf, n, 0);
}

int
ft_send_all(int fd, const void *buf, size_t n)
{
	return put_all(fd, buf, n, 1);
}

char *
ft_read_file(const char *path, size_t *len)
{
	struct ft_buf b = { 0 };
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t r;

	if (fd == -1)
		return NULL;
	for (;;) {
		ft_buf_reserve(&b, 65536);
		r = read(fd, b.data + b.len, b.cap - b.len - 1);
		if (r == -1 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		b.len += (size_t)r;
	}
	if (r == -1) {
		int e = errno;

		close(fd);
		free(b.data);
		errno = e;
		return NULL;
	}
	close(fd);
	b.data[b.len] = '\0';
	if (len)
		*len = b.len;
	return b.data;
}

int
ft_write_file_atomic(const char *path, const char *data, size_t len)
{
	return ft_write_file_durable(path, data, len, 0);
}

int
ft_fsync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc;

	if (fd == -1)
		return -1;
	rc = fsync(fd);
	if (rc == -1) {
		int e = errno;

		close(fd);
		errno = e;
		return -1;
	}
	close(fd);
	return 0;
}

int
ft_fsync_parent(const char *path)
{
	char *dir = ft_dirname(path);
	int rc = ft_fsync_dir(dir);

	free(dir);
	return rc;
}

int
ft_write_file_durable(const char *path, const char *data, size_t len,
		      int sync)
{
	char *tmp = ft_asprintf("%s.tmp.%d", path, (int)getpid());
	int fd, rc = -1;

	/* A new file of our own: never through a link someone left. */
	unlink(tmp);
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
		  0644);

	if (fd == -1)
		goto out;
	if (ft_write_all(fd, data, len) == -1 ||
	    (sync && fdatasync(fd) == -1)) {
		int e = errno;

		close(fd);
		unlink(tmp);
		errno = e;
		goto out;
	}
	if (close(fd) == -1) {
		int e = errno;

		unlink(tmp);
		errno = e;
		goto out;
	}
	if (rename(tmp, path) == -1 || (sync && ft_fsync_parent(path) == -1)) {
		int e = errno;

		unlink(tmp);
		errno = e;
		goto out;
	}
	rc = 0;
out:
	free(tmp);
	return rc;
}

int
ft_pid_alive(pid_t pid)
{
	char path[64], line[256];
	FILE *f;
	int alive = 0;

	if (pid <= 0)
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "re");
	if (f == NULL)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "State:", 6) == 0) {
			alive = strchr(line, 'Z') == NULL && strchr(line, 'X') == NULL;
			break;
		}
	}
	fclose(f);
	return alive;
}

#define KEEP_MMAP_BYTES (64 << 20)	/* blocks this big come from mmap */
#define KEEP_TRIM_BYTES (256 << 20)	/* free heap glibc keeps untrimmed */

void
ft_memory_keep(int one_heap)
{
	/* Setting the thresholds also turns glibc's adaptive ones off. */
	if (one_heap)
		mallopt(M_ARENA_MAX, 1);
	mallopt(M_MMAP_THRESHOLD, KEEP_MMAP_BYTES);
	mallopt(M_TRIM_THRESHOLD, KEEP_TRIM_BYTES);
}

/* Does the environment block ENV (LEN bytes of NUL-separated entries)
 * hold ENTRY? */
static int
env_has(const char *env, size_t len, const char *entry)
{
	size_t n = strlen(entry), off = 0;

	while (off < len) {
		size_t l = strnlen(env + off, len - off);

		if (l == n && memcmp(env + off, entry, n) == 0)
			return 1;
		off += l + 1;
	}
	return 0;
}

/* The stat file at PATH (a process's or a thread's: a new string, NULL
 * if there is none), with *FIELDS at what follows the command's closing
 * parenthesis: " S" (field 3, the state) and on, or NULL when that cannot
 * be found. */
static char *
stat_file(const char *path, const char **fields)
{
	char *text;

	*fields = NULL;
	if ((text = ft_read_file(path, NULL)) != NULL)
		*fields = strrchr(text, ')');
	return text;
}

/* /proc/PID/stat of PID, as stat_file. */
static char *
proc_stat(pid_t pid, const char **fields)
{
	char path[64];

	*fields = NULL;
	if (pid <= 0)
		return NULL;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	return stat_file(path, fields);
}

/* The state letter in the stat file at PATH, 0 if none. */
static char
stat_state(const char *path)
{
	const char *p;
	char *text = stat_file(path, &p), state = 0;

	if (p == NULL || sscanf(p + 1, " %c", &state) != 1)
		state = 0;
	free(text);
	return state;
}

unsigned long long
ft_proc_start(pid_t pid)
{
	const char *p;
	char *text = proc_stat(pid, &p);
	unsigned long long start = 0;
	int field;

	/* Field 22 is the start time. */
	for (field = 2; p && field < 22; field++)
		p = strchr(p + 1, ' ');
	if (p)
		start = strtoull(p + 1, NULL, 10);
	free(text);
	return start;
}

char
ft_pid_state(pid_t pid)
{
	char path[64];

	if (pid <= 0)
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	return stat_state(path);
}

/* The state letter of thread TID of PID, 0 if none. */
static char
thread_state(pid_t pid, const char *tid)
{
	char path[320];

	snprintf(path, sizeof(path), "/proc/%d/task/%s/stat", (int)pid, tid);
	return stat_state(path);
}

int
ft_pid_busy(pid_t pid)
{
	char path[64], state;
	struct dirent *d;
	DIR *dir;
	int busy = 0;

	state = ft_pid_state(pid);
	if (state == 'R' || state == 'D')
		return 1;
	if (state == 0 || state == 'T' || state == 't' || state == 'Z')
		return 0;
	/* Asleep: maybe on a lock another of its threads holds while that
	 * one waits for a CPU. */
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	if ((dir = opendir(path)) == NULL)
		return 0;
	while (!busy && (d = readdir(dir)) != NULL) {
		if (d->d_name[0] == '.')
			continue;
		state = thread_state(pid, d->d_name);
		busy = state == 'R' || state == 'D';
	}
	closedir(dir);
	return busy;
}

int
ft_pid_sched_ns(pid_t pid, unsigned long long *ns)
{
	char path[64], *text;
	unsigned long long run, wait;
	int n;

	snprintf(path, sizeof(path), "/proc/%d/schedstat", (int)pid);
	if (pid <= 0 || (text = ft_read_file(path, NULL)) == NULL)
		return -1;
	n = sscanf(text, "%llu %llu", &run, &wait);
	free(text);
	if (n != 2)
		return -1;
	*ns = run + wait;
	return 0;
}

#define PF_EXITING_FLAG 0x4	/* the kernel's PF_EXITING, /proc/PID/stat */

int
ft_pid_staying(pid_t pid)
{
	const char *p;
	char *text = proc_stat(pid, &p), state = 0;
	unsigned long flags = 0;
	int ok;

	/* The state (field 3), then ppid, pgrp, session, tty, tpgid, and
	 * the flags (field 9). */
	ok = p && sscanf(p + 1, " %c %*d %*d %*d %*d %*d %lu", &state,
			 &flags) == 2;
	free(text);
	return ok && state != 'Z' && state != 'X' &&
	       !(flags & PF_EXITING_FLAG);
}

int
ft_proc_is(pid_t pid, unsigned long long start)
{
	return start != 0 && ft_proc_start(pid) == start && ft_pid_alive(pid);
}

int
ft_pidfd_open(pid_t pid)
{
#ifdef SYS_pidfd_open
	return (int)syscall(SYS_pidfd_open, pid, 0);
#else
	(void)pid;
	errno = ENOSYS;
	return -1;
#endif
}

int
ft_kill_by_env(const char *entry, const char *entry2)
{
	return ft_signal_by_env(entry, entry2, SIGKILL);
}

int
ft_signal_by_env(const char *entry, const char *entry2, int sig)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	int count = 0;

	if (d == NULL)
		return 0;
	while ((e = readdir(d)) != NULL) {
		pid_t pid = (pid_t)atoi(e->d_name);
		char path[64], *env;
		size_t len = 0;

		if (pid <= 0 || pid == getpid())
			continue;
		snprintf(path, sizeof(path), "/proc/%d/environ", (int)pid);
		env = ft_read_file(path, &len);
		if (env && env_has(env, len, entry) &&
		    (entry2 == NULL || env_has(env, len, entry2)) &&
		    kill(pid, sig) == 0)
			count++;
		free(env);
	}
	closedir(d);
	return count;
}

/* The session id of PID from /proc/PID/stat, or -1. */
static pid_t
session_of(pid_t pid)
{
	char path[64], *text, *p;
	int sid = -1;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	text = ft_read_file(path, NULL);
	/* After the command name, in parentheses: state ppid pgrp session. */
	p = text ? strrchr(text, ')') : NULL;
	if (p == NULL || sscanf(p + 1, " %*c %*d %*d %d", &sid) != 1)
		sid = -1;
	free(text);
	return (pid_t)sid;
}

int
ft_kill_session(pid_t sid)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	int count = 0;

	if (d == NULL || sid <= 1)
		goto out;
	while ((e = readdir(d)) != NULL) {
		pid_t pid = (pid_t)atoi(e->d_name);

		if (pid > 1 && pid != getpid() && session_of(pid) == sid &&
		    ft_pid_alive(pid) && kill(pid, SIGKILL) == 0)
			count++;
	}
out:
	if (d)
		closedir(d);
	return count;
}

int
ft_host_is_local(const char *host)
{
	char name[256];

	if (strcmp(host, "localhost") == 0 || strncmp(host, "127.", 4) == 0 ||
	    strcmp(host, "::1") == 0)
		return 1;
	if (gethostname(name, sizeof(name)) == 0) {
		name[sizeof(name) - 1] = '\0';
		if (strcmp(host, name) == 0)
			return 1;
	}
	return 0;
}

void
ft_buf_grow(struct ft_buf *b, size_t more)
{
	size_t cap;

	if (b->cap - b->len > more)
		return;
	cap = b->cap ? b->cap : 256;
	while (cap - b->len <= more)
		cap *= 2;
	b->data = ft_realloc(b->data, cap);
	b->cap = cap;
}

void
ft_buf_printf(struct ft_buf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	ft_buf_reserve(b, (size_t)n + 1);
	va_start(ap, fmt);
	vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

/* Bytes that are not valid UTF-8 are written as \u00XX (their Latin-1
 * reading) so that every line stays valid JSON. */
static size_t
utf8_seq_len(const unsigned char *s, size_t left)
{
	size_t n, i;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		n = 2;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		n = 3;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		n = 4;
	else
		return 0;
	if (n > left)
		return 0;
	for (i = 1; i < n; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	if (n == 3 && s[0] == 0xe0 && s[1] < 0xa0)
		return 0;
	if (n == 3 && s[0] == 0xed && s[1] >= 0xa0)
		return 0;
	if (n == 4 && s[0] == 0xf0 && s[1] < 0x90)
		return 0;
	if (n == 4 && s[0] == 0xf4 && s[1] >= 0x90)
		return 0;
	return n;
}

void
ft_buf_json_str(struct ft_buf *b, const char *s, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0;

	ft_buf_reserve(b, len + 16);
	while (i < len) {
		unsigned char c = p[i];
		size_t n;

		if (c >= 0x20 && c != '"' && c != '\\' && c < 0x80) {
			size_t j = i;

			while (j < len && p[j] >= 0x20 && p[j] != '"' &&
			       p[j] != '\\' && p[j] < 0x80)
				j++;
			ft_buf_add(b, s + i, j - i);
			i = j;
			continue;
		}
		if (c >= 0x80 && (n = utf8_seq_len(p + i, len - i)) > 0) {
			ft_buf_add(b, s + i, n);
			i += n;
			continue;
		}
		switch (c) {
		case '"': ft_buf_add(b, "\\\"", 2); break;
		case '\\': ft_buf_add(b, "\\\\", 2); break;
		case '\n': ft_buf_add(b, "\\n", 2); break;
		case '\t': ft_buf_add(b, "\\t", 2); break;
		case '\r': ft_buf_add(b, "\\r", 2); break;
		default: {
			char u[6] = { '\\', 'u', '0', '0', hex[c >> 4], hex[c & 15] };

			ft_buf_add(b, u, 6);
		}
		}
		i++;
	}
}

void
ft_buf_free(struct ft_buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}

double
ft_task_timeout(const json_t *task, double def)
{
	json_t *v = json_object_get(task, "timeout");

	return json_is_number(v) ? json_number_value(v) : def;
}

/* One descriptor's room of control data. */
union fd_cmsg {
	struct cmsghdr h;
	char buf[CMSG_SPACE(sizeof(int))];
};

int
ft_send_fd(int sock, const void *buf, size_t len, int fd)
{
	union fd_cmsg c;
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct msghdr m = {
		.msg_iov = &iov, .msg_iovlen = 1,
		.msg_control = c.buf, .msg_controllen = sizeof(c.buf),
	};
	struct cmsghdr *h = CMSG_FIRSTHDR(&m);
	ssize_t n;

	memset(&c, 0, sizeof(c));
	h->cmsg_level = SOL_SOCKET;
	h->cmsg_type = SCM_RIGHTS;
	h->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(h), &fd, sizeof(int));
	do
		n = sendmsg(sock, &m, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n >= 0 && (size_t)n != len)
		errno = EMSGSIZE;
	return n >= 0 && (size_t)n == len ? 0 : -1;
}

ssize_t
ft_recv_fd(int sock, void *buf, size_t len, int *fd)
{
	union fd_cmsg c;
	struct iovec iov = { .iov_base = buf, .iov_len = len };
	struct msghdr m = {
		.msg_iov = &iov, .msg_iovlen = 1,
		.msg_control = c.buf, .msg_controllen = sizeof(c.buf),
	};
	struct cmsghdr *h;
	ssize_t n;

	*fd = -1;
	do
		n = recvmsg(sock, &m, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -1;
	h = CMSG_FIRSTHDR(&m);
	if (h && h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_RIGHTS &&
	    h->cmsg_len == CMSG_LEN(sizeof(int)))
		memcpy(fd, CMSG_DATA(h), sizeof(int));
	return n;
}

long long
ft_parse_u32(const char **p, const char *end)
{
	long long v = 0;
	const char *s = *p;

	if (s == end || *s < '0' || *s > '9')
		return -1;
	while (s < end && *s >= '0' && *s <= '9' && v <= 0xffffffffLL)
		v = v * 10 + (*s++ - '0');
	*p = s;
	return v > 0xffffffffLL ? -1 : v;
}

int
ft_run_capture(char *const argv[], double timeout, char *out, size_t n)
{
	int fds[2], status = -1;
	size_t len = 0;
	double until = ft_now() + timeout;
	pid_t pid;

	if (n > 0)
		out[0] = '\0';
	if (pipe2(fds, O_CLOEXEC) == -1)
		return -1;
	pid = fork();
	if (pid == 0) {
		int null = open("/dev/null", O_RDWR);

		dup2(null, 0);
		dup2(fds[1], 1);
		dup2(null, 2);
		execvp(argv[0], argv);
		_exit(127);
	}
	close(fds[1]);
	if (pid < 0) {
		close(fds[0]);
		return -1;
	}
	for (;;) {
		struct pollfd p = { .fd = fds[0], .events = POLLIN };
		char buf[512];
		ssize_t k;
		double left = until - ft_now();

		if (left <= 0 || poll(&p, 1, (int)(left * 1000) + 1) <= 0)
			break;
		if ((k = read(fds[0], buf, sizeof(buf))) <= 0)
			break;
		if (len + 1 < n) {
			size_t take = (size_t)k < n - 1 - len ? (size_t)k :
				      n - 1 - len;

			memcpy(out + len, buf, take);
			len += take;
			out[len] = '\0';
		}
	}
	close(fds[0]);
	if (waitpid(pid, &status, WNOHANG) == 0) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		return -1;
	}
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* task_mem: the memory of a task's processes (task_mem.h). */
#include "task_mem.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "memsize.h"

/* The process group and the resident pages of process PID (a name of
 * /proc): 1 with *PGRP and *PAGES, 0 when it is gone. */
static int
proc_stat(const char *pid, long *pgrp, unsigned long *pages)
{
	char path[64], buf[1024], *p;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%s/stat", pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	/* After the command's ")": state ppid pgrp ... rss (the 24th). */
	if ((p = strrchr(buf, ')')) == NULL ||
	    sscanf(p + 2, "%*c %*d %ld %*d %*d %*d %*u %*u %*u %*u %*u %*u "
		   "%*u %*d %*d %*d %*d %*d %*d %*u %*u %lu", pgrp,
		   pages) != 2)
		return 0;
	return 1;
}

uint64_t
task_mem_group_rss(pid_t pgid)
{
	long page = sysconf(_SC_PAGESIZE);
	DIR *d = opendir("/proc");
	struct dirent *e;
	uint64_t pages = 0;
	unsigned long n;
	long g;

	if (d == NULL)
		return 0;
	while ((e = readdir(d)) != NULL)
		if (e->d_name[0] >= '1' && e->d_name[0] <= '9' &&
		    proc_stat(e->d_name, &g, &n) && g == (long)pgid)
			pages += n;
	closedir(d);
	return pages * (uint64_t)page;
}

void
task_mem_reason(char *buf, size_t n, uint64_t used, uint64_t limit)
{
	char u[32], l[32];

	snprintf(buf, n, "memory: used %s, over its limit of %s (killed by "
		 "ftfarm)", memsize_format(used, u, sizeof(u)),
		 memsize_format(limit, l, sizeof(l)));
}

/* Write 1000 to the oom_score_adj file PATH. */
static void
oom_first(const char *path)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);

	if (fd >= 0) {
		if (write(fd, "1000", 4) < 0) {
			/* nothing to do: the task runs all the same */
		}
		close(fd);
	}
}

void
task_mem_oom_first(void)
{
	oom_first("/proc/self/oom_score_adj");
}

void
task_mem_oom_first_of(pid_t pid)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/oom_score_adj", (int)pid);
	oom_first(path);
}

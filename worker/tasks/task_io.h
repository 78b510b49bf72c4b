/*
 * task_io: what a task plugin reads of the processes it starts.
 *
 * An output of a process is kept up to a cap (the task's output_cap);
 * the rest is read and dropped, so that the process never blocks on a
 * full pipe.  Or, when the task's output goes to a file (ft_task's
 * out_fd, err_fd) that the process cannot write itself, all of it is
 * written there.
 */
#ifndef FT_TASK_IO_H
#define FT_TASK_IO_H

#include <stddef.h>

/* One output of a process. */
struct task_sink {
	int fd;			/* read end; -1 at EOF */
	size_t cap;		/* keep at most this many bytes */
	char *data;		/* kept bytes, NUL-terminated, or NULL */
	size_t len;
	size_t alloc;
	int file;		/* > 2: write everything there, keep none */
};

/* Keep N bytes of BUF in S, up to its cap (or write them to its
 * file). */
void task_sink_keep(struct task_sink *s, const char *buf, size_t n);
/* Read what is ready on S; close it at EOF or on error.  Returns the
 * bytes read (0 at EOF, -1 when nothing was ready or on error). */
long task_sink_read(struct task_sink *s);
/* Close *FD if open, and mark it closed (-1). */
void task_fd_close(int *fd);

#endif

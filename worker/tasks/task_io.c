/* task_io: what a task plugin reads of its processes (task_io.h). */
#include "task_io.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

#define READ_CHUNK 65536

void
task_sink_keep(struct task_sink *s, const char *buf, size_t n)
{
	size_t room = s->cap - s->len;

	if (s->file > 2) {
		(void)ft_write_all(s->file, buf, n);	/* a full disk: lost */
		return;
	}
	if (n > room)
		n = room;
	if (n == 0)
		return;
	if (s->len + n + 1 > s->alloc) {
		s->alloc = s->alloc ? s->alloc : 4096;
		while (s->alloc < s->len + n + 1)
			s->alloc *= 2;
		if (s->alloc - 1 > s->cap)
			s->alloc = s->cap + 1;
		s->data = ft_realloc(s->data, s->alloc);
	}
	memcpy(s->data + s->len, buf, n);
	s->len += n;
	s->data[s->len] = '\0';
}

long
task_sink_read(struct task_sink *s)
{
	char buf[READ_CHUNK];
	ssize_t n = read(s->fd, buf, sizeof(buf));

	if (n > 0)
		task_sink_keep(s, buf, (size_t)n);
	else if (n == 0 || (errno != EINTR && errno != EAGAIN))
		task_fd_close(&s->fd);
	return n;
}

void
task_fd_close(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

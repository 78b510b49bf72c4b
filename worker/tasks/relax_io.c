/* relax_io: block geometry and the job's files (see relax_io.h). */
#include "relax_io.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

long
relax_lo(long n, long blocks, long b)
{
	return 1 + (long)((long long)b * (n - 2) / blocks);
}

long
relax_block_of(long n, long blocks, long row)
{
	/* The largest b with relax_lo(b) <= row, i.e. b * (n-2) < row * B. */
	return (long)(((long long)row * blocks - 1) / (n - 2));
}

void
relax_out_rows(long n, long blocks, long b, long *lo, long *hi)
{
	*lo = b == 0 ? 0 : relax_lo(n, blocks, b);
	*hi = b == blocks - 1 ? n : relax_lo(n, blocks, b + 1);
}

char *
relax_cp_path(const char *dir, long sweep, long block)
{
	return ft_asprintf("%s/cp-%ld-%ld", dir, sweep, block);
}

char *
relax_rs_path(const char *dir, long sweep, long block)
{
	return ft_asprintf("%s/rs-%ld-%ld", dir, sweep, block);
}

int
relax_pread(int fd, void *buf, size_t len, off_t off)
{
	char *p = buf;
	ssize_t r;

	while (len > 0) {
		r = pread(fd, p, len, off);
		if (r == -1 && errno == EINTR)
			continue;
		if (r == -1)
			return -1;
		if (r == 0) {
			errno = EIO;
			return -1;
		}
		p += r;
		off += r;
		len -= (size_t)r;
	}
	return 0;
}

int
relax_pwrite(int fd, const void *buf, size_t len, off_t off)
{
	const char *p = buf;
	ssize_t r;

	while (len > 0) {
		r = pwrite(fd, p, len, off);
		if (r == -1 && errno == EINTR)
			continue;
		if (r == -1)
			return -1;
		p += r;
		off += r;
		len -= (size_t)r;
	}
	return 0;
}

/* Take over the file at REUSE as F's temp file (one rename: of several
 * attempts, one gets it) and make it SIZE bytes.  The rename goes to a
 * name no file has: a rename over an existing file makes ext4 write out
 * the renamed file's dirty pages first (auto_da_alloc), about 5 ms for a
 * block's checkpoint that is about to be overwritten anyway.  1 when
 * taken; 0 when there is nothing to take (or the filesystem cannot rename
 * without replacing): F gets a new file; -1 with errno when the file was
 * taken but cannot be used (F's temp file is then that file). */
static int
take_over(struct relax_file *f, const char *reuse, off_t size)
{
	static atomic_uint seq;
	struct stat sb;
	int fd;

	f->tmp = ft_asprintf("%s.%d.%u", f->path, (int)getpid(),
			     atomic_fetch_add(&seq, 1));
	if (renameat2(AT_FDCWD, reuse, AT_FDCWD, f->tmp,
		      RENAME_NOREPLACE) == -1) {
		free(f->tmp);
		f->tmp = NULL;
		return 0;
	}
	fd = open(f->tmp, O_RDWR | O_CLOEXEC);	/* read too: to be mapped */
	if (fd == -1 || fstat(fd, &sb) == -1 ||
	    (sb.st_size != size && ftruncate(fd, size) == -1)) {
		int e = errno;

		if (fd != -1)
			close(fd);
		errno = e;
		return -1;
	}
	f->fd = fd;
	return 1;
}

int
relax_file_open(struct relax_file *f, const char *path, const char *reuse,
		off_t size, char *err, size_t n)
{
	int taken = 0;

	f->fd = -1;
	f->tmp = NULL;
	f->path = ft_strdup(path);
	if (reuse && (taken = take_over(f, reuse, size)) == -1) {
		snprintf(err, n, "%s: %s", f->tmp, strerror(errno));
		relax_file_abort(f);
		return -1;
	}
	if (taken)
		return 0;
	f->tmp = ft_asprintf("%s.XXXXXX", path);
	f->fd = mkostemp(f->tmp, O_CLOEXEC);
	if (f->fd == -1) {
		snprintf(err, n, "%s: %s", f->tmp, strerror(errno));
		free(f->tmp);
		free(f->path);
		f->tmp = f->path = NULL;
		return -1;
	}
	return 0;
}

int
relax_file_write(struct relax_file *f, const void *buf, size_t len, off_t off,
		 char *err, size_t n)
{
	if (relax_pwrite(f->fd, buf, len, off) == -1) {
		snprintf(err, n, "%s: %s", f->tmp, strerror(errno));
		return -1;
	}
	return 0;
}

/* Give F's temp file its name, unless a file has it already (an earlier
 * attempt's): link, which never replaces, or rename where the filesystem
 * has no links.  0 if F got the name, 1 if another file has it, -1 with
 * errno. */
static int
publish(const struct relax_file *f)
{
	int lost = 0;

	if (link(f->tmp, f->path) == -1) {
		if (errno == EPERM || errno == ENOTSUP || errno == ENOSYS)
			return rename(f->tmp, f->path);
		if (errno != EEXIST)
			return -1;
		lost = 1;
	}
	return unlink(f->tmp) == -1 ? -1 : lost;
}

int
relax_file_commit(struct relax_file *f, char *err, size_t n)
{
	int rc = close(f->fd);

	f->fd = -1;
	if (rc == 0)
		rc = publish(f);
	if (rc == -1) {
		snprintf(err, n, "%s: %s", f->path, strerror(errno));
		relax_file_abort(f);
		return -1;
	}
	free(f->tmp);
	free(f->path);
	f->tmp = f->path = NULL;
	return rc;
}

void
relax_file_abort(struct relax_file *f)
{
	if (f->fd != -1)
		close(f->fd);
	f->fd = -1;
	if (f->tmp)
		unlink(f->tmp);
	free(f->tmp);
	free(f->path);
	f->tmp = f->path = NULL;
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23	/* Linux 5.14 */
#endif

void
relax_map_drop(struct relax_map *m)
{
	if (m->rows)
		munmap(m->rows, m->len);
	memset(m, 0, sizeof(*m));
}

/* Is M (may be NULL) a mapping of the whole file SB describes? */
static int
same_file(const struct relax_map *m, const struct stat *sb)
{
	return m && m->rows && m->dev == sb->st_dev && m->ino == sb->st_ino &&
	       m->len == (size_t)sb->st_size;
}

int
relax_map_is(const struct relax_map *m, const char *path)
{
	struct stat sb;

	return m->rows && stat(path, &sb) == 0 && same_file(m, &sb);
}

int
relax_file_map(struct relax_file *f, size_t size, struct relax_map *m,
	       struct relax_map *cache)
{
	struct stat sb;
	void *p;

	memset(m, 0, sizeof(*m));
	if (size == 0 || fstat(f->fd, &sb) == -1 || (size_t)sb.st_size != size)
		return -1;
	if (same_file(cache, &sb)) {
		*m = *cache;
		memset(cache, 0, sizeof(*cache));
		return 0;
	}
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, f->fd, 0);
	if (p == MAP_FAILED)
		return -1;
	if (madvise(p, size, MADV_POPULATE_WRITE) == -1) {
		munmap(p, size);
		return -1;
	}
	m->rows = p;
	m->len = size;
	m->dev = sb.st_dev;
	m->ino = sb.st_ino;
	return 0;
}

int
relax_read_at(const char *path, void *buf, size_t len, off_t off, char *err,
	      size_t n)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd == -1 || relax_pread(fd, buf, len, off) == -1) {
		snprintf(err, n, "%s: %s", path, fd != -1 && errno == EIO ?
			 "shorter than expected" : strerror(errno));
		if (fd != -1)
			close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

int
relax_remove_dir(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char *path;

	if (d == NULL)
		return errno == ENOENT ? 0 : -1;
	while ((e = readdir(d)) != NULL) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		path = ft_asprintf("%s/%s", dir, e->d_name);
		unlink(path);
		free(path);
	}
	closedir(d);
	return rmdir(dir) == -1 && errno != ENOENT ? -1 : 0;
}

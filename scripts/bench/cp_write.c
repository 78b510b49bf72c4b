/*
 * cp_write: what it costs to put a relax checkpoint's bytes into a file,
 * each way the relax plugin could (worker/tasks/relax_block.c, relax_io.c).
 *
 *   cp_write DIR [MIB [REPS]]
 *
 * For a file of MIB MiB (default 64, a block of a 4098 x 4098 job) in DIR,
 * REPS times (default 10), the median in ms of:
 *   old file, pwrite       rewriting a file whose pages are in the page
 *                          cache, 1 MiB at a time from a buffer in cache
 *                          (how checkpoints were written);
 *   memcpy to anon         the same bytes into an anonymous buffer on huge
 *                          pages (the stores alone, for comparison);
 *   old file, populate     mmap shared and MADV_POPULATE_WRITE (what a
 *                          task pays to sweep into a file it took over;
 *                          nothing when its mapping was kept);
 *   munmap                 of that mapping;
 *   new file, pwrite       a file made by the writes;
 *   new file, populate     ftruncate, then mmap and populate;
 *   new file, fallocate    fallocate, then mmap and populate.
 *
 * Build: cc -O2 -D_GNU_SOURCE -o cp_write scripts/bench/cp_write.c
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

#define PIECE (1UL << 20)
#define HUGE (2UL << 20)
#define WAYS 7

static const char *names[WAYS] = {
	"old file, pwrite", "memcpy to anon", "old file, populate", "munmap",
	"new file, pwrite", "new file, populate", "new file, fallocate",
};

static double
now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int
cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static void
die(const char *what)
{
	perror(what);
	exit(1);
}

static void
write_all(int fd, const char *src, size_t len)
{
	size_t off;

	for (off = 0; off < len; off += PIECE)
		if (pwrite(fd, src, PIECE, (off_t)off) != (ssize_t)PIECE)
			die("pwrite");
}

static char *
map(int fd, size_t len)
{
	char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

	if (m == MAP_FAILED)
		die("mmap");
	if (madvise(m, len, MADV_POPULATE_WRITE) == -1)
		die("madvise(MADV_POPULATE_WRITE)");
	return m;
}

/* One repetition of every way into T[WAYS]. */
static void
once(const char *path, size_t len, char *src, char *anon, int old, double *t)
{
	double t0, t1;
	char *m;
	int fd;
	size_t off;

	t0 = now();
	write_all(old, src, len);
	t[0] = now() - t0;
	t0 = now();
	for (off = 0; off < len; off += PIECE)
		memcpy(anon + off, src, PIECE);
	t[1] = now() - t0;
	t0 = now();
	m = map(old, len);
	t1 = now();
	munmap(m, len);
	t[2] = t1 - t0;
	t[3] = now() - t1;
	for (int way = 4; way < WAYS; way++) {
		fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
		if (fd == -1)
			die(path);
		t0 = now();
		if (way == 4) {
			write_all(fd, src, len);
		} else {
			if (way == 5 ? ftruncate(fd, (off_t)len) :
			    fallocate(fd, 0, 0, (off_t)len))
				die("ftruncate/fallocate");
			munmap(map(fd, len), len);
		}
		t[way] = now() - t0;
		close(fd);
		unlink(path);
	}
}

int
main(int argc, char **argv)
{
	size_t mib = argc > 2 ? strtoul(argv[2], NULL, 10) : 64;
	int reps = argc > 3 ? atoi(argv[3]) : 10;
	size_t len = mib << 20;
	char old[4096], fresh[4096], *src, *anon;
	double *t;
	int fd;

	if (argc < 2 || mib == 0 || reps < 1) {
		fprintf(stderr, "usage: cp_write DIR [MIB [REPS]]\n");
		return 2;
	}
	snprintf(old, sizeof(old), "%s/cp_write.old.%d", argv[1], getpid());
	snprintf(fresh, sizeof(fresh), "%s/cp_write.new.%d", argv[1],
		 getpid());
	src = aligned_alloc(4096, PIECE);
	anon = aligned_alloc(HUGE, (len + HUGE - 1) & ~(HUGE - 1));
	t = calloc((size_t)reps * WAYS, sizeof(double));
	if (src == NULL || anon == NULL || t == NULL)
		die("malloc");
	madvise(anon, len, MADV_HUGEPAGE);
	memset(src, 1, PIECE);
	memset(anon, 0, len);
	fd = open(old, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd == -1)
		die(old);
	write_all(fd, src, len);
	for (int r = 0; r < reps; r++) {
		src[0] = (char)r;
		once(fresh, len, src, anon, fd, t + (size_t)r * WAYS);
	}
	close(fd);
	unlink(old);
	printf("| %zu MiB in %s, %d reps | median ms |\n|---|---|\n", mib,
	       argv[1], reps);
	for (int way = 0; way < WAYS; way++) {
		double v[reps];

		for (int r = 0; r < reps; r++)
			v[r] = t[(size_t)r * WAYS + way] * 1e3;
		qsort(v, (size_t)reps, sizeof(double), cmp);
		printf("| %s | %.1f |\n", names[way], v[reps / 2]);
	}
	free(t);
	free(src);
	free(anon);
	return 0;
}

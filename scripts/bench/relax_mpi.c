/*
 * relax_mpi: the relaxation of seed 003 as a plain MPI program, without
 * fault tolerance: the baseline of scripts/bench/relax.py.
 *
 *   mpirun -n P relax_mpi N ITMAX MAXEPS [MATRIX]
 *
 * The seed's design: the interior rows are cut into P blocks of rows (the
 * same cut as the relax job's blocks), every sweep exchanges one halo row
 * with each neighbour (MPI_Isend/MPI_Irecv), sweeps the block and takes the
 * global eps with MPI_Allreduce(MAX); it stops after the first sweep whose
 * eps is below MAXEPS, or after ITMAX.  The sweep is the relax plugin's own
 * kernel (worker/tasks/relax_kernel.c: two buffers swapped, eps fused) on
 * buffers allocated the same way (huge pages where the kernel allows), so
 * that the benchmark compares the farm's overheads, not two kernels.
 *
 * Prints, on rank 0, {"n": N, "sweeps": IT, "eps": E, "S": S, "seconds": T,
 * "init_s": I} with eps and S as the job's output (%.17g; S summed per row,
 * then the row sums in row order, gathered to rank 0), T the time from
 * after MPI_Init (all ranks) to S, I rank 0's part of it allocating and
 * initialising its rows.  MATRIX: the final matrix, N*N doubles, row-major.
 *
 * Build: mpicc -std=c11 -O2 -ffp-contract=off -D_GNU_SOURCE \
 *          -I worker/tasks scripts/bench/relax_mpi.c \
 *          worker/tasks/relax_kernel.c -lm
 */
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "relax_kernel.h"

#define HUGE_PAGE (2UL << 20)

static long n;
static int rank, size;
static long lo, hi;		/* own rows */
static double *x, *y;		/* rows lo-1 .. hi, current and next */

#define ROW(buf, i) ((buf) + (size_t)((i) - (lo - 1)) * (size_t)n)

static long
block_lo(int r)
{
	return 1 + (long)((long long)r * (n - 2) / size);
}

/* LEN zeroed doubles on huge pages where the kernel allows: allocated as
 * the relax plugin allocates its buffers (worker/tasks/relax_block.c), so
 * that both sides sweep memory of the same kind. */
static double *
big_zalloc(size_t len)
{
	size_t bytes = (len * sizeof(double) + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
	double *p = aligned_alloc(HUGE_PAGE, bytes);

	if (p) {
		madvise(p, bytes, MADV_HUGEPAGE);
		memset(p, 0, bytes);
	}
	return p;
}

/* Own rows from init(); the halo rows come with the first exchange (the
 * boundary rows 0 and N-1 stay zero in both buffers). */
static void
init(void)
{
	size_t len = (size_t)(hi - lo + 2) * (size_t)n;
	long i;

	x = big_zalloc(len);
	y = big_zalloc(len);
	if (x == NULL || y == NULL) {
		fprintf(stderr, "relax_mpi: out of memory\n");
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	for (i = lo; i < hi; i++)
		rk_init_row(ROW(x, i), i, n);
}

/* Exchange halo rows with the neighbours (the seed's relax(), first half). */
static void
exchange(void)
{
	MPI_Request req[4];
	int nreq = 0;

	if (rank < size - 1) {
		MPI_Isend(ROW(x, hi - 1), (int)n, MPI_DOUBLE, rank + 1, 0,
			  MPI_COMM_WORLD, &req[nreq++]);
		MPI_Irecv(ROW(x, hi), (int)n, MPI_DOUBLE, rank + 1, 0,
			  MPI_COMM_WORLD, &req[nreq++]);
	}
	if (rank > 0) {
		MPI_Isend(ROW(x, lo), (int)n, MPI_DOUBLE, rank - 1, 0,
			  MPI_COMM_WORLD, &req[nreq++]);
		MPI_Irecv(ROW(x, lo - 1), (int)n, MPI_DOUBLE, rank - 1, 0,
			  MPI_COMM_WORLD, &req[nreq++]);
	}
	MPI_Waitall(nreq, req, MPI_STATUSES_IGNORE);
}

/* One sweep; the global eps. */
static double
sweep(void)
{
	double e = 0.0, eps, *t;
	long i;

	exchange();
	for (i = lo; i < hi; i++)
		e = rk_sweep_row(ROW(y, i), ROW(x, i - 1), ROW(x, i),
				 ROW(x, i + 1), n, e);
	t = x;
	x = y;
	y = t;
	MPI_Allreduce(&e, &eps, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
	return eps;
}

/* S: row sums gathered to rank 0, added in row order. */
static double
verify(void)
{
	long olo = rank == 0 ? 0 : lo, ohi = rank == size - 1 ? n : hi, i;
	int cnt = (int)(ohi - olo), *cnts = NULL, *offs = NULL, r;
	double *rs = malloc((size_t)cnt * sizeof(double)), *all = NULL;
	double s = 0.0;

	for (i = olo; i < ohi; i++)
		rs[i - olo] = rk_row_sum(ROW(x, i), i, n);
	if (rank == 0) {
		all = malloc((size_t)n * sizeof(double));
		cnts = malloc((size_t)size * sizeof(int));
		offs = malloc((size_t)size * sizeof(int));
	}
	MPI_Gather(&cnt, 1, MPI_INT, cnts, 1, MPI_INT, 0, MPI_COMM_WORLD);
	if (rank == 0)
		for (r = 0; r < size; r++)
			offs[r] = r == 0 ? 0 : offs[r - 1] + cnts[r - 1];
	MPI_Gatherv(rs, cnt, MPI_DOUBLE, all, cnts, offs, MPI_DOUBLE, 0,
		    MPI_COMM_WORLD);
	if (rank == 0)
		for (i = 0; i < n; i++)
			s += all[i];
	free(rs);
	free(all);
	free(cnts);
	free(offs);
	return s;
}

/* Each rank writes its rows (and the boundary rows next to it) to PATH. */
static void
write_matrix(const char *path)
{
	long olo = rank == 0 ? 0 : lo, ohi = rank == size - 1 ? n : hi;
	size_t rowb = (size_t)n * sizeof(double);
	int fd;

	if (rank == 0)
		close(open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644));
	MPI_Barrier(MPI_COMM_WORLD);
	fd = open(path, O_WRONLY);
	if (fd == -1 || pwrite(fd, ROW(x, olo), (size_t)(ohi - olo) * rowb,
			       (off_t)((size_t)olo * rowb)) !=
			(ssize_t)((size_t)(ohi - olo) * rowb)) {
		perror(path);
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	close(fd);
}

int
main(int argc, char **argv)
{
	double maxeps, eps = 0.0, t0, t_init, s;
	int itmax, it;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (argc != 4 && argc != 5) {
		if (rank == 0)
			fprintf(stderr, "usage: relax_mpi N ITMAX MAXEPS "
				"[MATRIX]\n");
		MPI_Finalize();
		return 2;
	}
	n = atol(argv[1]);
	itmax = atoi(argv[2]);
	maxeps = strtod(argv[3], NULL);
	if (n < 3 || itmax < 1 || size > n - 2) {
		if (rank == 0)
			fprintf(stderr, "relax_mpi: N >= 3, ITMAX >= 1, "
				"at most N-2 ranks\n");
		MPI_Finalize();
		return 2;
	}
	MPI_Barrier(MPI_COMM_WORLD);
	t0 = MPI_Wtime();
	lo = block_lo(rank);
	hi = block_lo(rank + 1);
	init();
	t_init = MPI_Wtime() - t0;
	for (it = 1; it <= itmax; it++) {
		eps = sweep();
		if (eps < maxeps)
			break;
	}
	if (it > itmax)
		it = itmax;
	s = verify();
	if (rank == 0)
		printf("{\"n\": %ld, \"sweeps\": %d, \"eps\": %.17g, "
		       "\"S\": %.17g, \"seconds\": %.6f, \"init_s\": %.6f}\n",
		       n, it, eps, s, MPI_Wtime() - t0, t_init);
	if (argc == 5)
		write_matrix(argv[4]);
	free(x);
	free(y);
	MPI_Finalize();
	return 0;
}

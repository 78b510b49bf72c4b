/*
 * relax_ref: the serial reference of the relax job, written from seed 003
 * (mpi_checkpoint_v2.c) with nothing of ftfarm in it.
 *
 *   relax_ref N ITMAX MAXEPS [MATRIX]
 *
 * prints {"n": N, "sweeps": IT, "eps": EPS, "S": S} (eps and S with %.17g)
 * and, given MATRIX, writes the final matrix there: N*N native (on x86,
 * little-endian) doubles, row-major.
 *
 * As the seed: init A; for it = 1..ITMAX: relax (B from A, then eps = max
 * fabs(A - B) with A = B, over the interior); stop after the first sweep
 * with eps < MAXEPS.  S is summed per row (j = 0..N-1 in order), then the
 * row sums in row order i = 0..N-1; each term is the seed's
 * A[i][j] * (i+1) * (j+1) / (N*N), with N*N an int product (or the exact
 * 64-bit one where an int would overflow, N > 46340).
 *
 * Build: cc -std=c11 -O2 -ffp-contract=off -o relax_ref tests/relax_ref.c -lm
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define Max(a, b) ((a) > (b) ? (a) : (b))

static int N;
static double *A, *B;

#define AT(M, i, j) (M)[(size_t)(i) * N + (j)]

static void
init(void)
{
	for (int i = 0; i < N; i++)
		for (int j = 0; j < N; j++)
			AT(A, i, j) = (i == 0 || i == N - 1 || j == 0 ||
				       j == N - 1) ? 0.0 : (1.0 + i + j);
}

/* One sweep; returns eps. */
static double
relax(void)
{
	double eps = 0.0;

	for (int i = 1; i < N - 1; i++)
		for (int j = 1; j < N - 1; j++)
			AT(B, i, j) = 0.25 * (AT(A, i - 1, j) + AT(A, i + 1, j) +
					      AT(A, i, j - 1) + AT(A, i, j + 1));
	for (int i = 1; i < N - 1; i++)
		for (int j = 1; j < N - 1; j++) {
			eps = Max(eps, fabs(AT(A, i, j) - AT(B, i, j)));
			AT(A, i, j) = AT(B, i, j);
		}
	return eps;
}

static double
verify(void)
{
	double s = 0.0;

	for (int i = 0; i < N; i++) {
		double row = 0.0;

		for (int j = 0; j < N; j++) {
			if (N <= 46340)
				row += AT(A, i, j) * (i + 1) * (j + 1) / (N * N);
			else
				row += AT(A, i, j) * (i + 1) * (j + 1) /
				       ((long long)N * N);
		}
		s += row;
	}
	return s;
}

int
main(int argc, char **argv)
{
	double maxeps, eps = 0.0;
	int itmax, it;
	FILE *f;

	if (argc != 4 && argc != 5) {
		fprintf(stderr, "usage: relax_ref N ITMAX MAXEPS [MATRIX]\n");
		return 2;
	}
	N = atoi(argv[1]);
	itmax = atoi(argv[2]);
	maxeps = strtod(argv[3], NULL);
	if (N < 3 || itmax < 1) {
		fprintf(stderr, "relax_ref: N >= 3 and ITMAX >= 1\n");
		return 2;
	}
	A = calloc((size_t)N * N, sizeof(double));
	B = calloc((size_t)N * N, sizeof(double));
	if (A == NULL || B == NULL) {
		fprintf(stderr, "relax_ref: out of memory\n");
		return 1;
	}
	init();
	for (it = 1; it <= itmax; it++) {
		eps = relax();
		if (eps < maxeps)
			break;
	}
	if (it > itmax)
		it = itmax;
	printf("{\"n\": %d, \"sweeps\": %d, \"eps\": %.17g, \"S\": %.17g}\n",
	       N, it, eps, verify());
	if (argc == 5) {
		f = fopen(argv[4], "wb");
		if (f == NULL ||
		    fwrite(A, sizeof(double), (size_t)N * N, f) != (size_t)N * N ||
		    fclose(f) != 0) {
			perror(argv[4]);
			return 1;
		}
	}
	return 0;
}

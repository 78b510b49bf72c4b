/*
 * relax_kernel: the arithmetic of the relaxation (seed 003, mpi_checkpoint_v2.c)
 * on one row at a time.  No I/O, no allocation; shared by the relax task
 * plugin and the plain MPI benchmark (scripts/bench/relax_mpi.c), so that
 * both compute with the very same code.
 *
 * A matrix of order N is stored row-major; row I is N contiguous doubles.
 * Every function gives the same bits as the seed's loops: the same
 * expressions, evaluated in the same order (build with -ffp-contract=off;
 * nothing here may be reassociated).
 */
#ifndef FT_RELAX_KERNEL_H
#define FT_RELAX_KERNEL_H

/* Row I of the initial matrix: 0.0 on the boundary (i == 0, i == N-1,
 * j == 0, j == N-1), else 1.0 + i + j. */
void rk_init_row(double *row, long i, long n);

/* One sweep of an interior row: OUT[j] = 0.25 * (UP[j] + DN[j] + MID[j-1] +
 * MID[j+1]) for j in 1..N-2 (OUT[0] and OUT[N-1] are not written).  Returns
 * the larger of EPS and max_j fabs(MID[j] - OUT[j]) over the same j: the
 * seed's separate eps pass, fused (a maximum does not depend on the order
 * it is taken in, so the bits are the seed's). */
double rk_sweep_row(double *restrict out, const double *restrict up,
		    const double *restrict mid, const double *restrict dn,
		    long n, double eps);

/* The verification sum of row I: sum over j = 0..N-1, in order, of
 * ROW[j] * (i+1) * (j+1) / (N*N), each term evaluated left to right as the
 * seed's double * int * int / int.  N*N is the seed's int product whenever
 * it fits an int (N <= 46340); beyond that it is the exact 64-bit product
 * (the seed's would overflow). */
double rk_row_sum(const double *row, long i, long n);

#endif

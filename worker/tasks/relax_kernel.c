/* relax_kernel: one row of the relaxation at a time (see relax_kernel.h). */
#include "relax_kernel.h"

#include <math.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

void
rk_init_row(double *row, long i, long n)
{
	long j;

	row[0] = row[n - 1] = 0.0;
	if (i == 0 || i == n - 1) {
		for (j = 1; j < n - 1; j++)
			row[j] = 0.0;
		return;
	}
	for (j = 1; j < n - 1; j++)
		row[j] = 1.0 + i + j;
}

#if defined(__SSE2__)
/* Two columns at a time.  The sum is added in the seed's order; maxpd
 * gives the larger of two non-NaN values as the seed's Max() does, and
 * fabs is a clear of the sign bit, so every lane holds exactly what the
 * scalar loop would. */
double
rk_sweep_row(double *restrict out, const double *restrict up,
	     const double *restrict mid, const double *restrict dn, long n,
	     double eps)
{
	const __m128d quarter = _mm_set1_pd(0.25);
	const __m128d nosign = _mm_castsi128_pd(_mm_set1_epi64x(0x7fffffffffffffffLL));
	__m128d m = _mm_set1_pd(eps), s, v;
	double lane[2], d;
	long j;

	for (j = 1; j + 1 < n - 1; j += 2) {
		s = _mm_add_pd(_mm_loadu_pd(up + j), _mm_loadu_pd(dn + j));
		s = _mm_add_pd(s, _mm_loadu_pd(mid + j - 1));
		s = _mm_add_pd(s, _mm_loadu_pd(mid + j + 1));
		v = _mm_mul_pd(quarter, s);
		_mm_storeu_pd(out + j, v);
		m = _mm_max_pd(_mm_and_pd(_mm_sub_pd(_mm_loadu_pd(mid + j), v),
					  nosign), m);
	}
	_mm_storeu_pd(lane, m);
	eps = lane[0] > lane[1] ? lane[0] : lane[1];
	for (; j < n - 1; j++) {
		out[j] = 0.25 * (up[j] + dn[j] + mid[j - 1] + mid[j + 1]);
		d = fabs(mid[j] - out[j]);
		eps = d > eps ? d : eps;
	}
	return eps;
}
#else
double
rk_sweep_row(double *restrict out, const double *restrict up,
	     const double *restrict mid, const double *restrict dn, long n,
	     double eps)
{
	double d;
	long j;

	for (j = 1; j < n - 1; j++) {
		out[j] = 0.25 * (up[j] + dn[j] + mid[j - 1] + mid[j + 1]);
		d = fabs(mid[j] - out[j]);
		eps = d > eps ? d : eps;
	}
	return eps;
}
#endif

double
rk_row_sum(const double *row, long i, long n)
{
	/* The seed's N*N, an int: the same value for N <= 46340. */
	const double nn = (double)((long long)n * n);
	double s = 0.0;
	long j;

	for (j = 0; j < n; j++)
		s += row[j] * (i + 1) * (j + 1) / nn;
	return s;
}

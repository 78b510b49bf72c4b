/*
 * progress: rate, ETA and the words of a progress line, shared by the
 * CLI's watch and waits (the status page does the same in its script).
 *
 * A rate is measured over a sliding window of (time, count) samples, so
 * that it follows the batch's recent pace rather than its whole history;
 * before the window holds enough, callers fall back to the average.
 */
#ifndef FT_PROGRESS_H
#define FT_PROGRESS_H

#include <stddef.h>

#define FT_RATE_SAMPLES 64

struct ft_rate {
	double t[FT_RATE_SAMPLES];	/* monotonic seconds, oldest first */
	double v[FT_RATE_SAMPLES];	/* the count then */
	int n;
	double window;			/* seconds the rate is measured over */
};

/* Empty, measuring over WINDOW seconds. */
void ft_rate_init(struct ft_rate *r, double window);
/* At time T, the count was V (a count that went down starts afresh). */
void ft_rate_add(struct ft_rate *r, double t, double v);
/* Counts per second over the window, or -1 while under half a second of
 * samples. */
double ft_rate_get(const struct ft_rate *r);

/* Where a batch is. */
struct ft_progress {
	long long total;
	long long done;			/* ended, ok or failed */
	long long failed;
	double elapsed;			/* seconds since it started */
	int finished;
};

/* RATE (per second; < 0: unknown, then the average is used) and the
 * seconds left at that rate (< 0: unknown), for P. */
double ft_progress_rate(const struct ft_progress *p, double rate);
double ft_progress_eta(const struct ft_progress *p, double rate);
/* "520/1000 52%, 2 failed, 250/s, ETA 2s" (", in 4.0s" once finished). */
void ft_progress_text(const struct ft_progress *p, double rate, char *out,
		      size_t n);

/* Seconds as "0.4s", "12s", "3m07s", "2h05m", "3d04h". */
void ft_fmt_secs(double s, char *out, size_t n);
/* A count or rate as "950", "12.3k", "4.56M". */
void ft_fmt_count(double v, char *out, size_t n);
/* A bar of WIDTH cells, brackets included: "[#####.....]". */
void ft_fmt_bar(double frac, int width, char *out, size_t n);

#endif

/* progress: rate, ETA and progress lines (see progress.h). */
#include "progress.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

void
ft_rate_init(struct ft_rate *r, double window)
{
	memset(r, 0, sizeof(*r));
	r->window = window;
}

/* Drop the oldest sample. */
static void
shift(struct ft_rate *r)
{
	memmove(r->t, r->t + 1, (size_t)(r->n - 1) * sizeof(*r->t));
	memmove(r->v, r->v + 1, (size_t)(r->n - 1) * sizeof(*r->v));
	r->n--;
}

void
ft_rate_add(struct ft_rate *r, double t, double v)
{
	if (r->n > 0 && (v < r->v[r->n - 1] || t < r->t[r->n - 1]))
		r->n = 0;
	/* Keep one sample older than the window: the rate spans all of it. */
	while (r->n >= 2 && t - r->t[1] > r->window)
		shift(r);
	if (r->n == FT_RATE_SAMPLES)
		shift(r);
	r->t[r->n] = t;
	r->v[r->n] = v;
	r->n++;
}

double
ft_rate_get(const struct ft_rate *r)
{
	double span;

	if (r->n < 2)
		return -1;
	span = r->t[r->n - 1] - r->t[0];
	if (span < 0.5)
		return -1;
	return (r->v[r->n - 1] - r->v[0]) / span;
}

double
ft_progress_rate(const struct ft_progress *p, double rate)
{
	if (rate >= 0)
		return rate;
	return p->elapsed > 0 ? (double)p->done / p->elapsed : -1;
}

double
ft_progress_eta(const struct ft_progress *p, double rate)
{
	rate = ft_progress_rate(p, rate);
	if (p->finished || p->done >= p->total)
		return 0;
	if (rate <= 0)
		return -1;
	return (double)(p->total - p->done) / rate;
}

void
ft_progress_text(const struct ft_progress *p, double rate, char *out,
		 size_t n)
{
	char r[32] = "?", t[32] = "?", failed[48] = "";
	double pct = p->total > 0 ? 100.0 * (double)p->done /
			(double)p->total : 0;
	double eta = ft_progress_eta(p, rate);

	rate = ft_progress_rate(p, rate);
	if (rate >= 0)
		ft_fmt_count(rate, r, sizeof(r));
	if (p->failed)
		snprintf(failed, sizeof(failed), ", %lld failed", p->failed);
	if (p->finished) {
		ft_fmt_secs(p->elapsed, t, sizeof(t));
		snprintf(out, n, "%lld/%lld %.0f%%%s, in %s", p->done,
			 p->total, floor(pct), failed, t);
		return;
	}
	if (eta >= 0)
		ft_fmt_secs(eta, t, sizeof(t));
	snprintf(out, n, "%lld/%lld %.0f%%%s, %s/s, ETA %s", p->done,
		 p->total, floor(pct), failed, r, t);
}

void
ft_fmt_secs(double s, char *out, size_t n)
{
	long long v;

	if (!(s >= 0))
		s = 0;
	if (s < 10) {
		snprintf(out, n, "%.1fs", s);
		return;
	}
	v = llround(s);
	if (v < 60)
		snprintf(out, n, "%llds", v);
	else if (v < 3600)
		snprintf(out, n, "%lldm%02llds", v / 60, v % 60);
	else if (v < 86400)
		snprintf(out, n, "%lldh%02lldm", v / 3600, v % 3600 / 60);
	else
		snprintf(out, n, "%lldd%02lldh", v / 86400, v % 86400 / 3600);
}

void
ft_fmt_count(double v, char *out, size_t n)
{
	if (v < 1000)
		snprintf(out, n, v < 10 && v != floor(v) ? "%.1f" : "%.0f", v);
	else if (v < 1e6)
		snprintf(out, n, "%.1fk", v / 1e3);
	else if (v < 1e9)
		snprintf(out, n, "%.2fM", v / 1e6);
	else
		snprintf(out, n, "%.2fG", v / 1e9);
}

void
ft_fmt_bar(double frac, int width, char *out, size_t n)
{
	int inner = width - 2, full, i;

	if (inner < 1 || (size_t)width >= n) {
		if (n)
			out[0] = '\0';
		return;
	}
	if (!(frac >= 0))
		frac = 0;
	full = (int)floor(fmin(frac, 1) * inner);
	out[0] = '[';
	for (i = 0; i < inner; i++)
		out[1 + i] = i < full ? '#' : '.';
	out[width - 1] = ']';
	out[width] = '\0';
}

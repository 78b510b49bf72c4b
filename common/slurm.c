/* slurm: the allocation's node list and tasks (see slurm.h). */
#include "slurm.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util.h"

#define NAMES_MAX 65536		/* more hosts than any allocation has */

struct names {
	char **v;
	int n;
};

static int
add(struct names *a, char *s)
{
	if (a->n >= NAMES_MAX) {
		free(s);
		return -1;
	}
	a->v = ft_realloc(a->v, (size_t)(a->n + 2) * sizeof(char *));
	a->v[a->n++] = s;
	a->v[a->n] = NULL;
	return 0;
}

/* One range "A" or "A-B" of bracket text R (its digits keep their
 * zero padding) after PREFIX.  0 or -1. */
static int
add_range(struct names *a, const char *prefix, size_t plen, const char *r,
	  size_t rlen)
{
	char buf[64], *end;
	const char *dash = memchr(r, '-', rlen);
	size_t width = dash ? (size_t)(dash - r) : rlen;
	long lo, hi, i;

	if (rlen == 0 || rlen >= sizeof(buf))
		return -1;
	memcpy(buf, r, rlen);
	buf[rlen] = '\0';
	lo = strtol(buf, &end, 10);
	hi = lo;
	if (end == buf || (*end != '\0' && *end != '-'))
		return -1;
	if (*end == '-') {
		hi = strtol(end + 1, &end, 10);
		if (*end != '\0' || hi < lo)
			return -1;
	}
	for (i = lo; i <= hi; i++)
		if (add(a, ft_asprintf("%.*s%0*ld", (int)plen, prefix,
				       (int)width, i)) == -1)
			return -1;
	return 0;
}

/* One item "name" or "prefix[r1,r2-r3]" of length LEN.  0 or -1. */
static int
add_item(struct names *a, const char *s, size_t len)
{
	const char *open = memchr(s, '[', len), *p, *comma;
	const char *close = open ? memchr(open, ']', len - (size_t)(open - s))
				 : NULL;

	if (len == 0)
		return -1;
	if (open == NULL)
		return add(a, ft_asprintf("%.*s", (int)len, s));
	if (close == NULL || close != s + len - 1)
		return -1;	/* a suffix after "]" is not supported */
	for (p = open + 1; p < close; p = comma + 1) {
		comma = memchr(p, ',', (size_t)(close - p));
		if (comma == NULL)
			comma = close;
		if (add_range(a, s, (size_t)(open - s), p,
			      (size_t)(comma - p)) == -1)
			return -1;
	}
	return 0;
}

int
slurm_hostlist(const char *list, char ***names, char *err, size_t n)
{
	struct names a = { 0 };
	const char *s = list, *p;
	int depth;

	*names = NULL;
	while (*s) {
		/* An item ends at a comma outside brackets. */
		for (p = s, depth = 0; *p && (*p != ',' || depth); p++)
			depth += *p == '[' ? 1 : *p == ']' ? -1 : 0;
		if (add_item(&a, s, (size_t)(p - s)) == -1) {
			snprintf(err, n, "cannot read the node list \"%s\"",
				 list);
			slurm_names_free(a.v);
			return -1;
		}
		s = *p ? p + 1 : p;
	}
	if (a.n == 0) {
		snprintf(err, n, "the node list is empty");
		return -1;
	}
	*names = a.v;
	return a.n;
}

int
slurm_tasks(const char *tpn, int *counts, int n, char *err, size_t len)
{
	const char *s = tpn;
	char *end;
	long c, times;
	int k = 0;

	while (*s) {
		c = strtol(s, &end, 10);
		times = 1;
		if (end == s || c < 1)
			goto bad;
		if (strncmp(end, "(x", 2) == 0) {
			times = strtol(end + 2, &end, 10);
			if (times < 1 || *end != ')')
				goto bad;
			end++;
		}
		while (times-- > 0) {
			if (k >= n)
				goto bad;
			counts[k++] = (int)c;
		}
		if (*end == ',')
			end++;
		else if (*end != '\0')
			goto bad;
		s = end;
	}
	if (k == n)
		return 0;
bad:
	snprintf(err, len, "SLURM_TASKS_PER_NODE \"%s\" does not give the "
		 "tasks of %d nodes", tpn, n);
	return -1;
}

/* The count of the gpu GRES in TRES ("gres/gpu:2", "gres/gpu:t:2",
 * comma-separated among others), 0 when none, -1 when malformed. */
static long
tres_gpus(const char *tres)
{
	const char *p = strstr(tres, "gpu");
	const char *end;
	char *e;
	long c;

	if (p == NULL)
		return 0;
	end = strchr(p, ',');
	if (end == NULL)
		end = p + strlen(p);
	while (end > p && end[-1] != ':')
		end--;
	if (end == p)
		return 1;	/* "gres/gpu": one */
	c = strtol(end, &e, 10);
	return e == end || (*e != '\0' && *e != ',') || c < 0 ? -1 : c;
}

int
slurm_gpus(const char *job_gpus, const char *gpus_on_node, const char *tres,
	   char ***ids, char *err, size_t len)
{
	struct names a = { 0 };
	long c = 0, i;
	char id[24], *e;

	*ids = NULL;
	if (job_gpus && *job_gpus) {
		const char *s = job_gpus;

		while (*s) {
			size_t k = strcspn(s, ",");

			if (k == 0 || k >= sizeof(id) || add(&a, ft_asprintf("%.*s", (int)k, s)) == -1)
				goto bad;
			s += k + (s[k] == ',');
		}
		*ids = a.v;
		return a.n;
	}
	if (gpus_on_node && *gpus_on_node) {
		c = strtol(gpus_on_node, &e, 10);
		if (e == gpus_on_node || *e != '\0' || c < 0)
			goto bad;
	} else if (tres && (c = tres_gpus(tres)) < 0) {
		goto bad;
	}
	for (i = 0; i < c && i < 64; i++) {
		snprintf(id, sizeof(id), "%ld", i);
		if (add(&a, ft_strdup(id)) == -1)
			goto bad;
	}
	*ids = a.v;
	return a.n;
bad:
	slurm_names_free(a.v);
	snprintf(err, len, "cannot read the GPUs of the allocation (%s)",
		 job_gpus && *job_gpus ? job_gpus :
		 gpus_on_node && *gpus_on_node ? gpus_on_node : tres);
	return -1;
}

void
slurm_names_free(char **names)
{
	int i;

	for (i = 0; names && names[i]; i++)
		free(names[i]);
	free(names);
}

const char *
slurm_signal_reason(int signum, char *buf, size_t n)
{
	const char *job = getenv("SLURM_JOB_ID");

	if (signum == SIGTERM && job && *job)
		snprintf(buf, n, "SIGTERM: the end of Slurm job %.32s", job);
	else
		snprintf(buf, n, "signal %d", signum);
	return buf;
}

int
slurm_parse_time(const char *s, double *t)
{
	struct tm tm;
	const char *end;
	time_t v;

	memset(&tm, 0, sizeof(tm));
	end = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
	if (end == NULL || end[strspn(end, " \t\r\n")] != '\0')
		return -1;
	tm.tm_isdst = -1;
	if ((v = mktime(&tm)) == (time_t)-1)
		return -1;
	*t = (double)v;
	return 0;
}

double
slurm_job_end(const char *jobid, double *start)
{
	char out[128], *argv[] = { "squeue", "-h", "-j", (char *)jobid, "-o",
				   "%e %S", NULL }, *sp;
	double t = 0, s = 0;

	if (start)
		*start = 0;
	if (ft_run_capture(argv, 5.0, out, sizeof(out)) != 0 ||
	    (sp = strchr(out, ' ')) == NULL)
		return 0;
	*sp++ = '\0';
	if (slurm_parse_time(out, &t) == -1)
		return 0;
	if (start && slurm_parse_time(sp, &s) == 0)
		*start = s;
	return t;
}

int
slurm_parse_jobid(const char *out, char *id, size_t n)
{
	const char *line = out;

	while (line && *line) {
		size_t d = strspn(line, "0123456789");
		const char *next = strchr(line, '\n');

		if (d > 0 && d < n && d < 32 &&
		    (line[d] == '\0' || line[d] == '\n' || line[d] == ';' ||
		     line[d] == '\r')) {
			memcpy(id, line, d);
			id[d] = '\0';
			return 0;
		}
		line = next ? next + 1 : NULL;
	}
	return -1;
}

/* The next '|'-separated field of *P (up to END) into OUT.  0 or -1. */
static int
field(const char **p, const char *end, char *out, size_t n)
{
	const char *bar = memchr(*p, '|', (size_t)(end - *p));
	const char *stop = bar ? bar : end;
	size_t len = (size_t)(stop - *p);

	if (len >= n)
		return -1;
	memcpy(out, *p, len);
	out[len] = '\0';
	*p = bar ? bar + 1 : end;
	return bar ? 0 : 1;
}

int
slurm_parse_squeue(const char *line, size_t len, struct slurm_job *j)
{
	const char *p = line, *end = line + len;
	char when[64];

	while (end > p && (end[-1] == '\n' || end[-1] == '\r' ||
			   end[-1] == ' '))
		end--;
	memset(j, 0, sizeof(*j));
	if (field(&p, end, j->id, sizeof(j->id)) != 0 ||
	    field(&p, end, j->state, sizeof(j->state)) != 0 ||
	    field(&p, end, when, sizeof(when)) != 0 ||
	    field(&p, end, j->name, sizeof(j->name)) != 0 ||
	    field(&p, end, j->nodes, sizeof(j->nodes)) != 1 ||
	    j->id[0] == '\0' || strspn(j->id, "0123456789_") != strlen(j->id) ||
	    j->state[0] == '\0')
		return -1;
	if (slurm_parse_time(when, &j->end) == -1)
		j->end = 0;
	return 0;
}

int
slurm_state_ended(const char *state)
{
	static const char *const live[] = {
		"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED",
		"REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESIZING",
		"SIGNALING", "STAGE_OUT", "STOPPED", "RESV_DEL_HOLD", NULL,
	};
	int i;

	for (i = 0; live[i]; i++)
		if (strcmp(state, live[i]) == 0)
			return 0;
	return 1;
}

int
slurm_state_running(const char *state)
{
	return strcmp(state, "RUNNING") == 0 ||
	       strcmp(state, "COMPLETING") == 0 ||
	       strcmp(state, "SIGNALING") == 0 ||
	       strcmp(state, "STAGE_OUT") == 0;
}

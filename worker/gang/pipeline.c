/*
 * pipeline: seed 003's long message across a grid of nodes, pipelined in
 * chunks over two link-disjoint routes, as a gang job (job object:
 * pipe_job.h; grid, routes and model: pipe_route.h).
 *
 *   step 0  calibration: the source times round trips of one hop to its
 *           first neighbour (the shortest of 21 each): 1 byte gives the
 *           model's Ts, one part and four parts (a part of at least 256
 *           KiB) give Tb by their slope; and 1 byte to the far corner, the
 *           flight of the final acknowledgement
 *   step 1  the transfer: every node posts its receives and tells the
 *           source it is ready; the source starts the clock and sends all
 *           its chunks at once; an inner node forwards each chunk as soon
 *           as it has it (store_forward: once it has its whole part); the
 *           far corner checks every byte and acknowledges; the source
 *           stops the clock and subtracts the acknowledgement's flight
 *
 * Every exchange is nonblocking and waited on through gang_wait, so a rank
 * that dies fails the job at once (the master re-runs it): the pipeline
 * does not route around a dead node.  The far corner keeps what it
 * received and writes it to "output" when the master asks.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gang.h"
#include "gang_data.h"
#include "gang_plugin.h"
#include "gang_req.h"
#include "pipe_job.h"
#include "pipe_route.h"
#include "util.h"

#define REPS 21			/* round trips per calibration series */
#define CAL_MIN_BYTES (256 * 1024)

enum { K_PING = 1, K_READY, K_CHUNK, K_ACK };

#define TOUCH_SLICE (1u << 20)	/* bytes touched between polls */
enum pipe_rc { P_OK = 0, P_STOP, P_FAIL };

struct pipe {
	struct gang *g;
	struct pipe_params p;
	int me, route, hop, last;	/* last: the far corner's rank */
	struct gang_reqs rq;
	unsigned char *data;		/* source: sent; far corner: received */
	double ts, tb, direct;		/* calibration, seconds */
	double seconds;			/* the transfer */
	int verified;
	char why[256];
};

/* gang_wait as a phase outcome: any death fails the job. */
static enum pipe_rc
p_wait(struct pipe *pp, unsigned flags)
{
	int rc = gang_wait(pp->g, &pp->rq, flags | GANG_WAIT_ANY_DEATH, 0);

	if (rc == GANG_OK) {
		if (pp->rq.pending == 0)
			gang_reqs_clear(&pp->rq);
		return P_OK;
	}
	gang_abandon(pp->g, &pp->rq);
	if (rc == GANG_STOP)
		return P_STOP;
	if (rc == GANG_ERR)
		snprintf(pp->why, sizeof(pp->why), "MPI error between nodes");
	else
		snprintf(pp->why, sizeof(pp->why), "a node of the grid died "
			 "(notice %u): the transfer cannot go on",
			 gang_epoch(pp->g));
	return P_FAIL;
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* One round trip of N bytes with PEER (client side), its time in *RTT. */
static enum pipe_rc
round_trip(struct pipe *pp, int peer, int series, unsigned char *buf,
	   int n, double *rtt)
{
	int tag = gang_tag(0, K_PING, series);
	double t0 = ft_now();
	enum pipe_rc rc;

	gang_irecv(pp->g, &pp->rq, buf + n, n, MPI_BYTE, peer, tag);
	gang_isend(pp->g, &pp->rq, buf, n, MPI_BYTE, peer, tag);
	rc = p_wait(pp, 0);
	*rtt = ft_now() - t0;
	return rc;
}

/* Shortest round trip of N bytes with PEER over REPS tries, into *RTT
 * (the cost of the path itself; longer ones waited for a core). */
static enum pipe_rc
ping(struct pipe *pp, int peer, int series, int n, double *rtt)
{
	unsigned char *buf = ft_calloc(2, (size_t)n);
	double t[REPS];
	enum pipe_rc rc = P_OK;
	int i;

	for (i = 0; i < REPS && rc == P_OK; i++)
		rc = round_trip(pp, peer, series, buf, n, &t[i]);
	qsort(t, REPS, sizeof(double), cmp_double);
	*rtt = t[0];
	if (rc == P_OK)
		free(buf);
	return rc;
}

/* Answer REPS round trips of N bytes from the source. */
static enum pipe_rc
echo(struct pipe *pp, int series, int n)
{
	unsigned char *buf = ft_malloc((size_t)n);
	int tag = gang_tag(0, K_PING, series), i;
	enum pipe_rc rc = P_OK;

	for (i = 0; i < REPS && rc == P_OK; i++) {
		gang_irecv(pp->g, &pp->rq, buf, n, MPI_BYTE, 0, tag);
		if ((rc = p_wait(pp, 0)) != P_OK)
			break;
		gang_isend(pp->g, &pp->rq, buf, n, MPI_BYTE, 0, tag);
		rc = p_wait(pp, 0);
	}
	if (rc == P_OK)
		free(buf);
	return rc;
}

/* Bytes of the calibration's long message: one part (chunk, or route's
 * share unpipelined), at least CAL_MIN_BYTES when the job has them, so
 * that the time per byte stands out of the noise. */
static int
unit_bytes(const struct pipe *pp)
{
	uint64_t u = pp->p.store_forward ? pp->p.bytes / pp->p.grid.routes
					 : pp->p.bytes / pp->p.chunks;

	if (u < CAL_MIN_BYTES)
		u = pp->p.bytes < CAL_MIN_BYTES ? pp->p.bytes : CAL_MIN_BYTES;
	return u < 1 ? 1 : (int)u;
}

/* The calibration series: (peer, bytes) round trips, in this order.  */
static void
series(const struct pipe *pp, int k, int *peer, int *n)
{
	int c = unit_bytes(pp);

	*peer = k < 3 ? pipe_rank(&pp->p.grid, 0, 1) : pp->last;
	*n = k == 1 ? c : k == 2 ? 4 * c : 1;
}

/* Step 0: Ts and Tb of a hop (Tb from the slope between one and four
 * parts, so that the fixed costs of waking up cancel), the direct flight
 * to the far corner. */
static enum pipe_rc
calibrate(struct pipe *pp)
{
	double rtt[4] = { 0, 0, 0, 0 };
	enum pipe_rc rc = P_OK;
	int k, peer, n, c = unit_bytes(pp);

	if (gang_step(pp->g, 0) == GANG_STOP)
		return P_STOP;
	for (k = 0; k < 4 && rc == P_OK; k++) {
		series(pp, k, &peer, &n);
		if (pp->me == 0)
			rc = ping(pp, peer, k, n, &rtt[k]);
		else if (pp->me == peer)
			rc = echo(pp, k, n);
	}
	pp->ts = rtt[0] / 2;
	pp->tb = rtt[2] > rtt[1] ? (rtt[2] - rtt[1]) / 2 / (3.0 * c) : 0;
	pp->direct = rtt[3] / 2;
	return rc;
}

/* The parts this node handles: chunk indices (pipelined) or part indices
 * (unpipelined) of ROUTE, into OUT; their count. */
static int
parts_of(const struct pipe *pp, int route, int *out)
{
	int n = 0, c;

	if (pp->p.store_forward) {
		out[0] = route;
		return 1;
	}
	for (c = route; c < pp->p.chunks; c += pp->p.grid.routes)
		out[n++] = c;
	return n;
}

/* Byte range of part C. */
static void
part_range(const struct pipe *pp, int c, uint64_t *off, uint64_t *len)
{
	if (pp->p.store_forward)
		pipe_part(pp->p.bytes, pp->p.grid.routes, c, off, len);
	else
		pipe_part(pp->p.bytes, pp->p.chunks, c, off, len);
}

/* Source: wait until every node is ready, send every part, wait for the
 * far corner's acknowledgement. */
static enum pipe_rc
send_all(struct pipe *pp)
{
	int *parts = ft_malloc(pp->p.chunks * sizeof(int)), n, r, i;
	unsigned char *ready = ft_calloc(pp->p.grid.nranks, 1), ack = 0;
	uint64_t off, len;
	enum pipe_rc rc;
	double t0;

	for (r = 1; r < pp->p.grid.nranks; r++)
		gang_irecv(pp->g, &pp->rq, &ready[r], 1, MPI_BYTE, r,
			   gang_tag(0, K_READY, 0));
	if ((rc = p_wait(pp, 0)) != P_OK)
		return rc;
	t0 = ft_now();
	for (r = 0; r < pp->p.grid.routes; r++) {
		n = parts_of(pp, r, parts);
		for (i = 0; i < n; i++) {
			part_range(pp, parts[i], &off, &len);
			gang_isend(pp->g, &pp->rq, pp->data + off, (int)len,
				   MPI_BYTE, pipe_rank(&pp->p.grid, r, 1),
				   gang_tag(0, K_CHUNK, parts[i]));
		}
	}
	/* The far corner says "all here" at once, then whether the bytes
	 * are right once it has checked them: the check is not timed. */
	gang_irecv(pp->g, &pp->rq, &ack, 1, MPI_BYTE, pp->last,
		   gang_tag(0, K_ACK, 0));
	if ((rc = p_wait(pp, 0)) != P_OK)
		return rc;
	pp->seconds = ft_now() - t0 - pp->direct;
	gang_irecv(pp->g, &pp->rq, &ack, 1, MPI_BYTE, pp->last,
		   gang_tag(0, K_ACK, 1));
	if ((rc = p_wait(pp, 0)) != P_OK)
		return rc;
	pp->verified = ack;
	free(parts);
	return P_OK;
}

/* The length of the slice at OFF of N bytes. */
static uint64_t
slice_at(uint64_t n, uint64_t off)
{
	return n - off < TOUCH_SLICE ? n - off : TOUCH_SLICE;
}

/* N bytes whose pages are already in memory: the transfer is timed,
 * not the first touch of the buffers it lands in.  Touched a slice at a
 * time, the master served between slices (15 ranks touching 64 MiB each
 * on 2 cores missed pongs otherwise). */
static unsigned char *
touched(struct pipe *pp, uint64_t n)
{
	unsigned char *b = ft_malloc(n);
	uint64_t off, len;

	for (off = 0; off < n; off += len) {
		len = slice_at(n, off);
		memset(b + off, 0, len);
		gang_poll(pp->g);
	}
	return b;
}

/* The message into OUT, a slice at a time, the master served between
 * slices (generating 64 MiB takes about a second of CPU here). */
static enum pipe_rc
load(struct pipe *pp, unsigned char *out)
{
	uint64_t off, len;

	for (off = 0; off < pp->p.bytes; off += len) {
		len = slice_at(pp->p.bytes, off);
		if (pipe_load(&pp->p, off, out + off, len, pp->why,
			      sizeof(pp->why)) == -1)
			return P_FAIL;
		if (gang_poll(pp->g) == GANG_STOP)
			return P_STOP;
	}
	return P_OK;
}

/* Far corner: are the received bytes the message?  Into pp->verified,
 * compared a slice at a time, the master served between slices. */
static enum pipe_rc
check(struct pipe *pp)
{
	unsigned char *want = ft_malloc(TOUCH_SLICE);
	enum pipe_rc rc = P_OK;
	uint64_t off, len;

	pp->verified = 1;
	for (off = 0; off < pp->p.bytes && rc == P_OK; off += len) {
		len = slice_at(pp->p.bytes, off);
		if (pipe_load(&pp->p, off, want, len, pp->why,
			      sizeof(pp->why)) == -1)
			rc = P_FAIL;
		else if (memcmp(want, pp->data + off, len) != 0)
			pp->verified = 0;
		if (rc == P_OK && gang_poll(pp->g) == GANG_STOP)
			rc = P_STOP;
	}
	free(want);
	return rc;
}

/* Inner node: receive the route's parts from the previous node and send
 * each on as soon as it is complete, in order. */
static enum pipe_rc
forward(struct pipe *pp, unsigned char *buf)
{
	int *parts = ft_malloc(pp->p.chunks * sizeof(int)), *ri, n, i, next = 0;
	int prev = pipe_rank(&pp->p.grid, pp->route, pp->hop - 1);
	int succ = pipe_rank(&pp->p.grid, pp->route, pp->hop + 1);
	uint64_t off, len;
	enum pipe_rc rc = P_OK;

	n = parts_of(pp, pp->route, parts);
	ri = ft_malloc(n * sizeof(int));
	for (i = 0; i < n; i++) {
		part_range(pp, parts[i], &off, &len);
		ri[i] = gang_irecv(pp->g, &pp->rq, buf + off, (int)len,
				   MPI_BYTE, prev,
				   gang_tag(0, K_CHUNK, parts[i]));
	}
	gang_isend(pp->g, &pp->rq, ft_calloc(1, 1), 1, MPI_BYTE, 0,
		   gang_tag(0, K_READY, 0));
	while (rc == P_OK && next < n) {
		while (next < n && pp->rq.v[ri[next]].done) {
			part_range(pp, parts[next], &off, &len);
			gang_isend(pp->g, &pp->rq, buf + off, (int)len, MPI_BYTE,
				   succ, gang_tag(0, K_CHUNK, parts[next]));
			next++;
		}
		if (next < n)
			rc = p_wait(pp, GANG_WAIT_SOME);
	}
	if (rc == P_OK)
		rc = p_wait(pp, 0);
	free(ri);
	free(parts);
	return rc;
}

/* Far corner: receive every part, check the bytes, acknowledge. */
static enum pipe_rc
receive_all(struct pipe *pp)
{
	int *parts = ft_malloc(pp->p.chunks * sizeof(int)), n, r, i;
	unsigned char *ack = ft_calloc(1, 3);
	uint64_t off, len;
	enum pipe_rc rc;

	pp->data = touched(pp, pp->p.bytes);
	for (r = 0; r < pp->p.grid.routes; r++) {
		n = parts_of(pp, r, parts);
		for (i = 0; i < n; i++) {
			part_range(pp, parts[i], &off, &len);
			gang_irecv(pp->g, &pp->rq, pp->data + off, (int)len,
				   MPI_BYTE, pipe_rank(&pp->p.grid, r,
						       pp->p.grid.hops - 1),
				   gang_tag(0, K_CHUNK, parts[i]));
		}
	}
	gang_isend(pp->g, &pp->rq, ack + 1, 1, MPI_BYTE, 0,
		   gang_tag(0, K_READY, 0));
	if ((rc = p_wait(pp, 0)) != P_OK)
		return rc;
	gang_isend(pp->g, &pp->rq, ack + 2, 1, MPI_BYTE, 0,
		   gang_tag(0, K_ACK, 0));
	if ((rc = check(pp)) != P_OK)
		return rc;
	ack[0] = (unsigned char)pp->verified;
	gang_isend(pp->g, &pp->rq, ack, 1, MPI_BYTE, 0, gang_tag(0, K_ACK, 1));
	free(parts);
	return p_wait(pp, 0);
}

/* Step 1: this node's part of the transfer. */
static enum pipe_rc
transfer(struct pipe *pp)
{
	unsigned char *buf;
	enum pipe_rc rc;

	if (gang_step(pp->g, 1) == GANG_STOP)
		return P_STOP;
	if (pp->me == 0)
		return send_all(pp);
	if (pp->me == pp->last)
		return receive_all(pp);
	buf = touched(pp, pp->p.bytes);
	rc = forward(pp, buf);
	if (rc == P_OK)
		free(buf);	/* else abandoned requests may still hold it */
	return rc;
}

/* The source's figures, as a JSON object (a new string). */
static char *
figures(const struct pipe *pp)
{
	const struct pipe_grid *g = &pp->p.grid;
	double model = pp->p.store_forward
		? pipe_model_store_forward(g, pp->p.bytes, pp->ts, pp->tb)
		: pipe_model_pipelined(g, pp->p.bytes, pp->p.chunks, pp->ts,
				       pp->tb);

	return ft_asprintf(
		"{\"mode\": \"%s\", \"width\": %d, \"height\": %d, "
		"\"hops\": %d, \"routes\": %d, \"chunks\": %d, "
		"\"bytes\": %llu, \"seconds\": %.6f, \"bandwidth_MBps\": %.3f, "
		"\"hop_latency_us\": %.3f, \"hop_bandwidth_MBps\": %.3f, "
		"\"model_seconds\": %.6f, \"model_seed_seconds\": %.6f, "
		"\"direct_latency_us\": %.3f, \"verified\": %s}",
		pp->p.store_forward ? "store_forward" : "pipelined", g->w,
		g->h, g->hops, g->routes, pp->p.chunks,
		(unsigned long long)pp->p.bytes, pp->seconds,
		pp->seconds > 0 ? pp->p.bytes / pp->seconds / 1e6 : 0.0,
		pp->ts * 1e6, pp->tb > 0 ? 1 / pp->tb / 1e6 : 0.0, model,
		pipe_model_seed(pp->p.bytes, pp->tb), pp->direct * 1e6,
		pp->verified ? "true" : "false");
}

/* Send this rank's RESULT (RC: how the transfer ended). */
static void
report(struct pipe *pp, enum pipe_rc rc)
{
	int corner = pp->me == pp->last;
	char *json = rc == P_OK && pp->me == 0 ? figures(pp) : ft_strdup("");
	struct gang_result r = {
		.ok = rc == P_OK && (!corner || pp->verified),
		.has_output = rc == P_OK && corner && pp->verified,
		.seconds = pp->seconds, .report = json,
	};

	if (rc == P_OK && corner && !pp->verified)
		snprintf(pp->why, sizeof(pp->why), "the far corner received "
			 "bytes that differ from the input");
	if (r.has_output)
		r.digest = gdata_digest(pp->data, pp->p.bytes);
	r.reason = r.ok ? "" : pp->why;
	r.reason_len = strlen(r.reason);
	r.report_len = strlen(json);
	gang_report(pp->g, &r);
	free(json);
}

/* Serve the master until STOP: the far corner writes on WRITE. */
static void
serve(struct pipe *pp, int has_output)
{
	char why[300];
	int ok;

	for (;;) {
		switch (gang_await(pp->g, gang_epoch(pp->g))) {
		case GANG_WRITE:
			/* on disk before WRITTEN: the task is ok on it */
			ok = has_output && ft_write_file_durable(pp->p.output,
				(const char *)pp->data, pp->p.bytes, 1) == 0;
			snprintf(why, sizeof(why), "%s: %s", pp->p.output,
				 has_output ? strerror(errno) : pp->why);
			gang_written(pp->g, ok, ok ? "" : why);
			break;
		case GANG_EPOCH:
			break;
		default:
			return;
		}
	}
}

/* The plugin's run hook (see gang_plugin.h). */
static int
pipe_run(struct gang *g, const json_t *job, char *err, size_t n)
{
	struct pipe pp;
	enum pipe_rc rc;

	(void)err;
	(void)n;
	memset(&pp, 0, sizeof(pp));
	pp.g = g;
	pipe_params(job, &pp.p);
	pp.me = gang_rank(g);
	pp.last = pp.p.grid.nranks - 1;
	pipe_where(&pp.p.grid, pp.me, &pp.route, &pp.hop);
	gang_reqs_init(&pp.rq);
	gang_set_role(g, GANG_ROLE_ACTIVE);
	rc = P_OK;
	if (pp.me == 0) {
		pp.data = ft_malloc(pp.p.bytes);
		rc = load(&pp, pp.data);
	}
	if (rc == P_OK)
		rc = calibrate(&pp);
	if (rc == P_OK)
		rc = transfer(&pp);
	if (rc == P_STOP)
		return 0;
	report(&pp, rc);
	serve(&pp, rc == P_OK && pp.me == pp.last && pp.verified);
	return 0;
}

FT_GANG_PLUGIN_DEFINE("pipeline", pipe_validate, pipe_size, pipe_run)

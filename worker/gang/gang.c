/* gang: the runtime every rank of a gang links (see gang.h). */
#include "gang.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "util.h"

#define TAG_BITS_NEEDED 0x7fffffff	/* gang_tag() uses 31 bits */
#define NAP_SPIN 100			/* polls before the first sleep */
#define NAP_MIN_US 20
#define NAP_MAX_US 1000
#define PAUSE_SLICE 0.002		/* seconds between polls in a pause */
#define FLUSH_LIMIT 1.0			/* seconds to let the last words out */
#define POLL_BURST 64			/* control messages taken per poll */

/* A message on its way to the master. */
struct out_msg {
	MPI_Request req;
	char *buf;
};

struct gang {
	MPI_Comm parent;		/* intercommunicator to the master */
	MPI_Comm world;
	int rank, size;
	json_t *job;
	uint32_t attempt;
	double silence;			/* seconds */
	double step_delay;		/* seconds */
	double last_heard;		/* ft_now() of the master's last word */
	int started;			/* START received */

	uint32_t epoch;
	unsigned char *dead;		/* [size]: declared dead */

	uint8_t role, phase;
	int32_t step;

	MPI_Request ctl;		/* the standing receive */
	char *ctl_buf;
	struct out_msg *out;
	int nout, capout;
	void **retired;
	int nretired, capretired;

	int stop;
	uint32_t stop_flags;
	int write_asked;
	char why[256];			/* why stop is set */
};

void
gang_nap(struct gang_nap *n)
{
	struct timespec ts;
	long us;

	if (n->idle++ < NAP_SPIN)
		return;
	us = (long)NAP_MIN_US << (n->idle - NAP_SPIN < 6 ? n->idle - NAP_SPIN : 6);
	if (us > NAP_MAX_US)
		us = NAP_MAX_US;
	ts.tv_sec = 0;
	ts.tv_nsec = us * 1000;
	nanosleep(&ts, NULL);
}

void
gang_nap_reset(struct gang_nap *n)
{
	n->idle = 0;
}

int
gang_rank(const struct gang *g)
{
	return g->rank;
}

int
gang_size(const struct gang *g)
{
	return g->size;
}

MPI_Comm
gang_comm(const struct gang *g)
{
	return g->world;
}

const json_t *
gang_job(const struct gang *g)
{
	return g->job;
}

uint32_t
gang_attempt(const struct gang *g)
{
	return g->attempt;
}

uint32_t
gang_epoch(const struct gang *g)
{
	return g->epoch;
}

double
gang_step_delay(const struct gang *g)
{
	return g->step_delay;
}


const char *
gang_stop_reason(const struct gang *g)
{
	return g->stop ? g->why : "";
}

int
gang_is_dead(const struct gang *g, int rank)
{
	return rank >= 0 && rank < g->size && g->dead[rank];
}

int
gang_tag(uint32_t epoch, int kind, int sub)
{
	return (int)((epoch & 0x7ffu) << 20) | (kind & 0xf) << 16 |
	       (sub & 0xffff);
}

/* Stop with the reason FMT. */
static void
set_stop(struct gang *g, const char *fmt, const char *arg)
{
	if (g->stop)
		return;
	g->stop = 1;
	snprintf(g->why, sizeof(g->why), fmt, arg);
}

/* Free the sends to the master that MPI finished. */
static void
out_reap(struct gang *g)
{
	int i = 0, flag;

	while (i < g->nout) {
		flag = 0;
		MPI_Test(&g->out[i].req, &flag, MPI_STATUS_IGNORE);
		if (!flag) {
			i++;
			continue;
		}
		free(g->out[i].buf);
		g->out[i] = g->out[--g->nout];
	}
}

/* Send MSG (taken over) to the master with TAG. */
static void
send_master(struct gang *g, struct ft_buf *msg, int tag)
{
	struct out_msg *o;

	if (g->nout == g->capout) {
		g->capout = g->capout ? 2 * g->capout : 8;
		g->out = ft_realloc(g->out, g->capout * sizeof(*g->out));
	}
	o = &g->out[g->nout];
	o->buf = msg->data ? msg->data : ft_malloc(1);
	if (MPI_Isend(o->buf, (int)msg->len, MPI_BYTE, 0, tag, g->parent,
		      &o->req) != MPI_SUCCESS) {
		free(o->buf);
		set_stop(g, "%s", "cannot send to the master");
	} else {
		g->nout++;
	}
	msg->data = NULL;
	msg->len = msg->cap = 0;
	out_reap(g);
}

/* Tell the master where the rank stands (SEQ: the ping answered, or 0). */
static void
send_status(struct gang *g, uint64_t seq)
{
	struct ft_buf b = { 0 };
	struct gang_status st = {
		.seq = seq, .epoch = g->epoch, .step = g->step,
		.role = g->role, .phase = g->phase,
	};

	gang_put_status(&b, &st);
	send_master(g, &b, seq ? GANG_MSG_PONG : GANG_MSG_PROGRESS);
}

/* START: keep the attempt, the silence limit and the job. */
static void
take_start(struct gang *g, const char *p, int n)
{
	struct gang_start m;
	json_error_t je;
	json_t *delay;

	if (g->started || gang_get_start(p, (size_t)n, &m) == -1 ||
	    !(m.silence > 0)) {
		set_stop(g, "%s", "malformed START from the master");
		return;
	}
	g->job = json_loadb(m.job, m.job_len, JSON_REJECT_DUPLICATES, &je);
	if (g->job == NULL) {
		set_stop(g, "job is not JSON: %s", je.text);
		return;
	}
	if (!json_is_object(g->job)) {
		set_stop(g, "%s", "job is not a JSON object");
		return;
	}
	g->attempt = m.attempt;
	g->silence = m.silence;
	delay = json_object_get(g->job, "step_delay_ms");
	if (json_is_number(delay) && json_number_value(delay) > 0)
		g->step_delay = json_number_value(delay) / 1000.0;
	g->started = 1;
}

/* DEAD: mark every rank it names; a newer epoch replaces the older. */
static void
take_dead(struct gang *g, const char *p, int n)
{
	int *list = ft_malloc(g->size * sizeof(int)), count = 0, i;
	uint32_t epoch;

	if (gang_get_dead(p, (size_t)n, &epoch, list, g->size, &count) == -1) {
		set_stop(g, "%s", "malformed DEAD from the master");
	} else if (epoch > g->epoch) {
		for (i = 0; i < count; i++)
			if (list[i] < g->size)
				g->dead[list[i]] = 1;
		g->epoch = epoch;
	}
	free(list);
}

/* Act on one control message of type TAG (P, N bytes). */
static void
dispatch(struct gang *g, int tag, const char *p, int n)
{
	uint64_t seq;
	uint32_t flags;

	switch (tag) {
	case GANG_MSG_START:
		take_start(g, p, n);
		break;
	case GANG_MSG_PING:
		if (gang_get_u64(p, (size_t)n, &seq) == -1 || seq == 0)
			set_stop(g, "%s", "malformed PING from the master");
		else
			send_status(g, seq);
		break;
	case GANG_MSG_DEAD:
		take_dead(g, p, n);
		break;
	case GANG_MSG_WRITE:
		g->write_asked = 1;
		break;
	case GANG_MSG_STOP:
		if (gang_get_u32(p, (size_t)n, &flags) == -1)
			flags = 0;
		g->stop_flags = flags;
		set_stop(g, "%s", "the master said stop");
		break;
	default:
		set_stop(g, "unexpected message %s from the master",
			 gang_msg_name(tag));
	}
}

/* Post the standing receive for the master's messages. */
static int
post_ctl(struct gang *g)
{
	return MPI_Irecv(g->ctl_buf, GANG_MSG_MAX, MPI_BYTE, 0, MPI_ANY_TAG,
			 g->parent, &g->ctl) == MPI_SUCCESS ? 0 : -1;
}

int
gang_poll(struct gang *g)
{
	MPI_Status st;
	int flag, n, k;

	for (k = 0; k < POLL_BURST && !g->stop; k++) {
		flag = 0;
		if (MPI_Test(&g->ctl, &flag, &st) != MPI_SUCCESS) {
			set_stop(g, "%s", "lost the master");
			break;
		}
		if (!flag)
			break;
		g->last_heard = ft_now();
		MPI_Get_count(&st, MPI_BYTE, &n);
		dispatch(g, st.MPI_TAG, g->ctl_buf, n);
		if (post_ctl(g) == -1)
			set_stop(g, "%s", "lost the master");
	}
	out_reap(g);
	if (g->started && ft_now() - g->last_heard > g->silence)
		set_stop(g, "%s", "the master went silent");
	return g->stop ? GANG_STOP : GANG_OK;
}

/* Say hello: who and where this rank is. */
static void
send_hello(struct gang *g)
{
	struct ft_buf b = { 0 };
	char host[256] = "";
	struct gang_hello h = {
		.version = GANG_PROTO_VERSION, .rank = (uint32_t)g->rank,
		.size = (uint32_t)g->size, .pid = (uint32_t)getpid(),
		.host = host,
	};

	gethostname(host, sizeof(host) - 1);
	h.host_len = strlen(host);
	gang_put_hello(&b, &h);
	send_master(g, &b, GANG_MSG_HELLO);
}

/* Wait for START until DEADLINE.  0, or -1 with ERR. */
static int
await_start(struct gang *g, double deadline, char *err, size_t n)
{
	struct gang_nap nap = { 0 };

	while (!g->started) {
		if (gang_poll(g) == GANG_STOP) {
			snprintf(err, n, "%s", g->why);
			return -1;
		}
		if (ft_now() > deadline) {
			snprintf(err, n, "no START from the master");
			return -1;
		}
		gang_nap(&nap);
	}
	return 0;
}

/* The MPI side of gang_init.  0, or -1 with ERR. */
static int
setup_mpi(struct gang *g, int *argc, char ***argv, char *err, size_t n)
{
	int *ub = NULL, flag = 0;

	if (MPI_Init(argc, argv) != MPI_SUCCESS) {
		snprintf(err, n, "MPI_Init failed");
		return -1;
	}
	MPI_Comm_get_parent(&g->parent);
	if (g->parent == MPI_COMM_NULL) {
		snprintf(err, n, "not started by a master (no parent)");
		return -1;
	}
	g->world = MPI_COMM_WORLD;
	MPI_Comm_set_errhandler(g->world, MPI_ERRORS_RETURN);
	MPI_Comm_set_errhandler(g->parent, MPI_ERRORS_RETURN);
	MPI_Comm_rank(g->world, &g->rank);
	MPI_Comm_size(g->world, &g->size);
	MPI_Comm_get_attr(g->world, MPI_TAG_UB, &ub, &flag);
	if (!flag || *ub < TAG_BITS_NEEDED) {
		snprintf(err, n, "MPI_TAG_UB too small for gang tags");
		return -1;
	}
	if (g->size > GANG_MAX_RANKS) {
		snprintf(err, n, "gang of %d ranks, at most %d", g->size,
			 GANG_MAX_RANKS);
		return -1;
	}
	return 0;
}

struct gang *
gang_init(int *argc, char ***argv, double start_timeout, char *err, size_t n)
{
	struct gang *g = ft_calloc(1, sizeof(*g));

	g->role = GANG_ROLE_SPARE;
	g->phase = GANG_PHASE_START;
	g->step = -1;
	g->silence = start_timeout;
	if (setup_mpi(g, argc, argv, err, n) == -1)
		return NULL;
	g->dead = ft_calloc(g->size, 1);
	g->ctl_buf = ft_malloc(GANG_MSG_MAX);
	if (post_ctl(g) == -1) {
		snprintf(err, n, "cannot receive from the master");
		return NULL;
	}
	g->last_heard = ft_now();
	send_hello(g);
	if (await_start(g, ft_now() + start_timeout, err, n) == -1)
		return NULL;
	return g;
}

void
gang_set_role(struct gang *g, enum gang_role role)
{
	g->role = (uint8_t)role;
}

int
gang_pause(struct gang *g, double seconds)
{
	double end = ft_now() + seconds;

	while (gang_poll(g) == GANG_OK) {
		double left = end - ft_now();

		if (left <= 0)
			return GANG_OK;
		ft_sleep(left < PAUSE_SLICE ? left : PAUSE_SLICE);
	}
	return GANG_STOP;
}

int
gang_step(struct gang *g, int step)
{
	g->phase = GANG_PHASE_STEP;
	g->step = step;
	send_status(g, 0);
	return gang_pause(g, g->step_delay);
}

int
gang_recovering(struct gang *g, uint32_t epoch)
{
	(void)epoch;
	g->phase = GANG_PHASE_RECOVER;
	send_status(g, 0);
	return gang_pause(g, g->step_delay);
}

void
gang_report(struct gang *g, const struct gang_result *r)
{
	struct ft_buf b = { 0 };

	g->phase = GANG_PHASE_DONE;
	gang_put_result(&b, r);
	send_master(g, &b, GANG_MSG_RESULT);
}

int
gang_await(struct gang *g, uint32_t epoch)
{
	struct gang_nap nap = { 0 };

	for (;;) {
		if (gang_poll(g) == GANG_STOP)
			return GANG_STOP;
		if (g->write_asked) {
			g->write_asked = 0;
			return GANG_WRITE;
		}
		if (g->epoch != epoch)
			return GANG_EPOCH;
		gang_nap(&nap);
	}
}

void
gang_written(struct gang *g, int ok, const char *reason)
{
	struct ft_buf b = { 0 };
	struct gang_written w = {
		.ok = (uint8_t)(ok != 0), .reason = reason,
		.reason_len = strlen(reason),
	};

	gang_put_written(&b, &w);
	send_master(g, &b, GANG_MSG_WRITTEN);
}

void
gang_retire(struct gang *g, void *buf)
{
	if (buf == NULL)
		return;
	if (g->nretired == g->capretired) {
		g->capretired = g->capretired ? 2 * g->capretired : 16;
		g->retired = ft_realloc(g->retired,
					g->capretired * sizeof(void *));
	}
	g->retired[g->nretired++] = buf;
}

/* Did any rank die in this gang? */
static int
any_dead(const struct gang *g)
{
	int i;

	for (i = 0; i < g->size; i++)
		if (g->dead[i])
			return 1;
	return 0;
}

void
gang_leave(struct gang *g, int code)
{
	double end = ft_now() + FLUSH_LIMIT;
	struct gang_nap nap = { 0 };

	while (g->nout > 0 && ft_now() < end) {
		out_reap(g);
		gang_nap(&nap);
	}
	fflush(NULL);
	if ((g->stop_flags & GANG_STOP_FINALIZE) && !any_dead(g) &&
	    g->nout == 0) {
		MPI_Cancel(&g->ctl);
		MPI_Request_free(&g->ctl);
		MPI_Finalize();
		exit(code);
	}
	_exit(code);
}

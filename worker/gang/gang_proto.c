/* gang_proto: the messages between the master and the ranks of a gang. */
#include "gang_proto.h"

#include "wire.h"

const char *
gang_msg_name(int type)
{
	static const char *names[] = {
		"invalid", "hello", "start", "ping", "pong", "progress",
		"dead", "result", "write", "written", "stop",
	};

	if (type <= GANG_MSG_INVALID || type >= GANG_MSG_LAST)
		return "invalid";
	return names[type];
}

const char *
gang_role_name(int role)
{
	return role == GANG_ROLE_ACTIVE ? "active" : "spare";
}

const char *
gang_phase_name(int phase)
{
	switch (phase) {
	case GANG_PHASE_START:
		return "start";
	case GANG_PHASE_STEP:
		return "step";
	case GANG_PHASE_RECOVER:
		return "recover";
	case GANG_PHASE_DONE:
		return "done";
	}
	return "unknown";
}

void
gang_put_hello(struct ft_buf *b, const struct gang_hello *m)
{
	wire_put_u32(b, m->version);
	wire_put_u32(b, m->rank);
	wire_put_u32(b, m->size);
	wire_put_u32(b, m->pid);
	wire_put_bytes(b, m->host, m->host_len);
}

int
gang_get_hello(const void *p, size_t n, struct gang_hello *m)
{
	struct wire_r r;

	wire_reader(&r, p, n);
	m->version = wire_get_u32(&r);
	m->rank = wire_get_u32(&r);
	m->size = wire_get_u32(&r);
	m->pid = wire_get_u32(&r);
	m->host = wire_get_bytes(&r, &m->host_len);
	return wire_end(&r);
}

void
gang_put_start(struct ft_buf *b, const struct gang_start *m)
{
	wire_put_u32(b, m->attempt);
	wire_put_f64(b, m->silence);
	wire_put_bytes(b, m->job, m->job_len);
}

int
gang_get_start(const void *p, size_t n, struct gang_start *m)
{
	struct wire_r r;

	wire_reader(&r, p, n);
	m->attempt = wire_get_u32(&r);
	m->silence = wire_get_f64(&r);
	m->job = wire_get_bytes(&r, &m->job_len);
	return wire_end(&r);
}

void
gang_put_u64(struct ft_buf *b, uint64_t v)
{
	wire_put_u64(b, v);
}

int
gang_get_u64(const void *p, size_t n, uint64_t *v)
{
	struct wire_r r;

	wire_reader(&r, p, n);
	*v = wire_get_u64(&r);
	return wire_end(&r);
}

void
gang_put_u32(struct ft_buf *b, uint32_t v)
{
	wire_put_u32(b, v);
}

int
gang_get_u32(const void *p, size_t n, uint32_t *v)
{
	struct wire_r r;

	wire_reader(&r, p, n);
	*v = wire_get_u32(&r);
	return wire_end(&r);
}

void
gang_put_status(struct ft_buf *b, const struct gang_status *m)
{
	wire_put_u64(b, m->seq);
	wire_put_u32(b, m->epoch);
	wire_put_i32(b, m->step);
	wire_put_u8(b, m->role);
	wire_put_u8(b, m->phase);
}

int
gang_get_status(const void *p, size_t n, struct gang_status *m)
{
	struct wire_r r;

	wire_reader(&r, p, n);
	m->seq = wire_get_u64(&r);
	m->epoch = wire_get_u32(&r);
	m->step = wire_get_i32(&r);
	m->role = wire_get_u8(&r);
	m->phase = wire_get_u8(&r);
	return wire_end(&r);
}

void
gang_put_dead(struct ft_buf *b, uint32_t epoch, const int *dead, int n)
{
	int i;

	wire_put_u32(b, epoch);
	wire_put_u32(b, (uint32_t)n);
	for (i = 0; i < n; i++)
		wire_put_u32(b, (uint32_t)dead[i]);
}

int
gang_get_dead(const void *p, size_t n, uint32_t *epoch, int *dead, int max,
	      int *count)
{
	struct wire_r r;
	uint32_t k, i;

	wire_reader(&r, p, n);
	*epoch = wire_get_u32(&r);
	k = wire_get_u32(&r);
	if (r.bad || k > (uint32_t)max)
		return -1;
	for (i = 0; i < k; i++) {
		uint32_t v = wire_get_u32(&r);

		if (v >= GANG_MAX_RANKS)
			return -1;
		dead[i] = (int)v;
	}
	*count = (int)k;
	return wire_end(&r);
}

void
gang_put_result(struct ft_buf *b, const struct gang_result *m)
{
	wire_put_u8(b, m->ok);
	wire_put_u8(b, m->has_output);
	wire_put_u32(b, m->epoch);
	wire_put_u64(b, m->digest);
	wire_put_f64(b, m->seconds);
	wire_put_bytes(b, m->reason, m->reason_len);
	wire_put_bytes(b, m->report, m->report_len);
}

int
gang_get_result(const void *p, size_t n, struct gang_result *m)
{
	struct wire_r r;

	wire_reader(&r, p, n);
	m->ok = wire_get_u8(&r);
	m->has_output = wire_get_u8(&r);
	m->epoch = wire_get_u32(&r);
	m->digest = wire_get_u64(&r);
	m->seconds = wire_get_f64(&r);
	m->reason = wire_get_bytes(&r, &m->reason_len);
	m->report = wire_get_bytes(&r, &m->report_len);
	return wire_end(&r);
}

void
gang_put_written(struct ft_buf *b, const struct gang_written *m)
{
	wire_put_u8(b, m->ok);
	wire_put_bytes(b, m->reason, m->reason_len);
}

int
gang_get_written(const void *p, size_t n, struct gang_written *m)
{
	struct wire_r r;

	wire_reader(&r, p, n);
	m->ok = wire_get_u8(&r);
	m->reason = wire_get_bytes(&r, &m->reason_len);
	return wire_end(&r);
}

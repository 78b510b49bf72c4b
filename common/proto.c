/* proto: the messages between the master and its workers. */
#include "proto.h"

#include <string.h>

#include "wire.h"

const char *
proto_msg_name(int type)
{
	static const char *names[] = {
		"invalid", "hello", "welcome", "assign", "result", "ping",
		"pong", "cancel", "stop", "bye", "relay", "spawn", "kill",
		"exited", "join", "refuse", "leave",
	};

	if (type <= FT_MSG_INVALID || type >= FT_MSG_LAST)
		return "invalid";
	return names[type];
}

void
proto_put_hello(struct ft_buf *b, const struct proto_hello *m)
{
	wire_put_u32(b, m->version);
	wire_put_u32(b, m->slot);
	wire_put_u32(b, m->pid);
	wire_put_u64(b, m->start);
	wire_put_bytes(b, m->host, m->host_len);
	wire_put_bytes(b, m->plugins, m->plugins_len);
	wire_put_u64(b, m->mem);
}

int
proto_get_hello(const void *p, size_t n, struct proto_hello *m)
{
	struct wire_r r;

	wire_reader(&r, p, n);
	m->version = wire_get_u32(&r);
	m->slot = wire_get_u32(&r);
	m->pid = wire_get_u32(&r);
	m->start = wire_get_u64(&r);
	m->host = wire_get_bytes(&r, &m->host_len);
	m->plugins = wire_get_bytes(&r, &m->plugins_len);
	m->mem = wire_get_u64(&r);
	return wire_end(&r);
}

void
proto_put_welcome(struct ft_buf *b, const struct proto_welcome *m)
{
	wire_put_u32(b, m->output_cap);
	wire_put_f64(b, m->master_timeout);
	wire_put_f64(b, m->idle_nap);
	wire_put_bytes(b, m->node, m->node_len);
	wire_put_f64(b, m->heartbeat);
	wire_put_f64(b, m->ping_timeout);
	wire_put_u32(b, m->mem_enforce);
	wire_put_bytes(b, m->out_default, m->out_default_len);
	wire_put_bytes(b, m->err_default, m->err_default_len);
}

int
proto_get_welcome(const void *p, size_t n, struct proto_welcome *m)
{
	struct wire_r r;

	wire_reader(&r, p, n);
	m->output_cap = wire_get_u32(&r);
	m->master_timeout = wire_get_f64(&r);
	m->idle_nap = wire_get_f64(&r);
	m->node = wire_get_bytes(&r, &m->node_len);
	m->heartbeat = wire_get_f64(&r);
	m->ping_timeout = wire_get_f64(&r);
	m->mem_enforce = wire_get_u32(&r);
	m->out_default = wire_get_bytes(&r, &m->out_default_len);
	m->err_default = wire_get_bytes(&r, &m->err_default_len);
	return wire_end(&r);
}

void
proto_put_pong(struct ft_buf *b, const struct proto_pong *m)
{
	wire_put_u64(b, m->seq);
	wire_put_u64(b, m->running);
	wire_put_u32(b, m->queued);
}

int
proto_get_pong(const void *p, size_t n, struct proto_pong *m)
{
	struct wire_r r;

	wire_reader(&r, p, n);
	m->seq = wire_get_u64(&r);
	m->running = wire_get_u64(&r);
	m->queued = wire_get_u32(&r);
	return wire_end(&r);
}

void
proto_put_ping(struct ft_buf *b, uint64_t seq)
{
	wire_put_u64(b, seq);
}

int
proto_get_ping(const void *p, size_t n, uint64_t *seq)
{
	struct wire_r r;

	wire_reader(&r, p, n);
	*seq = wire_get_u64(&r);
	return wire_end(&r);
}

void
proto_put_cancel(struct ft_buf *b, const struct proto_cancel *m)
{
	wire_put_u64(b, m->tid);
	wire_put_u32(b, m->attempt);
}

int
proto_get_cancel(const void *p, size_t n, struct proto_cancel *m)
{
	struct wire_r r;

	wire_reader(&r, p, n);
	m->tid = wire_get_u64(&r);
	m->attempt = wire_get_u32(&r);
	return wire_end(&r);
}

void
proto_put_stop(struct ft_buf *b, uint32_t flags)
{
	wire_put_u32(b, flags);
}

int
proto_get_stop(const void *p, size_t n, uint32_t *flags)
{
	struct wire_r r;

	wire_reader(&r, p, n);
	*flags = wire_get_u32(&r);
	return wire_end(&r);
}

void
proto_put_bye(struct ft_buf *b)
{
	wire_put_u32(b, 0);
}

int
proto_get_bye(const void *p, size_t n)
{
	struct wire_r r;

	wire_reader(&r, p, n);
	(void)wire_get_u32(&r);
	return wire_end(&r);
}

void
proto_put_exited(struct ft_buf *b, const struct proto_exited *m)
{
	wire_put_u32(b, m->hung);
	wire_put_bytes(b, m->reason, m->reason_len);
}

int
proto_get_exited(const void *p, size_t n, struct proto_exited *m)
{
	struct wire_r r;

	wire_reader(&r, p, n);
	m->hung = wire_get_u32(&r);
	m->reason = wire_get_bytes(&r, &m->reason_len);
	return wire_end(&r);
}

void
proto_begin_list(struct ft_buf *b)
{
	b->len = 0;
	wire_put_u32(b, 0);
}

void
proto_set_count(struct ft_buf *b, uint32_t count)
{
	unsigned char x[4] = { count, count >> 8, count >> 16, count >> 24 };

	memcpy(b->data, x, 4);
}

void
proto_put_task(struct ft_buf *b, const struct proto_task *m)
{
	wire_put_u64(b, m->tid);
	wire_put_u32(b, m->attempt);
	wire_put_bytes(b, m->spec, m->spec_len);
	wire_put_u32(b, m->cpus);
	wire_put_bytes(b, m->gpus, m->gpus_len);
	wire_put_bytes(b, m->cpuset, m->cpuset_len);
	wire_put_u32(b, m->batch);
	wire_put_u32(b, m->index);
}

void
proto_put_result(struct ft_buf *b, const struct proto_result *m)
{
	wire_put_u64(b, m->tid);
	wire_put_u32(b, m->attempt);
	wire_put_u8(b, m->ok);
	wire_put_i32(b, m->exit_code);
	wire_put_f64(b, m->seconds);
	wire_put_bytes(b, m->reason, m->reason_len);
	wire_put_bytes(b, m->out, m->out_len);
	wire_put_bytes(b, m->err, m->err_len);
	wire_put_i32(b, m->signal);
	wire_put_bytes(b, m->value, m->value_len);
	wire_put_u8(b, m->interrupted);
	wire_put_f64(b, m->cpu_s);
	wire_put_u64(b, m->max_rss);
	wire_put_bytes(b, m->out_path, m->out_path_len);
	wire_put_bytes(b, m->err_path, m->err_path_len);
}

size_t
proto_result_size(const struct proto_result *m)
{
	return 8 + 4 + 1 + 4 + 8 + 12 + m->reason_len + m->out_len +
	       m->err_len + 4 + 4 + m->value_len + 1 + 8 + 8 + 8 +
	       m->out_path_len + m->err_path_len;
}

void
proto_put_relay(struct ft_buf *b, const struct proto_relay *m)
{
	wire_put_u32(b, m->slot);
	wire_put_u32(b, m->gen);
	wire_put_u32(b, m->tag);
	wire_put_bytes(b, m->p, m->n);
}

size_t
proto_relay_size(size_t n)
{
	return 4 + 4 + 4 + 4 + n;
}

double
proto_slot_silence(double master_silence, double heartbeat)
{
	double least = SLOT_SILENCE_HB * heartbeat;

	return master_silence > least ? master_silence : least;
}

int
proto_iter_init(struct proto_iter *it, const void *p, size_t n)
{
	struct wire_r r;

	wire_reader(&r, p, n);
	it->left = wire_get_u32(&r);
	it->p = p;
	it->len = n;
	it->off = r.off;
	return r.bad ? -1 : 0;
}

/* Shared tail of the iterators: advance past what R read. */
static int
iter_step(struct proto_iter *it, struct wire_r *r)
{
	if (r->bad)
		return -1;
	it->off += r->off;
	it->left--;
	return 1;
}

/* 0 at the end of a well-formed list, -1 if bytes are left over. */
static int
iter_done(const struct proto_iter *it)
{
	return it->off == it->len ? 0 : -1;
}

int
proto_next_task(struct proto_iter *it, struct proto_task *m)
{
	struct wire_r r;

	if (it->left == 0)
		return iter_done(it);
	wire_reader(&r, it->p + it->off, it->len - it->off);
	m->tid = wire_get_u64(&r);
	m->attempt = wire_get_u32(&r);
	m->spec = wire_get_bytes(&r, &m->spec_len);
	m->cpus = wire_get_u32(&r);
	m->gpus = wire_get_bytes(&r, &m->gpus_len);
	m->cpuset = wire_get_bytes(&r, &m->cpuset_len);
	m->batch = wire_get_u32(&r);
	m->index = wire_get_u32(&r);
	return iter_step(it, &r);
}

int
proto_next_result(struct proto_iter *it, struct proto_result *m)
{
	struct wire_r r;

	if (it->left == 0)
		return iter_done(it);
	wire_reader(&r, it->p + it->off, it->len - it->off);
	m->tid = wire_get_u64(&r);
	m->attempt = wire_get_u32(&r);
	m->ok = wire_get_u8(&r);
	m->exit_code = wire_get_i32(&r);
	m->seconds = wire_get_f64(&r);
	m->reason = wire_get_bytes(&r, &m->reason_len);
	m->out = wire_get_bytes(&r, &m->out_len);
	m->err = wire_get_bytes(&r, &m->err_len);
	m->signal = wire_get_i32(&r);
	m->value = wire_get_bytes(&r, &m->value_len);
	m->interrupted = wire_get_u8(&r);
	m->cpu_s = wire_get_f64(&r);
	m->max_rss = wire_get_u64(&r);
	m->out_path = wire_get_bytes(&r, &m->out_path_len);
	m->err_path = wire_get_bytes(&r, &m->err_path_len);
	return iter_step(it, &r);
}

int
proto_next_relay(struct proto_iter *it, struct proto_relay *m)
{
	struct wire_r r;

	if (it->left == 0)
		return iter_done(it);
	wire_reader(&r, it->p + it->off, it->len - it->off);
	m->slot = wire_get_u32(&r);
	m->gen = wire_get_u32(&r);
	m->tag = wire_get_u32(&r);
	m->p = wire_get_bytes(&r, &m->n);
	return iter_step(it, &r);
}

void
proto_put_join(struct ft_buf *b, const struct proto_join *m)
{
	wire_put_u32(b, m->version);
	wire_put_u32(b, m->slots);
	wire_put_u32(b, m->pid);
	wire_put_u64(b, m->start);
	wire_put_bytes(b, m->name, m->name_len);
	wire_put_bytes(b, m->host, m->host_len);
	wire_put_bytes(b, m->gpus, m->gpus_len);
	wire_put_bytes(b, m->alloc, m->alloc_len);
	wire_put_f64(b, m->alloc_end);
	wire_put_u64(b, m->mem);
}

int
proto_get_join(const void *p, size_t n, struct proto_join *m)
{
	struct wire_r r;

	wire_reader(&r, p, n);
	m->version = wire_get_u32(&r);
	if (m->version != FT_PROTO_VERSION)
		return -1;	/* the rest may be laid out otherwise */
	m->slots = wire_get_u32(&r);
	m->pid = wire_get_u32(&r);
	m->start = wire_get_u64(&r);
	m->name = wire_get_bytes(&r, &m->name_len);
	m->host = wire_get_bytes(&r, &m->host_len);
	m->gpus = wire_get_bytes(&r, &m->gpus_len);
	m->alloc = wire_get_bytes(&r, &m->alloc_len);
	m->alloc_end = wire_get_f64(&r);
	m->mem = wire_get_u64(&r);
	return wire_end(&r);
}

void
proto_put_leave(struct ft_buf *b, const struct proto_leave *m)
{
	wire_put_f64(b, m->grace);
	wire_put_bytes(b, m->why, m->why_len);
}

int
proto_get_leave(const void *p, size_t n, struct proto_leave *m)
{
	struct wire_r r;

	wire_reader(&r, p, n);
	m->grace = wire_get_f64(&r);
	m->why = wire_get_bytes(&r, &m->why_len);
	return wire_end(&r);
}

void
proto_put_refuse(struct ft_buf *b, const char *why, size_t len)
{
	wire_put_bytes(b, why, len);
}

int
proto_get_refuse(const void *p, size_t n, const char **why, size_t *len)
{
	struct wire_r r;

	wire_reader(&r, p, n);
	*why = wire_get_bytes(&r, len);
	return wire_end(&r);
}

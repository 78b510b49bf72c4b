/* Unit tests of common/wire.c and common/proto.c: byte layout, round trips
 * of every message, and strict decoding of malformed input. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "proto.h"
#include "util.h"
#include "wire.h"

/* A copy of B's bytes in a buffer of exactly N bytes (so that valgrind and
 * ASan see any read past the end). */
static unsigned char *
exact(const void *p, size_t n)
{
	unsigned char *c = ft_malloc(n ? n : 1);

	memcpy(c, p, n);
	return c;
}

static void
assert_bytes(const char *p, size_t n, const void *want, size_t wn)
{
	assert_int_equal(n, wn);
	if (wn)
		assert_non_null(p);
	assert_memory_equal(p, want, wn);
}

/* ---- wire primitives ---- */

static void
test_wire_layout_little_endian(void **st)
{
	struct ft_buf b = { 0 };
	static const unsigned char want[] = {
		0xab,
		0x04, 0x03, 0x02, 0x01,
		0xfe, 0xff, 0xff, 0xff,
		0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01,
		0x03, 0x00, 0x00, 0x00, 'a', 0x00, 'b',
		0x00, 0x00, 0x00, 0x00,
		0x02, 0x00, 0x00, 0x00, 'h', 'i',
	};

	(void)st;
	wire_put_u8(&b, 0xab);
	wire_put_u32(&b, 0x01020304);
	wire_put_i32(&b, -2);
	wire_put_u64(&b, 0x0102030405060708ULL);
	wire_put_bytes(&b, "a\0b", 3);
	wire_put_bytes(&b, NULL, 0);
	wire_put_str(&b, "hi");
	assert_int_equal(b.len, sizeof(want));
	assert_memory_equal(b.data, want, sizeof(want));
	ft_buf_free(&b);
}

static void
test_wire_round_trip(void **st)
{
	static const double dv[] = { 0.0, -0.0, 1.5, -3.25e-300, 1e308,
				     INFINITY, -INFINITY };
	struct ft_buf b = { 0 };
	struct wire_r r;
	unsigned char bin[256];
	const char *p;
	size_t n, i;

	(void)st;
	for (i = 0; i < sizeof(bin); i++)
		bin[i] = (unsigned char)(255 - i);
	wire_put_u8(&b, 0);
	wire_put_u8(&b, 255);
	wire_put_u32(&b, 0);
	wire_put_u32(&b, UINT32_MAX);
	wire_put_i32(&b, INT32_MIN);
	wire_put_i32(&b, -1);
	wire_put_u64(&b, UINT64_MAX);
	wire_put_u64(&b, 0x8000000000000001ULL);
	for (i = 0; i < FT_ARRAY_LEN(dv); i++)
		wire_put_f64(&b, dv[i]);
	wire_put_f64(&b, NAN);
	wire_put_bytes(&b, bin, sizeof(bin));
	wire_put_str(&b, "");

	wire_reader(&r, b.data, b.len);
	assert_int_equal(wire_get_u8(&r), 0);
	assert_int_equal(wire_get_u8(&r), 255);
	assert_int_equal(wire_get_u32(&r), 0);
	assert_int_equal(wire_get_u32(&r), UINT32_MAX);
	assert_int_equal(wire_get_i32(&r), INT32_MIN);
	assert_int_equal(wire_get_i32(&r), -1);
	assert_true(wire_get_u64(&r) == UINT64_MAX);
	assert_true(wire_get_u64(&r) == 0x8000000000000001ULL);
	for (i = 0; i < FT_ARRAY_LEN(dv); i++) {
		double v = wire_get_f64(&r);

		assert_memory_equal(&v, &dv[i], sizeof(v));
	}
	assert_true(isnan(wire_get_f64(&r)));
	p = wire_get_bytes(&r, &n);
	assert_bytes(p, n, bin, sizeof(bin));
	p = wire_get_bytes(&r, &n);
	assert_non_null(p);
	assert_int_equal(n, 0);
	assert_int_equal(r.bad, 0);
	assert_int_equal(wire_end(&r), 0);
	ft_buf_free(&b);
}

static void
test_wire_short_read_sticks(void **st)
{
	unsigned char m[6] = { 1, 0, 0, 0, 2, 0 };
	struct wire_r r;

	(void)st;
	wire_reader(&r, m, sizeof(m));
	assert_int_equal(wire_get_u32(&r), 1);
	assert_int_equal(wire_get_u32(&r), 0);	/* only 2 bytes left */
	assert_true(r.bad);
	/* A read that would fit still fails: the error sticks. */
	assert_int_equal(wire_get_u8(&r), 0);
	assert_int_equal(wire_end(&r), -1);

	wire_reader(&r, m, sizeof(m));
	(void)wire_get_u64(&r);		/* 6 < 8: the value is undefined */
	assert_true(r.bad);
	assert_int_equal(wire_end(&r), -1);

	wire_reader(&r, m, 0);
	assert_int_equal(wire_end(&r), 0);
	assert_int_equal(wire_get_u8(&r), 0);
	assert_int_equal(wire_end(&r), -1);
}

static void
test_wire_leftover_fails(void **st)
{
	unsigned char m[5] = { 7, 0, 0, 0, 9 };
	struct wire_r r;

	(void)st;
	wire_reader(&r, m, sizeof(m));
	assert_int_equal(wire_get_u32(&r), 7);
	assert_int_equal(r.bad, 0);
	assert_int_equal(wire_end(&r), -1);
	assert_int_equal(wire_get_u8(&r), 9);
	assert_int_equal(wire_end(&r), 0);
}

static void
test_wire_bytes_too_long(void **st)
{
	/* Length prefixes that overrun: by one byte, and by 4 GiB - 1. */
	unsigned char m1[7] = { 4, 0, 0, 0, 'a', 'b', 'c' };
	unsigned char m2[6] = { 0xff, 0xff, 0xff, 0xff, 'a', 'b' };
	struct wire_r r;
	size_t n = 99;

	(void)st;
	wire_reader(&r, m1, sizeof(m1));
	assert_null(wire_get_bytes(&r, &n));
	assert_int_equal(n, 0);
	assert_int_equal(wire_end(&r), -1);
	n = 99;
	wire_reader(&r, m2, sizeof(m2));
	assert_null(wire_get_bytes(&r, &n));
	assert_int_equal(n, 0);
	assert_int_equal(wire_end(&r), -1);
	/* A truncated length prefix. */
	wire_reader(&r, m1, 3);
	assert_null(wire_get_bytes(&r, &n));
	assert_int_equal(wire_end(&r), -1);
}

/* ---- fixed messages ---- */

static const char host[] = "node-1.example";
static const char plugins[] = "exec,sleep,wordcount,relax";

static void
put_hello(struct ft_buf *b)
{
	struct proto_hello h = {
		.version = FT_PROTO_VERSION,
		.slot = 17,
		.pid = 4000000000u,
		.start = 123456789012ULL,
		.host = host,
		.host_len = strlen(host),
		.plugins = plugins,
		.plugins_len = strlen(plugins),
		.mem = 0x123456789aULL,
	};

	proto_put_hello(b, &h);
}

static void
test_hello_round_trip(void **st)
{
	struct ft_buf b = { 0 };
	struct proto_hello h;
	unsigned char *m;

	(void)st;
	put_hello(&b);
	assert_int_equal(b.len, 12 + 8 + 4 + strlen(host) + 4 +
			 strlen(plugins) + 8);
	m = exact(b.data, b.len);
	memset(&h, 0, sizeof(h));
	assert_int_equal(proto_get_hello(m, b.len, &h), 0);
	assert_int_equal(h.version, FT_PROTO_VERSION);
	assert_int_equal(h.slot, 17);
	assert_int_equal(h.pid, 4000000000u);
	assert_true(h.start == 123456789012ULL);
	assert_bytes(h.host, h.host_len, host, strlen(host));
	assert_bytes(h.plugins, h.plugins_len, plugins, strlen(plugins));
	assert_true(h.mem == 0x123456789aULL);
	/* Strings point into the message. */
	assert_true((const unsigned char *)h.host > m &&
		    (const unsigned char *)h.host < m + b.len);
	free(m);
	ft_buf_free(&b);
}

static void
test_hello_empty_strings(void **st)
{
	struct ft_buf b = { 0 };
	struct proto_hello h = { .version = 3 }, g;

	(void)st;
	proto_put_hello(&b, &h);
	assert_int_equal(b.len, 36);
	assert_int_equal(proto_get_hello(b.data, b.len, &g), 0);
	assert_int_equal(g.version, 3);
	assert_int_equal(g.host_len, 0);
	assert_int_equal(g.plugins_len, 0);
	ft_buf_free(&b);
}

static void
test_welcome_round_trip(void **st)
{
	struct ft_buf b = { 0 };
	struct proto_welcome w = { .output_cap = 1 << 20,
				   .master_timeout = 12.75,
				   .idle_nap = 0.0625, .heartbeat = 1.5,
				   .ping_timeout = 0.75, .mem_enforce = 2,
				   .out_default = "/o/%b.%t", .out_default_len = 8,
				 }, g;

	(void)st;
	proto_put_welcome(&b, &w);
	/* An empty node name and stderr pattern. */
	assert_int_equal(b.len, 40 + 4 + 4 + 8 + 4);
	memset(&g, 0, sizeof(g));
	assert_int_equal(proto_get_welcome(b.data, b.len, &g), 0);
	assert_int_equal(g.output_cap, 1 << 20);
	assert_true(g.master_timeout == 12.75);
	assert_true(g.idle_nap == 0.0625);
	assert_true(g.heartbeat == 1.5 && g.ping_timeout == 0.75);
	assert_int_equal(g.mem_enforce, 2);
	assert_bytes(g.out_default, g.out_default_len, "/o/%b.%t", 8);
	assert_int_equal(g.err_default_len, 0);
	ft_buf_free(&b);
}

static void
test_pong_round_trip(void **st)
{
	struct ft_buf b = { 0 };
	struct proto_pong p = { .seq = 0x1122334455667788ULL,
				.running = UINT64_MAX - 1, .queued = 99 }, g;

	(void)st;
	proto_put_pong(&b, &p);
	assert_int_equal(b.len, 20);
	memset(&g, 0, sizeof(g));
	assert_int_equal(proto_get_pong(b.data, b.len, &g), 0);
	assert_true(g.seq == p.seq);
	assert_true(g.running == p.running);
	assert_int_equal(g.queued, 99);
	ft_buf_free(&b);
}

typedef int (*getter)(const unsigned char *p, size_t n);

static int
get_hello(const unsigned char *p, size_t n)
{
	struct proto_hello m;

	return proto_get_hello(p, n, &m);
}

static int
get_welcome(const unsigned char *p, size_t n)
{
	struct proto_welcome m;

	return proto_get_welcome(p, n, &m);
}

static int
get_pong(const unsigned char *p, size_t n)
{
	struct proto_pong m;

	return proto_get_pong(p, n, &m);
}

static int
get_exited(const unsigned char *p, size_t n)
{
	struct proto_exited m;

	return proto_get_exited(p, n, &m);
}

/* GET accepts B whole and refuses every truncation and any extra byte. */
static void
check_strict(const char *what, getter get, const struct ft_buf *b)
{
	unsigned char *m;
	size_t n;

	for (n = 0; n < b->len; n++) {
		m = exact(b->data, n);
		if (get(m, n) != -1)
			fail_msg("%s truncated to %zu of %zu bytes accepted",
				 what, n, b->len);
		free(m);
	}
	m = exact(b->data, b->len);
	if (get(m, b->len) != 0)
		fail_msg("%s: whole message refused", what);
	free(m);
	for (n = 1; n <= 8; n++) {
		unsigned char *x = ft_calloc(1, b->len + n);

		memcpy(x, b->data, b->len);
		if (get(x, b->len + n) != -1)
			fail_msg("%s with %zu trailing bytes accepted", what, n);
		free(x);
	}
}

static void
test_fixed_messages_strict(void **st)
{
	struct ft_buf b = { 0 };
	struct proto_welcome w = { 5, 1.0, 0.1, "node1", 5, 1.0, 0.5, 1,
				   "a", 1, "b", 1 };
	struct proto_pong p = { 1, 2, 3 };
	struct proto_exited e = { 1, "no answer to a ping in 1 s", 26 };

	(void)st;
	put_hello(&b);
	check_strict("hello", get_hello, &b);
	b.len = 0;
	proto_put_welcome(&b, &w);
	check_strict("welcome", get_welcome, &b);
	b.len = 0;
	proto_put_pong(&b, &p);
	check_strict("pong", get_pong, &b);
	b.len = 0;
	proto_put_exited(&b, &e);
	check_strict("exited", get_exited, &b);
	ft_buf_free(&b);
}

/* A RELAY carries its slots' messages whole and in order; a bad count or
 * a cut entry is refused. */
static void
test_relay_round_trip(void **st)
{
	static const char *pay[] = { "", "x", "a longer payload \0 with a nul" };
	struct ft_buf b = { 0 };
	struct proto_iter it;
	struct proto_relay r;
	size_t want = 4;
	uint32_t i;

	(void)st;
	proto_begin_list(&b);
	for (i = 0; i < 3; i++) {
		struct proto_relay e = {
			.slot = 500 + i, .gen = 7 * i, .tag = FT_MSG_RESULT - i,
			.p = pay[i], .n = strlen(pay[i]) + (i == 2),
		};

		proto_put_relay(&b, &e);
		want += proto_relay_size(e.n);
	}
	proto_set_count(&b, 3);
	assert_int_equal(b.len, want);
	assert_true(proto_relay_size(0) <= FT_RELAY_ROOM);
	assert_int_equal(proto_iter_init(&it, b.data, b.len), 0);
	for (i = 0; i < 3; i++) {
		assert_int_equal(proto_next_relay(&it, &r), 1);
		assert_int_equal(r.slot, 500 + i);
		assert_int_equal(r.gen, 7 * i);
		assert_int_equal(r.tag, FT_MSG_RESULT - i);
		assert_int_equal(r.n, strlen(pay[i]) + (i == 2));
		assert_memory_equal(r.p, pay[i], r.n);
	}
	assert_int_equal(proto_next_relay(&it, &r), 0);
	/* One entry more than there is. */
	proto_set_count(&b, 4);
	assert_int_equal(proto_iter_init(&it, b.data, b.len), 0);
	for (i = 0; i < 3; i++)
		assert_int_equal(proto_next_relay(&it, &r), 1);
	assert_int_equal(proto_next_relay(&it, &r), -1);
	/* The last entry cut short. */
	proto_set_count(&b, 3);
	assert_int_equal(proto_iter_init(&it, b.data, b.len - 1), 0);
	for (i = 0; i < 2; i++)
		assert_int_equal(proto_next_relay(&it, &r), 1);
	assert_int_equal(proto_next_relay(&it, &r), -1);
	ft_buf_free(&b);
}

static void
test_hello_bad_lengths(void **st)
{
	struct ft_buf b = { 0 };
	unsigned char *m;
	size_t hl = strlen(host);

	(void)st;
	put_hello(&b);
	m = exact(b.data, b.len);
	/* Host length one too many: it eats into the plugins field. */
	m[20] = (unsigned char)(hl + 1);
	assert_int_equal(get_hello(m, b.len), -1);
	/* Host length huge. */
	memset(m + 20, 0xff, 4);
	assert_int_equal(get_hello(m, b.len), -1);
	/* Host length one short: the rest no longer parses exactly. */
	m[20] = (unsigned char)(hl - 1);
	memset(m + 21, 0, 3);
	assert_int_equal(get_hello(m, b.len), -1);
	free(m);
	ft_buf_free(&b);
}

/* ---- lists ---- */

static const char spec0[] = "{\"type\": \"sleep\", \"seconds\": 0}";
static const char spec2[] = "bin\0ary\xff\x00";

static const struct proto_task tasks[] = {
	{ 1, 1, spec0, sizeof(spec0) - 1, 1, "", 0, "", 0, 1, 0 },
	{ UINT64_MAX, UINT32_MAX, "", 0, 0, "", 0, "", 0, UINT32_MAX,
	  UINT32_MAX },
	{ 0x100000001ULL, 2, spec2, sizeof(spec2) - 1, 4, "0,1", 3, "2,3", 3,
	  7, 12345 },
};

static void
put_tasks(struct ft_buf *b, uint32_t count)
{
	size_t i;

	proto_begin_list(b);
	for (i = 0; i < FT_ARRAY_LEN(tasks); i++)
		proto_put_task(b, &tasks[i]);
	proto_set_count(b, count);
}

/* Decode a task list: the number of records at a clean end, or -1. */
static int
decode_tasks(const void *p, size_t n, struct proto_task *out, int max)
{
	struct proto_iter it;
	struct proto_task t;
	int count = 0, rc;

	if (proto_iter_init(&it, p, n) != 0)
		return -1;
	while ((rc = proto_next_task(&it, &t)) == 1) {
		if (count < max)
			out[count] = t;
		count++;
		if (count > 1000)
			fail_msg("task iterator does not end");
	}
	if (rc != 0)
		return -1;
	/* At the end it stays at the end. */
	assert_int_equal(proto_next_task(&it, &t), 0);
	return count;
}

static void
test_task_list_round_trip(void **st)
{
	struct ft_buf b = { 0 };
	struct proto_task got[4];
	unsigned char *m;
	size_t i;

	(void)st;
	put_tasks(&b, 3);
	m = exact(b.data, b.len);
	assert_int_equal(decode_tasks(m, b.len, got, 4), 3);
	for (i = 0; i < 3; i++) {
		assert_true(got[i].tid == tasks[i].tid);
		assert_int_equal(got[i].attempt, tasks[i].attempt);
		assert_bytes(got[i].spec, got[i].spec_len, tasks[i].spec,
			     tasks[i].spec_len);
		assert_int_equal(got[i].batch, tasks[i].batch);
		assert_int_equal(got[i].index, tasks[i].index);
	}
	free(m);
	/* proto_begin_list starts the buffer over. */
	put_tasks(&b, 3);
	assert_int_equal(decode_tasks(b.data, b.len, got, 4), 3);
	ft_buf_free(&b);
}

static void
test_empty_list(void **st)
{
	struct ft_buf b = { 0 };
	struct proto_task t;

	(void)st;
	put_tasks(&b, 3);
	proto_begin_list(&b);
	proto_set_count(&b, 0);
	assert_int_equal(b.len, 4);
	assert_int_equal(decode_tasks(b.data, b.len, &t, 1), 0);
	ft_buf_free(&b);
}

static void
test_task_list_strict(void **st)
{
	struct ft_buf b = { 0 };
	struct proto_task got[4];
	unsigned char *m;
	size_t n;

	(void)st;
	put_tasks(&b, 3);
	for (n = 0; n < b.len; n++) {
		m = exact(b.data, n);
		if (decode_tasks(m, n, got, 4) != -1)
			fail_msg("task list truncated to %zu of %zu bytes "
				 "accepted", n, b.len);
		free(m);
	}
	for (n = 1; n <= 8; n++) {
		m = ft_calloc(1, b.len + n);
		memcpy(m, b.data, b.len);
		if (decode_tasks(m, b.len + n, got, 4) != -1)
			fail_msg("task list with %zu trailing bytes accepted",
				 n);
		free(m);
	}
	/* The count says more than there is, or less. */
	proto_set_count(&b, 4);
	assert_int_equal(decode_tasks(b.data, b.len, got, 4), -1);
	proto_set_count(&b, UINT32_MAX);
	assert_int_equal(decode_tasks(b.data, b.len, got, 4), -1);
	proto_set_count(&b, 2);
	assert_int_equal(decode_tasks(b.data, b.len, got, 4), -1);
	proto_set_count(&b, 0);
	assert_int_equal(decode_tasks(b.data, b.len, got, 4), -1);
	ft_buf_free(&b);
}

static const char out1[] = "line 1\n\0\x01\x02\xff\xfe tail\0";
static const char err1[] = "warning: \0 NUL";

static const char value1[] = "b64:gASVAAAA\0\xff";

static const struct proto_result results[] = {
	{ 1, 1, 1, 0, 0.25, "", 0, out1, sizeof(out1) - 1, "", 0, 0,
	  value1, sizeof(value1) - 1, PROTO_FINISHED, 0.125, 4096,
	  "/out/1.0", 8, "", 0 },
	{ 2, 3, 0, 137, 1e-6, "signal 9", 8, "", 0, err1,
	  sizeof(err1) - 1, 9, "", 0, PROTO_INTERRUPTED, 0, 0, "", 0,
	  "/e", 2 },
	{ UINT64_MAX, UINT32_MAX, 255, INT32_MIN, -1.0, "r", 1, "o", 1, "e", 1,
	  INT32_MIN, "v", 1, 255, 1e9, UINT64_MAX, "p", 1, "p", 1 },
};

/* Decode a result list: records at a clean end, or -1. */
static int
decode_results(const void *p, size_t n, struct proto_result *out, int max)
{
	struct proto_iter it;
	struct proto_result r;
	int count = 0, rc;

	if (proto_iter_init(&it, p, n) != 0)
		return -1;
	while ((rc = proto_next_result(&it, &r)) == 1) {
		if (count < max)
			out[count] = r;
		count++;
		if (count > 1000)
			fail_msg("result iterator does not end");
	}
	return rc == 0 ? count : -1;
}

static void
put_results(struct ft_buf *b)
{
	size_t i;

	proto_begin_list(b);
	for (i = 0; i < FT_ARRAY_LEN(results); i++)
		proto_put_result(b, &results[i]);
	proto_set_count(b, FT_ARRAY_LEN(results));
}

static void
test_result_list_round_trip(void **st)
{
	struct ft_buf b = { 0 };
	struct proto_result got[4];
	unsigned char *m;
	size_t i;

	(void)st;
	put_results(&b);
	m = exact(b.data, b.len);
	assert_int_equal(decode_results(m, b.len, got, 4), 3);
	for (i = 0; i < 3; i++) {
		const struct proto_result *w = &results[i], *g = &got[i];

		assert_true(g->tid == w->tid);
		assert_int_equal(g->attempt, w->attempt);
		assert_int_equal(g->ok, w->ok);
		assert_int_equal(g->exit_code, w->exit_code);
		assert_memory_equal(&g->seconds, &w->seconds,
				    sizeof(double));
		assert_bytes(g->reason, g->reason_len, w->reason,
			     w->reason_len);
		assert_bytes(g->out, g->out_len, w->out, w->out_len);
		assert_bytes(g->err, g->err_len, w->err, w->err_len);
		assert_int_equal(g->signal, w->signal);
		assert_bytes(g->value, g->value_len, w->value, w->value_len);
		assert_int_equal(g->interrupted, w->interrupted);
		assert_memory_equal(&g->cpu_s, &w->cpu_s, sizeof(double));
		assert_true(g->max_rss == w->max_rss);
		assert_bytes(g->out_path, g->out_path_len, w->out_path,
			     w->out_path_len);
		assert_bytes(g->err_path, g->err_path_len, w->err_path,
			     w->err_path_len);
	}
	free(m);
	ft_buf_free(&b);
}

static void
test_result_size(void **st)
{
	struct ft_buf b = { 0 };
	size_t i, total = 4;

	(void)st;
	proto_begin_list(&b);
	for (i = 0; i < FT_ARRAY_LEN(results); i++) {
		size_t before = b.len;

		proto_put_result(&b, &results[i]);
		assert_int_equal(proto_result_size(&results[i]),
				 b.len - before);
		total += proto_result_size(&results[i]);
	}
	assert_int_equal(b.len, total);
	ft_buf_free(&b);
}

static void
test_result_list_strict(void **st)
{
	struct ft_buf b = { 0 };
	struct proto_result got[4];
	unsigned char *m;
	size_t n;

	(void)st;
	put_results(&b);
	for (n = 0; n < b.len; n++) {
		m = exact(b.data, n);
		if (decode_results(m, n, got, 4) != -1)
			fail_msg("result list truncated to %zu of %zu bytes "
				 "accepted", n, b.len);
		free(m);
	}
	m = ft_calloc(1, b.len + 1);
	memcpy(m, b.data, b.len);
	assert_int_equal(decode_results(m, b.len + 1, got, 4), -1);
	free(m);
	proto_set_count(&b, 4);
	assert_int_equal(decode_results(b.data, b.len, got, 4), -1);
	proto_set_count(&b, 2);
	assert_int_equal(decode_results(b.data, b.len, got, 4), -1);
	ft_buf_free(&b);
}

static void
test_big_result(void **st)
{
	struct ft_buf b = { 0 };
	struct proto_result r = { 0 }, got[2];
	size_t len = 300 * 1024, i;
	char *out = ft_malloc(len);

	(void)st;
	for (i = 0; i < len; i++)
		out[i] = (char)(i * 7);
	r.tid = 5;
	r.attempt = 1;
	r.out = out;
	r.out_len = len;
	r.reason = "";
	r.err = "";
	proto_begin_list(&b);
	proto_put_result(&b, &r);
	proto_set_count(&b, 1);
	assert_int_equal(b.len, 4 + proto_result_size(&r));
	assert_true(b.len < FT_MSG_MAX);
	assert_int_equal(decode_results(b.data, b.len, got, 2), 1);
	assert_bytes(got[0].out, got[0].out_len, out, len);
	free(out);
	ft_buf_free(&b);
}

static void
test_msg_names(void **st)
{
	(void)st;
	assert_string_equal(proto_msg_name(FT_MSG_HELLO), "hello");
	assert_string_equal(proto_msg_name(FT_MSG_WELCOME), "welcome");
	assert_string_equal(proto_msg_name(FT_MSG_ASSIGN), "assign");
	assert_string_equal(proto_msg_name(FT_MSG_RESULT), "result");
	assert_string_equal(proto_msg_name(FT_MSG_PING), "ping");
	assert_string_equal(proto_msg_name(FT_MSG_PONG), "pong");
	assert_string_equal(proto_msg_name(FT_MSG_CANCEL), "cancel");
	assert_string_equal(proto_msg_name(FT_MSG_STOP), "stop");
	assert_string_equal(proto_msg_name(FT_MSG_BYE), "bye");
	assert_string_equal(proto_msg_name(FT_MSG_RELAY), "relay");
	assert_string_equal(proto_msg_name(FT_MSG_SPAWN), "spawn");
	assert_string_equal(proto_msg_name(FT_MSG_KILL), "kill");
	assert_string_equal(proto_msg_name(FT_MSG_EXITED), "exited");
	assert_string_equal(proto_msg_name(FT_MSG_LAST), "invalid");
	assert_string_equal(proto_msg_name(FT_MSG_INVALID), "invalid");
	assert_string_equal(proto_msg_name(FT_MSG_LAST), "invalid");
	assert_string_equal(proto_msg_name(-1), "invalid");
	assert_string_equal(proto_msg_name(1000), "invalid");
	assert_int_equal(FT_MSG_INVALID, 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_wire_layout_little_endian),
		cmocka_unit_test(test_wire_round_trip),
		cmocka_unit_test(test_wire_short_read_sticks),
		cmocka_unit_test(test_wire_leftover_fails),
		cmocka_unit_test(test_wire_bytes_too_long),
		cmocka_unit_test(test_hello_round_trip),
		cmocka_unit_test(test_hello_empty_strings),
		cmocka_unit_test(test_welcome_round_trip),
		cmocka_unit_test(test_pong_round_trip),
		cmocka_unit_test(test_fixed_messages_strict),
		cmocka_unit_test(test_relay_round_trip),
		cmocka_unit_test(test_hello_bad_lengths),
		cmocka_unit_test(test_task_list_round_trip),
		cmocka_unit_test(test_empty_list),
		cmocka_unit_test(test_task_list_strict),
		cmocka_unit_test(test_result_list_round_trip),
		cmocka_unit_test(test_result_size),
		cmocka_unit_test(test_result_list_strict),
		cmocka_unit_test(test_big_result),
		cmocka_unit_test(test_msg_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

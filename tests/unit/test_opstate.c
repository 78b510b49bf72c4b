/* Unit tests of master/opstate.c, the nodes' state on disk: records
 * written and read back; the file cut at every byte offset and each of
 * its bytes flipped (never a wrong record, the damage always reported,
 * the other lines kept); records of another version, repeated or out of
 * range refused by name; the writer thread's saves, its generations,
 * a failed write reported and retried; a master fenced off writes
 * nothing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <errno.h>

#include "config.h"
#include "jsonl.h"
#include "lease.h"
#include "opstate.h"
#include "store.h"
#include "util.h"

#define NRECS 4

static const struct opstate_rec base[NRECS] = {
	{ "node1", "up", 0, "", 0, 0, 0, 0, 0, 0, 0 },
	{ "node2", "drained", 1, "drained by an operator", 1,
	  1767225600.5, 0, 1, 1767225601.25, 0, 0 },
	{ "node3", "inactive", 0, "worker 2 failed (2 in a row); node node3 "
	  "has no \"bmc\" in the config", 0, 0, 2, 0, 1767225700.125, 60,
	  1767225760.125 },
	{ "gpu-7.rack2", "suspect", 0, "a \"quoted\"\nreason", 3,
	  1767200000, 1, 0, 1767225800, 0, 0 },
};

struct fx {
	char dir[64];
	char *path;
	struct ft_buf text;
	size_t starts[NRECS + 2];	/* where each line starts; then len */
};

static int
setup(void **state)
{
	struct fx *f = ft_calloc(1, sizeof(*f));
	size_t i, k = 0;

	snprintf(f->dir, sizeof(f->dir), "/tmp/ftfarm-opstate-unit-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	f->path = ft_asprintf("%s/%s", f->dir, OPSTATE_FILE);
	opstate_format(base, NRECS, 7, &f->text);
	for (i = 0; i < f->text.len; i++)
		if (i == 0 || f->text.data[i - 1] == '\n')
			f->starts[k++] = i;
	assert_int_equal(k, NRECS + 1);
	f->starts[NRECS + 1] = f->text.len;
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	struct fx *f = *state;
	char *cmd = ft_asprintf("rm -rf '%s'", f->dir);

	assert_int_equal(system(cmd), 0);
	free(cmd);
	free(f->path);
	ft_buf_free(&f->text);
	free(f);
	return 0;
}

/* Is R one of the records written, unchanged? */
static int
is_original(const struct opstate_rec *r)
{
	int i;

	for (i = 0; i < NRECS; i++)
		if (opstate_rec_equal(r, &base[i]))
			return 1;
	return 0;
}

static void
test_written_and_read_back(void **state)
{
	struct fx *f = *state;
	struct opstate_read r;
	char err[256];
	int i;

	assert_int_equal(ft_write_file_atomic(f->path, f->text.data,
					      f->text.len), 0);
	assert_int_equal(opstate_read(f->path, &r, err, sizeof(err)), 0);
	assert_true(r.found);
	assert_int_equal(r.nproblems, 0);
	assert_int_equal(r.epoch, 7);
	assert_int_equal(r.n, NRECS);
	for (i = 0; i < NRECS; i++)
		assert_true(opstate_rec_equal(&r.recs[i], &base[i]));
	opstate_read_free(&r);
	/* A missing file reads as empty, without a problem. */
	unlink(f->path);
	assert_int_equal(opstate_read(f->path, &r, err, sizeof(err)), 0);
	assert_false(r.found);
	assert_int_equal(r.n + r.nproblems, 0);
	/* A directory where the file should be cannot be read. */
	assert_int_equal(mkdir(f->path, 0700), 0);
	assert_int_equal(opstate_read(f->path, &r, err, sizeof(err)), -1);
	assert_non_null(strstr(err, OPSTATE_FILE));
}

/* Cut at every offset: the whole lines before the cut are kept, nothing
 * else, and the cut is reported. */
static void
test_torn_at_every_offset(void **state)
{
	struct fx *f = *state;
	struct opstate_read r;
	size_t cut, whole, i;

	for (cut = 0; cut < f->text.len; cut++) {
		opstate_parse(f->text.data, cut, &r);
		whole = 0;
		for (i = 1; i <= NRECS + 1; i++)
			if (f->starts[i] <= cut)
				whole = i;	/* lines 1..whole are whole */
		assert_true(r.nproblems >= 1);
		assert_int_equal(r.n, whole > 0 ? whole - 1 : 0);
		for (i = 0; i < r.n; i++)
			assert_true(opstate_rec_equal(&r.recs[i], &base[i]));
		opstate_read_free(&r);
	}
}

/* Each byte flipped in turn: no record that was not written comes back,
 * the damage is reported, and the lines it did not touch are kept. */
static void
test_flipped_byte(void **state)
{
	struct fx *f = *state;
	struct opstate_read r;
	char *copy = ft_malloc(f->text.len);
	size_t at, i;

	for (at = 0; at < f->text.len; at++) {
		memcpy(copy, f->text.data, f->text.len);
		copy[at] ^= 0x20;
		opstate_parse(copy, f->text.len, &r);
		assert_true(r.nproblems >= 1);
		for (i = 0; i < r.n; i++)
			assert_true(is_original(&r.recs[i]));
		/* A flipped newline spoils two lines, the header none of
		 * the records. */
		assert_true(r.n >= NRECS - 2);
		if (at < f->starts[1] - 1)
			assert_int_equal(r.n, NRECS);
		opstate_read_free(&r);
	}
	free(copy);
}

#define GOOD "\"node\":\"n1\",\"state\":\"up\",\"drained\":false,"	\
	"\"reason\":\"\",\"reboots\":0,\"last_reboot\":0,\"failures\":0,"	\
	"\"episode_reboots\":0,\"last_failure\":0,\"probe_delay\":0,"	\
	"\"next_probe\":0"

/* Parse into R a file of version VERSION whose header counts COUNT
 * nodes, then each of LINES (an object's members, no braces) as a
 * checksummed line (a line starting with '!' without its checksum). */
static void
parse_lines(long long version, long long count, const char *const *lines,
	    size_t n, struct opstate_read *r)
{
	struct jsonl j;
	size_t i;

	memset(&j, 0, sizeof(j));
	j.fd = -1;
	j.crc = JSONL_CRC;
	jsonl_begin(&j);
	jsonl_str(&j, "file", OPSTATE_FILE);
	jsonl_int(&j, "version", version);
	jsonl_int(&j, "epoch", 1);
	jsonl_int(&j, "nodes", count);
	jsonl_end(&j);
	for (i = 0; i < n; i++) {
		if (lines[i][0] == '!') {
			ft_buf_printf(&j.pending, "{%s}\n", lines[i] + 1);
			continue;
		}
		jsonl_begin(&j);
		ft_buf_adds(&j.pending, lines[i]);
		j.first = 0;
		jsonl_end(&j);
	}
	opstate_parse(j.pending.data, j.pending.len, r);
	ft_buf_free(&j.pending);
}

/* LINES parse into NOK records and one problem, on line LINE, that says
 * WANT. */
static void
expect_problem(const char *const *lines, size_t n, size_t nok, int line,
	       const char *want)
{
	struct opstate_read r;

	parse_lines(OPSTATE_VERSION, (long long)n, lines, n, &r);
	assert_int_equal(r.n, nok);
	assert_int_equal(r.nproblems, 1);
	assert_int_equal(r.problems[0].line, line);
	if (strstr(r.problems[0].what, want) == NULL)
		fail_msg("problem \"%s\" does not say \"%s\"",
			 r.problems[0].what, want);
	opstate_read_free(&r);
}

static void
test_bad_records_refused(void **state)
{
	static const char *const twice[] = { GOOD, GOOD };
	static const char *const unsummed[] = { "!" GOOD, GOOD };
	static const char *const unknown[] = { GOOD ",\"color\":1" };
	static const char *const negative[] = {
		"\"node\":\"n1\",\"state\":\"up\",\"drained\":false,"
		"\"reason\":\"\",\"reboots\":-1,\"last_reboot\":0,"
		"\"failures\":0,\"episode_reboots\":0,\"last_failure\":0,"
		"\"probe_delay\":0,\"next_probe\":0" };
	static const char *const missing[] = {
		"\"node\":\"n1\",\"drained\":false,\"reason\":\"\","
		"\"reboots\":0,\"last_reboot\":0,\"failures\":0,"
		"\"episode_reboots\":0,\"last_failure\":0,\"probe_delay\":0,"
		"\"next_probe\":0" };
	static const char *const unnamed[] = {
		"\"node\":\"\",\"state\":\"up\",\"drained\":false,"
		"\"reason\":\"\",\"reboots\":0,\"last_reboot\":0,"
		"\"failures\":0,\"episode_reboots\":0,\"last_failure\":0,"
		"\"probe_delay\":0,\"next_probe\":0" };
	static const char *const notjson[] = { "\"node\":" };
	struct opstate_read r;

	(void)state;
	expect_problem(twice, 2, 1, 3, "second time");
	expect_problem(unsummed, 2, 1, 2, "no checksum");
	expect_problem(unknown, 1, 0, 2, "color");
	expect_problem(negative, 1, 0, 2, "reboots");
	expect_problem(missing, 1, 0, 2, "state");
	expect_problem(unnamed, 1, 0, 2, "empty name");
	expect_problem(notjson, 1, 0, 2, "not a JSON object");
	/* Another version: nothing is read. */
	parse_lines(OPSTATE_VERSION + 1, 2, twice, 2, &r);
	assert_int_equal(r.n, 0);
	assert_int_equal(r.nproblems, 1);
	assert_non_null(strstr(r.problems[0].what, "version 2"));
	opstate_read_free(&r);
	/* Lines missing after the last whole one. */
	parse_lines(OPSTATE_VERSION, 3, twice, 1, &r);
	assert_int_equal(r.n, 1);
	assert_int_equal(r.nproblems, 1);
	assert_int_equal(r.problems[0].line, 0);
	opstate_read_free(&r);
	/* An empty file. */
	opstate_parse("", 0, &r);
	assert_int_equal(r.n, 0);
	assert_int_equal(r.nproblems, 1);
	opstate_read_free(&r);
}

/* ---- the writer ---- */

struct saves {
	int calls;
	uint64_t gen;
	int err;
};

static void
on_saved(void *ctx, uint64_t gen, int err)
{
	struct saves *sv = ctx;

	sv->calls++;
	sv->gen = gen;
	sv->err = err;
}

/* Run LOOP until SV has heard of CALLS saves (10 s at most). */
static void
await(struct ev_loop *loop, struct saves *sv, int calls)
{
	double until = ft_now() + 10;

	while (sv->calls < calls && ft_now() < until)
		ev_run(loop, EVRUN_ONCE | EVRUN_NOWAIT), usleep(1000);
	assert_int_equal(sv->calls, calls);
}

static void
test_writer_saves_and_fails_loudly(void **state)
{
	struct fx *f = *state;
	struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
	struct ft_config cfg;
	struct store st;
	struct saves sv = { 0, 0, 0 };
	struct opstate_ops ops = { .ctx = &sv, .saved = on_saved };
	struct opstate_read r;
	struct opstate *o;
	char err[256], *sub, *path, *leftover;

	memset(&cfg, 0, sizeof(cfg));
	cfg.state_dir = f->dir;
	assert_int_equal(store_init(&st, &cfg, loop, NULL, err, sizeof(err)),
			 0);
	/* A temporary file left by a master killed mid-write goes. */
	leftover = ft_asprintf("%s.tmp.4242", f->path);
	assert_int_equal(ft_write_file_atomic(leftover, "x", 1), 0);
	o = opstate_open(f->path, loop, &st, &ops, err, sizeof(err));
	assert_non_null(o);
	assert_int_equal(access(leftover, F_OK), -1);
	free(leftover);
	assert_int_equal(opstate_save(o, base, NRECS), 1);
	assert_int_equal(opstate_save(o, base, NRECS), 1);	/* unchanged */
	assert_int_equal(opstate_handed(o), 1);
	await(loop, &sv, 1);
	assert_int_equal(sv.gen, 1);
	assert_int_equal(sv.err, 0);
	assert_int_equal(opstate_durable(o), 1);
	assert_int_equal(opstate_retry(o), 0);
	assert_int_equal(opstate_save(o, base, NRECS - 1), 2);
	opstate_close(o);	/* writes what is pending */
	assert_int_equal(opstate_read(f->path, &r, err, sizeof(err)), 0);
	assert_int_equal(r.n, NRECS - 1);
	assert_int_equal(r.nproblems, 0);
	opstate_read_free(&r);

	/* A directory that is not there: the store fails, then recovers
	 * when the retry works. */
	sub = ft_asprintf("%s/sub", f->dir);
	path = ft_asprintf("%s/%s", sub, OPSTATE_FILE);
	o = opstate_open(path, loop, &st, &ops, err, sizeof(err));
	assert_int_equal(opstate_save(o, base, NRECS), 1);
	await(loop, &sv, 2);
	assert_int_equal(sv.err, ENOENT);
	assert_false(store_ok(&st));
	assert_int_equal(opstate_durable(o), 0);
	assert_int_equal(mkdir(sub, 0700), 0);
	assert_int_equal(opstate_retry(o), -1);
	await(loop, &sv, 3);
	assert_int_equal(sv.gen, 1);
	assert_int_equal(sv.err, 0);
	assert_int_equal(opstate_durable(o), 1);
	assert_int_equal(opstate_retry(o), 0);
	/* Moved aside: the evidence of damage is kept. */
	assert_int_equal(opstate_set_aside(o), 0);
	free(path);
	path = ft_asprintf("%s/%s.damaged", sub, OPSTATE_FILE);
	assert_int_equal(access(path, F_OK), 0);
	opstate_close(o);
	free(path);
	free(sub);
	store_free(&st);
	ev_loop_destroy(loop);
}

/* A master whose epoch has passed writes nothing: it steps down (exit
 * status 3) at its save. */
static void
test_fenced_master_writes_nothing(void **state)
{
	struct fx *f = *state;
	struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
	struct lease_rec none, next;
	struct ft_config cfg;
	struct lease l;
	struct store st;
	char err[256];
	int status;
	pid_t pid;

	memset(&cfg, 0, sizeof(cfg));
	cfg.state_dir = f->dir;
	assert_int_equal(lease_open(&l, f->dir, err, sizeof(err)), 0);
	memset(&none, 0, sizeof(none));
	memset(&next, 0, sizeof(next));
	next.epoch = 2;
	next.state = LEASE_ACTIVE;
	assert_int_equal(lease_swap(&l, &none, &next, NULL), 0);
	assert_int_equal(store_init(&st, &cfg, loop, NULL, err, sizeof(err)),
			 0);
	store_fence(&st, &l, 1);		/* ours was epoch 1 */
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct opstate *o = opstate_open(f->path, loop, &st, NULL, err,
						 sizeof(err));

		opstate_save(o, base, NRECS);
		_exit(0);			/* not reached */
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), STORE_LOST_LEASE);
	assert_int_equal(access(f->path, F_OK), -1);
	store_free(&st);
	lease_close(&l);
	ev_loop_destroy(loop);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_written_and_read_back,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_torn_at_every_offset,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_flipped_byte, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_bad_records_refused,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_writer_saves_and_fails_loudly, setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_fenced_master_writes_nothing, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

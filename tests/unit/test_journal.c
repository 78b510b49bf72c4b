/* Unit tests of master/journal.c and the checksummed lines of
 * common/jsonl.c: a results file cut at every byte offset of its last
 * line, and one with each byte of a middle line flipped, read back and
 * repaired; CRC-32C against its published check value. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "crc32c.h"
#include "journal.h"
#include "jsonl.h"
#include "util.h"

#define NLINES 6

struct fx {
	char dir[64];
	char *path;		/* results.jsonl */
	char *text;		/* its bytes as written */
	size_t len;
	size_t starts[NLINES + 1];	/* where each line starts; [N]: len */
};

/* Lines as batches.c writes them: task i, ok when i is even. */
static void
write_lines(struct fx *f)
{
	struct jsonl j;
	int i;

	assert_int_equal(jsonl_open(&j, f->path, JSONL_CRC), 0);
	for (i = 0; i < NLINES; i++) {
		jsonl_begin(&j);
		jsonl_int(&j, "task", i);
		jsonl_int(&j, "attempt", 1);
		jsonl_int(&j, "worker", 2);
		jsonl_str(&j, "status", i % 2 ? "failed" : "ok");
		jsonl_int(&j, "exit", i % 2);
		jsonl_secs(&j, "seconds", 0.25);
		jsonl_str(&j, "stdout", i == 3 ? "multi\nline \"out\"" : "x");
		jsonl_str(&j, "stderr", "");
		jsonl_end(&j);
	}
	assert_int_equal(jsonl_flush(&j), NLINES);
	jsonl_close(&j);
}

static int
setup(void **state)
{
	struct fx *f = ft_calloc(1, sizeof(*f));
	size_t i, k = 0;

	snprintf(f->dir, sizeof(f->dir), "/tmp/ftfarm-journal-unit-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	f->path = ft_asprintf("%s/results.jsonl", f->dir);
	write_lines(f);
	f->text = ft_read_file(f->path, &f->len);
	assert_non_null(f->text);
	for (i = 0; i < f->len; i++)
		if (i == 0 || f->text[i - 1] == '\n')
			f->starts[k++] = i;
	assert_int_equal(k, NLINES);
	f->starts[NLINES] = f->len;
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
	free(f->text);
	free(f->path);
	free(f);
	return 0;
}

static void
put(struct fx *f, const char *data, size_t len)
{
	unlink(f->path);
	assert_int_equal(ft_write_file_atomic(f->path, data, len), 0);
}

static void
test_crc32c_check_value(void **state)
{
	(void)state;
	/* The check value of CRC-32C (RFC 3720, B.4). */
	assert_int_equal(crc32c(0, "123456789", 9), 0xe3069283u);
	/* In pieces, across the 8-byte steps. */
	assert_int_equal(crc32c(crc32c(0, "1234", 4), "56789", 5),
			 0xe3069283u);
}

static void
test_whole_file(void **state)
{
	struct fx *f = *state;
	struct journal_results r;
	char err[256];
	uint32_t i;

	assert_int_equal(journal_read(f->path, NLINES, 0, &r, err,
				      sizeof(err)), 0);
	assert_int_equal(r.ncuts, 0);
	assert_int_equal(r.ok, 3);
	assert_int_equal(r.failed, 3);
	for (i = 0; i < NLINES; i++)
		assert_true(journal_done(&r, i));
	assert_false(journal_done(&r, NLINES));
	journal_results_free(&r);
	/* With the reports, for a job. */
	assert_int_equal(journal_read(f->path, 0, 1, &r, err, sizeof(err)), 0);
	assert_int_equal(r.nlines, NLINES);
	assert_string_equal(r.lines[3].out, "multi\nline \"out\"");
	assert_int_equal(r.lines[3].ok, 0);
	journal_results_free(&r);
}

/* Cut at every offset inside the last line: the others are all trusted,
 * the rest reported as a torn tail, and the repair leaves the complete
 * lines only. */
static void
test_cut_every_offset(void **state)
{
	struct fx *f = *state;
	size_t last = f->starts[NLINES - 1], off;
	char err[256];

	for (off = last; off < f->len; off++) {
		struct journal_results r;
		size_t len = 0;
		char *back;

		put(f, f->text, off);
		assert_int_equal(journal_read(f->path, NLINES, 0, &r, err,
					      sizeof(err)), 0);
		assert_int_equal(r.ok + r.failed, NLINES - 1);
		assert_false(journal_done(&r, NLINES - 1));
		assert_int_equal(r.ncuts, off > last ? 1 : 0);
		if (r.ncuts) {
			assert_int_equal(r.cuts[0].offset, last);
			assert_int_equal(r.cuts[0].bytes, off - last);
		}
		assert_int_equal(journal_repair(f->path, &r, err, sizeof(err)),
				 0);
		back = ft_read_file(f->path, &len);
		assert_int_equal(len, last);
		assert_memory_equal(back, f->text, last);
		free(back);
		journal_results_free(&r);
	}
}

/* Flip each byte of line 2 (every bit pattern of one byte is not
 * needed: one flip each): line 2 is never trusted, nor is a neighbour it
 * merges with when the flip hits its newline; every other line is. */
static void
test_flipped_byte(void **state)
{
	struct fx *f = *state;
	size_t a = f->starts[2], b = f->starts[3], off;
	char err[256];

	for (off = a; off < b; off++) {
		struct journal_results r;
		char *copy = ft_malloc(f->len);
		uint32_t i;

		memcpy(copy, f->text, f->len);
		copy[off] ^= 0x20;
		put(f, copy, f->len);
		assert_int_equal(journal_read(f->path, NLINES, 0, &r, err,
					      sizeof(err)), 0);
		assert_false(journal_done(&r, 2));
		for (i = 0; i < NLINES; i++)
			if (i != 2 && !(off == b - 1 && i == 3))
				assert_true(journal_done(&r, i));
		assert_true(r.ncuts >= 1);
		assert_int_equal(journal_repair(f->path, &r, err, sizeof(err)),
				 0);
		journal_results_free(&r);
		/* Read again: clean, and the cut bytes kept aside. */
		assert_int_equal(journal_read(f->path, NLINES, 0, &r, err,
					      sizeof(err)), 0);
		assert_int_equal(r.ncuts, 0);
		journal_results_free(&r);
		free(copy);
	}
}

/* Directories where the repair's copy and the cut bytes would go: no
 * new file can be made there, as on a full disk. */
static void
block_files(struct fx *f, int on)
{
	char *cmd = ft_asprintf(on ? "mkdir -p '%1$s.repair/x' '%1$s.damaged'"
			       : "rm -rf '%1$s.repair' '%1$s.damaged'",
			       f->path);

	assert_int_equal(system(cmd), 0);
	free(cmd);
}

/* A damaged line followed by a torn last one is cut off in place, with no
 * room for a copy of the file nor for the bytes cut (kept aside when there
 * is).  Damage in the middle still needs the copy. */
static void
test_torn_tail_without_room(void **state)
{
	struct fx *f = *state;
	size_t bad = f->starts[NLINES - 2], torn = f->starts[NLINES - 1] + 9;
	struct journal_results r;
	char err[256], *copy = ft_malloc(f->len), *back, *kept;
	size_t len = 0;
	int room;

	for (room = 0; room < 2; room++) {
		memcpy(copy, f->text, f->len);
		copy[bad + 3] ^= 0x20;
		put(f, copy, torn);
		block_files(f, !room);
		assert_int_equal(journal_read(f->path, NLINES, 0, &r, err,
					      sizeof(err)), 0);
		assert_int_equal(r.ncuts, 2);
		assert_int_equal(journal_repair(f->path, &r, err, sizeof(err)),
				 0);
		journal_results_free(&r);
		back = ft_read_file(f->path, &len);
		assert_int_equal(len, bad);
		assert_memory_equal(back, f->text, bad);
		free(back);
		if (room) {
			kept = ft_asprintf("%s.damaged", f->path);
			back = ft_read_file(kept, &len);
			assert_int_equal(len, torn - bad);
			assert_memory_equal(back, copy + bad, len);
			free(back);
			free(kept);
		}
		block_files(f, 0);
	}
	/* A flipped byte in line 1 only: no tail to cut. */
	memcpy(copy, f->text, f->len);
	copy[f->starts[1] + 3] ^= 0x20;
	put(f, copy, f->len);
	block_files(f, 1);
	assert_int_equal(journal_read(f->path, NLINES, 0, &r, err, sizeof(err)),
			 0);
	assert_int_equal(r.ncuts, 1);
	assert_int_equal(journal_repair(f->path, &r, err, sizeof(err)), -1);
	journal_results_free(&r);
	block_files(f, 0);
	free(copy);
}

/* A second line for a task, a line out of range and a line without a
 * checksum among checksummed ones are cut. */
static void
test_duplicates(void **state)
{
	struct fx *f = *state;
	struct ft_buf b = { 0 };
	struct journal_results r;
	char err[256];

	ft_buf_add(&b, f->text, f->starts[1]);		/* task 0 */
	ft_buf_add(&b, f->text, f->starts[1]);		/* task 0 again */
	ft_buf_adds(&b, "{\"task\":1,\"status\":\"ok\"}\n");
	ft_buf_add(&b, f->text + f->starts[2], f->starts[3] - f->starts[2]);
	put(f, b.data, b.len);
	assert_int_equal(journal_read(f->path, 2, 0, &r, err, sizeof(err)), 0);
	assert_int_equal(r.ok, 1);
	assert_true(journal_done(&r, 0));
	assert_false(journal_done(&r, 1));
	assert_int_equal(r.ncuts, 3);
	assert_string_equal(r.cuts[0].reason, "a second line for the task");
	assert_string_equal(r.cuts[1].reason, "no checksum");
	assert_string_equal(r.cuts[2].reason, "task index out of range");
	journal_results_free(&r);
	ft_buf_free(&b);
}

/* A file written before checksums: whole JSON lines are trusted, a torn
 * one is not. */
static void
test_legacy_file(void **state)
{
	struct fx *f = *state;
	static const char text[] =
		"{\"task\": 0, \"attempt\": 1, \"status\": \"ok\"}\n"
		"{\"task\": 1, \"attempt\": 1, \"status\": \"failed\"}\n"
		"{\"task\": 2, \"status\":\n";
	struct journal_results r;
	char err[256];

	put(f, text, sizeof(text) - 1);
	assert_int_equal(journal_read(f->path, 3, 0, &r, err, sizeof(err)), 0);
	assert_int_equal(r.ok, 1);
	assert_int_equal(r.failed, 1);
	assert_false(journal_done(&r, 2));
	assert_int_equal(r.ncuts, 1);
	journal_results_free(&r);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_crc32c_check_value),
		cmocka_unit_test_setup_teardown(test_whole_file, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_cut_every_offset, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_flipped_byte, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_torn_tail_without_room,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_duplicates, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_legacy_file, setup,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

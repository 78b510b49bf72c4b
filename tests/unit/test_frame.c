/* Unit tests of common/frame.c: frames split across reads, many frames in
 * one read, a length past the limit, end of file, and a writer that
 * queues what a full socket cannot take. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "frame.h"
#include "proto.h"
#include "util.h"

/* A socket pair, both ends non-blocking. */
static void
pair(int sv[2])
{
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0,
				    sv), 0);
}

/* The header of a frame of N bytes with TAG. */
static void
header(unsigned char h[8], uint32_t n, uint32_t tag)
{
	uint32_t v[2] = { n, tag };
	int i;

	for (i = 0; i < 8; i++)
		h[i] = (unsigned char)(v[i / 4] >> (8 * (i % 4)));
}

static void
test_split_frame(void **state)
{
	struct frame_reader r;
	struct frame f;
	unsigned char h[8];
	int sv[2];

	(void)state;
	pair(sv);
	frame_reader_init(&r, FT_MSG_MAX);
	header(h, 5, FT_MSG_PING);
	/* Three bytes of the header, then the rest, then the payload in
	 * two parts: no frame until the last byte. */
	assert_int_equal(write(sv[1], h, 3), 3);
	assert_int_equal(frame_fill(&r, sv[0]), FRAME_READ);
	assert_int_equal(frame_next(&r, &f), 0);
	assert_int_equal(write(sv[1], h + 3, 5), 5);
	assert_int_equal(write(sv[1], "hel", 3), 3);
	assert_int_equal(frame_fill(&r, sv[0]), FRAME_READ);
	assert_int_equal(frame_next(&r, &f), 0);
	assert_int_equal(write(sv[1], "lo", 2), 2);
	assert_int_equal(frame_fill(&r, sv[0]), FRAME_READ);
	assert_int_equal(frame_next(&r, &f), 1);
	assert_int_equal(f.tag, FT_MSG_PING);
	assert_int_equal(f.n, 5);
	assert_memory_equal(f.p, "hello", 5);
	assert_int_equal(frame_next(&r, &f), 0);
	assert_int_equal(frame_fill(&r, sv[0]), FRAME_AGAIN);
	frame_reader_free(&r);
	close(sv[0]);
	close(sv[1]);
}

static void
test_many_frames(void **state)
{
	struct frame_writer w = { 0 };
	struct frame_reader r;
	struct frame f;
	char payload[64];
	int sv[2], i, got = 0;

	(void)state;
	pair(sv);
	frame_reader_init(&r, FT_MSG_MAX);
	for (i = 0; i < 1000; i++) {
		snprintf(payload, sizeof(payload), "frame %d", i);
		frame_put(&w, FT_MSG_RESULT, payload, i % 7 ? strlen(payload)
							    : 0);
	}
	assert_int_equal(frame_flush(&w, sv[1]), 0);
	assert_int_equal(frame_pending(&w), 0);
	while (got < 1000) {
		assert_int_equal(frame_fill(&r, sv[0]), FRAME_READ);
		while (frame_next(&r, &f) == 1) {
			snprintf(payload, sizeof(payload), "frame %d", got);
			assert_int_equal(f.tag, FT_MSG_RESULT);
			assert_int_equal(f.n, got % 7 ? strlen(payload) : 0);
			if (f.n)
				assert_memory_equal(f.p, payload, f.n);
			got++;
		}
	}
	assert_int_equal(frame_fill(&r, sv[0]), FRAME_AGAIN);
	frame_writer_free(&w);
	frame_reader_free(&r);
	close(sv[0]);
	close(sv[1]);
}

/* What frame_next says of a lone header of N bytes, the limit 100. */
static int
next_of_header(uint32_t n)
{
	struct frame_reader r;
	struct frame f;
	unsigned char h[8];
	int sv[2], rc;

	pair(sv);
	frame_reader_init(&r, 100);
	header(h, n, FT_MSG_ASSIGN);
	assert_int_equal(write(sv[1], h, 8), 8);
	assert_int_equal(frame_fill(&r, sv[0]), FRAME_READ);
	rc = frame_next(&r, &f);
	frame_reader_free(&r);
	close(sv[0]);
	close(sv[1]);
	return rc;
}

static void
test_bad_length(void **state)
{
	(void)state;
	assert_int_equal(next_of_header(100), 0);	/* at the limit: waits */
	assert_int_equal(next_of_header(101), -1);
}

static void
test_eof(void **state)
{
	struct frame_reader r;
	struct frame f;
	unsigned char h[8];
	int sv[2];

	(void)state;
	pair(sv);
	frame_reader_init(&r, FT_MSG_MAX);
	header(h, 0, FT_MSG_BYE);
	assert_int_equal(write(sv[1], h, 8), 8);
	close(sv[1]);
	/* What came before the end is read first. */
	assert_int_equal(frame_fill(&r, sv[0]), FRAME_READ);
	assert_int_equal(frame_next(&r, &f), 1);
	assert_int_equal(f.tag, FT_MSG_BYE);
	assert_int_equal(f.n, 0);
	assert_int_equal(frame_fill(&r, sv[0]), FRAME_EOF);
	frame_reader_free(&r);
	close(sv[0]);
}

static void
test_full_socket_queues(void **state)
{
	struct frame_writer w = { 0 };
	struct frame_reader r;
	struct frame f;
	char *big = ft_calloc(1, 200000);
	int sv[2], i, got = 0, rc;

	(void)state;
	pair(sv);
	frame_reader_init(&r, FT_MSG_MAX);
	for (i = 0; i < 40; i++)
		frame_put(&w, FT_MSG_ASSIGN, big, 200000);
	/* Nobody reads: the writer keeps the rest, never blocks. */
	assert_int_equal(frame_flush(&w, sv[1]), 1);
	assert_true(frame_pending(&w) > 0);
	do {
		rc = frame_flush(&w, sv[1]);
		while (frame_fill(&r, sv[0]) == FRAME_READ)
			while (frame_next(&r, &f) == 1) {
				assert_int_equal(f.n, 200000);
				got++;
			}
	} while (rc == 1 || got < 40);
	assert_int_equal(got, 40);
	assert_int_equal(frame_pending(&w), 0);
	free(big);
	frame_writer_free(&w);
	frame_reader_free(&r);
	close(sv[0]);
	close(sv[1]);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_split_frame),
		cmocka_unit_test(test_many_frames),
		cmocka_unit_test(test_bad_length),
		cmocka_unit_test(test_eof),
		cmocka_unit_test(test_full_socket_queues),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * frame: messages over a stream socket (an agent and its slots).
 *
 * A frame is a header of two little-endian u32, the payload's length and
 * its tag (enum ft_msg), then the payload, encoded as proto.h says.  The
 * reader gathers frames from a non-blocking descriptor however the bytes
 * arrive (part of a frame, several in one read); the writer queues what a
 * non-blocking descriptor cannot take yet, so a peer that stops reading
 * never blocks the writer.
 */
#ifndef FT_FRAME_H
#define FT_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include "util.h"

#define FRAME_HEADER 8

/* frame_fill's answers. */
enum frame_rc {
	FRAME_READ = 1,			/* bytes came */
	FRAME_AGAIN = 0,		/* nothing to read now */
	FRAME_EOF = -1,			/* the peer closed its end */
	FRAME_ERROR = -2		/* read failed (errno) */
};

struct frame_reader {
	unsigned char *buf;
	size_t len;			/* bytes held */
	size_t off;			/* the next frame starts here */
	size_t cap;
	size_t max;			/* largest payload accepted */
};

struct frame {
	uint32_t tag;
	const void *p;			/* into the reader's buffer */
	size_t n;
};

struct frame_writer {
	struct ft_buf q;		/* frames not yet written */
	size_t off;			/* written bytes at the front of q */
};

/* A reader refusing payloads longer than MAX. */
void frame_reader_init(struct frame_reader *r, size_t max);
void frame_reader_free(struct frame_reader *r);
/* One read from FD into R.  Frames handed out by frame_next before are
 * invalid afterwards. */
enum frame_rc frame_fill(struct frame_reader *r, int fd);
/* Take the N bytes at P as read (what came with a connection's greeting).
 * Frames handed out before are invalid afterwards. */
void frame_reader_feed(struct frame_reader *r, const void *p, size_t n);
/* The next whole frame in R: 1 with F filled, 0 when none is complete,
 * -1 when the next header is malformed (a length past R's max). */
int frame_next(struct frame_reader *r, struct frame *f);

/* Queue a frame of TAG with the N bytes at P. */
void frame_put(struct frame_writer *w, uint32_t tag, const void *p, size_t n);
/* Write what the socket FD takes (a closed peer is an error, EPIPE,
 * not a signal).  0 once the queue is empty, 1 while bytes wait
 * (FD is full), -1 on a write error (errno). */
int frame_flush(struct frame_writer *w, int fd);
/* Bytes waiting in W. */
size_t frame_pending(const struct frame_writer *w);
void frame_writer_free(struct frame_writer *w);

#endif

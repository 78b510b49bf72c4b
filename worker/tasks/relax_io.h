/*
 * relax_io: where a relax job's rows live, and how its files are written.
 *
 * The interior rows 1..N-2 of the matrix are cut into BLOCKS blocks of
 * consecutive rows (block b: rows relax_lo(b) .. relax_lo(b+1)-1, at least
 * one each).  Rows 0 and N-1 are the boundary: zeros for ever, in no file.
 *
 * A job's directory holds, for a sweep count S and a block b:
 *   cp-S-b   the block's rows after S sweeps, raw native doubles, N per
 *            row, row-major (the checkpoint);
 *   rs-S-b   the verification sums of the rows the block outputs (its own,
 *            plus row 0 for the first block and row N-1 for the last),
 *            raw doubles in row order.
 * Every file is written under a unique temp name (mkstemp, so attempts on
 * different hosts never share one) and linked into place if nothing has
 * its name yet: a reader sees a whole file or none, a file never changes
 * once it has its name, and a second attempt is harmless.
 */
#ifndef FT_RELAX_IO_H
#define FT_RELAX_IO_H

#include <stddef.h>
#include <sys/types.h>

/* First row of block B (B == BLOCKS gives N-1, one past the last). */
long relax_lo(long n, long blocks, long b);
/* The block holding interior row ROW. */
long relax_block_of(long n, long blocks, long row);
/* The rows block B outputs: [*LO, *HI). */
void relax_out_rows(long n, long blocks, long b, long *lo, long *hi);

/* DIR/cp-SWEEP-BLOCK and DIR/rs-SWEEP-BLOCK (new strings). */
char *relax_cp_path(const char *dir, long sweep, long block);
char *relax_rs_path(const char *dir, long sweep, long block);

/* Read or write exactly LEN bytes at OFF (restarting after short counts
 * and EINTR).  0, or -1 with errno (EIO for a file that ends too soon). */
int relax_pread(int fd, void *buf, size_t len, off_t off);
int relax_pwrite(int fd, const void *buf, size_t len, off_t off);

/* A file being written under a temp name. */
struct relax_file {
	int fd;
	char *path;		/* where it goes */
	char *tmp;		/* where it is being written */
};

/* Create a temp file beside PATH for F.  REUSE, when not NULL, names a
 * file the job no longer needs: F takes it over if it is still there (a
 * rename, so only one attempt gets it) and sizes it to SIZE, since
 * rewriting pages a file has is cheaper than allocating new ones (and
 * removing the old file costs as much again).  0, or -1 with ERR. */
int relax_file_open(struct relax_file *f, const char *path, const char *reuse,
		    off_t size, char *err, size_t n);
/* Write LEN bytes at OFF.  0, or -1 with ERR (F stays open: abort it). */
int relax_file_write(struct relax_file *f, const void *buf, size_t len,
		     off_t off, char *err, size_t n);
/* Close F and give it its name, unless a file has it already: then that
 * one (written by an earlier attempt of the same task: the same bytes)
 * stays.  The first file wins, as the first result does: an attempt
 * outliving its task can never replace a file that others already use.
 * 0 when F got the name, 1 when another file has it, or -1 with ERR (F
 * is aborted). */
int relax_file_commit(struct relax_file *f, char *err, size_t n);
/* Close and remove F's temp file (nothing if never opened). */
void relax_file_abort(struct relax_file *f);

/* A file mapped shared and writable, every page of it made writable when
 * mapped: stores into it are the file's bytes, with no copy.  A worker
 * keeps the mappings of the checkpoints it wrote (see relax_block.h). */
struct relax_map {
	double *rows;		/* NULL: nothing mapped */
	size_t len;
	dev_t dev;
	ino_t ino;
};

/* Map F's temp file, a file it took over and so SIZE bytes already, into
 * M.  When CACHE (may be NULL) is a mapping of that very file, it is
 * moved into M: its pages are writable already.  Otherwise every page is
 * made writable now (4-7 ms for 64 MiB of pages in the page cache on
 * ext4 here, against 13-18 ms to write them; scripts/bench/cp_write.c),
 * so that a full disk shows here and not as a SIGBUS in the middle of a
 * sweep.  A new file is not mapped: making its pages costs more than
 * writing them (27-47 ms against 21-26).  0, or -1 when F is not mapped
 * (M is empty): write it with relax_file_write. */
int relax_file_map(struct relax_file *f, size_t size, struct relax_map *m,
		   struct relax_map *cache);
/* Is M the file named PATH, i.e. was it not taken over since? */
int relax_map_is(const struct relax_map *m, const char *path);
/* Unmap M (nothing if empty). */
void relax_map_drop(struct relax_map *m);

/* Read LEN bytes at OFF from PATH.  0, or -1 with ERR. */
int relax_read_at(const char *path, void *buf, size_t len, off_t off,
		  char *err, size_t n);

/* Remove every file of DIR, then DIR itself (one level: a job directory
 * holds no subdirectories).  Missing is fine.  0, or -1 with errno. */
int relax_remove_dir(const char *dir);

#endif

/*
 * wc_plan: the plan of a wordcount job, made in the master.
 *
 * Inputs are expanded into regular files without reading them: a file is
 * taken as given, a directory is walked recursively (symbolic links
 * followed, a directory already seen in the walk of that input skipped by
 * device and inode, so that link loops end; entries that are neither
 * regular files nor directories, or whose links lead nowhere, are left
 * out), and the files found under one input are put in byte order of their
 * full paths.  The files' concatenation, in input order, is cut into
 * shards of global byte ranges.
 *
 * The manifest, DIR/manifest, lists the files:
 *
 *   ftfarm-wordcount-manifest 1 FILES BYTES
 *   GSTART SIZE PATH		(one line per file, PATH escaped, wc_file.h)
 *
 * GSTART is the file's global offset.  Map tasks read it from the line of
 * their shard's first file on, so the file list never travels in a task.
 */
#ifndef WC_PLAN_H
#define WC_PLAN_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define WC_MANIFEST_HEAD "ftfarm-wordcount-manifest 1"

struct wc_pfile {
	char *path;
	uint64_t size;
	uint64_t gstart;	/* offset in the concatenation */
	uint64_t line;		/* byte offset of its manifest line */
};

struct wc_plan {
	struct wc_pfile *files;
	size_t nfiles, cap;
	uint64_t total;		/* bytes of all files */
	uint64_t manifest_len;	/* bytes of the manifest */
	size_t nshards;
	uint64_t *cut;		/* shard i is [cut[i], cut[i + 1]) */
};

/* Expand INPUTS (an array of path strings) into P's files.  0, or -1
 * with ERR naming the path. */
int wc_plan_inputs(struct wc_plan *p, const json_t *inputs, char *err,
		   size_t n);
/* Cut P into shards: SHARDS of them (> 0), or of SHARD_BYTES each (> 0),
 * or a default number when both are 0.  0, or -1 with ERR. */
int wc_plan_shards(struct wc_plan *p, long long shards, long long shard_bytes,
		   char *err, size_t n);
/* Write DIR/manifest (and each file's line offset).  0 or -1 with ERR. */
int wc_plan_manifest(struct wc_plan *p, const char *dir, char *err, size_t n);
/* Index of the first file of the shard starting at START (NFILES when no
 * file is left). */
size_t wc_plan_first_file(const struct wc_plan *p, uint64_t start);
/* The default number of shards for TOTAL bytes. */
uint64_t wc_plan_default_shards(uint64_t total);
void wc_plan_free(struct wc_plan *p);

#endif

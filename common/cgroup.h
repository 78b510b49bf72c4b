/*
 * cgroup: this process's memory cgroup, as the kernel shows it.
 *
 * Version 2 (one unified hierarchy, what most clusters run now) or
 * version 1 (a hierarchy of the memory controller's own).  A host may
 * mount both (hybrid): the memory controller is on one of them only, and
 * that is the one used.  Library code: it reads and writes the files,
 * never logs.
 */
#ifndef FT_CGROUP_H
#define FT_CGROUP_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

enum cg_version { CG_NONE = 0, CG_V1 = 1, CG_V2 = 2 };

/* Where a memory cgroup is. */
struct cg_where {
	enum cg_version v;
	char mount[PATH_MAX];		/* the hierarchy's mount point */
	char dir[PATH_MAX];		/* the cgroup's directory in it */
};

/* Locate, from the texts of /proc/self/cgroup and /proc/self/mountinfo,
 * the memory cgroup they describe into W.  V2 needs MEM_ON_V2: whether
 * the unified hierarchy has the memory controller (its root's
 * cgroup.controllers; -1: look).  0, or -1 with W->v CG_NONE when the
 * memory controller is mounted nowhere this process can see. */
int cg_locate(const char *cgroup_text, const char *mountinfo_text,
	      int mem_on_v2, struct cg_where *w);
/* cg_locate for this process.  0 or -1. */
int cg_self(struct cg_where *w);
/* The smallest memory limit of W's cgroup and its ancestors up to the
 * mount (v2 memory.max, v1 memory.limit_in_bytes): bytes, or UINT64_MAX
 * when there is none. */
uint64_t cg_mem_limit(const struct cg_where *w);

/* The number in file PATH ("max" is UINT64_MAX).  0, or -1 with errno. */
int cg_read_u64(const char *path, uint64_t *v);
/* The value of KEY in the flat keyed file PATH ("oom_kill 3" lines:
 * memory.events, memory.oom_control).  0, or -1 (no file, no key). */
int cg_read_key(const char *path, const char *key, uint64_t *v);
/* Write TEXT to the cgroup file PATH.  0, or -1 with errno. */
int cg_write(const char *path, const char *text);

#endif

/*
 * hostmem: how much memory this host gives a node's tasks by default.
 *
 * A node's "mem" when its config says none: what the host has (MemTotal,
 * or the limit of the memory cgroup it runs in when that is smaller: a
 * cluster started inside a job's allocation gets the job's share) less a
 * reserve for the system and ftfarm itself: a tenth, at most 2 GiB.
 */
#ifndef FT_HOSTMEM_H
#define FT_HOSTMEM_H

#include <stdint.h>

/* The host's memory as this process sees it (bytes; 0 when /proc cannot
 * tell). */
uint64_t hostmem_total(void);
/* TOTAL less the reserve. */
uint64_t hostmem_usable(uint64_t total);
/* hostmem_usable(hostmem_total()). */
uint64_t hostmem_default(void);
/* Keep the kernel's OOM killer off this process (the master, a node's
 * agent) before ordinary ones: oom_score_adj HOSTMEM_OOM_ADJ where it may
 * lower it (CAP_SYS_RESOURCE); tasks raise theirs to 1000, so that they
 * go first even where this cannot be done.  0, or -1 with errno. */
#define HOSTMEM_OOM_ADJ "-500"
int hostmem_oom_protect(void);

#endif

/* hostmem: the default memory of a node (hostmem.h). */
#include "hostmem.h"

#include <stdio.h>

#include "cgroup.h"

#define RESERVE_MAX (2ULL << 30)

uint64_t
hostmem_total(void)
{
	struct cg_where w;
	unsigned long long kib = 0;
	uint64_t total, lim;
	char line[256];
	FILE *f = fopen("/proc/meminfo", "re");

	if (f == NULL)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "MemTotal: %llu kB", &kib) == 1)
			break;
	fclose(f);
	total = (uint64_t)kib * 1024;
	if (cg_self(&w) == 0 && (lim = cg_mem_limit(&w)) < total)
		total = lim;
	return total;
}

uint64_t
hostmem_usable(uint64_t total)
{
	uint64_t reserve = total / 10;

	return total - (reserve > RESERVE_MAX ? RESERVE_MAX : reserve);
}

uint64_t
hostmem_default(void)
{
	return hostmem_usable(hostmem_total());
}

int
hostmem_oom_protect(void)
{
	return cg_write("/proc/self/oom_score_adj", HOSTMEM_OOM_ADJ);
}

/* hugeheap: a process's heap in transparent huge pages (see hugeheap.h). */
#include "hugeheap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

#define TUNABLES "GLIBC_TUNABLES"
#define HUGE_HEAP "glibc.malloc.hugetlb=1"
#define TUNABLES_WERE "FTFARM_TUNABLES_WERE"	/* "-": unset */
#define THP_MODES "/sys/kernel/mm/transparent_hugepage/enabled"

/* Does the kernel give transparent huge pages to a range that asks? */
static int
thp_offered(void)
{
	char modes[128] = "";
	FILE *f = fopen(THP_MODES, "re");

	if (f == NULL)
		return 0;
	if (fgets(modes, sizeof(modes), f) == NULL)
		modes[0] = '\0';
	fclose(f);
	return strstr(modes, "[always]") || strstr(modes, "[madvise]");
}

/* Put GLIBC_TUNABLES back as it was before hugeheap_exec: the processes
 * of exec tasks inherit the environment, and theirs is the user's. */
static void
tunables_restore(const char *were)
{
	if (were[0] == '=')
		setenv(TUNABLES, were + 1, 1);
	else
		unsetenv(TUNABLES);
	unsetenv(TUNABLES_WERE);
}

/* Have glibc ask for transparent huge pages for the heap.  A first
 * write to a fresh 4 KiB page costs 20-25 us on a VM that shadows its
 * page tables (0.1-0.3 us on bare metal), and a huge page is faulted in
 * once per 2 MiB: 0.3 us a 4 KiB page here.  What a process touches
 * afresh in bursts pays for it: a slot's word count buffers (some MiB,
 * about 800 faults per job), the master's tasks and an agent's relay
 * buffers in a first batch of 100,000 tasks (6,200 and 3,000 faults).
 * glibc reads its tunables once, when the process starts: the
 * environment must say so at the exec.  Nothing changes when the kernel
 * has THP off, or the user set the tunable either way.
 * Returns 1 if the environment now asks for huge pages (and says what
 * it was before), 0 if it is left alone. */
static int
ask_huge(void)
{
	const char *old = getenv(TUNABLES);
	char *want, *keep;

	if (getenv(TUNABLES_WERE) ||
	    (old && strstr(old, "glibc.malloc.hugetlb")) || !thp_offered())
		return 0;
	keep = old ? ft_asprintf("=%s", old) : ft_strdup("-");
	want = old && *old ? ft_asprintf("%s:" HUGE_HEAP, old)
			   : ft_strdup(HUGE_HEAP);
	setenv(TUNABLES_WERE, keep, 1);
	setenv(TUNABLES, want, 1);
	free(keep);
	free(want);
	return 1;
}

void
hugeheap_for_children(void)
{
	ask_huge();
}

void
hugeheap_exec(char **argv)
{
	const char *were = getenv(TUNABLES_WERE);
	char self[4096], *keep;
	ssize_t n;

	if (were) {			/* started with it: done */
		keep = ft_strdup(were);
		tunables_restore(keep);
		free(keep);
		return;
	}
	/* By its path: the process keeps its name (not "exe"). */
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0 || (size_t)n >= sizeof(self) - 1 || !ask_huge())
		return;
	self[n] = '\0';
	keep = ft_strdup(getenv(TUNABLES_WERE));
	execv(self, argv);
	tunables_restore(keep);	/* no exec: small pages then */
	free(keep);
}

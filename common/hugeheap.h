/*
 * hugeheap: a process's heap in transparent huge pages.
 *
 * glibc reads its tunables once, when a process starts.  A program that
 * wants its heap in huge pages calls hugeheap_exec first thing: it execs
 * itself once with glibc.malloc.hugetlb=1 (the exec keeps the pid, the
 * start time and the descriptors), and the second run puts the variable
 * back as it was, so that what the process starts gets the user's.  The
 * agent also puts the setting in the environment its slots start with,
 * which saves each slot that exec.
 */
#ifndef FT_HUGEHEAP_H
#define FT_HUGEHEAP_H

/* Call first thing in main with its ARGV: returns at once in the second
 * run, when the kernel offers no huge pages, or when the user set the
 * tunable; else execs the program again (and returns only if that
 * fails). */
void hugeheap_exec(char **argv);
/* Ask for huge heaps in the environment this process's children start
 * with (the agent, for its slots: it saves each slot an exec). */
void hugeheap_for_children(void);

#endif

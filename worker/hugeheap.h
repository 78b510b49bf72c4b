/*
 * hugeheap: a slot's heap in transparent huge pages.
 *
 * glibc reads its tunables once, when a process starts: the agent puts
 * glibc.malloc.hugetlb=1 in the environment its slots start with, and a
 * slot started some other way execs itself once with it (the exec keeps
 * the pid, the start time and the descriptors).  A slot puts the variable
 * back as it was, for the tasks it starts.
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

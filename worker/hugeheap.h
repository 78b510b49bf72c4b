/*
 * hugeheap: a slot's heap in transparent huge pages.
 *
 * glibc reads its tunables once, when a process starts, so the process
 * execs itself once with glibc.malloc.hugetlb=1 added (the exec keeps the
 * pid, the start time and the descriptors), and puts the variable back as
 * it was in the second run, for the tasks it starts.
 */
#ifndef FT_HUGEHEAP_H
#define FT_HUGEHEAP_H

/* Call first thing in main with its ARGV: returns at once in the second
 * run, when the kernel offers no huge pages, or when the user set the
 * tunable; else execs the program again (and returns only if that
 * fails). */
void hugeheap_exec(char **argv);

#endif

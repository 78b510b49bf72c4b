/*
 * reaper: the directories of forgotten batches removed off the loop.
 *
 * A forgotten batch's directory is first renamed on the loop (to
 * batches/forgotten.ID: at once nobody finds it by its id), then handed
 * here: a thread of its own removes it, however many files its job left
 * and however slow the file system.  Before it removes the newest batch
 * given, it writes batches/last_id (synced), so that a restarted master
 * never gives an id again whose directory is gone (any other's is below
 * a directory that stays).  It
 * writes only while the master holds the state dir's lease.  (batches.c
 * reads batches/last_id back at a start.)
 */
#ifndef FT_REAPER_H
#define FT_REAPER_H

#include <stddef.h>

struct master;

/* Start the thread.  0, or -1 with ERR. */
int reaper_start(struct master *m, char *err, size_t n);
/* Remove DIR (a new string: taken over) once batches/last_id says at
 * least LAST_ID. */
void reaper_remove(struct master *m, char *dir, long last_id);
/* Directories handed and not yet removed. */
int reaper_pending(void);
/* Remove what is handed, then stop the thread. */
void reaper_stop(struct master *m);

#endif

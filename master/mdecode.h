/*
 * mdecode: MUNGE credentials decoded on threads, off the loop.
 *
 * munge_decode asks munged over its unix socket and blocks until munged
 * answers.  A munged that hangs (stopped, swapped out, overloaded) holds
 * each call for libmunge's own bound: 5 tries of 2 s (libmunge 0.5.15:
 * MUNGE_SOCKET_RETRY_ATTEMPTS, MUNGE_SOCKET_TIMEOUT_MSECS; no MUNGE_OPT_*
 * changes them), about 10 s, and again for the next credential.  Here a
 * fixed set of threads makes the calls, fed through a bounded queue; each
 * answer comes back to the loop through an ev_async and is handed to its
 * caller there.  A call stuck in munged holds one thread, never more
 * threads or descriptors; a caller that stops waiting (its own deadline)
 * cancels its decode, and mdecode_free never waits for a stuck one: the
 * threads leave on their own once their call returns, or with the
 * process.
 */
#ifndef FT_MDECODE_H
#define FT_MDECODE_H

#include <ev.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct mdecode;

/* What munged said of one credential. */
struct mdecode_result {
	int ok;				/* decoded: uid, gid, payload */
	int munged_failed;		/* !ok because munged could not be
					 * asked or did not answer (not the
					 * credential's fault) */
	char error[256];		/* why not, when !ok */
	uid_t uid;
	gid_t gid;
	const void *payload;		/* valid during the callback only */
	int len;
};

/* Called on the loop with the decode of the credential given to
 * mdecode_submit, unless cancelled first. */
typedef void (*mdecode_fn)(void *arg, const struct mdecode_result *res);

/* Decode with munged at SOCKET (NULL: libmunge's default) on THREADS
 * threads, holding at most MAX_QUEUED credentials not yet taken by one.
 * Answers come on LOOP.  The decoder, or NULL with ERR. */
struct mdecode *mdecode_new(struct ev_loop *loop, const char *socket,
			    int threads, int max_queued, char *err, size_t n);
/* Queue CRED (copied) for decoding; DONE(ARG, ...) on the loop once
 * munged answered.  The job's id (never 0), or 0 when the queue is full
 * (DONE is then never called). */
uint64_t mdecode_submit(struct mdecode *d, const char *cred, mdecode_fn done,
			void *arg);
/* Forget job ID: its DONE is never called.  A queued job is dropped; one
 * in munged's hands goes on there and its answer is thrown away. */
void mdecode_cancel(struct mdecode *d, uint64_t id);
/* Threads in a call to munged now, and the longest such call so far in
 * seconds (0 when none). */
int mdecode_busy(struct mdecode *d, double *longest);
/* Stop: queued jobs are dropped, no DONE is called from now on.  Never
 * waits for a call stuck in munged. */
void mdecode_free(struct mdecode *d);

#endif

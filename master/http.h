/*
 * http: the master's HTTP listener, read-only, off unless the config has
 * "http" (see config.h):
 *
 *   GET /             the status page (page.html: one self-contained page
 *                     that polls /status.json)
 *   GET /metrics      the Prometheus exposition (metrics.h)
 *   GET /status.json  the status answer (its batches: the running ones
 *                     and the latest finished) with the latest events
 *
 * libmicrohttpd serves on a thread of its own and never touches the
 * master's state.  It serves a snapshot: the texts above, built by the
 * loop and swapped in under a lock.  A request that finds the snapshot
 * older than SNAPSHOT_MAX_AGE asks the loop for a new one (ev_async) and
 * waits for it at most SNAPSHOT_WAIT, then serves what there is: a loop
 * that is busy delays an answer, never the other way round, and the loop
 * builds at most one snapshot per request burst, only when asked.
 * Connections are capped in number and time; a client that does not read
 * holds a connection, not the loop.
 */
#ifndef FT_HTTP_H
#define FT_HTTP_H

#include <stddef.h>

struct master;
struct http;

#define SNAPSHOT_MAX_AGE 0.25		/* seconds */
#define SNAPSHOT_WAIT 0.25		/* seconds */

/* Listen as M's config says (nothing when it has no "http"): m->http is
 * set, or stays NULL.  0, or -1 with ERR (the address is taken, ...). */
int http_open(struct master *m, char *err, size_t n);
/* Stop the thread, close the listener (m->http becomes NULL). */
void http_close(struct master *m);
/* "http://127.0.0.1:9750/", or NULL when H is NULL. */
const char *http_url(const struct http *h);

/* The status page (page.c: page.html as it is in the source tree). */
extern const char ft_page_html[];
extern const size_t ft_page_html_len;

#endif

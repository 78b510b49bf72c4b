/* http: the master's HTTP listener (see http.h). */
#include "http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "expo.h"
#include "log.h"
#include "master.h"
#include "metrics.h"

#define MAX_CONNECTIONS 128
#define CONNECTION_TIMEOUT 10		/* seconds a connection may idle */
#define RECENT_EVENTS 20		/* in status.json */
#define RECENT_FINISHED 20		/* finished batches in status.json */

/* What the thread serves, built by the loop. */
struct snap {
	int refs;			/* under the lock */
	double built;			/* monotonic */
	struct ft_buf metrics;
	struct ft_buf status;
};

struct http {
	struct master *m;
	struct MHD_Daemon *d;
	int loopback;			/* bound to a loopback address */
	char url[128];
	char *state_dir;
	ev_async wake;			/* the thread asks for a snapshot */
	pthread_mutex_t lock;
	pthread_cond_t fresh;		/* a new snapshot is in */
	struct snap *snap;		/* the latest, or NULL */
	int asked;			/* a snapshot was asked for */
	atomic_ullong requests;		/* answered */
	uint64_t builds;		/* snapshots built (the loop's) */
	double build_seconds;		/* the loop's time in them */
};

const char *
http_url(const struct http *h)
{
	return h ? h->url : NULL;
}

/* ---- snapshots (built on the loop's thread) ---- */

static void
snap_unref(struct http *h, struct snap *s)
{
	int last;

	if (s == NULL)
		return;
	pthread_mutex_lock(&h->lock);
	last = --s->refs == 0;
	pthread_mutex_unlock(&h->lock);
	if (last) {
		ft_buf_free(&s->metrics);
		ft_buf_free(&s->status);
		free(s);
	}
}

/* status.json: the status with the latest events. */
static void
build_status(struct http *h, struct ft_buf *out)
{
	json_t *st = h->m->up.status(h->m, RECENT_FINISHED);
	char *text = json_dumps(st, JSON_COMPACT);
	size_t len = text ? strlen(text) : 0;

	if (len < 2) {
		ft_buf_adds(out, "{}");
	} else {
		ft_buf_add(out, text, len - 1);		/* open: no "}" */
		ft_buf_printf(out, ",\"time\":%.3f,\"events\":", ft_wall());
		h->m->up.recent(h->m->subs, RECENT_EVENTS, out);
		ft_buf_add(out, "}", 1);
	}
	free(text);
	json_decref(st);
}

/* The listener's own figures: its requests, and what the snapshots cost
 * the loop (up to the previous one). */
static void
own_metrics(struct http *h, struct ft_buf *b)
{
	expo_family(b, "ftfarm_http_requests_total", "counter",
		    "HTTP requests answered");
	expo_sample(b, "ftfarm_http_requests_total", NULL, 0,
		    (double)atomic_load(&h->requests));
	expo_family(b, "ftfarm_snapshots_built_total", "counter",
		    "Snapshots of the figures the loop built for HTTP");
	expo_sample(b, "ftfarm_snapshots_built_total", NULL, 0,
		    (double)h->builds);
	expo_family(b, "ftfarm_snapshot_build_seconds_total", "counter",
		    "Seconds the loop spent building them");
	expo_sample(b, "ftfarm_snapshot_build_seconds_total", NULL, 0,
		    h->build_seconds);
}

static void
snap_build(struct http *h)
{
	struct snap *s = ft_calloc(1, sizeof(*s)), *old;
	double t0 = ft_now();

	s->refs = 1;
	metrics_write(h->m, &s->metrics);
	own_metrics(h, &s->metrics);
	build_status(h, &s->status);
	s->built = ft_now();
	h->builds++;
	h->build_seconds += s->built - t0;
	pthread_mutex_lock(&h->lock);
	old = h->snap;
	h->snap = s;
	h->asked = 0;
	pthread_cond_broadcast(&h->fresh);
	pthread_mutex_unlock(&h->lock);
	snap_unref(h, old);
}

/* The thread asked for a snapshot. */
static void
on_wake(struct ev_loop *loop, ev_async *w, int revents)
{
	(void)loop, (void)revents;
	snap_build(w->data);
}

/* ---- serving (on libmicrohttpd's thread) ---- */

/* A snapshot at most SNAPSHOT_MAX_AGE old if the loop makes one within
 * SNAPSHOT_WAIT, else the latest (NULL if none yet).  Release it with
 * snap_unref. */
static struct snap *
snap_get(struct http *h)
{
	struct timespec until;
	struct snap *s;
	double wait = SNAPSHOT_WAIT;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += (time_t)wait;
	until.tv_nsec += (long)((wait - (double)(time_t)wait) * 1e9);
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&h->lock);
	while (h->snap == NULL ||
	       ft_now() - h->snap->built > SNAPSHOT_MAX_AGE) {
		if (!h->asked) {
			h->asked = 1;
			ev_async_send(h->m->loop, &h->wake);
		}
		if (pthread_cond_timedwait(&h->fresh, &h->lock, &until) ==
		    ETIMEDOUT)
			break;
	}
	if ((s = h->snap) != NULL)
		s->refs++;
	pthread_mutex_unlock(&h->lock);
	return s;
}

/* /metrics: the snapshot's, with the figures the thread reads itself. */
static char *
metrics_body(struct http *h, const struct snap *s, size_t *len)
{
	struct ft_buf b = { 0 };
	struct statvfs fs;

	ft_buf_add(&b, s->metrics.data, s->metrics.len);
	expo_family(&b, "ftfarm_snapshot_age_seconds", "gauge",
		    "Age of the figures served (built by the master's loop)");
	expo_sample(&b, "ftfarm_snapshot_age_seconds", NULL, 0,
		    ft_now() - s->built);
	if (statvfs(h->state_dir, &fs) == 0) {
		expo_family(&b, "ftfarm_state_dir_free_bytes", "gauge",
			    "Bytes free for the master in its state directory");
		expo_sample(&b, "ftfarm_state_dir_free_bytes", NULL, 0,
			    (double)fs.f_bavail * (double)fs.f_frsize);
	}
	*len = b.len;
	return b.data;
}

static enum MHD_Result
respond(struct MHD_Connection *conn, unsigned code, const char *type,
	void *body, size_t len, enum MHD_ResponseMemoryMode mode)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(len, body,
								 mode);
	enum MHD_Result rc;

	if (r == NULL)
		return MHD_NO;
	MHD_add_response_header(r, "Content-Type", type);
	MHD_add_response_header(r, "Cache-Control", "no-store");
	MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
	if (code == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(r, "Allow", "GET, HEAD");
	if (strncmp(type, "text/html", 9) == 0)
		MHD_add_response_header(r, "Content-Security-Policy",
					"default-src 'none'; "
					"script-src 'unsafe-inline'; "
					"style-src 'unsafe-inline'; "
					"connect-src 'self'; img-src data:; "
					"base-uri 'none'; form-action 'none'; "
					"frame-ancestors 'none'");
	rc = MHD_queue_response(conn, code, r);
	MHD_destroy_response(r);
	return rc;
}

static enum MHD_Result
text(struct MHD_Connection *conn, unsigned code, const char *msg)
{
	return respond(conn, code, "text/plain; charset=utf-8", (void *)msg,
		       strlen(msg), MHD_RESPMEM_PERSISTENT);
}

/* Bound to the loopback, only a loopback name may be asked for: a web
 * page of elsewhere cannot read us through a name of its own pointed at
 * 127.0.0.1 (DNS rebinding). */
static int
host_ok(const struct http *h, struct MHD_Connection *conn)
{
	const char *host = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
						       "Host");
	struct in_addr a;
	char name[64];
	size_t n;

	if (!h->loopback || host == NULL)
		return 1;
	if (strncmp(host, "[::1]", 5) == 0)
		return host[5] == '\0' || host[5] == ':';
	n = strcspn(host, ":");
	if (n >= sizeof(name))
		return 0;
	memcpy(name, host, n);
	name[n] = '\0';
	return strcmp(name, "localhost") == 0 ||
	       (inet_pton(AF_INET, name, &a) == 1 &&
		(ntohl(a.s_addr) >> 24) == 127);
}

/* Serve snapshot part PATH ("/metrics" or "/status.json"). */
static enum MHD_Result
serve_snapshot(struct http *h, struct MHD_Connection *conn, const char *path)
{
	struct snap *s = snap_get(h);
	enum MHD_Result rc;
	char *body;
	size_t len;

	if (s == NULL)
		return text(conn, MHD_HTTP_SERVICE_UNAVAILABLE,
			    "the master is busy; try again\n");
	if (strcmp(path, "/metrics") == 0) {
		body = metrics_body(h, s, &len);
		rc = respond(conn, MHD_HTTP_OK, "text/plain; version=0.0.4; "
			     "charset=utf-8", body, len, MHD_RESPMEM_MUST_FREE);
	} else {
		rc = respond(conn, MHD_HTTP_OK, "application/json",
			     s->status.data, s->status.len,
			     MHD_RESPMEM_MUST_COPY);
	}
	snap_unref(h, s);
	return rc;
}

static enum MHD_Result
on_request(void *cls, struct MHD_Connection *conn, const char *url,
	   const char *method, const char *version, const char *upload,
	   size_t *upload_size, void **con_cls)
{
	struct http *h = cls;

	(void)version, (void)upload, (void)upload_size, (void)con_cls;
	atomic_fetch_add(&h->requests, 1);
	if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
		return text(conn, MHD_HTTP_METHOD_NOT_ALLOWED,
			    "read-only: GET only\n");
	if (!host_ok(h, conn))
		return text(conn, MHD_HTTP_MISDIRECTED_REQUEST,
			    "unknown host name\n");
	if (strcmp(url, "/") == 0)
		return respond(conn, MHD_HTTP_OK, "text/html; charset=utf-8",
			       (void *)ft_page_html, ft_page_html_len,
			       MHD_RESPMEM_PERSISTENT);
	if (strcmp(url, "/metrics") == 0 || strcmp(url, "/status.json") == 0)
		return serve_snapshot(h, conn, url);
	return text(conn, MHD_HTTP_NOT_FOUND,
		    "not found: try /, /metrics or /status.json\n");
}

/* ---- the listener ---- */

/* H's URL and whether it is on the loopback, from its bound address SA. */
static void
set_url(struct http *h, const struct sockaddr_storage *sa)
{
	char addr[INET6_ADDRSTRLEN];

	if (sa->ss_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const void *)sa;

		inet_ntop(AF_INET6, &s6->sin6_addr, addr, sizeof(addr));
		h->loopback = IN6_IS_ADDR_LOOPBACK(&s6->sin6_addr);
		snprintf(h->url, sizeof(h->url), "http://[%s]:%d/", addr,
			 ntohs(s6->sin6_port));
	} else {
		const struct sockaddr_in *s4 = (const void *)sa;

		inet_ntop(AF_INET, &s4->sin_addr, addr, sizeof(addr));
		h->loopback = (ntohl(s4->sin_addr.s_addr) >> 24) == 127;
		snprintf(h->url, sizeof(h->url), "http://%s:%d/", addr,
			 ntohs(s4->sin_port));
	}
}

/* A listening socket at HOST:PORT, its URL in H.  The fd, or -1 with
 * ERR. */
static int
listen_at(struct http *h, const char *host, int port, char *err, size_t n)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE | AI_NUMERICSERV };
	struct addrinfo *ai = NULL;
	struct sockaddr_storage sa;
	socklen_t salen = sizeof(sa);
	char ports[16];
	int fd = -1, one = 1, rc;

	snprintf(ports, sizeof(ports), "%d", port);
	if ((rc = getaddrinfo(host, ports, &hints, &ai)) != 0) {
		snprintf(err, n, "http.listen: %s: %s", host, gai_strerror(rc));
		return -1;
	}
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd == -1 ||
	    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(fd, ai->ai_addr, ai->ai_addrlen) == -1 ||
	    listen(fd, 256) == -1 ||
	    getsockname(fd, (struct sockaddr *)&sa, &salen) == -1) {
		snprintf(err, n, "http.listen: %s:%d: %s", host, port,
			 strerror(errno));
		if (fd != -1)
			close(fd);
		fd = -1;
	} else {
		set_url(h, &sa);
	}
	freeaddrinfo(ai);
	return fd;
}

/* Start libmicrohttpd on FD with every signal blocked in its thread (the
 * loop handles them).  The daemon, or NULL.  poll(), not epoll: with
 * libmicrohttpd 0.9.75's edge-triggered epoll, a client that sent half a
 * request and closed stayed in CLOSE-WAIT until the connection timeout,
 * and a stream of them filled the connection cap. */
static struct MHD_Daemon *
start_daemon(struct http *h, int fd)
{
	sigset_t all, old;
	struct MHD_Daemon *d;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	d = MHD_start_daemon(MHD_USE_POLL_INTERNAL_THREAD, 0, NULL, NULL,
			     on_request, h,
			     MHD_OPTION_LISTEN_SOCKET, fd,
			     MHD_OPTION_CONNECTION_LIMIT,
			     (unsigned)MAX_CONNECTIONS,
			     MHD_OPTION_CONNECTION_TIMEOUT,
			     (unsigned)CONNECTION_TIMEOUT,
			     MHD_OPTION_END);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return d;
}

static void
http_free(struct http *h)
{
	pthread_mutex_destroy(&h->lock);
	pthread_cond_destroy(&h->fresh);
	free(h->state_dir);
	free(h);
}

int
http_open(struct master *m, char *err, size_t n)
{
	struct http *h;
	int fd;

	m->http = NULL;
	if (!m->cfg.http)
		return 0;
	h = ft_calloc(1, sizeof(*h));
	h->m = m;
	h->state_dir = ft_strdup(m->cfg.state_dir);
	pthread_mutex_init(&h->lock, NULL);
	pthread_cond_init(&h->fresh, NULL);
	ev_async_init(&h->wake, on_wake);
	h->wake.data = h;
	ev_async_start(m->loop, &h->wake);
	if ((fd = listen_at(h, m->cfg.http_host, m->cfg.http_port, err,
			    n)) == -1)
		goto fail;
	if ((h->d = start_daemon(h, fd)) == NULL) {
		snprintf(err, n, "http: cannot start the listener on %s",
			 h->url);
		close(fd);
		goto fail;
	}
	m->http = h;
	log_info("http: serving %s (metrics, status.json, the status page)",
		 h->url);
	return 0;
fail:
	ev_async_stop(m->loop, &h->wake);
	http_free(h);
	return -1;
}

void
http_close(struct master *m)
{
	struct http *h = m->http;

	if (h == NULL)
		return;
	MHD_stop_daemon(h->d);		/* joins its thread, closes the fd */
	ev_async_stop(m->loop, &h->wake);
	snap_unref(h, h->snap);
	http_free(h);
	m->http = NULL;
}

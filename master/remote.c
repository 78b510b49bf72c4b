/* remote: control clients over TCP, authenticated by MUNGE (remote.h). */
#include "remote.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "control.h"
#include "log.h"
#include "mdecode.h"
#include "rauth.h"
#include "util.h"

/* Connections still greeting at once: past it, newcomers are refused. */
#define MAX_GREETING 64
/* Threads that ask munged: a munged that hangs holds them, never more. */
#define DECODE_THREADS 2

struct greeting {
	struct remote *r;
	int fd;
	char peer[64];			/* address:port, for the log */
	char nonce[RAUTH_NONCE_HEX + 1];
	char in[RAUTH_MAX_LINE + 2];
	size_t len;
	size_t line_len;		/* the credential's line, once whole */
	enum rauth_role role;		/* what it greets as */
	uint64_t decoding;		/* its decode (mdecode.h), or 0 */
	ev_io rio;
	ev_timer timeout;		/* the greeting's, then munged's */
	struct greeting *next;
};

struct remote {
	struct ev_loop *loop;
	struct control *ctl;
	struct mdecode *decoder;	/* munge_decode off the loop */
	int fd;
	ev_io io;
	ev_timer retry;			/* accept again after EMFILE */
	unsigned mode;			/* the control socket's mode ... */
	gid_t group;			/* ... and group, for the same roles */
	char *published;		/* <state_dir>/control.tcp */
	char *address;			/* HOST:PORT as published */
	remote_join_fn joiner;		/* agents' connections go there */
	void *joiner_ctx;
	struct greeting *greetings;
	int ngreetings;
};

/* ---- who may connect ---- */

/* Is UID (primary group GID) a member of group G? */
static int
in_group(uid_t uid, gid_t gid, gid_t g)
{
	struct passwd *pw;
	gid_t groups[256];
	int n = 256, i;

	if (gid == g)
		return 1;
	pw = getpwuid(uid);
	if (pw == NULL || getgrouplist(pw->pw_name, gid, groups, &n) == -1)
		return 0;
	for (i = 0; i < n; i++)
		if (groups[i] == g)
			return 1;
	return 0;
}

/* Could UID/GID connect to the control socket (its mode and group)? */
static int
may_connect(const struct remote *r, uid_t uid, gid_t gid)
{
	if (uid == 0)
		return 1;
	if (uid == getuid())
		return (r->mode & 0200) != 0;
	if (in_group(uid, gid, r->group))
		return (r->mode & 0020) != 0;
	return (r->mode & 0002) != 0;
}

/* ---- greetings ---- */

/* Forget G (its connection is closed or adopted); a decode still under
 * way for it is cancelled. */
static void
greeting_free(struct greeting *g)
{
	struct remote *r = g->r;
	struct greeting **p;

	for (p = &r->greetings; *p; p = &(*p)->next)
		if (*p == g) {
			*p = g->next;
			break;
		}
	r->ngreetings--;
	if (g->decoding)
		mdecode_cancel(r->decoder, g->decoding);
	ev_io_stop(r->loop, &g->rio);
	ev_timer_stop(r->loop, &g->timeout);
	free(g);
}

/* Refuse G: tell it why (one line) and close it.  What it sent and was
 * not read is read first (a bounded amount), or closing would reset the
 * connection and the reason could be lost. */
static void
greeting_refuse(struct greeting *g, const char *why)
{
	char *line = rauth_verdict(why, 0, 0), sink[4096];
	int k;

	log_info("control: %s refused: %s", g->peer, why);
	(void)!write(g->fd, line, strlen(line));
	free(line);
	shutdown(g->fd, SHUT_WR);
	for (k = 0; k < 16 && read(g->fd, sink, sizeof(sink)) > 0; k++)
		;
	close(g->fd);
	greeting_free(g);
}

/* G is UID/GID, vouched for by munged: tell it, and hand its connection
 * (with what it sent after its credential) to the control layer. */
static void
greeting_accept(struct greeting *g, uid_t uid, gid_t gid)
{
	char *verdict = rauth_verdict(NULL, (unsigned)uid, (unsigned)gid);
	size_t rest = g->len - g->line_len - 1;
	int fd = g->fd;

	log_info("control: %s authenticated as uid %u gid %u", g->peer,
		 (unsigned)uid, (unsigned)gid);
	if (ft_write_all(fd, verdict, strlen(verdict)) == -1) {
		free(verdict);
		close(fd);
		greeting_free(g);
		return;
	}
	free(verdict);
	memmove(g->in, g->in + g->line_len + 1, rest);
	if (g->role == RAUTH_AGENT)
		g->r->joiner(g->r->joiner_ctx, fd, g->peer, g->in, rest);
	else
		control_adopt(g->r->ctl, fd, uid, g->in, rest);
	greeting_free(g);
}

/* Why G, vouched for as UID/GID, may not go on, into WHY; NULL if it
 * may. */
static const char *
refusal(const struct greeting *g, uid_t uid, gid_t gid, char *why, size_t n)
{
	if (g->role == RAUTH_AGENT && uid != getuid()) {
		ft_snprintf(why, n, "uid %u may not join nodes to this cluster: "
			    "only its owner (uid %u) may", (unsigned)uid,
			    (unsigned)getuid());
		return why;
	}
	if (g->role == RAUTH_AGENT && g->r->joiner == NULL) {
		ft_snprintf(why, n, "this master takes no joining nodes "
			    "(join.max_nodes is 0)");
		return why;
	}
	if (g->role == RAUTH_CLIENT && !may_connect(g->r, uid, gid)) {
		ft_snprintf(why, n, "uid %u may not use this cluster's control "
			    "socket", (unsigned)uid);
		return why;
	}
	return NULL;
}

/* mdecode_fn: munged answered for G's credential. */
static void
on_decoded(void *arg, const struct mdecode_result *res)
{
	struct greeting *g = arg;
	char why[320];

	g->decoding = 0;
	if (!res->ok)
		ft_snprintf(why, sizeof(why), "%s: %s", res->munged_failed ?
			    "munged failed" : "credential refused", res->error);
	else if (!rauth_payload_ok(g->nonce, res->payload, res->len))
		ft_snprintf(why, sizeof(why), "credential refused: not made "
			    "for this connection");
	else if (refusal(g, res->uid, res->gid, why, sizeof(why)) == NULL) {
		greeting_accept(g, res->uid, res->gid);
		return;
	}
	greeting_refuse(g, why);
}

/* G sent its greeting line (g->line_len bytes): have munged decode its
 * credential off the loop, within RAUTH_MUNGE_WAIT seconds; or refuse
 * it at once (malformed, or munged known to hang). */
static void
greeting_line(struct greeting *g)
{
	struct remote *r = g->r;
	char why[256], *cred = NULL;
	double stuck;

	if (rauth_parse_reply(g->in, g->line_len, &cred, &g->role, why,
			      sizeof(why)) == -1) {
		free(cred);
		greeting_refuse(g, why);
		return;
	}
	if (mdecode_busy(r->decoder, &stuck) >= DECODE_THREADS &&
	    stuck > RAUTH_MUNGE_WAIT) {
		ft_snprintf(why, sizeof(why), "munged has not answered for "
			    "%.0f s", stuck);
		g->decoding = 0;
	} else if ((g->decoding = mdecode_submit(r->decoder, cred, on_decoded,
						g)) == 0) {
		ft_snprintf(why, sizeof(why), "too many credentials waiting "
			    "for munged");
	}
	free(cred);
	if (g->decoding == 0) {
		greeting_refuse(g, why);
		return;
	}
	/* What it sends meanwhile waits in its socket. */
	ev_io_stop(r->loop, &g->rio);
	ev_timer_stop(r->loop, &g->timeout);
	ev_timer_set(&g->timeout, RAUTH_MUNGE_WAIT, 0);
	ev_timer_start(r->loop, &g->timeout);
}

static void
on_greeting(struct ev_loop *loop, ev_io *io, int revents)
{
	struct greeting *g = io->data;
	ssize_t k;
	long len;

	(void)loop, (void)revents;
	k = read(g->fd, g->in + g->len, sizeof(g->in) - g->len);
	if (k == -1 && (errno == EINTR || errno == EAGAIN))
		return;
	if (k <= 0) {
		close(g->fd);
		greeting_free(g);
		return;
	}
	g->len += (size_t)k;
	len = rauth_line(g->in, g->len);
	if (len == -2) {
		greeting_refuse(g, "greeting too long");
	} else if (len >= 0) {
		g->line_len = (size_t)len;
		greeting_line(g);
	}
}

/* The greeting took too long: no credential came, or munged did not
 * decode it in time (its decode is cancelled with the greeting). */
static void
on_greeting_timeout(struct ev_loop *loop, ev_timer *t, int revents)
{
	struct greeting *g = t->data;
	char why[128];

	(void)loop, (void)revents;
	if (g->decoding)
		ft_snprintf(why, sizeof(why), "munged did not answer within "
			    "%.0f s", RAUTH_MUNGE_WAIT);
	else
		ft_snprintf(why, sizeof(why), "no credential in time");
	greeting_refuse(g, why);
}

/* ---- the listener ---- */

/* A new connection FD from SA: greet it with a nonce. */
static void
greet(struct remote *r, int fd, const struct sockaddr_storage *sa)
{
	struct greeting *g = ft_calloc(1, sizeof(*g));
	char host[48] = "?", *hello;

	getnameinfo((const struct sockaddr *)sa, sizeof(*sa), host,
		    sizeof(host), NULL, 0, NI_NUMERICHOST);
	snprintf(g->peer, sizeof(g->peer), "%s", host);
	g->r = r;
	g->fd = fd;
	g->next = r->greetings;
	r->greetings = g;
	r->ngreetings++;
	ev_io_init(&g->rio, on_greeting, fd, EV_READ);
	ev_timer_init(&g->timeout, on_greeting_timeout, RAUTH_TIMEOUT, 0);
	g->rio.data = g->timeout.data = g;
	if (r->ngreetings > MAX_GREETING) {
		greeting_refuse(g, "too many connections being authenticated");
		return;
	}
	if (rauth_nonce(g->nonce) == -1) {
		greeting_refuse(g, "no random bytes for a nonce");
		return;
	}
	hello = rauth_hello(g->nonce);
	/* A fresh socket's buffer takes these few bytes at once. */
	if (write(fd, hello, strlen(hello)) != (ssize_t)strlen(hello)) {
		close(fd);
		greeting_free(g);
	} else {
		ev_io_start(r->loop, &g->rio);
		ev_timer_start(r->loop, &g->timeout);
	}
	free(hello);
}

static void
on_accept(struct ev_loop *loop, ev_io *io, int revents)
{
	struct remote *r = io->data;
	struct sockaddr_storage sa;
	socklen_t len;
	int fd, k;

	(void)revents;
	for (k = 0; k < 64; k++) {
		len = sizeof(sa);
		fd = accept4(r->fd, (struct sockaddr *)&sa, &len,
			     SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd >= 0) {
			greet(r, fd, &sa);
			continue;
		}
		if (errno == EMFILE || errno == ENFILE) {
			log_warnx("control: TCP: out of file descriptors");
			ev_io_stop(loop, &r->io);
			ev_timer_start(loop, &r->retry);
		}
		return;
	}
}

static void
on_retry(struct ev_loop *loop, ev_timer *t, int revents)
{
	struct remote *r = t->data;

	(void)revents;
	if (r->fd >= 0)
		ev_io_start(loop, &r->io);
}

/* Bind and listen at HOST:PORT.  0, or -1 with ERR. */
static int
listen_tcp(struct remote *r, const char *host, int port, char *err, size_t n)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE | AI_NUMERICSERV };
	struct addrinfo *ai = NULL;
	char serv[16];
	int one = 1, e;

	snprintf(serv, sizeof(serv), "%d", port);
	if ((e = getaddrinfo(host, serv, &hints, &ai)) != 0) {
		ft_snprintf(err, n, "control.listen: %s: %s", host,
			    gai_strerror(e));
		return -1;
	}
	r->fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK |
		       SOCK_CLOEXEC, 0);
	if (r->fd == -1 ||
	    setsockopt(r->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(r->fd, ai->ai_addr, ai->ai_addrlen) == -1 ||
	    listen(r->fd, 128) == -1) {
		ft_snprintf(err, n, "control.listen: %s:%d: %s", host, port,
			    strerror(errno));
		freeaddrinfo(ai);
		return -1;
	}
	freeaddrinfo(ai);
	return 0;
}

/* ---- the published address ---- */

/* Is the IPv4 address A in the subnet NET ("10.0.0.0/24")? */
static int
in_subnet(const struct in_addr *a, const char *net)
{
	char base[64], *slash;
	struct in_addr b;
	long bits;
	uint32_t mask;

	snprintf(base, sizeof(base), "%s", net);
	if ((slash = strchr(base, '/')) == NULL)
		return 0;
	*slash = '\0';
	bits = strtol(slash + 1, NULL, 10);
	if (inet_pton(AF_INET, base, &b) != 1 || bits < 0 || bits > 32)
		return 0;
	mask = bits ? htonl(~0u << (32 - bits)) : 0;
	return (a->s_addr & mask) == (b.s_addr & mask);
}

/* An IPv4 address of this host into OUT: on NET when given, else the
 * first that is not the loopback.  0, or -1 for none. */
static int
host_address(const char *net, char *out, size_t n)
{
	struct ifaddrs *ifs, *i;
	int rc = -1;

	if (getifaddrs(&ifs) == -1)
		return -1;
	for (i = ifs; i && rc == -1; i = i->ifa_next) {
		struct in_addr *a;

		if (i->ifa_addr == NULL || i->ifa_addr->sa_family != AF_INET)
			continue;
		a = &((struct sockaddr_in *)i->ifa_addr)->sin_addr;
		if (net ? !in_subnet(a, net) :
		    (ntohl(a->s_addr) >> 24) == 127)
			continue;
		if (inet_ntop(AF_INET, a, out, (socklen_t)n))
			rc = 0;
	}
	freeifaddrs(ifs);
	return rc;
}

/* The host others reach us at, into OUT: the listen host unless it is a
 * wildcard; else an address on NET, else this host's name. */
static void
reachable_host(const char *listen_host, const char *net, char *out, size_t n)
{
	int wild = strcmp(listen_host, "0.0.0.0") == 0 ||
		   strcmp(listen_host, "::") == 0 ||
		   strcmp(listen_host, "*") == 0;

	if (!wild)
		snprintf(out, n, "%s", listen_host);
	else if (host_address(net, out, n) == 0)
		return;
	else if (gethostname(out, n) == -1)
		snprintf(out, n, "127.0.0.1");
}

void
remote_unpublish(const char *state_dir)
{
	char *path = ft_asprintf("%s/control.tcp", state_dir);

	unlink(path);
	free(path);
}

/* Write <state_dir>/control.tcp.  0, or -1 with ERR. */
static int
publish(struct remote *r, const struct ft_config *cfg, char *err, size_t n)
{
	struct sockaddr_storage sa;
	socklen_t len = sizeof(sa);
	char host[256], serv[16], *text;
	json_t *o;
	int rc;

	if (getsockname(r->fd, (struct sockaddr *)&sa, &len) == -1 ||
	    getnameinfo((struct sockaddr *)&sa, len, NULL, 0, serv,
			sizeof(serv), NI_NUMERICSERV) != 0) {
		ft_snprintf(err, n, "control.listen: %s", strerror(errno));
		return -1;
	}
	reachable_host(cfg->control.listen_host, cfg->network, host,
		       sizeof(host));
	r->address = ft_asprintf("%s:%s", host, serv);
	o = json_pack("{s:i, s:s, s:i}", "v", RAUTH_VERSION, "host", host,
		      "port", atoi(serv));
	text = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	r->published = ft_asprintf("%s/control.tcp", cfg->state_dir);
	rc = ft_write_file_atomic(r->published, text, strlen(text));
	if (rc == 0)
		rc = chmod(r->published, 0644);
	if (rc == -1)
		ft_snprintf(err, n, "%s: %s", r->published, strerror(errno));
	free(text);
	return rc;
}

/* The control socket's group: the config's, else ours. */
static int
socket_gid(const struct ft_config *cfg, gid_t *gid, char *err, size_t n)
{
	struct group *gr;

	*gid = getgid();
	if (cfg->control.socket_group == NULL)
		return 0;
	if ((gr = getgrnam(cfg->control.socket_group)) == NULL) {
		ft_snprintf(err, n, "control.socket_group: no group %s",
			    cfg->control.socket_group);
		return -1;
	}
	*gid = gr->gr_gid;
	return 0;
}

struct remote *
remote_open(struct ev_loop *loop, struct control *ctl,
	    const struct ft_config *cfg, char *err, size_t n)
{
	struct remote *r = ft_calloc(1, sizeof(*r));

	r->loop = loop;
	r->ctl = ctl;
	r->fd = -1;
	r->mode = cfg->control.socket_mode;
	if (socket_gid(cfg, &r->group, err, n) == -1 ||
	    (r->decoder = mdecode_new(loop, cfg->control.munge_socket,
				      DECODE_THREADS, MAX_GREETING, err,
				      n)) == NULL ||
	    listen_tcp(r, cfg->control.listen_host, cfg->control.listen_port,
		       err, n) == -1 ||
	    publish(r, cfg, err, n) == -1) {
		remote_close(r);
		return NULL;
	}
	ev_io_init(&r->io, on_accept, r->fd, EV_READ);
	r->io.data = r;
	ev_timer_init(&r->retry, on_retry, 0.1, 0);
	r->retry.data = r;
	ev_io_start(loop, &r->io);
	log_info("control: listening on TCP at %s (MUNGE)", r->address);
	return r;
}

void
remote_set_joiner(struct remote *r, remote_join_fn fn, void *ctx)
{
	r->joiner = fn;
	r->joiner_ctx = ctx;
}

void
remote_close(struct remote *r)
{
	if (r == NULL)
		return;
	ev_io_stop(r->loop, &r->io);
	ev_timer_stop(r->loop, &r->retry);
	if (r->fd >= 0)
		close(r->fd);
	while (r->greetings) {
		close(r->greetings->fd);
		greeting_free(r->greetings);
	}
	if (r->published)
		unlink(r->published);
	mdecode_free(r->decoder);
	free(r->published);
	free(r->address);
	free(r);
}

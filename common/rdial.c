/* rdial: reaching a master over TCP (see rdial.h). */
#include "rdial.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <munge.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "jcheck.h"
#include "util.h"

static const struct jfield published_fields[] = {
	{ "v", JT_INT, 1 },
	{ "host", JT_STRING, 1 },
	{ "port", JT_INT, 1 },
	{ NULL, JT_ANY, 0 },
};

int
rdial_published(const char *state_dir, char *host, size_t hn, char *port,
	  size_t pn, char *err, size_t n)
{
	char *path = ft_asprintf("%s/control.tcp", state_dir);
	json_error_t je;
	struct jerr e;
	json_t *o = json_load_file(path, 0, &je);
	int rc = -1;

	if (o == NULL && access(path, F_OK) == -1)
		rc = 1;
	else if (o == NULL)
		ft_snprintf(err, n, "%s: %s", path, je.text);
	else if (jcheck_object(o, "", published_fields, &e) == -1)
		ft_snprintf(err, n, "%s: %s: %s", path, e.path, e.msg);
	else {
		snprintf(host, hn, "%s", jget_str(o, "host", ""));
		snprintf(port, pn, "%lld", jget_int(o, "port", 0));
		rc = 0;
	}
	json_decref(o);
	free(path);
	return rc;
}

int
rdial_connect(const char *host, const char *port, char *err, size_t n)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai = NULL;
	struct pollfd p = { .events = POLLOUT };
	int e, fd = -1;
	socklen_t len = sizeof(e);

	if ((e = getaddrinfo(host, port, &hints, &ai)) != 0) {
		ft_snprintf(err, n, "%s: %s", host, gai_strerror(e));
		return -1;
	}
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
		    0);
	e = 0;
	if (fd == -1 || (connect(fd, ai->ai_addr, ai->ai_addrlen) == -1 &&
			 errno != EINPROGRESS))
		e = errno;
	else {
		p.fd = fd;
		if (poll(&p, 1, (int)(RDIAL_CONNECT_TIMEOUT * 1000)) != 1)
			e = ETIMEDOUT;
		else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &len) == -1)
			e = errno;
	}
	freeaddrinfo(ai);
	if (e == 0 && fcntl(fd, F_SETFL, 0) == 0)
		return fd;
	ft_snprintf(err, n, "no master answers at %s:%s (%s)", host, port,
		    strerror(e ? e : errno));
	if (fd >= 0)
		close(fd);
	return -1;
}

/* Read one line from FD into BUF (N bytes), the newline cut: the master
 * sends nothing past it before we speak.  Its length, or -1 with ERR. */
static long
read_line(int fd, char *buf, size_t n, char *err, size_t en)
{
	size_t len = 0;
	long line;

	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t r;

		if (poll(&p, 1, (int)(RAUTH_TIMEOUT * 1000)) != 1) {
			ft_snprintf(err, en, "the master did not answer in "
				    "%.0f s", RAUTH_TIMEOUT);
			return -1;
		}
		r = read(fd, buf + len, n - 1 - len);
		if (r <= 0) {
			ft_snprintf(err, en, "the master closed the connection");
			return -1;
		}
		len += (size_t)r;
		if ((line = rauth_line(buf, len)) >= 0)
			return line;
		if (line == -2 || len >= n - 1) {
			ft_snprintf(err, en, "the master's line is too long");
			return -1;
		}
	}
}

/* A credential of ours whose payload is NONCE (munged at SOCKET).  A new
 * string, or NULL with ERR. */
static char *
credential(const char *socket, const char *nonce, char *err, size_t n)
{
	munge_ctx_t ctx = munge_ctx_create();
	char *cred = NULL;
	munge_err_t e;

	if (ctx == NULL) {
		ft_snprintf(err, n, "munge: cannot create a context");
		return NULL;
	}
	if (socket)
		munge_ctx_set(ctx, MUNGE_OPT_SOCKET, socket);
	e = munge_encode(&cred, ctx, nonce, RAUTH_NONCE_HEX);
	if (e != EMUNGE_SUCCESS)
		ft_snprintf(err, n, "munge: %s", munge_ctx_strerror(ctx) ?
			    munge_ctx_strerror(ctx) : munge_strerror(e));
	munge_ctx_destroy(ctx);
	return e == EMUNGE_SUCCESS ? cred : NULL;
}

int
rdial_greet(int fd, const char *socket, enum rauth_role role, char *err,
	    size_t n)
{
	char line[RAUTH_MAX_LINE + 2], nonce[RAUTH_NONCE_HEX + 1], *cred, *reply;
	unsigned uid;
	long len;
	int rc;

	if ((len = read_line(fd, line, sizeof(line), err, n)) == -1 ||
	    rauth_parse_hello(line, (size_t)len, nonce, err, n) == -1 ||
	    (cred = credential(socket, nonce, err, n)) == NULL)
		return -1;
	reply = rauth_reply(cred, role);
	free(cred);
	rc = ft_send_all(fd, reply, strlen(reply));
	free(reply);
	if (rc == -1) {
		ft_snprintf(err, n, "the master closed the connection");
		return -1;
	}
	if ((len = read_line(fd, line, sizeof(line), err, n)) == -1)
		return -1;
	if (rauth_parse_verdict(line, (size_t)len, &uid, err, n) == -1)
		return strncmp(err, "refused: ", 9) == 0 ? -2 : -1;
	return 0;
}


/* remote: the CLI's way to a master on another host (see remote.h). */
#include "remote.h"

#include <string.h>
#include <unistd.h>

#include "ctl.h"
#include "down.h"
#include "rdial.h"
#include "util.h"

/* ctl_elsewhere_fn: the master of STATE_DIR over TCP. */
static int
over_tcp(void *ctx, const char *state_dir, char *err, size_t n)
{
	const struct ft_config *cfg = ctx;
	char host[256], port[16], why[512];
	int fd, rc;

	/* An address left by a master of a cluster now down (killed with
	 * its job) may be dead, or someone else's by now. */
	/* A master that is stopping still answers (the stop's own request
	 * among them). */
	if (down_check(state_dir, why, sizeof(why)) &&
	    strcmp(why, "stopping") != 0) {
		ft_snprintf(err, n, "no master runs (the cluster is down: %s)",
			    why);
		return -1;
	}
	rc = rdial_published(state_dir, host, sizeof(host), port, sizeof(port), why,
		       sizeof(why));
	if (rc == 1)
		return -1;	/* no TCP listener: the socket's error stands */
	if (rc == -1 || (fd = rdial_connect(host, port, why, sizeof(why))) == -1) {
		ft_snprintf(err, n, "%s", why);
		return -1;
	}
	if (rdial_greet(fd, cfg->control.munge_socket, RAUTH_CLIENT, why,
			sizeof(why)) < 0) {
		ft_snprintf(err, n, "%s:%s: %s", host, port, why);
		close(fd);
		return -1;
	}
	return fd;
}

void
cli_remote_init(const struct ft_config *cfg)
{
	ctl_set_elsewhere(over_tcp, (void *)cfg);
}

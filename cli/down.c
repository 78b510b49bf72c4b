/* down: a cluster with no master, as its clients tell it (see down.h). */
#include "down.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "jcheck.h"
#include "util.h"

static char *
note_path(const char *state_dir)
{
	return ft_asprintf("%s/%s", state_dir, DOWN_FILE);
}

int
down_note(const char *state_dir, unsigned long long epoch, const char *reason)
{
	json_t *o = json_pack("{s:i, s:I, s:f, s:s}", "v", 1, "epoch",
			      (json_int_t)epoch, "ts", ft_wall(), "reason",
			      reason);
	char *text = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER)
		       : NULL, *path = note_path(state_dir), *line;
	int rc = -1;

	if (text) {
		line = ft_asprintf("%s\n", text);
		rc = ft_write_file_atomic(path, line, strlen(line));
		if (rc == 0)
			rc = chmod(path, 0644);
		free(line);
	} else {
		errno = ENOMEM;
	}
	free(text);
	free(path);
	json_decref(o);
	return rc;
}

void
down_forget(const char *state_dir)
{
	char *path = note_path(state_dir);

	unlink(path);
	free(path);
}

int
down_lease(int rc, const struct lease_rec *r)
{
	return rc == 1 || (rc == 0 && r->state != LEASE_ACTIVE);
}

/* "2026-11-28 15:05:42 UTC" for the wall time T into BUF. */
static const char *
utc(double t, char *buf, size_t n)
{
	time_t s = (time_t)t;
	struct tm tm;

	if (gmtime_r(&s, &tm) == NULL ||
	    strftime(buf, n, "%Y-%m-%d %H:%M:%S UTC", &tm) == 0)
		snprintf(buf, n, "at %.0f", t);
	return buf;
}

/* The note of STATE_DIR, when it is epoch EPOCH's: its time and reason
 * into BUF; 0 if there is none to read. */
static int
read_note(const char *state_dir, unsigned long long epoch, char *buf,
	  size_t n)
{
	char *path = note_path(state_dir), when[64];
	json_t *o = json_load_file(path, 0, NULL);
	int ok = o && jget_int(o, "epoch", -1) == (long long)epoch &&
		 json_is_string(json_object_get(o, "reason"));

	if (ok)
		snprintf(buf, n, "stopped %s: %s",
			 utc(jget_num(o, "ts", 0), when, sizeof(when)),
			 jget_str(o, "reason", ""));
	json_decref(o);
	free(path);
	return ok;
}

const char *
down_why(const char *state_dir, int rc, const struct lease_rec *r, char *buf,
	 size_t n)
{
	if (rc == 1 || (r->epoch == 0 && r->state == LEASE_FREE))
		snprintf(buf, n, "never started");
	else if (r->state == LEASE_STOPPING)
		snprintf(buf, n, "stopping");
	else if (r->state == LEASE_ACTIVE)
		snprintf(buf, n, "its supervisor and master are gone");
	else if (!read_note(state_dir, r->epoch, buf, n))
		snprintf(buf, n, "stopped");
	return buf;
}

int
down_check(const char *state_dir, char *why, size_t n)
{
	struct lease l;
	struct lease_rec r;
	char err[256];
	int rc;

	if (lease_open(&l, state_dir, err, sizeof(err)) == -1)
		return 0;
	rc = lease_read(&l, &r);
	lease_close(&l);
	if (rc == -1 || !down_lease(rc, &r))
		return 0;
	down_why(state_dir, rc, &r, why, n);
	return 1;
}

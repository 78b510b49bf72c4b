/*
 * ctl: the control socket between the ftfarm CLI and the master.
 *
 * A Unix stream socket at <state_dir>/control.sock.  The client writes one
 * JSON object per line, {"v": FT_CTL_VERSION, "cmd": NAME, ...}; the master
 * answers each with one line, {"ok": true, ...} or {"ok": false, "error":
 * "..."}.  A request of another version is refused.
 */
#ifndef FT_CTL_H
#define FT_CTL_H

#include <jansson.h>
#include <stddef.h>

#define FT_CTL_VERSION 1
/* Longest request line the master reads (batches of many tasks). */
#define FT_CTL_MAX_LINE (512 * 1024 * 1024)

/* <state_dir>/control.sock (a new string). */
char *ctl_socket_path(const char *state_dir);
/* Connect to the master of STATE_DIR.  The fd, or -1 with ERR. */
int ctl_connect(const char *state_dir, char *err, size_t n);
/* Send REQ (a reference is taken: the caller still owns it, "v" is set)
 * and wait up to TIMEOUT seconds (<= 0: forever) for the answer line.
 * The answer, or NULL with ERR. */
json_t *ctl_call(int fd, json_t *req, double timeout, char *err, size_t n);
/* Connect, call, close. */
json_t *ctl_request(const char *state_dir, json_t *req, double timeout,
		    char *err, size_t n);

#endif

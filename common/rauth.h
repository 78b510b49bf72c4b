/*
 * rauth: the greeting that opens a control connection over TCP.
 *
 * Over TCP the master cannot read its peer's credentials from the kernel,
 * so the client proves its uid and gid with a MUNGE credential bound to
 * this connection:
 *
 *   master: {"v": 1, "auth": "munge", "nonce": HEX}     (fresh per connection)
 *   client: {"v": 1, "munge": CRED}   (CRED's payload is exactly HEX)
 *           {"v": 1, "munge": CRED, "role": "agent"}   a node's agent
 *                                      (ftfarm join), the cluster's owner
 *   master: {"v": 1, "ok": true, "uid": U, "gid": G}
 *        or {"v": 1, "ok": false, "error": "..."} and the end.
 *
 * Then the connection speaks the control protocol (ctl.h) as the unix
 * socket does, with U's roles; an agent's speaks frames (frame.h) of the
 * agent's messages (proto.h: JOIN first).  Nothing of the cluster is sent before the
 * master's "ok".  This module is the framing and its strict parsers (no
 * I/O, no MUNGE): both ends and the fuzzer use them.
 */
#ifndef FT_RAUTH_H
#define FT_RAUTH_H

#include <stddef.h>

#define RAUTH_VERSION 1
#define RAUTH_NONCE_HEX 32		/* 16 random bytes, in hex */
#define RAUTH_MAX_LINE 4096		/* a greeting line, newline excluded */
#define RAUTH_TIMEOUT 10.0		/* seconds to finish the greeting */
/* Seconds the master waits for munged to decode a credential before it
 * refuses the client ("munged did not answer within 5 s"): less than
 * the RAUTH_TIMEOUT a client waits for the verdict. */
#define RAUTH_MUNGE_WAIT 5.0

/* Where the first line of BUF (LEN bytes) ends: its length without the
 * newline; -1 when no newline has come yet within RAUTH_MAX_LINE bytes;
 * -2 when the line is longer than that. */
long rauth_line(const char *buf, size_t len);

/* The master's first line for NONCE, newline included (a new string). */
char *rauth_hello(const char *nonce);
/* Parse the master's first line (LEN bytes, no newline) into NONCE.  0, or
 * -1 with ERR. */
int rauth_parse_hello(const char *line, size_t len,
		      char nonce[RAUTH_NONCE_HEX + 1], char *err, size_t n);
/* Who greets: a control client, or a node's agent that joins. */
enum rauth_role { RAUTH_CLIENT = 0, RAUTH_AGENT };

/* The answer of a client in ROLE carrying CRED, newline included (a new
 * string). */
char *rauth_reply(const char *cred, enum rauth_role role);
/* Parse the client's answer (LEN bytes, no newline): *CRED the credential
 * (a new string), *ROLE its role.  0, or -1 with ERR. */
int rauth_parse_reply(const char *line, size_t len, char **cred,
		      enum rauth_role *role, char *err, size_t n);
/* Is the credential's PAYLOAD (LEN bytes) the connection's NONCE? */
int rauth_payload_ok(const char *nonce, const void *payload, int len);
/* The master's verdict, newline included (a new string): ERR NULL for
 * {"ok": true, "uid", "gid"}, else {"ok": false, "error": ERR}. */
char *rauth_verdict(const char *err, unsigned uid, unsigned gid);
/* Parse the verdict: 0 (with *UID), or -1 with ERR (the master's
 * reason). */
int rauth_parse_verdict(const char *line, size_t len, unsigned *uid,
			char *err, size_t n);
/* A fresh nonce into NONCE (from getrandom).  0, or -1. */
int rauth_nonce(char nonce[RAUTH_NONCE_HEX + 1]);

#endif

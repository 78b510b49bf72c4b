/*
 * libFuzzer harness: the greeting of control over TCP (rauth.h), as each
 * end reads it: the master frames the bytes an unauthenticated peer sent
 * (a line within the bound) and parses the line as the client's answer;
 * the client parses the master's greeting and verdict.  Whatever the
 * bytes, nothing may crash, leak or read past them.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rauth.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data;
	char err[512], nonce[RAUTH_NONCE_HEX + 1], *cred = NULL;
	unsigned uid;
	enum rauth_role role;
	long line = rauth_line(text, size);

	if (line >= 0 &&
	    rauth_parse_reply(text, (size_t)line, &cred, &role, err,
			      sizeof(err)) == 0) {
		/* What the master checks next: the payload, of any length. */
		rauth_payload_ok("0123456789abcdef0123456789abcdef", cred,
				 (int)strlen(cred));
		free(cred);
	}
	if (rauth_parse_hello(text, size, nonce, err, sizeof(err)) == 0 &&
	    strlen(nonce) != RAUTH_NONCE_HEX)
		abort();
	rauth_parse_verdict(text, size, &uid, err, sizeof(err));
	return 0;
}

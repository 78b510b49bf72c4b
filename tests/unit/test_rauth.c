/* Unit tests of the greeting of control over TCP (common/rauth.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "rauth.h"
#include "util.h"

static void
test_round_trip(void **state)
{
	char nonce[RAUTH_NONCE_HEX + 1], got[RAUTH_NONCE_HEX + 1], err[256];
	char *line, *cred;
	unsigned uid = 7;
	enum rauth_role role;

	(void)state;
	assert_int_equal(rauth_nonce(nonce), 0);
	assert_int_equal(strlen(nonce), RAUTH_NONCE_HEX);
	line = rauth_hello(nonce);
	assert_int_equal(rauth_line(line, strlen(line)), strlen(line) - 1);
	assert_int_equal(rauth_parse_hello(line, strlen(line) - 1, got, err,
					   sizeof(err)), 0);
	assert_string_equal(got, nonce);
	free(line);
	line = rauth_reply("MUNGE:AwQ+/=:", RAUTH_CLIENT);
	assert_int_equal(rauth_parse_reply(line, strlen(line) - 1, &cred,
					   &role, err, sizeof(err)), 0);
	assert_string_equal(cred, "MUNGE:AwQ+/=:");
	assert_int_equal(role, RAUTH_CLIENT);
	free(cred);
	free(line);
	line = rauth_reply("MUNGE:AwQ+/=:", RAUTH_AGENT);
	assert_int_equal(rauth_parse_reply(line, strlen(line) - 1, &cred,
					   &role, err, sizeof(err)), 0);
	assert_int_equal(role, RAUTH_AGENT);
	free(cred);
	free(line);
	assert_true(rauth_payload_ok(nonce, nonce, RAUTH_NONCE_HEX));
	assert_false(rauth_payload_ok(nonce, nonce, RAUTH_NONCE_HEX - 1));
	assert_false(rauth_payload_ok(nonce, NULL, 0));
	line = rauth_verdict(NULL, 42, 43);
	assert_int_equal(rauth_parse_verdict(line, strlen(line) - 1, &uid, err,
					     sizeof(err)), 0);
	assert_int_equal(uid, 42);
	free(line);
	line = rauth_verdict("credential refused: Replayed credential", 0, 0);
	assert_int_equal(rauth_parse_verdict(line, strlen(line) - 1, &uid, err,
					     sizeof(err)), -1);
	assert_string_equal(err, "refused: credential refused: Replayed "
			    "credential");
	free(line);
}

static void
reply_refused(const char *line, const char *want)
{
	char err[256], *cred = (char *)1;
	enum rauth_role role;

	assert_int_equal(rauth_parse_reply(line, strlen(line), &cred, &role,
					   err, sizeof(err)), -1);
	assert_null(cred);
	if (strstr(err, want) == NULL)
		fail_msg("\"%s\" lacks \"%s\"", err, want);
}

static void
test_strict(void **state)
{
	char big[RAUTH_MAX_LINE + 10];

	(void)state;
	reply_refused("{\"v\":1,\"cmd\":\"status\"}", "cmd: unknown key");
	reply_refused("{\"v\":1}", "missing required key \"munge\"");
	reply_refused("{\"v\":2,\"munge\":\"MUNGE:x:\"}", "protocol version 2");
	reply_refused("{\"v\":1,\"munge\":\"MUNGE:x:\",\"munge\":\"y\"}",
		      "not JSON");
	reply_refused("{\"v\":1,\"munge\":\"password\"}", "not a MUNGE");
	reply_refused("{\"v\":1,\"munge\":\"MUNGE:a b:\"}", "not a MUNGE");
	reply_refused("[]", "");
	reply_refused("{\"v\":1,\"munge\":\"MUNGE:x:\",\"role\":\"root\"}",
		      "neither");
	memset(big, 'x', sizeof(big));
	assert_int_equal(rauth_line(big, RAUTH_MAX_LINE), -1);
	assert_int_equal(rauth_line(big, sizeof(big)), -2);
	big[5] = '\n';
	assert_int_equal(rauth_line(big, sizeof(big)), 5);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_strict),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

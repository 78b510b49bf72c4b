/* Unit tests of the client side of the control protocol (common/ctl.c):
 * a request whose master answers before it has read it all, and closes,
 * must give that answer, never SIGPIPE (left at its default here: it
 * would end the test).  The master is a thread at the other end of a
 * socket pair. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "ctl.h"
#include "util.h"

#define BIG (16 << 20)

struct peer {
	int fd;
	const char *answer;		/* written after a few bytes, or NULL */
};

/* The master: reads a few bytes of the request, answers (or not) and
 * closes, the rest unread. */
static void *
peer_main(void *arg)
{
	struct peer *p = arg;
	char buf[16];

	(void)!read(p->fd, buf, sizeof(buf));
	if (p->answer)
		(void)!write(p->fd, p->answer, strlen(p->answer));
	close(p->fd);
	return NULL;
}

/* Call with BODY against a peer answering ANSWER; the answer, or NULL
 * with ERR. */
static json_t *
call(const struct ctl_body *body, const char *answer, char *err, size_t n)
{
	struct peer p = { .answer = answer };
	json_t *req = ctl_request_new(CTL_SUBMIT), *ans;
	pthread_t t;
	int sv[2];

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	p.fd = sv[1];
	assert_int_equal(pthread_create(&t, NULL, peer_main, &p), 0);
	json_object_set_new(req, "bytes", json_integer((json_int_t)body->len));
	ans = ctl_call_body(sv[0], req, body, 30, err, n);
	pthread_join(t, NULL);
	close(sv[0]);
	json_decref(req);
	return ans;
}

static const char refusal[] = "{\"ok\":false,\"error\":\"submit: the batch is "
			      "16777216 bytes\",\"exit\":2}\n";

static void
test_early_answer_to_a_body(void **state)
{
	char *data = calloc(1, BIG), err[256] = "";
	struct ctl_body body = { .data = data, .fd = -1, .len = BIG };
	json_t *ans = call(&body, refusal, err, sizeof(err));

	(void)state;
	assert_non_null(ans);
	assert_int_equal(json_integer_value(json_object_get(ans, "exit")), 2);
	json_decref(ans);
	free(data);
}

static void
test_early_answer_to_a_file(void **state)
{
	char path[] = "/tmp/ftfarm-test-ctl-XXXXXX", err[256] = "";
	int fd = mkstemp(path);
	struct ctl_body body = { .fd = fd, .len = BIG };
	json_t *ans;

	(void)state;
	assert_true(fd >= 0);
	unlink(path);
	assert_int_equal(ftruncate(fd, BIG), 0);
	ans = call(&body, refusal, err, sizeof(err));
	assert_non_null(ans);
	assert_false(json_is_true(json_object_get(ans, "ok")));
	json_decref(ans);
	close(fd);
}

/* A master that closes without a word: an error, no signal. */
static void
test_closed_without_answer(void **state)
{
	char *data = calloc(1, BIG), err[256] = "";
	struct ctl_body body = { .data = data, .fd = -1, .len = BIG };

	(void)state;
	assert_null(call(&body, NULL, err, sizeof(err)));
	assert_non_null(strstr(err, "closed the connection"));
	free(data);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_early_answer_to_a_body),
		cmocka_unit_test(test_early_answer_to_a_file),
		cmocka_unit_test(test_closed_without_answer),
	};

	signal(SIGPIPE, SIG_DFL);
	return cmocka_run_group_tests(tests, NULL, NULL);
}

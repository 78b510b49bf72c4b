/* Unit tests of the config's "http" section (common/config.c): off by
 * default, the loopback by default, HOST:PORT forms, exact errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "config.h"
#include "util.h"

/* Load a config whose "http" member is HTTP (NULL: none).  The load's
 * return; CFG filled, ERR the error line. */
static int
load(const char *http, struct ft_config *cfg, char *err, size_t n)
{
	char path[] = "/tmp/test_config_http.XXXXXX.json";
	char *text = ft_asprintf("{\"state_dir\": \"/tmp/x\", \"nodes\": "
				 "[{\"name\": \"n1\"}]%s%s}\n",
				 http ? ", \"http\": " : "", http ? http : "");
	int fd = mkstemps(path, 5), rc;

	assert_true(fd >= 0);
	assert_int_equal(ft_write_all(fd, text, strlen(text)), 0);
	close(fd);
	rc = ft_config_load(path, cfg, err, n);
	unlink(path);
	free(text);
	return rc;
}

static void
check(const char *http, const char *host, int port)
{
	struct ft_config cfg;
	char err[512];

	assert_int_equal(load(http, &cfg, err, sizeof(err)), 0);
	assert_int_equal(cfg.http, 1);
	assert_string_equal(cfg.http_host, host);
	assert_int_equal(cfg.http_port, port);
	ft_config_free(&cfg);
}

static void
test_forms(void **state)
{
	struct ft_config cfg;
	char err[512];

	(void)state;
	assert_int_equal(load(NULL, &cfg, err, sizeof(err)), 0);
	assert_int_equal(cfg.http, 0);		/* off by default */
	ft_config_free(&cfg);
	check("{}", "127.0.0.1", 9750);
	check("{\"listen\": \"127.0.0.1:9800\"}", "127.0.0.1", 9800);
	check("{\"listen\": \":0\"}", "127.0.0.1", 0);
	check("{\"listen\": \"9751\"}", "127.0.0.1", 9751);
	check("{\"listen\": \"0.0.0.0:80\"}", "0.0.0.0", 80);
	check("{\"listen\": \"[::1]:9750\"}", "::1", 9750);
	check("{\"listen\": \"localhost:1\"}", "localhost", 1);
}

static void
check_error(const char *http, const char *want)
{
	struct ft_config cfg;
	char err[512];

	assert_int_equal(load(http, &cfg, err, sizeof(err)), -1);
	assert_non_null(strstr(err, want));
}

static void
test_errors(void **state)
{
	(void)state;
	check_error("{\"listen\": \"127.0.0.1:70000\"}",
		    "http.listen: must be HOST:PORT with a port from 0 to "
		    "65535");
	check_error("{\"listen\": \"127.0.0.1:\"}", "http.listen: must be");
	check_error("{\"listen\": \"host:http\"}", "http.listen: must be");
	check_error("{\"listen\": 9750}", "http.listen: expected a string");
	check_error("{\"port\": 1}", "http.port: unknown key");
	check_error("true", "http: expected an object");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_forms),
		cmocka_unit_test(test_errors),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

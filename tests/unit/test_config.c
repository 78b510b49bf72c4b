/* Unit tests of common/config.c: real files, exact error lines. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "config.h"
#include "slurm.h"
#include "util.h"

/* A temp directory per test holding conf/ (the config files). */
struct fixture {
	char dir[64];
	char conf[96];
};

static int
setup(void **state)
{
	struct fixture *fx = ft_calloc(1, sizeof(*fx));

	snprintf(fx->dir, sizeof(fx->dir), "/tmp/test_config.XXXXXX");
	if (mkdtemp(fx->dir) == NULL)
		return -1;
	snprintf(fx->conf, sizeof(fx->conf), "%s/conf", fx->dir);
	if (mkdir(fx->conf, 0755) == -1)
		return -1;
	*state = fx;
	return 0;
}

static int
teardown(void **state)
{
	struct fixture *fx = *state;
	char *cmd = ft_asprintf("rm -rf '%s'", fx->dir);
	int rc = system(cmd);

	free(cmd);
	free(fx);
	return rc == 0 ? 0 : -1;
}

/* Write TEXT to a new file conf/cfg.XXXXXX.json; its path goes to PATH. */
static void
write_cfg(const struct fixture *fx, char *path, size_t n, const char *text)
{
	int fd;

	snprintf(path, n, "%s/cfg.XXXXXX.json", fx->conf);
	fd = mkstemps(path, 5);
	assert_true(fd >= 0);
	assert_int_equal(ft_write_all(fd, text, strlen(text)), 0);
	close(fd);
}

static int
cfg_is_empty(const struct ft_config *cfg)
{
	static const struct ft_config zero;

	return memcmp(cfg, &zero, sizeof(zero)) == 0;
}

/* Loading TEXT fails with WANT, in which "%s" stands for the file name. */
static void
refused(void **state, const char *text, const char *want)
{
	char path[128], err[512], expect[512];
	struct ft_config cfg;

	write_cfg(*state, path, sizeof(path), text);
	memset(&cfg, 0x5a, sizeof(cfg));
	assert_int_equal(ft_config_load(path, &cfg, err, sizeof(err)), -1);
	unlink(path);
	snprintf(expect, sizeof(expect), want, path);
	assert_string_equal(err, expect);
	assert_true(cfg_is_empty(&cfg));
}

/* Load TEXT into CFG, which must succeed; the file is removed after. */
static void
accepted(void **state, const char *text, struct ft_config *cfg)
{
	char path[128], err[512];

	write_cfg(*state, path, sizeof(path), text);
	if (ft_config_load(path, cfg, err, sizeof(err)) != 0) {
		unlink(path);
		fail_msg("refused: %s", err);
	}
	unlink(path);
	assert_string_equal(cfg->path, path);
}

#define NODES "\"nodes\": [{\"name\": \"n1\"}]"

static void
test_missing_key(void **state)
{
	refused(state,
		"\n"
		"  {\n"
		"    " NODES "\n"
		"  }\n",
		"%s:2:3: missing required key \"state_dir\"");
	refused(state, "{\"state_dir\": \"s\"}",
		"%s:1:1: missing required key \"nodes\"");
	refused(state,
		"{\"state_dir\": \"s\",\n"
		" \"nodes\": [{\"name\": \"a\"},\n"
		"           {\"host\": \"h\"}]}",
		"%s:3:12: nodes[1]: missing required key \"name\"");
}

static void
test_wrong_type(void **state)
{
	refused(state,
		"{\"state_dir\": \"s\", " NODES ",\n"
		"  \"heartbeat_ms\": \"1000\"}",
		"%s:2:3: heartbeat_ms: expected an integer, got a string");
	refused(state, "{\"state_dir\": 5, " NODES "}",
		"%s:1:2: state_dir: expected a string, got an integer");
	refused(state, "{\"state_dir\": \"s\", \"nodes\": {}}",
		"%s:1:20: nodes: expected an array of nodes or \"slurm\", "
		"got an object");
	refused(state, "{\"state_dir\": \"s\", \"nodes\": [\"n1\"]}",
		"%s:1:30: nodes[0]: expected an object, got a string");
	refused(state, "{\"state_dir\": \"s\", " NODES ", \"task_events\": 1}",
		"%s:1:47: task_events: expected a boolean, got an integer");
	refused(state,
		"{\"state_dir\": \"s\", " NODES ",\n"
		" \"mpirun_args\": [\"--oversubscribe\", 3]}",
		"%s:2:37: mpirun_args[1]: expected a string, got an integer");
	refused(state,
		"{\"state_dir\": \"s\", \"nodes\": [{\"name\": \"a\",\n"
		"  \"workers\": 1.5}]}",
		"%s:2:3: nodes[0].workers: expected an integer, got a number");
	refused(state, "[]", "%s:1:1: expected an object, got an array");
}

static void
test_unknown_key(void **state)
{
	refused(state,
		"{\"state_dir\": \"s\", " NODES ",\n"
		"\n"
		"    \"heartbeat\": 5}",
		"%s:3:5: heartbeat: unknown key");
	refused(state,
		"{\n"
		"  \"state_dir\": \"s\",\n"
		"  \"nodes\": [\n"
		"    {\"name\": \"a\"},\n"
		"    {\"name\": \"b\", \"hots\": \"x\"}\n"
		"  ]\n"
		"}\n",
		"%s:5:19: nodes[1].hots: unknown key");
}

static void
test_bad_json(void **state)
{
	refused(state,
		"{\"state_dir\": \"s\",\n"
		"  \"nodes\": [{\"name\": \"a\"}\n"
		"}\n",
		"%s:3:1: invalid JSON: ']' expected near '}'");
	refused(state, "{\"state_dir\": \"s\", \"state_dir\": \"t\"}",
		"%s:1:30: invalid JSON: duplicate object key near "
		"'\"state_dir\"'");
	refused(state, "", "%s:1:1: invalid JSON: unexpected token near "
		"end of file");
}

/* As root, chmod 000 does not stop reading a file, so unreadability is
 * tested with a directory and a missing file; as another user the chmod'ed
 * file is tried too. */
static void
test_unreadable(void **state)
{
	struct fixture *fx = *state;
	struct ft_config cfg;
	char path[128], err[512], expect[512];

	assert_int_equal(ft_config_load(fx->conf, &cfg, err, sizeof(err)), -1);
	snprintf(expect, sizeof(expect), "%s: cannot read: Is a directory",
		 fx->conf);
	assert_string_equal(err, expect);
	assert_true(cfg_is_empty(&cfg));

	snprintf(path, sizeof(path), "%s/missing.json", fx->conf);
	assert_int_equal(ft_config_load(path, &cfg, err, sizeof(err)), -1);
	snprintf(expect, sizeof(expect),
		 "%s: cannot read: No such file or directory", path);
	assert_string_equal(err, expect);

	if (geteuid() == 0)
		return;
	write_cfg(fx, path, sizeof(path), "{}");
	assert_int_equal(chmod(path, 0), 0);
	assert_int_equal(ft_config_load(path, &cfg, err, sizeof(err)), -1);
	unlink(path);
	snprintf(expect, sizeof(expect), "%s: cannot read: Permission denied",
		 path);
	assert_string_equal(err, expect);
}

static void
test_out_of_range(void **state)
{
	refused(state,
		"{\"state_dir\": \"s\", \"nodes\": [{\"name\": \"a\"},\n"
		"  {\"name\": \"b\", \"workers\": 0}]}",
		"%s:2:17: nodes[1].workers: must be between 1 and 256");
	refused(state,
		"{\"state_dir\": \"s\", \"nodes\": [{\"name\": \"a\", "
		"\"workers\": 257}]}",
		"%s:1:44: nodes[0].workers: must be between 1 and 256");
	refused(state, "{\"state_dir\": \"s\", " NODES ", \"heartbeat_ms\": 9}",
		"%s:1:47: heartbeat_ms: must be between 10 and 600000");
	refused(state, "{\"state_dir\": \"s\", " NODES ", "
		"\"heartbeat_timeout_ms\": 3600001}",
		"%s:1:47: heartbeat_timeout_ms: must be between 10 and 3600000");
	refused(state, "{\"state_dir\": \"s\", " NODES ", \"max_attempts\": 101}",
		"%s:1:47: max_attempts: must be between 1 and 100");
	refused(state, "{\"state_dir\": \"s\", " NODES ", \"respawn_limit\": -1}",
		"%s:1:47: respawn_limit: must be between 0 and 1000");
	refused(state, "{\"state_dir\": \"s\", " NODES ", \"output_cap\": 131073}",
		"%s:1:47: output_cap: must be between 0 and 131072");
	refused(state, "{\"state_dir\": \"s\", " NODES ", \"task_timeout_s\": 0}",
		"%s:1:47: task_timeout_s: must be greater than 0 and at most "
		"10000000");
	refused(state, "{\"state_dir\": \"s\", " NODES ", \"slow_timeout_s\": -0.5}",
		"%s:1:47: slow_timeout_s: must be greater than 0 and at most "
		"10000000");
	refused(state, "{\"state_dir\": \"s\", " NODES ", "
		"\"start_timeout_s\": 3600.5}",
		"%s:1:47: start_timeout_s: must be greater than 0 and at most "
		"3600");
}

static void
test_bad_values(void **state)
{
	refused(state, "{\"state_dir\": \"s\", \"nodes\": []}",
		"%s:1:20: nodes: is empty, so every node must join over TCP: "
		"that needs \"control\": {\"listen\": \"HOST:PORT\"} (and "
		"join.max_nodes above 0)");
	refused(state, "{\"state_dir\": \"\", " NODES "}",
		"%s:1:2: state_dir: must not be empty");
	refused(state, "{\"name\": \"\", \"state_dir\": \"s\", " NODES "}",
		"%s:1:2: name: must not be empty");
	refused(state, "{\"state_dir\": \"s\", \"nodes\": [{\"name\": \"a b\"}]}",
		"%s:1:31: nodes[0].name: must contain only letters, digits, "
		"\"_\", \".\" and \"-\"");
	refused(state, "{\"state_dir\": \"s\", \"nodes\": [{\"name\": \"..\"}]}",
		"%s:1:31: nodes[0].name: must not be \".\" or \"..\"");
	refused(state, "{\"state_dir\": \"s\", \"nodes\": [{\"name\": \"\"}]}",
		"%s:1:31: nodes[0].name: must not be empty");
	refused(state,
		"{\"state_dir\": \"s\", \"nodes\": [{\"name\": \"a\", "
		"\"host\": \"\"}]}",
		"%s:1:44: nodes[0].host: must not be empty");
	refused(state, "{\"state_dir\": \"s\", " NODES ", \"log_level\": \"loud\"}",
		"%s:1:47: log_level: must be \"debug\", \"info\" or \"warn\"");
}

static void
test_bad_launch(void **state)
{
	refused(state,
		"{\"state_dir\": \"s\", " NODES ",\n"
		"  \"launch\": \"Dynamic\"}",
		"%s:2:3: launch: must be \"dynamic\" or \"static\"");
}

static void
test_duplicate_node(void **state)
{
	refused(state,
		"{\"state_dir\": \"s\", \"nodes\": [\n"
		"  {\"name\": \"a\"},\n"
		"  {\"name\": \"b\"},\n"
		"  {\"name\": \"a\", \"workers\": 2}\n"
		"]}",
		"%s:4:4: nodes[2].name: duplicate node name \"a\" (also nodes[0])");
}

/* A relative state_dir is taken against the config file's directory, even
 * when the file itself is named by a relative path; ".." and "." are
 * resolved and no trailing slash is left. */
static void
test_relative_state_dir(void **state)
{
	struct fixture *fx = *state;
	struct ft_config cfg;
	char path[128], err[512], cwd[4096], *want;

	accepted(state, "{\"state_dir\": \"../state/./x/\", " NODES "}", &cfg);
	want = ft_asprintf("%s/state/x", fx->dir);
	assert_string_equal(cfg.state_dir, want);
	ft_config_free(&cfg);

	accepted(state, "{\"state_dir\": \"here\", " NODES "}", &cfg);
	free(want);
	want = ft_asprintf("%s/here", fx->conf);
	assert_string_equal(cfg.state_dir, want);
	ft_config_free(&cfg);

	accepted(state, "{\"state_dir\": \"/var//lib/../tmp/ft/\", " NODES "}",
		 &cfg);
	assert_string_equal(cfg.state_dir, "/var/tmp/ft");
	ft_config_free(&cfg);

	/* a config named relative to the working directory */
	write_cfg(fx, path, sizeof(path), "{\"state_dir\": \"../st\", " NODES "}");
	assert_non_null(getcwd(cwd, sizeof(cwd)));
	assert_int_equal(chdir(fx->dir), 0);
	assert_int_equal(ft_config_load(path + strlen(fx->dir) + 1, &cfg, err,
					sizeof(err)), 0);
	assert_int_equal(chdir(cwd), 0);
	unlink(path);
	free(want);
	want = ft_asprintf("%s/st", fx->dir);
	assert_string_equal(cfg.state_dir, want);
	ft_config_free(&cfg);
	free(want);
}

static void
test_defaults(void **state)
{
	struct ft_config cfg;
	char *base;
	size_t n;

	accepted(state, "{\"state_dir\": \"/s\", " NODES "}", &cfg);
	/* the name defaults to the file's base name less ".json" */
	base = strrchr(cfg.path, '/') + 1;
	n = strlen(base) - 5;
	assert_int_equal(strlen(cfg.name), n);
	assert_memory_equal(cfg.name, base, n);
	assert_string_equal(cfg.state_dir, "/s");
	assert_int_equal(cfg.launch, FT_LAUNCH_DYNAMIC);
	assert_int_equal(cfg.nnodes, 1);
	assert_string_equal(cfg.nodes[0].name, "n1");
	assert_string_equal(cfg.nodes[0].host, "localhost");
	assert_int_equal(cfg.nodes[0].workers, 1);
	assert_int_equal(cfg.nworkers, 1);
	assert_true(cfg.heartbeat == 1.0);
	assert_true(cfg.heartbeat_timeout == 0.75);
	assert_true(cfg.task_timeout == 3600);
	assert_true(cfg.slow_timeout == 60);
	assert_true(cfg.start_timeout == 60);
	assert_int_equal(cfg.max_attempts, 3);
	assert_int_equal(cfg.respawn_limit, 1);
	assert_int_equal(cfg.output_cap, 65536);
	assert_int_equal(cfg.task_events, 1);
	assert_int_equal(cfg.nmpirun_args, 0);
	assert_non_null(cfg.mpirun_args);
	assert_null(cfg.mpirun_args[0]);
	assert_string_equal(cfg.log_level, "info");
	ft_config_free(&cfg);
	assert_true(cfg_is_empty(&cfg));
	/* freeing twice is harmless */
	ft_config_free(&cfg);

	accepted(state, "{\"state_dir\": \"/s\", " NODES ", "
		 "\"heartbeat_ms\": 250}", &cfg);
	assert_true(cfg.heartbeat == 0.25);
	assert_true(cfg.heartbeat_timeout == 0.187);
	ft_config_free(&cfg);
}

static void
test_full(void **state)
{
	struct ft_config cfg;

	accepted(state,
		 "{\n"
		 "  \"name\": \"lab\",\n"
		 "  \"state_dir\": \"/srv/ft/lab\",\n"
		 "  \"launch\": \"static\",\n"
		 "  \"nodes\": [\n"
		 "    {\"name\": \"n-1\", \"host\": \"10.0.0.1\", \"workers\": 4},\n"
		 "    {\"name\": \"n_2.b\", \"workers\": 256},\n"
		 "    {\"name\": \"N3\", \"host\": \"h3\"}\n"
		 "  ],\n"
		 "  \"heartbeat_ms\": 10,\n"
		 "  \"heartbeat_timeout_ms\": 3600000,\n"
		 "  \"task_timeout_s\": 0.5,\n"
		 "  \"slow_timeout_s\": 10000000,\n"
		 "  \"start_timeout_s\": 3600,\n"
		 "  \"max_attempts\": 100,\n"
		 "  \"respawn_limit\": 0,\n"
		 "  \"output_cap\": 0,\n"
		 "  \"task_events\": false,\n"
		 "  \"mpirun_args\": [\"--mca\", \"btl\", \"self,vader\"],\n"
		 "  \"log_level\": \"debug\"\n"
		 "}\n",
		 &cfg);
	assert_string_equal(cfg.name, "lab");
	assert_string_equal(cfg.state_dir, "/srv/ft/lab");
	assert_int_equal(cfg.launch, FT_LAUNCH_STATIC);
	assert_int_equal(cfg.nnodes, 3);
	assert_string_equal(cfg.nodes[0].name, "n-1");
	assert_string_equal(cfg.nodes[0].host, "10.0.0.1");
	assert_int_equal(cfg.nodes[0].workers, 4);
	assert_string_equal(cfg.nodes[1].name, "n_2.b");
	assert_string_equal(cfg.nodes[1].host, "localhost");
	assert_int_equal(cfg.nodes[1].workers, 256);
	assert_string_equal(cfg.nodes[2].host, "h3");
	assert_int_equal(cfg.nodes[2].workers, 1);
	assert_int_equal(cfg.nworkers, 261);
	assert_true(cfg.heartbeat == 0.01);
	assert_true(cfg.heartbeat_timeout == 3600);
	assert_true(cfg.task_timeout == 0.5);
	assert_true(cfg.slow_timeout == 1e7);
	assert_true(cfg.start_timeout == 3600);
	assert_int_equal(cfg.max_attempts, 100);
	assert_int_equal(cfg.respawn_limit, 0);
	assert_int_equal(cfg.output_cap, 0);
	assert_int_equal(cfg.task_events, 0);
	assert_int_equal(cfg.nmpirun_args, 3);
	assert_string_equal(cfg.mpirun_args[0], "--mca");
	assert_string_equal(cfg.mpirun_args[2], "self,vader");
	assert_null(cfg.mpirun_args[3]);
	assert_string_equal(cfg.log_level, "debug");
	assert_ptr_equal(ft_config_node(&cfg, "N3"), &cfg.nodes[2]);
	assert_null(ft_config_node(&cfg, "n3"));
	ft_config_free(&cfg);
}

/* A node's "bmc" and "ready_command": defaults, paths relative to the
 * config file, the ladder's keys. */
static void
test_bmc(void **state)
{
	struct fixture *fx = *state;
	struct ft_config cfg;
	const struct ft_bmc *b;
	char *want;

	accepted(state,
		 "{\"state_dir\": \"/s\", \"nodes\": [\n"
		 "  {\"name\": \"a\", \"bmc\": {\"host\": \"10.1.0.1\", "
		 "\"user\": \"admin\", \"password_file\": \"../pw\"},\n"
		 "   \"ready_command\": [\"bin/ready\", \"a\"]},\n"
		 "  {\"name\": \"b\", \"bmc\": {\"host\": \"h\", \"port\": 9002, "
		 "\"user\": \"u\", \"password_file\": \"/etc/pw\", "
		 "\"interface\": \"lan\", \"cipher_suite\": 17, "
		 "\"timeout_s\": 2, \"retries\": 3, \"min_gap_s\": 0, "
		 "\"ipmitool\": \"/opt/ipmitool\"}},\n"
		 "  {\"name\": \"c\"}],\n"
		 " \"max_reboots\": 2, \"reboot_wait_s\": 20, "
		 "\"drain_timeout_s\": 5, \"failure_window_s\": 60, "
		 "\"probe_min_s\": 1, \"probe_max_s\": 8}\n", &cfg);
	b = cfg.nodes[0].bmc;
	assert_non_null(b);
	assert_string_equal(b->host, "10.1.0.1");
	assert_int_equal(b->port, 623);
	assert_string_equal(b->user, "admin");
	want = ft_asprintf("%s/pw", realpath(fx->dir, NULL));
	assert_string_equal(b->password_file, want);
	free(want);
	assert_string_equal(b->interface, "lanplus");
	assert_int_equal(b->cipher_suite, 3);
	assert_int_equal(b->timeout, 1);
	assert_int_equal(b->retries, 1);
	assert_true(b->deadline == 5);		/* 2RN + R(R-1) + 3 */
	assert_true(b->min_gap == 5);
	assert_string_equal(b->ipmitool, "ipmitool");
	assert_string_equal(cfg.nodes[0].ready_command[0], "bin/ready");
	assert_string_equal(cfg.nodes[0].ready_command[1], "a");
	assert_null(cfg.nodes[0].ready_command[2]);
	b = cfg.nodes[1].bmc;
	assert_int_equal(b->port, 9002);
	assert_string_equal(b->password_file, "/etc/pw");
	assert_string_equal(b->interface, "lan");
	assert_int_equal(b->cipher_suite, 17);
	assert_true(b->deadline == 2 * 3 * 2 + 3 * 2 + 3);
	assert_true(b->min_gap == 0);
	assert_string_equal(b->ipmitool, "/opt/ipmitool");
	assert_null(cfg.nodes[1].ready_command);
	assert_null(cfg.nodes[2].bmc);
	assert_int_equal(cfg.max_reboots, 2);
	assert_true(cfg.reboot_wait == 20 && cfg.drain_timeout == 5);
	assert_true(cfg.failure_window == 60);
	assert_true(cfg.probe_min == 1 && cfg.probe_max == 8);
	ft_config_free(&cfg);

	accepted(state, "{\"state_dir\": \"/s\", " NODES "}", &cfg);
	assert_int_equal(cfg.max_reboots, 1);
	assert_true(cfg.reboot_wait == 300 && cfg.failure_window == 600);
	ft_config_free(&cfg);
}

/* Bad "bmc" and "ready_command" values, each named with its position. */
static void
test_bad_bmc(void **state)
{
#define BMC(x) "{\"state_dir\": \"s\", \"nodes\": [{\"name\": \"n\", " x "}]}"
	refused(state, BMC("\"bmc\": {\"host\": \"h\", \"user\": \"u\"}"),
		"%s:1:44: nodes[0].bmc: missing required key "
		"\"password_file\"");
	refused(state, BMC("\"bmc\": {\"host\": \"h\", \"user\": \"u\", "
			   "\"password_file\": \"p\", \"password\": \"x\"}"),
		"%s:1:100: nodes[0].bmc.password: unknown key");
	refused(state, BMC("\"bmc\": {\"host\": \"h\", \"user\": \"u\", "
			   "\"password_file\": \"p\", \"interface\": \"ssh\"}"),
		"%s:1:100: nodes[0].bmc.interface: must be \"lanplus\" or "
		"\"lan\"");
	refused(state, BMC("\"bmc\": {\"host\": \"h\", \"user\": \"u\", "
			   "\"password_file\": \"p\", \"port\": 0}"),
		"%s:1:100: nodes[0].bmc.port: must be between 1 and 65535");
	refused(state, BMC("\"bmc\": {\"host\": \"\", \"user\": \"u\", "
			   "\"password_file\": \"p\"}"),
		"%s:1:52: nodes[0].bmc.host: must not be empty");
	refused(state, BMC("\"ready_command\": []"),
		"%s:1:44: nodes[0].ready_command: must name a program");
	refused(state, "{\"state_dir\": \"s\", " NODES ", \"probe_min_s\": 10, "
		"\"probe_max_s\": 5}",
		"%s:1:66: probe_max_s: must not be less than probe_min_s");
#undef BMC
}

/* The shipped configs load (when the tests run from the source tree). */
static void
test_shipped_configs(void **state)
{
	static const char *const files[] = { "config/local.json",
					     "config/static.json",
					     "config/local-ipmi.json" };
	struct ft_config cfg;
	char err[512], *want;
	size_t i;

	(void)state;
	if (access(files[0], R_OK) != 0)
		skip();
	for (i = 0; i < FT_ARRAY_LEN(files); i++) {
		char *top = realpath(".", NULL);

		if (ft_config_load(files[i], &cfg, err, sizeof(err)) != 0)
			fail_msg("%s", err);
		assert_int_equal(cfg.nnodes, 3);
		assert_int_equal(cfg.nworkers, 3);
		assert_non_null(ft_config_node(&cfg, "node2"));
		assert_int_equal(cfg.launch, i == 1 ? FT_LAUNCH_STATIC :
						      FT_LAUNCH_DYNAMIC);
		assert_true((cfg.nodes[1].bmc != NULL) == (i == 2));
		want = ft_asprintf("%s/state/%s", top, cfg.name);
		assert_string_equal(cfg.state_dir, want);
		free(want);
		free(top);
		ft_config_free(&cfg);
	}
}

/* "ssh" and "network": defaults, a remote node, bad values. */
static void
test_hosts_keys(void **state)
{
	struct ft_config cfg;

	accepted(state, "{\"state_dir\": \"s\", " NODES "}", &cfg);
	assert_string_equal(cfg.ssh, "ssh");
	assert_null(cfg.network);
	assert_int_equal(cfg.remote, 0);
	ft_config_free(&cfg);
	accepted(state, "{\"state_dir\": \"s\", \"ssh\": \"ssh -F /x\", "
		 "\"network\": \"10.1.2.0/24\", \"nodes\": [{\"name\": \"a\", "
		 "\"host\": \"h1.example\"}]}", &cfg);
	assert_string_equal(cfg.ssh, "ssh -F /x");
	assert_string_equal(cfg.network, "10.1.2.0/24");
	assert_int_equal(cfg.remote, 1);
	ft_config_free(&cfg);
	refused(state, "{\"state_dir\": \"s\", " NODES ",\n \"network\": "
		"\"10.1.2.0\"}", "%s:2:2: network: must be a subnet in CIDR "
		"form, such as \"10.0.0.0/24\"");
	refused(state, "{\"state_dir\": \"s\", " NODES ", \"network\": "
		"\"10.1.2.0/33\"}", "%s:1:47: network: must be a subnet in "
		"CIDR form, such as \"10.0.0.0/24\"");
	refused(state, "{\"state_dir\": \"s\", " NODES ", \"ssh\": \" \"}",
		"%s:1:47: ssh: must name a program");
}

/* "nodes": "slurm" takes the allocation's hosts and tasks. */
static void
test_slurm_nodes(void **state)
{
	struct ft_config cfg;
	char err[256], **names = NULL;
	int counts[4];

	assert_int_equal(slurm_hostlist("a1,sl[01-02,7]", &names, err,
					sizeof(err)), 4);
	assert_string_equal(names[1], "sl01");
	assert_string_equal(names[3], "sl7");
	slurm_names_free(names);
	assert_int_equal(slurm_hostlist("sl[1-", &names, err, sizeof(err)),
			 -1);
	assert_int_equal(slurm_tasks("3,1(x2),2", counts, 4, err,
				     sizeof(err)), 0);
	assert_int_equal(counts[0] * 1000 + counts[1] * 100 + counts[2] * 10 +
			 counts[3], 3112);
	assert_int_equal(slurm_tasks("2(x3)", counts, 4, err, sizeof(err)),
			 -1);
	unsetenv("SLURM_JOB_NODELIST");
	/* Outside the allocation: read, without nodes (only start needs
	 * them). */
	accepted(state, "{\"state_dir\": \"s\", \"nodes\": \"slurm\"}", &cfg);
	assert_int_equal(cfg.nnodes, 0);
	assert_int_equal(cfg.slurm, 1);
	assert_int_equal(ft_config_has_nodes(&cfg, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "nodes: \"slurm\" needs a Slurm "
			       "allocation"));
	ft_config_free(&cfg);
	setenv("SLURM_JOB_NODELIST", "x[1-3]", 1);
	setenv("SLURM_TASKS_PER_NODE", "2(x3)", 1);
	accepted(state, "{\"state_dir\": \"s\", \"nodes\": \"slurm\"}", &cfg);
	assert_int_equal(cfg.nnodes, 3);
	assert_int_equal(cfg.nworkers, 6);
	assert_int_equal(cfg.slurm, 1);
	assert_string_equal(cfg.nodes[2].name, "x3");
	assert_string_equal(cfg.nodes[2].host, "x3");
	ft_config_free(&cfg);
	unsetenv("SLURM_JOB_NODELIST");
	unsetenv("SLURM_TASKS_PER_NODE");
}

/* The GPUs of a Slurm allocation, from fixed environment strings. */
static void
test_slurm_gpus(void **state)
{
	struct ft_config cfg;
	char err[256], **ids;

	assert_int_equal(slurm_gpus("0,2", "9", "gres/gpu:9", &ids, err,
				    sizeof(err)), 2);
	assert_string_equal(ids[0], "0");
	assert_string_equal(ids[1], "2");
	assert_null(ids[2]);
	slurm_names_free(ids);
	assert_int_equal(slurm_gpus(NULL, "3", NULL, &ids, err, sizeof(err)),
			 3);
	assert_string_equal(ids[2], "2");
	slurm_names_free(ids);
	assert_int_equal(slurm_gpus("", NULL, "cpu=4,gres/gpu:a100:2", &ids,
				    err, sizeof(err)), 2);
	slurm_names_free(ids);
	assert_int_equal(slurm_gpus(NULL, NULL, "gres/gpu", &ids, err,
				    sizeof(err)), 1);
	slurm_names_free(ids);
	assert_int_equal(slurm_gpus(NULL, NULL, "cpu=4", &ids, err,
				    sizeof(err)), 0);
	slurm_names_free(ids);
	assert_int_equal(slurm_gpus(NULL, "x", NULL, &ids, err, sizeof(err)),
			 -1);
	assert_int_equal(slurm_gpus("0,,1", NULL, NULL, &ids, err,
				    sizeof(err)), -1);
	setenv("SLURM_JOB_NODELIST", "g[1-2]", 1);
	setenv("SLURM_TASKS_PER_NODE", "4(x2)", 1);
	setenv("SLURM_JOB_GPUS", "1,3", 1);
	accepted(state, "{\"state_dir\": \"s\", \"nodes\": \"slurm\"}", &cfg);
	assert_int_equal(cfg.nodes[1].ngpus, 2);
	assert_string_equal(cfg.nodes[1].gpus[1], "3");
	ft_config_free(&cfg);
	unsetenv("SLURM_JOB_GPUS");
	unsetenv("SLURM_JOB_NODELIST");
	unsetenv("SLURM_TASKS_PER_NODE");
}

/* In a Slurm job SIGTERM is named as the end of that job. */
static void
test_slurm_signal_reason(void **state)
{
	char buf[80];

	(void)state;
	unsetenv("SLURM_JOB_ID");
	assert_string_equal(slurm_signal_reason(SIGTERM, buf, sizeof(buf)),
			    "signal 15");
	setenv("SLURM_JOB_ID", "812", 1);
	assert_string_equal(slurm_signal_reason(SIGTERM, buf, sizeof(buf)),
			    "SIGTERM: the end of Slurm job 812");
	assert_string_equal(slurm_signal_reason(SIGINT, buf, sizeof(buf)),
			    "signal 2");
	unsetenv("SLURM_JOB_ID");
}

/* What sbatch and squeue print, read back. */
static void
test_slurm_outputs(void **state)
{
	struct slurm_job j;
	char id[32];
	double t;
	const char *line = "812|RUNNING|2026-11-29T05:00:00|ftfarm.1a2b3c.q1"
			   "|sl[1-2]\n";

	(void)state;
	assert_int_equal(slurm_parse_jobid("812\n", id, sizeof(id)), 0);
	assert_string_equal(id, "812");
	assert_int_equal(slurm_parse_jobid("sbatch: warning: x\n813;c1\n", id,
					   sizeof(id)), 0);
	assert_string_equal(id, "813");
	assert_int_equal(slurm_parse_jobid("sbatch: error: invalid partition "
					   "specified: later\n", id,
					   sizeof(id)), -1);
	assert_int_equal(slurm_parse_squeue(line, strlen(line), &j), 0);
	assert_string_equal(j.id, "812");
	assert_string_equal(j.state, "RUNNING");
	assert_string_equal(j.name, "ftfarm.1a2b3c.q1");
	assert_string_equal(j.nodes, "sl[1-2]");
	assert_int_equal(slurm_parse_time("2026-11-29T05:00:00", &t), 0);
	assert_true(j.end == t && t > 1.7e9);
	line = "9|PENDING|N/A|n|";
	assert_int_equal(slurm_parse_squeue(line, strlen(line), &j), 0);
	assert_true(j.end == 0 && j.nodes[0] == '\0');
	line = "9|PENDING|N/A";
	assert_int_equal(slurm_parse_squeue(line, strlen(line), &j), -1);
	line = "x9|PENDING|N/A|n|";
	assert_int_equal(slurm_parse_squeue(line, strlen(line), &j), -1);
	assert_true(slurm_state_ended("COMPLETED") && slurm_state_ended("TIMEOUT"));
	assert_false(slurm_state_ended("PENDING") ||
		     slurm_state_ended("COMPLETING"));
	assert_true(slurm_state_running("RUNNING") &&
		    !slurm_state_running("PENDING"));
	assert_int_equal(slurm_parse_time("UNLIMITED", &t), -1);
}

/* "allocations": queues, their defaults and their bounds; they need
 * nodes to join. */
static void
test_allocations(void **state)
{
	struct ft_config cfg;

	accepted(state, "{\"state_dir\": \"/s\", \"nodes\": [], \"control\": "
		 "{\"listen\": \":0\"}, \"allocations\": [{\"name\": \"q1\", "
		 "\"time_limit_s\": 3600, \"sbatch\": [\"-p\", \"debug\"], "
		 "\"nodes\": 2, \"max_nodes\": 8, \"backlog\": 2, \"idle_s\": "
		 "15, \"slots\": 4, \"gpus\": 2, \"start_command\": \"true\"}, "
		 "{\"name\": \"q2\", \"time_limit_s\": 60}]}", &cfg);
	assert_int_equal(cfg.nqueues, 2);
	assert_string_equal(cfg.queues[0].sbatch[1], "debug");
	assert_int_equal(cfg.queues[0].nsbatch, 2);
	assert_int_equal(cfg.queues[0].nodes, 2);
	assert_int_equal(cfg.queues[0].max_nodes, 8);
	assert_string_equal(cfg.queues[0].gpus, "0,1");
	assert_string_equal(cfg.queues[0].start_command, "true");
	assert_int_equal(cfg.queues[1].nodes, 1);
	assert_int_equal(cfg.queues[1].max_nodes, 1);
	assert_int_equal(cfg.queues[1].backlog, 1);
	assert_true(cfg.queues[1].idle == 300);
	assert_int_equal(cfg.queues[1].slots, 0);
	assert_null(cfg.queues[1].gpus);
	ft_config_free(&cfg);
	refused(state, "{\"state_dir\": \"s\", " NODES ", \"allocations\": "
		"[{\"name\": \"q\", \"time_limit_s\": 600}]}",
		"%s:1:47: allocations: the nodes of allocations join over TCP: "
		"that needs \"control\": {\"listen\": \"HOST:PORT\"} (and "
		"join.max_nodes above 0)");
	refused(state, "{\"state_dir\": \"s\", \"nodes\": [], \"control\": "
		"{\"listen\": \":0\"}, \"allocations\": [{\"name\": \"q\", "
		"\"time_limit_s\": 30}]}",
		"%s:1:92: allocations[0].time_limit_s: must be between 60 and "
		"100000000");
	refused(state, "{\"state_dir\": \"s\", \"nodes\": [], \"control\": "
		"{\"listen\": \":0\"}, \"allocations\": [{\"name\": \"q\", "
		"\"time_limit_s\": 60, \"nodes\": 4, \"max_nodes\": 2}]}",
		"%s:1:124: allocations[0].max_nodes: must be at least \"nodes\" "
		"(4)");
	refused(state, "{\"state_dir\": \"s\", \"nodes\": [], \"control\": "
		"{\"listen\": \":0\"}, \"allocations\": [{\"name\": \"q\", "
		"\"time_limit_s\": 60}, {\"name\": \"q\", \"time_limit_s\": "
		"60}]}", "%s:1:113: allocations[1]: duplicate queue name \"q\"");
	refused(state, "{\"state_dir\": \"s\", \"nodes\": [], \"control\": "
		"{\"listen\": \":0\"}, \"allocations\": [{\"name\": \"q\"}]}",
		"%s:1:78: allocations[0]: missing required key "
		"\"time_limit_s\"");
}

/* A node's "gpus": ids or a count; refused when malformed. */
static void
test_node_gpus(void **state)
{
	struct ft_config cfg;

	accepted(state, "{\"state_dir\": \"s\", \"nodes\": [{\"name\": \"a\", "
		 "\"gpus\": [\"7\", \"x\"]}, {\"name\": \"b\", \"gpus\": 3}]}",
		 &cfg);
	assert_int_equal(cfg.nodes[0].ngpus, 2);
	assert_string_equal(cfg.nodes[0].gpus[1], "x");
	assert_int_equal(cfg.nodes[1].ngpus, 3);
	assert_string_equal(cfg.nodes[1].gpus[2], "2");
	ft_config_free(&cfg);
	refused(state, "{\"state_dir\": \"s\", \"nodes\": [{\"name\": \"a\", "
		"\"gpus\": [\"0\", \"0\"]}]}",
		"%s:1:44: nodes[0].gpus: device id \"0\" twice");
	refused(state, "{\"state_dir\": \"s\", \"nodes\": [{\"name\": \"a\", "
		"\"gpus\": 65}]}",
		"%s:1:44: nodes[0].gpus: must be 0..64 (GPUs), got 65");
}

/* A node's "mem", "task_stdout" and "task_stderr", "mem_enforce". */
static void
test_task_resources(void **state)
{
	struct ft_config cfg;

	accepted(state, "{\"state_dir\": \"s\", \"nodes\": [{\"name\": \"a\", "
		 "\"mem\": \"64G\"}, {\"name\": \"b\", \"mem\": 4096}, "
		 "{\"name\": \"c\"}], \"task_stdout\": \"out/%b/%t.out\", "
		 "\"task_stderr\": \"/e/%n.%%\", \"mem_enforce\": \"sample\"}",
		 &cfg);
	assert_true(cfg.nodes[0].mem == 64ULL << 30);
	assert_true(cfg.nodes[1].mem == 4096);
	assert_true(cfg.nodes[2].mem == 0);	/* its agent's finding */
	assert_true(ft_node_mem(&cfg.nodes[2], 77) == 77);
	cfg.nodes[2].mem_found = 99;
	assert_true(ft_node_mem(&cfg.nodes[2], 77) == 99);
	/* Relative to the config file's directory. */
	assert_non_null(strstr(cfg.task_stdout, "/conf/out/%b/%t.out"));
	assert_true(cfg.task_stdout[0] == '/');
	assert_string_equal(cfg.task_stderr, "/e/%n.%%");
	assert_int_equal(cfg.mem_enforce, FT_MEM_SAMPLE);
	ft_config_free(&cfg);
	accepted(state, "{\"state_dir\": \"s\", " NODES "}", &cfg);
	assert_int_equal(cfg.mem_enforce, FT_MEM_AUTO);
	assert_null(cfg.task_stdout);
	ft_config_free(&cfg);
	refused(state, "{\"state_dir\": \"s\", \"nodes\": [{\"name\": \"a\", "
		"\"mem\": \"lots\"}]}",
		"%s:1:44: nodes[0].mem: must be bytes or a number with K, M, G "
		"or T (\"64G\"), more than 0 and at most 1 PiB");
	refused(state, "{\"state_dir\": \"s\", " NODES ", \"task_stdout\": "
		"\"o/%q\"}", "%s:1:47: task_stdout: \"%%q\" is no placeholder "
		"(%%b batch, %%t task, %%a attempt, %%n node, %%%% a %%)");
	refused(state, "{\"state_dir\": \"s\", " NODES ", \"mem_enforce\": "
		"\"cgroup\"}", "%s:1:47: mem_enforce: must be \"auto\", "
		"\"sample\" or \"none\"");
}

/* "control": "listen" (control over TCP) and "munge_socket". */
static void
test_control_tcp(void **state)
{
	struct ft_config cfg;

	accepted(state, "{\"state_dir\": \"s\", " NODES "}", &cfg);
	assert_null(cfg.control.listen_host);	/* off by default */
	assert_null(cfg.control.munge_socket);
	ft_config_free(&cfg);
	accepted(state, "{\"state_dir\": \"s\", " NODES ", \"control\": "
		 "{\"listen\": \":0\", \"munge_socket\": \"/run/m.sock\"}}",
		 &cfg);
	assert_string_equal(cfg.control.listen_host, "0.0.0.0");
	assert_int_equal(cfg.control.listen_port, 0);
	assert_string_equal(cfg.control.munge_socket, "/run/m.sock");
	ft_config_free(&cfg);
	accepted(state, "{\"state_dir\": \"s\", " NODES ", \"control\": "
		 "{\"listen\": \"10.0.0.1:7000\"}}", &cfg);
	assert_string_equal(cfg.control.listen_host, "10.0.0.1");
	assert_int_equal(cfg.control.listen_port, 7000);
	ft_config_free(&cfg);
	refused(state, "{\"state_dir\": \"s\", " NODES ", \"control\": "
		"{\"listen\": \"h:99999\"}}", "%s:1:59: control.listen: must "
		"be HOST:PORT with a port from 0 to 65535");
}

/* "nodes": [] with control over TCP: every node joins; "join": its
 * bound and the power control of the hosts nodes join from, copied to a
 * node that joins from one (by name or short name). */
static void
test_join(void **state)
{
	struct ft_config cfg;
	char *gpus[] = { "0", "3" };
	int i;

	accepted(state, "{\"state_dir\": \"/s\", \"nodes\": [], \"control\": "
		 "{\"listen\": \"127.0.0.1:0\"}, \"join\": {\"max_nodes\": 3, "
		 "\"hosts\": {\"sl2\": {\"bmc\": {\"host\": \"10.1.0.2\", "
		 "\"user\": \"u\", \"password_file\": \"/pw\"}, "
		 "\"ready_command\": [\"true\"]}}}}", &cfg);
	assert_int_equal(cfg.nnodes, 0);
	assert_int_equal(cfg.no_nodes, 1);
	assert_true(ft_config_joinable(&cfg));
	assert_int_equal(cfg.join.max_nodes, 3);
	assert_int_equal(cfg.join.nhosts, 1);
	i = ft_config_add_joined(&cfg, "a", "sl2.cluster.org", 4, gpus, 2);
	assert_int_equal(i, 0);
	assert_int_equal(cfg.nnodes, 1);
	assert_true(cfg.nodes[0].joined);
	assert_int_equal(cfg.nodes[0].workers, 4);
	assert_int_equal(cfg.nodes[0].ngpus, 2);
	assert_string_equal(cfg.nodes[0].gpus[1], "3");
	assert_non_null(cfg.nodes[0].bmc);
	assert_string_equal(cfg.nodes[0].bmc->host, "10.1.0.2");
	assert_string_equal(cfg.nodes[0].ready_command[0], "true");
	i = ft_config_add_joined(&cfg, "b", "sl3", 1, NULL, 0);
	assert_int_equal(i, 1);
	assert_null(cfg.nodes[1].bmc);
	/* Its next incarnation, elsewhere: what that host has. */
	ft_config_rejoin(&cfg, 0, "sl9", 2, NULL, 0);
	assert_string_equal(cfg.nodes[0].name, "a");
	assert_null(cfg.nodes[0].bmc);
	assert_int_equal(cfg.nodes[0].workers, 2);
	ft_config_free(&cfg);
	assert_true(ft_config_name_ok("sl1.x_y-2"));
	assert_false(ft_config_name_ok("a b"));
	assert_false(ft_config_name_ok(".."));
	refused(state, "{\"state_dir\": \"s\", \"nodes\": [], \"control\": "
		"{\"listen\": \":0\"}, \"join\": {\"max_nodes\": 0}}",
		"%s:1:20: nodes: is empty, so every node must join over TCP: "
		"that needs \"control\": {\"listen\": \"HOST:PORT\"} (and "
		"join.max_nodes above 0)");
	refused(state, "{\"state_dir\": \"s\", " NODES ", \"join\": "
		"{\"hosts\": {\"h\": {\"power\": 1}}}}",
		"%s:1:72: join.hosts.h.power: unknown key");
	refused(state, "{\"state_dir\": \"s\", " NODES ", \"join\": "
		"{\"max_nodes\": -1}}",
		"%s:1:56: join.max_nodes: must be between 0 and 65536");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
		T(test_missing_key),
		T(test_slurm_gpus),
		T(test_slurm_signal_reason),
		T(test_node_gpus),
		T(test_slurm_outputs),
		T(test_allocations),
		T(test_task_resources),
		T(test_wrong_type),
		T(test_unknown_key),
		T(test_bad_json),
		T(test_unreadable),
		T(test_out_of_range),
		T(test_bad_values),
		T(test_bad_launch),
		T(test_duplicate_node),
		T(test_relative_state_dir),
		T(test_defaults),
		T(test_full),
		T(test_bmc),
		T(test_bad_bmc),
		T(test_hosts_keys),
		T(test_slurm_nodes),
		T(test_control_tcp),
		T(test_join),
		cmocka_unit_test(test_shipped_configs),
#undef T
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

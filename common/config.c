/*
 * config: the cluster configuration file (JSON).
 *
 * The file is checked in one direction only: jcheck refuses unknown,
 * missing and mistyped keys, then each value is range-checked and copied
 * into struct ft_config.  Every error is one line with the key's line:column
 * (see jcheck_format).
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>

#include "jcheck.h"
#include "jpos.h"
#include "memsize.h"
#include "outpath.h"
#include "plugin.h"
#include "slurm.h"
#include "util.h"

static const struct jfield top_fields[] = {
	{ "name", JT_STRING, 0 },
	{ "state_dir", JT_STRING, 1 },
	{ "launch", JT_STRING, 0 },
	{ "nodes", JT_ANY, 1 },		/* an array, or "slurm" */
	{ "heartbeat_ms", JT_INT, 0 },
	{ "heartbeat_timeout_ms", JT_INT, 0 },
	{ "task_timeout_s", JT_NUMBER, 0 },
	{ "open_idle_s", JT_NUMBER, 0 },
	{ "retain_s", JT_NUMBER, 0 },
	{ "slow_timeout_s", JT_NUMBER, 0 },
	{ "start_timeout_s", JT_NUMBER, 0 },
	{ "max_attempts", JT_INT, 0 },
	{ "respawn_limit", JT_INT, 0 },
	{ "max_reboots", JT_INT, 0 },
	{ "reboot_wait_s", JT_NUMBER, 0 },
	{ "drain_timeout_s", JT_NUMBER, 0 },
	{ "failure_window_s", JT_NUMBER, 0 },
	{ "probe_min_s", JT_NUMBER, 0 },
	{ "probe_max_s", JT_NUMBER, 0 },
	{ "output_cap", JT_INT, 0 },
	{ "task_stdout", JT_STRING, 0 },
	{ "task_stderr", JT_STRING, 0 },
	{ "mem_enforce", JT_STRING, 0 },
	{ "task_events", JT_BOOL, 0 },
	{ "mpirun_args", JT_STRING_ARRAY, 0 },
	{ "log_level", JT_STRING, 0 },
	{ "http", JT_OBJECT, 0 },
	{ "log_max_bytes", JT_INT, 0 },
	{ "log_keep", JT_INT, 0 },
	{ "control", JT_OBJECT, 0 },
	{ "fsync", JT_STRING, 0 },
	{ "fsync_interval_ms", JT_INT, 0 },
	{ "lease_ms", JT_INT, 0 },
	{ "restart_backoff_ms", JT_INT, 0 },
	{ "restart_backoff_max_ms", JT_INT, 0 },
	{ "master_silence_ms", JT_INT, 0 },
	{ "ssh", JT_STRING, 0 },
	{ "network", JT_STRING, 0 },
	{ "join", JT_OBJECT, 0 },
	{ "allocations", JT_ARRAY, 0 },
	{ NULL, JT_ANY, 0 },
};

static const struct jfield alloc_fields[] = {
	{ "name", JT_STRING, 1 },
	{ "sbatch", JT_STRING_ARRAY, 0 },
	{ "nodes", JT_INT, 0 },
	{ "time_limit_s", JT_NUMBER, 1 },
	{ "max_nodes", JT_INT, 0 },
	{ "backlog", JT_INT, 0 },
	{ "idle_s", JT_NUMBER, 0 },
	{ "slots", JT_INT, 0 },
	{ "gpus", JT_ANY, 0 },
	{ "start_command", JT_STRING, 0 },
	{ NULL, JT_ANY, 0 },
};

static const struct jfield join_fields[] = {
	{ "max_nodes", JT_INT, 0 },
	{ "hosts", JT_OBJECT, 0 },
	{ NULL, JT_ANY, 0 },
};

static const struct jfield join_host_fields[] = {
	{ "bmc", JT_OBJECT, 0 },
	{ "ready_command", JT_STRING_ARRAY, 0 },
	{ NULL, JT_ANY, 0 },
};

static const struct jfield http_fields[] = {
	{ "listen", JT_STRING, 0 },
	{ NULL, JT_ANY, 0 },
};

static const struct jfield control_fields[] = {
	{ "socket_mode", JT_STRING, 0 },
	{ "socket_group", JT_STRING, 0 },
	{ "submitters", JT_ARRAY, 0 },
	{ "max_request_bytes", JT_INT, 0 },
	{ "max_batch_bytes", JT_INT, 0 },
	{ "max_output_bytes", JT_INT, 0 },
	{ "max_clients", JT_INT, 0 },
	{ "max_clients_per_uid", JT_INT, 0 },
	{ "idle_timeout_s", JT_NUMBER, 0 },
	{ "listen", JT_STRING, 0 },
	{ "munge_socket", JT_STRING, 0 },
	{ NULL, JT_ANY, 0 },
};

static const struct jfield node_fields[] = {
	{ "name", JT_STRING, 1 },
	{ "host", JT_STRING, 0 },
	{ "workers", JT_INT, 0 },
	{ "bmc", JT_OBJECT, 0 },
	{ "ready_command", JT_STRING_ARRAY, 0 },
	{ "gpus", JT_ANY, 0 },
	{ "pin", JT_BOOL, 0 },
	{ "mem", JT_ANY, 0 },
	{ NULL, JT_ANY, 0 },
};

static const struct jfield bmc_fields[] = {
	{ "host", JT_STRING, 1 },
	{ "port", JT_INT, 0 },
	{ "user", JT_STRING, 1 },
	{ "password_file", JT_STRING, 1 },
	{ "interface", JT_STRING, 0 },
	{ "cipher_suite", JT_INT, 0 },
	{ "timeout_s", JT_INT, 0 },
	{ "retries", JT_INT, 0 },
	{ "deadline_s", JT_NUMBER, 0 },
	{ "min_gap_s", JT_NUMBER, 0 },
	{ "ipmitool", JT_STRING, 0 },
	{ NULL, JT_ANY, 0 },
};

/* Integer keys and their bounds. */
static const struct {
	const char *key;
	long long lo, hi;
} int_limits[] = {
	{ "heartbeat_ms", 10, 600000 },
	{ "heartbeat_timeout_ms", 10, 3600000 },
	{ "max_attempts", 1, 100 },
	{ "respawn_limit", 0, 1000 },
	{ "max_reboots", 0, 100 },
	{ "output_cap", 0, 131072 },
	{ "log_max_bytes", 4096, 1LL << 40 },
	{ "log_keep", 0, 100 },
	{ "fsync_interval_ms", 1, 60000 },
	{ "lease_ms", 100, 3600000 },
	{ "restart_backoff_ms", 10, 3600000 },
	{ "restart_backoff_max_ms", 10, 3600000 },
	{ "master_silence_ms", 100, 86400000 },
};

/* Number keys that must lie in (0, hi]. */
static const struct {
	const char *key;
	double hi;
} num_limits[] = {
	{ "task_timeout_s", FT_TASK_TIMEOUT_MAX },
	{ "open_idle_s", 1e8 },
	{ "retain_s", 1e10 },
	{ "slow_timeout_s", 1e7 },
	{ "start_timeout_s", 3600 },
	{ "reboot_wait_s", 86400 },
	{ "drain_timeout_s", 1e7 },
	{ "failure_window_s", 1e7 },
	{ "probe_min_s", 1e6 },
	{ "probe_max_s", 1e6 },
};

static const char *const launch_names[] = { "dynamic", "static", NULL };
static const char *const log_levels[] = { "debug", "info", "warn", NULL };
static const char *const fsync_names[] = { "none", "batch", "always", NULL };
static const char *const mem_enforce_names[] = { "auto", "sample", "none",
						 NULL };

/* Index in CHOICES of the string member KEY of OBJ, DEF when absent, or -1
 * with ERR set to "must be ..." (MUST names the choices). */
static int
str_choice(const json_t *obj, const char *key, const char *const *choices,
	   int def, const char *must, struct jerr *err)
{
	const char *s = jget_str(obj, key, NULL);
	int i;

	if (s == NULL)
		return def;
	for (i = 0; choices[i] != NULL; i++)
		if (strcmp(s, choices[i]) == 0)
			return i;
	return jerr_set(err, key, "must be %s", must);
}

/* "name" with a default of the file's base name less ".json". */
static char *
default_name(const char *file)
{
	const char *base = strrchr(file, '/');
	size_t n;

	base = base ? base + 1 : file;
	n = strlen(base);
	if (n > 5 && strcmp(base + n - 5, ".json") == 0)
		n -= 5;
	return ft_asprintf("%.*s", (int)n, base);
}

static int
parse_name(const json_t *root, struct ft_config *cfg, struct jerr *err)
{
	const char *s = jget_str(root, "name", NULL);

	if (s != NULL && *s == '\0')
		return jerr_set(err, "name", "must not be empty");
	cfg->name = s ? ft_strdup(s) : default_name(cfg->path);
	return 0;
}

/* Check the ranges of every integer and number key, then copy them. */
static int
parse_limits(const json_t *root, struct ft_config *cfg, struct jerr *err)
{
	size_t i;
	long long hb;

	for (i = 0; i < FT_ARRAY_LEN(int_limits); i++)
		if (jcheck_int_range(root, "", int_limits[i].key,
				     int_limits[i].lo, int_limits[i].hi,
				     err) == -1)
			return -1;
	for (i = 0; i < FT_ARRAY_LEN(num_limits); i++)
		if (jcheck_num_positive(root, "", num_limits[i].key,
					num_limits[i].hi, err) == -1)
			return -1;
	hb = jget_int(root, "heartbeat_ms", 1000);
	cfg->heartbeat = (double)hb / 1000;
	/* By default a ping must be answered within 3/4 of a heartbeat, so
	 * that a dead worker is found within two heartbeats, loop latency
	 * included. */
	cfg->heartbeat_timeout =
		(double)jget_int(root, "heartbeat_timeout_ms", hb * 3 / 4) / 1000;
	cfg->task_timeout = jget_num(root, "task_timeout_s", 3600);
	cfg->open_idle = jget_num(root, "open_idle_s", 600);
	cfg->retain = jget_num(root, "retain_s", 7 * 86400);
	cfg->slow_timeout = jget_num(root, "slow_timeout_s", 60);
	cfg->start_timeout = jget_num(root, "start_timeout_s", 60);
	cfg->max_attempts = (int)jget_int(root, "max_attempts", 3);
	cfg->respawn_limit = (int)jget_int(root, "respawn_limit", 1);
	cfg->max_reboots = (int)jget_int(root, "max_reboots", 1);
	cfg->reboot_wait = jget_num(root, "reboot_wait_s", 300);
	cfg->drain_timeout = jget_num(root, "drain_timeout_s", 600);
	cfg->failure_window = jget_num(root, "failure_window_s", 600);
	cfg->probe_min = jget_num(root, "probe_min_s", 30);
	cfg->probe_max = jget_num(root, "probe_max_s", 3600);
	if (cfg->probe_max < cfg->probe_min)
		return jerr_set(err, json_object_get(root, "probe_max_s") ?
				"probe_max_s" : "probe_min_s",
				"must not be less than probe_min_s");
	cfg->output_cap = (size_t)jget_int(root, "output_cap", 65536);
	cfg->task_events = jget_bool(root, "task_events", 1);
	cfg->log_max_bytes = (size_t)jget_int(root, "log_max_bytes", 64 << 20);
	cfg->log_keep = (int)jget_int(root, "log_keep", 3);
	cfg->fsync_interval = (double)jget_int(root, "fsync_interval_ms",
					       100) / 1000;
	cfg->lease = (double)jget_int(root, "lease_ms", 5000) / 1000;
	cfg->restart_backoff =
		(double)jget_int(root, "restart_backoff_ms", 100) / 1000;
	cfg->restart_backoff_max =
		(double)jget_int(root, "restart_backoff_max_ms", 30000) / 1000;
	if (cfg->restart_backoff_max < cfg->restart_backoff)
		return jerr_set(err, "restart_backoff_max_ms", "must not be less "
				"than restart_backoff_ms");
	/* Workers leave a master silent this long: long enough for a
	 * restarted master to replay its journal, short enough that a dead
	 * job does not hold its nodes for long. */
	cfg->master_silence = (double)jget_int(root, "master_silence_ms",
			(long long)fmax(30000, 10 * hb)) / 1000;
	if (cfg->master_silence < 2 * cfg->heartbeat)
		return jerr_set(err, "master_silence_ms", "must be at least two "
				"heartbeats (%lld ms)", 2 * hb);
	return 0;
}

/* One of "submitters": a user name or a uid, into *UID.  0 or -1. */
static int
parse_user(const json_t *v, const char *path, unsigned *uid,
	   struct jerr *err)
{
	struct passwd *pw;

	if (json_is_integer(v)) {
		if (json_integer_value(v) < 0 ||
		    json_integer_value(v) > 0x7fffffff)
			return jerr_set(err, path, "not a uid");
		*uid = (unsigned)json_integer_value(v);
		return 0;
	}
	if (!json_is_string(v))
		return jerr_set(err, path, "expected a user name or a uid, got "
				"%s", jcheck_type_name(v));
	pw = getpwnam(json_string_value(v));
	if (pw == NULL)
		return jerr_set(err, path, "no such user \"%s\"",
				json_string_value(v));
	*uid = (unsigned)pw->pw_uid;
	return 0;
}

/* "HOST:PORT", "[V6]:PORT", ":PORT" or "PORT" (the value of KEY) into
 * *HOST (a new string; DEFHOST when there is none) and *PORT.  0, or -1
 * with ERR. */
static int
parse_listen(const char *s, const char *key, const char *defhost,
	     char **host, int *port, struct jerr *err)
{
	const char *colon = strrchr(s, ':'), *p = colon ? colon + 1 : s;
	size_t hlen = colon ? (size_t)(colon - s) : 0;
	char *end;
	long v = strtol(p, &end, 10);

	if (*p == '\0' || *end != '\0' || v < 0 || v > 65535)
		return jerr_set(err, key, "must be HOST:PORT with a "
				"port from 0 to 65535");
	if (hlen >= 2 && s[0] == '[' && s[hlen - 1] == ']')
		s++, hlen -= 2;		/* [::1]:9750 */
	*host = hlen ? ft_asprintf("%.*s", (int)hlen, s) : ft_strdup(defhost);
	*port = (int)v;
	return 0;
}

/* "socket_mode": an octal string such as "0660".  0 or -1. */
static int
parse_mode(const json_t *c, struct ft_control_cfg *cc, struct jerr *err)
{
	const char *s = jget_str(c, "socket_mode", NULL);
	char *end;
	unsigned long v;

	cc->socket_mode = 0666;
	if (s == NULL)
		return 0;
	v = strtoul(s, &end, 8);
	if (*s == '\0' || *end != '\0' || v > 0777)
		return jerr_set(err, "control.socket_mode", "must be an octal "
				"mode such as \"0660\"");
	cc->socket_mode = (unsigned)v;
	return 0;
}

static const struct {
	const char *key;
	long long lo, hi;
} control_limits[] = {
	{ "max_request_bytes", 1024, 1 << 30 },
	{ "max_batch_bytes", 1024, 4LL << 30 },
	{ "max_output_bytes", 65536, 1LL << 34 },
	{ "max_clients", 4, 65536 },
	{ "max_clients_per_uid", 1, 65536 },
};

/* The members of "control" C (checked) into CC.  0 or -1. */
static int
control_values(const json_t *c, struct ft_control_cfg *cc, struct jerr *err)
{
	const json_t *sub, *v;
	char path[sizeof(err->path)];
	size_t i;

	for (i = 0; i < FT_ARRAY_LEN(control_limits); i++)
		if (jcheck_int_range(c, "control", control_limits[i].key,
				     control_limits[i].lo, control_limits[i].hi,
				     err) == -1)
			return -1;
	if (jcheck_num_positive(c, "control", "idle_timeout_s", 1e7,
				err) == -1 || parse_mode(c, cc, err) == -1)
		return -1;
	cc->max_request = (size_t)jget_int(c, "max_request_bytes", 1 << 20);
	cc->max_batch = (size_t)jget_int(c, "max_batch_bytes", 1LL << 30);
	cc->max_output = (size_t)jget_int(c, "max_output_bytes", 16 << 20);
	cc->max_clients = (int)jget_int(c, "max_clients", 256);
	cc->max_clients_per_uid = (int)jget_int(c, "max_clients_per_uid", 64);
	cc->idle_timeout = jget_num(c, "idle_timeout_s", 60);
	if (jget_str(c, "socket_group", NULL))
		cc->socket_group = ft_strdup(jget_str(c, "socket_group", NULL));
	if (jget_str(c, "munge_socket", NULL))
		cc->munge_socket = ft_strdup(jget_str(c, "munge_socket", NULL));
	if (jget_str(c, "listen", NULL) &&
	    parse_listen(jget_str(c, "listen", NULL), "control.listen",
			 "0.0.0.0", &cc->listen_host, &cc->listen_port,
			 err) == -1)
		return -1;
	sub = json_object_get(c, "submitters");
	cc->submitters = ft_calloc(json_array_size(sub) + 1, sizeof(unsigned));
	json_array_foreach(sub, i, v) {
		jpath_index(path, sizeof(path), "control.submitters", i);
		if (parse_user(v, path, &cc->submitters[i], err) == -1)
			return -1;
		cc->nsubmitters++;
	}
	return 0;
}

/* "control": the socket's access and limits. */
static int
parse_control(const json_t *root, struct ft_config *cfg, struct jerr *err)
{
	const json_t *c = json_object_get(root, "control");
	json_t *none = NULL;
	int rc;

	if (c == NULL)
		c = none = json_object();
	else if (jcheck_object(c, "control", control_fields, err) == -1)
		return -1;
	rc = control_values(c, &cfg->control, err);
	json_decref(none);
	return rc;
}

static int
parse_choices(const json_t *root, struct ft_config *cfg, struct jerr *err)
{
	int launch, level, sync;

	sync = str_choice(root, "fsync", fsync_names, FT_FSYNC_BATCH,
			  "\"none\", \"batch\" or \"always\"", err);
	if (sync == -1)
		return -1;
	cfg->fsync = (enum ft_fsync)sync;
	launch = str_choice(root, "launch", launch_names, 0,
			    "\"dynamic\" or \"static\"", err);
	if (launch == -1)
		return -1;
	cfg->launch = launch == 0 ? FT_LAUNCH_DYNAMIC : FT_LAUNCH_STATIC;
	level = str_choice(root, "log_level", log_levels, 1,
			   "\"debug\", \"info\" or \"warn\"", err);
	if (level == -1)
		return -1;
	cfg->log_level = ft_strdup(log_levels[level]);
	level = str_choice(root, "mem_enforce", mem_enforce_names, 0,
			   "\"auto\", \"sample\" or \"none\"", err);
	if (level == -1)
		return -1;
	cfg->mem_enforce = (enum ft_mem_enforce)level;
	return 0;
}

static void
parse_mpirun_args(const json_t *root, struct ft_config *cfg)
{
	const json_t *arr = json_object_get(root, "mpirun_args"), *el;
	size_t i;

	cfg->mpirun_args = ft_calloc(json_array_size(arr) + 1,
				     sizeof(*cfg->mpirun_args));
	json_array_foreach(arr, i, el)
		cfg->mpirun_args[cfg->nmpirun_args++] =
			ft_strdup(json_string_value(el));
}

static void path_clean(char *p);
static char *config_path(const struct ft_config *cfg, const char *path);

/* Is S a usable node name: [A-Za-z0-9_.-]+ and not "." or ".." (names may
 * become file names)?  0, or -1 with ERR set at PATH. */
static int
check_node_name(const char *s, const char *path, struct jerr *err)
{
	if (*s == '\0')
		return jerr_set(err, path, "must not be empty");
	if (s[strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
		       "0123456789_.-")] != '\0')
		return jerr_set(err, path, "must contain only letters, digits, "
				"\"_\", \".\" and \"-\"");
	if (strcmp(s, ".") == 0 || strcmp(s, "..") == 0)
		return jerr_set(err, path, "must not be \".\" or \"..\"");
	return 0;
}

static const char *const bmc_interfaces[] = { "lanplus", "lan", NULL };

/* Range checks of the keys of bmc object B (at PATH). */
static int
check_bmc(const json_t *b, const char *path, struct jerr *err)
{
	char at[sizeof(err->path)];
	int i;

	if (jcheck_object(b, path, bmc_fields, err) == -1 ||
	    jcheck_int_range(b, path, "port", 1, 65535, err) == -1 ||
	    jcheck_int_range(b, path, "cipher_suite", 0, 17, err) == -1 ||
	    jcheck_int_range(b, path, "timeout_s", 1, 60, err) == -1 ||
	    jcheck_int_range(b, path, "retries", 1, 10, err) == -1 ||
	    jcheck_num_positive(b, path, "deadline_s", 3600, err) == -1 ||
	    jcheck_num_range(b, path, "min_gap_s", 0, 60, err) == -1)
		return -1;
	jpath_key(at, sizeof(at), path, "interface");
	if (str_choice(b, "interface", bmc_interfaces, 0,
		       "\"lanplus\" or \"lan\"", err) == -1)
		return jerr_set(err, at, "must be \"lanplus\" or \"lan\"");
	for (i = 0; i < 4; i++) {
		static const char *const keys[] = { "host", "user",
						    "password_file",
						    "ipmitool" };

		if (*jget_str(b, keys[i], "x") == '\0') {
			jpath_key(at, sizeof(at), path, keys[i]);
			return jerr_set(err, at, "must not be empty");
		}
	}
	return 0;
}

/* The node's "bmc" at PATH into NODE (absent: none).  0 or -1 with ERR. */
static int
parse_bmc(const json_t *el, const char *path, const struct ft_config *cfg,
	  struct ft_node *node, struct jerr *err)
{
	const json_t *b = json_object_get(el, "bmc");
	char at[sizeof(err->path)];
	struct ft_bmc *m;

	if (b == NULL)
		return 0;
	jpath_key(at, sizeof(at), path, "bmc");
	if (check_bmc(b, at, err) == -1)
		return -1;
	m = node->bmc = ft_calloc(1, sizeof(*m));
	m->host = ft_strdup(jget_str(b, "host", ""));
	m->port = (int)jget_int(b, "port", 623);
	m->user = ft_strdup(jget_str(b, "user", ""));
	m->password_file = config_path(cfg, jget_str(b, "password_file", ""));
	m->interface = ft_strdup(jget_str(b, "interface", "lanplus"));
	m->cipher_suite = (int)jget_int(b, "cipher_suite", 3);
	m->timeout = (int)jget_int(b, "timeout_s", 1);
	m->retries = (int)jget_int(b, "retries", 1);
	/* ipmitool gives up after 2RN + R(R-1) s against a silent BMC. */
	m->deadline = jget_num(b, "deadline_s",
			       2.0 * m->retries * m->timeout +
			       m->retries * (m->retries - 1) + 3);
	m->min_gap = jget_num(b, "min_gap_s", 5);
	m->ipmitool = ft_strdup(jget_str(b, "ipmitool", "ipmitool"));
	return 0;
}

/* The node's "ready_command" at PATH into NODE (absent: none). */
static int
parse_ready(const json_t *el, const char *path, struct ft_node *node,
	    struct jerr *err)
{
	const json_t *a = json_object_get(el, "ready_command"), *v;
	char at[sizeof(err->path)];
	size_t i;

	if (a == NULL)
		return 0;
	jpath_key(at, sizeof(at), path, "ready_command");
	if (json_array_size(a) == 0 || *json_string_value(json_array_get(a, 0))
	    == '\0')
		return jerr_set(err, at, "must name a program");
	node->ready_command = ft_calloc(json_array_size(a) + 1, sizeof(char *));
	json_array_foreach(a, i, v)
		node->ready_command[i] = ft_strdup(json_string_value(v));
	return 0;
}

/* NODE gets N GPUs named "0".."N-1". */
static void
gpus_count(struct ft_node *node, int n)
{
	char id[16];
	int i;

	node->gpus = ft_calloc((size_t)n + 1, sizeof(char *));
	for (i = 0; i < n; i++) {
		snprintf(id, sizeof(id), "%d", i);
		node->gpus[i] = ft_strdup(id);
	}
	node->ngpus = n;
}

/* The node's "gpus" at PATH into NODE: a count, or a list of distinct
 * device ids without commas (absent: none).  0 or -1 with ERR. */
static int
parse_gpus(const json_t *el, const char *path, struct ft_node *node,
	   struct jerr *err)
{
	const json_t *g = json_object_get(el, "gpus"), *v;
	char at[sizeof(err->path)];
	size_t i, j;

	jpath_key(at, sizeof(at), path, "gpus");
	if (g == NULL)
		return 0;
	if (json_is_integer(g)) {
		if (json_integer_value(g) < 0 || json_integer_value(g) > 64)
			return jerr_set(err, at, "must be 0..64 (GPUs), got %lld",
					(long long)json_integer_value(g));
		gpus_count(node, (int)json_integer_value(g));
		return 0;
	}
	if (!json_is_array(g) || json_array_size(g) > 64)
		return jerr_set(err, at, "expected a count or a list of at "
				"most 64 device ids, got %s",
				jcheck_type_name(g));
	json_array_foreach(g, i, v) {
		const char *id = json_string_value(v);

		if (id == NULL || *id == '\0' || strpbrk(id, ", \t\n"))
			return jerr_set(err, at, "element %zu: expected a device "
					"id (a string without commas or blanks)",
					i);
		for (j = 0; j < i; j++)
			if (strcmp(id, json_string_value(json_array_get(g, j))) == 0)
				return jerr_set(err, at, "device id \"%s\" twice",
						id);
	}
	node->gpus = ft_calloc(json_array_size(g) + 1, sizeof(char *));
	json_array_foreach(g, i, v)
		node->gpus[i] = ft_strdup(json_string_value(v));
	node->ngpus = (int)json_array_size(g);
	return 0;
}

/* The node's "mem" at PATH into NODE (absent: 0, its agent's finding).
 * 0 or -1 with ERR. */
static int
parse_node_mem(const json_t *el, const char *path, struct ft_node *node,
	       struct jerr *err)
{
	const json_t *v = json_object_get(el, "mem");
	char at[sizeof(err->path)];

	if (v == NULL || memsize_json(v, &node->mem) == 0)
		return 0;
	jpath_key(at, sizeof(at), path, "mem");
	return jerr_set(err, at, "must be bytes or a number with K, M, G or T "
			"(\"64G\"), more than 0 and at most 1 PiB");
}

/* "task_stdout" and "task_stderr": patterns (outpath.h), relative ones
 * taken from the config file's directory.  0 or -1 with ERR. */
static int
parse_task_outputs(const json_t *root, struct ft_config *cfg,
		   struct jerr *err)
{
	const char *keys[] = { "task_stdout", "task_stderr" };
	char **dst[] = { &cfg->task_stdout, &cfg->task_stderr };
	char why[200];
	int i;

	for (i = 0; i < 2; i++) {
		const char *s = jget_str(root, keys[i], NULL);

		if (s == NULL)
			continue;
		if (outpath_check(s, why, sizeof(why)) == -1)
			return jerr_set(err, keys[i], "%s", why);
		*dst[i] = config_path(cfg, s);
	}
	return 0;
}

/* Check node object EL (at PATH) and append it to CFG->nodes (which has
 * room).  0 or -1 with ERR set. */
static int
parse_node(const json_t *el, const char *path, struct ft_config *cfg,
	   struct jerr *err)
{
	char npath[sizeof(err->path)];
	struct ft_node *node;
	const char *name, *host;
	int i;

	if (jcheck_object(el, path, node_fields, err) == -1 ||
	    jcheck_int_range(el, path, "workers", 1, 256, err) == -1)
		return -1;
	name = jget_str(el, "name", NULL);
	host = jget_str(el, "host", "localhost");
	jpath_key(npath, sizeof(npath), path, "name");
	if (check_node_name(name, npath, err) == -1)
		return -1;
	for (i = 0; i < cfg->nnodes; i++)
		if (strcmp(cfg->nodes[i].name, name) == 0)
			return jerr_set(err, npath, "duplicate node name "
					"\"%s\" (also nodes[%d])", name, i);
	if (*host == '\0') {
		jpath_key(npath, sizeof(npath), path, "host");
		return jerr_set(err, npath, "must not be empty");
	}
	node = &cfg->nodes[cfg->nnodes++];
	node->name = ft_strdup(name);
	node->host = ft_strdup(host);
	node->workers = (int)jget_int(el, "workers", 1);
	node->pin = jget_bool(el, "pin", 0);
	if (parse_node_mem(el, path, node, err) == -1 ||
	    parse_bmc(el, path, cfg, node, err) == -1 ||
	    parse_gpus(el, path, node, err) == -1)
		return -1;
	return parse_ready(el, path, node, err);
}

/* Every node of a Slurm allocation gets the GPUs the allocation gives
 * (slurm_gpus).  0 or -1 with ERR. */
static int
slurm_node_gpus(struct ft_config *cfg, struct jerr *err)
{
	char msg[256], **ids;
	int n = slurm_gpus(getenv("SLURM_JOB_GPUS"), getenv("SLURM_GPUS_ON_NODE"),
			   getenv("SLURM_TRES_PER_NODE"), &ids, msg, sizeof(msg));
	int i, k;

	if (n == -1)
		return jerr_set(err, "nodes", "%s", msg);
	for (i = 0; i < cfg->nnodes && n > 0; i++) {
		cfg->nodes[i].gpus = ft_calloc((size_t)n + 1, sizeof(char *));
		for (k = 0; k < n; k++)
			cfg->nodes[i].gpus[k] = ft_strdup(ids[k]);
		cfg->nodes[i].ngpus = n;
	}
	slurm_names_free(ids);
	return 0;
}

/* "nodes": "slurm": one node per host of the Slurm allocation we run in,
 * named as Slurm names it, a worker per task it has there. */
static int
parse_slurm_nodes(struct ft_config *cfg, struct jerr *err)
{
	const char *list = getenv("SLURM_JOB_NODELIST");
	const char *tpn = getenv("SLURM_TASKS_PER_NODE");
	char msg[256], **names = NULL;
	int n, i, *tasks = NULL, rc = -1;

	cfg->slurm = 1;
	if (list == NULL || tpn == NULL)
		return 0;	/* outside the allocation: known at start */
	if ((n = slurm_hostlist(list, &names, msg, sizeof(msg))) == -1) {
		jerr_set(err, "nodes", "SLURM_JOB_NODELIST: %s", msg);
		goto out;
	}
	tasks = ft_calloc((size_t)n, sizeof(int));
	if (slurm_tasks(tpn, tasks, n, msg, sizeof(msg)) == -1) {
		jerr_set(err, "nodes", "%s", msg);
		goto out;
	}
	cfg->nodes = ft_calloc((size_t)n, sizeof(*cfg->nodes));
	for (i = 0; i < n; i++) {
		cfg->nodes[i].name = ft_strdup(names[i]);
		cfg->nodes[i].host = ft_strdup(names[i]);
		cfg->nodes[i].workers = tasks[i];
		cfg->nworkers += tasks[i];
	}
	cfg->nnodes = n;
	rc = slurm_node_gpus(cfg, err);
out:
	slurm_names_free(names);
	free(tasks);
	return rc;
}

static int
parse_nodes(const json_t *root, struct ft_config *cfg, struct jerr *err)
{
	const json_t *arr = json_object_get(root, "nodes"), *el;
	char path[sizeof(err->path)];
	long long total = 0;
	size_t i;

	if (json_is_string(arr) && strcmp(json_string_value(arr), "slurm") == 0)
		return parse_slurm_nodes(cfg, err);
	if (!json_is_array(arr))
		return jerr_set(err, "nodes", "expected an array of nodes or "
				"\"slurm\", got %s", jcheck_type_name(arr));
	if (json_array_size(arr) == 0) {
		cfg->no_nodes = 1;	/* every node joins (check_joinable) */
		return 0;
	}
	if (json_array_size(arr) > INT_MAX / 256)
		return jerr_set(err, "nodes", "too many nodes");
	cfg->nodes = ft_calloc(json_array_size(arr), sizeof(*cfg->nodes));
	json_array_foreach(arr, i, el) {
		jpath_index(path, sizeof(path), "nodes", i);
		if (parse_node(el, path, cfg, err) == -1)
			return -1;
		total += cfg->nodes[i].workers;
	}
	cfg->nworkers = (int)total;
	return 0;
}

/* Normalise the absolute path P in place: no empty, "." or ".."
 * components, no trailing slash ("/" stays "/"). */
static void
path_clean(char *p)
{
	char *out = p, *in = p, *seg;
	size_t n;

	while (*in != '\0') {
		while (*in == '/')
			in++;
		seg = in;
		while (*in != '\0' && *in != '/')
			in++;
		n = (size_t)(in - seg);
		if (n == 0 || (n == 1 && seg[0] == '.'))
			continue;
		if (n == 2 && seg[0] == '.' && seg[1] == '.') {
			while (out > p && *--out != '/')
				;
			continue;
		}
		*out++ = '/';
		memmove(out, seg, n);
		out += n;
	}
	if (out == p)
		*out++ = '/';
	*out = '\0';
}

/* The config file's directory, absolute, with symbolic links resolved:
 * relative paths of the file are taken against it. */
static int
parse_dir(struct ft_config *cfg, struct jerr *err)
{
	char *dir = ft_dirname(cfg->path);

	cfg->dir = realpath(dir, NULL);
	if (cfg->dir == NULL)
		jerr_set(err, "state_dir", "cannot resolve the config file's "
			 "directory %s: %s", dir, strerror(errno));
	free(dir);
	return cfg->dir ? 0 : -1;
}

/* PATH of the file, absolute: relative to the file's directory, then
 * normalised lexically (a new string). */
static char *
config_path(const struct ft_config *cfg, const char *path)
{
	char *p = path[0] == '/' ? ft_strdup(path)
				 : ft_path_join(cfg->dir, path);

	path_clean(p);
	return p;
}

/* "state_dir": a relative path is taken against the directory that holds
 * the config file; the state directory need not exist yet. */
static int
parse_state_dir(const json_t *root, struct ft_config *cfg, struct jerr *err)
{
	const char *sd = jget_str(root, "state_dir", "");

	if (*sd == '\0')
		return jerr_set(err, "state_dir", "must not be empty");
	cfg->state_dir = config_path(cfg, sd);
	return 0;
}

/* "http": {"listen": ...}, off when absent. */
static int
parse_http(const json_t *root, struct ft_config *cfg, struct jerr *err)
{
	const json_t *h = json_object_get(root, "http");

	if (h == NULL)
		return 0;
	if (jcheck_object(h, "http", http_fields, err) == -1)
		return -1;
	cfg->http = 1;
	return parse_listen(jget_str(h, "listen", "127.0.0.1:9750"),
			    "http.listen", "127.0.0.1", &cfg->http_host,
			    &cfg->http_port, err);
}

/* Is S "ADDRESS/BITS", an IPv4 or IPv6 subnet? */
static int
is_cidr(const char *s)
{
	const char *slash = strchr(s, '/');
	unsigned char addr[16];
	char host[64], *end;
	long bits;
	int v6;

	if (slash == NULL || slash == s || (size_t)(slash - s) >= sizeof(host))
		return 0;
	snprintf(host, sizeof(host), "%.*s", (int)(slash - s), s);
	v6 = strchr(host, ':') != NULL;
	if (inet_pton(v6 ? AF_INET6 : AF_INET, host, addr) != 1)
		return 0;
	bits = strtol(slash + 1, &end, 10);
	return slash[1] != '\0' && *end == '\0' && bits >= 0 &&
	       bits <= (v6 ? 128 : 32);
}

/* "ssh" and "network": how mpirun reaches the other hosts and which
 * subnet MPI traffic uses. */
static int
parse_hosts(const json_t *root, struct ft_config *cfg, struct jerr *err)
{
	const char *ssh = jget_str(root, "ssh", "ssh");
	const char *net = jget_str(root, "network", NULL);
	int i;

	if (ssh[strspn(ssh, " \t")] == '\0')
		return jerr_set(err, "ssh", "must name a program");
	if (net != NULL && !is_cidr(net))
		return jerr_set(err, "network", "must be a subnet in CIDR form, "
				"such as \"10.0.0.0/24\"");
	cfg->ssh = ft_strdup(ssh);
	cfg->network = net ? ft_strdup(net) : NULL;
	for (i = 0; i < cfg->nnodes; i++)
		if (!ft_host_is_local(cfg->nodes[i].host))
			cfg->remote = 1;
	return 0;
}

/* With no node of its own, a master's capacity is what joins. */
static int
check_joinable(const struct ft_config *cfg, struct jerr *err)
{
	if (cfg->no_nodes && !ft_config_joinable(cfg))
		return jerr_set(err, "nodes", "is empty, so every node must "
				"join over TCP: that needs \"control\": "
				"{\"listen\": \"HOST:PORT\"} (and join.max_nodes "
				"above 0)");
	return 0;
}

/* "join": {"max_nodes", "hosts": {HOST: {"bmc", "ready_command"}}}. */
static int
parse_join(const json_t *root, struct ft_config *cfg, struct jerr *err)
{
	const json_t *j = json_object_get(root, "join"), *hosts, *h;
	char path[sizeof(err->path)];
	const char *host;
	struct ft_node *node;

	cfg->join.max_nodes = 1024;
	if (j == NULL)
		return check_joinable(cfg, err);
	if (jcheck_object(j, "join", join_fields, err) == -1 ||
	    jcheck_int_range(j, "join", "max_nodes", 0, 65536, err) == -1)
		return -1;
	cfg->join.max_nodes = (int)jget_int(j, "max_nodes", 1024);
	hosts = json_object_get(j, "hosts");
	cfg->join.hosts = ft_calloc(json_object_size(hosts) + 1,
				    sizeof(*cfg->join.hosts));
	json_object_foreach((json_t *)hosts, host, h) {
		jpath_key(path, sizeof(path), "join.hosts", host);
		if (*host == '\0')
			return jerr_set(err, path, "a host name must not be "
					"empty");
		if (!json_is_object(h))
			return jerr_set(err, path, "expected an object, got %s",
					jcheck_type_name(h));
		if (jcheck_object(h, path, join_host_fields, err) == -1)
			return -1;
		node = &cfg->join.hosts[cfg->join.nhosts++];
		node->name = ft_strdup(host);
		node->host = ft_strdup(host);
		if (parse_bmc(h, path, cfg, node, err) == -1 ||
		    parse_ready(h, path, node, err) == -1)
			return -1;
	}
	return check_joinable(cfg, err);
}

/* A queue's "gpus" at PATH into *OUT: a count or a list of ids, as
 * `ftfarm join --gpus` takes them (NULL when absent).  0 or -1. */
static int
queue_gpus(const json_t *g, const char *path, char **out, struct jerr *err)
{
	struct ft_node tmp = { 0 };
	json_t *wrap;
	struct ft_buf b = { 0 };
	int i, rc;

	*out = NULL;
	if (g == NULL)
		return 0;
	wrap = json_pack("{s:O}", "gpus", g);
	rc = parse_gpus(wrap, path, &tmp, err);
	json_decref(wrap);
	if (rc == -1)
		return -1;
	for (i = 0; i < tmp.ngpus; i++) {
		ft_buf_printf(&b, "%s%s", i ? "," : "", tmp.gpus[i]);
		free(tmp.gpus[i]);
	}
	free(tmp.gpus);
	*out = ft_asprintf("%.*s", (int)b.len, b.len ? (char *)b.data : "");
	if (**out == 0) {
		free(*out);
		*out = ft_strdup("0");
	}
	ft_buf_free(&b);
	return 0;
}

/* Queue object EL (at PATH) into Q.  0 or -1. */
static int
parse_queue(const json_t *el, const char *path, struct ft_alloc_queue *q,
	    struct jerr *err)
{
	char at[sizeof(err->path)];
	const json_t *a = json_object_get(el, "sbatch"), *v;
	size_t i;

	if (!json_is_object(el))
		return jerr_set(err, path, "expected an object, got %s",
				jcheck_type_name(el));
	if (jcheck_object(el, path, alloc_fields, err) == -1 ||
	    jcheck_int_range(el, path, "nodes", 1, 4096, err) == -1 ||
	    jcheck_int_range(el, path, "max_nodes", 1, 65536, err) == -1 ||
	    jcheck_int_range(el, path, "backlog", 1, 1000, err) == -1 ||
	    jcheck_int_range(el, path, "slots", 1, 4096, err) == -1 ||
	    jcheck_num_range(el, path, "time_limit_s", 60, 1e8, err) == -1 ||
	    jcheck_num_range(el, path, "idle_s", 0, 1e8, err) == -1)
		return -1;
	jpath_key(at, sizeof(at), path, "name");
	if (check_node_name(jget_str(el, "name", ""), at, err) == -1)
		return -1;
	q->name = ft_strdup(jget_str(el, "name", ""));
	q->nodes = (int)jget_int(el, "nodes", 1);
	q->time_limit = jget_num(el, "time_limit_s", 3600);
	q->max_nodes = (int)jget_int(el, "max_nodes", q->nodes);
	q->backlog = (int)jget_int(el, "backlog", 1);
	q->idle = jget_num(el, "idle_s", 300);
	q->slots = (int)jget_int(el, "slots", 0);
	if (q->max_nodes < q->nodes) {
		jpath_key(at, sizeof(at), path, "max_nodes");
		return jerr_set(err, at, "must be at least \"nodes\" (%d)",
				q->nodes);
	}
	if (jget_str(el, "start_command", NULL))
		q->start_command = ft_strdup(jget_str(el, "start_command", ""));
	q->sbatch = ft_calloc(json_array_size(a) + 1, sizeof(char *));
	json_array_foreach(a, i, v)
		q->sbatch[q->nsbatch++] = ft_strdup(json_string_value(v));
	return queue_gpus(json_object_get(el, "gpus"), path, &q->gpus, err);
}

/* "allocations": the queues, names unique; they need nodes to join. */
static int
parse_queues(const json_t *root, struct ft_config *cfg, struct jerr *err)
{
	const json_t *arr = json_object_get(root, "allocations"), *el;
	char path[sizeof(err->path)];
	size_t i;
	int k;

	if (arr == NULL)
		return 0;
	if (json_array_size(arr) > 64)
		return jerr_set(err, "allocations", "64 queues at most");
	cfg->queues = ft_calloc(json_array_size(arr) + 1,
				sizeof(*cfg->queues));
	json_array_foreach(arr, i, el) {
		jpath_index(path, sizeof(path), "allocations", i);
		if (parse_queue(el, path, &cfg->queues[cfg->nqueues++],
				err) == -1)
			return -1;
		for (k = 0; k < (int)i; k++)
			if (strcmp(cfg->queues[k].name,
				   cfg->queues[i].name) == 0)
				return jerr_set(err, path, "duplicate queue "
						"name \"%s\"",
						cfg->queues[i].name);
	}
	if (cfg->nqueues > 0 && !ft_config_joinable(cfg))
		return jerr_set(err, "allocations", "the nodes of allocations "
				"join over TCP: that needs \"control\": "
				"{\"listen\": \"HOST:PORT\"} (and join.max_nodes "
				"above 0)");
	return 0;
}

/* Validate ROOT (the decoded file) into CFG (whose path is set).  0, or -1
 * with ERR set; CFG may then hold partial allocations. */
static int
config_parse(const json_t *root, struct ft_config *cfg, struct jerr *err)
{
	if (jcheck_object(root, "", top_fields, err) == -1 ||
	    parse_name(root, cfg, err) == -1 ||
	    parse_dir(cfg, err) == -1 ||
	    parse_state_dir(root, cfg, err) == -1 ||
	    parse_choices(root, cfg, err) == -1 ||
	    parse_nodes(root, cfg, err) == -1 ||
	    parse_limits(root, cfg, err) == -1 ||
	    parse_control(root, cfg, err) == -1 ||
	    parse_http(root, cfg, err) == -1 ||
	    parse_task_outputs(root, cfg, err) == -1 ||
	    parse_hosts(root, cfg, err) == -1 ||
	    parse_join(root, cfg, err) == -1 ||
	    parse_queues(root, cfg, err) == -1)
		return -1;
	parse_mpirun_args(root, cfg);
	return 0;
}

int
ft_config_load(const char *path, struct ft_config *cfg, char *err, size_t n)
{
	struct jerr je;
	struct jpos *jp = NULL;
	char *text = NULL;
	json_t *root;
	int rc = -1;

	memset(cfg, 0, sizeof(*cfg));
	if ((root = jcheck_load_file(path, &text, err, n)) == NULL)
		goto out;
	cfg->path = ft_strdup(path);
	if (config_parse(root, cfg, &je) == -1) {
		/* positions are only needed now; without the index (out of
		 * memory) the line still names the key */
		jp = jpos_build(text, strlen(text));
		jcheck_format(&je, path, jp, err, n);
		ft_config_free(cfg);
		goto out;
	}
	rc = 0;
out:
	jpos_free(jp);
	json_decref(root);
	free(text);
	return rc;
}

int
ft_config_has_nodes(const struct ft_config *cfg, char *err, size_t n)
{
	if (cfg->nnodes > 0 || cfg->no_nodes)
		return 0;
	ft_snprintf(err, n, "%s: nodes: \"slurm\" needs a Slurm allocation "
		    "(run start inside salloc or sbatch)", cfg->path);
	return -1;
}

static void
node_free(struct ft_node *node)
{
	struct ft_bmc *b = node->bmc;
	int i;

	free(node->name);
	free(node->host);
	if (b) {
		free(b->host);
		free(b->user);
		free(b->password_file);
		free(b->interface);
		free(b->ipmitool);
		free(b);
	}
	for (i = 0; node->ready_command && node->ready_command[i]; i++)
		free(node->ready_command[i]);
	free(node->ready_command);
	for (i = 0; i < node->ngpus; i++)
		free(node->gpus[i]);
	free(node->gpus);
}

static void
queue_free(struct ft_alloc_queue *q)
{
	int i;

	free(q->name);
	for (i = 0; i < q->nsbatch; i++)
		free(q->sbatch[i]);
	free(q->sbatch);
	free(q->gpus);
	free(q->start_command);
}

void
ft_config_free(struct ft_config *cfg)
{
	int i;

	for (i = 0; i < cfg->nnodes; i++)
		node_free(&cfg->nodes[i]);
	for (i = 0; i < cfg->join.nhosts; i++)
		node_free(&cfg->join.hosts[i]);
	free(cfg->join.hosts);
	for (i = 0; i < cfg->nqueues; i++)
		queue_free(&cfg->queues[i]);
	free(cfg->queues);
	for (i = 0; i < cfg->nmpirun_args; i++)
		free(cfg->mpirun_args[i]);
	free(cfg->mpirun_args);
	free(cfg->nodes);
	free(cfg->path);
	free(cfg->name);
	free(cfg->state_dir);
	free(cfg->dir);
	free(cfg->log_level);
	free(cfg->task_stdout);
	free(cfg->task_stderr);
	free(cfg->http_host);
	free(cfg->ssh);
	free(cfg->network);
	free(cfg->control.socket_group);
	free(cfg->control.listen_host);
	free(cfg->control.munge_socket);
	free(cfg->control.submitters);
	memset(cfg, 0, sizeof(*cfg));
}

const struct ft_node *
ft_config_node(const struct ft_config *cfg, const char *name)
{
	int i;

	for (i = 0; i < cfg->nnodes; i++)
		if (strcmp(cfg->nodes[i].name, name) == 0)
			return &cfg->nodes[i];
	return NULL;
}

int
ft_config_name_ok(const char *name)
{
	struct jerr e;

	return check_node_name(name, "", &e) == 0;
}

/* A deep copy of B. */
static struct ft_bmc *
bmc_copy(const struct ft_bmc *b)
{
	struct ft_bmc *c;

	if (b == NULL)
		return NULL;
	c = ft_malloc(sizeof(*c));
	*c = *b;
	c->host = ft_strdup(b->host);
	c->user = ft_strdup(b->user);
	c->password_file = ft_strdup(b->password_file);
	c->interface = ft_strdup(b->interface);
	c->ipmitool = ft_strdup(b->ipmitool);
	return c;
}

static char **
argv_copy(char *const *v)
{
	char **c;
	size_t n = 0, i;

	if (v == NULL)
		return NULL;
	while (v[n])
		n++;
	c = ft_calloc(n + 1, sizeof(*c));
	for (i = 0; i < n; i++)
		c[i] = ft_strdup(v[i]);
	return c;
}

/* join.hosts' entry for HOST, or for its short name (up to the first
 * dot), or NULL. */
static const struct ft_node *
join_host(const struct ft_config *cfg, const char *host)
{
	size_t short_len = strcspn(host, ".");
	int i;

	for (i = 0; i < cfg->join.nhosts; i++)
		if (strcmp(cfg->join.hosts[i].host, host) == 0)
			return &cfg->join.hosts[i];
	for (i = 0; i < cfg->join.nhosts; i++)
		if (strlen(cfg->join.hosts[i].host) == short_len &&
		    strncmp(cfg->join.hosts[i].host, host, short_len) == 0)
			return &cfg->join.hosts[i];
	return NULL;
}

void
ft_config_rejoin(struct ft_config *cfg, int i, const char *host,
		 int workers, char **gpus, int ngpus)
{
	struct ft_node *node = &cfg->nodes[i];
	const struct ft_node *jh = join_host(cfg, host);
	char *name = node->name;
	int k;

	node->name = NULL;
	node_free(node);
	memset(node, 0, sizeof(*node));
	node->name = name;
	node->host = ft_strdup(host);
	node->workers = workers;
	node->joined = 1;
	node->gpus = ft_calloc((size_t)ngpus + 1, sizeof(char *));
	for (k = 0; k < ngpus; k++)
		node->gpus[k] = ft_strdup(gpus[k]);
	node->ngpus = ngpus;
	if (jh) {
		node->bmc = bmc_copy(jh->bmc);
		node->ready_command = argv_copy(jh->ready_command);
	}
}

int
ft_config_add_joined(struct ft_config *cfg, const char *name,
		     const char *host, int workers, char **gpus, int ngpus)
{
	int i = cfg->nnodes;

	cfg->nodes = ft_realloc(cfg->nodes, (size_t)(i + 1) *
				sizeof(*cfg->nodes));
	memset(&cfg->nodes[i], 0, sizeof(cfg->nodes[i]));
	cfg->nodes[i].name = ft_strdup(name);
	ft_config_rejoin(cfg, i, host, workers, gpus, ngpus);
	cfg->nnodes++;
	return i;
}

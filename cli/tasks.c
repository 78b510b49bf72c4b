/*
 * tasks: batches typed on the command line, and their outputs.
 *
 *   ftfarm submit -c CFG [--wait] [--name N] [--cpus K] [--gpus G]
 *       [--mem M] [--timeout S] [--time-request S] [--priority P] [--stdout PATTERN]
 *       [--stderr PATTERN] [--each-line FILE | --array A-B]
 *       -- COMMAND ARG...
 *   ftfarm cat -c CFG BATCH [TASK...] [--stderr]
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "down.h"
#include "outpath.h"
#include "statedir.h"
#include "util.h"

/*
 * The batch is written as text, not built as JSON objects: a million
 * tasks are some 45 MB of text made in a fraction of a second, where a
 * tree of JSON objects took 800 MB and seconds.  Each task is its form
 * (the command's task with a NUL byte where each "{}" was) with the
 * task's item, escaped once, in every NUL's place.
 */

/* Append KEY: PATTERN (a --stdout or --stderr, checked) to FORM, made
 * absolute from the working directory: the task writes it on a node
 * whose working directory is not this one. */
static void
output_key(struct ft_buf *form, const char *key, const char *pattern)
{
	char cwd[4096];
	char *abs;

	if (pattern == NULL)
		return;
	abs = pattern[0] == '/' || getcwd(cwd, sizeof(cwd)) == NULL ?
	      ft_strdup(pattern) : ft_asprintf("%s/%s", cwd, pattern);
	ft_buf_printf(form, ",\"%s\":\"", key);
	ft_buf_json_str(form, abs, strlen(abs));
	ft_buf_adds(form, "\"");
	free(abs);
}

/* C's --stdout and --stderr: patterns (outpath.h)?  0, or 2 (said). */
static int
check_patterns(const struct cli *c)
{
	const char *pats[] = { c->stdout_file, c->stderr_file };
	const char *opts[] = { "--stdout", "--stderr" };
	char why[200];
	int i;

	for (i = 0; i < 2; i++)
		if (pats[i] && outpath_check(pats[i], why, sizeof(why)) == -1) {
			cli_err("%s %s: %s", opts[i], pats[i], why);
			return 2;
		}
	return 0;
}

/* The form of c's tasks into FORM: a task's text, with a NUL byte where
 * each "{}" of an argument was when ITEMS (else "{}" stays as typed).
 * The number of such places. */
static int
task_form(const struct cli *c, int items, struct ft_buf *form)
{
	const char *a, *p;
	int i, slots = 0;

	ft_buf_adds(form, "{\"type\":\"exec\",\"argv\":[");
	for (i = 0; i < c->argc; i++) {
		ft_buf_adds(form, i ? ",\"" : "\"");
		for (a = c->argv[i]; items && (p = strstr(a, "{}")) != NULL;
		     a = p + 2, slots++) {
			ft_buf_json_str(form, a, (size_t)(p - a));
			ft_buf_add(form, "", 1);	/* the NUL */
		}
		ft_buf_json_str(form, a, strlen(a));
		ft_buf_adds(form, "\"");
	}
	ft_buf_adds(form, "]");
	if (c->cpus > 0)
		ft_buf_printf(form, ",\"cpus\":%d", c->cpus);
	if (c->gpus > 0)
		ft_buf_printf(form, ",\"gpus\":%d", c->gpus);
	if (c->timeout > 0)
		ft_buf_printf(form, ",\"timeout\":%.17g", c->timeout);
	if (c->mem > 0)
		ft_buf_printf(form, ",\"mem\":%llu",
			      (unsigned long long)c->mem);
	if (c->time_request > 0)
		ft_buf_printf(form, ",\"time_request\":%.17g",
			      c->time_request);
	output_key(form, "stdout", c->stdout_file);
	output_key(form, "stderr", c->stderr_file);
	ft_buf_adds(form, "}");
	return slots;
}

/* Append to OUT the task of FORM with ITEM (LEN bytes, escaped) in each
 * of its places; a comma first unless FIRST. */
static void
add_task(struct ft_buf *out, const struct ft_buf *form, const char *item,
	 size_t len, int first)
{
	const char *p = form->data, *end = form->data + form->len, *z;

	if (!first)
		ft_buf_add(out, ",", 1);
	while ((z = memchr(p, '\0', (size_t)(end - p))) != NULL) {
		ft_buf_add(out, p, (size_t)(z - p));
		ft_buf_add(out, item, len);
		p = z + 1;
	}
	ft_buf_add(out, p, (size_t)(end - p));
}

/* The tasks of --each-line FILE into OUT: one per line.  0, or 2
 * (said). */
static int
each_line(const struct cli *c, const struct ft_buf *form, struct ft_buf *out)
{
	struct ft_buf item = { 0 };
	size_t len, start = 0, i, n = 0;
	char *text = ft_read_file(c->each_line, &len);

	if (text == NULL) {
		cli_err("%s: cannot read: %s", c->each_line, strerror(errno));
		return 2;
	}
	for (i = 0; i <= len; i++) {
		if (i < len && text[i] != '\n')
			continue;
		if (i == len && start == len)
			break;		/* no line after the last newline */
		item.len = 0;
		ft_buf_json_str(&item, text + start, i - start);
		add_task(out, form, item.data, item.len, n++ == 0);
		start = i + 1;
	}
	free(text);
	ft_buf_free(&item);
	if (n == 0) {
		cli_err("%s: no lines, so no tasks", c->each_line);
		return 2;
	}
	return 0;
}

/* The tasks of --array A-B into OUT: one per integer (SLOTS places for
 * it in FORM).  0, or 2 (said). */
static int
array(const struct cli *c, const struct ft_buf *form, int slots,
      struct ft_buf *out)
{
	char *end, item[32];
	long a, b, i;
	int len;

	errno = 0;
	a = strtol(c->array, &end, 10);
	if (end == c->array || *end != '-' || a < 0)
		goto bad;
	b = strtol(end + 1, &end, 10);
	if (*end != '\0' || errno || b < a || b - a >= 10000000)
		goto bad;
	len = snprintf(item, sizeof(item), "%ld", b);
	ft_buf_reserve(out, (size_t)(b - a + 1) *
		       (form->len + 1 + (size_t)(slots * len)));
	for (i = a; i <= b; i++) {
		len = snprintf(item, sizeof(item), "%ld", i);
		add_task(out, form, item, (size_t)len, i == a);
	}
	return 0;
bad:
	cli_err("--array takes A-B, whole numbers 0 <= A <= B (at most 10^7 "
		"tasks), not \"%s\"", c->array);
	return 2;
}

/* The tasks of c's command line into OUT.  0, or 2 (said). */
static int
tasks_text(const struct cli *c, struct ft_buf *out)
{
	struct ft_buf form = { 0 };
	int items = c->each_line || c->array, rc = 0;
	int slots = task_form(c, items, &form);

	ft_buf_adds(out, "\"tasks\":[");
	if (c->each_line)
		rc = each_line(c, &form, out);
	else if (c->array)
		rc = array(c, &form, slots, out);
	else
		add_task(out, &form, "", 0, 1);
	ft_buf_adds(out, "]");
	ft_buf_free(&form);
	return rc;
}

int
cli_command_batch(const struct cli *c, struct ft_buf *out)
{
	const char *name = c->name ? c->name : c->argc ? c->argv[0] :
			   "command";
	int rc;

	if (c->argc == 0 || (c->each_line && c->array)) {
		cli_err("usage: ftfarm submit -c CFG [--wait] [--name N] "
			"[--cpus K] [--gpus G] [--mem M] [--timeout S] "
			"[--time-request S] "
			"[--priority P] [--stdout PATTERN] [--stderr PATTERN] "
			"[--each-line FILE | --array A-B] -- COMMAND ARG...");
		return 2;
	}
	if (check_patterns(c) != 0)
		return 2;
	ft_buf_adds(out, "{\"name\":\"");
	ft_buf_json_str(out, name, strlen(name));
	ft_buf_adds(out, "\",");
	if (c->priority)
		ft_buf_printf(out, "\"priority\":%d,", c->priority);
	rc = tasks_text(c, out);
	ft_buf_adds(out, "}\n");
	return rc;
}

/* ---- cat ---- */

/* Batch ID has no results file: let the master say why when it can
 * ("no batch 12", or that it was forgotten).  The exit status when it
 * did (said); when no master answers (not said), FT_EXIT_DOWN if the
 * cluster is down, else 0; 0 when the master knows the batch. */
static int
why_not(struct cli *c, long id)
{
	json_t *req = ctl_request_new(CTL_BATCH), *ans;
	char err[512];
	int status;

	json_object_set_new(req, "batch", json_integer(id));
	ans = ctl_request(c->cfg.state_dir, req, 30, err, sizeof(err));
	json_decref(req);
	if (ans == NULL || json_is_true(json_object_get(ans, "ok"))) {
		json_decref(ans);
		return ans == NULL && down_check(c->cfg.state_dir, err,
						 sizeof(err)) ? FT_EXIT_DOWN : 0;
	}
	cli_err("%s", json_string_value(json_object_get(ans, "error")));
	status = (int)json_integer_value(json_object_get(ans, "exit"));
	json_decref(ans);
	return status > 0 ? status : 1;
}

/* The result lines of batch ID, by task (an array of NTASKS, NULL where
 * there is none), from its results.jsonl.  NULL (said) when it cannot
 * be read. */
static json_t **
read_results(struct cli *c, long id, size_t *ntasks)
{
	char *path = ft_asprintf("%s/batches/%ld/results.jsonl",
				 c->cfg.state_dir, id), *text, *line, *save;
	json_t **by = NULL;
	size_t len;

	*ntasks = 0;
	if ((text = ft_read_file(path, &len)) == NULL) {
		int e = errno, why = e == ENOENT ? why_not(c, id) : 0;

		c->status = why ? why : 1;
		if (why == 0 || why == FT_EXIT_DOWN)
			cli_err("batch %ld: cannot read %s: %s%s", id, path,
				strerror(e), why ? " (and the cluster is down: "
				"no master to say why)" : "");
		free(path);
		return NULL;
	}
	free(path);
	by = ft_calloc(1, sizeof(*by));
	for (line = strtok_r(text, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		json_t *r = json_loads(line, 0, NULL);
		json_int_t t = json_integer_value(json_object_get(r, "task"));

		if (r == NULL || t < 0 || t >= INT_MAX) {
			json_decref(r);
			continue;	/* a torn last line: not a result */
		}
		if ((size_t)t >= *ntasks) {
			by = ft_realloc(by, ((size_t)t + 1) * sizeof(*by));
			memset(by + *ntasks, 0,
			       ((size_t)t + 1 - *ntasks) * sizeof(*by));
			*ntasks = (size_t)t + 1;
		}
		json_decref(by[t]);
		by[t] = r;
	}
	free(text);
	return by;
}

static int
by_number(const void *a, const void *b)
{
	long x = *(const long *)a, y = *(const long *)b;

	return (x > y) - (x < y);
}

/* Copy the file PATH to the standard output.  0, or -1 when it cannot
 * be opened (nothing written). */
static int
print_file(const char *path)
{
	char buf[65536];
	ssize_t got;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	fflush(stdout);
	while ((got = read(fd, buf, sizeof(buf))) > 0)
		if (ft_write_all(STDOUT_FILENO, buf, (size_t)got) == -1)
			break;
	close(fd);
	return 0;
}

/* Print task T's output (KEY: "stdout" or "stderr") of BY: its file when
 * it had one that can be read here, else the result's copy (all of it,
 * or a file's tail).  1 when it has no result (said). */
static int
print_task(json_t **by, size_t n, long t, const char *key, long id)
{
	const json_t *out, *file;
	char pkey[16];

	if (t < 0 || (size_t)t >= n || by[t] == NULL) {
		cli_err("batch %ld: task %ld has no result (yet)", id, t);
		return 1;
	}
	snprintf(pkey, sizeof(pkey), "%s_path", key);
	file = json_object_get(by[t], pkey);
	if (json_is_string(file) && print_file(json_string_value(file)) == 0)
		return 0;
	out = json_object_get(by[t], key);
	fwrite(json_string_value(out) ? json_string_value(out) : "", 1,
	       json_string_length(out), stdout);
	return 0;
}

/* The task numbers of c's operands after the batch (sorted), into *OUT;
 * their count, or -1 (said). */
static int
task_list(const struct cli *c, long **out)
{
	long *v = ft_calloc((size_t)c->argc, sizeof(*v));
	char *end;
	int i;

	for (i = 1; i < c->argc; i++) {
		v[i - 1] = strtol(c->argv[i], &end, 10);
		if (*end || end == c->argv[i] || v[i - 1] < 0) {
			cli_err("cat: \"%s\" is not a task number", c->argv[i]);
			free(v);
			return -1;
		}
	}
	qsort(v, (size_t)c->argc - 1, sizeof(*v), by_number);
	*out = v;
	return c->argc - 1;
}

/* cat -c CFG BATCH [TASK...] [--stderr]: the tasks' standard output (or
 * error), in task order: the files of tasks that wrote theirs to files
 * ("stdout" and "stderr" keys), what results.jsonl keeps of the others'. */
int
cli_cat(struct cli *c)
{
	const char *key = c->stderr_out ? "stderr" : "stdout";
	json_t **by;
	size_t n, i;
	long id, *want = NULL;
	char *end;
	int nwant, rc = 0;

	if (c->argc < 1) {
		cli_err("usage: ftfarm cat -c CFG BATCH [TASK...] [--stderr]");
		return 2;
	}
	id = strtol(c->argv[0], &end, 10);
	if (*end || end == c->argv[0] || id < 1) {
		cli_err("cat: \"%s\" is not a batch id", c->argv[0]);
		return 2;
	}
	if ((nwant = task_list(c, &want)) < 0)
		return 2;
	if ((by = read_results(c, id, &n)) == NULL) {
		free(want);
		return c->status;
	}
	for (i = 0; nwant == 0 && i < n; i++)
		if (by[i])
			print_task(by, n, (long)i, key, id);
	for (i = 0; i < (size_t)nwant; i++)
		rc |= print_task(by, n, want[i], key, id);
	for (i = 0; i < n; i++)
		json_decref(by[i]);
	free(by);
	free(want);
	fflush(stdout);
	return rc;
}

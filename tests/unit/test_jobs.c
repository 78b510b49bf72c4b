/* Unit tests of master/jobs.c, the phase engine of job batches, through a
 * job plugin made here: the order of the hooks, task numbering across
 * phases, reports parsed once, one cleanup whatever happens, failures
 * that drain their phase, and planned tasks checked like submitted ones. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "jobs.h"
#include "util.h"

/* ---- a job plugin that records what the engine asks of it ---- */

struct fake {
	int phases[4];			/* tasks per phase, 0 ends the list */
	int planned;			/* phases planned so far */
	int fail_plan;			/* plan() of this phase fails (1-based) */
	int bad_task;			/* plan a task its validate refuses */
	int refuse_report;		/* report() of this index fails, +1 */
	int reports, failures, cleanups, cleanup_ok, freed;
	int last_value;			/* "v" of the last report, -1 if NULL */
	char trace[256];		/* "i p1 r0 r1 ..." */
};

static struct fake *cur;

static void
trace(struct fake *f, const char *fmt, ...)
{
	size_t len = strlen(f->trace);
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(f->trace + len, sizeof(f->trace) - len, fmt, ap);
	va_end(ap);
}

static int
task_validate(const json_t *task, const char *path, struct jerr *err)
{
	if (!json_is_integer(json_object_get(task, "n")))
		return jerr_set(err, path, "needs \"n\"");
	return 0;
}

static int
job_validate(const json_t *job, const char *path, struct jerr *err)
{
	(void)job, (void)path, (void)err;
	return 0;
}

static void *
job_init(const json_t *job, const char *dir, char *err, size_t n)
{
	(void)job, (void)dir, (void)err, (void)n;
	trace(cur, "i");
	return cur;
}

static int
job_plan(void *state, json_t *tasks, char *err, size_t n)
{
	struct fake *f = state;
	int k, count = f->phases[f->planned];

	f->planned++;
	trace(f, " p%d", f->planned);
	if (f->fail_plan == f->planned) {
		snprintf(err, n, "cannot plan phase %d", f->planned);
		return -1;
	}
	for (k = 0; k < count; k++)
		json_array_append_new(tasks, f->bad_task ?
			json_pack("{s:s}", "type", "fake") :
			json_pack("{s:s, s:i}", "type", "fake", "n", k));
	return 0;
}

static int
job_report(void *state, size_t index, const json_t *r, char *err, size_t n)
{
	struct fake *f = state;

	f->reports++;
	f->last_value = r ? (int)json_integer_value(json_object_get(r, "v"))
			  : -1;
	trace(f, " r%zu", index);
	if (f->refuse_report == (int)index + 1) {
		snprintf(err, n, "report %zu refused", index);
		return -1;
	}
	return 0;
}

static void
job_failed(void *state, size_t index, const char *reason, char *err,
	   size_t n)
{
	struct fake *f = state;

	f->failures++;
	trace(f, " f%zu", index);
	snprintf(err, n, "task %zu failed: %s", index, reason);
}

static json_t *
fake_summary(void *state)
{
	return json_pack("{s:i}", "phases", ((struct fake *)state)->planned);
}

static void
job_cleanup(void *state, int ok)
{
	struct fake *f = state;

	f->cleanups++;
	f->cleanup_ok = ok;
	trace(f, " c%d", ok);
}

static void
fake_free(void *state)
{
	((struct fake *)state)->freed++;
}

static const struct ft_job_ops fake_job = {
	.validate = job_validate, .init = job_init, .plan = job_plan,
	.report = job_report, .failed = job_failed, .summary = fake_summary,
	.cleanup = job_cleanup, .free = fake_free,
};

static int
fake_run(const struct ft_task *task, struct ft_result *res)
{
	(void)task, (void)res;
	return 0;
}

static const struct ft_plugin fake_plugin = {
	.abi = FT_PLUGIN_ABI, .name = "fake", .validate = task_validate,
	.run = fake_run, .job = &fake_job,
};
static const struct ft_plugin *one[] = { &fake_plugin };
static const struct ft_plugins pl = { .v = one, .n = 1 };

static struct job *
start(struct fake *f, json_t **tasks, char *err, size_t n)
{
	json_t *spec = json_pack("{s:s}", "type", "fake");
	struct job *j;

	cur = f;
	j = job_start(&fake_plugin, &pl, spec, "/nonexistent", tasks, err, n);
	json_decref(spec);
	return j;
}

#define OK_OUT "{\"v\": 7}"

/* ---- tests ---- */

static void
test_phases_in_order(void **state)
{
	struct fake f = { .phases = { 3, 1 } };
	json_t *tasks = NULL, *next = NULL;
	char err[256];
	struct job *j;
	uint32_t i;

	(void)state;
	j = start(&f, &tasks, err, sizeof(err));
	assert_non_null(j);
	assert_int_equal(json_array_size(tasks), 3);
	for (i = 0; i < 2; i++)
		assert_int_equal(job_task_ended(j, i, 1, OK_OUT,
						 strlen(OK_OUT), "", &next),
				 JOB_RUNNING);
	assert_int_equal(f.last_value, 7);
	/* Reports in any order; the last one of the phase plans the next. */
	assert_int_equal(job_task_ended(j, 2, 1, "not json", 8, "", &next),
			 JOB_PHASE);
	assert_int_equal(f.last_value, -1);
	assert_int_equal(json_array_size(next), 1);
	assert_int_equal(job_planned(j), 4);
	/* The second phase's task is number 3 of the batch, 0 of its phase. */
	assert_int_equal(job_task_ended(j, 3, 1, OK_OUT, strlen(OK_OUT), "",
					&tasks), JOB_COMPLETE);
	assert_string_equal(f.trace, "i p1 r0 r1 r2 p2 r0 p3 c1");
	assert_int_equal(f.cleanups, 1);
	assert_int_equal(f.cleanup_ok, 1);
	assert_null(job_error(j));
	assert_int_equal(json_integer_value(json_object_get(job_summary(j),
							    "phases")), 3);
	job_free(j);
	assert_int_equal(f.freed, 1);
	json_decref(tasks);
	json_decref(next);
}

static void
test_failure_drains_phase(void **state)
{
	struct fake f = { .phases = { 3, 2 } };
	json_t *tasks = NULL, *next = NULL;
	char err[256];
	struct job *j;

	(void)state;
	j = start(&f, &tasks, err, sizeof(err));
	assert_non_null(j);
	assert_int_equal(job_task_ended(j, 1, 0, "", 0, "exit 3", &next),
			 JOB_RUNNING);
	/* Cleaned up at once, not when the phase drains. */
	assert_int_equal(f.cleanups, 1);
	assert_int_equal(f.cleanup_ok, 0);
	assert_string_equal(job_error(j), "task 1 failed: exit 3");
	/* Later results of the phase are only counted. */
	assert_int_equal(job_task_ended(j, 0, 1, OK_OUT, strlen(OK_OUT), "",
					&next), JOB_RUNNING);
	assert_int_equal(job_task_ended(j, 2, 0, "", 0, "exit 4", &next),
			 JOB_FAILED);
	assert_null(next);
	assert_string_equal(f.trace, "i p1 f1 c0");
	assert_int_equal(f.failures, 1);
	assert_int_equal(f.cleanups, 1);
	assert_string_equal(job_error(j), "task 1 failed: exit 3");
	assert_null(job_summary(j));
	job_free(j);
	json_decref(tasks);
}

static void
test_refused_report_fails(void **state)
{
	struct fake f = { .phases = { 2 }, .refuse_report = 1 };
	json_t *tasks = NULL, *next = NULL;
	char err[256];
	struct job *j;

	(void)state;
	j = start(&f, &tasks, err, sizeof(err));
	assert_int_equal(job_task_ended(j, 0, 1, OK_OUT, strlen(OK_OUT), "",
					&next), JOB_RUNNING);
	assert_int_equal(job_task_ended(j, 1, 1, OK_OUT, strlen(OK_OUT), "",
					&next), JOB_FAILED);
	assert_string_equal(job_error(j), "report 0 refused");
	assert_string_equal(f.trace, "i p1 r0 c0");
	job_free(j);
	json_decref(tasks);
}

static void
test_plan_errors(void **state)
{
	struct fake f1 = { .phases = { 2 }, .bad_task = 1 };
	struct fake f2 = { .phases = { 1, 1 }, .fail_plan = 2 };
	struct fake f3 = { .phases = { 0 } };
	json_t *tasks = NULL, *next = NULL;
	char err[256];
	struct job *j;

	(void)state;
	/* A planned task is checked as a submitted one. */
	assert_null(start(&f1, &tasks, err, sizeof(err)));
	assert_non_null(strstr(err, "fake job planned an invalid task: "
				    "tasks[0]: needs \"n\""));
	assert_int_equal(f1.cleanups, 1);
	assert_int_equal(f1.cleanup_ok, 0);
	assert_int_equal(f1.freed, 1);
	/* A later phase that cannot be planned fails the job. */
	j = start(&f2, &tasks, err, sizeof(err));
	assert_non_null(j);
	assert_int_equal(job_task_ended(j, 0, 1, OK_OUT, strlen(OK_OUT), "",
					&next), JOB_FAILED);
	assert_string_equal(job_error(j), "cannot plan phase 2");
	assert_string_equal(f2.trace, "i p1 r0 p2 c0");
	job_free(j);
	json_decref(tasks);
	/* A job that plans nothing is refused at the start. */
	tasks = NULL;
	assert_null(start(&f3, &tasks, err, sizeof(err)));
	assert_string_equal(err, "the job planned no tasks");
	assert_int_equal(f3.freed, 1);
}

static void
test_fail_unqueued_phase(void **state)
{
	struct fake f = { .phases = { 1, 2 } };
	json_t *tasks = NULL, *next = NULL;
	char err[256];
	struct job *j;

	(void)state;
	j = start(&f, &tasks, err, sizeof(err));
	assert_int_equal(job_task_ended(j, 0, 1, OK_OUT, strlen(OK_OUT), "",
					&next), JOB_PHASE);
	assert_int_equal(job_fail(j, "task too big"), JOB_FAILED);
	assert_string_equal(job_error(j), "task too big");
	assert_int_equal(f.cleanups, 1);
	job_free(j);
	json_decref(tasks);
	json_decref(next);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_phases_in_order),
		cmocka_unit_test(test_failure_drains_phase),
		cmocka_unit_test(test_refused_report_fails),
		cmocka_unit_test(test_plan_errors),
		cmocka_unit_test(test_fail_unqueued_phase),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Unit tests of master/batches.c with the real scheduler and real files
 * (no MPI): what a submitted batch writes, the result lines of done and
 * failed tasks, the end of a batch, and a job batch driven phase by phase
 * through the scheduler. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "batches.h"
#include "store.h"
#include "util.h"

struct fx {
	char dir[64];
	struct ft_config cfg;
	struct ft_plugins pl;
	struct sched *sched;
	struct events ev;
	struct store st;
	struct batches bs;
	int queued, finished;
	struct batch *last;
};

static void
on_queued(void *ctx)
{
	((struct fx *)ctx)->queued++;
}

static void
on_finished(void *ctx, struct batch *b)
{
	struct fx *f = ctx;

	f->finished++;
	f->last = b;
}

static int
setup(void **state)
{
	struct fx *f = ft_calloc(1, sizeof(*f));
	struct sched_params sp;
	struct batches_ops ops = {
		.ctx = f, .queued = on_queued, .finished = on_finished,
	};
	char err[512], *path;

	snprintf(f->dir, sizeof(f->dir), "/tmp/ftfarm-batches-unit-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	f->cfg.state_dir = f->dir;
	f->cfg.task_timeout = 3600;
	assert_int_equal(ft_plugins_load(&f->pl, FT_TEST_BINDIR "/tasks", err,
					 sizeof(err)), 0);
	sched_params_default(&sp);
	f->sched = sched_new(1, &sp, NULL);
	sched_worker_up(f->sched, 0);
	path = ft_asprintf("%s/events.jsonl", f->dir);
	assert_int_equal(events_open(&f->ev, path, 1), 0);
	free(path);
	assert_int_equal(store_init(&f->st, &f->cfg, NULL, NULL, err,
				    sizeof(err)), 0);
	batches_init(&f->bs, &f->cfg, &f->pl, f->sched, &f->ev, &f->st, &ops);
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	struct fx *f = *state;
	char *cmd = ft_asprintf("rm -rf '%s'", f->dir);

	batches_close(&f->bs);
	events_close(&f->ev);
	store_free(&f->st);
	sched_free(f->sched);
	ft_plugins_free(&f->pl);
	assert_int_equal(system(cmd), 0);
	free(cmd);
	free(f);
	return 0;
}

/* The lines of FILE in batch ID's directory, as JSON objects. */
static json_t *
lines(struct fx *f, long id, const char *file)
{
	char *path = ft_asprintf("%s/batches/%ld/%s", f->dir, id, file);
	char *text = ft_read_file(path, NULL), *line, *save = NULL;
	json_t *a = json_array();

	assert_non_null(text);
	for (line = strtok_r(text, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save))
		json_array_append_new(a, json_loads(line, 0, NULL));
	free(text);
	free(path);
	return a;
}

/* Take the next task from the scheduler for worker 0 and report it with
 * OK and OUT.  Its index in its batch. */
static uint32_t
run_next(struct fx *f, int ok, const char *out)
{
	struct sched_pick p;
	struct proto_result r = { 0 };

	assert_int_equal(sched_take(f->sched, 0, ft_now(), &p, 1), 1);
	r.tid = p.tid;
	r.attempt = p.attempt;
	r.ok = (uint8_t)ok;
	r.exit_code = ok ? 0 : 3;
	r.out = out;
	r.out_len = strlen(out);
	r.reason = ok ? "" : "exit 3";
	r.reason_len = strlen(r.reason);
	assert_int_equal(sched_done(f->sched, 0, p.tid, p.attempt, 0.001,
				    ft_now()), SCHED_ACCEPTED);
	batches_record(&f->bs, p.tid, 0, "h1", &r);
	return p.task->index;
}

static json_t *
batch_of(const char *text)
{
	json_t *b = json_loads(text, 0, NULL);

	assert_non_null(b);
	return b;
}

static void
test_tasks_batch(void **state)
{
	struct fx *f = *state;
	json_t *b = batch_of("{\"name\": \"t\", \"tasks\": ["
			     "{\"type\": \"sleep\", \"seconds\": 0},"
			     "{\"type\": \"sleep\", \"seconds\": 0},"
			     "{\"type\": \"sleep\", \"seconds\": 0}]}");
	struct sched_pick p;
	char err[256];
	json_t *res, *row;
	long id;

	id = batches_submit(&f->bs, b, err, sizeof(err));
	assert_int_equal(id, 1);
	assert_int_equal(f->queued, 1);
	assert_int_equal(sched_queued(f->sched), 3);
	assert_int_equal(run_next(f, 1, "hi"), 0);
	assert_int_equal(run_next(f, 0, "partial"), 1);
	assert_int_equal(f->finished, 0);
	/* The last one is lost for good: a line of its own, then the end. */
	assert_int_equal(sched_take(f->sched, 0, ft_now(), &p, 1), 1);
	assert_int_equal(sched_done(f->sched, 0, p.tid, p.attempt, 0, 0),
			 SCHED_ACCEPTED);
	batches_fail(&f->bs, p.task->batch, p.task->index, 3, "lost 3 times");
	assert_int_equal(f->finished, 1);
	assert_true(batch_finished(f->last));
	batches_flush(&f->bs);
	res = lines(f, id, "results.jsonl");
	assert_int_equal(json_array_size(res), 3);
	row = json_array_get(res, 0);
	assert_int_equal(json_integer_value(json_object_get(row, "task")), 0);
	assert_string_equal(json_string_value(json_object_get(row, "status")),
			    "ok");
	assert_string_equal(json_string_value(json_object_get(row, "stdout")),
			    "hi");
	row = json_array_get(res, 1);
	assert_int_equal(json_integer_value(json_object_get(row, "exit")), 3);
	assert_string_equal(json_string_value(json_object_get(row, "reason")),
			    "exit 3");
	row = json_array_get(res, 2);
	assert_int_equal(json_integer_value(json_object_get(row, "worker")), -1);
	assert_string_equal(json_string_value(json_object_get(row, "reason")),
			    "lost 3 times");
	json_decref(res);
	res = lines(f, id, "summary.json");
	row = json_array_get(res, 0);
	assert_int_equal(json_integer_value(json_object_get(row, "ok")), 1);
	assert_int_equal(json_integer_value(json_object_get(row, "failed")), 2);
	assert_string_equal(json_string_value(json_object_get(row, "state")),
			    "finished");
	json_decref(res);
	/* Ids go on from there. */
	assert_int_equal(batches_submit(&f->bs, b, err, sizeof(err)), 2);
	assert_non_null(batches_find(&f->bs, 2));
	assert_null(batches_find(&f->bs, 3));
	json_decref(b);
}

static void
test_ids_follow_the_state_dir(void **state)
{
	struct fx *f = *state;
	json_t *b = batch_of("{\"tasks\": [{\"type\": \"sleep\", "
			     "\"seconds\": 0}]}");
	char err[256], *dir = ft_asprintf("%s/batches/41", f->dir);
	struct replay_stats st;

	assert_int_equal(ft_mkdirs(dir), 0);
	/* A starting master reads its state dir first: ids go on from the
	 * highest there. */
	assert_int_equal(batches_replay(&f->bs, &st, err, sizeof(err)), 0);
	assert_int_equal(batches_submit(&f->bs, b, err, sizeof(err)), 42);
	free(dir);
	json_decref(b);
}

static void
test_job_batch(void **state)
{
	struct fx *f = *state;
	char in[128], out[128], text[512], err[512], *text_out;
	json_t *b, *row;
	FILE *fp;
	long id;
	int n = 0;

	snprintf(in, sizeof(in), "%s/words.txt", f->dir);
	snprintf(out, sizeof(out), "%s/counts.txt", f->dir);
	fp = fopen(in, "w");
	fputs("b a b\nc b a\n", fp);
	fclose(fp);
	snprintf(text, sizeof(text), "{\"name\": \"wc\", \"job\": {\"type\": "
		 "\"wordcount\", \"inputs\": [\"%s\"], \"output\": \"%s\", "
		 "\"shards\": 2, \"reducers\": 2}}", in, out);
	b = batch_of(text);
	id = batches_submit(&f->bs, b, err, sizeof(err));
	assert_true(id > 0);
	/* Run each queued task for real, phase after phase. */
	while (sched_queued(f->sched) > 0) {
		struct sched_pick p;
		const struct ft_plugin *pl;
		struct ft_task t = { 0 };
		struct ft_result r = { 0 };
		struct proto_result pr = { 0 };
		volatile int cancel = 0;
		json_t *spec;

		assert_int_equal(sched_take(f->sched, 0, ft_now(), &p, 1), 1);
		spec = json_loadb(p.task->spec, p.task->spec_len, 0, NULL);
		pl = ft_plugins_find(&f->pl, "wordcount");
		t.spec = spec;
		t.cancel = &cancel;
		t.output_cap = 65536;
		pl->run(&t, &r);
		pr.tid = p.tid;
		pr.attempt = p.attempt;
		pr.ok = (uint8_t)r.ok;
		pr.out = r.out;
		pr.out_len = r.out_len;
		pr.reason = r.reason;
		pr.reason_len = strlen(r.reason);
		sched_done(f->sched, 0, p.tid, p.attempt, 0, 0);
		batches_record(&f->bs, p.tid, 0, "h1", &pr);
		free(r.out);
		free(r.err);
		json_decref(spec);
		n++;
	}
	/* 2 maps, 2 reduces, 1 merge; 3 phases queued. */
	assert_int_equal(n, 5);
	assert_int_equal(f->queued, 3);
	assert_int_equal(f->finished, 1);
	row = batch_json(f->last);
	assert_null(json_object_get(row, "error"));
	assert_int_equal(json_integer_value(json_object_get(json_object_get(
		row, "result"), "words")), 6);
	assert_string_equal(json_string_value(json_object_get(row, "job")),
			    "wordcount");
	json_decref(row);
	text_out = ft_read_file(out, NULL);
	assert_string_equal(text_out, "b\t3\na\t2\nc\t1\n");
	free(text_out);
	json_decref(b);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_tasks_batch, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_ids_follow_the_state_dir,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_job_batch, setup,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

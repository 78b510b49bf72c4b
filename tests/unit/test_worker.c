/* Unit tests of master/worker.c and master/node.c: the state machines of
 * workers and nodes, the transitions they allow and refuse, their
 * counters and the events each change writes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "events.h"
#include "node.h"
#include "util.h"
#include "worker.h"

#include "evfile.h"

static const char *
ev_name(json_t *a, size_t i)
{
	return json_string_value(json_object_get(json_array_get(a, i),
						 "event"));
}

static void
test_worker_start_and_respawn(void **state)
{
	struct fixture *f = *state;
	struct worker w;
	json_t *a, *e;

	worker_init(&w, 4, 1, "node2");
	assert_int_equal(w.state, W_NEW);
	assert_int_equal(worker_set(&w, W_SPAWNING, NULL, &f->ev), 0);
	assert_int_equal(worker_set(&w, W_STARTING, NULL, &f->ev), 0);
	w.pid = 123;
	snprintf(w.host, sizeof(w.host), "h1");
	assert_false(worker_up(&w));
	assert_true(worker_live(&w));
	assert_int_equal(worker_set(&w, W_IDLE, NULL, &f->ev), 0);
	assert_true(worker_up(&w));
	/* Load changes are quiet. */
	assert_int_equal(worker_set(&w, W_BUSY, NULL, &f->ev), 0);
	assert_int_equal(worker_set(&w, W_SLOW, NULL, &f->ev), 0);
	w.killed = 1;
	assert_int_equal(worker_set(&w, W_DEAD, "no answer", &f->ev), 0);
	assert_int_equal(w.failures, 1);
	assert_false(worker_live(&w));
	assert_int_equal(worker_set(&w, W_SPAWNING, NULL, &f->ev), 0);
	assert_int_equal(w.respawns, 1);
	assert_int_equal(worker_set(&w, W_STARTING, NULL, &f->ev), 0);
	w.pid = 124;
	assert_int_equal(worker_set(&w, W_IDLE, NULL, &f->ev), 0);

	a = events_read(f);
	assert_int_equal(json_array_size(a), 3);
	assert_string_equal(ev_name(a, 0), "worker_up");
	e = json_array_get(a, 0);
	assert_int_equal(json_integer_value(json_object_get(e, "worker")), 4);
	assert_string_equal(json_string_value(json_object_get(e, "node")),
			    "node2");
	assert_int_equal(json_integer_value(json_object_get(e, "pid")), 123);
	assert_string_equal(json_string_value(json_object_get(e, "host")),
			    "h1");
	assert_string_equal(ev_name(a, 1), "worker_dead");
	e = json_array_get(a, 1);
	assert_string_equal(json_string_value(json_object_get(e, "reason")),
			    "no answer");
	assert_true(json_is_true(json_object_get(e, "killed")));
	assert_string_equal(ev_name(a, 2), "worker_respawned");
	assert_int_equal(json_integer_value(json_object_get(
		json_array_get(a, 2), "respawns")), 1);
	json_decref(a);
}

static void
test_worker_refuses(void **state)
{
	struct fixture *f = *state;
	struct worker w;
	json_t *a;

	worker_init(&w, 0, 0, "n");
	/* No hello without a process. */
	assert_int_equal(worker_set(&w, W_IDLE, NULL, &f->ev), -1);
	assert_int_equal(w.state, W_NEW);
	assert_int_equal(worker_set(&w, W_STARTING, NULL, &f->ev), 0);
	assert_int_equal(worker_set(&w, W_BUSY, NULL, &f->ev), -1);
	assert_int_equal(worker_set(&w, W_STOPPED, NULL, &f->ev), -1);
	assert_int_equal(worker_set(&w, W_IDLE, NULL, &f->ev), 0);
	assert_int_equal(worker_set(&w, W_STOPPING, "stop", &f->ev), 0);
	assert_int_equal(worker_set(&w, W_IDLE, NULL, &f->ev), -1);
	assert_int_equal(worker_set(&w, W_STOPPED, "bye", &f->ev), 0);
	/* STOPPED does not die or start again; only its node's leaving
	 * retires it, so a node that joins in its place starts afresh. */
	assert_int_equal(worker_set(&w, W_DEAD, "late", &f->ev), -1);
	assert_int_equal(worker_set(&w, W_SPAWNING, NULL, &f->ev), -1);
	assert_int_equal(w.state, W_STOPPED);
	assert_int_equal(worker_set(&w, W_INACTIVE, "left", &f->ev), 0);
	assert_int_equal(worker_set(&w, W_STARTING, NULL, &f->ev), 0);
	/* INACTIVE only starts again, when its node is back: a respawn. */
	worker_init(&w, 1, 0, "n");
	assert_int_equal(worker_set(&w, W_INACTIVE, "node gone", &f->ev), 0);
	assert_int_equal(worker_set(&w, W_DEAD, NULL, &f->ev), -1);
	assert_int_equal(worker_set(&w, W_IDLE, NULL, &f->ev), -1);
	/* The same state again is no change and no event. */
	assert_int_equal(worker_set(&w, W_INACTIVE, "again", &f->ev), 0);
	assert_int_equal(worker_set(&w, W_SPAWNING, NULL, &f->ev), 0);
	assert_int_equal(w.respawns, 1);
	a = events_read(f);
	assert_int_equal(json_array_size(a), 3);
	assert_string_equal(ev_name(a, 0), "worker_up");
	assert_string_equal(ev_name(a, 1), "worker_inactive");
	assert_string_equal(ev_name(a, 2), "worker_inactive");
	json_decref(a);
}

static void
test_worker_spawn_failed(void **state)
{
	struct fixture *f = *state;
	struct worker w;
	json_t *a;

	worker_init(&w, 2, 0, "n1");
	assert_int_equal(worker_set(&w, W_SPAWNING, NULL, &f->ev), 0);
	assert_int_equal(worker_set(&w, W_DEAD, "MPI_Comm_spawn: no", &f->ev),
			 0);
	assert_int_equal(w.failures, 1);
	assert_int_equal(worker_set(&w, W_SPAWNING, NULL, &f->ev), 0);
	assert_int_equal(worker_set(&w, W_DEAD, "again", &f->ev), 0);
	assert_int_equal(w.failures, 2);
	assert_int_equal(w.respawns, 1);
	a = events_read(f);
	assert_int_equal(json_array_size(a), 2);
	assert_string_equal(ev_name(a, 0), "worker_spawn_failed");
	assert_string_equal(json_string_value(json_object_get(
		json_array_get(a, 0), "reason")), "MPI_Comm_spawn: no");
	assert_null(json_object_get(json_array_get(a, 0), "pid"));
	json_decref(a);
}

/* Every pair of states: the table and worker_set agree, and a refused
 * change leaves the worker as it was. */
static void
test_worker_table(void **state)
{
	struct fixture *f = *state;
	int from, to, allowed = 0;

	for (from = 0; from < W_NSTATES; from++)
		for (to = 0; to < W_NSTATES; to++) {
			struct worker w;
			int rc;

			worker_init(&w, 0, 0, "n");
			w.state = (enum wstate)from;
			rc = worker_set(&w, (enum wstate)to, "t", &f->ev);
			if (from == to) {
				assert_int_equal(rc, 0);
				continue;
			}
			assert_int_equal(rc == 0,
					 worker_can((enum wstate)from,
						    (enum wstate)to));
			assert_int_equal(w.state, rc == 0 ? to : from);
			allowed += rc == 0;
		}
	assert_int_equal(allowed, 38);
	assert_string_equal(worker_state_name(W_SLOW), "slow");
	assert_string_equal(worker_state_name(W_NSTATES), "?");
}

static void
test_node_states(void **state)
{
	struct fixture *f = *state;
	struct node n;
	json_t *a;

	node_init(&n, 1, "node2");
	assert_int_equal(n.state, N_UP);
	assert_string_equal(node_state_name(n.state), "up");
	assert_int_equal(node_set(&n, N_INACTIVE, "worker 3 failed twice",
				  &f->ev), 0);
	assert_string_equal(n.reason, "worker 3 failed twice");
	assert_int_equal(node_set(&n, N_UP, "back?", &f->ev), -1);
	assert_int_equal(n.state, N_INACTIVE);
	a = events_read(f);
	assert_int_equal(json_array_size(a), 1);
	assert_string_equal(ev_name(a, 0), "node_inactive");
	assert_string_equal(json_string_value(json_object_get(
		json_array_get(a, 0), "node")), "node2");
	json_decref(a);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_worker_start_and_respawn,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_worker_refuses, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_worker_spawn_failed,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_worker_table, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_node_states, setup,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

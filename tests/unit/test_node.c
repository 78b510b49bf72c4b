/* Unit tests of master/node.c: the node state machine of the ladder and
 * the operators' commands, the transitions it allows and refuses, the
 * event each state entered writes, the reboot count and the time out of
 * service. */
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

#include "evfile.h"

static const char *
field(json_t *a, size_t i, const char *key)
{
	return json_string_value(json_object_get(json_array_get(a, i), key));
}

/* The seed's ladder: suspect, power cycle, back, then given up. */
static void
test_ladder_path(void **state)
{
	struct fixture *f = *state;
	struct node n;
	json_t *a;

	node_init(&n, 2, "node3");
	assert_true(node_serves(&n));
	n.strikes = 1;
	assert_int_equal(node_set(&n, N_SUSPECT, "worker 2 failed", &f->ev),
			 0);
	assert_true(node_serves(&n));
	assert_int_equal(node_set(&n, N_REBOOTING, "worker 2 failed again",
				  &f->ev), 0);
	assert_false(node_serves(&n));
	assert_int_equal(n.reboots, 1);
	assert_true(n.last_reboot > 1e9);
	assert_int_equal(node_set(&n, N_UP, "back", &f->ev), 0);
	assert_int_equal(node_set(&n, N_INACTIVE, "failed after its reboot",
				  &f->ev), 0);
	assert_string_equal(n.reason, "failed after its reboot");
	a = events_read(f);
	assert_int_equal(json_array_size(a), 4);
	assert_string_equal(field(a, 0, "event"), "node_suspect");
	assert_int_equal(json_integer_value(json_object_get(
		json_array_get(a, 0), "failures")), 1);
	assert_string_equal(field(a, 1, "event"), "node_power_cycle");
	assert_int_equal(json_integer_value(json_object_get(
		json_array_get(a, 1), "reboots")), 1);
	assert_string_equal(field(a, 2, "event"), "node_back");
	assert_true(json_real_value(json_object_get(json_array_get(a, 2),
						    "seconds")) >= 0);
	assert_string_equal(field(a, 3, "event"), "node_inactive");
	assert_string_equal(field(a, 3, "node"), "node3");
	json_decref(a);
}

/* Drain and undrain; an inactive node comes back only through DOWN (a
 * probe) or a reboot, never straight to UP; SUSPECT -> UP is quiet. */
static void
test_drain_and_return(void **state)
{
	struct fixture *f = *state;
	struct node n;
	json_t *a;

	node_init(&n, 0, "node1");
	assert_int_equal(node_set(&n, N_DRAINING, "operator", &f->ev), 0);
	assert_int_equal(node_set(&n, N_DRAINED, "operator", &f->ev), 0);
	assert_int_equal(node_set(&n, N_SUSPECT, "no", &f->ev), -1);
	assert_int_equal(node_set(&n, N_UP, "undrained", &f->ev), 0);
	assert_int_equal(node_set(&n, N_SUSPECT, "a failure", &f->ev), 0);
	assert_int_equal(node_set(&n, N_UP, "quiet", &f->ev), 0);
	assert_int_equal(node_set(&n, N_INACTIVE, "gone", &f->ev), 0);
	assert_int_equal(node_set(&n, N_UP, "back?", &f->ev), -1);
	assert_int_equal(node_set(&n, N_DRAINED, "no", &f->ev), -1);
	assert_int_equal(n.state, N_INACTIVE);
	assert_int_equal(node_set(&n, N_DOWN, "probe 1", &f->ev), 0);
	assert_int_equal(node_set(&n, N_UP, "probe passed", &f->ev), 0);
	assert_int_equal(n.reboots, 0);
	a = events_read(f);
	assert_int_equal(json_array_size(a), 7);
	assert_string_equal(field(a, 0, "event"), "node_draining");
	assert_string_equal(field(a, 1, "event"), "node_drained");
	assert_string_equal(field(a, 2, "event"), "node_back");
	assert_string_equal(field(a, 2, "reason"), "undrained");
	assert_string_equal(field(a, 3, "event"), "node_suspect");
	assert_string_equal(field(a, 4, "event"), "node_inactive");
	assert_string_equal(field(a, 5, "event"), "node_down");
	assert_string_equal(field(a, 6, "event"), "node_back");
	json_decref(a);
}

/* A node that joined over TCP leaves, then joins again. */
static void
test_leave_and_rejoin(void **state)
{
	struct fixture *f = *state;
	struct node n;
	json_t *a;

	node_init(&n, 0, "sl1");
	assert_int_equal(node_set(&n, N_LEFT, "no", &f->ev), -1);
	assert_int_equal(node_set(&n, N_LEAVING, "SIGTERM", &f->ev), 0);
	assert_false(node_serves(&n));
	assert_int_equal(node_set(&n, N_UP, "no", &f->ev), -1);
	assert_int_equal(node_set(&n, N_LEFT, "bye", &f->ev), 0);
	assert_int_equal(node_set(&n, N_SUSPECT, "no", &f->ev), -1);
	assert_int_equal(node_set(&n, N_UP, "joined again", &f->ev), 0);
	assert_int_equal(node_state_parse("left"), N_LEFT);
	assert_int_equal(node_state_parse("leaving"), N_LEAVING);
	a = events_read(f);
	assert_int_equal(json_array_size(a), 3);
	assert_string_equal(field(a, 0, "event"), "node_leaving");
	assert_string_equal(field(a, 0, "reason"), "SIGTERM");
	assert_string_equal(field(a, 1, "event"), "node_left");
	assert_string_equal(field(a, 2, "event"), "node_back");
	json_decref(a);
}

/* Every pair of states: the table and node_set agree, and a refused
 * change leaves the node as it was. */
static void
test_node_table(void **state)
{
	struct fixture *f = *state;
	int from, to, allowed = 0;

	for (from = 1; from < N_NSTATES; from++)
		for (to = 1; to < N_NSTATES; to++) {
			struct node n;
			int rc;

			node_init(&n, 0, "n");
			n.state = (enum nstate)from;
			rc = node_set(&n, (enum nstate)to, "t", &f->ev);
			if (from == to) {
				assert_int_equal(rc, 0);
				continue;
			}
			assert_int_equal(rc == 0, node_can((enum nstate)from,
							   (enum nstate)to));
			assert_int_equal(n.state, rc == 0 ? to : from);
			assert_int_equal(n.reboots, rc == 0 && to == N_REBOOTING);
			allowed += rc == 0;
		}
	assert_int_equal(allowed, 33);
	assert_false(node_can(N_INACTIVE, N_UP));
	assert_false(node_can(0, N_UP));
	assert_string_equal(node_state_name(N_DRAINED), "drained");
	assert_string_equal(node_state_name(N_NSTATES), "?");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_ladder_path, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_drain_and_return, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_node_table, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_leave_and_rejoin, setup,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

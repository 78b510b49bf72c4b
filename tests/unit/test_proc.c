/* Unit tests of common/util.c's process checks on real processes: a
 * running, a stopped, a zombie and a reaped child, and a killed one seen
 * through its socket's end, which must never look "staying" (the master
 * would charge a task's doing to the node as a hang); and a runnable one,
 * which a node agent gives more time to answer. */
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "util.h"

static void *
idle_thread(void *arg)
{
	(void)arg;
	for (;;)
		pause();
	return NULL;
}

static void *
spin_thread(void *arg)
{
	(void)arg;
	for (;;)
		;
	return NULL;
}

/* A child that holds the other end of *SOCK and waits, with two threads
 * (as a worker has) when THREADS. */
static pid_t
child(int *sock, int threads)
{
	int sv[2];
	pthread_t t;
	pid_t pid;

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(sv[0]);
		if (threads) {
			pthread_create(&t, NULL, idle_thread, NULL);
			pthread_create(&t, NULL, idle_thread, NULL);
		}
		for (;;)
			pause();
	}
	close(sv[1]);
	*sock = sv[0];
	return pid;
}

/* Wait until the peer of SOCK is gone (its end of the socket closed). */
static void
wait_eof(int sock)
{
	struct pollfd p = { .fd = sock, .events = POLLIN };
	char c;

	assert_int_equal(poll(&p, 1, 10000), 1);
	assert_int_equal(read(sock, &c, 1), 0);
}

static void
test_running_stopped_zombie_reaped(void **state)
{
	int sock, status;
	pid_t pid = child(&sock, 0);
	unsigned long long start;

	(void)state;
	usleep(20000);
	start = ft_proc_start(pid);
	assert_true(start > 0);
	assert_true(ft_pid_alive(pid));
	assert_true(ft_pid_staying(pid));
	assert_true(ft_proc_is(pid, start));
	assert_false(ft_proc_is(pid, start + 1));

	kill(pid, SIGSTOP);
	assert_int_equal(waitpid(pid, &status, WUNTRACED), pid);
	assert_true(WIFSTOPPED(status));
	assert_true(ft_pid_staying(pid));	/* a hang, not a death */

	kill(pid, SIGKILL);
	wait_eof(sock);
	assert_int_equal(waitid(P_PID, (id_t)pid, &(siginfo_t){ 0 },
				WEXITED | WNOWAIT), 0);
	assert_false(ft_pid_alive(pid));	/* a zombie */
	assert_false(ft_pid_staying(pid));
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_false(ft_pid_alive(pid));
	assert_false(ft_pid_staying(pid));
	assert_false(ft_proc_is(pid, start));
	close(sock);
}

/* The moment a killed child's socket ends it is a zombie or exiting;
 * the plain liveness check still calls it alive in a good share of the
 * rounds (which is why the master cannot use it to tell a hang). */
/* Busy (a slot waiting for a CPU, in the kernel, or asleep while another
 * of its threads is either: slow) against sleeping or stopped (a slot
 * that will not answer). */
static void
test_busy_only_when_it_wants_a_cpu_or_is_in_the_kernel(void **state)
{
	int sock, status, i, seen = 0;
	pid_t spin, idle = child(&sock, 0), vforker, threaded;

	(void)state;
	spin = fork();
	assert_true(spin >= 0);
	if (spin == 0)
		for (;;)
			;
	usleep(20000);
	for (i = 0; i < 20 && !seen; i++) {
		seen = ft_pid_busy(spin);
		usleep(1000);
	}
	assert_true(seen);
	/* Asleep in pause(), once it got there (a loaded machine may keep
	 * it waiting for a CPU first). */
	for (i = 0; i < 200 && ft_pid_state(idle) != 'S'; i++)
		usleep(10000);
	assert_false(ft_pid_busy(idle));
	kill(spin, SIGSTOP);
	assert_int_equal(waitpid(spin, &status, WUNTRACED), spin);
	assert_false(ft_pid_busy(spin));
	/* A vfork parent waits in the kernel (D) until its child execs; the
	 * child stops itself first. */
	vforker = fork();
	assert_true(vforker >= 0);
	if (vforker == 0) {
		if (vfork() == 0) {
			/* Killed with its parent, stopped or not. */
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			kill(getpid(), SIGSTOP);
			_exit(0);
		}
		_exit(0);
	}
	for (i = 0, seen = 0; i < 200 && !seen; i++) {
		seen = ft_pid_state(vforker) == 'D';
		usleep(1000);
	}
	assert_true(seen);
	assert_true(ft_pid_busy(vforker));
	/* Asleep in its main thread, while another thread of it runs (a
	 * main thread waiting for a lock a busy thread holds). */
	threaded = fork();
	assert_true(threaded >= 0);
	if (threaded == 0) {
		pthread_t t;

		pthread_create(&t, NULL, spin_thread, NULL);
		for (;;)
			pause();
	}
	for (i = 0, seen = 0; i < 200 && !seen; i++) {
		seen = ft_pid_state(threaded) == 'S' && ft_pid_busy(threaded);
		usleep(1000);
	}
	assert_true(seen);
	kill(threaded, SIGSTOP);
	assert_int_equal(waitpid(threaded, &status, WUNTRACED), threaded);
	assert_false(ft_pid_busy(threaded));
	kill(threaded, SIGKILL);
	assert_int_equal(waitpid(threaded, &status, 0), threaded);
	kill(spin, SIGKILL);
	kill(idle, SIGKILL);
	kill(vforker, SIGKILL);
	assert_int_equal(waitpid(spin, &status, 0), spin);
	assert_int_equal(waitpid(idle, &status, 0), idle);
	assert_int_equal(waitpid(vforker, &status, 0), vforker);
	assert_false(ft_pid_busy(spin));	/* gone */
	assert_int_equal(ft_pid_state(spin), 0);
	close(sock);
}

/* A thread's run and wait time grows while it wakes (here a child that
 * naps 1 ms at a time) and stays put while it is stopped. */
static void
test_sched_time_grows_only_while_it_wakes(void **state)
{
	unsigned long long a, b;
	int status;
	pid_t napper;

	(void)state;
	napper = fork();
	assert_true(napper >= 0);
	if (napper == 0)
		for (;;)
			usleep(1000);
	usleep(20000);
	assert_int_equal(ft_pid_sched_ns(napper, &a), 0);
	/* On a loaded machine the napper may wait a while for a CPU. */
	for (int k = 0; k < 100; k++) {
		usleep(20000);
		assert_int_equal(ft_pid_sched_ns(napper, &b), 0);
		if (b > a)
			break;
	}
	assert_true(b > a);
	kill(napper, SIGSTOP);
	assert_int_equal(waitpid(napper, &status, WUNTRACED), napper);
	assert_int_equal(ft_pid_sched_ns(napper, &a), 0);
	usleep(20000);
	assert_int_equal(ft_pid_sched_ns(napper, &b), 0);
	assert_true(b == a);
	kill(napper, SIGKILL);
	assert_int_equal(waitpid(napper, &status, 0), napper);
	assert_int_equal(ft_pid_sched_ns(napper, &a), -1);	/* gone */
	assert_int_equal(ft_pid_sched_ns(0, &a), -1);
}

static void
test_killed_is_never_staying(void **state)
{
	int i, sock, alive = 0;
	pid_t pid;

	(void)state;
	for (i = 0; i < 300; i++) {
		pid = child(&sock, 1);
		usleep(1000);
		kill(pid, SIGKILL);
		wait_eof(sock);
		alive += ft_pid_alive(pid);
		assert_false(ft_pid_staying(pid));
		close(sock);
		assert_int_equal(waitpid(pid, NULL, 0), pid);
	}
	print_message("alive at the socket's end in %d of %d rounds\n", alive,
		      i);
}

static void
test_no_such_process(void **state)
{
	(void)state;
	assert_false(ft_pid_staying(0));
	assert_false(ft_pid_staying(-1));
	assert_false(ft_pid_alive(0));
	assert_true(ft_pid_staying(getpid()));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_running_stopped_zombie_reaped),
		cmocka_unit_test(test_killed_is_never_staying),
		cmocka_unit_test(test_busy_only_when_it_wants_a_cpu_or_is_in_the_kernel),
		cmocka_unit_test(test_sched_time_grows_only_while_it_wakes),
		cmocka_unit_test(test_no_such_process),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

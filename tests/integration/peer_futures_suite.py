"""CPython's own concurrent.futures tests (Debian's libpython3.11-testsuite,
test/test_concurrent_futures.py) with ftfarm.Executor as the executor
under test, on the cluster of $FTFARM_TEST_CONFIG: run by
test_python_peer.py as `python3 peer_futures_suite.py`.

Taken whole: the executor tests (submit, map, its timeout and
exceptions, no stale references, no yielded result kept), wait and
as_completed.  Left out, being about a pool's own workers: max_workers
(an ftfarm cluster has its slots), the thread and process pools' own
shutdown, saturation, initializer and mp_context tests.  The deadlock
tests (a call, its arguments or its value that raise, exit or crash while
pickled or unpickled, here or in the slot) are kept with ftfarm's
outcome for each: the call's future fails with the exception itself or
an ftfarm.Error that names it, where a process pool breaks; and then the
same executor answers its next call.
"""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..",
                                "python"))
import ftfarm  # noqa: E402
from test import test_concurrent_futures as T  # noqa: E402

CFG = os.environ["FTFARM_TEST_CONFIG"]


def _executor(max_workers=None, **_):
    return ftfarm.Executor(CFG)


class FtfarmMixin(T.ExecutorMixin):
    worker_count = 2
    executor_type = staticmethod(_executor)


class FtfarmExecutorTest(FtfarmMixin, T.ExecutorTest, T.BaseTestCase):
    def test_max_workers_negative(self):
        self.skipTest("an ftfarm cluster has its slots, not max_workers")


class FtfarmWaitTests(FtfarmMixin, T.WaitTests, T.BaseTestCase):
    pass


class FtfarmAsCompletedTests(FtfarmMixin, T.AsCompletedTests,
                             T.BaseTestCase):
    pass


class FtfarmDeadlockTest(FtfarmMixin, T.BaseTestCase):
    """T.ExecutorDeadlockTest's cases, each with ftfarm's outcome: (what
    the future raises, a word its message must hold)."""
    TIMEOUT = 120

    def _check(self, error, word, func, *args):
        res = self.executor.submit(func, *args)
        with self.assertRaises(error) as cm:
            res.result(timeout=self.TIMEOUT)
        if word:
            self.assertIn(word, str(cm.exception))
        # The executor goes on.
        self.assertEqual(self.executor.submit(pow, 2, 5).result(
            timeout=self.TIMEOUT), 32)

    def test_error_at_task_pickle(self):
        self._check(ftfarm.Error, "PicklingError", id, T.ErrorAtPickle())

    def test_exit_at_task_unpickle(self):
        self._check(RuntimeError, "SystemExit", id, T.ExitAtUnpickle())

    def test_error_at_task_unpickle(self):
        self._check(RuntimeError, "UnpicklingError", id, T.ErrorAtUnpickle())

    def test_crash_at_task_unpickle(self):
        self._check(ftfarm.Error, "poison", id, T.CrashAtUnpickle())

    def test_crash_during_func_exec_on_worker(self):
        self._check(ftfarm.Error, "poison", T._crash)

    def test_exit_during_func_exec_on_worker(self):
        self._check(SystemExit, "", T._exit)

    def test_error_during_func_exec_on_worker(self):
        self._check(RuntimeError, "", T._raise_error, RuntimeError)

    def test_crash_during_result_pickle_on_worker(self):
        self._check(ftfarm.Error, "poison", T._return_instance,
                    T.CrashAtPickle)

    def test_exit_during_result_pickle_on_worker(self):
        self._check(ftfarm.Error, "SystemExit", T._return_instance,
                    T.ExitAtPickle)

    def test_error_during_result_pickle_on_worker(self):
        self._check(ftfarm.Error, "PicklingError", T._return_instance,
                    T.ErrorAtPickle)

    def test_error_during_result_unpickle_in_result_handler(self):
        self._check(ftfarm.Error, "UnpicklingError", T._return_instance,
                    T.ErrorAtUnpickle)

    def test_exit_during_result_unpickle_in_result_handler(self):
        self._check(ftfarm.Error, "SystemExit", T._return_instance,
                    T.ExitAtUnpickle)


class FtfarmFutureTests(T.FutureTests):
    """The Future class itself (the executor's futures are these)."""


if __name__ == "__main__":
    unittest.main(verbosity=2)

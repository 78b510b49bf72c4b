"""joblib on an ftfarm cluster: ``import ftfarm.joblib`` registers the
parallel backend "ftfarm".

    import joblib
    import ftfarm.joblib

    with joblib.parallel_backend("ftfarm", config="config/local.json"):
        print(joblib.Parallel(n_jobs=-1)(joblib.delayed(pow)(i, 2)
                                         for i in range(1000)))

Every program that runs its work through joblib runs it in the cluster's
slots unchanged: scikit-learn's estimators and helpers with ``n_jobs``
(GridSearchCV, cross_val_score, RandomForest...), and the science
packages built the same way.  Each joblib batch (a list of calls, sized
by joblib's own auto-batching) is one call of an ftfarm.Executor, so it
gets the Executor's guarantees: it runs in an interpreter a slot keeps
alive, again elsewhere when its slot or node dies (its result is taken
once), and its exception comes back as itself with the slot's traceback.

``parallel_backend("ftfarm", config=None, cpus=1, gpus=0, priority=0,
timeout=None, name=None, python=None, n_jobs=...)``: the Executor's
arguments (docs/python.md).  ``n_jobs=-1`` is the cluster's slots (-2
all but one, and so on); a positive ``n_jobs`` is how many batches are
kept running at once.  Nested parallel calls inside a task run there,
one after another, as joblib's own process backend runs them.  The
``Parallel`` calls of one ``parallel_backend`` block share one Executor
(one open batch of the cluster, ``ftfarm status``), closed when the
backend goes (the block's end, once nothing holds it) or at the
program's exit.
"""
import functools
import weakref

import joblib
from joblib._parallel_backends import (AutoBatchingMixin,
                                       ParallelBackendBase,
                                       SequentialBackend)

from ._errors import Error

NAME = "ftfarm"


class FtfarmBackend(AutoBatchingMixin, ParallelBackendBase):
    """joblib's ParallelBackendBase over an ftfarm.Executor."""

    supports_timeout = True
    supports_sharedmem = False
    uses_threads = False

    def __init__(self, config=None, cpus=1, gpus=0, priority=0, timeout=None,
                 name=None, python=None, nesting_level=None,
                 inner_max_num_threads=None, **kwargs):
        super().__init__(nesting_level=nesting_level,
                         inner_max_num_threads=inner_max_num_threads,
                         **kwargs)
        self._args = dict(config=config, cpus=cpus, gpus=gpus,
                          priority=priority, timeout=timeout,
                          name=name or "joblib", python=python)
        self._ex = None
        self._slots = None
        self._pending = weakref.WeakSet()   # this call's futures
        self.parallel = None

    # ---- sizes ----

    def slots(self):
        """The cluster's slots (workers), asked once."""
        if self._slots is None:
            if self._ex is not None:
                self._slots = self._ex._slots
            else:
                from ._client import Client
                with Client(self._args["config"]) as c:
                    self._slots = max(1, len(c.status().get("workers", ())))
        return self._slots

    def effective_n_jobs(self, n_jobs):
        """N_JOBS as batches that run at once: -1 is every slot."""
        if n_jobs == 0:
            raise ValueError("n_jobs == 0 in Parallel has no meaning")
        if n_jobs is None:
            return 1
        if n_jobs < 0:
            return max(self.slots() + 1 + n_jobs, 1)
        return n_jobs

    # ---- a Parallel call ----

    def configure(self, n_jobs=1, parallel=None, prefer=None, require=None,
                  **backend_args):
        """Start the call's Executor (one open batch); the batches to keep
        running."""
        if require == "sharedmem":
            raise ValueError("the ftfarm backend runs calls in other "
                             "processes: it cannot share memory "
                             "(require='sharedmem')")
        self.parallel = parallel
        if self._ex is None:
            from .executor import Executor
            self._ex = Executor(**self._args)
            self._slots = self._ex._slots
            weakref.finalize(self, self._ex.shutdown, wait=False)
        return self.effective_n_jobs(n_jobs)

    def apply_async(self, func, callback=None):
        """Run FUNC (a joblib batch) in a slot: a Future with .get()."""
        fut = self._ex.submit(func)
        fut.get = functools.partial(_get, fut)
        self._pending.add(fut)
        if callback is not None:
            fut.add_done_callback(callback)
        return fut

    def get_nested_backend(self):
        """Parallel calls inside a task run there, one after another."""
        level = (self.nesting_level or 0) + 1
        return SequentialBackend(nesting_level=level), None

    def abort_everything(self, ensure_ready=True):
        """A call raised: its batches not yet sent are dropped (those
        running end on their own)."""
        for fut in list(self._pending):
            fut.cancel()
        self._pending = weakref.WeakSet()
        if not ensure_ready:
            self.close()

    def terminate(self):
        """The Parallel call is over (the Executor stays for the next)."""
        self._pending = weakref.WeakSet()
        self.reset_batch_stats()

    def close(self):
        """Close the Executor's batch now (the next call opens another)."""
        ex, self._ex = self._ex, None
        if ex is not None:
            ex.shutdown(wait=True, cancel_futures=True)

    def get_exceptions(self):
        return [Error]


def _get(fut, timeout=None):
    """FUT's result, as multiprocessing's AsyncResult.get gives it."""
    import concurrent.futures
    try:
        return fut.result(timeout=timeout)
    except concurrent.futures.TimeoutError as e:
        raise TimeoutError(f"a joblib batch took longer than {timeout} s") \
            from e


joblib.register_parallel_backend(NAME, FtfarmBackend)

"""ftfarm.Executor: a concurrent.futures.Executor whose calls run in the
slots of a cluster, in Python interpreters the slots keep alive.

The executor holds one open batch (common/batch.h: "open": true) for its
life.  Each call is a task of type "python" (_calls.py); calls go to the
master in adds, and each task's result line comes back pushed on the same
connection (subscribe "results"), resolving its future.  A call that a
killed slot or node was running runs again elsewhere; a call that kills
every slot it runs on fails as poison; the journal keeps one result per
task, so a future resolves once.  When the master restarts (or a standby
takes over) the executor reconnects, sends again the adds not yet
acknowledged (tasks come with their index: what the master has already is
not added twice) and reads the results again from the start, skipping
those it has.

Two threads: the reader (answers and pushes: futures resolved there, as
a thread pool's worker resolves its own) and the sender (adds, in index
order).  A call submitted while nothing is in flight goes out at once from
the caller's thread; those that come while an add is in flight go in the
next one, so that a loop of submits makes few, large adds.
"""
import collections
import concurrent.futures
import itertools
import json
import logging
import os
import sys
import threading
import time
import weakref

from . import _calls, _config, _control, _lease, _ref
from ._errors import Error

ADD_MAX_TASKS = 4096          # tasks in one add
ADD_MAX_BYTES = 1 << 20       # and bytes, about
IN_FLIGHT = 2                 # adds sent and not yet acknowledged
READ_SLICE = 1.0              # the reader looks at shutdown this often
CHUNK_SECONDS = 0.02          # map: a task's calls' time in its slot
CHUNK_FIRST = 1               # map: calls in each first task
CHUNK_MAX = 4096              # map: calls in one task, at most
CHUNK_SLACK = 10.0            # a chunk's task timeout beyond its calls'
SPLIT_REASONS = ("poison", "lost")      # a chunk failed so is split

_LOG = logging.getLogger("concurrent.futures")  # as its own callbacks log


class _Task:
    """One task: its calls, and what to do with their outcomes (what
    _calls.outcomes returns; or an Error for all of them)."""

    __slots__ = ("fn", "calls", "keywords", "done", "futures", "spec",
                 "index", "lazy", "deps", "dep")

    def __init__(self, fn, calls, done, futures=(), keywords=True,
                 lazy=False):
        self.fn = fn
        self.calls = calls          # (args, kwargs) pairs, or args tuples
        self.keywords = keywords    # which of the two
        self.done = done            # done(outcomes or Error, seconds)
        self.futures = futures      # user futures (cancel, running)
        self.spec = None            # its JSON text, until it is sent
        self.index = None
        self.lazy = lazy            # a value in a file is read when used
        self.deps = None            # the _Deps its arguments name
        self.dep = None             # its own, once a call names it


class _Dep:
    """A call whose future is an argument of later calls: its task's
    index once it is sent (None before, or for good when it was cancelled
    before it went), its future and its name, for errors."""

    __slots__ = ("index", "fut", "name", "executor")

    def __init__(self, executor, fut, fn):
        self.index = None
        self.fut = fut
        self.executor = weakref.ref(executor)   # a future keeps it not
        self.name = getattr(fn, "__qualname__", None) or repr(fn)

    def failure(self):
        """The Error of a call whose argument this call's future is,
        when this call failed or was cancelled (None when it returned
        or has not ended)."""
        fut = self.fut
        if not fut.done():
            return None
        where = f"the future of {self.name}" + \
            (f" (task {self.index})" if self.index is not None else "")
        if fut.cancelled():
            return Error(f"an argument of the call is {where}, which was "
                         "cancelled")
        exc = fut.exception()
        if exc is None:
            return None
        err = Error(f"an argument of the call is {where}, which raised "
                    f"{_calls._named(exc)}")
        err.__cause__ = exc
        return err


class Executor(concurrent.futures.Executor):
    """An executor whose calls run on an ftfarm cluster.

    CONFIG: the cluster's config file (None: FTFARM_CONFIG).  CPUS and
    GPUS: what each call needs of a node (its task's "cpus" and "gpus").
    PRIORITY: the batch's priority.  TIMEOUT: seconds a call may run
    (None: no limit of its own); past it the call raises TimeoutError.
    NAME: the batch's name (default "executor").  PYTHON: the interpreter
    the slots run (default: this one, sys.executable).  MEM: the memory
    each task needs of its node, bytes or "2G" (its task's "mem": placed
    where it fits, its interpreter killed past it, the call raising
    ftfarm.Error "memory: ...").  STDOUT, STDERR: files for what the calls
    print (a task's "stdout" and "stderr" patterns: %b batch, %t task,
    %a attempt, %n node).  TIME_REQUEST: seconds each call needs; it
    starts only on a node whose allocation has that much time left (its
    task's "time_request").

    What the calls used: a future of submit() has ``.usage`` once done
    ({"cpu_s", "max_rss", "seconds"} of its task), and ``usage`` sums
    the executor's tasks so far.

    submit() returns a concurrent.futures.Future; map() streams, keeping a
    bounded window of calls in flight, in chunks (chunksize=None: sized
    from the calls' time).  A call's exception comes back as itself with
    its remote traceback as text in ``.remote_traceback``; a call that
    could not run (poison, the batch cancelled) raises ftfarm.Error.
    """

    def __init__(self, config=None, cpus=1, gpus=0, priority=0,
                 timeout=None, name=None, *, python=None,
                 reconnect_timeout=None, mem=None, stdout=None,
                 stderr=None, time_request=None):
        _check_args(cpus, gpus, priority, timeout)
        _check_files(mem, stdout, stderr)
        _check_seconds("time_request", time_request)
        self._cfg = _config.load(config)
        self._cpus, self._gpus, self._timeout = cpus, gpus, timeout
        self._files = {"mem": mem,
                       "stdout": stdout and os.path.abspath(stdout),
                       "stderr": stderr and os.path.abspath(stderr),
                       "time_request": time_request}
        self._usage = {"tasks": 0, "cpu_s": 0.0, "max_rss": 0,
                       "seconds": 0.0}
        self._python = python or sys.executable
        self._reconnect_timeout = reconnect_timeout
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)     # the sender's
        self._settled = threading.Condition(self._lock)  # _finish's
        self._send_lock = threading.Lock()
        self._outbox = collections.deque()      # _Task, not sent yet
        self._open = {}             # index -> _Task, sent, unresolved
        self._unacked = collections.OrderedDict()   # first -> add bytes
        self._expect = collections.deque()      # answers awaited
        self._next = 0              # the next task's index
        self._inflight = 0          # adds unacknowledged
        self._shutdown = False      # no more submits
        self._closed = False        # the batch closed, or to close
        self._broken = None         # the Error that ended everything
        self._stop = False          # threads: leave
        self._conn = None
        self._batch = self._start_batch(name or "executor", priority)
        self._spool = _calls.Spool(os.path.join(
            self._cfg.state_dir, "batches", str(self._batch), "py"))
        self._fns = _calls.Functions(self._spool)
        self._spec_keys = self._common_keys()
        self._slots = self._count_slots()
        self._subscribe(self._conn)
        self._reader = threading.Thread(target=self._read_loop,
                                        name="ftfarm-executor-reader",
                                        daemon=True)
        self._sender = threading.Thread(target=self._send_loop,
                                        name="ftfarm-executor-sender",
                                        daemon=True)
        self._reader.start()
        self._sender.start()

    @property
    def batch(self):
        """The id of the executor's batch (`ftfarm batch -c CFG ID`)."""
        return self._batch

    @property
    def usage(self):
        """What the executor's tasks with a result used so far: their
        count ("tasks"), CPU seconds and wall seconds summed ("cpu_s",
        "seconds") and the largest peak RSS in bytes ("max_rss")."""
        with self._lock:
            return dict(self._usage)

    def __repr__(self):
        return f"<ftfarm.Executor: batch {self._batch} of " \
               f"{self._cfg.name}>"

    # ---- submitting ----

    def submit(self, fn, /, *args, **kwargs):
        """Call FN(*ARGS, **KWARGS) in a slot; its Future."""
        fut = concurrent.futures.Future()
        task = _Task(fn, None, None, (fut,))

        def done(result, seconds=None):
            if isinstance(result, Error) and task.deps:
                result = _dep_failure(task.deps, result)
            _settle(fut, result, 0)
        task.done = done
        # Every future of ours says so, those failed at once too (a
        # later call that takes one fails naming it).
        fut._ftfarm_dep = task.dep = _Dep(self, fut, fn)
        try:
            args, kwargs, task.deps = self._refs(args, kwargs)
            task.calls = [(args, kwargs)]
            task.spec = self._spec(fn, task.calls, True, bool(task.deps))
        except Error as e:          # its function or arguments: the call's
            fut.set_exception(e)
            return fut
        self._enqueue([task])
        return fut

    def _refs(self, args, kwargs):
        """ARGS and KWARGS with this executor's futures at their top level
        replaced: by their value when it is there, else by a Ref to the
        task's input it will be (the master sends the value with the
        task: master/inputs.h).  Returns (args, kwargs, [_Dep] or None);
        raises the Error of a future that failed or was cancelled."""
        deps = []

        def ref(v):
            dep = getattr(v, "_ftfarm_dep", None) \
                if isinstance(v, concurrent.futures.Future) else None
            if dep is None or dep.executor() is not self:
                return v
            if v.done():
                err = dep.failure()
                if err is not None:
                    raise err
                return v.result()
            for k, d in enumerate(deps):
                if d is dep:
                    return _ref.Ref(k)
            deps.append(dep)
            return _ref.Ref(len(deps) - 1)
        if any(isinstance(v, concurrent.futures.Future) for v in args) or \
                any(isinstance(v, concurrent.futures.Future)
                    for v in kwargs.values()):
            args = tuple(ref(v) for v in args)
            kwargs = {n: ref(v) for n, v in kwargs.items()}
        return args, kwargs, deps or None

    def map(self, fn, *iterables, timeout=None, chunksize=None):
        """FN over the items of ITERABLES, like the built-in map, run in
        the slots: an iterator of the results in order.  The calls go in
        tasks of CHUNKSIZE calls (None: one call each at first, then as
        many as run some 20 ms in a slot, from the calls' times so far);
        the first tasks go out at once, the rest as results are read, a
        bounded number in flight.
        TIMEOUT: seconds from this call after which a result not yet
        there raises TimeoutError."""
        if chunksize is not None and (type(chunksize) is not int or
                                      chunksize < 1):
            raise ValueError("chunksize must be an int of 1 or more")
        deadline = None if timeout is None else time.monotonic() + timeout
        run = _MapRun(self, fn, zip(*iterables), chunksize)
        run.fill()
        return run.results(deadline)

    def _chunk(self, fn, args, sizer):
        """A task of calls of FN, one per args tuple of ARGS: (a future
        of its outcomes, len)."""
        fut = concurrent.futures.Future()

        def done(result, seconds=None):
            if seconds is not None and not isinstance(result, Error):
                sizer.seen(len(args), seconds)
            try:
                fut.set_result(_outcomes_or(result, len(args)))
            except concurrent.futures.InvalidStateError:
                pass                # cancelled: its map was left
        self._enqueue([_Task(fn, args, done, keywords=False, lazy=True)])
        return fut, len(args)

    def _enqueue(self, tasks, direct=True):
        """Queue TASKS to be sent (specs made here, on the caller's
        thread); send at once when no add is in flight, from this thread
        if DIRECT (the reader's must never wait to send)."""
        for t in tasks:
            if t.spec is None:
                t.spec = self._spec(t.fn, t.calls, t.keywords)
        with self._lock:
            if self._shutdown and direct:
                raise RuntimeError("cannot schedule new futures after "
                                   "shutdown")
            if self._broken is not None:
                raise self._broken
            self._outbox.extend(tasks)
            # A future's callback submits from the reader (joblib's next
            # batch): the sender sends it, the reader must never wait.
            now = direct and self._inflight == 0 and \
                threading.current_thread() is not self._reader
            if not now:
                self._wake.notify()
        if now:
            self._flush()

    def _spec(self, fn, calls, keywords, values=False):
        """The task of CALLS of FN as JSON (_calls.py; KEYWORDS: see
        _Task): the executor's keys and the function's are made once.
        VALUES: its arguments name other calls' values (its "after" is
        put in once their tasks' indexes are known: _take_add)."""
        parts = [self._spec_keys, self._fns.text(fn),
                 _calls.args_text(calls, self._spool, keywords)]
        if values:
            parts.append('"after_values":true')
        if self._timeout is not None:
            parts.append('"timeout":' + json.dumps(
                self._timeout * len(calls) + CHUNK_SLACK))
        return "{" + ",".join(parts) + "}"

    def _common_keys(self):
        """The keys every task of the executor has, as JSON members."""
        spec = {"type": "python", "python": self._python,
                "dir": self._spool.path}
        if self._timeout is not None:
            spec["call_timeout"] = self._timeout
        if self._cpus != 1:
            spec["cpus"] = self._cpus
        if self._gpus:
            spec["gpus"] = self._gpus
        spec.update((k, v) for k, v in self._files.items() if v is not None)
        return _calls.members(spec)

    # ---- sending ----

    def _flush(self):
        """Send what waits in the outbox while fewer than IN_FLIGHT adds
        are unacknowledged.  Errors are the reader's to handle (it sees
        the connection break too)."""
        with self._send_lock:
            while True:
                with self._lock:
                    if self._inflight >= IN_FLIGHT or self._stop:
                        return
                    add = self._take_add()
                    if add is None:
                        return
                    first, body = add
                    self._unacked[first] = body
                    self._expect.append(("add", first))
                    self._inflight += 1
                    conn = self._conn
                try:
                    conn.send({"cmd": "add", "batch": self._batch,
                               "first": first, "bytes": len(body)}, body)
                except Error:
                    return          # the reader reconnects and resends

    def _take_add(self):
        """The next add of the outbox: (first, body), indexes given to its
        tasks, or None.  Calls cancelled before they went are dropped."""
        tasks, size = [], 0
        while self._outbox and len(tasks) < ADD_MAX_TASKS and \
                size < ADD_MAX_BYTES:
            t = self._outbox.popleft()
            if not all(f.set_running_or_notify_cancel() for f in t.futures):
                continue
            text = t.spec
            if t.deps:
                text = self._after(t, text)
                if text is None:
                    continue
            t.index = self._next + len(tasks)
            if t.dep is not None:
                t.dep.index = t.index
            t.spec = None
            tasks.append((t, text))
            size += len(text)
        if not tasks:
            return None
        first = self._next
        self._next += len(tasks)
        for t, _ in tasks:
            self._open[t.index] = t
        body = ('{"tasks":[' + ",".join(text for _, text in tasks) +
                "]}").encode()
        return first, body

    @staticmethod
    def _after(t, text):
        """T's spec TEXT with its "after": the indexes of the tasks its
        arguments name; None when one of them was cancelled before it
        was sent (T's future then fails, naming it)."""
        after = []
        for d in t.deps:
            if d.index is None:
                # Failed once the lock is let go (a callback may submit).
                threading.Thread(target=t.done, daemon=True, args=(Error(
                    f"an argument of the call is the future of {d.name}, "
                    "which was cancelled"),)).start()
                return None
            after.append(d.index)
        return text[:-1] + ',"after":' + json.dumps(after) + "}"

    def _send_loop(self):
        try:
            self._send_forever()
        except BaseException as e:
            self._break(Error(f"the executor's sender stopped: "
                              f"{_calls._named(e)}"))

    def _send_forever(self):
        while True:
            with self._lock:
                while not self._stop and (not self._outbox or
                                          self._inflight >= IN_FLIGHT):
                    self._wake.wait()
                if self._stop:
                    return
            self._flush()

    # ---- reading ----

    def _read_loop(self):
        """Read until the end; whatever stops it early breaks the executor
        (every future fails, shutdown returns), never silently."""
        try:
            self._read_forever()
        except BaseException as e:
            self._break(Error(f"the executor's reader stopped: "
                              f"{_calls._named(e)}"))

    def _read_forever(self):
        while True:
            conn = self._conn
            try:
                msg = conn.read(READ_SLICE)
            except _control.NoAnswer:
                if self._stop:
                    return
                continue
            except Error as e:
                if self._stop:
                    return
                if not self._reconnect(e):
                    return
                continue
            if "push" in msg:
                if msg["push"] == "result":
                    self._result(msg)
            else:
                self._answer(msg)

    def _answer(self, msg):
        with self._lock:
            what = self._expect.popleft() if self._expect else ("?", None)
        if what[0] == "add":
            if msg.get("ok") is not True:
                self._break(Error(msg.get("error") or "an add was refused",
                                  msg.get("exit") or 1))
                return
            with self._lock:
                self._unacked.pop(what[1], None)
                self._inflight -= 1
                # Only a thread with work to do is woken: a wake-up here
                # costs a call's round trip a CPU its slot wants.
                if self._outbox:
                    self._wake.notify()
                if self._shutdown:
                    self._settled.notify_all()
        elif what[0] == "close" and msg.get("ok") is not True:
            self._break(Error(msg.get("error") or "close was refused"))

    def _result(self, line):
        usage = {k: line.get(k, 0) for k in ("cpu_s", "max_rss", "seconds")}
        with self._lock:
            t = self._open.pop(line.get("task"), None)
            if self._shutdown and not self._open:
                self._settled.notify_all()
            if t is not None:
                u = self._usage
                u["tasks"] += 1
                u["cpu_s"] += usage["cpu_s"]
                u["seconds"] += usage["seconds"]
                u["max_rss"] = max(u["max_rss"], usage["max_rss"])
        if t is None:
            return                  # seen before a reconnection
        for fut in t.futures:
            fut.usage = usage
        value = line.get("value")
        if value and t.lazy and value.startswith("file:"):
            result = _calls.Later(value, len(t.calls))
        elif value:
            try:
                result = _calls.outcomes(value, len(t.calls))
            except Error as e:
                result = e
        else:
            result = Error(f"the call could not run: "
                           f"{line.get('reason') or line.get('status')}")
            if len(t.calls) > 1 and str(line.get("reason", "")).startswith(
                    SPLIT_REASONS):
                self._split(t)
                return
        try:
            t.done(result, line.get("seconds"))
        except BaseException:       # a user's callback: its future is set
            _LOG.exception("a future's callback raised")
        # Its function and arguments are not kept past its end (a bound
        # method's object is collected once the caller lets it go).
        t.fn = t.calls = t.deps = None

    def _split(self, t):
        """T, a chunk that killed its slots, again as one task a call, so
        that only the call that kills fails."""
        outs = [None] * len(t.calls)
        left = [len(t.calls)]
        lock = threading.Lock()

        def part(i):
            def done(result, seconds=None):
                outs[i] = _calls.outcome(_outcomes_or(result, 1), 0)
                with lock:
                    left[0] -= 1
                    last = left[0] == 0
                if last:
                    t.done(outs)
            return done
        try:
            self._enqueue([_Task(t.fn, [c], part(i), keywords=t.keywords)
                           for i, c in enumerate(t.calls)], direct=False)
        except Error as e:
            t.done(e)

    # ---- the connection ----

    def _start_batch(self, name, priority):
        """Connect and submit the executor's open batch; its id."""
        batch = {"name": name, "open": True, "tasks": []}
        if priority:
            batch["priority"] = priority
        body = json.dumps(batch).encode()
        self._conn = self._connect()
        ans = self._conn.call({"cmd": "submit", "bytes": len(body)}, body,
                              600)
        return ans["batch"]

    def _connect(self):
        return _control.connect(self._cfg.state_dir, self._cfg.munge_socket)

    def _count_slots(self):
        try:
            st = self._conn.call({"cmd": "status"}, None, 60)
            return max(1, len(st.get("workers", ())))
        except Error:
            return 1

    def _subscribe(self, conn):
        conn.call({"cmd": "subscribe", "batch": self._batch,
                   "results": True}, None, 60)

    def _reconnect(self, why):
        """The master went away (WHY): connect again, stream the results
        again, send the adds not acknowledged.  False when it is gone for
        good, or refuses the batch now (every future then fails)."""
        restarts = _lease.RestartWait(self._cfg, self._reconnect_timeout)
        while not self._stop:
            try:
                conn = self._connect()
                self._subscribe(conn)
                self._resend(conn)
                return True
            except _control.Broken as e:
                why = e
                if not restarts.pause():
                    break
            except Error as e:      # a refusal: the batch is gone
                why = e
                break
        self._break(Error(f"the master of {self._cfg.name} went away: "
                          f"{why}"))
        return False

    def _resend(self, conn):
        """Swap in CONN and send it the unacknowledged adds."""
        with self._send_lock:
            with self._lock:
                old, self._conn = self._conn, conn
                self._expect.clear()
                adds = list(self._unacked.items())
                self._inflight = len(adds)
                for first, _ in adds:
                    self._expect.append(("add", first))
                if self._closed:
                    self._expect.append(("close", None))
            old.close()
            for first, body in adds:
                conn.send({"cmd": "add", "batch": self._batch,
                           "first": first, "bytes": len(body)}, body)
            if self._closed:
                conn.send({"cmd": "close", "batch": self._batch})

    def _break(self, err):
        """Fail everything with ERR: the executor cannot go on."""
        with self._lock:
            if self._broken is None:
                self._broken = err
            tasks = list(self._open.values()) + list(self._outbox)
            self._open.clear()
            self._outbox.clear()
            self._stop = True
            self._wake.notify_all()
            self._settled.notify_all()
        for t in tasks:
            t.done(err)

    # ---- the end ----

    def shutdown(self, wait=True, *, cancel_futures=False):
        """No more calls.  CANCEL_FUTURES: the calls not yet sent are
        cancelled (those sent run).  The batch is closed once every call
        is sent; WAIT: return once every call has ended and the
        connection is closed."""
        with self._lock:
            self._shutdown = True
            if cancel_futures:
                for t in self._outbox:
                    for f in t.futures:
                        f.cancel()
            self._wake.notify_all()
        self._flush()
        if wait:
            self._finish()
        else:
            threading.Thread(target=self._finish, daemon=True,
                             name="ftfarm-executor-shutdown").start()

    def _finish(self):
        """Wait for every call, close the batch, then the connection."""
        with self._lock:
            while (self._outbox or self._open or self._unacked) and \
                    self._broken is None:
                self._settled.wait(READ_SLICE)
            closing = self._broken is None and not self._closed
            self._closed = True
        if closing:
            with self._send_lock:
                with self._lock:
                    self._expect.append(("close", None))
                try:
                    self._conn.send({"cmd": "close", "batch": self._batch})
                except Error:
                    pass
        with self._lock:
            self._stop = True
            self._wake.notify_all()
        self._conn.shutdown()       # the reader wakes
        if threading.current_thread() is not self._reader:
            self._reader.join()
        self._sender.join()
        self._conn.close()


class _MapRun:
    """One map: its items, the tasks in flight, the results read."""

    def __init__(self, ex, fn, items, chunksize):
        self.ex, self.fn, self.items = ex, fn, items
        self.sizer = _Sizer(chunksize, ex._slots)
        self.window = collections.deque()   # (future of outcomes, count)
        self.ended = False

    def fill(self):
        """Send tasks while the window has room and items are left."""
        while not self.ended and self.sizer.room(self.window):
            args = list(itertools.islice(self.items, self.sizer.size))
            if not args:
                self.ended = True
                break
            self.window.append(self.ex._chunk(self.fn, args, self.sizer))

    def results(self, deadline):
        """The results in order (a generator)."""
        try:
            while self.window:
                outs = self._next(deadline)
                values = _calls.returned(outs)
                outs = values if values is not None else list(outs)
                # Each value is handed out and dropped: nothing here
                # keeps one the caller has let go (a loop over values
                # of 50 MB holds one at a time).
                outs.reverse()
                while outs:
                    if values is not None:
                        yield outs.pop()
                    elif outs[-1][0]:
                        raise _calls.exception(outs.pop())
                    else:
                        yield outs.pop()[1]
        finally:
            for fut, _ in self.window:
                fut.cancel()


    def _next(self, deadline):
        """The outcomes of the window's first task (read from its file
        now if it was left there), the window filled again."""
        fut, n = self.window.popleft()
        outs = fut.result(_left(deadline))
        del fut                     # its result is ours alone now
        self.fill()
        if isinstance(outs, _calls.Later):
            try:
                outs = outs.load()
            except Error as e:
                outs = _outcomes_or(e, n)
        return outs


class _Sizer:
    """How many calls a map puts in a task, and how many tasks it keeps in
    flight.

    Unless the size is fixed, the first tasks hold CHUNK_FIRST calls each
    (a call may take minutes: one slot must not get them all), and each
    result lets the size grow up to fourfold, towards as many calls as run
    CHUNK_SECONDS in a slot.  A call's time is the slot's: its task's run
    over its calls, not the time from submit to result, which holds the
    wait behind the window's other tasks (sized so, tasks of no-op calls
    settled near 700 calls, where 4,096 run in 2 ms).  Calls on big
    arguments or values take the time their pickling takes, which keeps
    such tasks to some 20 MB."""

    def __init__(self, fixed, slots):
        self.fixed = fixed
        self.size = fixed or CHUNK_FIRST
        self.slots = slots
        self._per_call = None

    def room(self, window):
        """May another task go out with WINDOW (tasks unread) ahead?"""
        return len(window) < 4 * self.slots + 4 and \
            sum(n for _, n in window) < 16 * CHUNK_MAX

    def seen(self, calls, seconds):
        """A task of CALLS calls ran SECONDS in its slot."""
        if self.fixed:
            return
        per = seconds / calls
        self._per_call = per if self._per_call is None else \
            0.5 * self._per_call + 0.5 * per
        want = int(CHUNK_SECONDS / max(self._per_call, 1e-7))
        self.size = max(1, min(CHUNK_MAX, 4 * self.size, want))


def _left(deadline):
    """Seconds until DEADLINE (None: None); TimeoutError once past."""
    if deadline is None:
        return None
    left = deadline - time.monotonic()
    if left <= 0:
        raise concurrent.futures.TimeoutError()
    return left


def _dep_failure(deps, err):
    """ERR, the Error of a call that could not run, or, when that was for
    a call its arguments name (failed or cancelled), the Error that
    names it."""
    for d in deps:
        named = d.failure()
        if named is not None:
            return named
    return err


def _outcomes_or(result, n):
    """RESULT (what _calls.outcomes returns) or, for an Error, N outcomes
    raising it."""
    if isinstance(result, Error):
        return [(1, result, "")] * n
    return result


def _settle(fut, result, i):
    """Resolve FUT with outcome I of RESULT (or the Error RESULT)."""
    if fut.done():
        return
    if isinstance(result, Error):
        fut.set_exception(result)
        return
    out = _calls.outcome(result, i)
    if out[0] == 0:
        fut.set_result(out[1])
    else:
        fut.set_exception(_calls.exception(out))


def _check_files(mem, stdout, stderr):
    """MEM: None, bytes (an int above 0) or a string such as "2G" (the
    master says what it refuses); STDOUT, STDERR: None or a path."""
    if mem is not None and not ((type(mem) is int and mem > 0) or
                                (isinstance(mem, str) and mem)):
        raise ValueError(f"mem must be bytes (an int above 0) or a string "
                         f"such as \"2G\", not {mem!r}")
    for name, v in (("stdout", stdout), ("stderr", stderr)):
        if v is not None and not (isinstance(v, (str, os.PathLike)) and
                                  str(v)):
            raise ValueError(f"{name} must be a path, not {v!r}")


def _check_seconds(name, v):
    """V: None or seconds (a number above 0, at most 1e7)."""
    if v is not None and not (isinstance(v, (int, float)) and
                              not isinstance(v, bool) and 0 < v <= 1e7):
        raise ValueError(f"{name} must be seconds (a number above 0, at "
                         f"most 1e7), not {v!r}")


def _check_args(cpus, gpus, priority, timeout):
    for name, v, lo, hi in (("cpus", cpus, 1, 256), ("gpus", gpus, 0, 64),
                            ("priority", priority, -128, 127)):
        if type(v) is not int or not lo <= v <= hi:
            raise ValueError(f"{name} must be an int in {lo}..{hi}, "
                             f"not {v!r}")
    if timeout is not None and not (isinstance(timeout, (int, float)) and
                                    timeout > 0):
        raise ValueError(f"timeout must be a number of seconds above 0, "
                         f"not {timeout!r}")

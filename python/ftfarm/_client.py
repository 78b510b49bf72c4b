"""ftfarm.Client: a running cluster's master, from Python, as the ftfarm
command drives it (cli/commands.c): submit, wait, results, status, cancel.

One connection is kept and reused across calls; one the master closed
(it restarted, or found the connection idle) is replaced before the next
call.  submit and wait carry on across a restart of the master while its
supervisor holds the lease (_lease.RestartWait): submit sends the same
bytes again under the same token, so that the master gives the batch the
id it gave it already; wait asks again.  Calls on one Client are
serialised (a wait holds it until it returns): threads that wait at once
use a Client each.
"""
import json
import secrets
import threading
import time

from . import _config, _control, _lease, _results
from ._errors import Error

SUBMIT_TIMEOUT = 600.0      # seconds for the answer to a submit
WAIT_SLICE = 30.0           # a wait longer than this checks the master lives
PROBE_TIMEOUT = 30.0        # ... by a status answered within this


class Client:
    """A client of the master of one cluster.

    CONFIG: the cluster's config file (a path), or None for the one
    FTFARM_CONFIG names.  TIMEOUT: seconds to wait for the answer to a
    short request (status, cancel; a submit gets at least 600 s).
    RECONNECT_TIMEOUT: how long submit and wait wait for a master that
    is restarting (None: lease_ms + start_timeout_s +
    restart_backoff_max_ms of the config, as the ftfarm command waits).
    Usable as a context manager; close() closes its connection.
    """

    def __init__(self, config=None, timeout=30.0, reconnect_timeout=None):
        self.config = _config.load(config)
        self.timeout = timeout
        self.reconnect_timeout = reconnect_timeout
        self._conn = None
        self._lock = threading.RLock()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        """Close the connection (a later call opens another)."""
        with self._lock:
            self._drop()

    def __repr__(self):
        return f"<ftfarm.Client of {self.config.name} " \
               f"({self.config.state_dir})>"

    # ---- the requests ----

    def submit(self, batch):
        """Submit BATCH (a dict, as a batch file holds it; or its JSON text
        as str or bytes) and return the batch's id.  Raises Error: the
        master's message for a bad batch (exit 2), or why the master could
        not be reached or stopped before it acknowledged the batch."""
        body = _batch_text(batch)
        req = {"cmd": "submit", "bytes": len(body),
               "token": secrets.token_hex(16)}
        with self._lock:
            ans = self._across_restarts(
                lambda: self._call(req, body,
                                   max(self.timeout, SUBMIT_TIMEOUT)),
                "the master stopped before it acknowledged the batch; "
                f"see `ftfarm status -c {self.config.path}`")
        return ans["batch"]

    def wait(self, batch, timeout=None):
        """The row of batch BATCH (id, name, total, done, ok, failed,
        state...) once it has finished, as the master answers wait.  Raises
        Error for a batch the master does not know ("no batch N") or when
        the master cannot be reached; TimeoutError when TIMEOUT seconds
        (None: no limit) pass first."""
        _check_id(batch)
        with self._lock:
            try:
                ans = self._wait_answer(batch, timeout)
            except BaseException:
                self._drop()        # its answer would come later
                raise
        return _control.check(ans)["batch"]

    def results(self, batch):
        """The results of batch BATCH so far: an iterator of dicts, one per
        ended task in the order the tasks ended, with the fields of its
        line in results.jsonl ("task", "attempt", "worker", "status",
        "exit", "stdout", ...) but "crc".  A line whose checksum does not
        match, a second line for a task and a torn last line are skipped,
        as the master's journal skips them.  Raises Error when the file
        cannot be read."""
        _check_id(batch)
        file = _results.path(self.config.state_dir, batch)
        try:
            return _results.read(file)
        except OSError as e:
            raise Error(f"batch {batch}: cannot read {file}: {e.strerror}") \
                from None

    def status(self):
        """The cluster's status: the dict `ftfarm status --json` prints
        (cluster, workers, nodes, batches, counters...)."""
        with self._lock:
            ans = self._call({"cmd": "status"}, None, self.timeout)
        del ans["ok"]
        return ans

    def cancel(self, batch):
        """Cancel batch BATCH: its queued tasks are dropped, its running
        ones killed.  The answer as `ftfarm cancel --json` prints it:
        {"batch", "queued", "running"} (and "v").  Raises Error for a
        batch that has finished or does not exist."""
        _check_id(batch)
        with self._lock:
            ans = self._call({"cmd": "cancel", "batch": batch}, None,
                             self.timeout)
        del ans["ok"]
        return ans

    # ---- the connection ----

    def _connection(self):
        """The open connection; a new one when there is none or the master
        closed the last.  Raises Broken."""
        if self._conn is not None and self._conn.stale():
            self._drop()
        if self._conn is None:
            self._conn = _control.connect(self.config.state_dir,
                                          self.config.munge_socket)
        return self._conn

    def _drop(self):
        """Forget the connection (closed)."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _call(self, req, body, timeout):
        """REQ's answer (ok) on the connection.  Raises Error for a
        refusal; Broken when it broke.  The connection is dropped unless
        the answer was read (a later call must not read this one's)."""
        conn = self._connection()
        try:
            return conn.call(req, body, timeout)
        except Error as e:
            if isinstance(e, _control.Broken):
                self._drop()
            raise
        except BaseException:
            self._drop()
            raise

    def _send_wait(self, batch):
        """The connection, a wait for BATCH sent on it.  Raises Broken."""
        conn = self._connection()
        conn.send({"cmd": "wait", "batch": batch}, timeout=self.timeout)
        return conn

    def _wait_answer(self, batch, timeout):
        """The answer to a wait for BATCH, asked again across restarts of
        the master (cli/commands.c wait_call).  Raises Error when it gave
        up, TimeoutError when TIMEOUT passed."""
        deadline = _deadline(timeout)
        restarts = _lease.RestartWait(self.config, self.reconnect_timeout)
        conn, tries = None, 0
        while True:
            try:
                if conn is None:
                    conn = self._send_wait(batch)
                return conn.answer(_slice(deadline))
            except _control.NoAnswer as e:
                _timed_out(deadline, batch, timeout)
                if conn is not None and self._master_alive(deadline):
                    restarts.ok()
                    continue    # a long batch: its answer is still to come
                why = e
            except _control.Broken as e:
                why = e
            self._drop()
            conn = None
            tries += 1
            if restarts.pause(deadline):
                continue
            _timed_out(deadline, batch, timeout)
            raise _gave_up(why, tries, f"the master stopped before batch "
                           f"{batch} finished; its results so far are in "
                           f"{self.config.state_dir}/batches/{batch}")

    def _master_alive(self, deadline):
        """Does the master answer a status request (on a connection of its
        own: this one holds a wait), before DEADLINE if there is one?"""
        try:
            conn = _control.connect(self.config.state_dir,
                                    self.config.munge_socket)
        except Error:
            return False
        try:
            wait = PROBE_TIMEOUT if deadline is None else \
                max(1.0, min(PROBE_TIMEOUT, deadline - time.monotonic()))
            conn.call({"cmd": "status"}, None, wait, checked=False)
            return True
        except Error:
            return False
        finally:
            conn.close()

    def _across_restarts(self, call, gone):
        """CALL() again after each break while the master restarts.  Its
        answer; raises Error: why when it never connected, else GONE."""
        restarts = _lease.RestartWait(self.config, self.reconnect_timeout)
        tries = 0
        while True:
            try:
                return call()
            except _control.Broken as e:
                tries += 1
                if restarts.pause():
                    continue
                raise _gave_up(e, tries, gone)


def _gave_up(why, tries, gone):
    """The Error to raise once reconnecting is over: WHY when the first
    call never reached the master, else GONE (it stopped meanwhile)."""
    if tries == 1 and "closed the connection" not in str(why):
        return Error(str(why))
    return Error(gone)


def _batch_text(batch):
    """The bytes of BATCH (a dict, or JSON text).  Raises Error (exit 2)
    for what JSON cannot hold."""
    if isinstance(batch, (bytes, bytearray, memoryview)):
        return bytes(batch)
    if isinstance(batch, str):
        return batch.encode()
    try:
        return json.dumps(batch, separators=(",", ":"),
                          allow_nan=False).encode()
    except (TypeError, ValueError) as e:
        raise Error(f"the batch cannot be written as JSON: {e}", 2) \
            from None


def _check_id(batch):
    """Raise Error (exit 2) unless BATCH is a batch id (an int >= 1)."""
    if type(batch) is not int or batch < 1:
        raise Error(f"{batch!r} is not a batch id", 2)


def _deadline(timeout):
    return None if timeout is None else time.monotonic() + timeout


def _slice(deadline):
    """Seconds to wait for a wait's answer before checking on the master:
    WAIT_SLICE, or what is left before DEADLINE."""
    if deadline is None:
        return WAIT_SLICE
    return max(0.0, min(WAIT_SLICE, deadline - time.monotonic()))


def _timed_out(deadline, batch, timeout):
    """Raise TimeoutError once DEADLINE has passed."""
    if deadline is not None and time.monotonic() >= deadline:
        raise TimeoutError(f"batch {batch} did not finish within "
                           f"{timeout:g} s")

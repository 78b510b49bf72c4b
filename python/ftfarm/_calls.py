"""Python calls as ftfarm tasks, and their outcomes back.

A task of type "python" (worker/tasks/python.c, served by _slot.py in
the slot's interpreter) carries a function and a list of calls of it:

    {"type": "python", "python": EXE, "fn": B64 | "fn_file": PATH,
     "args": B64 | "args_file": PATH, "dir": DIR, "call_timeout": S,
     "timeout": S, "cpus": K, "gpus": G}

"fn" is pickle((meta, cloudpickle(function))): META (the client's
sys.path and working directory) is applied before the function is
unpickled, so that a function of one of the client's own modules is found
by reference.  "args" is ("args", [args, ...], [kwargs, ...] or None)
pickled: one call per args tuple (None: no keyword arguments in any).
Each goes inline (base64) up to INLINE_MAX bytes, else as a file in the
batch's spool directory, written here (the client shares the state dir
with the cluster, as `ftfarm cat` does).  A task's value is its calls'
outcomes pickled (see _slot.py): ("values", [value, ...]) when every
call returned, else the list of their outcomes; "b64:..." or
"file:PATH".
"""
import base64
import json
import os
import pickle
import sys
import threading
import weakref

from ._errors import Error

try:
    import cloudpickle
except ImportError:         # said when the first function is pickled
    cloudpickle = None

INLINE_MAX = 48 * 1024      # pickled bytes sent inside the task
FUNCTIONS_KEPT = 256        # pickled functions kept, by the function


class RemoteTraceback(Exception):
    """The traceback of an exception raised in a slot, as text: the
    ``__cause__`` of the exception a future raises, so that printing it
    shows where it came from (as concurrent.futures' process pools do)."""

    def __init__(self, tb):
        super().__init__(tb)
        self.tb = tb

    def __str__(self):
        return self.tb


class Spool:
    """Where the pickles too big for a task go: the batch's py/ directory
    in the state dir, made when first needed."""

    def __init__(self, path):
        self.path = path
        self._made = False
        self._n = 0
        self._lock = threading.Lock()

    def write(self, prefix, data):
        """DATA in a new file of the spool; its path.  Raises Error."""
        with self._lock:
            self._n += 1
            name = f"{prefix}{self._n}-{os.getpid()}"
            try:
                if not self._made:
                    os.makedirs(self.path, mode=0o700, exist_ok=True)
                    self._made = True
                path = os.path.join(self.path, name)
                with open(path + ".tmp", "wb") as f:
                    f.write(data)
                os.rename(path + ".tmp", path)
            except OSError as e:
                raise Error(f"{self.path}: cannot write a pickle of "
                            f"{len(data)} bytes there: {e.strerror} (a "
                            "big argument or function goes through the "
                            "state dir)") from None
        return path


def _put(spec, key, data, spool, prefix):
    """DATA as SPEC's KEY (base64) or KEY_file (a spool file)."""
    if len(data) <= INLINE_MAX:
        spec[key] = base64.b64encode(data).decode("ascii")
    else:
        spec[key + "_file"] = spool.write(prefix, data)


def members(part):
    """The dict PART as the members of a JSON object: its text without
    the braces."""
    return json.dumps(part, separators=(",", ":"))[1:-1]


class Functions:
    """Functions pickled once each, by the function object (a function's
    state is taken when it is first sent, as Dask does)."""

    def __init__(self, spool):
        self._spool = spool
        self._by_id = {}
        self._lock = threading.Lock()
        self._meta = {"path": [p for p in sys.path if p],
                      "cwd": os.getcwd()}

    def put(self, spec, fn):
        """FN into SPEC ("fn" or "fn_file")."""
        spec.update(self._entry(fn)[0])

    def text(self, fn):
        """FN as the members of a task's JSON ("fn": ... or "fn_file":
        ...), ready made once per function."""
        return self._entry(fn)[1]

    def _entry(self, fn):
        """(FN's part of a task, the same as JSON members)."""
        key = id(fn)
        with self._lock:
            hit = self._by_id.get(key)
            if hit is not None and hit[0]() is fn:
                return hit[1]
        if cloudpickle is None:
            raise Error("the Executor needs cloudpickle (Debian: "
                        "python3-cloudpickle)")
        try:
            inner = cloudpickle.dumps(fn, protocol=pickle.HIGHEST_PROTOCOL)
        except BaseException as e:      # SystemExit from a __reduce__ too
            raise Error(f"cannot pickle the function {fn!r}: "
                        f"{_named(e)}") from e
        part = {}
        _put(part, "fn", pickle.dumps((self._meta, inner),
                                      protocol=pickle.HIGHEST_PROTOCOL),
             self._spool, "f")
        entry = (part, members(part))
        try:
            ref = weakref.ref(fn)
        except TypeError:       # a builtin: no weak reference, keep it
            ref = (lambda f: (lambda: f))(fn)
        with self._lock:
            if len(self._by_id) >= FUNCTIONS_KEPT:
                self._by_id.clear()
            self._by_id[key] = (ref, entry)
        return entry


def put_args(spec, calls, spool, keywords=True):
    """CALLS into SPEC ("args" or "args_file"): a list of (args, kwargs)
    pairs, or, without KEYWORDS, of args tuples."""
    _put(spec, "args", _pickled_calls(calls, keywords), spool, "a")


def args_text(calls, spool, keywords=True):
    """CALLS (as put_args takes them) as the members of a task's JSON
    ("args": ... or "args_file": ...)."""
    data = _pickled_calls(calls, keywords)
    if len(data) <= INLINE_MAX:
        return '"args":"' + base64.b64encode(data).decode("ascii") + '"'
    return '"args_file":' + json.dumps(spool.write("a", data))


def _pickled_calls(calls, keywords):
    """CALLS (see put_args) pickled as a task's "args" holds them."""
    if keywords:
        kwargs = [k for _, k in calls]
        calls = ("args", [a for a, _ in calls],
                 kwargs if any(kwargs) else None)
    else:
        calls = ("args", calls, None)
    try:
        data = pickle.dumps(calls, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:
        try:
            data = cloudpickle.dumps(calls, protocol=pickle.HIGHEST_PROTOCOL)
        except BaseException as e:      # SystemExit from a __reduce__ too
            raise Error(f"cannot pickle the arguments: {_named(e)}") \
                from e
    except BaseException as e:
        raise Error(f"cannot pickle the arguments: {_named(e)}") from e
    return data


def _named(e):
    """The exception E in words, its type first."""
    return f"{type(e).__name__}: {e}" if str(e) else type(e).__name__


def outcomes(value, n):
    """The outcomes of the N calls a task's VALUE holds: a list of N
    outcomes, or ("values", [N values]) when every call returned (see
    outcome()).  Raises Error when it cannot be read."""
    try:
        if value.startswith("b64:"):
            got = pickle.loads(base64.b64decode(value[4:]))
        elif value.startswith("file:"):
            with open(value[5:], "rb") as f:
                got = pickle.loads(f.read())
        else:
            raise Error("a python task's value is neither inline nor a "
                        "file")
    except Error:
        raise
    except BaseException as e:      # SystemExit while unpickling too
        raise Error(f"cannot read a call's value: {_named(e)}") from e
    values = returned(got)
    outs = got if values is None else values
    if type(outs) is not list or len(outs) != n:
        raise Error(f"a python task of {n} calls gave back "
                    f"{len(outs) if type(outs) is list else 'no list of'}"
                    " outcomes")
    return got


class Later:
    """A task's value left in its file until it is used (a map's results
    read ahead of the caller stay on disk, not in memory)."""

    __slots__ = ("value", "n")

    def __init__(self, value, n):
        self.value, self.n = value, n

    def load(self):
        """What outcomes() returns for it (it raises as that does).  The
        file goes once read: a map's value is its caller's alone (no
        future names it), and a map of 200 values of 50 MB would leave
        10 GB in the state dir."""
        got = outcomes(self.value, self.n)
        try:
            os.unlink(self.value[5:])
        except OSError:
            pass
        return got


def returned(outs):
    """The list of values OUTS holds when every call returned, else
    None."""
    if type(outs) is tuple and len(outs) == 2 and outs[0] == "values":
        return outs[1]
    return None


def outcome(outs, i):
    """Outcome I of OUTS (what outcomes() returns): (0, value), or a
    failure that exception() turns into what to raise."""
    values = returned(outs)
    return outs[i] if values is None else (0, values[i])


def exception(outcome):
    """The exception a failed call's OUTCOME stands for, with its remote
    traceback as .remote_traceback (and its __cause__)."""
    if outcome[0] == 1:
        exc, tb = outcome[1], outcome[2]
    else:
        exc, tb = Error(f"{outcome[1]}: {outcome[2]}"), outcome[3]
    try:
        exc.remote_traceback = tb
        if tb:
            exc.__cause__ = RemoteTraceback(tb)
    except (AttributeError, TypeError):
        pass
    return exc

"""The Python interpreter a slot of ftfarm keeps alive from task to task.

The slot's "python" task plugin (worker/tasks/python.c) starts it as
``python3 -m ftfarm._slot`` with a socket as its standard input and pipes
as its outputs, then sends it one request per task and reads one reply,
each a frame of a little-endian u32 length and JSON::

    request  {"id": TASK_ID, "attempt": N, "env": {NAME: VALUE},
              "value_max": BYTES, "task": SPEC}
    reply    {"ok": BOOL, "value": TEXT, "reason": TEXT,
              "cpu_s": SECONDS, "max_rss": BYTES}

"cpu_s" is what the task's calls used (this process and the children
it waited for, user and system), "max_rss" the interpreter's peak
resident set so far (it lives from task to task).

SPEC is the task as submitted (_calls.py): "fn" or "fn_file", a pickle of
(meta, function pickled by cloudpickle) where meta has the client's
"path" (sys.path) and "cwd"; "args" or "args_file", ("args", [args,
...], [kwargs, ...] or None) pickled, one call per args tuple;
optionally "dir" and "call_timeout".  The value is ("values", [value,
...]) pickled when every call returned, else the pickled list of their
outcomes, one per call, in order::

    (0, value)                          the call returned
    (1, exception, traceback_text)      it raised
    (2, type_name, message, traceback)  it raised what cannot be pickled

as "b64:..." or, past value_max, "file:PATH" in the task's "dir".  (The
calls of an older client, a pickled list of (args, kwargs) pairs, are
answered with the list of outcomes, which is what it reads.)  What
the calls print goes to the slot, which keeps it as the task's output.
The interpreter leaves when its slot goes: at the slot's death the kernel
kills it (PR_SET_PDEATHSIG), and it leaves when its socket closes.  A
SIGINT interrupts the call under way (KeyboardInterrupt in it; between
calls it is ignored): the slot's way to cancel a task without losing the
interpreter.
"""
import binascii
import ctypes
import json
import os
import pickle
import resource
import signal
import struct
import sys

try:
    import cloudpickle
except ImportError:  # said once the first task needs it
    cloudpickle = None

# base64 (and its re) and traceback are not imported: some 10 ms of an
# interpreter's start, which the slot's first call waits for.
_HEAD = struct.Struct("<I")
_FNS = {}          # (function, meta) unpickled, by their bytes (or file)
_FNS_MAX = 64      # kept at most (a map sends the same one again and again)


def _die_with_parent():
    """Have the kernel kill us when the slot dies (and leave now if it
    already has)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)      # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    want = os.environ.get("FTFARM_SLOT_PID")
    if want and os.getppid() != int(want):
        os._exit(0)


def _format_exc():
    """The exception being handled and its traceback, as text."""
    import traceback
    return traceback.format_exc()


def _read_exact(fd, n):
    parts = []
    while n > 0:
        data = os.read(fd, n)
        if not data:
            raise EOFError
        parts.append(data)
        n -= len(data)
    return parts[0] if len(parts) == 1 else b"".join(parts)


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _load(task, inline, file_key):
    """The bytes of TASK's INLINE key (base64) or of the file it names."""
    text = task.get(inline)
    if text is not None:
        return binascii.a2b_base64(text)
    with open(task[file_key], "rb") as f:
        return f.read()


def _function(task):
    """The task's function, in the client's working directory (when this
    host has it), its sys.path entries found here too."""
    key = task.get("fn") or ("file", task.get("fn_file"))
    hit = _FNS.get(key)
    if hit is None:
        meta, inner = pickle.loads(_load(task, "fn", "fn_file"))
        for p in meta.get("path", ()):
            if p not in sys.path:
                sys.path.append(p)
        _chdir(meta.get("cwd"))
        hit = (pickle.loads(inner), meta.get("cwd"))
        if len(_FNS) >= _FNS_MAX:
            _FNS.clear()
        _FNS[key] = hit
    else:
        _chdir(hit[1])
    return hit[0]


def _chdir(cwd):
    if cwd and cwd != os.getcwd() and os.path.isdir(cwd):
        os.chdir(cwd)


class _CallTimeout(BaseException):
    pass


_in_call = False    # SIGINT interrupts a call, never the loop between them
_cancelled = False  # and the task's calls after it do not run


def _on_alarm(signum, frame):
    raise _CallTimeout()


def _on_interrupt(signum, frame):
    global _cancelled
    if _in_call:
        _cancelled = True
        raise KeyboardInterrupt("the task was cancelled")


def _call(fn, args, kwargs, limit):
    """One call's outcome (see the module's doc)."""
    try:
        if limit:
            signal.setitimer(signal.ITIMER_REAL, limit)
        try:
            return (0, fn(*args, **kwargs))
        finally:
            if limit:
                signal.setitimer(signal.ITIMER_REAL, 0)
    except _CallTimeout:
        err = TimeoutError(f"the call ran longer than {limit:g} s "
                           "(call_timeout)")
        return (1, err, "")
    except BaseException as e:      # SystemExit too: the call's own
        tb = _format_exc()
        return (1, e.with_traceback(None), tb)


def _pickled(outcomes):
    """The outcomes (what _run_calls returns) pickled (by cloudpickle when
    pickle cannot: a lambda returned); those that cannot be at all are
    told in words."""
    try:
        return pickle.dumps(outcomes, protocol=pickle.HIGHEST_PROTOCOL)
    except BaseException:       # a __reduce__ may raise SystemExit
        pass
    try:
        return cloudpickle.dumps(outcomes, protocol=pickle.HIGHEST_PROTOCOL)
    except BaseException:
        pass
    if type(outcomes) is tuple:
        outcomes = [(0, v) for v in outcomes[1]]
    safe = []
    for o in outcomes:
        try:
            cloudpickle.dumps(o)
            safe.append(o)
        except BaseException as e:
            if o[0] == 0:
                why = f"{type(e).__name__}: {e}" if str(e) else \
                    type(e).__name__
                safe.append((2, "TypeError", "the call's value cannot be "
                             f"pickled: {why}", ""))
            else:
                safe.append((2, type(o[1]).__name__, str(o[1]), o[2]))
    return cloudpickle.dumps(safe, protocol=pickle.HIGHEST_PROTOCOL)


def _value(data, req, task):
    """DATA as the reply's value: inline, or a file in the task's dir."""
    if len(data) * 4 // 3 + 8 <= req.get("value_max", 65536):
        return "b64:" + binascii.b2a_base64(data, newline=False).decode()
    d = task.get("dir")
    if not d:
        raise RuntimeError(f"the value is {len(data)} bytes, too big to "
                           "send inline, and the task has no \"dir\"")
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, f"v{req['id']}-{req['attempt']}-{os.getpid()}")
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.rename(tmp, path)
    return "file:" + path


def _why(outcome):
    """A failed call's reason, in a line."""
    if outcome[0] == 1:
        e = outcome[1]
        return f"{type(e).__name__}: {e}"[:120]
    return f"{outcome[1]}: {outcome[2]}"[:120]


def _split_calls(calls):
    """(args tuples, kwargs dicts or None, whether the client reads
    ("values", ...)) of the calls a task holds."""
    if type(calls) is tuple and len(calls) == 3 and calls[0] == "args":
        return calls[1], calls[2], True
    return [c[0] for c in calls], [c[1] for c in calls], False


def _run_calls(fn, args, kwargs, limit):
    """Call FN once per args tuple of ARGS (with the kwargs of KWARGS, a
    list or None), LIMIT seconds each (None: no limit), until one is
    cancelled.  ("values", [value...]) when every call returned, else the
    list of their outcomes.  Calls without a limit or keywords go in a
    plain loop, left at the first that raises."""
    values, first, start = [], None, 0
    if limit is None and kwargs is None:
        try:
            for a in args:
                values.append(fn(*a))
            return ("values", values)
        except BaseException as e:      # SystemExit too: the call's own
            first = (1, e, _format_exc())
            e.with_traceback(None)
            start = len(values) + 1
    outcomes = [(0, v) for v in values]
    if first is not None:
        outcomes.append(first)
    for i in range(start, len(args)):
        if _cancelled:
            break
        outcomes.append(_call(fn, args[i], kwargs[i] if kwargs else {},
                              limit))
    if len(outcomes) == len(args) and not any(o[0] for o in outcomes):
        return ("values", [o[1] for o in outcomes])
    return outcomes


def _set_env(env):
    """The task's environment entries ENV (a dict) in os.environ (not
    again when they are those of the task before)."""
    global _env
    if env and env != _env:
        os.environ.update(env)
        _env = env


_env = None         # the entries the last task set


def _inputs(task):
    """The values the master sent with TASK ("inputs", or the file
    "inputs_file" holds), each loaded when first used: a function of K
    and I, call I's value of input K."""
    why = task.get("inputs_error")
    if why is not None:
        raise RuntimeError(f"the values of the calls it runs after could "
                           f"not be given to it: {why}")
    raw = task.get("inputs")
    if raw is None:
        with open(task["inputs_file"], "rb") as f:
            raw = json.loads(f.read())
    loaded = {}

    def value(k, i):
        outs = loaded.get(k)
        if outs is None:
            text = raw[k]
            if text.startswith("b64:"):
                outs = pickle.loads(binascii.a2b_base64(text[4:]))
            else:
                with open(text[5:], "rb") as f:
                    outs = pickle.loads(f.read())
            loaded[k] = outs
        if type(outs) is tuple and outs[0] == "values":
            return outs[1][i]
        return outs[i][1]
    return value


def _put_inputs(task, args, kwargs):
    """ARGS and KWARGS (see _split_calls) with every Ref at their top level
    replaced by its value."""
    from ._ref import Ref
    value = _inputs(task)
    args = [tuple(value(a.k, a.i) if type(a) is Ref else a for a in call)
            for call in args]
    if kwargs is not None:
        kwargs = [{n: value(v.k, v.i) if type(v) is Ref else v
                   for n, v in kw.items()} for kw in kwargs]
    return args, kwargs


def _run(req):
    task = req["task"]
    if cloudpickle is None:
        return {"ok": False, "reason": "cloudpickle is not installed for "
                f"{sys.executable} (Debian: python3-cloudpickle)"}
    _set_env(req.get("env"))
    try:
        fn = _function(task)
        args, kwargs, compact = _split_calls(pickle.loads(
            _load(task, "args", "args_file")))
        if task.get("after_values"):
            args, kwargs = _put_inputs(task, args, kwargs)
    except BaseException as e:      # SystemExit while unpickling too
        tb = _format_exc()
        outcome = (1, RuntimeError(f"cannot load the call: "
                                   f"{type(e).__name__}: {e}"), tb)
        return {"ok": False, "value": _value(_pickled([outcome]), req, task),
                "reason": _why(outcome)}
    global _in_call, _cancelled
    _cancelled = False
    _in_call = True
    try:
        outcomes = _run_calls(fn, args, kwargs, task.get("call_timeout"))
    finally:
        _in_call = False
    if not compact and type(outcomes) is tuple:
        outcomes = [(0, v) for v in outcomes[1]]
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    bad = None if type(outcomes) is tuple else \
        next((o for o in outcomes if o[0]), None)
    reply = {"ok": bad is None,
             "value": _value(_pickled(outcomes), req, task)}
    if bad is not None:
        reply["reason"] = _why(bad)
    return reply


def _cpu():
    """CPU seconds of this process and its waited-for children."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def main():
    ctl = os.dup(0)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    _die_with_parent()
    signal.signal(signal.SIGALRM, _on_alarm)
    signal.signal(signal.SIGINT, _on_interrupt)
    while True:
        try:
            (n,) = _HEAD.unpack(_read_exact(ctl, 4))
            req = json.loads(_read_exact(ctl, n))
        except (EOFError, OSError):
            return
        before = _cpu()
        try:
            reply = _run(req)
        except BaseException as e:  # its own trouble, or a late SIGINT
            reply = {"ok": False, "reason": f"{type(e).__name__}: {e}"[:120]}
        reply["cpu_s"] = _cpu() - before
        reply["max_rss"] = max(
            resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
            resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) * 1024
        out = json.dumps(reply).encode()
        _write_all(ctl, _HEAD.pack(len(out)) + out)


if __name__ == "__main__":
    main()

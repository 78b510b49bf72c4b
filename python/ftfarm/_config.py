"""What a client reads of a cluster's config file (common/config.c).

The state dir, resolved as the master resolves it (a relative path is
taken against the directory of the config file, symbolic links in that
directory resolved, then cleaned lexically), the cluster's name, the
"control" settings, and the times that bound a wait for a restarting
master.  Keys a client does not use are left to the ftfarm command's own
check (``ftfarm check``), so that a newer config still serves.

A file that cannot be read, is not JSON, or holds a wrong value for one of
those keys raises Error: "FILE:LINE:COL: KEY: MESSAGE", exit status 2.
"""
import json
import os
import re

from ._errors import Error


class Config:
    """A cluster config, as far as a client needs it."""

    def __init__(self, path, root):
        """The config of the file PATH whose decoded text is ROOT (checked
        by load)."""
        self.path = path
        self.dir = os.path.realpath(os.path.dirname(path) or ".")
        self.name = root.get("name") or _default_name(path)
        self.state_dir = _clean(os.path.join(self.dir, root["state_dir"]))
        self.control = dict(root.get("control") or {})
        self.munge_socket = self.control.get("munge_socket")
        self.lease = root.get("lease_ms", 5000) / 1000
        self.start_timeout = float(root.get("start_timeout_s", 60))
        self.restart_backoff_max = root.get("restart_backoff_max_ms",
                                            30000) / 1000

    def __repr__(self):
        return f"<ftfarm config {self.path}: {self.name}, {self.state_dir}>"


# The keys read here: (path, type, required, check of the value or None).
def _positive_max(hi):
    return lambda v: None if 0 < v <= hi else \
        f"must be greater than 0 and at most {hi:g}"


def _between(lo, hi):
    return lambda v: None if lo <= v <= hi else \
        f"must be between {lo} and {hi}"


def _non_empty(v):
    return None if v else "must not be empty"


_KEYS = (
    (("name",), str, False, _non_empty),
    (("state_dir",), str, True, _non_empty),
    (("control",), dict, False, None),
    (("control", "munge_socket"), str, False, None),
    (("lease_ms",), int, False, _between(100, 3600000)),
    (("start_timeout_s",), float, False, _positive_max(3600)),
    (("restart_backoff_max_ms",), int, False, _between(10, 3600000)),
)

_TYPE_NAMES = {dict: "an object", list: "an array", str: "a string",
               int: "an integer", float: "a number", bool: "a boolean",
               type(None): "null"}


def load(path=None):
    """The Config of the file PATH (str or path-like), or of the one
    FTFARM_CONFIG names when PATH is None.  Raises Error (exit 2)."""
    if path is None:
        path = os.environ.get("FTFARM_CONFIG") or None
    if path is None:
        raise Error("no config: pass one (Client(config=...)) or set "
                    "FTFARM_CONFIG", 2)
    path = os.fsdecode(path)
    text = _read(path)
    root = _decode(path, text)
    _check(path, text, root)
    return Config(path, root)


def _read(path):
    """The text of PATH.  Raises Error."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise Error(f"{path}: cannot read: {e.strerror}", 2) from None
    try:
        return data.decode()
    except UnicodeDecodeError as e:
        line, col = _line_col(data, e.start)
        raise Error(f"{path}:{line}:{col}: invalid JSON: not UTF-8", 2) \
            from None


def _decode(path, text):
    """TEXT decoded, duplicate keys refused (as jansson does).  Raises
    Error with the line and column."""
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates)
    except _Duplicate as e:
        pos = _second_key(text, e.key)
        msg = f"duplicate object key \"{e.key}\""
    except json.JSONDecodeError as e:
        pos, msg = e.pos, e.msg
    line, col = _line_col(text.encode(), len(text[:pos].encode()))
    raise Error(f"{path}:{line}:{col}: invalid JSON: {msg}", 2)


class _Duplicate(ValueError):
    """A key twice in one object."""

    def __init__(self, key):
        super().__init__(key)
        self.key = key


def _second_key(text, key):
    """Where KEY is written a second time as a key in TEXT (the first time
    when it is not): the opening quote, 0 when not found."""
    found = [m.start() for m in
             re.finditer(re.escape(json.dumps(key)) + r"\s*:", text)]
    return found[1] if len(found) > 1 else (found or [0])[0]


def _no_duplicates(pairs):
    """object_pairs_hook: the dict of PAIRS, or _Duplicate."""
    d = dict(pairs)
    if len(d) != len(pairs):
        seen = set()
        for k, _ in pairs:
            if k in seen:
                raise _Duplicate(k)
            seen.add(k)
    return d


def _check(path, text, root):
    """Raise Error for the first key of _KEYS that ROOT holds wrong."""
    if type(root) is not dict:
        _fail(path, text, (), f"expected an object, got {_name(root)}")
    for keys, typ, required, valid in _KEYS:
        parent = root
        for k in keys[:-1]:
            parent = parent.get(k) or {}
        if keys[-1] not in parent:
            if required:
                _fail(path, text, keys[:-1],
                      f'missing required key "{keys[-1]}"')
            continue
        v = parent[keys[-1]]
        if not _is(v, typ):
            _fail(path, text, keys, f"expected {_TYPE_NAMES[typ]}, got "
                  f"{_name(v)}")
        why = valid(v) if valid else None
        if why:
            _fail(path, text, keys, why)


def _is(v, typ):
    """Is V of the JSON type TYP (float: any number)?"""
    if typ is float:
        return type(v) in (int, float)
    return type(v) is typ


def _name(v):
    """V's JSON type as jcheck names it ("an integer", "a string"...)."""
    return _TYPE_NAMES.get(type(v), "a value")


def _fail(path, text, keys, msg):
    """Raise Error "PATH:LINE:COL: KEY.PATH: MSG", at the key's place in
    TEXT (the root's for no keys)."""
    pos = _key_pos(text, keys)
    where = ".".join(keys)
    sep = ": " if where else ""
    if pos is None:
        raise Error(f"{path}: {where}{sep}{msg}", 2)
    line, col = _line_col(text.encode(), len(text[:pos].encode()))
    raise Error(f"{path}:{line}:{col}: {where}{sep}{msg}", 2)


def _key_pos(text, keys):
    """The index in TEXT (valid JSON) of the opening quote of the member
    KEYS (a path of object keys from the root), or of the root's first
    character for no keys; None when it is not there."""
    dec = json.JSONDecoder()
    pos = _skip_ws(text, 0)
    for depth, key in enumerate(keys):
        if pos >= len(text) or text[pos] != "{":
            return None
        pos = _skip_ws(text, pos + 1)
        found = None
        while pos < len(text) and text[pos] == '"':
            start = pos
            k, pos = json.decoder.scanstring(text, pos + 1)
            pos = _skip_ws(text, _skip_ws(text, pos) + 1)    # the colon
            if k == key:
                found = start
                break
            pos = _skip_ws(text, dec.raw_decode(text, pos)[1])
            if pos < len(text) and text[pos] == ",":
                pos = _skip_ws(text, pos + 1)
        if found is None:
            return None
        if depth == len(keys) - 1:
            return found
    return pos


def _skip_ws(text, pos):
    """The index of the first character at or after POS that is not JSON
    white space."""
    while pos < len(text) and text[pos] in " \t\n\r":
        pos += 1
    return pos


def _line_col(data, off):
    """Line and column (1-based, in bytes as the ftfarm command counts
    them) of byte OFF of DATA."""
    line = data.count(b"\n", 0, off) + 1
    return line, off - (data.rfind(b"\n", 0, off) + 1) + 1


def _default_name(path):
    """The file's base name less ".json" (config.c default_name)."""
    base = os.path.basename(path)
    return base[:-5] if len(base) > 5 and base.endswith(".json") else base


def _clean(path):
    """The absolute PATH without empty, "." or ".." parts, nor a trailing
    slash (config.c path_clean)."""
    out = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if out:
                out.pop()
            continue
        out.append(part)
    return "/" + "/".join(out)

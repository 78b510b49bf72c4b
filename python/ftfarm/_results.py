"""A batch's results file, <state_dir>/batches/<id>/results.jsonl, read as
the master's journal trusts it (master/journal.c, docs/on-disk.md).

Each line is one ended task, ``{"task":N,...,"status":"ok"|"failed",...,
"crc":"XXXXXXXX"}``: the CRC-32C of the line's bytes before ``,"crc"``.
A line is a result when it is whole (ends with a newline: the last line of
a running batch may be torn), its checksum matches, and it is the first
for its task; anything else is what a restarted master would cut out, and
is skipped.  A file without any checksum (an older ftfarm's) has its whole
lines taken as they are.
"""
import json

from ._crc32c import crc32c

_TAIL = b',"crc":"'
_TAIL_LEN = len(_TAIL) + 8 + 2      # ,"crc":"XXXXXXXX"}
_HEX = frozenset(b"0123456789abcdef")


def path(state_dir, batch):
    """Where batch BATCH's results are."""
    return f"{state_dir}/batches/{batch}/results.jsonl"


def read(file):
    """The results in FILE: an iterator of dicts, one per ended task in the
    file's order, each without "crc".  Raises OSError when FILE cannot be
    opened (at once, not at the first result)."""
    return _results(open(file, "rb"))


def _results(f):
    """The results of the open file F (closed at the end)."""
    with f:
        checked = _checksummed(f)
        f.seek(0)
        seen = bytearray()
        for line in f:
            r = _result(line, checked)
            if r is not None and _first(seen, r["task"]):
                yield r


def _checksummed(f):
    """Does a line of F end with a checksum (then every line must)?"""
    return any(written_crc(line.rstrip(b"\n")) is not None for line in f
               if line.endswith(b"\n"))


def written_crc(line):
    """The checksum at the end of LINE (bytes, no newline), or None."""
    if len(line) < _TAIL_LEN + 2 or not line.endswith(b'"}'):
        return None
    tail = line[-_TAIL_LEN:]
    digits = tail[len(_TAIL):len(_TAIL) + 8]
    if not tail.startswith(_TAIL) or not _HEX.issuperset(digits):
        return None
    return int(digits, 16)


def check_line(line):
    """Why the journal would not trust LINE (bytes, no newline), or None
    (journal_check_line, for a file with checksums)."""
    crc = written_crc(line)
    if crc is None:
        return "no checksum"
    if crc32c(memoryview(line)[:len(line) - _TAIL_LEN]) != crc:
        return "checksum mismatch"
    return None


def _result(line, checked):
    """The result dict of LINE (bytes as read), or None when it is torn,
    damaged, or no result."""
    if not line.endswith(b"\n"):
        return None             # torn: its task has not ended for good
    line = line[:-1]
    if checked and check_line(line) is not None:
        return None
    try:
        r = json.loads(line)
    except ValueError:
        return None
    if type(r) is not dict or type(r.get("task")) is not int or \
            r["task"] < 0 or r.get("status") not in ("ok", "failed"):
        return None
    r.pop("crc", None)
    return r


def _first(seen, task):
    """Is this the first result of TASK?  SEEN: a bit per task index."""
    byte, bit = task >> 3, 1 << (task & 7)
    if byte >= len(seen):
        seen.extend(bytes(max(byte + 1 - len(seen), len(seen))))
    if seen[byte] & bit:
        return False
    seen[byte] |= bit
    return True

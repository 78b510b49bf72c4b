"""Is a master coming back?  The lease of the state dir (common/lease.h)
read as the ftfarm command reads it, and its rule for waiting across a
master's restart (cli/commands.c reconnect_wait).

<state_dir>/lease is one record of 256 bytes: "ftfarm-lease 1 epoch=E
seq=S state=free|active|stopping sup=HOST/PID/START master=HOST/PID/START",
padded with spaces, then "crc=XXXXXXXX\\n" (the CRC-32C of what precedes).
While its state is active and its supervisor lives (a process of this host
with the same start time, or, on another host, a record whose seq still
moves within lease_ms), or a standby waits to take over, a client whose
master went away waits for the next one, calling again with a growing
pause, up to a bound.
"""
import os
import re
import socket
import time

from ._crc32c import crc32c

REC_LEN = 256
BODY_LEN = REC_LEN - 13     # then "crc=XXXXXXXX\n"
_READ_TRIES = 5             # a read racing a write may see it torn
_RETRY_MAX = 1.0            # longest pause between two calls
_BODY = re.compile(r"ftfarm-lease 1 epoch=(\d+) seq=(\d+) state=(\S+) "
                   r"sup=(\S+) master=(\S+)")
_ID = re.compile(r"([^/]{1,63})/(-?\d+)/(\d+)$")
_STATES = ("free", "active", "stopping")


class Holder:
    """A process named in the lease: host ("" for none), pid, start time
    (/proc/PID/stat's field 22)."""

    __slots__ = ("host", "pid", "start")

    def __init__(self, host, pid, start):
        self.host, self.pid, self.start = host, pid, start

    def local(self):
        """Is it a process of this host?"""
        return self.pid > 0 and self.host == _hostname()

    def alive(self):
        """Is it a process of this host that still runs (same start)?"""
        return self.local() and _proc_is(self.pid, self.start)


class Record:
    """The lease's record: epoch, seq, state, supervisor, master."""

    __slots__ = ("epoch", "seq", "state", "sup", "master")

    def __init__(self, epoch, seq, state, sup, master):
        self.epoch, self.seq, self.state = epoch, seq, state
        self.sup, self.master = sup, master


def read(state_dir):
    """The record of STATE_DIR's lease, or None when there is none, it
    cannot be read, or it stays damaged (torn) for five tries."""
    try:
        with open(os.path.join(state_dir, "lease"), "rb") as f:
            for _ in range(_READ_TRIES):
                raw = os.pread(f.fileno(), REC_LEN, 0)
                if not raw:
                    return None
                rec = parse(raw)
                if rec is not None:
                    return rec
                time.sleep(0.001)
    except OSError:
        pass
    return None


def parse(raw):
    """The Record in RAW (its 256 bytes), or None when it is damaged."""
    if len(raw) != REC_LEN or raw[-1:] != b"\n" or \
            raw[BODY_LEN:BODY_LEN + 4] != b"crc=":
        return None
    try:
        crc = int(raw[BODY_LEN + 4:REC_LEN - 1], 16)
    except ValueError:
        return None
    m = _BODY.match(raw[:BODY_LEN].decode(errors="replace"))
    if crc != crc32c(raw[:BODY_LEN]) or m is None or \
            m.group(3) not in _STATES:
        return None
    sup, master = _holder(m.group(4)), _holder(m.group(5))
    if sup is None or master is None:
        return None
    return Record(int(m.group(1)), int(m.group(2)), m.group(3), sup, master)


def _holder(text):
    """HOST/PID/START as a Holder ("-": no host), or None."""
    m = _ID.match(text)
    if m is None:
        return None
    host = "" if m.group(1) == "-" else m.group(1)
    return Holder(host, int(m.group(2)), int(m.group(3)))


def _hostname():
    """This host's name as the lease writes it (63 bytes at most)."""
    return socket.gethostname()[:63] or "localhost"


def _proc_is(pid, start):
    """Is PID a live process (not a zombie) started at START?"""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return False
    return start != 0 and len(fields) > 19 and int(fields[19]) == start \
        and fields[0] not in (b"Z", b"X")


def standby_waiting(state_dir):
    """Does a standby of the cluster wait to take over: a standby.HOST.pid
    file in STATE_DIR, whose process is alive when HOST is this host (one
    of another host is taken at its word)?"""
    mine = f"standby.{_hostname()}.pid"
    try:
        names = os.listdir(state_dir)
    except OSError:
        return False
    for name in names:
        if not name.startswith("standby.") or len(name) < 12 or \
                not name.endswith(".pid"):
            continue
        if name != mine or _pid_file_alive(os.path.join(state_dir, name)):
            return True
    return False


def _pid_file_alive(path):
    """Does the pid file PATH ("PID START") name a live process?"""
    try:
        with open(path) as f:
            pid, start = (int(x) for x in f.read().split()[:2])
    except (OSError, ValueError):
        return False
    return pid > 0 and _proc_is(pid, start)


class RestartWait:
    """The wait of one client across its master's restarts.

    ``pause()`` after the master went away: True after a pause when it is
    worth calling again (a supervisor holds the lease, or a standby may
    take it over, within the bound), False to give up.  ``ok()`` when the
    master answered: a later outage has a bound of its own.
    """

    def __init__(self, cfg, bound=None):
        """For the cluster of CFG (a _config.Config); BOUND: the seconds an
        outage may last (None: lease + start timeout + the longest restart
        backoff, as the ftfarm command waits)."""
        self.cfg = cfg
        self.bound = bound if bound is not None else \
            cfg.lease + cfg.start_timeout + cfg.restart_backoff_max
        self.until = None           # the end of this outage's wait
        self.pause_s = 0.05
        self.orphan_since = None    # no supervisor nor standby seen since
        self._seen = None           # (epoch, seq) last seen
        self._moved = None          # when it last changed (monotonic)

    def ok(self):
        self.until = None

    def pause(self, deadline=None):
        """Wait before calling again (see the class); never past DEADLINE
        (monotonic, None: none), which gives up once reached."""
        now = time.monotonic()
        rec = read(self.cfg.state_dir)
        if rec is None or rec.state in ("free", "stopping"):
            return False
        if self._alive(rec, now) or standby_waiting(self.cfg.state_dir):
            self.orphan_since = None
        elif self.orphan_since is None:
            self.orphan_since = now
        if self.orphan_since is not None and \
                now - self.orphan_since >= 2 * self.cfg.lease:
            return False
        if self.until is None:
            self.until = now + self.bound
            self.pause_s = 0.05
        end = self.until if deadline is None else min(self.until, deadline)
        if now >= end:
            return False
        time.sleep(min(self.pause_s, end - now))
        self.pause_s = min(self.pause_s * 2, _RETRY_MAX)
        return True

    def _alive(self, rec, now):
        """Does a supervisor hold REC (read at NOW): active, and alive on
        this host, or elsewhere with a record that moved within the lease
        (supervise.c sup_watch_alive)?"""
        if self._moved is None or self._seen != (rec.epoch, rec.seq):
            self._seen = (rec.epoch, rec.seq)
            self._moved = now
        if rec.state != "active" or rec.sup.pid <= 0:
            return False
        if rec.sup.local():
            return rec.sup.alive()
        return now - self._moved < self.cfg.lease

"""A connection to the master: the control protocol of common/ctl.h.

The client writes one JSON object per line, ``{"v": 1, "cmd": NAME,
...}``, optionally followed by a body (``"bytes": N``, then N raw bytes:
a batch file); the master answers each request with one line, in order,
``{"ok": true, ...}`` or ``{"ok": false, "error": ..., "exit": N}``.  A
subscribed connection also carries pushes, lines whose first key is
``"push"``: they are handed to ``on_push`` (or kept in ``pushes``) while
answers are read.

The master is reached at ``<state_dir>/control.sock``; when that socket
cannot be connected to (another host sees the file on a shared file
system), over TCP at the address the master published in
``<state_dir>/control.tcp``, after the MUNGE greeting of common/rauth.h.

Reads are buffered (_lines.LineBuffer): the lines of one read are taken
without another system call.  Writes use MSG_NOSIGNAL: a closed
connection raises, it never sends SIGPIPE.  Sends may come from several
threads (they are serialised); answers come back in the order requests
were sent, read by one thread at a time.
"""
import collections
import errno
import json
import os
import select
import socket
import threading
import time

from ._errors import Error
from ._lines import LineBuffer, LineTooLong
from . import _munge

VERSION = 1                 # FT_CTL_VERSION
RAUTH_VERSION = 1
RAUTH_MAX_LINE = 4096       # a greeting line (rauth.h)
RAUTH_TIMEOUT = 10.0        # seconds for each greeting line
DIAL_TIMEOUT = 5.0          # seconds to connect over TCP (remote.c)
_SUN_PATH_MAX = 108         # sizeof(sockaddr_un.sun_path)
# connect() errors after which the master may be on another host: its
# socket file is there but cannot be connected to (ctl.c maybe_elsewhere).
_ELSEWHERE = (errno.ECONNREFUSED, errno.EACCES, errno.EPERM, errno.ENOTSOCK)


class Broken(Error):
    """The connection is unusable: the master could not be reached, closed
    it, or did not answer in time.  (A refusal is a plain Error.)"""


class NoAnswer(Broken, TimeoutError):
    """No whole line came from the master within the time asked."""


def encode(req):
    """REQ (a dict) as a request line of this protocol (bytes, newline
    included; "v" set)."""
    return json.dumps({**req, "v": VERSION},
                      separators=(",", ":")).encode() + b"\n"


def check(ans):
    """ANS (an answer) if it says ok; else raises Error with the master's
    message and its exit status (1 when it sent none)."""
    if ans.get("ok") is True:
        return ans
    status = ans.get("exit")
    raise Error(ans.get("error") or "the master refused the request",
                status if type(status) is int else 1)


def connect(state_dir, munge_socket=None):
    """A Connection to the master of STATE_DIR: its unix socket, else over
    TCP (munged at MUNGE_SOCKET, or libmunge's default).  Raises Broken
    with why, as ctl_connect says it."""
    path = f"{state_dir}/control.sock"
    if len(os.fsencode(path)) >= _SUN_PATH_MAX:
        raise Broken(f"{path}: path too long for a socket")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except OSError as e:
        sock.close()
        why = f"no master is running for {state_dir} ({e.strerror})"
        if e.errno in _ELSEWHERE:
            return _over_tcp(state_dir, munge_socket, why)
        raise Broken(why) from None
    return Connection(sock, path)


class Connection:
    """One connection to the master.

    ``call(req)`` sends a request and returns its answer; ``send`` and
    ``answer`` do the two halves, so that requests may be pipelined (the
    answers come in order).  ``on_push``: a function called with each
    push read meanwhile; without it pushes go to the deque ``pushes``.
    """

    def __init__(self, sock, where):
        """Take over SOCK (connected), reached at WHERE (for messages)."""
        sock.setblocking(False)
        self._sock = sock
        self.where = where
        self._lines = LineBuffer()
        self._pin = select.poll()
        self._pin.register(sock, select.POLLIN)
        self._pout = select.poll()
        self._pout.register(sock, select.POLLOUT)
        self._send_lock = threading.Lock()
        self._read_lock = threading.Lock()
        self.on_push = None
        self.pushes = collections.deque()

    # ---- the connection ----

    def fileno(self):
        """The socket's descriptor (-1 once closed): for select()."""
        return self._sock.fileno()

    def close(self):
        """Close the connection (again: nothing)."""
        self._sock.close()

    def shutdown(self):
        """Wake a thread blocked reading this connection: it finds it
        closed (Broken).  Another thread's way to end a reader."""
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def closed(self):
        return self._sock.fileno() < 0

    def buffered(self):
        """Does a whole line wait in the buffer (read() will not block)?"""
        with self._read_lock:
            return self._lines.has_line()

    def stale(self):
        """Has the master closed this connection (or reset it), as far as
        can be told without waiting?  What it sent before is kept."""
        if self.closed:
            return True
        try:
            with self._read_lock:
                while self._pin.poll(0):
                    if self._lines.fill(self._sock.recv_into) == 0:
                        return True
        except (BlockingIOError, InterruptedError):
            return False
        except OSError:
            return True
        return False

    # ---- sending ----

    def send(self, req, body=None, timeout=None):
        """Send REQ (a dict; "v" is added) and, when given, BODY (bytes-like)
        right after its line, within TIMEOUT seconds (None: no limit).
        Raises Broken."""
        parts = [encode(req)]
        if body is not None and len(body):
            parts.append(body)
        self._send(parts, timeout)

    def send_many(self, reqs, timeout=None):
        """Send the requests REQS (dicts) in one write.  Raises Broken."""
        self._send([b"".join(map(encode, reqs))], timeout)

    def _send(self, parts, timeout):
        """Write PARTS (bytes-like) whole within TIMEOUT.  Raises Broken."""
        deadline = _deadline(timeout)
        views = [memoryview(p).cast("B") for p in parts]
        with self._send_lock:
            while views:
                try:
                    n = self._sock.sendmsg(views, (), socket.MSG_NOSIGNAL)
                except (BlockingIOError, InterruptedError):
                    self._wait(self._pout, deadline, "take the request",
                               timeout)
                    continue
                except OSError as e:
                    raise Broken("cannot send to the master: " +
                                 (e.strerror or str(e))) from None
                _advance(views, n)

    # ---- reading ----

    def read(self, timeout=None):
        """The next line from the master, an answer or a push, as a dict,
        within TIMEOUT seconds (None: no limit).  Raises NoAnswer when the
        time passed, Broken when the connection closed or the line is no
        JSON object."""
        return self._read(_deadline(timeout), timeout)

    def answer(self, timeout=None):
        """The next answer (a dict, "ok" true or false), pushes read on the
        way handed to on_push or kept in pushes.  Raises NoAnswer, Broken,
        or Error when the master speaks another protocol version."""
        deadline = _deadline(timeout)
        msg = self._read(deadline, timeout)
        while "push" in msg:
            if self.on_push is not None:
                self.on_push(msg)
            else:
                self.pushes.append(msg)
            msg = self._read(deadline, timeout)
        if msg.get("v") != VERSION or type(msg.get("v")) is not int:
            raise Error("incompatible ftfarm and ftfarm-master versions: "
                        "the master answered in another control protocol "
                        f"than {VERSION}")
        return msg

    def _read(self, deadline, timeout):
        """read() by DEADLINE (monotonic; None: none), TIMEOUT the seconds
        it stands for (for the message)."""
        with self._read_lock:
            line = self._lines.next_line()
            while line is None:
                self._receive(deadline, timeout)
                line = self._lines.next_line()
        try:
            msg = json.loads(line)
        except ValueError:
            msg = None
        if type(msg) is not dict:
            raise Broken("the master sent a malformed line")
        return msg

    def call(self, req, body=None, timeout=None, checked=True):
        """Send REQ (and BODY) and return its answer, waiting TIMEOUT
        seconds (None: no limit) for it.  CHECKED: an answer that is not
        ok raises Error (the master's message and exit status).  When the
        master closed the connection while the request was being sent, an
        answer it sent first (why it refused) is still read."""
        try:
            self.send(req, body, timeout)
        except Broken as e:
            ans = self._answer_after(e)
        else:
            ans = self.answer(timeout)
        return check(ans) if checked else ans

    def _answer_after(self, broken):
        """The answer the master sent before closing on a request being
        sent, or raise BROKEN."""
        try:
            return self.answer(1.0)
        except Broken:
            raise broken from None

    def _receive(self, deadline, timeout):
        """Read once into the buffer, waiting until DEADLINE (monotonic,
        None: forever; TIMEOUT: the seconds it stands for) for bytes.
        Raises NoAnswer, Broken."""
        while True:
            try:
                n = self._lines.fill(self._sock.recv_into)
            except (BlockingIOError, InterruptedError):
                self._wait(self._pin, deadline, "answer", timeout)
                continue
            except LineTooLong:
                raise Broken("the master's line is too long") from None
            except OSError as e:
                if e.errno in (errno.ECONNRESET, errno.EPIPE):
                    n = 0
                else:
                    raise Broken("cannot read from the master: " +
                                 (e.strerror or str(e))) from None
            if n == 0:
                raise Broken("the master closed the connection")
            return

    def _wait(self, poller, deadline, what, timeout):
        """Wait on POLLER until the socket is ready or DEADLINE passes
        (raises NoAnswer: "the master did not WHAT in TIMEOUT s")."""
        while True:
            if deadline is None:
                ms = None
            else:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise NoAnswer(f"the master did not {what} in "
                                   f"{timeout:.0f} s")
                ms = max(1, int(left * 1000 + 0.999))
            if poller.poll(ms):
                return


def _deadline(timeout):
    """The monotonic time TIMEOUT seconds from now (None: None)."""
    return None if timeout is None else time.monotonic() + timeout


def _advance(views, n):
    """Drop the first N bytes of the list of memoryviews VIEWS."""
    while n:
        if n >= len(views[0]):
            n -= len(views[0])
            del views[0]
        else:
            views[0] = views[0][n:]
            n = 0
    while views and not len(views[0]):
        del views[0]


# ---- over TCP (cli/remote.c) ----

def _published(state_dir, why):
    """(host, port) the master published in <state_dir>/control.tcp.  No
    file: raises Broken(WHY) (the socket's error stands)."""
    path = f"{state_dir}/control.tcp"
    try:
        with open(path, "rb") as f:
            text = f.read()
    except FileNotFoundError:
        raise Broken(why) from None
    except OSError as e:
        raise Broken(f"{path}: {e.strerror}") from None
    try:
        d = json.loads(text)
    except ValueError as e:
        raise Broken(f"{path}: {e}") from None
    bad = _fields(d, {"v": int, "host": str, "port": int},
                  ("v", "host", "port"))
    if bad:
        raise Broken(f"{path}: {bad}")
    return d["host"], d["port"]


def _fields(obj, types, required):
    """Why OBJ does not have exactly keys of TYPES (those of REQUIRED
    present), as jcheck says it; None when it does."""
    if type(obj) is not dict:
        return "expected an object"
    for k, v in obj.items():
        if k not in types:
            return f"{k}: unknown key"
        if type(v) is not types[k]:
            return f"{k}: expected {_TYPE_NAMES[types[k]]}"
    for k in required:
        if k not in obj:
            return f'missing required key "{k}"'
    return None


_TYPE_NAMES = {int: "an integer", str: "a string", bool: "a boolean"}


def _dial(host, port):
    """A socket connected to HOST:PORT within DIAL_TIMEOUT.  Raises
    Broken."""
    try:
        ai = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except socket.gaierror as e:
        raise Broken(f"{host}: {e.strerror}") from None
    sock = socket.socket(ai[0], socket.SOCK_STREAM)
    sock.settimeout(DIAL_TIMEOUT)
    try:
        sock.connect(ai[4])
    except OSError as e:
        sock.close()
        why = "Connection timed out" if isinstance(e, TimeoutError) and \
            e.errno is None else e.strerror or str(e)
        raise Broken(f"no master answers at {host}:{port} ({why})") from None
    return sock


def _over_tcp(state_dir, munge_socket, why):
    """A Connection to the master of STATE_DIR over TCP, greeted and
    authenticated.  Raises Broken: WHY (the socket's error) when the
    master publishes no address, else why TCP failed."""
    host, port = _published(state_dir, why)
    conn = Connection(_dial(host, port), f"{host}:{port}")
    try:
        _greet(conn, munge_socket)
    except Error as e:
        conn.close()
        raise Broken(f"{host}:{port}: {e}") from None
    return conn


def _greet(conn, munge_socket):
    """The greeting of rauth.h on CONN: the master's nonce, our
    credential, its verdict.  Raises Error with why it failed."""
    conn._lines.max_line = RAUTH_MAX_LINE
    hello = _greeting_line(conn, "the master's greeting")
    if type(hello) is dict and hello.get("ok") is False:
        raise Error("refused: " + str(hello.get("error")))
    bad = _fields(hello, {"v": int, "auth": str, "nonce": str},
                  ("v", "auth", "nonce"))
    _check_greeting(hello, bad, "the master's greeting")
    if hello["auth"] != "munge":
        raise Error(f'the master asks for authentication by '
                    f'"{hello["auth"]}", not munge')
    nonce = hello["nonce"]
    if len(nonce) != 32 or nonce.strip("0123456789abcdef"):
        raise Error("the master's greeting: a malformed nonce")
    cred = _munge.credential(nonce, munge_socket)
    reply = json.dumps({"v": RAUTH_VERSION, "munge": cred}) + "\n"
    try:
        conn._send([reply.encode()], RAUTH_TIMEOUT)
    except Broken:
        raise Error("the master closed the connection") from None
    verdict = _greeting_line(conn, "the master's verdict")
    bad = _fields(verdict, {"v": int, "ok": bool, "uid": int, "gid": int,
                            "error": str}, ("v", "ok"))
    _check_greeting(verdict, bad, "the master's verdict")
    if not verdict["ok"]:
        raise Error("refused: " + verdict.get("error", "no reason given"))
    conn._lines.max_line = None


def _greeting_line(conn, what):
    """The next greeting line on CONN as a dict (JSON of any kind).
    Raises Error."""
    try:
        with conn._read_lock:
            deadline = time.monotonic() + RAUTH_TIMEOUT
            line = conn._lines.next_line()
            while line is None:
                conn._receive(deadline, RAUTH_TIMEOUT)
                line = conn._lines.next_line()
    except NoAnswer:
        raise Error(f"the master did not answer in {RAUTH_TIMEOUT:.0f} s") \
            from None
    except LineTooLong:
        raise Error("the master's line is too long") from None
    try:
        return json.loads(line)
    except ValueError as e:
        raise Error(f"{what}: not JSON: {e}") from None


def _check_greeting(msg, bad, what):
    """Raise Error when MSG is not a greeting line of our version (BAD:
    why its keys are wrong, or None)."""
    if bad:
        raise Error(f"{what}: {bad}")
    if msg["v"] != RAUTH_VERSION:
        raise Error(f"{what}: protocol version {msg['v']}, this end speaks "
                    f"{RAUTH_VERSION}")

"""Helpers for control over TCP (MUNGE-authenticated): a munged of the
test's own, a client that sees the master as another host does, and a raw
TCP client.

Another host sees the state dir on a shared file system but cannot
connect() to the master's unix socket.  `masked(argv, state_dir)` gives a
command that runs ARGV in a private mount namespace with every socket file
of the state dir covered by /dev/null (a bind mount): connect() then fails
(ECONNREFUSED) as it would from another host, and the CLI goes over TCP.
Optionally as another user (setpriv after the mount: unshare needs root),
and with a munged of the client's own host: `munge=(path, own)` covers
munged's socket PATH (the config's control.munge_socket) with OWN, the
socket of another munged of the same key, as a login node has its own.
"""
import json
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

MASK = ('mount --make-rprivate / && '
        'for s in "$0"/*.sock; do [ -S "$s" ] && mount --bind /dev/null "$s"; '
        'done; exec "$@"')
USERS = {"nobody": ("nobody", "nogroup")}


def masked(argv, state_dir, user=None, munge=None):
    """ARGV run with STATE_DIR's sockets masked (as USER if given; with
    munged's socket MUNGE[0] covered by MUNGE[1] if given)."""
    pre = []
    mask = MASK
    if user:
        u, g = USERS[user]
        pre = ["setpriv", f"--reuid={u}", f"--regid={g}", "--clear-groups"]
    if munge:
        mask = MASK.replace(
            "exec ", f"mount --bind '{munge[1]}' '{munge[0]}' && exec ", 1)
    return ["unshare", "-m", "sh", "-c", mask, str(state_dir), *pre,
            *map(str, argv)]


def run_masked(argv, state_dir, user=None, timeout=60, env=None, munge=None,
               **kw):
    """CompletedProcess (text) of masked(...)."""
    return subprocess.run(masked(argv, state_dir, user, munge),
                          capture_output=True, text=True, timeout=timeout,
                          env=env, stdin=subprocess.DEVNULL, **kw)


class Munged:
    """A munged of the test's own: a fresh key (or a copy of KEY, the
    key file of another: as two hosts of one cluster), its socket in a
    directory every user may traverse; stop() kills it by PID."""

    def __init__(self, key=None):
        self.dir = Path(tempfile.mkdtemp(prefix="ftfarm-munge-"))
        self.dir.chmod(0o755)
        self.socket = self.dir / "munge.sock"
        self.key = self.dir / "munge.key"
        self.shared_key = key
        self.proc = None

    def start(self):
        key = self.key
        if self.shared_key:
            shutil.copy(self.shared_key, key)
            key.chmod(0o600)
        else:
            subprocess.run(["mungekey", "-c", "-k", str(key)], check=True,
                           capture_output=True, timeout=30)
        self.proc = subprocess.Popen(
            ["munged", "-F", f"--socket={self.socket}", f"--key-file={key}",
             f"--pid-file={self.dir}/munged.pid",
             f"--log-file={self.dir}/munged.log",
             f"--seed-file={self.dir}/munged.seed"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, start_new_session=True)
        end = time.monotonic() + 10
        while not self.socket.exists():
            if self.proc.poll() is not None or time.monotonic() > end:
                raise RuntimeError("munged did not start")
            time.sleep(0.01)
        return self

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        subprocess.run(["rm", "-rf", str(self.dir)], timeout=30)


def credential(munge_socket, payload):
    """A MUNGE credential of ours whose payload is PAYLOAD."""
    r = subprocess.run(["munge", "-S", str(munge_socket), "-s", payload],
                       capture_output=True, text=True, timeout=30,
                       check=True)
    return r.stdout.strip()


def published(state_dir):
    """(host, port) the master published in <state_dir>/control.tcp."""
    d = json.loads((Path(state_dir) / "control.tcp").read_text())
    return d["host"], d["port"]


class Raw:
    """A bare TCP connection to the master: greeting first."""

    def __init__(self, state_dir, timeout=15):
        self.sock = socket.create_connection(published(state_dir),
                                             timeout=timeout)
        self.f = self.sock.makefile("rwb")
        self.hello = json.loads(self.f.readline())

    def send(self, obj_or_text):
        data = obj_or_text if isinstance(obj_or_text, bytes) else \
            (json.dumps(obj_or_text).encode() + b"\n")
        self.f.write(data)
        self.f.flush()

    def lines(self):
        """Every line the master sends until it closes."""
        out = []
        for line in self.f:
            out.append(line.decode(errors="replace"))
        return out

    def close(self):
        self.f.close()
        self.sock.close()


def open_bins(ftfarm, dest):
    """Copies of ftfarm (the program at FTFARM) and of the ftfarm-agent
    beside it in DEST, a directory every user may traverse (pytest's own
    are 0700): for clients and agents run as another user.  The copy of
    ftfarm's path."""
    dest = Path(dest)
    dest.mkdir(mode=0o755, exist_ok=True)
    dest.chmod(0o755)
    for prog in ("ftfarm", "ftfarm-agent"):
        shutil.copy(Path(ftfarm).parent / prog, dest / prog)
        (dest / prog).chmod(0o755)
    return dest / "ftfarm"

"""A headless Chromium driven through chromedriver's W3C WebDriver API.

Only the standard library (urllib): the tests depend on Debian's chromium
and chromium-driver packages and nothing else.  The browser runs with the
flags that keep it off the network (the machine has none) and in a fresh
profile; quit() ends the session and signals, by PID, chromedriver and
every process it started.
"""
import base64
import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request

from conftest import children_map

CHROMEDRIVER = "/usr/bin/chromedriver"
CHROMIUM = "/usr/bin/chromium"
CHROME_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
    "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync",
    "--disable-dev-shm-usage",
]


def available():
    return os.path.exists(CHROMEDRIVER) and os.path.exists(CHROMIUM)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def descendants(pid):
    """PIDs of every live descendant of PID (from /proc)."""
    children = children_map()
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


class Chrome:
    def __init__(self, profile_dir, width=1366, height=768, timeout=90):
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = open(os.path.join(profile_dir, "chromedriver.log"), "w")
        self.proc = subprocess.Popen(
            [CHROMEDRIVER, f"--port={self.port}"], stdout=self.log,
            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True)
        self.session = None
        self.timeout = timeout
        end = time.monotonic() + 30
        while not self._ready():
            if time.monotonic() > end or self.proc.poll() is not None:
                self.quit()
                raise RuntimeError("chromedriver did not start")
            time.sleep(0.1)
        caps = {"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": CHROMIUM,
                "args": CHROME_ARGS + [
                    f"--user-data-dir={os.path.join(profile_dir, 'profile')}",
                    f"--window-size={width},{height}"],
            }}}}
        try:
            self.session = self._call("POST", "/session", caps)["sessionId"]
        except Exception:
            self.quit()
            raise

    def _ready(self):
        try:
            with urllib.request.urlopen(self.base + "/status", timeout=2) as r:
                return json.load(r)["value"].get("ready", False)
        except (OSError, ValueError, KeyError):
            return False

    def _call(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base + path, data=data,
                                     method=method)
        req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as r:
                return json.load(r)["value"]
        except urllib.error.HTTPError as e:
            raise RuntimeError(f"webdriver {method} {path}: "
                               f"{e.read()[:500]!r}") from None

    def get(self, url):
        self._call("POST", f"/session/{self.session}/url", {"url": url})

    def execute(self, script, *args):
        return self._call("POST", f"/session/{self.session}/execute/sync",
                          {"script": script, "args": list(args)})

    def screenshot(self, path):
        png = base64.b64decode(
            self._call("GET", f"/session/{self.session}/screenshot"))
        with open(path, "wb") as f:
            f.write(png)
        return png

    def quit(self):
        if self.session:
            try:
                self._call("DELETE", f"/session/{self.session}")
            except Exception:
                pass
            self.session = None
        victims = descendants(self.proc.pid) + [self.proc.pid]
        for p in victims:
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            pass
        self.log.close()

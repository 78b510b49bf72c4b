"""Simulated BMCs for integration tests (scripts/bmc-sim).

    from bmc import bmc_sim   # the fixture

    def test_x(bmc_sim, tmp_path):
        sim = bmc_sim(config_path)            # adds bmcs, starts them
        r = sim.ipmitool("node1", "chassis", "power", "cycle")

bmc_sim(CONFIG) rewrites the config file CONFIG: each node and each host
of join.hosts (or each of `nodes=`) gets a "bmc" on 127.0.0.1 with a FREE UDP port chosen for this
run (so that runs can go side by side) and a "ready_command" asking the
simulator whether it has booted; then `bmc-sim start` runs.  When the test
ends, pass or fail, every simulator made is stopped and the test fails if
anything of it is left: an ipmi_sim, a guard, a hook, a bound port.
"""
import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BMC_SIM = ROOT / "scripts" / "bmc-sim"
IPMITOOL = "ipmitool"
PORT_TAKEN = 3              # bmc-sim's exit status when a port is taken
PASSWORD = "sim-pass-1"


def free_udp_ports(n):
    """N distinct UDP ports free on 127.0.0.1 right now."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def udp_port_bound(port):
    """Is any UDP socket bound to PORT?"""
    for table in ("/proc/net/udp", "/proc/net/udp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                local = line.split()[1]
                if int(local.rsplit(":", 1)[1], 16) == port:
                    return True
    return False


def _proc_state(pid):
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            st = f.read()
        return st[st.rfind(b")") + 2:][:1].decode()
    except OSError:
        return None


def _alive(pid):
    return _proc_state(pid) not in (None, "Z", "X")


def _cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


class BmcSim:
    """The simulated BMCs of one config."""

    def __init__(self, config, nodes=None, boot_delay=None):
        self.config = Path(config)
        cfg = json.loads(self.config.read_text())
        self.state_dir = (self.config.parent / cfg["state_dir"]).resolve()
        self.sim_dir = self.state_dir / "bmc-sim"
        self.password_file = self.config.parent / "bmc-password"
        self.password_file.write_text(PASSWORD + "\n")
        self.nodes = nodes or [n["name"] for n in cfg["nodes"]] + \
            list((cfg.get("join") or {}).get("hosts", {}))
        self.env = dict(os.environ)
        self.env.pop("FTFARM_CONFIG", None)
        if boot_delay is not None:
            self.env["BMC_SIM_BOOT_DELAY"] = str(boot_delay)
        self.ports = {}
        self.started = False

    # -- config --

    def _write_ports(self):
        """New free ports into the config, one per node of ours."""
        cfg = json.loads(self.config.read_text())
        ports = free_udp_ports(len(self.nodes))
        self.ports = dict(zip(self.nodes, ports))
        hosts = (cfg.get("join") or {}).get("hosts", {})
        places = [(n["name"], n) for n in cfg["nodes"]] + list(hosts.items())
        for name, n in places:
            if name not in self.ports:
                continue
            n["bmc"] = {"host": "127.0.0.1", "port": self.ports[name],
                        "user": "admin",
                        "password_file": self.password_file.name,
                        "interface": "lanplus"}
            n["ready_command"] = [str(BMC_SIM), "ready", "-c",
                                  str(self.config), name]
        self.config.write_text(json.dumps(cfg, indent=2) + "\n")

    # -- bmc-sim --

    def run(self, *args, timeout=30):
        """bmc-sim CMD -c CONFIG ARGS...: the CompletedProcess (text)."""
        cmd, rest = args[0], args[1:]
        return subprocess.run([str(BMC_SIM), cmd, "-c", str(self.config),
                               *map(str, rest)], capture_output=True,
                              text=True, env=self.env, timeout=timeout,
                              stdin=subprocess.DEVNULL)

    def start(self, tries=3):
        """Start the BMCs on free ports, choosing new ones when a port was
        taken meanwhile by someone else."""
        for _ in range(tries):
            self._write_ports()
            r = self.run("start")
            if r.returncode == 0:
                self.started = True
                return r
            if r.returncode != PORT_TAKEN:
                break
        raise AssertionError(f"bmc-sim start failed ({r.returncode}):\n"
                             f"{r.stdout}{r.stderr}")

    def stop(self):
        return self.run("stop")

    def status(self):
        """{node: status dict} from `bmc-sim status --json`."""
        r = self.run("status", "--json")
        return {s["node"]: s for s in json.loads(r.stdout)}

    def ready(self, node):
        return self.run("ready", node).returncode

    def fault(self, node, kind):
        r = self.run("fault", node, kind)
        assert r.returncode == 0, f"bmc-sim fault {node} {kind}: {r.stderr}"

    def boot_delay(self, node, seconds):
        r = self.run("boot-delay", node, seconds)
        assert r.returncode == 0, r.stderr

    # -- ipmitool --

    def ipmitool_argv(self, node, *args, password_file=None, cipher="3",
                      interface="lanplus", retries=("1", "1")):
        argv = [IPMITOOL, "-I", interface]
        if interface == "lanplus" and cipher is not None:
            argv += ["-C", str(cipher)]
        if retries:
            argv += ["-N", str(retries[0]), "-R", str(retries[1])]
        return argv + ["-H", "127.0.0.1", "-p", str(self.ports[node]),
                       "-U", "admin", "-f",
                       str(password_file or self.password_file), *args]

    def ipmitool(self, node, *args, timeout=60, **kw):
        """Run ipmitool against NODE's BMC: CompletedProcess (text) with
        .seconds, the time it took."""
        t0 = time.monotonic()
        r = subprocess.run(self.ipmitool_argv(node, *args, **kw),
                           capture_output=True, text=True, timeout=timeout,
                           stdin=subprocess.DEVNULL)
        r.seconds = time.monotonic() - t0
        return r

    def power(self, node, tries=3):
        """'on' or 'off' as `chassis power status` says; None when it
        fails TRIES times (one failure may be the machine's load: with -N 1
        an answer later than 1 s is a failure)."""
        for _ in range(tries):
            r = self.ipmitool(node, "chassis", "power", "status")
            if r.returncode == 0:
                return r.stdout.strip().rsplit(" ", 1)[-1]
        return None

    # -- what is left --

    def processes(self):
        """(pid, cmdline) of every live process started for these BMCs:
        each has the simulator's directory (unique to the test) in its
        command line: ipmi_sim -c DIR/lan.conf, the guards, the hooks."""
        mark = str(self.sim_dir) + "/"
        out = []
        for name in os.listdir("/proc"):
            if name.isdigit() and int(name) != os.getpid():
                cmd = _cmdline(int(name))
                if mark in cmd and _alive(int(name)):
                    out.append((int(name), cmd))
        return out

    def leftovers(self):
        """What is left of the simulator (processes, bound ports)."""
        left = [f"pid {p}: {c}" for p, c in self.processes()]
        left += [f"UDP port {p} of {n} still bound"
                 for n, p in self.ports.items() if udp_port_bound(p)]
        return left

    def cleanup(self):
        """Stop; SIGKILL what a failed stop left (processes of this
        simulator only).  The leftovers found after the stop."""
        if self.ports:
            try:
                self.stop()
            except subprocess.TimeoutExpired:
                pass
        deadline = time.monotonic() + 3
        while self.leftovers() and time.monotonic() < deadline:
            time.sleep(0.05)
        left = self.leftovers()
        for pid, _ in self.processes():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        return left


@pytest.fixture
def bmc_sim():
    """Factory: bmc_sim(CONFIG, nodes=None, boot_delay=None, start=True)
    -> BmcSim.  Every simulator made is stopped at the end of the test,
    and the test fails if something of one is left."""
    made = []

    def make(config, nodes=None, boot_delay=None, start=True):
        sim = BmcSim(config, nodes=nodes, boot_delay=boot_delay)
        made.append(sim)
        if start:
            sim.start()
        return sim

    yield make
    left = []
    for sim in made:
        left += sim.cleanup()
    assert not left, f"bmc-sim left behind: {left}"

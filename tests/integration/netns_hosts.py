"""Emulated hosts for the integration tests: network namespaces behind a
bridge, one sshd in each (see /work/shared/multihost-netns.md).

    with NetnsHosts(tmp_path, k=3) as net:     # or the `netns_hosts` fixture
        hf = net.write_hostfile(slots=2, local_slots=1)
        subprocess.run(["mpirun.openmpi", "--allow-run-as-root",
                        "--hostfile", hf, *net.mpirun_args(),
                        "-n", "3", "hostname"])
        net.cut(net.hosts[2])                   # network fault
        net.kill_host_processes(net.hosts[2])   # everything but its sshd

Each instance has its own short random tag.  Its namespaces, host names,
bridge and veths are named after it, its /24 is a 10.x.y.0/24 found on no
interface and in no route, and it is written down in a registry under
/run/ftfarm-netns, so that several instances (two test runs, a benchmark
beside a test) can run on one machine at once.  An instance whose owning
process died without tearing down is swept by the next start().

Teardown kills only what the instance made or what runs inside its own
namespaces, always by PID, and checks that nothing of it is left.  Nothing
here touches /etc/ssh or ~/.ssh: keys, host keys and the ssh_config live
in the instance's directory.

The helpers NetnsNet, Registry, free_subnet and kill_pids are shared with
slurm_cluster.py.
"""
import fcntl
import ipaddress
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

REGISTRY_DIR = Path("/run/ftfarm-netns")
IFNAMSIZ = 15                   # longest interface name Linux accepts
CUT_TABLE = "ftcut"             # nft table of a cut, inside a namespace


class Unavailable(Exception):
    """This machine cannot make the emulated hosts; str() is one line
    saying why (tests skip with it)."""


class Leftover(Exception):
    """Teardown found something of the instance still there."""


# ---- small process helpers ----

def sh(argv, check=True, timeout=20, **kw):
    """Run ARGV, output captured as text; CompletedProcess.  CHECK raises
    RuntimeError with the command and its stderr on a non-zero exit."""
    kw.setdefault("stdin", subprocess.DEVNULL)
    r = subprocess.run([str(a) for a in argv], capture_output=True,
                       text=True, timeout=timeout, **kw)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, argv))}: exit "
                           f"{r.returncode}: {r.stderr.strip()}")
    return r


def proc_state(pid):
    """State letter of PID (R, S, D, T, t, Z...), or None if gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def pid_alive(pid):
    """PID exists and is neither a zombie nor dead."""
    return proc_state(pid) not in (None, "Z", "X")


def pid_running(pid):
    """Alive and not stopped (a stopped process only ever reacts to
    SIGKILL and SIGCONT)."""
    return proc_state(pid) not in (None, "Z", "X", "T", "t")


def proc_cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def proc_start_time(pid):
    """Start time of PID in clock ticks since boot (tells a PID from a
    later process that reuses it), or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def kill_pids(pids, grace=0.0, sig=signal.SIGTERM):
    """Send SIG to each live PID; after GRACE seconds SIGKILL those still
    alive; wait up to 2 s more for them to go.  Returns the PIDs still
    alive (normally none)."""
    pids = [p for p in set(pids) if p and p > 1 and p != os.getpid()]
    for p in pids:
        try:
            os.kill(p, sig if pid_running(p) else signal.SIGKILL)
        except OSError:
            pass
    end = time.monotonic() + grace
    while grace and time.monotonic() < end and any(map(pid_running, pids)):
        time.sleep(0.02)
    for p in pids:
        if pid_alive(p):
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
    end = time.monotonic() + 2
    while time.monotonic() < end and any(map(pid_alive, pids)):
        time.sleep(0.02)
    return [p for p in pids if pid_alive(p)]


def session_members(sid):
    """PIDs of the live processes of session SID (a process started with
    start_new_session and everything it started that did not leave the
    session, whatever their process groups: salloc gives its command a
    group of its own)."""
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[3]) == sid:
                        out.append(int(name))
            except (OSError, IndexError, ValueError):
                continue
    return [p for p in out if pid_alive(p)]


def same_process(d):
    """D ({"pid", "start"}) is still the process recorded (not a later
    one that reuses its PID)."""
    return pid_alive(d["pid"]) and proc_start_time(d["pid"]) == d["start"]


def read_pid(path):
    try:
        return int(Path(path).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def wait_tcp(addr, port, timeout):
    """Wait until ADDR:PORT accepts a TCP connection; True if it did."""
    end = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((addr, port), timeout=0.2):
                return True
        except OSError:
            if time.monotonic() >= end:
                return False
            time.sleep(0.01)


def links():
    """Names of the network interfaces of this (the root) namespace."""
    return set(os.listdir("/sys/class/net"))


def netns_list():
    r = sh(["ip", "netns", "list"], check=False)
    return {line.split()[0] for line in r.stdout.splitlines() if line.strip()}


def netns_pids(ns):
    r = sh(["ip", "netns", "pids", ns], check=False)
    return [int(x) for x in r.stdout.split() if x.isdigit()]


# ---- registry of live instances ----

class Registry:
    """Files under REGISTRY_DIR, one per live instance: its owner (PID and
    start time), namespaces, links, subnet, ports and daemons.  Choosing a
    subnet, ports and a tag happens under one lock and excludes what other
    live instances hold; an instance whose owner is gone is released by
    the next one that starts."""

    def __init__(self):
        REGISTRY_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.lockf = None

    def __enter__(self):
        self.lockf = open(REGISTRY_DIR / "lock", "w")
        fcntl.flock(self.lockf, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        fcntl.flock(self.lockf, fcntl.LOCK_UN)
        self.lockf.close()

    @staticmethod
    def records():
        out = []
        for f in REGISTRY_DIR.glob("*.json"):
            try:
                out.append(json.loads(f.read_text()))
            except (OSError, ValueError):
                continue
        return out

    @staticmethod
    def write(rec):
        path = REGISTRY_DIR / f"{rec['tag']}.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(rec, indent=1))
        tmp.rename(path)

    @staticmethod
    def remove(tag):
        try:
            (REGISTRY_DIR / f"{tag}.json").unlink()
        except FileNotFoundError:
            pass

    @staticmethod
    def owner_alive(rec):
        pid = rec.get("owner_pid")
        return pid_alive(pid) and proc_start_time(pid) == rec.get("owner_start")


def free_subnet(rng, taken):
    """A 10.x.y.0/24 that overlaps no address or route of the root
    namespace and none of TAKEN (subnets of live instances)."""
    used = [ipaddress.ip_network(n) for n in taken]
    r = sh(["ip", "-o", "-4", "addr", "show"], check=False)
    for line in r.stdout.splitlines():
        f = line.split()
        if "inet" in f:
            used.append(ipaddress.ip_interface(f[f.index("inet") + 1]).network)
    r = sh(["ip", "-4", "route", "show", "table", "all"], check=False)
    for line in r.stdout.splitlines():
        dst = line.split()[0] if line.split() else ""
        if dst[:1].isdigit():
            try:
                net = ipaddress.ip_network(dst, strict=False)
            except ValueError:
                continue
            if net.prefixlen > 0:
                used.append(net)
    for _ in range(1000):
        cand = ipaddress.ip_network(
            f"10.{rng.randint(64, 250)}.{rng.randint(0, 255)}.0/24")
        if not any(cand.overlaps(u) for u in used):
            return cand
    raise Unavailable("no free 10.x.y.0/24 subnet")


def listening_ports():
    """Local TCP/UDP ports in use in this namespace (any state)."""
    ports = set()
    for name in ("tcp", "tcp6", "udp", "udp6"):
        try:
            with open(f"/proc/net/{name}") as f:
                next(f)
                for line in f:
                    ports.add(int(line.split()[1].rsplit(":", 1)[1], 16))
        except (OSError, StopIteration, ValueError, IndexError):
            continue
    return ports


def free_ports(rng, count, taken, lo=20000, hi=32000):
    """COUNT consecutive TCP ports in [LO, HI) (below the ephemeral range)
    that nothing uses here and no live instance holds (TAKEN)."""
    busy = listening_ports() | set(taken)
    for _ in range(1000):
        base = rng.randrange(lo, hi - count)
        if not any(p in busy for p in range(base, base + count)):
            return list(range(base, base + count))
    raise Unavailable("no free TCP port range")


def release(rec):
    """Remove everything a registry record names: processes in its
    namespaces and its recorded processes (by PID, checked against their
    start time), the namespaces, links and bridge.  Used for an instance whose
    owner died; returns what could not be removed."""
    for ns in rec.get("netns", []):
        if ns in netns_list():
            kill_pids(netns_pids(ns), sig=signal.SIGKILL)
    kill_pids([d["pid"] for d in rec.get("procs", []) if same_process(d)],
              grace=1.0)
    for ns in rec.get("netns", []):
        if ns in netns_list():
            sh(["ip", "netns", "del", ns], check=False)
    for link in rec.get("links", []):
        if link in links():
            sh(["ip", "link", "del", link], check=False)
    for d in rec.get("dirs", []):
        shutil.rmtree(d, ignore_errors=True)
    left = [ns for ns in rec.get("netns", []) if ns in netns_list()]
    left += [link for link in rec.get("links", []) if link in links()]
    return left


# ---- the network: bridge, veths, namespaces ----

class NetnsNet:
    """K namespaces on a bridge of the root namespace.  The bridge holds
    .1 of the subnet (the address of this machine, "the master"); host i
    (1-based) is .(10+i) on its eth0.  Subclasses add daemons."""

    KIND = "n"          # one letter in the names: tag + KIND + index

    def __init__(self, base_dir, k=3):
        if not 1 <= k <= 200:
            raise ValueError("k must be 1..200")
        self.k = k
        self.rng = random.SystemRandom()
        self.tag = None
        self.subnet = None
        self.ports = []
        self.base_dir = Path(base_dir)
        self.dir = None
        self.hosts = []
        self.bridge = None
        self.veth = {}          # host -> root-side veth name
        self.addr = {}          # host -> address
        self.cuts = {}          # host -> set of "link", "nft"
        self.tracked = []       # Popen objects and PIDs to kill at teardown
        self.procs = []         # {"pid", "start"}: ours, in the registry
        self.made_netns = []
        self.made_links = []
        self.dirs = []          # directories outside self.dir to remove
        self.timings = {}
        self._torn_down = False

    # -- naming, subnet and registry --

    def _reserve(self, nports=0):
        """Choose tag, names, subnet (and NPORTS ports) under the registry
        lock, sweeping instances whose owner is gone; write our record."""
        with Registry() as reg:
            for rec in reg.records():
                if not reg.owner_alive(rec):
                    release(rec)
                    reg.remove(rec["tag"])
            recs = reg.records()
            busy_names = netns_list() | links() | {r["tag"] for r in recs}
            for _ in range(100):
                tag = "f" + "".join(self.rng.choice("0123456789abcdef")
                                    for _ in range(4))
                if not any(n.startswith(tag) for n in busy_names):
                    break
            self.tag = tag
            self.hosts = [f"{tag}{self.KIND}{i}" for i in range(1, self.k + 1)]
            self.bridge = f"{tag}br"
            self.veth = {h: f"{tag}v{i}" for i, h in enumerate(self.hosts, 1)}
            assert all(len(n) <= IFNAMSIZ for n in [self.bridge,
                                                    *self.veth.values()])
            self.subnet = free_subnet(self.rng, [r["subnet"] for r in recs])
            net = list(self.subnet.hosts())
            self.master_address = str(net[0])
            self.addr = {h: str(net[9 + i]) for i, h in
                         enumerate(self.hosts, 1)}
            if nports:
                taken = [p for r in recs for p in r.get("ports", [])]
                self.ports = free_ports(self.rng, nports, taken)
            self.dir = self.base_dir / f"netns-{tag}"
            self.dir.mkdir(parents=True, exist_ok=True)
            os.chmod(self.dir, 0o711)
            self._record()

    def _record(self):
        Registry.write({
            "tag": self.tag, "owner_pid": os.getpid(),
            "owner_start": proc_start_time(os.getpid()),
            "dir": str(self.dir), "subnet": str(self.subnet),
            "ports": self.ports, "netns": self.hosts,
            "links": [self.bridge, *self.veth.values()],
            "procs": self.procs, "dirs": self.dirs})

    def own(self, pid):
        """Record PID as a process of the instance (its daemons and
        tracked processes), so that a later instance can end it if our
        owner dies before teardown."""
        start = proc_start_time(pid)
        if start is not None:
            self.procs.append({"pid": pid, "start": start})
            self._record()
        return pid

    def _net_up(self):
        """Bridge, namespaces, veths and addresses."""
        b, plen = self.bridge, self.subnet.prefixlen
        sh(["ip", "link", "add", b, "type", "bridge"])
        self.made_links.append(b)
        sh(["ip", "addr", "add", f"{self.master_address}/{plen}", "dev", b])
        sh(["ip", "link", "set", b, "up"])
        for h in self.hosts:
            v = self.veth[h]
            sh(["ip", "netns", "add", h])
            self.made_netns.append(h)
            sh(["ip", "link", "add", v, "type", "veth", "peer", "name",
                "eth0", "netns", h])
            self.made_links.append(v)
            sh(["ip", "link", "set", v, "master", b, "up"])
            sh(["ip", "-n", h, "addr", "add", f"{self.addr[h]}/{plen}",
                "dev", "eth0"])
            sh(["ip", "-n", h, "link", "set", "eth0", "up"])
            sh(["ip", "-n", h, "link", "set", "lo", "up"])

    @staticmethod
    def check_net():
        """Why this machine cannot make namespaces, or None."""
        if os.geteuid() != 0:
            return "not root (network namespaces need root)"
        for prog in ("ip", "unshare", "nsenter"):
            if shutil.which(prog) is None:
                return f"`{prog}` not found"
        r = sh(["ip", "netns", "help"], check=False)
        if "netns" not in r.stdout + r.stderr:
            return "`ip` has no `netns` command"
        return None

    def _start_net(self, nports=0):
        reason = self.check_net()
        if reason:
            raise Unavailable(reason)
        self._reserve(nports)
        try:
            self._net_up()
        except RuntimeError as e:
            if not self.made_netns and ("netns" in str(e) or
                                        "ermission" in str(e)):
                raise Unavailable(f"cannot make a network namespace: {e}")
            raise

    # -- addresses --

    def address(self, host):
        """IPv4 address of HOST on the bridge."""
        return self.addr[host]

    @property
    def cidr(self):
        """The subnet as text, for btl_tcp_if_include/oob_tcp_if_include."""
        return str(self.subnet)

    # -- processes --

    def track(self, proc):
        """Have teardown end PROC (a Popen or a PID) if it is still there."""
        self.tracked.append(proc)
        self.own(proc.pid if isinstance(proc, subprocess.Popen) else proc)
        return proc

    def host_pid(self, host):
        """PID of a process of HOST whose namespaces run() enters (the
        host's daemon), or None.  Subclasses say which."""
        return None

    def run_argv(self, host, argv):
        """ARGV wrapped to run inside HOST: its network, UTS (hostname)
        and mount namespaces."""
        pid = self.host_pid(host)
        if pid and pid_alive(pid):
            return ["nsenter", "-t", str(pid), "-n", "-u", "-m", "--",
                    *map(str, argv)]
        return ["ip", "netns", "exec", host, "unshare", "--uts", "sh", "-c",
                f'hostname {host} && exec "$@"', "sh", *map(str, argv)]

    def run(self, host, argv, timeout=30, check=False, **kw):
        """Run ARGV inside HOST and wait; CompletedProcess (text)."""
        return sh(self.run_argv(host, argv), check=check, timeout=timeout,
                  **kw)

    def popen(self, host, argv, **kw):
        """Start ARGV inside HOST in a session of its own; the Popen,
        tracked (ended at teardown)."""
        kw.setdefault("stdin", subprocess.DEVNULL)
        kw.setdefault("start_new_session", True)
        return self.track(subprocess.Popen(self.run_argv(host, argv), **kw))

    def keep_pids(self, host):
        """PIDs of HOST that kill_host_processes spares (its daemon)."""
        return set()

    def kill_host_processes(self, host, keep=None):
        """SIGKILL every process of HOST (`ip netns pids`) but its daemon,
        by PID, until none is left (2 s at most); the PIDs killed."""
        keep = self.keep_pids(host) if keep is None else set(keep)
        killed = set()
        end = time.monotonic() + 2
        while True:
            pids = [p for p in netns_pids(host) if p not in keep]
            if not pids or time.monotonic() > end:
                break
            killed.update(pids)
            kill_pids(pids, sig=signal.SIGKILL)
        return sorted(killed)

    # -- faults --

    def cut(self, host, how="link"):
        """Cut HOST off the network, as a real fault.  HOW: "link" (its
        veth down on the bridge side: the host sees no carrier), "nft"
        (every packet on its eth0 silently dropped inside the host),
        "both"."""
        how = {"both": ("link", "nft")}.get(how, (how,))
        cuts = self.cuts.setdefault(host, set())
        if "link" in how:
            sh(["ip", "link", "set", self.veth[host], "down"])
            cuts.add("link")
        if "nft" in how:
            rules = (f"table inet {CUT_TABLE} {{\n"
                     " chain in { type filter hook input priority -300;"
                     ' iifname "eth0" drop; }\n'
                     " chain out { type filter hook output priority -300;"
                     ' oifname "eth0" drop; }\n}\n')
            sh(["ip", "netns", "exec", host, "nft", "-f", "-"], input=rules,
               stdin=None)
            cuts.add("nft")

    def restore(self, host):
        """Undo cut(HOST)."""
        cuts = self.cuts.pop(host, set())
        if "nft" in cuts:
            sh(["ip", "netns", "exec", host, "nft", "delete", "table",
                "inet", CUT_TABLE], check=False)
        if "link" in cuts:
            sh(["ip", "link", "set", self.veth[host], "up"], check=False)

    # -- teardown --

    def _end_tracked(self, grace):
        """Tracked processes: wait up to GRACE s for them to end by
        themselves, then SIGTERM, then SIGKILL, each by PID; for a process
        that leads a session (a Popen with start_new_session), every
        member of its session too (mpirun's ssh children, salloc's
        command)."""
        def members():
            pids = set()
            for t in self.tracked:
                pid = t.pid if isinstance(t, subprocess.Popen) else int(t)
                pids.add(pid)
                pids.update(session_members(pid))   # none unless a leader
            return {p for p in pids if pid_alive(p)}
        end = time.monotonic() + grace
        while time.monotonic() < end and any(map(pid_running, members())):
            self._reap()
            time.sleep(0.05)
        left = kill_pids(members(), grace=1.0)
        self._reap()
        return left

    def _reap(self):
        for t in self.tracked:
            if isinstance(t, subprocess.Popen):
                t.poll()

    def _stop_daemons(self):
        """Subclasses: stop their daemons by PID."""

    def teardown(self, grace=2.0):
        """Remove everything of the instance; always safe to call, also
        after a failed start or a failed test.  Restores cut links, lets
        tracked processes end (GRACE s) and kills them, kills what runs in
        the namespaces, stops the daemons by PID, deletes namespaces,
        links and bridge, then checks.  Raises Leftover naming what is
        still there."""
        if self._torn_down:
            return
        self._torn_down = True
        t0 = time.monotonic()
        if self.tag is None:
            return
        errors = []

        def step(fn, *args, **kw):
            # One failing step (a command timing out) must not leave
            # the later ones undone.
            try:
                fn(*args, **kw)
            except Exception as e:          # noqa: BLE001 - reported below
                errors.append(f"{getattr(fn, '__name__', fn)}: {e}")

        for h in list(self.cuts):
            step(self.restore, h)
        step(self.stop_jobs)
        for h in self.made_netns:
            step(self.kill_host_processes, h)
        step(self._end_tracked, grace)
        step(self._stop_daemons)
        for h in self.made_netns:
            step(self.kill_host_processes, h, keep=())
        for h in self.made_netns:
            step(sh, ["ip", "netns", "del", h], check=False)
        for link in reversed(self.made_links):
            if link in links():
                step(sh, ["ip", "link", "del", link], check=False)
        for d in self.dirs:
            shutil.rmtree(d, ignore_errors=True)
        left = self.leftovers()
        if not left:
            Registry.remove(self.tag)
        self.timings["teardown"] = time.monotonic() - t0
        if left:
            raise Leftover(f"{self.tag}: left after teardown: {left}"
                           + (f" (errors: {errors})" if errors else ""))

    def stop_jobs(self):
        """Subclasses: cancel what runs through the daemons first."""

    def leftovers(self):
        """What of the instance is still there: namespaces, links, live
        tracked processes and daemons (a list of strings)."""
        left = [f"netns {ns}" for ns in self.hosts if ns in netns_list()]
        have = links()
        left += [f"link {n}" for n in [self.bridge, *self.veth.values()]
                 if n in have]
        left += [f"dir {d}" for d in self.dirs if os.path.exists(d)]
        for d in self.procs:
            if same_process(d):
                left.append(f"process {d['pid']} "
                            f"{proc_cmdline(d['pid'])[:80]}")
        return left

    def __enter__(self):
        try:
            self.start()
        except BaseException:
            self.teardown()
            raise
        return self

    def __exit__(self, etype, exc, tb):
        try:
            self.teardown()
        except Leftover:
            if etype is None:
                raise
        return False


# ---- hosts reachable over ssh ----

SSHD = "/usr/sbin/sshd"


class NetnsHosts(NetnsNet):
    """K emulated hosts, each a namespace with one sshd on port 22 in its
    own UTS (hostname = host name) and mount namespace (a private /run).

    PRIVATE_HOME (default) gives each host an empty /root, as a separate
    machine would have: this machine's /root/.bashrc runs `pyenv init`,
    which bash sources for every ssh command and which made each one take
    2-3.5 s instead of about 0.1 s.

    Attributes: hosts (names), ssh_config (path), cidr, master_address
    (this machine on the bridge), dir, timings {"setup", "teardown"}."""

    KIND = "h"

    def __init__(self, base_dir, k=3, private_home=True):
        super().__init__(base_dir, k)
        self.private_home = private_home
        self.ssh_config = None
        self.sshd_pid = {}          # host -> PID of its sshd
        self._sshd_procs = []       # their Popen objects, to reap them

    @staticmethod
    def unavailable():
        """Why the hosts cannot be made here (one line), or None."""
        reason = NetnsNet.check_net()
        if reason:
            return reason
        if not os.access(SSHD, os.X_OK):
            return f"{SSHD} not found (Debian package openssh-server)"
        for prog in ("ssh", "ssh-keygen"):
            if shutil.which(prog) is None:
                return f"`{prog}` not found (Debian package openssh-client)"
        return None

    def start(self):
        """Make the hosts; returns self once every sshd accepts
        connections.  Raises Unavailable when this machine cannot."""
        t0 = time.monotonic()
        reason = self.unavailable()
        if reason:
            raise Unavailable(reason)
        self._start_net()
        self._keys()
        self._write_ssh_config()
        for h in self.hosts:
            self.start_sshd(h, wait=False)
        for h in self.hosts:
            if not wait_tcp(self.addr[h], 22, 10):
                raise RuntimeError(f"sshd of {h} not listening after 10 s: "
                                   f"{self._sshd_log(h)}")
        self.timings["setup"] = time.monotonic() - t0
        return self

    def _keys(self):
        d = self.dir
        for name in ("host_key", "id_ed25519"):
            sh(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C",
                f"ftfarm-test-{self.tag}", "-f", d / name])
        shutil.copy(d / "id_ed25519.pub", d / "authorized_keys")

    def _write_ssh_config(self):
        d = self.dir
        lines = []
        for h in self.hosts:
            lines += [f"Host {h}", f"  HostName {self.addr[h]}"]
        lines += ["Host *", "  User root", f"  IdentityFile {d}/id_ed25519",
                  "  IdentitiesOnly yes", "  StrictHostKeyChecking no",
                  "  UserKnownHostsFile /dev/null",
                  "  GlobalKnownHostsFile /dev/null", "  BatchMode yes",
                  "  ConnectTimeout 5", "  LogLevel ERROR"]
        self.ssh_config = d / "ssh_config"
        self.ssh_config.write_text("\n".join(lines) + "\n")
        for h in self.hosts:
            (d / h).mkdir(exist_ok=True)
            (d / h / "sshd_config").write_text("\n".join([
                f"ListenAddress {self.addr[h]}", "Port 22",
                f"HostKey {d}/host_key", f"PidFile {d}/{h}/sshd.pid",
                "PermitRootLogin prohibit-password",
                "PasswordAuthentication no",
                "KbdInteractiveAuthentication no",
                f"AuthorizedKeysFile {d}/authorized_keys", "StrictModes no",
                "UsePAM no", "MaxStartups 100:30:200", "MaxSessions 100",
                "PrintMotd no", "UseDNS no", ""]))

    def _sshd_log(self, host):
        try:
            return (self.dir / host / "sshd.log").read_text()[-500:]
        except OSError:
            return ""

    def start_sshd(self, host, wait=True):
        """Start HOST's sshd (again): its PID is the process started, as
        `ip netns exec`, `unshare` and `sh` exec into one another."""
        d = self.dir / host
        home = "mount -t tmpfs -o mode=700 tmpfs /root && " \
            if self.private_home else ""
        script = (f"hostname {host} && mount -t tmpfs -o mode=755 tmpfs /run"
                  f" && mkdir -m 755 /run/sshd && {home}exec {SSHD} -D -e -f "
                  f"{d}/sshd_config")
        with open(d / "sshd.log", "ab") as log:
            p = subprocess.Popen(
                ["ip", "netns", "exec", host, "unshare", "--uts", "--mount",
                 "--propagation", "private", "sh", "-c", script],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                start_new_session=True)
        self.sshd_pid[host] = p.pid
        self._sshd_procs.append(p)
        self.own(p.pid)
        if wait and not wait_tcp(self.addr[host], 22, 10):
            raise RuntimeError(f"sshd of {host} not listening: "
                               f"{self._sshd_log(host)}")
        return p.pid

    def stop_sshd(self, host, grace=1.0):
        """Stop HOST's sshd (by the PID in its PID file, else the one we
        started); the host stays up, ssh to it is refused."""
        pid = read_pid(self.dir / host / "sshd.pid") or self.sshd_pid.get(host)
        if pid and str(self.dir / host) in proc_cmdline(pid):
            kill_pids([pid], grace=grace)
        for p in self._sshd_procs:
            p.poll()
        self.sshd_pid.pop(host, None)

    def host_pid(self, host):
        return self.sshd_pid.get(host)

    def keep_pids(self, host):
        pid = self.sshd_pid.get(host)
        return {pid} if pid else set()

    def _stop_daemons(self):
        for h in self.hosts:
            self.stop_sshd(h)

    # -- for the launcher --

    def ssh_argv(self, host, command, connect_timeout=None):
        """ssh into HOST through the instance's ssh_config."""
        argv = ["ssh", "-F", str(self.ssh_config)]
        if connect_timeout is not None:
            argv += ["-o", f"ConnectTimeout={connect_timeout}"]
        return argv + [host, command]

    def ssh(self, host, command, timeout=30, connect_timeout=None):
        """Run COMMAND (a shell string) on HOST over ssh; CompletedProcess."""
        return sh(self.ssh_argv(host, command, connect_timeout),
                  check=False, timeout=timeout)

    def hostfile(self, slots=1, local_slots=0):
        """Hostfile text: `localhost slots=LOCAL_SLOTS` first when
        LOCAL_SLOTS > 0 (rank 0, e.g. a master, then runs here), then each
        host with SLOTS slots."""
        lines = [f"localhost slots={local_slots}"] if local_slots else []
        lines += [f"{h} slots={slots}" for h in self.hosts]
        return "\n".join(lines) + "\n"

    def write_hostfile(self, slots=1, local_slots=0, name="hostfile"):
        path = self.dir / name
        path.write_text(self.hostfile(slots, local_slots))
        return path

    def mpirun_args(self, btl=True):
        """Open MPI options to launch over ssh into the hosts and keep
        MPI traffic on their subnet (BTL: also `--mca btl self,vader,tcp`,
        which Open MPI refuses to see twice: leave it out for ftfarm,
        which sets it)."""
        args = ["--mca", "plm_rsh_agent", f"ssh -F {self.ssh_config}",
                "--mca", "oob_tcp_if_include", self.cidr,
                "--mca", "btl_tcp_if_include", self.cidr]
        return args + (["--mca", "btl", "self,vader,tcp"] if btl else [])


# ---- pytest fixtures ----

try:
    import pytest
except ImportError:         # usable without pytest (benchmarks)
    pytest = None


def started_or_skip(make, what):
    """make() -> started instance; skip the test with one line when this
    machine cannot make it."""
    try:
        return make()
    except Unavailable as e:
        pytest.skip(f"{what}: {e}")


if pytest is not None:
    @pytest.fixture
    def netns_hosts_factory(tmp_path):
        """make(k=3) -> started NetnsHosts; each is torn down (and checked)
        when the test ends, pass or fail."""
        made = []
        reason = NetnsHosts.unavailable()

        def make(k=3):
            if reason:
                pytest.skip(f"netns hosts: {reason}")
            net = NetnsHosts(tmp_path / f"n{len(made)}", k)
            made.append(net)
            return started_or_skip(net.start, "netns hosts")

        yield make
        errors = []
        for net in made:
            try:
                net.teardown()
            except Exception as e:          # noqa: BLE001 - report all
                errors.append(str(e))
        assert not errors, errors

    @pytest.fixture
    def netns_hosts(netns_hosts_factory):
        """Three started emulated hosts (NetnsHosts)."""
        return netns_hosts_factory(3)

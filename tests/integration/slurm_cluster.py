"""A real Slurm 22.05 cluster on this machine for the integration tests:
slurmctld and munged in the root namespace, one slurmd per network
namespace (see /work/shared/slurm-netns.md).

    with SlurmCluster(tmp_path, k=3) as sl:     # or the `slurm_cluster` fixture
        r = sl.salloc(["-N3", "--ntasks-per-node=2", "--no-kill"],
                      ["mpirun.openmpi", "--allow-run-as-root",
                       *sl.mpirun_args(), "hostname"], timeout=60)
        jid = sl.sbatch("#!/bin/sh\nhostname\n", ["-N1"])
        sl.wait_job(jid)                        # "COMPLETED"
        sl.cut(sl.nodes[2])                     # network fault

Like NetnsHosts, each instance has its own tag, node names, namespaces,
bridge, veths, /24 and ports (SlurmctldPort, SlurmdPort, SrunPortRange:
consecutive free ports below the ephemeral range, held in the registry),
its own munged (socket and key in its directory) and its own slurm.conf;
every client gets SLURM_CONF from env.  Teardown cancels the jobs, kills
what runs in the namespaces and what it tracked, stops the daemons by PID,
deletes namespaces and bridge, and checks that nothing is left.
"""
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from netns_hosts import (NetnsNet, Unavailable, kill_pids, session_members,
                         sh, started_or_skip)

SRUN_PORTS = 48
DAEMONS = {"slurmctld": "/usr/sbin/slurmctld", "slurmd": "/usr/sbin/slurmd",
           "munged": "/usr/sbin/munged", "mungekey": "/usr/sbin/mungekey"}
CLIENTS = ("salloc", "sbatch", "srun", "sinfo", "squeue", "scancel",
           "scontrol")


class SlurmCluster(NetnsNet):
    """K Slurm nodes (names in .nodes, also .hosts), each a namespace whose
    slurmd runs in its own UTS namespace (hostname = node name).

    CPUS per node (more than the machine has is fine: config_overrides),
    SLURMD_TIMEOUT seconds before slurmctld marks a silent node down.
    Attributes: conf (slurm.conf path), env (environment for clients),
    ctld_port, slurmd_port, srun_ports, cidr, timings."""

    KIND = "s"

    def __init__(self, base_dir, k=3, cpus=4, slurmd_timeout=10):
        super().__init__(base_dir, k)
        self.cpus = cpus
        self.slurmd_timeout = slurmd_timeout
        self.conf = None
        self.env = None
        self.slurmd_pid = {}
        self.ctld = None
        self.munged = None
        self._daemon_procs = []

    @property
    def nodes(self):
        return self.hosts

    @staticmethod
    def unavailable():
        """Why the cluster cannot be made here (one line), or None."""
        reason = NetnsNet.check_net()
        if reason:
            return reason
        for name, path in DAEMONS.items():
            if not os.access(path, os.X_OK):
                pkg = "munge" if "munge" in name else "slurm-wlm"
                return f"{path} not found (Debian package {pkg})"
        for prog in CLIENTS:
            if shutil.which(prog) is None:
                return f"`{prog}` not found (Debian package slurm-client)"
        return None

    # -- start --

    def start(self, timeout=20):
        """Make the cluster; returns self once every node is idle.
        Raises Unavailable when this machine cannot."""
        t0 = time.monotonic()
        reason = self.unavailable()
        if reason:
            raise Unavailable(reason)
        self._start_net(nports=2 + SRUN_PORTS)
        self.ctld_port, self.slurmd_port = self.ports[0], self.ports[1]
        self.srun_ports = (self.ports[2], self.ports[-1])
        self._write_conf()
        self._start_munged()
        self._start_ctld()
        for n in self.nodes:
            self._start_slurmd(n)
        self.wait_idle(timeout)
        self.timings["setup"] = time.monotonic() - t0
        return self

    def _write_conf(self):
        d = self.dir
        for sub in ("munge", "ctld", "spool", "log"):
            (d / sub).mkdir(exist_ok=True)
        # munged wants o+x on every directory above its socket, which a
        # test's private temporary directory does not give.
        self.sockdir = Path(tempfile.gettempdir()) / f"ftfarm-munge-{self.tag}"
        self.sockdir.mkdir(mode=0o755)
        os.chmod(self.sockdir, 0o755)
        self.dirs.append(str(self.sockdir))
        self._record()
        nodes = "\n".join(
            f"NodeName={n} NodeAddr={self.addr[n]} CPUs={self.cpus} "
            f"State=UNKNOWN" for n in self.nodes)
        self.conf = d / "slurm.conf"
        self.conf.write_text(f"""\
ClusterName=ft{self.tag}
SlurmctldHost={socket.gethostname()}({self.master_address})
SlurmctldPort={self.ctld_port}
SlurmdPort={self.slurmd_port}
SrunPortRange={self.srun_ports[0]}-{self.srun_ports[1]}
MailProg=/bin/true
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={self.sockdir}/munge.socket.2
StateSaveLocation={d}/ctld
SlurmctldPidFile={d}/ctld/slurmctld.pid
SlurmctldLogFile={d}/log/slurmctld.log
SlurmdSpoolDir={d}/spool/%n
SlurmdPidFile={d}/spool/%n/slurmd.pid
SlurmdLogFile={d}/log/slurmd.%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
SlurmdParameters=config_overrides
ReturnToService=2
SlurmdTimeout={self.slurmd_timeout}
SlurmctldTimeout=30
InactiveLimit=0
KillWait=5
MinJobAge=30
{nodes}
PartitionName=debug Nodes={','.join(self.nodes)} Default=YES MaxTime=INFINITE State=UP
""")
        # slurmd 22.05 always loads a cgroup plugin; under `ip netns exec`
        # /sys/fs/cgroup is empty and autodetection fails.  v1 skips the
        # check; with linuxproc and task/none no cgroup is touched.
        (d / "cgroup.conf").write_text("CgroupPlugin=cgroup/v1\n")
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("SLURM_", "SALLOC_", "SBATCH_", "SRUN_"))}
        env["SLURM_CONF"] = str(self.conf)
        self.env = env

    def _daemon(self, argv, log):
        """Start a daemon in the foreground in a session of its own;
        its Popen (PID recorded in the registry)."""
        with open(self.dir / "log" / log, "ab") as f:
            p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=f,
                                 stderr=f, start_new_session=True)
        self._daemon_procs.append(p)
        self.own(p.pid)
        return p

    def _start_munged(self):
        m = self.dir / "munge"
        sh(["mungekey", "-c", "-k", m / "munge.key"])
        self.munged = self._daemon(
            [DAEMONS["munged"], "-F", f"--socket={self.sockdir}/munge.socket.2",
             f"--key-file={m}/munge.key", f"--pid-file={m}/munged.pid",
             f"--log-file={m}/munged.log", f"--seed-file={m}/munged.seed"],
            "munged.out")
        end = time.monotonic() + 5
        while not (self.sockdir / "munge.socket.2").exists():
            if time.monotonic() > end or self.munged.poll() is not None:
                raise RuntimeError(f"munged did not start: "
                                   f"{self._tail('munged.out')}")
            time.sleep(0.01)

    def _start_ctld(self):
        self.ctld = self._daemon([DAEMONS["slurmctld"], "-D", "-i", "-f",
                                  self.conf], "ctld.out")

    def _start_slurmd(self, node):
        (self.dir / "spool" / node).mkdir(exist_ok=True)
        # ip netns exec, unshare (no --fork) and sh exec into one another:
        # the PID started is slurmd's.
        p = self._daemon(
            ["ip", "netns", "exec", node, "unshare", "--uts", "sh", "-c",
             f"hostname {node} && exec {DAEMONS['slurmd']} -D -N {node} "
             f"-f {self.conf}"], f"slurmd.{node}.out")
        self.slurmd_pid[node] = p.pid

    def _tail(self, log, n=600):
        try:
            return (self.dir / "log" / log).read_text()[-n:]
        except OSError:
            return ""

    def wait_idle(self, timeout=20, count=None):
        """Wait until COUNT (default all) nodes are idle."""
        want = self.k if count is None else count
        end = time.monotonic() + timeout
        while True:
            r = self.cmd(["sinfo", "-h", "-t", "idle", "-o", "%D"],
                         timeout=10)
            if r.returncode == 0 and r.stdout.strip() == str(want):
                return
            if time.monotonic() > end:
                raise RuntimeError(
                    f"{want} idle nodes not reached in {timeout} s: "
                    f"{self.cmd(['sinfo'], timeout=10).stdout}\n"
                    f"ctld: {self._tail('ctld.out')}")
            for p in self._daemon_procs:
                if p.poll() is not None:
                    raise RuntimeError(f"{' '.join(map(str, p.args))[:80]} "
                                       f"exited {p.returncode}")
            time.sleep(0.05)

    # -- clients --

    def cmd(self, argv, timeout=30, check=False, **kw):
        """Run a Slurm client (sinfo, squeue, scontrol...) with SLURM_CONF;
        CompletedProcess (text)."""
        return sh(argv, check=check, timeout=timeout, env=self.env, **kw)

    def popen(self, argv, **kw):
        """Start ARGV (e.g. salloc ...) here with SLURM_CONF, in a session
        of its own; the Popen, tracked (ended at teardown)."""
        kw.setdefault("stdin", subprocess.DEVNULL)
        kw.setdefault("start_new_session", True)
        kw.setdefault("env", self.env)
        return self.track(subprocess.Popen([str(a) for a in argv], **kw))

    def salloc_popen(self, args, command, **kw):
        return self.popen(["salloc", *args, *command], **kw)

    def salloc(self, args, command, timeout=60):
        """`salloc ARGS COMMAND`, waited for at most TIMEOUT s (then it,
        its process group and its job are killed and TimeoutExpired is
        raised); CompletedProcess (text)."""
        p = self.salloc_popen(args, command, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self._kill_tree(p)
            self.stop_jobs()
            raise
        return subprocess.CompletedProcess(p.args, p.returncode, out, err)

    def _kill_tree(self, p):
        kill_pids([p.pid, *session_members(p.pid)], grace=1.0)
        p.poll()

    def sbatch(self, script, args=(), name="job.sh"):
        """Submit SCRIPT (text) with `sbatch --parsable ARGS`; the job id.
        Output goes to <dir>/slurm-<id>.out."""
        path = self.dir / name
        path.write_text(script)
        path.chmod(0o755)
        r = self.cmd(["sbatch", "--parsable", "-D", self.dir,
                      "-o", self.dir / "slurm-%j.out", *args, path],
                     check=True)
        return int(r.stdout.strip().split(";")[0])

    def job_state(self, jobid):
        r = self.cmd(["scontrol", "-o", "show", "job", str(jobid)],
                     timeout=10)
        m = re.search(r"JobState=(\S+)", r.stdout)
        return m.group(1) if m else None

    def wait_job(self, jobid, timeout=60):
        """Wait until job JOBID has ended; its final state (COMPLETED,
        FAILED, CANCELLED...).  Raises TimeoutError."""
        end = time.monotonic() + timeout
        while True:
            st = self.job_state(jobid)
            if st not in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING",
                          None):
                return st
            if time.monotonic() > end:
                raise TimeoutError(f"job {jobid} still {st} after {timeout} s")
            time.sleep(0.1)

    def job_output(self, jobid):
        try:
            return (self.dir / f"slurm-{jobid}.out").read_text()
        except OSError:
            return ""

    def jobs(self):
        r = self.cmd(["squeue", "-h", "-o", "%i"], timeout=10)
        return [int(x) for x in r.stdout.split() if x.isdigit()]

    def node_state(self, node):
        r = self.cmd(["sinfo", "-h", "-n", node, "-o", "%T"], timeout=10)
        return r.stdout.strip()

    def mpirun_args(self, btl=True):
        """Open MPI options that keep MPI traffic on the nodes' subnet
        (BTL: see NetnsHosts.mpirun_args)."""
        args = ["--mca", "oob_tcp_if_include", self.cidr,
                "--mca", "btl_tcp_if_include", self.cidr]
        return args + (["--mca", "btl", "self,vader,tcp"] if btl else [])

    # -- hooks of NetnsNet --

    def host_pid(self, host):
        return self.slurmd_pid.get(host)

    def keep_pids(self, host):
        pid = self.slurmd_pid.get(host)
        return {pid} if pid else set()

    def stop_jobs(self):
        """scancel every job of the cluster (does not wait)."""
        if self.conf is None or self.ctld is None or \
                self.ctld.poll() is not None:
            return
        try:
            ids = self.jobs()
            if ids:
                self.cmd(["scancel", "--full", *map(str, ids)], timeout=10)
        except subprocess.TimeoutExpired:
            pass

    def _stop_daemons(self):
        """slurmd and slurmctld: SIGTERM, SIGKILL after 1 s; then munged."""
        procs = [p for p in self._daemon_procs if p is not self.munged]
        kill_pids([p.pid for p in procs if p.poll() is None], grace=1.0)
        if self.munged is not None and self.munged.poll() is None:
            kill_pids([self.munged.pid], grace=1.0)
        for p in self._daemon_procs:
            p.poll()


try:
    import pytest
except ImportError:
    pytest = None

if pytest is not None:
    @pytest.fixture
    def slurm_cluster_factory(tmp_path):
        """make(k=3, **kw) -> started SlurmCluster; each is torn down
        (and checked) when the test ends, pass or fail."""
        made = []
        reason = SlurmCluster.unavailable()

        def make(k=3, **kw):
            if reason:
                pytest.skip(f"slurm cluster: {reason}")
            sl = SlurmCluster(tmp_path / f"s{len(made)}", k, **kw)
            made.append(sl)
            return started_or_skip(sl.start, "slurm cluster")

        yield make
        errors = []
        for sl in made:
            try:
                sl.teardown()
            except Exception as e:          # noqa: BLE001 - report all
                errors.append(str(e))
        assert not errors, errors

    @pytest.fixture
    def slurm_cluster(slurm_cluster_factory):
        """A started 3-node Slurm cluster (SlurmCluster)."""
        return slurm_cluster_factory(3)

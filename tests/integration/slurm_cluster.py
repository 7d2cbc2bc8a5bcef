"""A real Slurm cluster on loopback for the tests of integrations/slurm.

munged with a key made here, slurmctld, and one slurmd per node (slurmd -N
NAME: Debian's slurmd serves several nodes on one host), every node with 8
GPUs as count-only GRES (gres/gpu drops a GPU without File=, so each node's
GPUs are empty files here). A requeued job waits cred_expire before it
starts again: 10 s here (Slurm's default, 120 s, outlasts a test).
PrologSlurmctld and EpilogSlurmctld are
ocs-slurm through a wrapper that names its config and SLURM_CONF (slurmctld
passes neither). Everything lives under one work directory; close() stops
every daemon. Commands (sbatch, squeue, scontrol, scancel) run with
SLURM_CONF set to this cluster's slurm.conf.
"""

import os
import re
import shutil
import signal
import subprocess
import time

import testports

TOOLS = ("munged", "slurmctld", "slurmd", "sbatch", "scontrol", "squeue", "scancel")


def missing_tools():
    """What this machine lacks to run a Slurm cluster ([] when nothing)."""
    return [t for t in TOOLS if not shutil.which(t, path="/usr/sbin:/usr/bin:" +
                                                 os.environ.get("PATH", ""))]


class SlurmCluster:
    def __init__(self, work, nodes, gpus, hook_wrapper, plugin, cluster="ocslab"):
        self.work, self.nodes, self.gpus, self.cluster = work, nodes, gpus, cluster
        self.dir = os.path.join(work, "slurm")
        os.makedirs(self.dir)
        for p in (work, self.dir):  # munged: every dir above its socket must be searchable
            os.chmod(p, 0o755)
        self.conf = os.path.join(self.dir, "slurm.conf")
        self.env = dict(os.environ, SLURM_CONF=self.conf)
        self.procs = []
        self.ctld_port = testports.reserve(2)
        self.node_base = testports.reserve(len(nodes))
        self._munge()
        self._files(hook_wrapper, plugin)

    def _munge(self):
        m = os.path.join(self.dir, "munge")
        os.makedirs(m)
        os.chmod(m, 0o755)
        key = os.path.join(m, "munge.key")
        with open(os.open(key, os.O_WRONLY | os.O_CREAT, 0o400), "wb") as f:
            f.write(os.urandom(1024))
        self.munge_sock = os.path.join(m, "sock")
        subprocess.run(["munged", f"--key-file={key}", f"--socket={self.munge_sock}",
                        f"--pid-file={m}/pid", f"--log-file={m}/log", f"--seed-file={m}/seed"],
                       check=True)
        with open(os.path.join(m, "pid")) as f:
            self.munge_pid = int(f.read())

    def _files(self, hook_wrapper, plugin):
        d = self.dir
        for sub in ("state", "log", "dev") + tuple(f"spool/{n}" for n in self.nodes):
            os.makedirs(os.path.join(d, sub), exist_ok=True)
        for g in range(self.gpus):
            open(os.path.join(d, "dev", f"gpu{g}"), "w").close()
        with open(os.path.join(d, "gres.conf"), "w") as f:
            f.write(f"AutoDetect=off\nName=gpu File={d}/dev/gpu[0-{self.gpus - 1}]\n")
        with open(os.path.join(d, "plugstack.conf"), "w") as f:
            f.write(f"required {plugin}\n")
        first, last = self.node_base, self.node_base + len(self.nodes) - 1
        names = ",".join(self.nodes)
        with open(self.conf, "w") as f:
            f.write(f"""ClusterName={self.cluster}
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={self.ctld_port}
SlurmdPort={self.ctld_port + 1}
AuthType=auth/munge
AuthInfo=socket={self.munge_sock},cred_expire=10
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool/%n
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd-%n.pid
SlurmctldLogFile={d}/log/slurmctld.log
SlurmdLogFile={d}/log/slurmd-%n.log
ProctrackType=proctrack/pgid
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
SchedulerType=sched/builtin
SchedulerParameters=sched_interval=1
ReturnToService=2
MinJobAge=600
SlurmctldDebug=info
SlurmdDebug=info
PlugStackConfig={d}/plugstack.conf
PrologSlurmctld={hook_wrapper}
EpilogSlurmctld={hook_wrapper}
NodeName={names} NodeHostname=localhost NodeAddr=127.0.0.1 Port=[{first}-{last}] CPUs=2 Gres=gpu:{self.gpus} State=UNKNOWN
PartitionName=gpu Nodes={names} Default=YES MaxTime=INFINITE State=UP OverSubscribe=EXCLUSIVE
""")

    def set_topology(self, text):
        """topology.conf beside slurm.conf, and the tree plugin that reads it
        (before start())."""
        with open(os.path.join(self.dir, "topology.conf"), "w") as f:
            f.write(text)
        with open(self.conf, "a") as f:
            f.write("TopologyPlugin=topology/tree\n")

    def start(self, timeout_s=60):
        log = open(os.path.join(self.dir, "daemons.log"), "a")
        self.procs.append(subprocess.Popen(["slurmctld", "-D", "-c", "-f", self.conf],
                                           env=self.env, stdout=log, stderr=log))
        testports.wait_listening("127.0.0.1", self.ctld_port, "slurmctld", timeout_s,
                                 proc=self.procs[0])
        for n in self.nodes:
            self.procs.append(subprocess.Popen(["slurmd", "-D", "-N", n, "-f", self.conf],
                                               env=self.env, stdout=log, stderr=log))
        log.close()
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            out = self.run("sinfo", "-h", "-o", "%D %t").stdout.split()
            if out == [str(len(self.nodes)), "idle"]:
                return
            time.sleep(0.3)
        raise RuntimeError("slurm nodes not idle: " + self.run("sinfo").stdout)

    def run(self, *args, check=False):
        return subprocess.run(list(args), env=self.env, capture_output=True, text=True,
                              check=check, timeout=60)

    def sbatch(self, *args):
        """The job id of an sbatch; raises with sbatch's message when refused."""
        p = self.run("sbatch", "--parsable", *args)
        if p.returncode != 0:
            raise RuntimeError(f"sbatch {' '.join(args)}: {p.stderr.strip()}")
        return p.stdout.strip().split(";")[0]

    def job(self, jobid):
        """scontrol show job as {field: value} ({} when Slurm forgot it)."""
        out = self.run("scontrol", "show", "job", "-o", jobid).stdout
        return dict(re.findall(r"(\w+)=(\S*)", out))

    def wait_state(self, jobid, states, timeout_s=60):
        deadline = time.time() + timeout_s
        j = {}
        while time.time() < deadline:
            j = self.job(jobid)
            if j.get("JobState") in states:
                return j
            time.sleep(0.2)
        return j

    def log_text(self, name):
        """The whole of a log under the cluster's directory ("" when absent)."""
        try:
            with open(os.path.join(self.dir, name), errors="replace") as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def log(self):
        out = []
        for name in ("log/slurmctld.log", "daemons.log"):
            try:
                with open(os.path.join(self.dir, name), errors="replace") as f:
                    out.append(f"--- {name} (tail)\n" + "".join(f.readlines()[-40:]))
            except FileNotFoundError:
                pass
        return "\n".join(out)

    def close(self):
        if self.procs:
            self.run("scancel", "--user", "root")  # this cluster's jobs (SLURM_CONF)
            time.sleep(1)
        for p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
        for p in reversed(self.procs):
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.procs = []
        try:
            os.kill(self.munge_pid, signal.SIGTERM)
        except ProcessLookupError:
            pass

#!/usr/bin/env python3
"""Slurm drives ocsd (issue 25): a real Slurm cluster (munged, slurmctld, 8
slurmd with 8 GPUs each) on loopback, its PrologSlurmctld and
EpilogSlurmctld the ocs-slurm of integrations/slurm, its sbatch given --ocs
by spank_ocs.so, on the lab fabric (ocs-devsim) under ocsd. Jobs go through
real sbatch and scancel; the devices are read with ncclient.

  1. a 2-node ring job: while its script runs, the devices hold exactly the
     circuits of `ocsctl circuits --job`, the ring's pods joined with the
     links asked; after it ends nothing of it is left;
  2. four jobs at once: all run, no port shared, the devices hold their union;
     a job with --ocs=delta=FILE planned by delta-fast from that file;
  3. every OCS device drained: the job does not start, scontrol shows
     ocsd's reason; after undrain it runs;
  4. scancel while the prolog waits for ACTIVE: nothing is left;
  5. kill -9 of ocsd while a prolog waits: the job runs with its circuits or
     is requeued with nothing on the devices; ocsd down when a job ends: its
     release is spooled and logged, and the next prolog releases it first;
  6. a malformed --ocs is refused by sbatch, naming what is wrong;
  7. on an OCSTrx ring domain (ocsd restarted on one, same address),
     --ocs=ring,tp=16 on 2 nodes of 8 GPUs: one TP ring of 2 nodes, every
     node as `ocsctl rings` says, back on loopback after the job;
  8. on a rail-OCS fabric, --ocs=rail with `ocs-slurm watch` running: a
     GPU of the job failed and swapped by ocsd is named in the job's
     AdminComment.

Exits 77 (ctest: skipped), saying why, when the machine lacks Slurm, munge
or the SPANK plugin. Usage: test_slurm.py BUILD_DIR SOURCE_DIR
"""

import json
import os
import subprocess
import sys
import time
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ocsd_fleet  # noqa: E402
import slurm_cluster  # noqa: E402
import testports  # noqa: E402

BUILD, SRC = sys.argv[1], sys.argv[2]
NODES = [f"n{i}" for i in range(1, 9)]
PLUGIN = os.path.join(BUILD, "integrations", "slurm", "spank_ocs.so")
HOOK = os.path.join(SRC, "integrations", "slurm", "ocs-slurm")
OCSCTL = os.path.join(BUILD, "northbound", "ocsctl", "ocsctl")
SKIP = 77


def skip_reason():
    missing = slurm_cluster.missing_tools()
    if missing:
        return ("Slurm or munge missing (" + ", ".join(missing) +
                "): deploy/install-deps.sh installs slurmctld, slurmd, slurm-client, munge")
    if not os.path.exists(PLUGIN):
        return f"{PLUGIN} not built: libslurm-dev (slurm/spank.h) was missing at configure time"
    if os.geteuid() != 0:
        return "a Slurm cluster of slurmd's on one host runs as root (SlurmdUser=root)"
    return None


class Test:
    def __init__(self):
        self.fleet = ocsd_fleet.Fleet(BUILD, SRC, prefix="ocsd-slurm-")
        self.script = ocsd_fleet.Script("test_slurm", self.fleet)
        self.check = self.script.check
        self.work = self.fleet.work
        self.port = testports.reserve(1)
        self.slurm = self.ring = self.rail = self.watch = None

    # ---- set-up ----
    def start(self):
        f = self.fleet
        f.start_devices()
        f.start_ocsd("--listen", f"127.0.0.1:{self.port}")
        self.conf = os.path.join(self.work, "ocs-slurm.conf")
        self.hostmap = os.path.join(self.work, "hostmap.json")
        with open(self.conf, "w") as c:
            c.write(f"""[ocs-slurm]
server = 127.0.0.1:{self.port}
insecure = true
ocsctl = {OCSCTL}
scontrol = /usr/bin/scontrol
hostmap = {self.hostmap}
default = none
wait_timeout_s = 60
release_retry_s = 3
spool = {self.work}/spool
log_file = {self.work}/ocs-slurm.log
""")
        wrapper = self.wrapper = os.path.join(self.work, "ocs-slurm-hook")
        self.slurm = slurm_cluster.SlurmCluster(self.work, NODES, 8, wrapper, PLUGIN)
        with open(wrapper, "w") as w:
            w.write(f"#!/bin/sh\nSLURM_CONF={self.slurm.conf}; export SLURM_CONF\n"
                    f"exec /usr/bin/python3 {HOOK} --config {self.conf} \"$@\"\n")
        os.chmod(wrapper, 0o755)
        # the host map from the fabric file; --spread: n1..n4 on pods 0..3
        hm = self.slurm.run("/usr/bin/python3", HOOK, "hostmap", "--fabric", f.cfg,
                            "--nodes", "n[1-8]", "--gpus-per-node", "8", "--spread", check=True)
        with open(self.hostmap, "w") as out:
            out.write(hm.stdout)
        self.map = json.loads(hm.stdout)["nodes"]
        self.check([self.map[n]["pod"] for n in NODES] == [0, 1, 2, 3, 0, 1, 2, 3] and
                   self.map["n2"]["gpus"] == list(range(16, 24)),
                   f"hostmap --spread: nodes over the pods in turn ({self.map})")
        topo = self.slurm.run("/usr/bin/python3", HOOK, "topology", "--hostmap", self.hostmap,
                              check=True).stdout
        self.check("SwitchName=leaf2 Nodes=n2" in topo and
                   "SwitchName=pod1 Switches=leaf2,leaf3" in topo,
                   "topology: leaves as switches, pods above them")
        again = self.slurm.run("/usr/bin/python3", HOOK, "topology", "--fabric", f.cfg, "--nodes",
                               "n[1-8]", "--gpus-per-node", "8", "--spread", check=True).stdout
        self.check(again.splitlines()[1:] == topo.splitlines()[1:],
                   "topology from the fabric file = topology from its host map")
        self.slurm.set_topology(topo)
        self.slurm.start()
        shown = self.slurm.run("scontrol", "show", "topology").stdout
        self.check("SwitchName=pod1 Level=1" in shown and "SwitchName=leaf2 Level=0" in shown,
                   f"slurmctld took the topology.conf (tree plugin): {shown.splitlines()[:2]}")

    # ---- helpers ----
    def ocs(self, *args):
        p = subprocess.run([OCSCTL, "--server", f"127.0.0.1:{self.port}", "--insecure",
                            "--json", *args], capture_output=True, text=True, timeout=60)
        return p.returncode, (json.loads(p.stdout) if p.stdout.strip() else {}), p.stderr

    def ocs_job(self, jobid):
        rc, out, _ = self.ocs("job", "show", f"slurm-ocslab-{jobid}")
        return out.get("job", {}) if rc == 0 else {}

    def submit(self, nodes, ocs, *extra):
        script = os.path.join(self.work, "job.sh")
        with open(script, "w") as s:
            s.write(f"#!/bin/sh\ntouch {self.work}/started.$SLURM_JOB_ID\n"
                    f"i=0; while [ ! -e {self.work}/go.$SLURM_JOB_ID ] && [ $i -lt 900 ]; "
                    "do sleep 0.1; i=$((i+1)); done\n")
        args = ["-N", str(len(nodes)), "-w", ",".join(nodes), "--gres=gpu:8",
                "-o", "/dev/null"] + ([f"--ocs={ocs}"] if ocs else []) + list(extra) + [script]
        return self.slurm.sbatch(*args)

    def finish(self, jobid):
        open(os.path.join(self.work, f"go.{jobid}"), "w").close()
        return self.slurm.wait_state(jobid, ("COMPLETED",)).get("JobState")

    def wait_released(self, jobid, timeout_s=30):
        deadline = time.time() + timeout_s
        j = {}
        while time.time() < deadline:
            j = self.ocs_job(jobid)
            if j.get("state") == "JOB_STATE_RELEASED":
                return True
            time.sleep(0.2)
        return j.get("state")

    def on_devices(self):
        """{(device, in, out)} read from every device with ncclient."""
        return {(d, i, o) for d, rows in self.fleet.read_devices().items() for (i, o, _) in rows}

    @staticmethod
    def xcs(circuits):
        return {(x["device"], x["in_port"], x["out_port"]) for c in circuits
                for x in c["cross_connects"]}

    def circuits(self, jobid):
        rc, out, err = self.ocs("circuits", "--job", f"slurm-ocslab-{jobid}")
        return out.get("circuits", []) if rc == 0 else []

    # ---- 1 ----
    def ring_job(self):
        nodes = ["n1", "n2"]
        jid = self.submit(nodes, "ring,links=2")
        j = self.slurm.wait_state(jid, ("RUNNING",))
        self.check(j.get("JobState") == "RUNNING", f"ring job {jid} runs ({j.get('JobState')})")
        oj = self.ocs_job(jid)
        self.check(oj.get("state") == "JOB_STATE_ACTIVE",
                   f"ocsd job slurm-ocslab-{jid} ACTIVE while the script runs ({oj.get('state')})")
        circ = self.circuits(jid)
        pods = sorted({self.map[n]["pod"] for n in nodes})
        self.check(len(circ) == 2 and all(sorted((c["pod_a"], c["pod_b"])) == pods for c in circ),
                   f"ring,links=2 of pods {pods}: 2 circuits between them ({len(circ)})")
        have = self.on_devices()
        self.check(have == self.xcs(circ) and have,
                   f"the devices hold exactly `ocsctl circuits --job` ({len(have)} cross-connects)")
        self.check(self.fleet.one_way(self.fleet.read_devices()) == [],
                   "every circuit is two-way on the devices")
        self.check(self.finish(jid) == "COMPLETED", "the ring job completes")
        self.check(self.wait_released(jid) is True, "its ocsd job is released after it ends")
        self.check(self.on_devices() == set(), "nothing of it is left on the devices")

    # ---- 2 ----
    def four_jobs(self):
        pairs = [["n1", "n2"], ["n3", "n4"], ["n5", "n6"], ["n7", "n8"]]
        ids = [self.submit(p, "ring") for p in pairs]
        states = [self.slurm.wait_state(i, ("RUNNING",)).get("JobState") for i in ids]
        self.check(states == ["RUNNING"] * 4, f"four jobs at once all run ({states})")
        per = {i: self.xcs(self.circuits(i)) for i in ids}
        ports = [(d, "in", i) for x in per.values() for (d, i, _) in x] + \
            [(d, "out", o) for x in per.values() for (d, _, o) in x]
        self.check(all(per.values()) and len(ports) == len(set(ports)),
                   f"no port shared between the four jobs ({[len(x) for x in per.values()]})")
        self.check(self.on_devices() == set().union(*per.values()),
                   "the devices hold the four jobs' circuits, nothing else")
        done = [self.finish(i) for i in ids]
        self.check(done == ["COMPLETED"] * 4 and all(self.wait_released(i) is True for i in ids),
                   "the four complete and are released")
        self.check(self.on_devices() == set(), "after the four: devices empty")

    # ---- 2b ----
    def delta_job(self):
        """--ocs=delta=FILE: the spec file is read at sbatch on the submit host
        and reaches ocsd (planner delta-fast) through the prolog."""
        spec = os.path.join(self.work, "parallelism.json")
        with open(spec, "w") as f:
            json.dump({"layers": 8, "hidden": 2048, "ffn": 8192, "heads": 16, "vocab": 32000,
                       "tp": 2, "pp": 2, "seq_len": 2048, "micro_batches": 8,
                       "bandwidth_gbps": 400, "gpus_per_pod_per_replica": 4,
                       "replicas_per_pod_set": 2, "seed": 7}, f, indent=1)
        jid = self.submit(["n1", "n2"], f"delta={spec}")
        j = self.slurm.wait_state(jid, ("RUNNING",))
        self.check(j.get("JobState") == "RUNNING", f"delta job {jid} runs ({j.get('JobState')})")
        oj = self.ocs_job(jid)
        self.check(oj.get("figures", {}).get("planner") == "delta-fast" and
                   oj.get("spec", {}).get("parallelism", {}).get("gpus_per_pod_per_replica") == 4,
                   f"the spec file reached ocsd: planned by delta-fast ({oj.get('figures')})")
        self.check(self.on_devices() == self.xcs(self.circuits(jid)) != set(),
                   "delta job: the devices hold exactly its circuits")
        self.check(self.finish(jid) == "COMPLETED" and self.wait_released(jid) is True and
                   self.on_devices() == set(), "delta job: released, nothing left")

    # ---- 3 ----
    def refused(self):
        devs = [self.fleet.device_name(d) for d in range(self.fleet.N_DEV)]
        for d in devs:
            self.ocs("drain", d)
        jid = self.submit(["n1", "n2"], "ring")
        deadline = time.time() + 30
        j = {}
        while time.time() < deadline:  # refused, then requeued: PENDING again
            j = self.slurm.job(jid)
            if "ocsd" in j.get("AdminComment", "") and j.get("JobState") == "PENDING":
                break
            time.sleep(0.2)
        show = self.slurm.run("scontrol", "show", "job", jid).stdout
        print("refused job:", " ".join(ln.strip() for ln in show.splitlines()
                                       if "JobState" in ln or "AdminComment" in ln), flush=True)
        self.check("AdminComment=ocsd refused" in show,
                   f"drained fabric: scontrol show job gives ocsd's reason "
                   f"({j.get('AdminComment')!r})")
        self.check(not os.path.exists(os.path.join(self.work, f"started.{jid}")) and
                   j.get("JobState") == "PENDING" and j.get("Restarts") != "0",
                   f"the refused job did not start ({j.get('JobState')}, {j.get('Reason')})")
        for d in devs:
            self.ocs("undrain", d)
        j = self.slurm.wait_state(jid, ("RUNNING",), timeout_s=60)
        self.check(j.get("JobState") == "RUNNING", f"after undrain it runs ({j.get('JobState')})")
        self.check(self.on_devices() == self.xcs(self.circuits(jid)) != set(),
                   "after undrain: its circuits on the devices")
        self.check("AdminComment=ocsd: circuits in place" in
                   self.slurm.run("scontrol", "show", "job", jid).stdout,
                   "after undrain: AdminComment says the circuits are in place")
        self.check(self.finish(jid) == "COMPLETED" and self.wait_released(jid) is True,
                   "it completes and is released")

    def submitted(self, jid, timeout_s=30):
        """Waits until ocsd logged the job's submission (the prolog is waiting)."""
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            if f"job slurm-ocslab-{jid}," in self.fleet.log():
                return True
            time.sleep(0.05)
        return False

    # ---- 4 ----
    def cancel_waiting(self):
        for d in range(self.fleet.N_DEV):
            self.fleet.set_faults(d, "hang@commit=4000")
        jid = self.submit(["n3", "n4"], "ring")
        self.check(self.submitted(jid), "scancel: the prolog submitted the job")
        self.slurm.run("scancel", jid, check=True)
        j = self.slurm.wait_state(jid, ("CANCELLED",))
        self.check(j.get("JobState") == "CANCELLED", f"scancel: job cancelled ({j})")
        for d in range(self.fleet.N_DEV):
            self.fleet.set_faults(d, "")
        deadline = time.time() + 40
        while time.time() < deadline and (self.ocs_job(jid).get("state") not in
                                          ("JOB_STATE_RELEASED", "JOB_STATE_FAILED")):
            if self.epilog_killed(jid):
                break
            time.sleep(0.2)
        if self.epilog_killed(jid):
            # slurmctld killed the epilog with the prolog (they raced: seen
            # under load); the prolog's ends.* entry has the next run of
            # ocs-slurm release the job: here an operator's sweep
            print(f"scancel: slurmctld killed job {jid}'s epilog too; sweeping", flush=True)
            self.check(self.sweep() == 0, "scancel, epilog killed: ocs-slurm sweep succeeds")
        oj = self.ocs_job(jid)
        self.check(oj.get("state") in ("JOB_STATE_RELEASED", "JOB_STATE_FAILED") and
                   not oj.get("circuits"),
                   f"scancel while waiting: the ocsd job ended with nothing ({oj.get('state')})")
        self.check(not os.path.exists(os.path.join(self.work, f"started.{jid}")),
                   "scancel while waiting: the script never ran")
        self.check(self.on_devices() == set(), "scancel while waiting: nothing on the devices")

    def epilog_killed(self, jobid):
        log = self.slurm.log_text("log/slurmctld.log")
        return f"JobId={jobid} EpilogSlurmctld killed by signal 9" in log

    def sweep(self):
        return self.slurm.run(self.wrapper, "sweep").returncode

    # ---- 4b ----
    def ended_without_epilog(self):
        """A prolog whose job then ended without any epilog (slurmctld killed
        both, or lost the job): its ocsd job is ACTIVE and nothing else will
        release it. ocs-slurm sweep (and every prolog and epilog) releases it
        once Slurm says the job ended, and leaves a running job alone."""
        run = self.submit(["n1", "n2"], "ring")
        j = self.slurm.wait_state(run, ("RUNNING",))
        self.check(j.get("JobState") == "RUNNING", f"sweep: job {run} runs ({j.get('JobState')})")
        gone = "990001"  # a job id slurmctld never had ("Invalid job id")
        env = dict(self.slurm.env, SLURM_SCRIPT_CONTEXT="prolog_slurmctld", SLURM_JOB_ID=gone,
                   SLURM_JOB_NODELIST="n[3-4]", SLURM_CLUSTER_NAME="ocslab", SPANK_OCS="ring")
        p = subprocess.run([self.wrapper], env=env, capture_output=True, text=True, timeout=120)
        ends = os.path.join(self.work, "spool", f"ends.slurm-ocslab-{gone}")
        self.check(p.returncode == 0 and self.ocs_job(gone).get("state") == "JOB_STATE_ACTIVE"
                   and os.path.exists(ends),
                   f"sweep: a prolog run by hand leaves its job ACTIVE and ends.* spooled "
                   f"(rc {p.returncode}, {p.stderr.strip()[-200:]})")
        self.check(self.sweep() == 0, "sweep: ocs-slurm sweep succeeds")
        self.check(self.ocs_job(gone).get("state") == "JOB_STATE_RELEASED" and
                   not os.path.exists(ends) and
                   not os.path.exists(os.path.join(self.work, "spool",
                                                   f"lock.slurm-ocslab-{gone}")),
                   "sweep: the ended job's ocsd job is released, its entry and lock file gone")
        self.check(self.ocs_job(run).get("state") == "JOB_STATE_ACTIVE" and
                   os.path.exists(os.path.join(self.work, "spool", f"ends.slurm-ocslab-{run}")),
                   "sweep: the running job's ocsd job and entry are left alone")
        self.check(self.on_devices() == self.xcs(self.circuits(run)),
                   "sweep: the devices hold the running job's circuits only")
        self.check(self.finish(run) == "COMPLETED" and self.wait_released(run) is True,
                   "sweep: the running job completes and is released")
        self.check(not os.path.exists(os.path.join(self.work, "spool",
                                                   f"ends.slurm-ocslab-{run}")),
                   "sweep: its epilog removed its ends.* entry")

    # ---- 5 ----
    def kill_ocsd(self):
        for d in range(self.fleet.N_DEV):
            self.fleet.set_faults(d, "hang@commit=4000")
        jid = self.submit(["n5", "n6"], "ring")
        self.check(self.submitted(jid), "kill -9: the prolog submitted the job")
        self.fleet.kill_ocsd()
        for d in range(self.fleet.N_DEV):
            self.fleet.set_faults(d, "")
        self.fleet.start_ocsd("--listen", f"127.0.0.1:{self.port}")
        deadline = time.time() + 90
        j = {}
        while time.time() < deadline:
            j = self.slurm.job(jid)
            if j.get("JobState") == "RUNNING" or \
                    (j.get("JobState") == "PENDING" and j.get("Restarts", "0") != "0"):
                break
            time.sleep(0.2)
        state = j.get("JobState")
        if state == "RUNNING":
            have, want = self.on_devices(), self.xcs(self.circuits(jid))
            self.check(have == want != set(),
                       "kill -9 of ocsd: the job runs with its circuits on the devices")
            self.check(self.finish(jid) == "COMPLETED" and self.wait_released(jid) is True,
                       "kill -9 of ocsd: it completes and is released")
        else:
            self.check(state == "PENDING", f"kill -9 of ocsd: the job runs or is requeued "
                       f"({state}, {j.get('Reason')})")
            self.check(self.on_devices() == set(), "kill -9 of ocsd: requeued, devices empty")
            self.slurm.run("scancel", jid)
        print(f"kill -9 of ocsd while the prolog waited: the job {state}", flush=True)
        self.check(self.on_devices() == set(), "after the kill -9 case: devices empty")

    # ---- 5b ----
    def spooled_release(self):
        """ocsd down when a job ends: the epilog's release fails for
        release_retry_s (3 s), is spooled and logged; the next job's prolog
        releases it first once ocsd is back."""
        jid = self.submit(["n7", "n8"], "ring")
        j = self.slurm.wait_state(jid, ("RUNNING",))
        self.check(j.get("JobState") == "RUNNING", f"spool: job {jid} runs ({j.get('JobState')})")
        held = self.xcs(self.circuits(jid))
        self.fleet.stop_ocsd()
        self.check(self.finish(jid) == "COMPLETED", "spool: the job completes with ocsd down")
        # ocsd down: the epilog cannot even list the job's ocsd jobs
        spooled = os.path.join(self.work, "spool", f"every.slurm-ocslab-{jid}")
        deadline = time.time() + 30
        while time.time() < deadline and not os.path.exists(spooled):
            time.sleep(0.2)
        self.check(os.path.exists(spooled), "spool: the failed release is spooled")
        with open(os.path.join(self.work, "ocs-slurm.log")) as f:
            logged = f"release of slurm-ocslab-{jid} spooled" in f.read()
        self.check(logged, "spool: the failed release is logged")
        self.check(held and held <= self.on_devices(),
                   "spool: its circuits stay on the devices while ocsd is down")
        self.fleet.start_ocsd("--listen", f"127.0.0.1:{self.port}")
        nxt = self.submit(["n1", "n2"], "ring")
        j = self.slurm.wait_state(nxt, ("RUNNING",))
        self.check(j.get("JobState") == "RUNNING" and self.wait_released(jid) is True and
                   not os.path.exists(spooled),
                   "spool: the next prolog released the spooled job first")
        self.check(self.on_devices() == self.xcs(self.circuits(nxt)),
                   "spool: the devices hold the next job's circuits only")
        self.check(self.finish(nxt) == "COMPLETED" and self.wait_released(nxt) is True,
                   "spool: the next job completes and is released")

    # ---- 6 ----
    def bad_request(self):
        for ocs, want in (("rnig", "unknown pattern 'rnig'"), ("ring,links=0", "links=0"),
                          ("delta=/nonexistent.json", "/nonexistent.json")):
            try:
                jid = self.submit(["n1"], ocs)
                err = ""
                self.slurm.run("scancel", jid)
            except RuntimeError as e:
                err = str(e)
            self.check(want in err, f"--ocs={ocs} refused by sbatch ({err!r})")

    def move_to(self, fleet, nodes, gpus):
        """ocsd on another fabric at the same address, and the host map
        written for it: the Slurm cluster and ocs-slurm's config stay."""
        fleet.start_devices()
        fleet.start_ocsd("--listen", f"127.0.0.1:{self.port}")
        hm = self.slurm.run("/usr/bin/python3", HOOK, "hostmap", "--fabric", fleet.cfg,
                            "--nodes", nodes, "--gpus-per-node", str(gpus), check=True)
        with open(self.hostmap, "w") as out:
            out.write(hm.stdout)

    # ---- 7 ----
    def ring_domain(self):
        """The same Slurm cluster on an OCSTrx ring domain (16 nodes of 8
        GPUs, ocs-transceiver agents), ocsd restarted on it at the same
        address: --ocs=ring,tp=16 on 2 nodes is one TP ring of 2 nodes."""
        self.fleet.stop_ocsd()
        self.ring = ocsd_fleet.RingFleet(BUILD, SRC, tors=4, nodes_per_tor=4, gpus_per_node=8,
                                         prefix="ocsd-slurm-ring-")
        self.move_to(self.ring, "n[1-8]", 8)
        jid = self.submit(["n1", "n2"], "ring,tp=16")
        j = self.slurm.wait_state(jid, ("RUNNING",))
        self.check(j.get("JobState") == "RUNNING", f"tp ring job {jid} runs ({j.get('JobState')})")
        rc, out, err = self.ocs("rings", "--job", f"slurm-ocslab-{jid}")
        rings = out.get("rings", []) if rc == 0 else []
        self.check(len(rings) == 1 and len(rings[0]["nodes"]) == 2,
                   f"--ocs=ring,tp=16 on 16 GPUs: one ring of 2 nodes ({rings or err})")
        want = ocsd_fleet.ring_bundles([types.SimpleNamespace(nodes=r["nodes"]) for r in rings])
        bad = []
        for node in range(self.ring.N_DEV):
            _, bundles = self.ring.read_node(node)
            for b in (0, 1):
                path, _, _, peer = bundles.get(b, ("loopback", 0, None, None))
                exp = want.get(node, {}).get(b)
                if (exp is None and path != "loopback") or \
                        (exp is not None and (path != "external" or peer != exp)):
                    bad.append(f"node {node} bundle {b}: {path} to {peer}, want {exp}")
        self.check(want and not bad, "ring domain: every node (ncclient) holds what "
                   "`ocsctl rings` says" + (": " + "; ".join(bad[:4]) if bad else ""))
        self.check(self.finish(jid) == "COMPLETED" and self.wait_released(jid) is True,
                   "the tp ring job completes and is released")
        back = [n for n in want if any(self.ring.read_node(n)[1].get(b, ("loopback",))[0] !=
                                       "loopback" for b in (0, 1))]
        self.check(not back, f"after it: its nodes are back on loopback ({back})")

    # ---- 8 ----
    def rail_fabric(self):
        """The cluster on a rail-OCS fabric (6 servers of 4 GPUs, one spare per
        OCS): --ocs=rail on n1 (server 0), `ocs-slurm watch` running; a GPU
        of the job failed by the operator is swapped by ocsd (spare server)
        and the job's AdminComment says so."""
        self.ring.stop_ocsd()
        self.rail = ocsd_fleet.RailFleet(BUILD, SRC, prefix="ocsd-slurm-rail-")
        self.move_to(self.rail, "n[1-6]", 4)
        self.watch = subprocess.Popen(["/usr/bin/python3", HOOK, "--config", self.conf, "watch"],
                                      env=self.slurm.env)
        jid = self.submit(["n1"], "rail")
        j = self.slurm.wait_state(jid, ("RUNNING",))
        self.check(j.get("JobState") == "RUNNING", f"rail job {jid} runs ({j.get('JobState')})")
        gpus = sorted(g["gpu"] for g in self.ocs_job(jid).get("spec", {}).get(
            "placement", {}).get("gpus", []))
        self.check(gpus == [0, 1, 2, 3], f"--ocs=rail on n1: ocsd holds server 0's GPUs ({gpus})")
        self.check(self.watch.poll() is None, "ocs-slurm watch is running")
        time.sleep(1)  # the watch stream open before the fault
        rc, _, err = self.ocs("gpu", "fail", "1")
        self.check(rc == 0, f"ocsctl gpu fail 1 ({err.strip()})")
        deadline = time.time() + 20
        show = ""
        while time.time() < deadline:
            show = self.slurm.run("scontrol", "show", "job", jid).stdout
            if "AdminComment=ocsd: GPU 1 failed" in show:
                break
            time.sleep(0.2)
        line = next((ln.strip() for ln in show.splitlines() if "AdminComment" in ln), "")
        self.check("AdminComment=ocsd: GPU 1 failed; spare server" in line,
                   f"the swap of the job's GPU 1 is in its AdminComment ({line})")
        self.check(self.finish(jid) == "COMPLETED" and self.wait_released(jid) is True,
                   "the rail job completes and is released")

    def main(self):
        t0 = time.time()
        self.start()
        print(f"cluster up in {time.time() - t0:.1f} s", flush=True)
        for step in (self.bad_request, self.ring_job, self.four_jobs, self.delta_job, self.refused,
                     self.cancel_waiting, self.ended_without_epilog, self.kill_ocsd, self.spooled_release,
                     self.ring_domain, self.rail_fabric):
            t = time.time()
            step()
            print(f"{step.__name__}: {time.time() - t:.1f} s", flush=True)

    def dump(self):
        if self.slurm:
            print(self.slurm.log())
        try:
            with open(os.path.join(self.work, "ocs-slurm.log")) as f:
                print("--- ocs-slurm.log (tail)\n" + "".join(f.readlines()[-40:]))
        except FileNotFoundError:
            pass

    def run(self):
        def body():
            try:
                self.main()
            finally:
                if self.script.failures or sys.exc_info()[0]:
                    self.dump()
                if self.slurm:
                    self.slurm.close()
                if self.watch:
                    self.watch.terminate()
                    self.watch.wait()
                for other in (self.ring, self.rail):
                    if other:
                        if self.script.failures:
                            other.dump_logs()
                        other.close()
                        other.remove()
        return self.script.run(body)


if __name__ == "__main__":
    why = skip_reason()
    if why:
        print(f"test_slurm: skipped: {why}")
        sys.exit(SKIP)
    sys.exit(Test().run())

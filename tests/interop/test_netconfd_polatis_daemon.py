#!/usr/bin/python3
"""Driver of test_netconfd_polatis.sh for ctest test_netconfd_polatis_daemon:
ocsd drives netconfd (yuma123, not written here) loaded with ocsd's
optical-switch and polatis-switch modules, writable running and no
candidate as a Polatis switch offers, END TO END: a one-device fabric file
whose device is `model: polatis` at netconfd's address (behind the private
sshd the shell script runs, logged in with its client key), ocsd started on
it, `ocsctl job submit` -> ACTIVE, the device read with ncclient (the job's
two one-way pairs are in running, in the port map's numbering),
`ocsctl circuits` names them, `ocsctl drift` is empty after a
reconciliation pass, `ocsctl devices` shows the device connected, healthy,
with the 2 cross-connects (within 40 s: a connect that netconfd leaves
unanswered ends at ocsd's setup deadline and is made again), `ocsctl job release` -> RELEASED and the pairs
are gone; ocsd exits 0 on SIGTERM.

netconfd has no SIL code for these modules, so it serves none of their
config false data (product-information, port-config/port/status,
opm-power): ocsd reads a pair whose ports report no status as usable
(sb_model.c), and nothing here checks what ocsd shows of the product.

The fabric (pods 2, one leaf per pod, one spine per pod, tau 1, k-ocs 2,
straight wiring) has one OCS device: ocsd's port p of it is the pod p
spine's fibre, ingress 1+p and egress 3+p (the default port map of a 2 x 2
switch). A one-link job between leaf 0 (pod 0) and leaf 1 (pod 1) is the
circuit 0 -> 1 and 1 -> 0 on it: the pairs ingress 1 -> egress 4 and
ingress 2 -> egress 3.

usage: test_netconfd_polatis_daemon.py PORT USER PRIVATE-KEY
       (environment: OCSD and OCSCTL, the binaries)
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import ncclient.transport.ssh
from ncclient import manager

ncclient.transport.ssh.TICK = 0.001  # ncclient polls every 0.1 s by default (TOOLCHAIN.md)

OPSW = "http://www.polatis.com/yang/optical-switch"
XC = ("subtree", '<cross-connects xmlns="%s"/>' % OPSW)
WANT = {1: 4, 2: 3}  # ingress -> egress of the job's circuit (see above)
JOB = {
    "id": "netconfd-job",
    "placement": {"gpus": [{"gpu": 0, "leaf": 0, "pod": 0}, {"gpu": 1, "leaf": 1, "pod": 1}]},
    "leaf_demand": {"pairs": [{"a": 0, "b": 1, "links": 1}]},
}


def running_pairs(port, user, key):
    """{ingress: egress} in netconfd's running, read with a session of our own."""
    with manager.connect(host="127.0.0.1", port=port, username=user, key_filename=key,
                         hostkey_verify=False, allow_agent=False, look_for_keys=False,
                         timeout=20) as m:
        data = m.get_config(source="running", filter=XC).data_ele
    return {int(p.findtext("{%s}ingress" % OPSW)): int(p.findtext("{%s}egress" % OPSW))
            for p in data.iter("{%s}pair" % OPSW)}


class Ocsd:
    """ocsd on the one-device fabric, in work directory `work`."""

    def __init__(self, work, port, user, key):
        self.work = work
        self.cfg = os.path.join(work, "fabric.json")
        fabric = {"ocsd-fabric:fabric": {
            "name": "netconfd-polatis", "pods": 2, "k-leaf": 1, "k-spine": 1, "tau": 1,
            "k-ocs": 2, "wiring": "straight",
            "devices": {"transport": "ssh", "address": "127.0.0.1", "port-base": port,
                        "username": user, "private-key-file": key,
                        "accept-any-host-key": True, "model": "polatis"}}}
        with open(self.cfg, "w") as f:
            json.dump(fabric, f, indent=2)
        os.makedirs(os.path.join(work, "state"))
        self.log_path = os.path.join(work, "ocsd.log")
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen(
                [os.environ["OCSD"], "--config", self.cfg, "--state-dir",
                 os.path.join(work, "state"), "--listen", "127.0.0.1:0", "--metrics-listen",
                 "127.0.0.1:0", "--insecure", "--reconcile-interval-s", "1"],
                stdout=log, stderr=log)
        deadline = time.time() + 30
        while True:
            m = re.search(r"gRPC on \S+ \(port (\d+)", self.log())
            if m:
                self.target = "127.0.0.1:" + m.group(1)
                return
            if self.proc.poll() is not None or time.time() > deadline:
                raise RuntimeError("ocsd did not start:\n" + self.log())
            time.sleep(0.05)

    def log(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def ctl(self, *args):
        """ocsctl's (exit code, stdout + stderr)."""
        r = subprocess.run([os.environ["OCSCTL"], "--insecure", "--server", self.target] +
                           list(args), capture_output=True, text=True, timeout=120)
        return r.returncode, r.stdout + r.stderr

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


def main():
    port, user, key = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    work = tempfile.mkdtemp(prefix="netconfd-polatis-daemon-")
    ocsd = None
    failures = []

    def check(cond, what):
        if not cond:
            failures.append(what)
            print("FAIL:", what, flush=True)

    try:
        check(running_pairs(port, user, key) == {}, "netconfd's running holds pairs at start")
        t0 = time.time()
        ocsd = Ocsd(work, port, user, key)
        job = os.path.join(work, "job.json")
        with open(job, "w") as f:
            json.dump(JOB, f)
        rc, out = ocsd.ctl("job", "submit", job)
        print(out, end="", flush=True)
        check(rc == 0 and "ACTIVE" in out.upper(), f"ocsctl job submit: exit {rc}: {out}")
        got = running_pairs(port, user, key)
        check(got == WANT, f"netconfd's running after the submit holds {got}, want {WANT}")
        rc, out = ocsctl_json(ocsd, "circuits", "--job", JOB["id"])
        xcs = sorted((x["device"], x["in_port"], x["out_port"])
                     for c in out.get("circuits", []) for x in c["cross_connects"])
        check(xcs == [("ocs-g0-d0", 0, 1), ("ocs-g0-d0", 1, 0)],
              f"ocsctl circuits reports {xcs}")
        # a reconciliation pass (every 1 s) reads the pairs back as ocsd's own
        time.sleep(2.5)
        rc, out = ocsctl_json(ocsd, "drift")
        check(rc == 0 and not out.get("drift"), f"ocsctl drift after the submit: {out}")
        # netconfd now and then leaves the first RPC of a new session
        # unanswered (the reconciliation's session, set up while the job's
        # transaction runs): ocsd's setup deadline (4 x rpc-timeout-ms,
        # 20 s) ends that connect and the next pass connects again
        deadline = time.time() + 40
        while True:
            rc, out = ocsctl_json(ocsd, "devices")
            dev = (out.get("devices") or [{}])[0]
            state = (dev.get("session"), dev.get("health"), dev.get("circuits"))
            if state == ("SESSION_STATE_CONNECTED", "DEVICE_HEALTH_HEALTHY", 2) or \
                    time.time() > deadline:
                break
            time.sleep(0.5)
        rc, text = ocsd.ctl("devices")
        print(text, end="", flush=True)
        check(state == ("SESSION_STATE_CONNECTED", "DEVICE_HEALTH_HEALTHY", 2),
              f"ocsctl devices: {out}")
        rc, out = ocsd.ctl("job", "release", JOB["id"])
        print(out, end="", flush=True)
        check(rc == 0 and "released" in out.lower(), f"ocsctl job release: exit {rc}: {out}")
        got = running_pairs(port, user, key)
        check(got == {}, f"netconfd's running after the release holds {got}")
        code = ocsd.stop()
        check(code == 0, f"ocsd exit code on SIGTERM: {code}")
        print(f"submit, read back, release through ocsd: {time.time() - t0:.1f} s", flush=True)
    except Exception as e:  # reported with ocsd's log
        check(False, repr(e))
    finally:
        if ocsd:
            ocsd.stop()
            if failures:
                print("--- ocsd log (tail)\n" + "".join(ocsd.log().splitlines(True)[-40:]))
        shutil.rmtree(work, ignore_errors=True)
    print("netconfd polatis daemon interop:",
          "FAILED" if failures else "all checks passed")
    return 1 if failures else 0


def ocsctl_json(ocsd, *args):
    rc, out = ocsd.ctl("--json", *args)
    try:
        return rc, json.loads(out) if rc == 0 else {}
    except ValueError:
        return rc, {"unparsed": out}


if __name__ == "__main__":
    sys.exit(main())

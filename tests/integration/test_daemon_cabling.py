#!/usr/bin/python3
"""test_daemon_cabling.py - issue 23's cabling check on the REAL ocsd, from
the operator's side: a swapped fibre is reported, the planner keeps off it,
clearing the report frees it, fixing the fibre ends the report.

A small leaf-spine fabric of its own (4 pods of one leaf, 4 GPUs and 4
uplinks per leaf, tau 2, 2 OCS groups of 2 devices of 4 ports, STRAIGHT
wiring: a port's ingress and egress fibres reach the same spine port, so one
peer-port text per port is right for both sides). Group 0 is two
`ocs-switch` devices, group 1 two `polatis` 4 x 4 switches (ocs-devsim
--model polatis), each polatis port's peer-port set by the `peer-port=P:TEXT`
knob. The right text of every port is computed here from the wiring rules at
the top of solvers/fabric.h, not from ocsd: straight wiring puts spine port
k of spine h in pod p on device k of group h, input p and output p, so port
q of device d of group h is "pod<q>-spine<h>-port<d>".

  1. every polatis port reports its right far end: `ocsctl cabling --json`
     lists nothing; `ocsctl devices --json` shows ocs-devsim's
     product-information on the polatis devices and nothing on the
     ocs-switch ones, no port down.
  2. the texts of ports 0 and 1 of ocs-g1-d0 swapped (set-faults over
     ncclient): `ocsctl cabling --json` lists exactly those two ports, both
     sides, with the expected and reported texts; a Watch stream carried a
     CablingEvent (miswired) for each; ocsd_cabling_miswired_ports is 4.
  3. one-link jobs between every pair of leaves submitted one after another
     until the planner refuses: no circuit of any job is on port 0 or 1 of
     ocs-g1-d0; every job released, a job of every uplink of leaves 0 and 1
     (4 links: a circuit between pods 0 and 1 on every device) is refused
     RESOURCE_EXHAUSTED.
  4. `ocsctl cabling clear` of both ports (a port not reported and an
     unknown device are NOT_FOUND): the list shows them cleared, the gauge
     drops to 0, passes reading the same texts keep the clearance; the job
     of every uplink of leaves 0 and 1 is ACTIVE now, with its circuit on
     ports 0 and 1 of ocs-g1-d0.
  5. the texts fixed on the device: the report is gone on a following pass,
     with a CablingEvent (not miswired) for each side.
  6. `fail-port=3` on ocs-g1-d1: `ocsctl devices` shows it with 1 port down.
     The planner keeps off that port (the reconciliation's info read hands
     it over as out of service; a polatis transaction's read-back no longer
     looks at port health): a job of every uplink of leaves 2 and 3 (a
     circuit between pods 2 and 3 on every device) is refused
     RESOURCE_EXHAUSTED, one of 3 links is ACTIVE and every device read
     with ncclient holds its 3 circuits on the other three devices, nothing
     on ocs-g1-d1. The knob cleared: 0 ports down, and the job of every
     uplink of leaves 2 and 3 is ACTIVE, ncclient finding 2 -> 3 and 3 -> 2
     on every device, ocs-g1-d1 included.

usage: test_daemon_cabling.py BUILD_DIR SOURCE_DIR
"""
import json
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ocsd_fleet  # noqa: E402
import testports  # noqa: E402

BUILD, SRC = sys.argv[1:3]
OCSCTL = os.path.join(BUILD, "northbound", "ocsctl", "ocsctl")
PODS, GPUS_PER_LEAF, GROUPS, PER_GROUP, PORTS = 4, 4, 2, 2, 4
SETTLE_S = 30  # reconciliation every second: a change shows within a few passes
TIMEOUT_S = 120
SWAPPED = ("ocs-g1-d0", (0, 1))
# one-link jobs over every pair of leaves, each leaf's 4 uplinks asked for
PAIRS = [(0, 1), (2, 3), (0, 2), (1, 3), (0, 3), (1, 2), (0, 1), (2, 3)]


def right_text(h, d, q):
    """The far end of port q (both sides) of device d of group h under
    straight wiring (solvers/fabric.h): spine port d of spine h in pod q."""
    return f"pod{q}-spine{h}-port{d}"


class MixedFleet(ocsd_fleet.Fleet):
    """Group 0 on an ocs-switch ocs-devsim, group 1 on a polatis one."""

    N_DEV = GROUPS * PER_GROUP
    PER_GROUP = PER_GROUP

    def __init__(self, build, src):
        fabric = self._prepare(build, src, "ocsd-cabling-", "lab-mixed.json")
        f = fabric["ocsd-fabric:fabric"]
        f.update({"name": "cabling", "pods": PODS, "k-leaf": GPUS_PER_LEAF, "k-spine": PER_GROUP,
                  "tau": 2, "k-ocs": PORTS, "wiring": "straight"})
        dev = f["devices"]
        self._set_access(dev, 60, 5000)
        dev["group"] = [{"id": 1, "model": "polatis", "port-map": {"switch-ports": 2 * PORTS}}]
        self._write_config(fabric)
        self.polatis_proc = None

    def start_devices(self, knobs):
        """knobs: {polatis device index within group 1: fault spec}."""
        log = open(os.path.join(self.work, "devsim.log"), "a")
        common = self._devsim_credentials() + ["--unidirectional", "--switch-ms", "1",
                                               "--ports", str(PORTS)]
        self.devsim_proc = subprocess.Popen(
            [self.devsim, "--listen", f"127.0.0.1:{self.base}", "--count", str(PER_GROUP)] +
            common, stdout=log, stderr=log)
        faults = [a for i, spec in knobs.items() for a in ("--fault", f"{i}/{spec}")]
        self.polatis_proc = subprocess.Popen(
            [self.devsim, "--listen", f"127.0.0.1:{self.base + PER_GROUP}", "--count",
             str(PER_GROUP), "--model", "polatis"] + common + faults, stdout=log, stderr=log)
        log.close()
        testports.wait_listening("127.0.0.1", self.base, "ocs-devsim", ocsd_fleet.START_TIMEOUT_S,
                                 count=PER_GROUP, proc=self.devsim_proc)
        testports.wait_listening("127.0.0.1", self.base + PER_GROUP, "ocs-devsim polatis",
                                 ocsd_fleet.START_TIMEOUT_S, count=PER_GROUP,
                                 proc=self.polatis_proc)

    def read_device(self, d, datastore=None):
        """[(in, out)] of device d in ocsd's ports, read with ncclient; a
        polatis device's pairs (<get> of cross-connects alone) are mapped
        here from its 4 x 4 numbering (ocsd port k: ingress 1+k, egress
        5+k), not by ocsd."""
        if d < PER_GROUP:
            return [(i, o) for i, o, _ in super().read_device(d, datastore)]
        xml = self.get_data(d, ("subtree", f'<cross-connects xmlns="{ocsd_fleet.OPSW_NS}"/>'))
        return [(i, o) for i, o, _ in ocsd_fleet.MixedFleet.polatis_rows(xml, PORTS)]

    def close(self):
        super().close()
        p = self.polatis_proc
        if p is not None and p.poll() is None:
            p.terminate()
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


fleet = MixedFleet(BUILD, SRC)
script = ocsd_fleet.Script("test_daemon_cabling", fleet)
check = script.check


def peer_spec(d, swap=(), extra=""):
    """The knobs of polatis device d of group 1: every port's right text,
    the texts of the two ports in swap exchanged."""
    texts = {q: right_text(1, d, q) for q in range(PORTS)}
    if swap:
        a, b = swap
        texts[a], texts[b] = texts[b], texts[a]
    spec = ",".join(f"peer-port={q}:{t}" for q, t in sorted(texts.items()))
    return spec + ("," + extra if extra else "")


def ocsctl(*args, ok=True):
    r = subprocess.run([OCSCTL, "--insecure", "--server", fleet.target, "--timeout-ms", "60000"]
                       + list(args), capture_output=True, text=True, timeout=TIMEOUT_S)
    if ok and r.returncode != 0:
        raise RuntimeError(f"ocsctl {' '.join(args)}: exit {r.returncode}: {r.stderr}")
    return r


def ocsctl_json(*args):
    return json.loads(ocsctl("--json", *args).stdout)


def cabling():
    """{(device, port, side): (expected, reported, cleared)}, miswired."""
    doc = ocsctl_json("cabling")
    return ({(p["device"], p["port"], p["side"]): (p["expected"], p["reported"], p["cleared"])
             for p in doc["ports"]}, doc["miswired"])


def gauge():
    m = re.search(r"^ocsd_cabling_miswired_ports (\S+)$", fleet.metrics(), re.M)
    return float(m.group(1)) if m else None


def wait_for(pred, what):
    """Polls pred() until true (SETTLE_S); records a failure otherwise."""
    deadline = time.time() + SETTLE_S
    while time.time() < deadline:
        if pred():
            return True
        if fleet.ocsd.poll() is not None:
            raise RuntimeError(f"ocsd exited {fleet.ocsd.returncode}")
        time.sleep(0.2)
    check(False, f"{what}: not within {SETTLE_S} s")
    return False


def spec_file(job_id, a, b, gpus_a, gpus_b, links=1):
    """A leaf demand of links between leaves a and b (pods a and b), with
    GPUs gpus_a (indices on leaf a) and gpus_b."""
    gpus = [{"gpu": GPUS_PER_LEAF * leaf + g, "leaf": leaf, "pod": leaf}
            for leaf, idx in ((a, gpus_a), (b, gpus_b)) for g in idx]
    doc = {"id": job_id, "placement": {"gpus": gpus},
           "leaf_demand": {"pairs": [{"a": a, "b": b, "links": links}]}}
    path = os.path.join(fleet.work, job_id + ".json")
    with open(path, "w") as f:
        json.dump(doc, f)
    return path


def submit_whole(job_id, a=0, b=1, links=4):
    """A job of every uplink of leaves a and b (4 links: one circuit
    between pods a and b on every device; for 0 and 1, ports 0 and 1 of
    ocs-g1-d0 included), or of fewer links; (exit code, state or error)."""
    gpus = range(links)
    r = ocsctl("--json", "job", "submit", spec_file(job_id, a, b, gpus, gpus, links=links),
               ok=False)
    if r.returncode:
        return r.returncode, r.stderr.strip()
    return 0, json.loads(r.stdout)["job"]["state"]


def fill(run):
    """Submits PAIRS one after another (each job its own GPU on each leaf);
    returns the ids of the ACTIVE jobs."""
    used = [0] * PODS
    active = []
    for k, (a, b) in enumerate(PAIRS):
        job_id = f"{run}-j{k}"
        r = ocsctl("--json", "job", "submit", spec_file(job_id, a, b, [used[a]], [used[b]]),
                   ok=False)
        used[a] += 1
        used[b] += 1
        if r.returncode == 0 and json.loads(r.stdout)["job"]["state"] == "JOB_STATE_ACTIVE":
            active.append(job_id)
        else:
            print(f"{run}: {job_id} (leaf {a} - leaf {b}) not active: "
                  f"{(r.stderr or r.stdout).strip()[:200]}", flush=True)
    return active


def swapped_ports_used():
    """The cross-connects of every circuit on ports 0 or 1 of ocs-g1-d0."""
    dev, ports = SWAPPED
    circuits = ocsctl_json("circuits").get("circuits", [])
    return sorted((x["device"], x["in_port"], x["out_port"]) for c in circuits
                  for x in c["cross_connects"]
                  if x["device"] == dev and (x["in_port"] in ports or x["out_port"] in ports))


def release(ids):
    for job_id in ids:
        ocsctl("job", "release", job_id)


def main():
    ocsd_fleet.gen_stubs(os.path.join(SRC, "proto"), os.path.join(fleet.work, "gen"))
    import grpc
    from ocs.v1 import events_pb2, events_pb2_grpc

    fleet.start_devices({d: peer_spec(d) for d in range(PER_GROUP)})
    fleet.start_ocsd(reconcile_s=1)
    watcher = ocsd_fleet.Watcher(
        events_pb2_grpc.EventsStub(grpc.insecure_channel(fleet.target)).Watch(
            events_pb2.WatchRequest(cabling=True)), SETTLE_S)

    # 1. right texts everywhere: nothing reported; what the devices say they are
    def product_known():
        devs = {d["name"]: d for d in ocsctl_json("devices")["devices"]}
        return all(devs[f"ocs-g1-d{d}"]["vendor"] for d in range(PER_GROUP))
    wait_for(product_known, "the polatis devices' product-information in ocsctl devices")
    devs = {d["name"]: d for d in ocsctl_json("devices")["devices"]}
    for d in range(PER_GROUP):
        pol, sw = devs[f"ocs-g1-d{d}"], devs[f"ocs-g0-d{d}"]
        want = {"vendor": "ocs-devsim (a simulation, not a device)",
                "serial": f"ocs-devsim-{fleet.base + PER_GROUP + d}",
                "model": f"ocs-devsim polatis simulation {PORTS}x{PORTS}"}
        got = {k: pol[k] for k in want}
        check(got == want and pol["software"] != "",
              f"ocs-g1-d{d}: product {got}, software {pol['software']!r}; want {want}")
        got = {k: sw[k] for k in ("vendor", "model", "serial", "software")}
        check(set(got.values()) == {""}, f"ocs-g0-d{d} (ocs-switch): product {got}, want none")
        for dev in (pol, sw):
            check(dev["ports_down"] == 0, f"{dev['name']}: ports_down {dev['ports_down']}")
    time.sleep(2.5)  # a few more passes over the right texts
    listed, miswired = cabling()
    check(listed == {} and miswired == 0,
          f"right texts: ocsctl cabling lists {listed} (miswired {miswired}), want nothing")
    check(gauge() == 0, f"right texts: ocsd_cabling_miswired_ports {gauge()}, want 0")

    # 2. ports 0 and 1 of ocs-g1-d0 swapped on the device
    dev, (pa, pb) = SWAPPED
    fleet.set_faults(PER_GROUP + 0, peer_spec(0, swap=(pa, pb)))
    want = {(dev, q, side): (right_text(1, 0, q), right_text(1, 0, other), False)
            for q, other in ((pa, pb), (pb, pa)) for side in ("ingress", "egress")}
    wait_for(lambda: cabling()[0] == want, "the swapped ports in ocsctl cabling")
    listed, miswired = cabling()
    check(listed == want and miswired == 4,
          f"swapped: ocsctl cabling lists {listed} (miswired {miswired}), want {want}")
    check(gauge() == 4, f"swapped: ocsd_cabling_miswired_ports {gauge()}, want 4")
    seen = set()
    while len(seen) < 4:
        ev = watcher.wait(lambda e: e.WhichOneof("kind") == "cabling" and e.cabling.miswired)
        if ev is None:
            break
        c = ev.cabling
        seen.add((c.device, c.port, c.side, c.expected, c.reported))
    want_ev = {(d, q, s, e, r) for (d, q, s), (e, r, _) in want.items()}
    check(seen == want_ev, f"CablingEvents (miswired) {sorted(seen)}, want {sorted(want_ev)}")
    table = ocsctl("cabling").stdout
    check("4 miswired port(s)" in table and "pod1-spine1-port0" in table,
          f"ocsctl cabling (table):\n{table}")

    # 3. the fabric filled: never a circuit on a miswired port
    active = fill("miswired")
    check(len(active) >= 4, f"miswired: only {len(active)} of {len(PAIRS)} jobs ACTIVE")
    used = swapped_ports_used()
    check(used == [], f"miswired: circuits on the miswired ports: {used}")
    release(active)
    rc, what = submit_whole("whole-miswired")
    check(rc == 1 and "RESOURCE_EXHAUSTED" in what,
          f"miswired: a job of every uplink of pods 0 and 1: exit {rc}: {what}")
    used = swapped_ports_used()
    check(used == [], f"miswired: circuits on the miswired ports: {used}")

    # 4. cleared by the operator: planned on again
    r = ocsctl("cabling", "clear", dev, "2", ok=False)
    check(r.returncode == 1 and "NOT_FOUND" in r.stderr and "port 2" in r.stderr,
          f"clear of a port not reported: exit {r.returncode}: {r.stderr.strip()}")
    r = ocsctl("cabling", "clear", "ocs-g9-d9", "0", ok=False)
    check(r.returncode == 1 and "NOT_FOUND" in r.stderr,
          f"clear on an unknown device: exit {r.returncode}: {r.stderr.strip()}")
    for q in (pa, pb):
        doc = ocsctl_json("cabling", "clear", dev, str(q))
        got = sorted((p["port"], p["side"], p["cleared"]) for p in doc["ports"])
        check(got == [(q, "egress", True), (q, "ingress", True)],
              f"cabling clear {dev} {q}: {doc}")
    listed, miswired = cabling()
    check(miswired == 0 and set(listed) == set(want) and all(v[2] for v in listed.values()),
          f"cleared: ocsctl cabling lists {listed} (miswired {miswired})")
    check(gauge() == 0, f"cleared: ocsd_cabling_miswired_ports {gauge()}, want 0")
    time.sleep(2.5)  # passes that read the same texts keep the clearance
    listed, miswired = cabling()
    check(miswired == 0 and len(listed) == 4, f"cleared, passes later: {listed}")
    rc, what = submit_whole("whole-cleared")
    check(rc == 0 and what == "JOB_STATE_ACTIVE",
          f"cleared: a job of every uplink of pods 0 and 1: exit {rc}: {what}")
    used = swapped_ports_used()
    want_xc = sorted([(dev, pa, pb), (dev, pb, pa)])
    check(used == want_xc, f"cleared: circuits on {dev} ports {pa}, {pb}: {used}, "
          f"want {want_xc}")
    release(["whole-cleared"])

    # 5. the fibre fixed on the device: the report ends
    fleet.set_faults(PER_GROUP + 0, peer_spec(0))
    wait_for(lambda: cabling() == ({}, 0), "the report gone once the texts are right")
    seen = set()
    while len(seen) < 4:
        ev = watcher.wait(lambda e: e.WhichOneof("kind") == "cabling" and not e.cabling.miswired)
        if ev is None:
            break
        seen.add((ev.cabling.device, ev.cabling.port, ev.cabling.side))
    check(seen == set(want), f"CablingEvents (no longer miswired) {sorted(seen)}, "
          f"want {sorted(want)}")
    check(gauge() == 0, f"fixed: ocsd_cabling_miswired_ports {gauge()}, want 0")

    # 6. a failed port on a polatis device
    fleet.set_faults(PER_GROUP + 1, peer_spec(1, extra="fail-port=3"))

    def down():
        return {d["name"]: d["ports_down"] for d in ocsctl_json("devices")["devices"]}
    wait_for(lambda: down().get("ocs-g1-d1") == 1, "ocs-g1-d1 with 1 port down")
    got = down()
    check(got == {f"ocs-g{h}-d{d}": int(h == 1 and d == 1) for h in range(GROUPS)
                  for d in range(PER_GROUP)}, f"fail-port=3 on ocs-g1-d1: ports down {got}")
    table = ocsctl("devices").stdout
    lines = table.splitlines()
    col = lines[0].find("PORTS DOWN") if lines else -1
    cells = {line.split()[0]: line[col:].split()[0] for line in lines[1:] if col > 0}
    check(col > 0 and cells.get("ocs-g1-d1") == "1" and cells.get("ocs-g1-d0") == "0",
          f"ocsctl devices (table), PORTS DOWN column {cells}:\n{table}")

    # ... and the planner keeps off it: pod 3's uplink on ocs-g1-d1 is out
    failed = ("ocs-g1-d1", 3)
    check(fleet.read_devices() == {fleet.device_name(d): [] for d in range(fleet.N_DEV)},
          "port down: the devices hold something before the jobs")
    rc, what = submit_whole("whole-23-down", 2, 3)
    check(rc == 1 and "RESOURCE_EXHAUSTED" in what,
          f"port down: a job of every uplink of pods 2 and 3: exit {rc}: {what}")
    rc, what = submit_whole("three-23-down", 2, 3, links=3)
    check(rc == 0 and what == "JOB_STATE_ACTIVE",
          f"port down: a 3-link job between pods 2 and 3: exit {rc}: {what}")
    held = fleet.read_devices()
    on_failed = [xc for xc in held[failed[0]] if failed[1] in xc]
    check(on_failed == [] and held[failed[0]] == [],
          f"port down: {failed[0]} holds {held[failed[0]]} (read with ncclient), want nothing")
    others = {n: rows for n, rows in held.items() if n != failed[0]}
    check(others == {n: [(2, 3), (3, 2)] for n in others},
          f"port down: the 3 links not on the other devices (ncclient): {held}")
    release(["three-23-down"])

    # the knob cleared: the port is planned on again
    fleet.set_faults(PER_GROUP + 1, peer_spec(1))
    wait_for(lambda: down().get("ocs-g1-d1") == 0, "ocs-g1-d1 with no port down")
    rc, what = submit_whole("whole-23-up", 2, 3)
    check(rc == 0 and what == "JOB_STATE_ACTIVE",
          f"port up: a job of every uplink of pods 2 and 3: exit {rc}: {what}")
    held = fleet.read_devices()
    check(held == {fleet.device_name(d): [(2, 3), (3, 2)] for d in range(fleet.N_DEV)},
          f"port up: every device should hold 2 -> 3 and 3 -> 2 (ncclient): {held}")
    release(["whole-23-up"])
    watcher.close()


sys.exit(script.run(main))

#!/usr/bin/python3
"""test_daemon_repair.py - a live job whose cross-connects the devices lost
is programmed again, or told (circuit repair, daemon/watch/repair.h), on the REAL
ocsd (lab fabric, 16 ocs-devsim devices, python3-grpcio client, devices
read and edited behind ocsd's back with ncclient), reconciliation every
second:

  1. job r1 is ACTIVE; both halves of one of its circuits and one half of
     another are deleted from the devices: within a few passes the devices
     hold every cross-connect ocsd reports again, r1 is still ACTIVE, a
     TransactionEvent of `ocsd-repair` COMMITTED is on Watch and
     ocsd_circuit_repairs_total{outcome="repaired"} counts them;
  2. one of r1's cross-connects is replaced, in one edit, by one no job owns
     on the same input port: nothing is repaired (invariant 6), r1 is told
     (GetJob's reason and a JobEvent name the device and the missing
     cross-connect), the unowned one stays, outcome="blocked" counts; once
     it is deleted behind ocsd's back, the next pass repairs r1 and its
     reason is cleared;
  3. a device refuses every edit (ocs-devsim knob refuse@edit+) and one of
     r1's cross-connects on it is deleted: the repair fails, r1 is told,
     outcome="failed" counts, the job stays ACTIVE; once the knob is
     cleared a retry (backing off from 2 s) repairs it.

usage: test_daemon_repair.py BUILD_DIR SOURCE_DIR
"""
import os
import queue
import re
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ocsd_fleet  # noqa: E402

BUILD, SRC = sys.argv[1], sys.argv[2]
SETTLE_S = 40  # a few 1 s passes, a transaction and the backoff, on a loaded machine
NC = "urn:ietf:params:xml:ns:netconf:base:1.0"

fleet = ocsd_fleet.Fleet(BUILD, SRC, confirm_timeout_s=30, prefix="ocsd-repair-")
script = ocsd_fleet.Script("daemon_repair", fleet)
check = script.check


def edit(d, deletes=(), creates=(), then_faults=None):
    """Deletes and creates cross-connects [(in, out)] on device d in one
    commit, as a technician would; then_faults: an ocs-devsim set-faults
    spec sent right after, on the same session."""
    from ncclient.xml_ import to_ele
    body = "".join(f'<connection nc:operation="delete"><input>{i}</input></connection>'
                   for i, _ in deletes)
    body += "".join(f"<connection><input>{i}</input><output>{o}</output></connection>"
                    for i, o in creates)
    cfg = (f'<nc:config xmlns:nc="{NC}"><cross-connects xmlns="{ocsd_fleet.NS}">{body}'
           "</cross-connects></nc:config>")
    with fleet._session(d) as m:
        with m.locked("candidate"):
            m.edit_config(target="candidate", config=cfg)
            m.commit()
        if then_faults is not None:
            m.dispatch(to_ele(f'<set-faults xmlns="{ocsd_fleet.DEVSIM_NS}"><spec>'
                              f"{then_faults}</spec></set-faults>"))


def main():
    ocsd_fleet.gen_stubs(os.path.join(SRC, "proto"), os.path.join(fleet.work, "gen"))
    import grpc
    from ocs.v1 import events_pb2, events_pb2_grpc, fabric_pb2, fabric_pb2_grpc
    from ocs.v1 import jobs_pb2, jobs_pb2_grpc

    fleet.start_devices(switch_ms=1)
    fleet.start_ocsd(reconcile_s=1)
    ch = grpc.insecure_channel(fleet.target)
    jobs = jobs_pb2_grpc.JobsStub(ch)
    fabric = fabric_pb2_grpc.FabricStub(ch)
    events = queue.Queue()

    def watch():
        try:
            for ev in events_pb2_grpc.EventsStub(ch).Watch(events_pb2.WatchRequest()):
                if ev.HasField("job"):
                    events.put(("job", ev.job.job_id, ev.job.state, ev.job.reason))
                elif ev.HasField("transaction"):
                    events.put(("txn", ev.transaction.job_id, ev.transaction.outcome, ""))
        except grpc.RpcError:
            pass

    threading.Thread(target=watch, daemon=True).start()

    def drain_events():
        out = []
        while True:
            try:
                out.append(events.get_nowait())
            except queue.Empty:
                return out

    def repairs(outcome):
        m = re.search(r'^ocsd_circuit_repairs_total\{outcome="%s"\} (\S+)$' % outcome,
                      fleet.metrics(), re.M)
        return float(m.group(1)) if m else None

    def get_job():
        return jobs.GetJob(jobs_pb2.GetJobRequest(id="r1"), timeout=10).job

    def owned():
        """{device name: {(in, out)}} of r1 as ocsd reports it."""
        out = {}
        for c in fabric.ListCircuits(fabric_pb2.ListCircuitsRequest(job_id="r1"),
                                     timeout=10).circuits:
            for x in c.cross_connects:
                out.setdefault(x.device, set()).add((x.in_port, x.out_port))
        return out

    def dev_id(name):
        g, d = (int(x) for x in re.match(r"ocs-g(\d+)-d(\d+)$", name).groups())
        return g * fleet.PER_GROUP + d

    def held(names):
        return {n: {(i, o) for (i, o, _) in fleet.read_device(dev_id(n))} for n in names}

    def wait_whole(want, what, extra=None):
        """Until every device of want holds its cross-connects (and extra())."""
        t0 = time.time()
        have = {}
        while time.time() < t0 + SETTLE_S:
            have = held(want)
            if all(want[n] <= have[n] for n in want) and (extra is None or extra()):
                print(f"{what}: whole again after {time.time() - t0:.1f} s", flush=True)
                return have
            time.sleep(0.3)
        check(False, f"{what}: not repaired within {SETTLE_S} s: devices "
              f"{ {n: sorted(have.get(n, ())) for n in want} }, ocsd says "
              f"{ {n: sorted(v) for n, v in want.items()} }")
        return have

    def wait_told(what, words):
        t0 = time.time()
        job = get_job()
        while time.time() < t0 + SETTLE_S:
            job = get_job()
            if all(w in job.reason for w in words):
                print(f"{what}: r1 told after {time.time() - t0:.1f} s: {job.reason}",
                      flush=True)
                break
            time.sleep(0.2)
        check(all(w in job.reason for w in words),
              f"{what}: GetJob r1 reason {job.reason!r} does not name {words}")
        check(job.state == jobs_pb2.JOB_STATE_ACTIVE,
              f"{what}: r1 is {jobs_pb2.JobState.Name(job.state)}")
        # the event may reach the Watch stream after GetJob shows the reason
        def told(e):
            return (e[0] == "job" and e[1] == "r1" and e[2] == jobs_pb2.JOB_STATE_ACTIVE and
                    all(w in e[3] for w in words))

        evs = drain_events()
        t1 = time.time()
        while not any(told(e) for e in evs) and time.time() < t1 + 10:
            time.sleep(0.1)
            evs += drain_events()
        check(any(told(e) for e in evs), f"{what}: no JobEvent for r1 naming {words}: {evs}")

    gpus = [jobs_pb2.GpuPlacement(gpu=8 * leaf + k, leaf=leaf, pod=leaf // 2)
            for leaf in (0, 2) for k in range(2)]
    r = jobs.SubmitJob(jobs_pb2.JobSpec(
        id="r1", placement=jobs_pb2.Placement(gpus=gpus),
        leaf_demand=jobs_pb2.LeafDemand(pairs=[jobs_pb2.LeafPair(a=0, b=2, links=2)])),
        timeout=60)
    check(r.job.state == jobs_pb2.JOB_STATE_ACTIVE,
          f"r1 is {jobs_pb2.JobState.Name(r.job.state)}: {r.job.reason}")
    want = owned()
    check(sum(len(v) for v in want.values()) >= 4, f"r1 holds {want}")
    before = held(want)
    check(all(want[n] <= before[n] for n in want), f"devices {before} lack r1's {want}")

    # 1. both halves of one circuit and one half of another, gone behind ocsd's back
    circuits = fabric.ListCircuits(fabric_pb2.ListCircuitsRequest(job_id="r1"),
                                   timeout=10).circuits
    gone = [(x.device, x.in_port, x.out_port) for x in circuits[0].cross_connects]
    gone.append((circuits[1].cross_connects[0].device, circuits[1].cross_connects[0].in_port,
                 circuits[1].cross_connects[0].out_port))
    drain_events()
    for name, i, o in gone:
        edit(dev_id(name), deletes=[(i, o)])
    after = held(want)
    check(all((i, o) not in after[n] for n, i, o in gone), f"not deleted: {after}")
    wait_whole(want, "case 1 (3 cross-connects deleted)",
               lambda: (repairs("repaired") or 0) >= len(gone))
    check(get_job().state == jobs_pb2.JOB_STATE_ACTIVE, "r1 not ACTIVE after the repair")
    check((repairs("repaired") or 0) >= len(gone),
          f"ocsd_circuit_repairs_total{{outcome=\"repaired\"}} {repairs('repaired')}")
    evs = drain_events()
    check(any(e[0] == "txn" and e[1] == "ocsd-repair" and
              e[2] == events_pb2.TRANSACTION_OUTCOME_COMMITTED for e in evs),
          f"no committed ocsd-repair TransactionEvent: {evs}")
    check(fleet.one_way(fleet.read_devices()) == [], "one-way circuits after the repair")

    # 2. the input port of a missing cross-connect holds one no job owns
    name, i, o = gone[0]
    others = {p for (a, b) in held([name])[name] for p in (a, b)}
    stray = next(p for p in range(8) if p not in others and p != o)
    edit(dev_id(name), deletes=[(i, o)], creates=[(i, stray)])
    wait_told("case 2 (port taken)", [name, f"{i}->{o}", "no job owns"])
    check((i, stray) in held([name])[name], f"the unowned {name} {i}->{stray} was touched")
    check((repairs("blocked") or 0) >= 1, f"outcome=\"blocked\" {repairs('blocked')}")
    edit(dev_id(name), deletes=[(i, stray)])
    wait_whole(want, "case 2 after the unowned one went", lambda: get_job().reason == "")

    # 3. the device refuses edits: the repair fails, r1 is told, then a retry
    failed0 = repairs("failed") or 0
    name, i, o = gone[-1]
    drain_events()
    edit(dev_id(name), deletes=[(i, o)], then_faults="refuse@edit+")
    wait_told("case 3 (edits refused)", [name, f"{i}->{o}", "next try"])
    check((repairs("failed") or 0) > failed0, f"outcome=\"failed\" {repairs('failed')}")
    check((i, o) not in held([name])[name], f"{name} {i}->{o} is back while edits are refused")
    fleet.set_faults(dev_id(name), "")
    wait_whole(want, "case 3 after the knob was cleared", lambda: get_job().reason == "")
    job = get_job()
    check(job.state == jobs_pb2.JOB_STATE_ACTIVE and job.reason == "",
          f"r1 at the end: {jobs_pb2.JobState.Name(job.state)} {job.reason!r}")
    check(fleet.one_way(fleet.read_devices()) == [], "one-way circuits at the end")


sys.exit(script.run(main))

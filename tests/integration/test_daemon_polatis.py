#!/usr/bin/python3
"""test_daemon_polatis.py - the transaction engine's fault matrix through the
real ocsd on the mixed lab fabric (issue 23, "Tests"): OCS groups 1 and 3
are simulated Polatis switches (ocs-devsim --model polatis: writable
running only, so the engine takes its writable-running path, sb_txn.c
W1-W3), groups 0 and 2 ocs-switch devices (confirmed commit). Every job is
the quickstart's (deploy/jobs/lab-ring.json), whose circuits span groups 0
and 1: one all-or-nothing transaction over both models.

After every case each of the 16 devices is read with ncclient (a NETCONF
client nobody here wrote; a polatis pair ingress I -> egress E is ocsd's
port I-1 -> E-9 on these 8 x 8 switches, read from the YANG data, never
through ocsd's driver) and checked:
  - no one-way circuit: under the fabric's cross wiring (solvers/fabric.h)
    device 2m of a group carries p -> q exactly when device 2m+1 carries
    q -> p; every pair inside the switch's numbering, every port ENABLED;
  - all or nothing: a job ACTIVE has every circuit of its demand on the
    devices (the pods of each circuit against the job's leaf pairs, and
    exactly the cross-connects ListCircuits reports, on both models), a
    job not ACTIVE has nothing on any device.
Cases:
  a.  submit -> ACTIVE, checked; release -> every device empty;
  b.  a polatis device refuses the edit (refuse@edit; then refuse-port=k on
      a port the job uses): the job FAILS, nothing changed;
  c.  a device dies in the commit step: a polatis device drops its session
      at the edit (drop@edit); an ocs-switch device drops its session at
      the commit, after the polatis devices wrote running (drop@commit);
      a polatis device executes the edit but garbles its reply
      (garble@edit): each time the job FAILS (a first transaction that
      fails is answered "not submitted") and every device is back at
      nothing;
  c4. (only with the argument late-edit: ctest daemon_polatis_late_edit)
      a polatis device's edit hangs past the RPC deadline (hang@edit,
      rpc-timeout-ms + 1 s) and runs when the hang ends, after ocsd gave up
      on it and rolled the transaction back: the devices are read once the
      hang is over and must hold nothing;
  d.  kill -9 of ocsd at every step, a devsim delay knob on one device
      opening the window, then ocsd restarted on the same store:
        d1 before any edit (hang@lock on a polatis device, W1): nothing
           on any device before the restart, the intent rolled back;
        d2 after some devices' edit (hang@edit then drop@edit on the second
           polatis device, killed once the first holds the job's pairs, W2):
           one polatis device at the target for good, the others at the
           pre-image before the restart; recovery writes it back (the
           intent and the log say "never decided; 1 device(s) that had
           committed for good were written back");
        d3 after every device's edit, before the decision (the second
           polatis device's read-back hangs, hang@get=MS+): both polatis
           devices at the target, the ocs-switch ones reverted; recovery
           writes both back (W2 again);
        d4 after the decision (an ocs-switch confirm hangs, then drops):
           recovery finishes the intent (confirmed, "decided"), no second
           transaction;
      and in each, once the job settled after the restart (a rolled-back
      job is planned again, jobs_recover.c), the all-or-nothing check;
      then the job is released and every device must be empty.

usage: test_daemon_polatis.py BUILD_DIR SOURCE_DIR [late-edit]
"""
import collections
import os
import re
import sqlite3
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ocsd_fleet  # noqa: E402

BUILD, SRC = sys.argv[1], sys.argv[2]
LATE_EDIT = sys.argv[3:] == ["late-edit"]
RPC_TIMEOUT_MS = 5000  # the fabric's rpc-timeout-ms (its default): c4's hang outlasts it
HANG_MS = 2000  # a kill window: long enough to see it on a loaded machine
# d3's window, the read-back of one device, is the narrowest (the test reads
# two devices over new sessions to see it open): twice as long, still under
# RPC_TIMEOUT_MS so that the read-back answers and the transaction decides
D3_HANG_MS = 4000
SETTLE_S = 60

fleet = ocsd_fleet.MixedFleet(BUILD, SRC, prefix="ocsd-polatis-", rpc_timeout_ms=RPC_TIMEOUT_MS)
script = ocsd_fleet.Script("daemon_polatis_late_edit" if LATE_EDIT else "daemon_polatis", fleet)
check = script.check
api = {}


def store_rows(sql):
    """Rows of a query on ocsd's SQLite file (read-only)."""
    db = sqlite3.connect(f"file:{os.path.join(fleet.state_dir, 'ocsd.db')}?mode=ro", uri=True,
                         timeout=10)
    try:
        return db.execute(sql).fetchall()
    finally:
        db.close()


def connect():
    import grpc
    from ocs.v1 import fabric_pb2_grpc, jobs_pb2_grpc
    if "ch" in api:
        api["ch"].close()
    api["ch"] = grpc.insecure_channel(fleet.target)
    api["jobs"] = jobs_pb2_grpc.JobsStub(api["ch"])
    api["fabric"] = fabric_pb2_grpc.FabricStub(api["ch"])


def spec(job_id):
    """The quickstart's job under another id."""
    from google.protobuf import json_format
    from ocs.v1 import jobs_pb2
    with open(os.path.join(SRC, "deploy", "jobs", "lab-ring.json")) as f:
        s = json_format.Parse(f.read(), jobs_pb2.JobSpec())
    s.id, s.idempotency_key = job_id, "key-" + job_id
    return s


def state_name(state):
    from ocs.v1 import jobs_pb2
    return jobs_pb2.JobState.Name(state).replace("JOB_STATE_", "")


def get_job(job_id):
    """The job, or None when ocsd does not know it."""
    import grpc
    from ocs.v1 import jobs_pb2
    try:
        return api["jobs"].GetJob(jobs_pb2.GetJobRequest(id=job_id), timeout=10).job
    except grpc.RpcError as e:
        if e.code() == grpc.StatusCode.NOT_FOUND:
            return None
        raise


def settle(job_id):
    """The job once ACTIVE, FAILED or RELEASED (bounded wait)."""
    deadline = time.time() + SETTLE_S
    while True:
        j = get_job(job_id)
        if j is None or state_name(j.state) in ("ACTIVE", "FAILED", "RELEASED") or \
                time.time() > deadline:
            return j
        time.sleep(0.05)


def release(job_id, where):
    from ocs.v1 import jobs_pb2
    r = api["jobs"].ReleaseJob(jobs_pb2.ReleaseJobRequest(id=job_id), timeout=60)
    check(state_name(r.job.state) == "RELEASED",
          f"{where}: release {job_id}: {state_name(r.job.state)} {r.job.reason}")


def expected_pods(s):
    """Counter {frozenset(pod a, pod b): cross-connects} the job's leaf
    demand needs: each link is a circuit of two one-way cross-connects on
    a device pair, both between the two leaves' pods."""
    pod = {g.leaf: g.pod for g in s.placement.gpus}
    return collections.Counter({frozenset((pod[p.a], pod[p.b])): 2 * p.links
                                for p in s.leaf_demand.pairs})


def held(devices):
    return sorted((name, i, o) for name, rows in devices.items() for (i, o, _) in rows)


def check_devices(where, job_id, active, devices=None):
    """The devices read with ncclient against the job: no one-way circuit,
    every pair mapped and connected; all of the job if active, else
    nothing. Returns what they hold."""
    from ocs.v1 import fabric_pb2
    devices = devices if devices is not None else fleet.read_devices()
    have = held(devices)
    bad = [(n, i, o, st) for n, rows in devices.items() for (i, o, st) in rows
           if st != "connected"]
    check(not bad, f"{where}: cross-connects not connected or outside the port map: {bad}")
    check(fleet.one_way(devices) == [], f"{where}: one-way circuits {fleet.one_way(devices)}")
    if not active:
        check(have == [], f"{where}: {job_id} is not ACTIVE but the devices hold {have}")
        return have
    circuits = api["fabric"].ListCircuits(fabric_pb2.ListCircuitsRequest(job_id=job_id),
                                          timeout=10).circuits
    reported = sorted((x.device, x.in_port, x.out_port) for c in circuits
                      for x in c.cross_connects)
    check(have == reported, f"{where}: devices hold {have}, ocsd reports {reported}")
    pods = collections.Counter(frozenset((i, o)) for (_, i, o) in have)
    check(pods == expected_pods(spec(job_id)),
          f"{where}: circuits between pods {dict(pods)}, the demand needs "
          f"{dict(expected_pods(spec(job_id)))}")
    models = {fleet.models[dev_index(n)] for (n, _, _) in have}
    check(models == {"polatis", "ocs-switch"}, f"{where}: the job spans models {models}")
    return have


def dev_index(name):
    g, d = (int(x) for x in re.match(r"ocs-g(\d+)-d(\d+)$", name).groups())
    return g * fleet.PER_GROUP + d


def submit(job_id):
    """(job, seconds); a submission ocsd answers with an error (a
    transaction that failed on its first try is not submitted: UNAVAILABLE
    with the reason) gives (None, seconds, reason)."""
    import grpc
    t0 = time.time()
    try:
        r = api["jobs"].SubmitJob(spec(job_id), timeout=60)
    except grpc.RpcError as e:
        if e.code() != grpc.StatusCode.UNAVAILABLE:
            raise
        return None, time.time() - t0, e.details()
    return r.job, time.time() - t0, r.job.reason


def case_plain():
    """a: submit, read back, release. Returns the devices the job uses
    (polatis ones, ocs-switch ones) and one (device, port) of a polatis one."""
    j, took, reason = submit("a")
    check(j is not None and state_name(j.state) == "ACTIVE", f"a: submit: {j} {reason}")
    print(f"a: submit ACTIVE in {took:.2f} s", flush=True)
    have = check_devices("a: active", "a", True)
    release("a", "a")
    check_devices("a: released", "a", False)
    used = sorted({dev_index(n) for (n, _, _) in have})
    pol = [d for d in used if fleet.models[d] == "polatis"]
    ocs = [d for d in used if fleet.models[d] == "ocs-switch"]
    port = next(((dev_index(n), i) for (n, i, _) in have
                 if fleet.models[dev_index(n)] == "polatis"), None)
    return pol, ocs, port


def case_fails(name, dev, knob, why, late_s=0):
    """b, c: with knob set on device dev the job must fail and leave nothing
    (read late_s after the submit at the earliest: a hung RPC that ocsd gave
    up on still runs on the device when its hang ends)."""
    fleet.set_faults(dev, knob)
    t0 = time.time()
    j, _, reason = submit(name)
    j = settle(name)
    time.sleep(max(0.0, t0 + late_s - time.time()))
    state = state_name(j.state) if j else "not submitted"
    print(f"{name}: {knob} on {fleet.device_name(dev)} ({why}): {state} in "
          f"{time.time() - t0:.1f} s: {reason}", flush=True)
    check(state in ("FAILED", "not submitted"),
          f"{name}: {knob} on {fleet.device_name(dev)}: {state} {reason}")
    check(fleet.device_name(dev) in reason,
          f"{name}: the reason names {fleet.device_name(dev)}: {reason}")
    fleet.set_faults(dev, "")
    check_devices(f"{name}: after {knob}", name, state == "ACTIVE")
    if state in ("ACTIVE", "FAILED"):
        release(name, name)
        check_devices(f"{name}: released", name, False)


def intents_of(job_id):
    return store_rows(f"SELECT txn_id, state, detail FROM intents WHERE job_id = '{job_id}'"
                      " ORDER BY txn_id")


def wait_for(pred, what, timeout_s=30):
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if pred():
            return True
        time.sleep(0.02)
    check(False, f"timed out waiting for {what}")
    return False


def case_kill(name, dev, knob, window, before, after, hang_ms=HANG_MS):
    """d: sets knob on device dev, submits job `name`, waits for window()
    (true inside the kill window), kills ocsd, clears the knob, lets the
    hang (hang_ms) end, reads the devices (before(devices, txn) checks them), restarts
    ocsd on the same store and checks what recovery did (after(txn, log))
    and the settled job against the devices; releases it."""
    fleet.set_faults(dev, knob)
    answer = {}

    def run():
        try:
            answer["r"] = submit(name)
        except Exception as e:  # noqa: BLE001 - the kill ends the call
            answer["e"] = e

    t = threading.Thread(target=run, daemon=True)
    t0 = time.time()
    t.start()
    inside = wait_for(window, f"{name}: the kill window")
    fleet.kill_ocsd()
    killed = time.time()
    t.join(10)
    fleet.set_faults(dev, "")
    txns = intents_of(name)
    check(len(txns) == 1 and txns[0][1] == "open",
          f"{name}: one open intent at the kill: {txns}")
    if not inside or not txns:
        return
    txn = txns[0][0]
    # the hang ends (its RPC runs or the session drops) before ocsd comes back
    time.sleep(max(0.0, t0 + 2 * hang_ms / 1000 + 0.3 - time.time()))
    before(fleet.read_devices(), txn)
    log_at = len(fleet.log())
    fleet.start_ocsd(reconcile_s=600)
    connect()
    j = settle(name)
    state = state_name(j.state) if j else "absent"
    print(f"{name}: {knob} on {fleet.device_name(dev)}, killed {killed - t0:.2f} s after the "
          f"submit; after the restart {state} in {time.time() - killed:.1f} s", flush=True)
    after(txn, fleet.log()[log_at:])
    check(state in ("ACTIVE", "FAILED"), f"{name}: settled {state} {j and j.reason}")
    check_devices(f"{name}: after recovery", name, state == "ACTIVE")
    release(name, name)
    check_devices(f"{name}: released", name, False)


def by_model(devices, model):
    return {n: rows for n, rows in devices.items() if fleet.models[dev_index(n)] == model}


def recovered(name, txn, log, state, detail_re):
    """The first intent's outcome in the store and in ocsd's log."""
    rows = store_rows(f"SELECT state, detail FROM intents WHERE txn_id = {txn}")
    check(len(rows) == 1 and rows[0][0] == state and re.search(detail_re, rows[0][1] or ""),
          f"{name}: intent {txn} after recovery: {rows}, want {state} /{detail_re}/")
    check(re.search(rf"transaction {txn} of job {name} left open[^\n]*: {state}, [^\n]*"
                    + detail_re, log),
          f"{name}: ocsd logs intent {txn} recovered {state} /{detail_re}/")


def main():
    ocsd_fleet.gen_stubs(os.path.join(SRC, "proto"), os.path.join(fleet.work, "gen"))
    t_all = time.time()
    fleet.start_devices(1)
    fleet.start_ocsd(reconcile_s=600)
    connect()

    pol, ocs, port = case_plain()
    check(len(pol) >= 2 and len(ocs) >= 2,
          f"the job uses polatis devices {pol} and ocs-switch devices {ocs}: "
          "want two of each")
    if len(pol) < 2 or len(ocs) < 2:
        return
    p0, p1, o0 = pol[0], pol[1], ocs[0]
    if LATE_EDIT:
        case_fails("c4", p1, f"hang@edit={RPC_TIMEOUT_MS + 1000}",
                   "the edit lands after ocsd gave up on it",
                   late_s=(RPC_TIMEOUT_MS + 1500) / 1000)
        check(fleet.stop_ocsd() == 0, "ocsd exit code on SIGTERM")
        return

    t = time.time()
    case_fails("b1", p1, "refuse@edit", "the edit refused")
    case_fails("b2", port[0], f"refuse-port={port[1]}", "a port the job uses refused")
    case_fails("c1", p1, "drop@edit", "the session drops at the edit")
    case_fails("c2", o0, "drop@commit",
               "an ocs-switch drops at its commit, the polatis devices wrote running")
    case_fails("c3", p0, "garble@edit", "the edit runs, its reply is garbled")
    print(f"b, c: {time.time() - t:.1f} s", flush=True)

    def pol_holds(d):
        return lambda: bool(fleet.read_device(d))

    # d1: before any device's edit: a polatis lock hangs, the others prepared
    def d1_window():
        return bool(store_rows("SELECT 1 FROM intents WHERE job_id = 'd1' AND state = 'open'")) \
            and (time.sleep(0.3) or True)

    def d1_before(devices, txn):
        check(held(devices) == [], f"d1: nothing written before the restart: {held(devices)}")

    case_kill("d1", p1, f"hang@lock={HANG_MS}", d1_window, d1_before,
              lambda txn, log: recovered("d1", txn, log, "rolled_back",
                                         "devices back at the pre-image"))

    # d2 (W2): the first polatis device wrote running, the second's edit hangs
    def d2_before(devices, txn):
        pd = by_model(devices, "polatis")
        check(pd[fleet.device_name(p0)] and not pd[fleet.device_name(p1)],
              f"d2: before the restart one polatis device at the target: {pd}")
        check(not any(by_model(devices, "ocs-switch").values()),
              f"d2: the ocs-switch devices reverted: {by_model(devices, 'ocs-switch')}")

    case_kill("d2", p1, f"hang@edit={HANG_MS},drop@edit", pol_holds(p0), d2_before,
              lambda txn, log: recovered(
                  "d2", txn, log, "rolled_back",
                  r"never decided; 1 device\(s\) that had committed for good were written back"))

    # d3: every device edited, the second polatis device's read-back hangs
    def d3_window():
        if not (fleet.read_device(p0) and fleet.read_device(o0)):
            return False
        time.sleep(0.3)  # the commit step's RPCs left together: p1's edit ran too
        return True

    def d3_before(devices, txn):
        check(store_rows(f"SELECT * FROM intent_decisions WHERE txn_id = {txn}") == [],
              "d3: killed before the decision")
        pd = by_model(devices, "polatis")
        check(pd[fleet.device_name(p0)] and pd[fleet.device_name(p1)],
              f"d3: before the restart both polatis devices at the target: {pd}")
        check(not any(by_model(devices, "ocs-switch").values()),
              f"d3: the ocs-switch devices reverted: {by_model(devices, 'ocs-switch')}")

    case_kill("d3", p1, f"hang@get={D3_HANG_MS}+", d3_window, d3_before,
              lambda txn, log: recovered(
                  "d3", txn, log, "rolled_back",
                  r"never decided; 2 device\(s\) that had committed for good were written back"),
              hang_ms=D3_HANG_MS)

    # d4: after the decision: an ocs-switch confirm hangs, then drops
    def d4_window():
        return bool(store_rows("SELECT 1 FROM intent_decisions d JOIN intents i USING(txn_id)"
                               " WHERE i.job_id = 'd4'"))

    def d4_before(devices, txn):
        pd = by_model(devices, "polatis")
        check(pd[fleet.device_name(p0)] and pd[fleet.device_name(p1)],
              f"d4: before the restart both polatis devices at the target: {pd}")
        check(not devices[fleet.device_name(o0)],
              f"d4: the dropped ocs-switch device reverted: {devices[fleet.device_name(o0)]}")

    def d4_after(txn, log):
        recovered("d4", txn, log, "confirmed", "decided, finished")
        check(len(intents_of("d4")) == 1, f"d4: no second transaction: {intents_of('d4')}")

    case_kill("d4", o0, f"hang@confirm={HANG_MS},drop@confirm", d4_window, d4_before, d4_after)
    check(fleet.stop_ocsd() == 0, "ocsd exit code on SIGTERM")
    print(f"daemon_polatis: {time.time() - t_all:.1f} s", flush=True)


sys.exit(script.run(main))

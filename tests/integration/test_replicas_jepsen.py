#!/usr/bin/python3
"""test_replicas_jepsen.py - a Jepsen-style test of replicated ocsd (issue 15)
and its etcd-down case, on loopback with real processes only: 3 ocsd
replicas (--store etcd, lease TTL 1 s) on a 3-member etcd cluster (Debian's
etcd) and the lab fleet of 16 ocs-devsim devices, all started by
ocsd_replicas.py (a replica that exits is started again 200 ms later, as
systemd's Restart=always would).

The run (DURATION_S, default 60 s): four client threads (python3-grpcio,
each owning a leaf pair across two pods, up to two live jobs of 1-2 links
each) submit and release jobs through whichever replica leads, while a
nemesis, at random times drawn from the seed (printed), does one of
(each once per four faults, in a seeded order):
kill -9 the leader; SIGSTOP the leader for 1-3 s then SIGCONT; kill -9 one
etcd member and start it again 2-5 s later; restart (SIGTERM, start) a
follower. A sampler (4 threads, 2 device pairs each) reads every device
over its own NETCONF sessions (ncclient), each pair every 50 ms at most
(the interval reached is printed: about 100 ms on the loaded 2-core test
machine). Every operation is recorded with its outcome: ok (acknowledged),
fail (certainly not done: refused by a follower, refused by the leader
saying "nothing changed", a precondition error, or no leader reached) or
info (indeterminate: it may or may not have happened, e.g. a timeout or a
connection reset; the checks allow both for those, never for an
acknowledged or a refused one).

Then everything is healed (etcd members started, paused replicas resumed),
a leader is waited for, the jobs settle and the confirm timeout passes, and:
  1. every acknowledged submit (answered ACTIVE) is ACTIVE, or RELEASED if
     its release was acknowledged (either if the release was
     indeterminate); one answered FAILED, or refused because its
     transaction failed on the devices, is FAILED; one whose release
     was answered NOT_FOUND does not exist; one refused does not exist
     (read through the leader);
  2. the devices (read back with ncclient) hold exactly the cross-connects
     of the ACTIVE jobs' circuits (ListCircuits), all connected;
  3. no one-way circuit was ever sampled: on cross wiring, device 2m carries
     in p -> out q exactly when device 2m+1 carries in q -> out p. The two
     devices of a pair are read one after the other, so a pair read while a
     transaction commits on them can show one device ahead: a sighting
     counts only if the pair, read again at once and 100 ms later, still
     shows it (transient sightings are counted and printed). One window is
     known and allowed, only as far as the replicas' logs prove it: a
     leader killed or paused between a transaction's confirms leaves the
     devices it had confirmed holding the target and the others reverted
     (their commits die with the session, or with the successor's fence),
     until the successor's recovery finishes that decided transaction on
     them (docs/replicas.md, "Between two confirms"). A sighting is
     excused only when it begins after such a fault and ends by the time a
     replica logged finishing a decided transaction "on N device(s) that
     had reverted" after it (each excused one is printed);
  4. leadership was never held by two replicas at once: the leader key's
     etcd history (every event from revision 1, watched with etcdctl)
     makes a sequence of terms, each created only after the previous one's
     key was deleted and held by one replica throughout; every "replica rK
     leads (leader key revision R)" a replica logged is the term etcd
     created at R for rK, each claimed once; and every acknowledged write
     was answered by a replica whose term (as the watch saw it, 2 s of
     slack for the watch's delay) overlaps the call.
It prints the operations by kind and outcome, the faults injected by kind,
the failovers (leader terms after the first), the longest write
unavailability (the longest time without an acknowledged write) and, for
each leader fault, the time to the next acknowledged write.

The etcd-down case, after the checks: every etcd member stopped, writes are
refused cleanly (an error naming etcd, within the client deadline), at once
and 3 s later (after the lease's TTL), a live replica's GetFabric says why
(store_problem names etcd), the devices are untouched (read before and
after), and once etcd is back a submit succeeds without any replica having
been restarted.

Last, issue 15's fence case on its own: with an 8 s switching time between
commit and confirm, the leader is paused right after its commit reached the
devices, a new leader takes over, the old one is resumed: it makes nothing
ACTIVE, the devices end up exactly as the new leader's state says, and the
sampler (running throughout) sees no one-way cross-connect. A pause that
came after the confirm (the devices read too slowly) is tried again with a
new job, up to 3 times.

usage: test_replicas_jepsen.py BUILD_DIR SOURCE_DIR [DURATION_S] [SEED]
"""
import collections
import os
import random
import re
import sys
import threading
import time
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ocsd_fleet  # noqa: E402
import ocsd_replicas  # noqa: E402

BUILD, SRC = sys.argv[1], sys.argv[2]
DURATION_S = float(sys.argv[3]) if len(sys.argv) > 3 else 60
SEED = int(sys.argv[4]) if len(sys.argv) > 4 else random.randrange(1 << 30)
CONFIRM_TIMEOUT_S = 5
RPC_TIMEOUT_S = 5      # one attempt on one replica
OP_DEADLINE_S = 10     # one operation, redirects and retries included
SLOTS = [(0, 2), (1, 3), (4, 6), (5, 7)]  # leaf pairs, each across two pods
MAX_LIVE = 2           # live jobs per client thread
SAMPLE_S = 0.05
SAMPLER_THREADS = 4    # each reads 2 of the 8 device pairs
WATCH_SLACK_S = 2.0
SETTLE_S = 60
FENCE_SWITCH_S = 8
FENCE_CONFIRM_TIMEOUT_S = 12
FENCE_TRIES = 3
# on failure, each replica's log lines that say why the devices and the
# store may disagree: transactions that failed or were rolled back, what
# recovery decided, fences, drift, terms begun and lost
KEY_LINES = (r"verify failed|failed on|rolled back|left open|kill-session|unowned|"
             r"leadership lost|leads \(leader key|cannot store the outcome|=== start")
KEY_KEEP = 80

print(f"replicas_jepsen: {DURATION_S:g} s, seed {SEED}", flush=True)
fleet = ocsd_fleet.Fleet(BUILD, SRC, confirm_timeout_s=CONFIRM_TIMEOUT_S,
                         prefix="ocsd-jepsen-")
script = ocsd_fleet.Script("test_replicas_jepsen", fleet)
check = script.check
ocsd_fleet.gen_stubs(os.path.join(SRC, "proto"), os.path.join(fleet.work, "gen"))
from ocs.v1 import jobs_pb2  # noqa: E402

ACTIVE, RELEASED, FAILED = (jobs_pb2.JOB_STATE_ACTIVE, jobs_pb2.JOB_STATE_RELEASED,
                            jobs_pb2.JOB_STATE_FAILED)
SETTLED = (ACTIVE, RELEASED, FAILED)
NAME = jobs_pb2.JobState.Name

cluster = ocsd_replicas.EtcdCluster(fleet.work, members=3)
reps = None
watch = None


class History:
    """Every operation the clients started, under one lock: dicts with
    thread, kind (submit/release), job, start, end, outcome (ok/fail/info),
    state (the answer's job state on ok), replica or error (detail)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.ops = []

    def add(self, op):
        with self.lock:
            self.ops.append(op)

    def snapshot(self):
        with self.lock:
            return list(self.ops)


history = History()
faults = []  # (time, kind, detail), by the nemesis


def spec(job_id, leaves, slot, links):
    gpus = [jobs_pb2.GpuPlacement(gpu=8 * leaf + 2 * slot + k, leaf=leaf, pod=leaf // 2)
            for leaf in leaves for k in range(2)]
    return jobs_pb2.JobSpec(
        id=job_id, idempotency_key="key-" + job_id,
        placement=jobs_pb2.Placement(gpus=gpus),
        leaf_demand=jobs_pb2.LeafDemand(
            pairs=[jobs_pb2.LeafPair(a=leaves[0], b=leaves[1], links=links)]))


def client_loop(t, stop):
    """Thread t: submits and releases jobs on leaf pair SLOTS[t] until stop.
    A job whose submission was indeterminate may hold its GPUs: it stays in
    `live` until a release is acknowledged or says it does not exist."""
    rng = random.Random(SEED * 10 + t + 1)
    c = reps.client(RPC_TIMEOUT_S)
    live = {}  # slot -> job id (acknowledged ACTIVE, or indeterminate)
    n = 0
    try:
        while not stop.is_set():
            free = [s for s in range(MAX_LIVE) if s not in live]
            if free and (not live or rng.random() < 0.5):
                s = free[0]
                n += 1
                jid = f"t{t}-{n:03d}"
                op = {"thread": t, "kind": "submit", "job": jid, "start": time.time()}
                outcome, ans, detail = c.submit(spec(jid, SLOTS[t], s, rng.randint(1, 2)),
                                                deadline_s=OP_DEADLINE_S)
                op.update(end=time.time(), outcome=outcome, detail=detail,
                          state=ans.job.state if ans else None)
                if outcome == "info" or (outcome == "ok" and ans.job.state != FAILED):
                    live[s] = jid
                held = re.search(r"is held by job (t%d-\d+) " % t, detail)
                if outcome == "fail" and held:
                    # an earlier job of this thread holds the slot although its
                    # submission was refused (check 1 reports that): release it
                    live[s] = held.group(1)
            else:
                s = rng.choice(sorted(live))
                jid = live[s]
                op = {"thread": t, "kind": "release", "job": jid, "start": time.time()}
                outcome, ans, detail = c.release(jid, deadline_s=OP_DEADLINE_S)
                op.update(end=time.time(), outcome=outcome, detail=detail,
                          state=ans.job.state if ans else None)
                # only a release done, or a job that does not exist, frees the
                # slot (a refused release leaves the job holding its GPUs)
                if outcome == "ok" or (outcome == "fail" and "NOT_FOUND" in detail):
                    del live[s]
            history.add(op)
            stop.wait(rng.uniform(0.02, 0.2))
    finally:
        c.close()


def leader_now():
    """The index of the replica holding etcd's leader key, else of the one
    serving as leader, else None."""
    try:
        k, _ = reps.etcd_leader()
    except RuntimeError:
        k = None
    if k is None:
        found = reps.serving_leader()
        k = found[0] if len(found) == 1 else None
    return k


def nemesis(stop):
    rng = random.Random(SEED)
    kinds = ["kill-leader", "pause-leader", "kill-etcd-member", "restart-follower"]
    order = []
    while not stop.wait(rng.uniform(3, 7)):
        if not order:  # every kind once per four faults, in a seeded order
            order = list(kinds)
            rng.shuffle(order)
        kind = order.pop()
        now = time.time()
        if kind in ("kill-leader", "pause-leader"):
            k = leader_now()
            if k is None:
                faults.append((now, kind, "skipped: no leader"))
                continue
            # the fault's time is the signal's, not the look-up's before it
            if kind == "kill-leader":
                reps.kill(k)
                faults.append((time.time(), kind, reps.reps[k].id))
            else:
                pause = rng.uniform(1, 3)
                reps.pause(k)
                faults.append((time.time(), kind, f"{reps.reps[k].id} {pause:.1f} s"))
                time.sleep(pause)
                reps.resume(k)
        elif kind == "kill-etcd-member":
            m = rng.randrange(cluster.n)
            down = rng.uniform(2, 5)
            cluster.kill_member(m)
            faults.append((now, kind, f"m{m + 1} {down:.1f} s"))
            time.sleep(down)
            cluster.start_member(m)
        else:
            k = leader_now()
            others = [i for i in range(len(reps.reps)) if i != k and reps.reps[i].running()]
            if not others:
                faults.append((now, kind, "skipped: no follower"))
                continue
            f = rng.choice(others)
            reps.restart(f)
            faults.append((now, kind, reps.reps[f].id))


class Sampler:
    """Reads every device over its own ncclient sessions, pair by pair
    (devices 2m, 2m+1), each pair every SAMPLE_S at most (SAMPLER_THREADS
    threads, each owning some pairs; slower when a round of its pairs takes
    longer), and records one-way cross-connects: `persistent` the ones still
    there when the pair is read again at once and 100 ms later, `transient`
    the others. `pair_reads` counts the pair reads, for the achieved rate."""

    def __init__(self):
        self.sessions = {}
        self.lock = threading.Lock()  # guards the lists and counters below
        self.latest = {}  # device -> (time, {(in, out)}) of its latest read
        self.pair_reads = 0
        self.transient = []
        self.persistent = []
        self.errors = 0
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._run, args=(i,), daemon=True)
                        for i in range(SAMPLER_THREADS)]

    def _read(self, d):
        from ncclient import manager
        import ncclient.transport.ssh
        ncclient.transport.ssh.TICK = 0.001
        m = self.sessions.get(d)
        if m is None or not m.connected:
            m = manager.connect(host="127.0.0.1", port=fleet.base + d, username="ocsd",
                                password=fleet.password, hostkey_verify=False,
                                allow_agent=False, look_for_keys=False, timeout=10)
            m.timeout = 10
            self.sessions[d] = m
        try:
            reply = m.get(filter=("subtree", f'<cross-connects xmlns="{ocsd_fleet.NS}"/>'))
        except Exception:
            self.sessions.pop(d, None)
            raise
        ns = ocsd_fleet.NS
        got = {(int(c.findtext(f"{{{ns}}}input")), int(c.findtext(f"{{{ns}}}output")))
               for c in ET.fromstring(reply.data_xml).iter(f"{{{ns}}}connection")}
        with self.lock:
            self.latest[d] = (time.time(), got)
        return got

    def cross_connects(self, since=0.0):
        """{(device, in, out)} from each device's latest read; None until
        every device was read after `since`."""
        with self.lock:
            if len(self.latest) < fleet.N_DEV or any(t < since for t, _ in self.latest.values()):
                return None
            return {(fleet.device_name(d), i, o) for d, (_, xs) in self.latest.items()
                    for (i, o) in xs}

    def _pair(self, a):
        """One-way cross-connects of pair (a, a+1) as (device, in, out)."""
        have = {a: self._read(a), a + 1: self._read(a + 1)}
        return {(fleet.device_name(d), i, o) for d in (a, a + 1) for (i, o) in have[d]
                if i == o or (o, i) not in have[d ^ 1]}

    def _run(self, i):
        mine = [a for a in range(0, fleet.N_DEV, 2) if (a // 2) % SAMPLER_THREADS == i]
        while not self.stop.is_set():
            began = time.time()
            for a in mine:
                try:
                    bad = self._pair(a)
                    if bad:
                        seen = time.time()
                        again = self._pair(a) & bad
                        time.sleep(0.1)
                        still = self._pair(a) & again if again else set()
                        with self.lock:
                            (self.persistent if still else self.transient).append(
                                (seen, sorted(bad), sorted(still)))
                    with self.lock:
                        self.pair_reads += 1
                except Exception:  # noqa: BLE001 - a session lost; reopened next round
                    with self.lock:
                        self.errors += 1
            self.stop.wait(max(0.0, SAMPLE_S - (time.time() - began)))

    def start(self):
        for d in range(fleet.N_DEV):  # one session after another
            try:
                self._read(d)
            except Exception:  # noqa: BLE001 - a busy machine; the thread opens it again
                self.errors += 1
        self.began = time.time()
        for t in self.threads:
            t.start()

    def interval(self):
        """The mean time between two reads of one pair so far."""
        pairs = fleet.N_DEV // 2
        return (time.time() - self.began) * pairs / max(1, self.pair_reads)

    def close(self):
        self.stop.set()
        for t in self.threads:
            t.join(30)
        for m in self.sessions.values():
            try:
                m.close_session()
            except Exception:  # noqa: BLE001 - closing anyway
                pass


def finished_decided():
    """When a replica's recovery finished a decided transaction on devices
    that had reverted (its predecessor stopped between the confirms)."""
    out = []
    for r in reps.reps:
        for x in r.log().splitlines():
            if "left open (decided): confirmed" in x and "that had reverted" in x:
                out.append(ocsd_replicas._log_time(x.split("Z ")[0]))
    return sorted(out)


def excused(sighting, finished):
    """Check 3's known window: the sighting began after a leader was killed
    or paused and ended (first read + the re-reads' 100 ms + a sampling
    interval of slack) by the first such recovery after that fault."""
    t = sighting[0]
    for (tf, kind, detail) in faults:
        if kind not in ("kill-leader", "pause-leader") or detail.startswith("skipped"):
            continue
        if tf - 0.3 > t:
            continue
        done = next((tr for tr in finished if tr >= tf), None)
        if done is not None and t <= done + 0.5:
            return True
    return False


def heal():
    """Every etcd member running, no replica paused, a leader serving."""
    for m in range(cluster.n):
        if not cluster.running(m):
            cluster.start_member(m)
    for k, r in enumerate(reps.reps):
        if r.paused:
            reps.resume(k)
    cluster.wait_healthy(60, members=list(range(cluster.n)))
    return reps.wait_leader(60)


def from_leader(c, read):
    """read(c) answered by the serving leader itself (a follower's copy may
    lag): (outcome, answer, detail) as the client's calls return."""
    deadline = time.time() + SETTLE_S
    while True:
        leader = reps.reps[reps.wait_leader(60)].id
        c.hint = next(k for k, r in enumerate(reps.reps) if r.id == leader)
        outcome, ans, detail = read(c)
        if outcome != "ok" or detail == leader or time.time() > deadline:
            return outcome, ans, detail
        time.sleep(0.2)


def settle(c):
    """{id: Job} through the leader once no job is between states."""
    deadline = time.time() + SETTLE_S
    while True:
        outcome, jobs, detail = from_leader(c, lambda c: c.list_jobs(deadline_s=OP_DEADLINE_S))
        if outcome == "ok":
            by_id = {j.spec.id: j for j in jobs}
            if all(j.state in SETTLED for j in by_id.values()):
                return by_id
        if time.time() > deadline:
            check(False, f"jobs did not settle: {detail if outcome != 'ok' else ''} " + ", ".join(
                f"{i}={NAME(j.state)}" for i, j in (by_id.items() if outcome == "ok" else [])
                if j.state not in SETTLED))
            return by_id if outcome == "ok" else {}
        time.sleep(0.2)


def check_jobs(ops, jobs):
    """Check 1: what was acknowledged is what the leader says."""
    by_job = collections.defaultdict(list)
    for op in ops:
        by_job[op["job"]].append(op)
    for jid, mine in sorted(by_job.items()):
        sub = mine[0]
        rels = mine[1:]
        j = jobs.get(jid)
        have = NAME(j.state).replace("JOB_STATE_", "") if j else "absent"
        rel_ok = [r for r in rels if r["outcome"] == "ok"]
        rel_info = [r for r in rels if r["outcome"] == "info"]
        rel_gone = [r for r in rels if r["outcome"] == "fail" and "NOT_FOUND" in r["detail"]]
        if sub["outcome"] == "ok" and sub["state"] == ACTIVE:
            want = ("RELEASED",) if rel_ok else ("ACTIVE", "RELEASED") if rel_info else ("ACTIVE",)
        elif sub["outcome"] == "ok" and sub["state"] == FAILED:
            want = ("FAILED",)
        elif sub["outcome"] == "fail" and ": devices: " in sub["detail"]:
            # taken, then its transaction failed on the devices (a paused
            # old leader's session still holding a device's lock) and was
            # rolled back: the job is stored FAILED and holds nothing
            want = ("FAILED",)
        elif sub["outcome"] == "fail":
            want = ("absent",)
        elif rel_ok:
            want = ("RELEASED",)
        elif rel_gone:
            want = ("absent",)
        else:
            want = ("absent", "ACTIVE", "FAILED", "RELEASED")
        check(have in want, f"job {jid}: {have}, want {'/'.join(want)}; submit "
              f"{sub['outcome']} ({sub['detail']}), releases "
              f"{[(r['outcome'], r['detail']) for r in rels]}")


def check_devices(c, jobs):
    """Check 2: the devices hold exactly the ACTIVE jobs' circuits."""
    outcome, circuits, detail = from_leader(
        c, lambda c: c.list_circuits(deadline_s=OP_DEADLINE_S))
    check(outcome == "ok", f"ListCircuits: {detail}")
    if outcome != "ok":
        return
    state = set()
    for circ in circuits:
        j = jobs.get(circ.job_id)
        check(j is not None and j.state == ACTIVE,
              f"circuit of job {circ.job_id} ({NAME(j.state) if j else 'absent'})")
        state |= {(x.device, x.in_port, x.out_port) for x in circ.cross_connects}
    devices = fleet.read_devices()
    held = {(name, i, o) for name, rows in devices.items() for (i, o, _) in rows}
    not_connected = [(name, i, o, s) for name, rows in devices.items() for (i, o, s) in rows
                     if s != "connected"]
    check(held == state, f"devices vs ListCircuits: only on the devices {sorted(held - state)}, "
          f"only in the state {sorted(state - held)}")
    check(not not_connected, f"cross-connects not connected: {not_connected}")
    check(fleet.one_way(devices) == [], f"one-way at the end: {fleet.one_way(devices)}")
    return len(held)


def leader_terms(events):
    """Check 4a: the leader key's etcd history as terms [{create, holder,
    t_create, delete, t_delete}]."""
    terms = []
    for (recv, kind, create, mod, value) in events:
        holder = value.split(" ")[0]
        cur = terms[-1] if terms and terms[-1]["delete"] is None else None
        if kind == "PUT" and create == mod:
            check(cur is None, f"leader key created at revision {create} for {holder} while "
                  f"term {cur and cur['create']} of {cur and cur['holder']} was not deleted")
            terms.append({"create": create, "holder": holder, "t_create": recv,
                          "delete": None, "t_delete": None})
        elif kind == "PUT":
            check(cur is not None and cur["create"] == create and cur["holder"] == holder,
                  f"leader key rewritten at revision {mod}: {value!r} (create revision "
                  f"{create}), term {cur}")
        else:
            check(cur is not None, f"leader key deleted at revision {mod} with no term open")
            if cur is not None:
                cur["delete"], cur["t_delete"] = mod, recv
    return terms


def check_leadership(terms, ops):
    """Checks 4b and 4c: the replicas' logs and the acknowledged writes
    against the terms etcd recorded."""
    by_create = {t["create"]: t for t in terms}
    claimed = collections.Counter()
    for (when, rid, rev) in reps.terms():
        t = by_create.get(rev)
        check(t is not None and t["holder"] == rid,
              f"{rid} logged leading on revision {rev}; etcd's term there: {t}")
        claimed[rev] += 1
    for rev, n in claimed.items():
        check(n == 1, f"term {rev} claimed {n} times")
    for op in ops:
        if op["outcome"] != "ok":
            continue
        rid = op["detail"]
        ok = any(t["holder"] == rid and t["t_create"] - WATCH_SLACK_S <= op["end"]
                 and (t["t_delete"] is None or op["start"] <= t["t_delete"]) for t in terms)
        check(ok, f"{op['kind']} {op['job']} acknowledged by {rid} between "
              f"{op['start']:.3f} and {op['end']:.3f}, outside its terms "
              + str([(t["create"], t["t_create"], t["t_delete"])
                     for t in terms if t["holder"] == rid]))


def longest_gap(ops, t0, t1):
    """The longest time in [t0, t1] without an acknowledged write, and when it began."""
    acks = sorted(op["end"] for op in ops if op["outcome"] == "ok")
    points = [t0] + [a for a in acks if t0 <= a <= t1] + [t1]
    gaps = [(b - a, a) for a, b in zip(points, points[1:])]
    return max(gaps) if gaps else (t1 - t0, t0)


def etcd_down(c):
    """Every member stopped: writes refused naming etcd, in time, devices
    untouched; etcd back: a submit succeeds, no replica restarted."""
    print("etcd down: stopping every member", flush=True)
    before = fleet.read_devices()
    starts = sum(1 for e in reps.events if e[2] == "start")
    cluster.stop()
    for n, wait_s in enumerate((0, 3)):
        time.sleep(wait_s)
        began = time.time()
        outcome, ans, detail = c.submit(spec(f"down-{n}", SLOTS[0], MAX_LIVE, 1),
                                        deadline_s=OP_DEADLINE_S)
        took = time.time() - began
        print(f"etcd down: submit {n} after {wait_s} s: {outcome} in {took:.2f} s: {detail}",
              flush=True)
        check(outcome != "ok", f"down-{n} acknowledged with etcd down")
        check(took <= OP_DEADLINE_S + 2, f"down-{n} took {took:.1f} s (deadline {OP_DEADLINE_S} s)")
        check("etcd" in detail, f"down-{n}'s error does not name etcd: {detail}")
    # health says why: a live replica's GetFabric names etcd in store_problem
    problems = {}
    for k, r in enumerate(reps.reps):
        fab = c.summary(k)
        problems[r.id] = fab.store_problem if fab else None
    print(f"etcd down: store_problem per replica: {problems}", flush=True)
    check(any(p and "etcd" in p for p in problems.values()),
          f"no replica's GetFabric names etcd in store_problem: {problems}")
    check(fleet.read_devices() == before, "devices changed while etcd was down")
    cluster.start()
    began = time.time()
    # The same job id again after an indeterminate answer is safe (a submit
    # of an existing id with the same spec answers that job): a role change
    # while etcd comes back ends calls in flight (CANCELLED), as a client
    # of any replicated service would see and retry.
    tries = 0
    while True:
        tries += 1
        outcome, ans, detail = c.submit(spec("up-0", SLOTS[0], MAX_LIVE, 1),
                                        deadline_s=max(1.0, 60 - (time.time() - began)))
        if outcome == "ok" or time.time() - began > 60:
            break
        time.sleep(0.5)
    print(f"etcd back: submit {outcome} {time.time() - began:.2f} s after the members started "
          f"({tries} tries): {detail}", flush=True)
    check(outcome == "ok" and ans.job.state == ACTIVE,
          f"up-0 after etcd returned: {outcome} {detail} {ans and NAME(ans.job.state)}")
    restarted = sum(1 for e in reps.events if e[2] == "start") - starts
    check(restarted == 0, f"{restarted} replica start(s) while etcd was down: "
          f"{[e for e in reps.events if e[2] in ('exit', 'start')][-6:]}")


def pause_between_commit_and_confirm(c):
    """Issue 15's fence test: the leader paused (SIGSTOP) while a
    transaction waits between its confirmed commit and its confirm (FENCE_SWITCH_S
    switching time), a new leader takes over, the old one is resumed
    (SIGCONT). The old leader must not confirm (no "job ACTIVE" from it
    after the pause, its answer not ACTIVE), the devices end up exactly as
    the new leader's state says once the confirm timeout passed, and no
    one-way cross-connect is sampled at any point. A pause that lands after
    the confirm (the devices read too slowly on a loaded machine to see the
    commit in time: the old leader logged the job ACTIVE before the pause)
    tests nothing: the job is released and the case is tried again, up to
    FENCE_TRIES times."""
    import json
    with open(fleet.cfg) as f:
        fabric = json.load(f)
    # FENCE_SWITCH_S between commit and confirm: time to see the commit on
    # the devices (a read of all 16 takes 1-2 s on a loaded machine) and
    # pause before the confirm; the devices' confirm timeout outlasts it
    fabric["ocsd-fabric:fabric"]["devices"]["switch-time-us"] = FENCE_SWITCH_S * 1000000
    fabric["ocsd-fabric:fabric"]["devices"]["confirm-timeout-s"] = FENCE_CONFIRM_TIMEOUT_S
    slow = os.path.join(fleet.work, "fabric-slow.json")
    with open(slow, "w") as f:
        json.dump(fabric, f)
    for k in range(len(reps.reps)):
        reps.stop(k)
    fleet.cfg = slow
    reps.start_all()
    sampler = Sampler()
    sampler.start()
    for attempt in range(1, FENCE_TRIES + 1):
        if fence_once(c, sampler, f"fence-{attempt}") or script.failures:
            break
        check(attempt < FENCE_TRIES, f"the leader confirmed before every one of {FENCE_TRIES} "
              "pauses: the fence case did not run")
    jobs = settle(c)
    check_devices(c, jobs)
    sampler.close()
    check(not sampler.persistent, f"one-way circuits sampled around the pause: "
          f"{sampler.persistent[:5]}")


def fence_once(c, sampler, job):
    """One try of the fence case with a new job; False when the pause came
    after the old leader's confirm (then nothing was tested and the job is
    released). The commit is seen in the sampler's reads (its sessions stay
    open: each pair every ~100 ms, where a fresh read of all 16 devices
    takes seconds on a loaded machine)."""
    old = reps.wait_leader(60)
    since = time.time()
    before = None
    while before is None and time.time() < since + 30:
        time.sleep(0.05)
        before = sampler.cross_connects(since)
    check(before is not None, "the sampler read no round of the devices in 30 s")
    before = before or set()
    out = {}

    def submit():
        out["r"] = c.submit(spec(job, SLOTS[1], MAX_LIVE, 1), deadline_s=FENCE_SWITCH_S + 25)

    th = threading.Thread(target=submit, daemon=True)
    th.start()
    # committed on the devices: the new cross-connects are there (unconfirmed)
    deadline = time.time() + 20
    while time.time() < deadline:
        now = sampler.cross_connects()
        if now - before:
            break
        time.sleep(0.01)
    check(bool(now - before), f"{job} never reached the devices")
    pid = reps.reps[old].proc.pid
    reps.pause(old)
    paused_at = time.time()

    def lines(what):
        return [x for x in reps.reps[old].log().splitlines()
                if f"ocsd[{pid}]" in x and what in x and f"job {job}," in x]
    began = lines("job submitted")
    active = [x for x in lines("job ACTIVE")
              if ocsd_replicas._log_time(x.split("Z ")[0]) < paused_at]
    if active:
        reps.resume(old)
        th.join(FENCE_SWITCH_S + 30)
        print(f"fence: {job}: the pause came after the confirm ({active[0][:60]}): again",
              flush=True)
        # a release waits out the switching time too: a client that waits for it
        slow = reps.client(FENCE_SWITCH_S + 20)
        outcome, _, detail = from_leader(
            slow, lambda c: c.release(job, deadline_s=2 * FENCE_SWITCH_S + 20))
        slow.close()
        j = settle(c).get(job)
        check(j is None or j.state == RELEASED,
              f"{job} after its release ({outcome} {detail}): {NAME(j.state) if j else ''}")
        return False
    print(f"fence: {job}: paused {reps.reps[old].id} "
          + (f"{paused_at - ocsd_replicas._log_time(began[0].split('Z ')[0]):.2f} s after it "
             "took the submission" if began else "(no submission logged yet)"), flush=True)
    new = None
    while time.time() < paused_at + 20 and new is None:
        found = [k for k in reps.serving_leader() if k != old]
        new = found[0] if found else None
        time.sleep(0.05)
    check(new is not None, f"no new leader while {reps.reps[old].id} was paused")
    print(f"fence: {reps.reps[old].id} paused between commit and confirm, "
          f"{reps.reps[new].id if new is not None else 'nobody'} leads "
          f"{time.time() - paused_at:.2f} s later", flush=True)
    reps.resume(old)
    th.join(FENCE_SWITCH_S + 30)
    outcome, ans, detail = out.get("r", ("info", None, "no answer"))
    print(f"fence: the submit through the old leader: {outcome} {detail}", flush=True)
    check(not (outcome == "ok" and ans.job.state == ACTIVE and detail == reps.reps[old].id),
          f"the paused leader answered {job} ACTIVE: {detail}")
    check(not lines("job ACTIVE"), f"the paused leader made {job} ACTIVE: {lines(job)}")
    time.sleep(FENCE_CONFIRM_TIMEOUT_S + 1)  # an unconfirmed commit has reverted by now
    reps.wait_leader(60)
    jobs = settle(c)
    j = jobs.get(job)
    print(f"fence: {job} is {NAME(j.state) if j else 'absent'} on the new leader; the old "
          f"leader's lines about it: {[x[x.find('>') + 2:][:120] for x in lines(job)]}",
          flush=True)
    return True


def main():
    global reps, watch
    cluster.start()
    fleet.start_devices()
    reps = ocsd_replicas.Replicas(fleet, cluster, n=3)
    watch = ocsd_replicas.KeyWatch(cluster, reps.leader_key)
    reps.start_all()
    reps.wait_leader(60)
    sampler = Sampler()
    sampler.start()

    stop = threading.Event()
    clients = [threading.Thread(target=client_loop, args=(t, stop), daemon=True)
               for t in range(len(SLOTS))]
    nem = threading.Thread(target=nemesis, args=(stop,), daemon=True)
    t0 = time.time()
    for th in clients + [nem]:
        th.start()
    stop.wait(DURATION_S)
    stop.set()
    t1 = time.time()
    for th in clients + [nem]:
        th.join(OP_DEADLINE_S + 10)
        check(not th.is_alive(), f"thread {th.name} did not end")

    heal()
    c = reps.client(RPC_TIMEOUT_S)
    jobs = settle(c)
    time.sleep(CONFIRM_TIMEOUT_S + 1)  # an unconfirmed commit has reverted by now
    jobs = settle(c)
    ops = history.snapshot()
    check_jobs(ops, jobs)
    held = check_devices(c, jobs)
    interval = sampler.interval()
    sampler.close()
    check(sampler.pair_reads >= DURATION_S * 8, f"only {sampler.pair_reads} pair reads")
    finished = finished_decided()
    known = [x for x in sampler.persistent if excused(x, finished)]
    unexplained = [x for x in sampler.persistent if not excused(x, finished)]
    check(not unexplained, f"one-way circuits sampled: {unexplained[:5]}")
    for x in known[:5]:
        print(f"  one-way at {x[0] - t0:.2f} s between a stopped leader's confirms, until its "
              f"successor finished the transaction: {x[1]}", flush=True)
    watch_events = watch.snapshot()
    terms = leader_terms(watch_events)
    check_leadership(terms, ops)

    counts = collections.Counter((op["kind"], op["outcome"]) for op in ops)
    kinds = collections.Counter(k for (_, k, d) in faults if not d.startswith("skipped"))
    gap, gap_at = longest_gap(ops, t0, t1)
    print(f"operations: {len(ops)}: " + ", ".join(f"{k} {o} {n}" for (k, o), n in sorted(
        counts.items())), flush=True)
    print(f"faults: {sum(kinds.values())}: " + ", ".join(f"{k} {n}" for k, n in sorted(
        kinds.items())) + f" (skipped {len(faults) - sum(kinds.values())})", flush=True)
    for (when, kind, detail) in faults:
        print(f"  {when - t0:6.2f} s {kind} {detail}")
    print(f"failovers: {max(0, len(terms) - 1)} (leader terms: " + ", ".join(
        f"{t['holder']}@{t['create']}" for t in terms) + ")", flush=True)
    print(f"longest write unavailability: {gap:.2f} s (from {gap_at - t0:.2f} s into the run)")
    acks = sorted(op["end"] for op in ops if op["outcome"] == "ok")
    for (when, kind, detail) in faults:
        if kind in ("kill-leader", "pause-leader") and not detail.startswith("skipped"):
            nxt = next((a for a in acks if a > when), None)
            print(f"  {kind} at {when - t0:.2f} s: next acknowledged write "
                  + (f"{nxt - when:.2f} s later" if nxt else "never"))
    print(f"jobs at the end: {collections.Counter(NAME(j.state) for j in jobs.values())}, "
          f"{held} cross-connects on the devices; sampler: {sampler.pair_reads} pair reads, "
          f"each pair every {interval * 1000:.0f} ms, "
          f"{len(sampler.transient)} transient one-way sightings, {len(known)} between a stopped "
          f"leader's confirms, {sampler.errors} read errors;"
          f" client redirects {c.redirects}", flush=True)
    why = collections.Counter((op["kind"], op["outcome"], re.sub(r"\d+", "N", op["detail"])[:90])
                              for op in ops if op["outcome"] != "ok")
    for (kind, outcome, detail), n in why.most_common(10):
        print(f"  {n:4d} x {kind} {outcome}: {detail}")
    for s in sampler.transient[:5]:
        print(f"  transient one-way at {s[0] - t0:.2f} s: {s[1]}")

    etcd_down(c)
    pause_between_commit_and_confirm(c)
    c.close()


def run():
    try:
        main()
    finally:
        if watch:
            watch.close()
        if reps:
            if script.failures:
                for r in reps.reps:
                    text = r.log()
                    # what decides a disagreement between the store and the
                    # devices, from every run of the replica (the tail alone
                    # rarely reaches back to the transaction that caused it)
                    key = [x for x in text.splitlines(True) if re.search(
                        KEY_LINES, x)]
                    print(f"--- {r.id} log: transactions that failed, recoveries, terms "
                          f"({len(key)} lines, the last {KEY_KEEP})")
                    print("".join(key[-KEY_KEEP:]))
                    print(f"--- {r.id} log (tail)")
                    print("".join(text.splitlines(True)[-25:]))
                    # a replica that ignored SIGTERM: its threads' stacks
                    for dump in re.findall(r"=== stacks of .*?(?=\n=== |\Z)", text, re.S):
                        print(dump[:20000])
            reps.close()
        cluster.stop()


sys.exit(script.run(run))

#!/usr/bin/python3
"""test_daemon_room.py - issue 30 on the REAL ocsd: small jobs are not
refused while the fabric has room, and a refusal is a real lack of it.

Lab fabric (4 pods, 2 leaves per pod, 8 GPUs and 8 uplinks per leaf, tau 2,
4 OCS groups of 4 ocs-devsim devices, cross wiring: 4 OCS ports per pod per
group), jobs submitted and released with `ocsctl`, the devices read back
with ncclient (ocsd_fleet.py).

The issue's sequence: 16 leaf-demand jobs of one link between two leaves of
different pods, 2 GPUs on each leaf. They take the pod pairs (0,1), (2,3),
(0,2), (1,3), (0,3), (1,2) in turn and the less used leaf of each pod (ties
to the lower): every leaf carries 4 jobs, every pod 8 links against its 16
OCS ports, so everything fits. Each run starts on an empty fabric:

  1. submitted one after another, each waiting for its answer: all ACTIVE
     (before the fix job 12 was refused "found no free OCS ports");
  2. 4 rounds, the order reversed every other round, every job released
     between rounds: every submission ACTIVE;
  3. all 16 at once (16 `ocsctl job submit` processes started in a given
     order), in 3 arrival orders: all ACTIVE.
After each run and round the devices are read back: each job holds exactly
one two-way circuit between its two pods (one device pair of one group),
the devices hold exactly the jobs' cross-connects, no pod uses more than 4
ports of a group, no leaf more than tau = 2 uplinks to a spine.

  4. a genuine refusal: 8 one-link pairs from leaf 0 to leaves of other
     pods (7 jobs: leaf 0 has 8 GPUs and the last one is the extra job's)
     take all of leaf 0's uplinks (tau 2 x 4 spines); one more link from
     leaf 0 is refused RESOURCE_EXHAUSTED naming leaf 0 and its uplinks,
     saying nothing was touched, and the devices hold what they held before.

usage: test_daemon_room.py BUILD_DIR SOURCE_DIR
"""
import collections
import json
import os
import random
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ocsd_fleet  # noqa: E402

BUILD, SRC = sys.argv[1:3]
OCSCTL = os.path.join(BUILD, "northbound", "ocsctl", "ocsctl")
TIMEOUT_S = 120
PODS, LEAVES_PER_POD, GPUS_PER_LEAF, GROUPS, TAU = 4, 2, 8, 4, 2
PORTS_PER_POD_GROUP = 4  # k_spine: one device input per pod per device of a group
POD_PAIRS = [(0, 1), (2, 3), (0, 2), (1, 3), (0, 3), (1, 2)]

fleet = ocsd_fleet.Fleet(BUILD, SRC, prefix="ocsd-room-")
script = ocsd_fleet.Script("test_daemon_room", fleet)
check = script.check


def pod_of(leaf):
    return leaf // LEAVES_PER_POD


def issue_jobs():
    """[([(leaf a, leaf b)], [GPUs])] of the issue's 16 jobs, in submission order."""
    jobs_on = [0] * (PODS * LEAVES_PER_POD)
    out = []
    for k in range(16):
        leaves = []
        for p in POD_PAIRS[k % len(POD_PAIRS)]:
            first = p * LEAVES_PER_POD
            leaves.append(min(range(first, first + LEAVES_PER_POD),
                              key=lambda leaf: (jobs_on[leaf], leaf)))
        gpus = [GPUS_PER_LEAF * leaf + 2 * jobs_on[leaf] + g for leaf in leaves for g in (0, 1)]
        for leaf in leaves:
            jobs_on[leaf] += 1
        out.append(([tuple(leaves)], gpus))
    every = [g for _, gpus in out for g in gpus]
    assert len(set(every)) == len(every) == 64, "the jobs' GPUs overlap"
    return out


def spec(job_id, pairs, gpus):
    """The JobSpec file of a leaf demand of one link per pair."""
    doc = {"id": job_id,
           "placement": {"gpus": [{"gpu": g, "leaf": g // GPUS_PER_LEAF,
                                   "pod": pod_of(g // GPUS_PER_LEAF)} for g in gpus]},
           "leaf_demand": {"pairs": [{"a": a, "b": b, "links": 1} for (a, b) in pairs]}}
    path = os.path.join(fleet.work, job_id + ".json")
    with open(path, "w") as f:
        json.dump(doc, f)
    return path


def ocsctl(*args):
    return [OCSCTL, "--insecure", "--server", fleet.target, "--timeout-ms", "60000",
            "--json"] + list(args)


def answer(rc, out, err):
    """(ACTIVE or not, what to print) of a finished `ocsctl job submit`."""
    if rc != 0:
        return False, f"refused (exit {rc}): {err.strip()}"
    job = json.loads(out)["job"]
    return job["state"] == "JOB_STATE_ACTIVE", f"{job['state']} {job.get('reason', '')}"


def describe(k, pairs):
    return f"job {k} (" + ", ".join(f"leaf {a} pod {pod_of(a)} - leaf {b} pod {pod_of(b)}"
                                    for (a, b) in pairs) + ")"


def submit_in_turn(run, order, jobs):
    """Submits jobs[k] for k in order, each waiting for its answer;
    returns {job id: pairs} of the ACTIVE ones."""
    active = {}
    for k in order:
        pairs, gpus = jobs[k]
        job_id = f"{run}-j{k:02d}"
        r = subprocess.run(ocsctl("job", "submit", spec(job_id, pairs, gpus)),
                           capture_output=True, text=True, timeout=TIMEOUT_S)
        ok, what = answer(r.returncode, r.stdout, r.stderr)
        check(ok, f"{run}: {describe(k, pairs)} {what}")
        if ok:
            active[job_id] = pairs
    return active


def submit_at_once(run, order, jobs):
    """Starts one `ocsctl job submit` per job, in order, without waiting
    for any answer, then collects the answers. Returns {job id: pairs} of
    the ACTIVE ones."""
    procs = []
    for k in order:
        pairs, gpus = jobs[k]
        job_id = f"{run}-j{k:02d}"
        path = spec(job_id, pairs, gpus)
        procs.append((k, job_id, subprocess.Popen(ocsctl("job", "submit", path), text=True,
                                                  stdout=subprocess.PIPE,
                                                  stderr=subprocess.PIPE)))
    active = {}
    for k, job_id, p in procs:
        out, err = p.communicate(timeout=TIMEOUT_S)
        ok, what = answer(p.returncode, out, err)
        check(ok, f"{run}: {describe(k, jobs[k][0])} {what}")
        if ok:
            active[job_id] = jobs[k][0]
    return active


def release_all(run, active):
    """Releases every job of the run at once; the devices must then be empty."""
    procs = [(j, subprocess.Popen(ocsctl("job", "release", j), text=True,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE))
             for j in active]
    for j, p in procs:
        out, err = p.communicate(timeout=TIMEOUT_S)
        state = json.loads(out)["job"]["state"] if p.returncode == 0 else None
        check(state == "JOB_STATE_RELEASED", f"{run}: release {j}: {p.returncode} {err}")
    check(held(fleet.read_devices()) == set(), f"{run}: devices not empty after the releases")


def held(devices):
    return {(name, i, o) for name, rows in devices.items() for (i, o, _) in rows}


def circuits_by_job():
    r = subprocess.run(ocsctl("circuits"), capture_output=True, text=True, timeout=TIMEOUT_S)
    check(r.returncode == 0, f"ocsctl circuits: {r.returncode} {r.stderr}")
    out = json.loads(r.stdout) if r.returncode == 0 else {}
    check(not out.get("next_page_token"), "ocsctl circuits answered more than one page")
    by_job = collections.defaultdict(list)
    for c in out.get("circuits", []):
        by_job[c["job_id"]].append(c)
    return by_job


def two_way_pods(c):
    """The two pods a circuit joins when its cross-connects are one two-way
    circuit of the cross wiring (device 2m of the group carries pod p ->
    pod q, device 2m+1 q -> p); None otherwise."""
    xcs = sorted((x["device"], x["in_port"], x["out_port"]) for x in c["cross_connects"])
    if len(xcs) != 2:
        return None
    (d0, p, q), (d1, q1, p1) = xcs
    g, m = c["group"], int(d0.rsplit("d", 1)[1])
    if m % 2 or d0 != f"ocs-g{g}-d{m}" or d1 != f"ocs-g{g}-d{m + 1}" or \
            (q1, p1) != (q, p) or p == q:
        return None
    return tuple(sorted((p, q)))


def check_fabric(run, active):
    """The devices against the jobs: one two-way circuit per pair of each
    job between the pair's pods, nothing else on the devices, pod ports per
    group and leaf uplinks per spine within bounds. Returns the devices'
    cross-connects and the circuits per (leaf, group)."""
    devices = fleet.read_devices()
    have = held(devices)
    by_job = circuits_by_job()
    check(set(by_job) == set(active),
          f"{run}: circuits of {sorted(set(by_job) - set(active))}, none for "
          f"{sorted(set(active) - set(by_job))}")
    want = set()
    uplinks = collections.Counter()  # (leaf, group): circuits
    for job_id, pairs in sorted(active.items()):
        circuits = by_job.get(job_id, [])
        check(len(circuits) == len(pairs),
              f"{run}: {job_id} holds {len(circuits)} circuits, want {len(pairs)}")
        left = list(pairs)
        for c in circuits:
            pods = two_way_pods(c)
            a, b = next(((a, b) for (a, b) in left
                         if pods == tuple(sorted((pod_of(a), pod_of(b))))), (None, None))
            check(a is not None, f"{run}: {job_id} holds a circuit that is not one two-way "
                  f"circuit of its pairs {pairs}: {c}")
            if a is None:
                continue
            left.remove((a, b))
            want |= {(x["device"], x["in_port"], x["out_port"]) for x in c["cross_connects"]}
            uplinks[(a, c["group"])] += 1
            uplinks[(b, c["group"])] += 1
    check(have == want, f"{run}: devices hold {sorted(have - want)} beyond the jobs' circuits "
          f"and lack {sorted(want - have)}")
    check(all(st == "connected" for rows in devices.values() for (_, _, st) in rows),
          f"{run}: a cross-connect not connected")
    check(fleet.one_way(devices) == [], f"{run}: one-way cross-connects on the devices")
    ports = collections.Counter()  # (pod, group): device inputs in use
    for name, i, _ in have:
        ports[(i, int(name.split("-")[1][1:]))] += 1
    for p in range(PODS):
        use = [ports[(p, g)] for g in range(GROUPS)]
        print(f"{run}: pod {p}: OCS ports in use per group 0..3: {use}", flush=True)
        check(max(use) <= PORTS_PER_POD_GROUP, f"{run}: pod {p} uses {use} ports per group")
    over = {k: n for k, n in uplinks.items() if n > TAU}
    check(not over, f"{run}: (leaf, group) with more than {TAU} uplinks: {over}")
    return have, uplinks


def main():
    fleet.start_devices(0)
    fleet.start_ocsd(reconcile_s=0)
    jobs = issue_jobs()
    forward = list(range(len(jobs)))

    # 1. one after another
    active = submit_in_turn("run1", forward, jobs)
    check(len(active) == 16, f"run1: {len(active)} of 16 ACTIVE")
    check_fabric("run1", active)
    release_all("run1", active)

    # 2. four rounds, the order reversed every other round
    for rnd in range(4):
        run = f"run2-r{rnd}"
        order = forward if rnd % 2 == 0 else forward[::-1]
        active = submit_in_turn(run, order, jobs)
        check(len(active) == 16, f"{run}: {len(active)} of 16 ACTIVE")
        check_fabric(run, active)
        release_all(run, active)

    # 3. all at once, in three arrival orders
    shuffled = forward[:]
    random.Random(30).shuffle(shuffled)
    for n, order in enumerate((forward, forward[::-1], shuffled)):
        run = f"run3-o{n}"
        print(f"{run}: arrival order {order}", flush=True)
        active = submit_at_once(run, order, jobs)
        check(len(active) == 16, f"{run}: {len(active)} of 16 ACTIVE")
        check_fabric(run, active)
        release_all(run, active)

    # 4. a genuine refusal: leaf 0's 8 uplinks (tau 2 x 4 spines) taken by
    # 8 one-link pairs to leaves of other pods, then one more link from leaf
    # 0. Every job needs a GPU of its own on each of its leaves and leaf 0
    # has 8, so the 8 fillers are 7 jobs (the first has two pairs): the
    # extra job holds leaf 0's last GPU and only the uplinks can refuse it.
    far = [[2, 4], [6], [3], [5], [7], [2], [4]]
    fill, on = [], collections.Counter()
    for k, leaves in enumerate(far):
        gpus = [k] + [GPUS_PER_LEAF * b + on[b] for b in leaves]
        on.update(leaves)
        fill.append(([(0, b) for b in leaves], gpus))
    active = submit_in_turn("run4", range(len(fill)), fill)
    check(len(active) == len(fill), f"run4: {len(active)} of {len(fill)} ACTIVE filling leaf 0")
    before, uplinks = check_fabric("run4", active)
    check([uplinks[(0, g)] for g in range(GROUPS)] == [TAU] * GROUPS,
          f"run4: leaf 0's uplinks per spine: {[uplinks[(0, g)] for g in range(GROUPS)]}")
    extra = spec("run4-extra", [(0, 6)], [7, GPUS_PER_LEAF * 6 + 7])
    r = subprocess.run(ocsctl("job", "submit", extra), capture_output=True, text=True,
                       timeout=TIMEOUT_S)
    why = r.stderr.strip()
    print(f"run4: one more link from leaf 0: exit {r.returncode}: {why}", flush=True)
    check(r.returncode == 1 and "RESOURCE_EXHAUSTED" in why,
          f"run4: the extra job was not refused RESOURCE_EXHAUSTED: {r.returncode} {why}")
    check("leaf 0" in why and "uplink" in why,
          f"run4: the refusal does not name leaf 0 and its uplinks: {why}")
    check("nothing was touched" in why,
          f"run4: the refusal does not say nothing was touched: {why}")
    check(check_fabric("run4 after the refusal", active)[0] == before,
          "run4: the refusal changed the devices")
    release_all("run4", active)
    check(fleet.stop_ocsd() == 0, "ocsd did not exit cleanly")


sys.exit(script.run(main))

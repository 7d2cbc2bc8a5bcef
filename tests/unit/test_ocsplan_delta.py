#!/usr/bin/python3
"""test_ocsplan_delta.py - the command-line contract of ocsplan delta-fast,
prop-alloc, sqrt-alloc and iter-halve (solvers/README.md).

Every answer for an explicit DAG is re-checked with an independent Python
implementation of the simulator contract of issue 6 (below): per-task start
and finish, makespan, critical-path communication time and NCT. Also:
budgets respected, DELTA-Fast not worse than any baseline, the same seed
giving the same answer with 1 and 2 threads, bad input refused with exit 2,
nothing on stdout and the offending field named on stderr, and
--leaf-centric giving a contention-free leaf plan with tau = 2.

usage: test_ocsplan_delta.py PATH/TO/ocsplan
"""
import json
import random
import subprocess
import sys

OCSPLAN = sys.argv[1]
FAILURES = []


def check(cond, msg):
    if not cond:
        FAILURES.append(msg)
        print("FAIL:", msg, file=sys.stderr)


def run(sub, doc, *opts):
    text = doc if isinstance(doc, str) else json.dumps(doc)
    p = subprocess.run([OCSPLAN, sub, *opts], input=text, capture_output=True, text=True,
                       timeout=120)
    return p.returncode, p.stdout, p.stderr


def close(a, b, tol=1e-6):
    return abs(a - b) <= tol * max(1.0, abs(a), abs(b))


def simulate(doc, x):
    """The contract, written independently of solvers/delta_sim.c."""
    bpms = doc["bandwidth_gbps"] * 1e9 / 8 / 1e3
    tasks = doc["tasks"]
    n = len(tasks)
    idx = {t["id"]: k for k, t in enumerate(tasks)}
    preds = [[] for _ in range(n)]
    for d in doc.get("deps", []):
        preds[idx[d["post"]]].append((idx[d["pre"]], d.get("delay_ms", 0.0)))
    circ = {}
    for e in x:
        circ[(e["i"], e["j"])] = circ[(e["j"], e["i"])] = e["circuits"]
    start, finish, det = [None] * n, [None] * n, [-1] * n
    remaining = [t["volume_bytes"] / t["flows"] for t in tasks]  # bytes per flow
    active = set()
    now = 0.0

    def ready_time(k):
        if any(finish[p] is None for p, _ in preds[k]):
            return None
        best, who = 0.0, -1
        for p, dl in preds[k]:
            c = finish[p] + dl
            if who < 0 or (c > best and not close(c, best, 1e-9)):
                best, who = c, p
            elif close(c, best, 1e-9):
                best, who = max(best, c), min(who, p)
        return best, who

    while True:
        for k in range(n):  # start everything due now
            if start[k] is None:
                r = ready_time(k)
                if r is not None and r[0] <= now + 1e-12:
                    start[k], det[k] = now if r[0] < now else r[0], r[1]
                    if tasks[k]["volume_bytes"] == 0:
                        finish[k] = start[k]
                    else:
                        active.add(k)
        if any(start[k] is not None and finish[k] is None and k not in active for k in range(n)):
            continue
        flows = {}
        for k in active:
            key = (tasks[k]["src_pod"], tasks[k]["dst_pod"])
            flows[key] = flows.get(key, 0) + tasks[k]["flows"]
        rate = {}
        for k in active:
            key = (tasks[k]["src_pod"], tasks[k]["dst_pod"])
            rate[k] = bpms * min(1.0, circ.get(key, 0) / flows[key])
        nxt = []
        for k in range(n):
            if start[k] is None:
                r = ready_time(k)
                if r is not None:
                    nxt.append(r[0])
        for k in active:
            if rate[k] > 0:
                nxt.append(now + remaining[k] / rate[k])
        if not nxt:
            break
        t = min(nxt)
        for k in list(active):
            remaining[k] -= rate[k] * (t - now)
            if remaining[k] <= 1e-9 * tasks[k]["volume_bytes"] / tasks[k]["flows"] or \
                    (rate[k] > 0 and close(now + (remaining[k] + rate[k] * (t - now)) / rate[k], t, 1e-12)):
                finish[k] = t
                active.discard(k)
        now = t
    if any(f is None for f in finish):
        return None
    last = 0
    for k in range(1, n):
        if finish[k] > finish[last] and not close(finish[k], finish[last], 1e-9):
            last = k
    crit, k = 0.0, last
    while k >= 0:
        crit += finish[k] - start[k]
        k = det[k]
    return start, finish, finish[last], crit


def ideal_critical(doc):
    bpms = doc["bandwidth_gbps"] * 1e9 / 8 / 1e3
    full = [{"i": a, "j": b, "circuits": 10 ** 6} for a in range(doc["pods"])
            for b in range(a + 1, doc["pods"])]
    return simulate(doc, full)[3]


def random_dag(rng, pods, n):
    tasks, deps = [], []
    for k in range(n):
        a = rng.randrange(pods)
        b = rng.randrange(pods - 1)
        b += b >= a
        tasks.append({"id": "t%d" % k, "src_pod": a, "dst_pod": b, "flows": rng.randint(1, 4),
                      "volume_bytes": rng.randint(1, 8) * 1e6})
        for _ in range(2):
            if k and rng.random() < 0.6:
                deps.append({"pre": "t%d" % rng.randrange(k), "post": "t%d" % k,
                             "delay_ms": rng.randint(0, 4) * 0.5})
    return {"pods": pods, "port_budget": [rng.randint(6, 12)] * pods, "bandwidth_gbps": 8,
            "tasks": tasks, "deps": deps, "seed": 5, "max_generations": 300}


def check_answer(doc, out, sub):
    for key in ("x", "makespan_ms", "critical_comm_ms", "nct", "ports_used", "ports_saved",
                "tasks"):
        check(key in out, "%s: answer lacks %s" % (sub, key))
    used = [0] * doc["pods"]
    for e in out["x"]:
        check(e["i"] < e["j"], "%s: pair %r not ordered" % (sub, e))
        used[e["i"]] += e["circuits"]
        used[e["j"]] += e["circuits"]
    for p in range(doc["pods"]):
        check(used[p] <= doc["port_budget"][p], "%s: pod %d over budget" % (sub, p))
    check(out["ports_used"] == sum(used), "%s: ports_used %d != %d" % (sub, out["ports_used"], sum(used)))
    check(out["ports_saved"] == sum(doc["port_budget"]) - sum(used), "%s: ports_saved" % sub)
    sim = simulate(doc, out["x"])
    check(sim is not None, "%s: plan leaves a task unfinished" % sub)
    if sim is None:
        return None
    start, finish, makespan, crit = sim
    check(close(makespan, out["makespan_ms"]), "%s: makespan %g, recheck %g" % (sub, out["makespan_ms"], makespan))
    check(close(crit, out["critical_comm_ms"]), "%s: critical %g, recheck %g" % (sub, out["critical_comm_ms"], crit))
    check(close(crit / ideal_critical(doc), out["nct"], 1e-5), "%s: nct" % sub)
    for k, t in enumerate(out["tasks"]):
        check(t["id"] == doc["tasks"][k]["id"], "%s: task order" % sub)
        check(close(t["start_ms"], start[k]) and close(t["finish_ms"], finish[k]),
              "%s: task %s times (%g, %g) vs recheck (%g, %g)" % (
                  sub, t["id"], t["start_ms"], t["finish_ms"], start[k], finish[k]))
    return makespan


def test_explicit_dags():
    rng = random.Random(20261122)
    for case in range(12):
        doc = random_dag(rng, rng.randint(2, 4), rng.randint(2, 14))
        best_base = None
        results = {}
        for sub in ("prop-alloc", "sqrt-alloc", "iter-halve", "delta-fast"):
            code, out, err = run(sub, doc)
            check(code == 0, "case %d %s: exit %d: %s" % (case, sub, code, err))
            if code:
                continue
            m = check_answer(doc, json.loads(out), sub)
            results[sub] = m
            if sub != "delta-fast" and m is not None:
                best_base = m if best_base is None else min(best_base, m)
        if "delta-fast" in results and best_base is not None:
            check(results["delta-fast"] <= best_base * (1 + 1e-9),
                  "case %d: delta-fast %g worse than best baseline %g" % (case, results["delta-fast"], best_base))


def test_hand_checked():
    # Two tasks share one circuit: 0.5 MB/ms per flow; t0 ends at 4, t1 at 6.
    doc = {"pods": 2, "port_budget": [1, 1], "bandwidth_gbps": 8,
           "tasks": [{"id": "a", "src_pod": 0, "dst_pod": 1, "flows": 1, "volume_bytes": 2e6},
                     {"id": "b", "src_pod": 0, "dst_pod": 1, "flows": 1, "volume_bytes": 4e6}]}
    code, out, err = run("iter-halve", doc)
    check(code == 0, "hand-checked: exit %d %s" % (code, err))
    out = json.loads(out)
    check(out["x"] == [{"i": 0, "j": 1, "circuits": 1}], "hand-checked x %r" % out["x"])
    check(close(out["makespan_ms"], 6) and close(out["nct"], 1.5), "hand-checked times %r" % out)


def test_determinism():
    doc = random_dag(random.Random(7), 4, 14)
    a = run("delta-fast", doc, "--seed", "11")
    b = run("delta-fast", doc, "--seed", "11", "--threads", "2")
    check(a[0] == 0 and a[1] == b[1], "seed 11 differs between 1 and 2 threads")


def test_time_budget():
    doc = random_dag(random.Random(9), 4, 14)
    code, out, err = run("delta-fast", doc, "--time-budget-ms", "50", "--stall-generations",
                         "100000000", "--max-generations", "100000000")
    check(code == 0, "time budget: exit %d %s" % (code, err))
    if code == 0:
        out = json.loads(out)
        check(out["stats"]["stopped_by_time"], "time budget did not stop the search")
        check_answer(doc, out, "delta-fast (time budget)")


def expect_invalid(sub, doc, field, *opts):
    code, out, err = run(sub, doc, *opts)
    check(code == 2, "%s: exit %d, want 2" % (field, code))
    check(out == "", "%s: stdout not empty" % field)
    check(any(line.startswith(field + ":") for line in err.splitlines()),
          "%s not named in %r" % (field, err))


WORKLOAD = {"model": {"layers": 4, "hidden": 64, "ffn": 256, "heads": 4, "vocab": 100},
            "parallelism": {"tp": 2, "pp": 4, "dp": 2},
            "training": {"seq_len": 128, "micro_batches": 4},
            "placement": {"gpus": 16, "gpus_per_pod_per_replica": 4},
            "bandwidth_gbps": 400,
            "fabric": {"pods": 4, "k_leaf": 4, "k_spine": 4, "tau": 2, "k_ocs": 8,
                       "wiring": "straight"}}


def variant(path, value):
    doc = json.loads(json.dumps(WORKLOAD))
    node = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return doc


def test_bad_input():
    cyc = {"pods": 2, "port_budget": [2, 2], "bandwidth_gbps": 8,
           "tasks": [{"id": "a", "src_pod": 0, "dst_pod": 1, "flows": 1, "volume_bytes": 1},
                     {"id": "b", "src_pod": 1, "dst_pod": 0, "flows": 1, "volume_bytes": 1}],
           "deps": [{"pre": "a", "post": "b"}, {"pre": "b", "post": "a"}]}
    expect_invalid("delta-fast", cyc, "deps")
    zero = dict(cyc, deps=[], bandwidth_gbps=0)
    expect_invalid("delta-fast", zero, "bandwidth_gbps")
    unknown = dict(cyc, deps=[{"pre": "a", "post": "zz"}])
    expect_invalid("prop-alloc", unknown, "deps[0].post")
    small = dict(cyc, deps=[], port_budget=[0, 2])
    expect_invalid("delta-fast", small, "port_budget[0]")
    expect_invalid("delta-fast", variant(("parallelism", "tp"), 3), "parallelism.tp")
    tp_gpus = variant(("parallelism", "dp"), 0)
    tp_gpus["placement"]["gpus"] = 18
    del tp_gpus["parallelism"]["dp"]
    expect_invalid("delta-fast", tp_gpus, "parallelism.tp")
    expect_invalid("delta-fast", variant(("placement", "gpus"), 20), "placement.gpus")
    expect_invalid("sqrt-alloc", variant(("placement", "gpus_per_pod_per_replica"), 3),
                   "placement.gpus_per_pod_per_replica")
    expect_invalid("delta-fast", variant(("bandwidth_gbps",), 0), "bandwidth_gbps")
    expect_invalid("delta-fast", variant(("fabric", "pods"), 3), "placement.pods")
    expect_invalid("delta-fast", cyc, "--leaf-centric", "--leaf-centric")
    code, out, err = run("delta-fast", "{not json")
    check(code == 2 and out == "" and err, "malformed JSON: exit %d" % code)
    # A repeated key names its object (the parallelism spec's "parallelism" here).
    text = json.dumps(WORKLOAD).replace('"tp": 2', '"tp": 2, "tp": 4')
    code, out, err = run("delta-fast", text)
    check(code == 2 and out == "" and err == 'parallelism: duplicate key "tp"\n',
          "repeated key: exit %d %r" % (code, err))
    expect_invalid("delta-fast", WORKLOAD, "--bogus", "--bogus")


def test_workload_leaf_centric():
    code, out, err = run("delta-fast", WORKLOAD, "--leaf-centric", "--seed", "3")
    check(code == 0, "leaf-centric: exit %d %s" % (code, err))
    if code:
        return
    out = json.loads(out)
    lc = out["leaf_centric"]
    check(lc["max_contention"] <= 1.0, "tau = 2 plan has contention %g" % lc["max_contention"])
    check(lc["unplaced"] == [] and lc["unrealized"] == [], "leaf plan incomplete")
    check(out["leaf_unplaced_circuits"] == 0, "circuits left without a leaf pair")
    pods = sum(e["circuits"] for e in out["x"])
    links = sum(d["links"] for d in out["leaf_demand"])
    check(pods == links, "leaf demand %d links for %d pod circuits" % (links, pods))
    check(len(lc["cross_connects"]) > 0, "no cross-connects")
    # The same job with its GPUs listed explicitly (rank order: pod set, stage,
    # lane; 8 GPUs per pod in this fabric) gives the same leaf demand.
    ids = [p * 8 + n for p in range(4) for n in range(4)]
    code, out2, err = run("delta-fast", variant(("placement", "gpu_ids"), ids),
                          "--leaf-centric", "--seed", "3")
    check(code == 0 and json.loads(out2)["leaf_demand"] == out["leaf_demand"],
          "explicit gpu_ids: exit %d %s" % (code, err))
    ids[4] = 5  # rank 4 (stage 2) belongs in pod 1
    expect_invalid("delta-fast", variant(("placement", "gpu_ids"), ids), "placement.gpu_ids[4]")
    expect_invalid("delta-fast", variant(("placement", "gpu_ids"), ids[:3]), "placement.gpu_ids")


def main():
    test_hand_checked()
    test_explicit_dags()
    test_determinism()
    test_time_budget()
    test_bad_input()
    test_workload_leaf_centric()
    print("%s: %d failures" % ("FAIL" if FAILURES else "PASS", len(FAILURES)))
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())

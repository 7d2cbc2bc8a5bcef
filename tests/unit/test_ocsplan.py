#!/usr/bin/python3
"""test_ocsplan.py - the ocsplan command-line contract (solvers/README.md):
leaf-centric and pod-centric on small requests through --in/--out and
stdin/stdout, every output field of the issue 3 contract, incremental
planning with pinned cross-connects, and bad input: exit 2, one stderr line
per problem naming the field, nothing on stdout (hand-written cases, repeated
keys among them, and 150 randomly damaged requests).

Usage: test_ocsplan.py PATH/TO/ocsplan
"""
import json
import os
import subprocess
import sys
import tempfile

OCSPLAN = sys.argv[1]
failures = 0


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print("FAIL:", what, file=sys.stderr)


def run(args, stdin=None):
    p = subprocess.run([OCSPLAN] + args, input=stdin, capture_output=True, text=True,
                       timeout=60)
    return p.returncode, p.stdout, p.stderr


def fabric(wiring="cross", pods=4, k_leaf=8, k_spine=4, tau=2, k_ocs=8):
    return {"pods": pods, "k_leaf": k_leaf, "k_spine": k_spine, "tau": tau,
            "k_ocs": k_ocs, "wiring": wiring}


def check_plan(req, out, realize):
    """The answer against the request: links conserved, C = sum of L, contention."""
    f = req["fabric"]
    lpp = f["k_spine"] // f["tau"]
    want = {}
    for d in req["demand"]:
        key = (min(d["a"], d["b"]), max(d["a"], d["b"]))
        want[key] = want.get(key, 0) + d["links"]
    got, load, topo = {}, {}, {}
    for s in out["spine_assignment"]:
        key = (s["a"], s["b"])
        check(s["a"] < s["b"], "assignment pairs are ordered")
        got[key] = got.get(key, 0) + s["links"]
        for leaf in key:
            load[(leaf, s["h"])] = load.get((leaf, s["h"]), 0) + s["links"]
        pk = (s["a"] // lpp, s["b"] // lpp, s["h"])
        topo[pk] = topo.get(pk, 0) + s["links"]
    for u in out["unplaced"]:
        key = (u["a"], u["b"])
        got[key] = got.get(key, 0) + u["links"]
    check(got == want, "placed + unplaced links equal the demand: %s vs %s" % (got, want))
    check({(t["i"], t["j"], t["h"]): t["circuits"] for t in out["logical_topology"]} == topo,
          "logical topology is the sum of the assignment")
    worst = max(load.values(), default=0) / f["tau"]
    check(abs(out["max_contention"] - worst) < 1e-9,
          "max_contention %s equals recount %s" % (out["max_contention"], worst))
    check(out["contention_free"] == (worst <= 1 and not out["unplaced"]),
          "contention_free says whether the demand fits as asked")
    check(("cross_connects" in out) == realize, "cross_connects only with --realize")
    for key in ("unrealized", "changed_existing", "stats"):
        check(key in out, "answer has " + key)
    check("plan_ms" in out["stats"] and "realize_ms" in out["stats"], "stats timings")


def good_requests():
    for wiring, k_ocs in (("cross", 4), ("dual", 8), ("straight", 4)):
        yield {"fabric": fabric(wiring, k_ocs=k_ocs),
               "demand": [{"a": 0, "b": 2, "links": 3}, {"a": 1, "b": 4, "links": 2},
                          {"a": 3, "b": 6, "links": 4}, {"a": 5, "b": 7, "links": 8},
                          {"a": 0, "b": 6, "links": 1}]}
    # tau = 1, H = 3 (not a power of two), every leaf at most half loaded
    yield {"fabric": fabric("cross", pods=3, k_leaf=6, k_spine=4, tau=1, k_ocs=3),
           "demand": [{"a": 0, "b": 4, "links": 2}, {"a": 1, "b": 9, "links": 3},
                      {"a": 5, "b": 10, "links": 1}]}


def test_good():
    for req in good_requests():
        for sub in ("leaf-centric", "pod-centric"):
            rc, out, err = run([sub, "--realize"], json.dumps(req))
            check(rc == 0 and err == "", "%s %s exits 0 silently (%d, %s)"
                  % (sub, req["fabric"]["wiring"], rc, err))
            if rc == 0:
                ans = json.loads(out)
                check_plan(req, ans, True)
                if sub == "leaf-centric" and req["fabric"]["wiring"] != "straight":
                    check(ans["unrealized"] == [], "cross/dual realize completely")
                if sub == "leaf-centric":
                    check(ans["max_contention"] <= 1, "leaf-centric is contention-free here")
            rc, out, err = run([sub], json.dumps(req))
            check(rc == 0, "without --realize")
            if rc == 0:
                check_plan(req, json.loads(out), False)


def test_files_and_incremental():
    req = next(good_requests())
    with tempfile.TemporaryDirectory() as tmp:
        inp, outp = os.path.join(tmp, "in.json"), os.path.join(tmp, "out.json")
        with open(inp, "w") as fp:
            json.dump(req, fp)
        rc, out, err = run(["leaf-centric", "--realize", "--pretty", "--in", inp, "--out", outp])
        check(rc == 0 and out == "", "--out writes the file, not stdout")
        with open(outp) as fp:
            first = json.load(fp)
        check_plan(req, first, True)
        # A second job on other leaves, around the first one's pinned cross-connects.
        second = {"fabric": req["fabric"], "existing": first["cross_connects"],
                  "demand": [{"a": 2, "b": 4, "links": 1}]}
        rc, out, err = run(["leaf-centric", "--realize"], json.dumps(second))
        check(rc == 0, "incremental plan runs: " + err)
        if rc == 0:
            ans = json.loads(out)
            check_plan(second, ans, True)
            check(ans["changed_existing"] == 0, "pinned cross-connects unchanged")
            check(ans["cross_connects"][:len(first["cross_connects"])] ==
                  first["cross_connects"], "pinned cross-connects kept, first")
        # Global re-plan: moved_existing lists what is dropped, and only that.
        both = {"fabric": req["fabric"], "existing": first["cross_connects"],
                "demand": req["demand"] + [{"a": 2, "b": 4, "links": 1}]}
        rc, out, err = run(["leaf-centric", "--realize", "--replan"], json.dumps(both))
        check(rc == 0, "replan runs: " + err)
        if rc == 0:
            ans = json.loads(out)
            kept = [x for x in first["cross_connects"] if x in ans["cross_connects"]]
            check(ans["changed_existing"] == len(first["cross_connects"]) - len(kept),
                  "changed_existing counts dropped cross-connects")
            check(sorted(map(json.dumps, ans["moved_existing"])) ==
                  sorted(json.dumps(x) for x in first["cross_connects"] if x not in kept),
                  "moved_existing lists exactly the dropped ones")


def bad(stdin, expected, args=("leaf-centric",)):
    """Exit 2, nothing on stdout, and exactly the expected stderr lines (as prefixes)."""
    rc, out, err = run(list(args), stdin)
    lines = err.strip().split("\n") if err.strip() else []
    check(rc == 2, "exit 2 for %s (got %d)" % (expected, rc))
    check(out == "", "nothing on stdout for %s" % expected)
    check(len(lines) == len(expected), "one line per problem: %s vs %s" % (lines, expected))
    for want in expected:
        check(any(line.startswith(want) for line in lines), "'%s' in %s" % (want, lines))


def test_bad_input():
    f = fabric()
    bad(json.dumps({"fabric": f, "demand": [{"a": 40, "b": 43, "links": 1}]}),
        ["demand[0]: leaf a = 40 out of range", "demand[0]: leaf b = 43 out of range"])
    big = fabric(pods=8, k_leaf=16, k_spine=16, tau=2, k_ocs=8)
    demand = [{"a": 8 * i, "b": 8 * i + 8, "links": 1} for i in range(7)]
    demand.append({"a": 40, "b": 43, "links": 1})
    bad(json.dumps({"fabric": big, "demand": demand}),
        ["demand[7]: leaves 40 and 43 are both in pod 5"])
    bad(json.dumps({"fabric": f, "demand": [{"a": 0, "b": 2, "links": -1}]}),
        ["demand[0].links: -1 is negative"])
    bad(json.dumps({"fabric": f, "demand": [{"a": 0, "b": 2, "links": 5},
                                            {"a": 0, "b": 4, "links": 4}]}),
        ["demand[1]: leaf 0 needs 9 uplinks, more than its k_leaf = 8"])
    bad(json.dumps({"fabric": f, "demand": [{"a": 0, "b": 2, "links": 1},
                                            {"a": 2, "b": 0, "links": 1}]}),
        ["demand[1]: leaves 0 and 2 already appear as a pair in demand[0]"])
    bad(json.dumps({"fabric": f, "demand": [{"a": 0, "b": "2", "links": 1.5}]}),
        ["demand[0].b: must be an integer", "demand[0].links: must be an integer"])
    bad(json.dumps({"fabric": fabric("dual", k_ocs=4), "demand": []}),
        ["fabric.k_ocs:"])
    bad(json.dumps({"fabric": fabric("mesh"), "demand": []}),
        ["fabric.wiring: \"mesh\" is not straight, dual or cross"])
    bad(json.dumps({"fabric": fabric(k_spine=3), "demand": []}),
        ["fabric.k_spine: must be divisible by tau", "fabric.k_spine: must be even"])
    bad(json.dumps({"demand": []}), ["fabric: missing"])
    bad(json.dumps({"fabric": fabric(pods=65536, k_leaf=32, k_spine=64, k_ocs=65536),
                    "demand": []}), ["fabric: 67108864 spine ports, more than"])
    bad(json.dumps({"fabric": f}), ["demand: missing"])
    bad(json.dumps({"fabric": f, "demand": [], "existing": [
        {"group": 0, "device": 0, "in": 0, "out": 1}]}),
        ["existing[0]: group 0 device 0 in 0 out 1: one-way circuit"])
    bad(json.dumps({"fabric": f, "demand": [], "existing": [
        {"group": 5, "device": 0, "in": 0, "out": 1}]}),
        ["existing[0]: group 5 device 0 in 0 out 1: group 5 out of range"])
    bad(json.dumps({"fabric": f, "demand": [], "typo": 1}), ["typo: unknown field"])
    bad('{"fabric": {', ["input: malformed JSON"])
    # A repeated key is refused with the path of its object, not silently overwritten.
    bad('{"fabric": %s, "demand": [{"a": 0, "b": 2, "links": 1},'
        ' {"a": 1, "b": 4, "links": 1, "links": 2}]}' % json.dumps(f),
        ['demand[1]: duplicate key "links"'])
    bad('{"fabric": %s, "demand": [], "demand": []}' % json.dumps(f),
        ['input: duplicate key "demand"'], ("pod-centric",))
    bad("[1, 2]", ["input: must be a JSON object"])
    bad("{}", ["--frobnicate: unknown option"], ("leaf-centric", "--frobnicate"))
    bad("{}", ["--in: needs a file name"], ("pod-centric", "--in"))
    rc, out, err = run(["no-such-planner"], "{}")
    check(rc == 2 and out == "" and "unknown subcommand" in err, "unknown subcommand")
    rc, out, err = run(["leaf-centric", "--in", "/nonexistent/req.json"])
    check(rc == 1 and out == "" and "cannot open" in err, "unreadable input exits 1")
    rc, out, err = run(["--help"])
    check(rc == 0 and "leaf-centric" in out and "pod-centric" in out, "--help lists subcommands")


def mutate(value, rng):
    """One random damage somewhere in a JSON tree (returns the new tree)."""
    if isinstance(value, dict) and value:
        key = rng.choice(sorted(value))
        choice = rng.random()
        copy = dict(value)
        if choice < 0.15:
            del copy[key]
        elif choice < 0.25:
            copy[key + "_x"] = 1
        else:
            copy[key] = mutate(value[key], rng)
        return copy
    if isinstance(value, list) and value:
        i = rng.randrange(len(value))
        copy = list(value)
        if rng.random() < 0.2:
            copy.append(copy[i])
        else:
            copy[i] = mutate(value[i], rng)
        return copy
    return rng.choice([-1, 0, 1, 7, 2 ** 31, 2 ** 40, 1.5, "x", None, True, [], {}])


def test_mutated_requests():
    """Damaged requests: never a crash; exit 0 with JSON, or 2 with field lines only."""
    import random
    rng = random.Random(3)
    base = list(good_requests())
    for n in range(150):
        req = rng.choice(base)
        for _ in range(1 + rng.randrange(3)):
            req = mutate(req, rng)
        args = ["leaf-centric", "--realize"] if n % 2 else ["pod-centric"]
        rc, out, err = run(args, json.dumps(req))
        check(rc in (0, 2), "mutated request %d exits 0 or 2, got %d: %s" % (n, rc, err))
        if rc == 0:
            json.loads(out)
        elif rc == 2:
            check(out == "", "mutated request %d: nothing on stdout" % n)
            for line in err.strip().split("\n"):
                check(": " in line and not line.startswith("ocsplan"),
                      "mutated request %d: '%s' names a field" % (n, line))


test_good()
test_files_and_incremental()
test_bad_input()
test_mutated_requests()
print("ocsplan contract: %s" % ("ok" if failures == 0 else "%d failures" % failures))
sys.exit(1 if failures else 0)

#!/usr/bin/python3
"""test_ocsplan_lc_usage.py - the `leaf_spine_usage` input of `ocsplan
leaf-centric` / `pod-centric` (solvers/README.md, "Jobs sharing leaves"):
two jobs on one leaf planned one after the other through the command line,
the usage summed here from the first answer's spine_assignment, the combined
load recounted here; a full leaf leaves its demand unplaced (and, realized,
the exact search's `fit` says so and names the leaf); every bad usage
field exits 2 with one stderr line naming it and nothing on stdout.

Usage: test_ocsplan_lc_usage.py PATH/TO/ocsplan
"""
import json
import subprocess
import sys

OCSPLAN = sys.argv[1]
failures = 0


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print("FAIL:", what, file=sys.stderr)


def run(sub, req, *opts):
    p = subprocess.run([OCSPLAN, sub, *opts], input=json.dumps(req), capture_output=True,
                       text=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


FABRIC = {"pods": 4, "k_leaf": 8, "k_spine": 4, "tau": 2, "k_ocs": 4, "wiring": "cross"}


def usage_of(*answers):
    """Leaf-spine usage summed from spine_assignment entries."""
    use = {}
    for ans in answers:
        for s in ans["spine_assignment"]:
            for leaf in (s["a"], s["b"]):
                use[(leaf, s["h"])] = use.get((leaf, s["h"]), 0) + s["links"]
    return use


def two_jobs_share_leaf():
    rc, out, err = run("leaf-centric", {"fabric": FABRIC, "demand": [{"a": 0, "b": 2, "links": 4}]},
                       "--realize")
    check(rc == 0, "job 1 plans: %s" % err)
    first = json.loads(out)
    use = usage_of(first)
    req = {"fabric": FABRIC, "demand": [{"a": 0, "b": 4, "links": 2}, {"a": 6, "b": 0, "links": 2}],
           "existing": first["cross_connects"],
           "leaf_spine_usage": [{"leaf": l, "spine": h, "links": n} for (l, h), n in use.items()]}
    rc, out, err = run("leaf-centric", req, "--realize")
    check(rc == 0, "job 2 plans: %s" % err)
    second = json.loads(out)
    both = usage_of(first, second)
    check(all(both.get((0, h), 0) == 2 for h in range(4)),
          "leaf 0 carries 2 links at each spine over both jobs: %s" % both)
    check(max(both.values()) <= FABRIC["tau"], "combined load within tau")
    check(second["max_contention"] == max(both.values()) / FABRIC["tau"],
          "max_contention is over both jobs: %s" % second["max_contention"])
    check(second["contention_free"] is True and second["unplaced"] == [], "contention-free")
    check(second["fit"]["status"] == "placed", "job 2 fits: %s" % second["fit"])
    n1 = len(first["cross_connects"])
    check(second["cross_connects"][:n1] == first["cross_connects"] and
          second["changed_existing"] == 0, "job 1's cross-connects kept first")
    # The same request without the usage is still valid (the field is optional).
    del req["leaf_spine_usage"]
    rc, _, err = run("leaf-centric", req)
    check(rc == 0, "usage is optional: %s" % err)


def full_leaf_unplaced():
    full = [{"leaf": 0, "spine": h, "links": 2} for h in range(4)]
    for sub in ("leaf-centric", "pod-centric"):
        rc, out, err = run(sub, {"fabric": FABRIC, "leaf_spine_usage": full,
                                 "demand": [{"a": 0, "b": 2, "links": 3},
                                            {"a": 1, "b": 3, "links": 1}]})
        check(rc == 0, "%s plans: %s" % (sub, err))
        ans = json.loads(out)
        check(ans["unplaced"] == [{"a": 0, "b": 2, "links": 3}],
              "%s: leaf 0's pair unplaced: %s" % (sub, ans["unplaced"]))
        check(sum(s["links"] for s in ans["spine_assignment"]) == 1, "%s: 1-3 placed" % sub)
        check(ans["contention_free"] is False, "%s: not contention-free" % sub)
        check(ans["fit"]["status"] == "unchecked", "%s: no search without --realize" % sub)
    # With realization the exact search proves it and names the full leaf (issue 30).
    rc, out, err = run("leaf-centric", {"fabric": FABRIC, "leaf_spine_usage": full,
                                        "demand": [{"a": 0, "b": 2, "links": 1}]}, "--realize")
    fit = json.loads(out)["fit"] if rc == 0 else {}
    check(fit.get("status") == "none" and fit.get("limit") == "leaf-uplinks" and
          "the uplinks of leaf 0" in fit.get("why", ""), "a full leaf, proven: %s %s" % (fit, err))


def bad_usage():
    cases = [
        ({"x": 1}, ["leaf_spine_usage: "]),
        ([3], ["leaf_spine_usage[0]: must be an object"]),
        ([{"leaf": 0, "spine": 0}], ["leaf_spine_usage[0].links: "]),
        ([{"leaf": 0, "spine": 0, "links": -1}], ["leaf_spine_usage[0].links: "]),
        ([{"leaf": 0, "spine": 0, "links": 1, "job": 2}], ["leaf_spine_usage[0].job: unknown field"]),
        ([{"leaf": 8, "spine": 0, "links": 1}], ["leaf_spine_usage[0]: leaf = 8 out of range 0..7"]),
        ([{"leaf": 0, "spine": 4, "links": 1}], ["leaf_spine_usage[0]: spine = 4 out of range 0..3"]),
        ([{"leaf": 1, "spine": 0, "links": 5}, {"leaf": 1, "spine": 3, "links": 4}],
         ["leaf_spine_usage[1]: leaf 1 uses 9 uplinks, more than its k_leaf = 8"]),
        ([{"leaf": 9, "spine": 9, "links": 1}, {"leaf": "a", "spine": 0, "links": 1}],
         ["leaf_spine_usage[1].leaf: "]),
    ]
    for usage, want in cases:
        req = {"fabric": FABRIC, "demand": [{"a": 0, "b": 2, "links": 1}], "leaf_spine_usage": usage}
        rc, out, err = run("leaf-centric", req)
        lines = err.strip().splitlines()
        check(rc == 2 and out == "", "bad usage %s: exit %d, stdout %r" % (usage, rc, out))
        check(len(lines) == len(want) and all(l.startswith(w) for l, w in zip(lines, want)),
              "bad usage %s: stderr %r, want %r" % (usage, lines, want))


two_jobs_share_leaf()
full_leaf_unplaced()
bad_usage()
if failures:
    print("%d checks failed" % failures, file=sys.stderr)
    sys.exit(1)
print("ocsplan leaf_spine_usage: all checks passed")

#!/usr/bin/python3
"""test_ocsplan_hbd.py - `ocsplan hbd-ring` (solvers/ocsplan/hbd.c) through
its command line: the JSON shape of an answer (issue 11, section 2), every
ring and bundle setting re-checked here from the domain's numbering, the
whole-domain request ("gpus": 0) with its waste recounted, the seeded
greedy, the "fail" repair (a bypass-extend: the ring skips the node and
takes in one free node, only the changed bundles listed; a re-placement of
the same size when no node extends it), exit 1 with a JSON error giving the rings
needed and available, and exit 2 with one stderr line naming the field for
each kind of bad input.

Usage: test_ocsplan_hbd.py PATH/TO/ocsplan
"""
import json
import subprocess
import sys

OCSPLAN = sys.argv[1]
failures = 0

DOMAIN = {"tors": 8, "nodes-per-tor": 4, "gpus-per-node": 4, "k-hops": 2, "bundles": 3,
          "tors-per-agg": 4, "closed": False,
          "devices": {"address": "127.0.0.1", "port-base": 19000}}


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print("FAIL:", what, file=sys.stderr)


def run(req, *opts):
    p = subprocess.run([OCSPLAN, "hbd-ring", *opts], input=json.dumps(req), capture_output=True,
                       text=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


def pos(dom, node):
    """Deployment position: index * tors + tor (solvers/fabric.h)."""
    p = dom["nodes-per-tor"]
    return (node % p) * dom["tors"] + node // p


def gap_up(dom, a, b):
    n = dom["tors"] * dom["nodes-per-tor"]
    g = pos(dom, b) - pos(dom, a)
    if dom.get("closed"):
        g %= n
    return g


def check_answer(dom, req, ans, what):
    """The shape and every ring and bundle of an answer, from the model alone."""
    for key in ("rings", "gpus_placed", "gpus_wasted", "cross_tor_share", "constraints_kept",
                "plan_us", "nodes"):
        check(key in ans, "%s: answer has %s" % (what, key))
    m = req["job"]["tp"] // dom["gpus-per-node"]
    bad = set(req.get("faulty_nodes", [])) | set(req.get("busy_nodes", []))
    seen = set()
    for ring in ans["rings"]:
        nodes = ring["nodes"]
        check(len(nodes) == m, "%s: ring of %d nodes" % (what, len(nodes)))
        check(not (set(nodes) & bad), "%s: ring on a faulty or busy node" % what)
        check(not (set(nodes) & seen), "%s: node in two rings" % what)
        seen |= set(nodes)
        for a, b in zip(nodes, nodes[1:]):
            check(1 <= gap_up(dom, a, b) <= dom["k-hops"], "%s: %d -> %d too far" % (what, a, b))
    check(ans["gpus_placed"] == len(ans["rings"]) * req["job"]["tp"], "%s: gpus_placed" % what)
    if req["job"]["gpus"]:
        check(ans["gpus_placed"] == req["job"]["gpus"], "%s: the whole job placed" % what)
    # Cross-ToR share recounted.
    rings = [r["nodes"] for r in ans["rings"]]
    pairs = [(r[i], s[i]) for r, s in zip(rings, rings[1:]) for i in range(m)]
    tor = lambda n: n // dom["nodes-per-tor"]
    share = sum(tor(a) != tor(b) for a, b in pairs) / len(pairs) if pairs else 0.0
    check(abs(ans["cross_tor_share"] - share) < 1e-5, "%s: share %s, recount %s"
          % (what, ans["cross_tor_share"], share))
    # Bundle settings: DOWN joins the ring's previous node, UP the next, the rest loopback.
    settings = {n["id"]: n["bundles"] for n in ans["nodes"]}
    check(set(settings) == seen, "%s: settings for exactly the ring nodes" % what)
    for nodes in rings:
        for i, node in enumerate(nodes):
            want = []
            for b in range(dom["bundles"]):
                peer = None
                if b == 0 and i > 0:
                    peer = nodes[i - 1]
                if b == 1 and i + 1 < len(nodes):
                    peer = nodes[i + 1]
                want.append({"id": b, "path": "external" if peer is not None else "loopback",
                             "peer": peer})
            check(settings.get(node) == want, "%s: node %d settings %s" % (what, node,
                                                                         settings.get(node)))


def plans():
    for orch in ("dcn-free", "fat-tree", "greedy"):
        req = {"ocstrx-ring": DOMAIN, "faulty_nodes": [1, 6, 17], "busy_nodes": [9, 30],
               "job": {"gpus": 48, "tp": 16}, "orchestration": orch, "seed": 5}
        rc, out, err = run(req)
        check(rc == 0 and err == "", "%s: plans (%d, %s)" % (orch, rc, err))
        if rc == 0:
            ans = json.loads(out)
            check(len(ans["rings"]) == 3, "%s: 3 rings" % orch)
            check(ans["gpus_wasted"] == 0, "%s: no waste counted for a sized job" % orch)
            check_answer(DOMAIN, req, ans, orch)
    # The greedy baseline is seeded.
    req = {"ocstrx-ring": DOMAIN, "job": {"gpus": 64, "tp": 8}, "orchestration": "greedy",
           "seed": 11}
    a, b = run(req)[1], run(req)[1]
    check(json.loads(a)["rings"] == json.loads(b)["rings"], "greedy repeats for one seed")


def whole_domain():
    # K = 2: the 29 healthy free nodes form one component: 7 rings of 4, one node left.
    req = {"ocstrx-ring": DOMAIN, "faulty_nodes": [0, 13, 22], "job": {"gpus": 0, "tp": 16}}
    rc, out, err = run(req)
    check(rc == 0, "whole domain plans: %s" % err)
    ans = json.loads(out)
    check(len(ans["rings"]) == 7, "whole domain: 7 rings, got %d" % len(ans["rings"]))
    check(ans["gpus_wasted"] == 4, "whole domain: one node wasted, got %d" % ans["gpus_wasted"])
    check_answer(DOMAIN, req, ans, "whole domain")


def repairs():
    req = {"ocstrx-ring": DOMAIN, "job": {"gpus": 16, "tp": 16}, "fail": 8}
    rc, out, err = run(req)
    check(rc == 0, "fail plans: %s" % err)
    ans = json.loads(out)
    ring = ans["rings"][0]["nodes"]
    check(ring == [0, 4, 8, 12], "dcn-free takes positions 0..3: %s" % ring)
    rep = ans.get("repair", {})
    # Position 2 fails, its gap has no free node: node 16 (position 4) extends the ring.
    check(rep.get("kind") == "bypass-extend", "a middle node: bypass-extend: %s" % rep)
    check(rep.get("nodes") == [0, 4, 12, 16], "extended ring: %s" % rep.get("nodes"))
    check(rep.get("added") == 16, "the node taken in: %s" % rep.get("added"))
    check(sorted((c["node"], c["id"], c["peer"]) for c in rep.get("changes", [])) ==
          [(4, 1, 12), (12, 0, 4), (12, 1, 16), (16, 0, 12)],
          "extend changes: %s" % rep.get("changes"))
    # The first node fails and positions 4, 5 are faulty: nothing extends, re-placed.
    req["fail"] = 0
    req["faulty_nodes"] = [16, 20]
    rc, out, err = run(req)
    rep = json.loads(out).get("repair", {}) if rc == 0 else {}
    check(rep.get("kind") == "replace" and len(rep.get("nodes", [])) == 4 and
          0 not in rep.get("nodes", []), "an end node: re-placed: %s" % rep)
    check(all(c["node"] != 0 for c in rep.get("changes", [])), "the failed node is not changed")
    req["fail"] = 20
    rc, out, err = run(req)
    check(rc == 2 and out == "" and err.startswith("fail:"), "fail outside every ring: exit 2")


def refusals():
    # Even nodes sit at positions 0..7 and 16..23: two runs of 8 free nodes, 4 rings of 4.
    req = {"ocstrx-ring": DOMAIN, "faulty_nodes": list(range(0, 32, 2)),
           "job": {"gpus": 144, "tp": 16}}
    rc, out, err = run(req)
    check(rc == 1, "an unplaceable job exits 1 (got %d)" % rc)
    e = json.loads(out).get("error", {}) if out else {}
    check(e.get("rings_needed") == 9 and e.get("rings_available") == 4 and e.get("reason"),
          "the error gives rings needed and available: %s" % out)
    bad = [
        ({"job": {"gpus": 16, "tp": 6}}, "job.tp"),
        ({"job": {"gpus": 12, "tp": 8}}, "job.gpus"),
        ({"faulty_nodes": [3, 32]}, "faulty_nodes[1]"),
        ({"busy_nodes": [-1]}, "busy_nodes[0]"),
        ({"faulty_nodes": [5], "busy_nodes": [7, 5]}, "busy_nodes[1]"),
        ({"orchestration": "random"}, "orchestration"),
        ({"fail": 99}, "fail"),
        ({"ocstrx-ring": dict(DOMAIN, bundles=1)}, "ocstrx-ring.bundles"),
        ({"ocstrx-ring": dict(DOMAIN, colour="red")}, "ocstrx-ring.colour"),
        ({"job": {"tp": 8}}, "job.gpus"),
        ({"extra": 1}, "extra"),
    ]
    for change, field in bad:
        req = {"ocstrx-ring": DOMAIN, "job": {"gpus": 16, "tp": 8}}
        req.update(change)
        rc, out, err = run(req)
        check(rc == 2 and out == "" and err.startswith(field + ":"),
              "%s: exit 2 naming %s (got %d, %r)" % (change, field, rc, err))
    rc, out, err = run({}, "--bogus")
    check(rc == 2 and "--bogus" in err, "unknown option exits 2")
    p = subprocess.run([OCSPLAN, "--help"], capture_output=True, text=True, timeout=60)
    check(p.returncode == 0 and "hbd-ring" in p.stdout, "--help lists hbd-ring")


plans()
whole_domain()
repairs()
refusals()
print("test_ocsplan_hbd: %d failures" % failures)
sys.exit(1 if failures else 0)

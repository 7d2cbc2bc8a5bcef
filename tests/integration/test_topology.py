#!/usr/bin/python3
"""test_topology.py - `ocsctl topology` (issue 27) against the REAL ocsd:
first on the lab fabric (16 ocs-devsim devices), then on an OCSTrx ring
domain of 16 nodes (one ocs-devsim serving every node's agent), then on a
rail-OCS fabric (one ocs-switch per OCS group).

Lab fabric, two jobs ACTIVE (`ocsctl job submit`):
  - `--format dot` is valid DOT (graphviz's `dot -Tsvg` reads it, exit 0);
    its edges are exactly the circuits of `ocsctl circuits --json`, one
    each, labelled with job, group, device and ports, one colour per job
    and the two jobs' colours apart; two runs print the same text;
  - `--job A` draws A's circuits only, `--device D` D's circuits and no
    other device, `--pod P` the circuits with an end at P;
  - `--format svg` is XML (xml.etree) with one <g class="edge"> per circuit;
  - `--max-edges`: above it edges aggregate (per job and pod pair, then per
    pod block pair) and their counts add up to the circuits;
  - a device drained (`ocsctl drain --force`) is drawn grey, "drained";
  - an unknown job: exit 1 like `ocsctl job show`, the job named; `--format
    svg` without dot on PATH: exit 2 naming graphviz and the Debian package.
Ring domain, a ring job of 2 rings of 4 nodes:
  - every node drawn, the deployment line, each ring's links in its job's
    colour; --pod refused (exit 2); after `ocsctl node fail` of a ring's
    node the failed node is red and labelled failed, and its ring's label
    names the repair (bypass_extended or replaced) and the failed node;
    with `--max-edges 3` (6 ring links) only the failed node is drawn,
    joined to its job, whose legend counts 2 rings.
Rail-OCS fabric (6 servers, 4 rails, 3 servers per OCS group, 1 spare),
jobs on GPUs 0-2 and 4-7, `ocsctl gpu replace 1` (idle GPU 3 of the same
server takes its port) and `gpu replace 5` (spare server 2 takes 4-7):
  - one edge per rail port holding a GPU, from the GPU's server to its OCS
    group, exactly as `ocsctl rail-ports --json` says; the job's three in
    one colour and counted in the legend; the five swapped GPUs bold and
    dashed, labelled "swapped in for gpu N", the spare's drawn from server
    2; every server drawn, the spare as one.

usage: test_topology.py BUILD_DIR SOURCE_DIR
"""
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ocsd_fleet  # noqa: E402

BUILD, SRC = sys.argv[1:3]
OCSCTL = os.path.join(BUILD, "northbound", "ocsctl", "ocsctl")
FILL_DRAINED, FILL_DOWN = "#d9d9d9", "#f4a3a3"

fleet = ocsd_fleet.Fleet(BUILD, SRC, prefix="ocsd-topology-")
script = ocsd_fleet.Script("test_topology", fleet)
check = script.check
STRING = r'"((?:[^"\\]|\\.)*)"'
EDGE = re.compile(r'^\t' + STRING + ' -- ' + STRING + r' \[color="(#[0-9a-f]{6})".*?, label=' +
                  STRING, re.M)
NODE = re.compile(r'^\t+' + STRING + r' \[label=' + STRING + r', fillcolor="(#[0-9a-f]{6})"', re.M)


def ocsctl(target, *args, env=None):
    return subprocess.run([OCSCTL, "--insecure", "--server", target] + list(args),
                          capture_output=True, text=True, timeout=60, env=env)


def dot_text(target, *args):
    r = ocsctl(target, "topology", "--format", "dot", *args)
    check(r.returncode == 0, f"topology {args}: exit {r.returncode}: {r.stderr}")
    return r.stdout


def edges(text):
    """[(a, b, colour, label)], the label's escapes undone."""
    return [(a, b, c, lab.replace("\\n", "\n")) for a, b, c, lab in EDGE.findall(text)]


def nodes(text):
    return {n: (lab.replace("\\n", "\n"), fill) for n, lab, fill in NODE.findall(text)}


def dot_reads(text, what):
    r = subprocess.run(["dot", "-Tsvg"], input=text, capture_output=True, text=True,
                       timeout=60)
    check(r.returncode == 0 and "<svg" in r.stdout, f"{what}: dot -Tsvg: {r.stderr[:300]}")


def devices(c):
    """The devices of a circuit's cross-connects, in order, each once, joined by '+'."""
    return "+".join(dict.fromkeys(x["device"] for x in c["cross_connects"]))


def circuit_labels(target, *filters):
    r = ocsctl(target, "--json", "circuits", *filters)
    check(r.returncode == 0, f"circuits {filters}: {r.stderr}")
    cs = json.loads(r.stdout).get("circuits", [])
    return sorted(f"{c['job_id']}\ng{c.get('group', 0)} {devices(c)} "
                  f"{c.get('pod_a', 0)}:{c.get('port_a', 0)}-{c.get('pod_b', 0)}:"
                  f"{c.get('port_b', 0)}" for c in cs), cs


def submit(target, spec):
    """`ocsctl job submit` of a job file (JSON, proto field names); True when ACTIVE."""
    path = os.path.join(fleet.work, spec["id"] + ".json")
    with open(path, "w") as f:
        json.dump(spec, f)
    r = ocsctl(target, "--json", "job", "submit", path)
    state = json.loads(r.stdout).get("job", {}).get("state") if r.returncode == 0 else None
    check(state == "JOB_STATE_ACTIVE", f"job {spec['id']}: exit {r.returncode} {state} {r.stderr}")


def leaf_job(job_id, a, b, links, first_gpu):
    """Two GPUs on each of leaves a and b (8 GPUs per leaf, 2 leaves per pod)."""
    return {"id": job_id,
            "placement": {"gpus": [{"gpu": 8 * leaf + first_gpu + k, "leaf": leaf,
                                    "pod": leaf // 2} for leaf in (a, b) for k in range(2)]},
            "leaf_demand": {"pairs": [{"a": a, "b": b, "links": links}]}}


def svg_edges(target, *args):
    r = subprocess.run([OCSCTL, "--insecure", "--server", target, "topology", "--format",
                        "svg"] + list(args), capture_output=True, timeout=60)
    check(r.returncode == 0, f"--format svg {args}: exit {r.returncode}: {r.stderr[:300]}")
    root = ET.fromstring(r.stdout)
    return [g for g in root.iter("{http://www.w3.org/2000/svg}g") if g.get("class") == "edge"]


def lab():
    fleet.start_devices()
    fleet.start_ocsd()
    t = fleet.target
    submit(t, leaf_job("topo-a", 0, 2, 4, 0))
    submit(t, leaf_job("topo-b", 1, 6, 3, 2))

    # the whole fabric: one edge per circuit, a colour per job
    want, cs = circuit_labels(t)
    text = dot_text(t)
    dot_reads(text, "the whole fabric")
    es = edges(text)
    check(sorted(e[3] for e in es) == want and len(want) == 7,
          f"edges are not the circuits: {sorted(e[3] for e in es)} vs {want}")
    colours = {jid: {e[2] for e in es if e[3].startswith(jid + "\n")} for jid in ("topo-a", "topo-b")}
    check(all(len(c) == 1 for c in colours.values()) and colours["topo-a"] != colours["topo-b"],
          f"not one colour per job: {colours}")
    for a, b, _, lab in es:
        c = next(c for c in cs if lab.startswith(c["job_id"] + "\n") and
                 f"{c.get('pod_a', 0)}:{c.get('port_a', 0)}-" in lab)
        check((a, b) == (f"pod {c.get('pod_a', 0)}", f"pod {c.get('pod_b', 0)}"),
              f"edge {a} -- {b} does not join its circuit's pods: {lab!r}")
    check(dot_text(t) == text, "two drawings of one state differ")
    check([nodes(text).get(f"job {j}", ("",))[0] for j in ("topo-a", "topo-b")] ==
          ["topo-a\n4 circuits", "topo-b\n3 circuits"] and text.count('"job topo-a" [') == 1,
          "the legend does not list each job once with its circuits")
    devs = [n for n in nodes(text) if n.startswith("ocs-")]
    check(len(devs) == fleet.N_DEV, f"devices drawn: {devs}")

    # --job, --device, --pod
    want_a, _ = circuit_labels(t, "--job", "topo-a")
    got = sorted(e[3] for e in edges(dot_text(t, "--job", "topo-a")))
    check(got == want_a and len(want_a) == 4, f"--job topo-a: {got} vs {want_a}")
    dev = cs[0]["cross_connects"][0]["device"]
    want_d, _ = circuit_labels(t, "--device", dev)
    text_d = dot_text(t, "--device", dev)
    got = sorted(e[3] for e in edges(text_d))
    check(got == want_d and want_d, f"--device {dev}: {got} vs {want_d}")
    check([n for n in nodes(text_d) if n.startswith("ocs-")] == [dev],
          f"--device {dev} draws other devices: {list(nodes(text_d))}")
    want_p, _ = circuit_labels(t, "--pod", "3")
    got = sorted(e[3] for e in edges(dot_text(t, "--pod", "3")))
    check(got == want_p and want_p, f"--pod 3: {got} vs {want_p}")

    # SVG: one <g class="edge"> per circuit
    n_svg = len(svg_edges(t))
    check(n_svg == len(want), f"--format svg: {n_svg} edges, {len(want)} circuits")
    n_svg = len(svg_edges(t, "--job", "topo-b"))
    check(n_svg == 3, f"--format svg --job topo-b: {n_svg} edges, want 3")

    # aggregation: counts add up to the circuits
    for limit, per_job in (("6", True), ("1", False)):
        text_m = dot_text(t, "--max-edges", limit)
        dot_reads(text_m, f"--max-edges {limit}")
        es_m = edges(text_m)
        counts = [int(re.search(r"(\d+) circuits$", e[3]).group(1)) for e in es_m]
        check(0 < len(es_m) <= int(limit) and sum(counts) == len(want),
              f"--max-edges {limit}: {len(es_m)} edges counting {counts}")
        check(all(e[3].startswith(("topo-a\n", "topo-b\n")) == per_job for e in es_m),
              f"--max-edges {limit}: per job {per_job}? {es_m}")
        check("aggregated" in text_m, f"--max-edges {limit}: no note")

    # a drained device
    r = ocsctl(t, "drain", dev, "--force")
    check(r.returncode == 0, f"drain {dev}: {r.stderr}")
    label, fill = nodes(dot_text(t)).get(dev, ("", ""))
    check("drained" in label.split("\n") and fill == FILL_DRAINED,
          f"drained {dev} drawn as {label!r} {fill}")
    other = nodes(dot_text(t)).get("ocs-g3-d3", ("", ""))
    check("drained" not in other[0] and other[1] != FILL_DRAINED or dev == "ocs-g3-d3",
          f"an undrained device drawn as {other}")

    # refusals
    shown = ocsctl(t, "job", "show", "no-such-job")
    r = ocsctl(t, "topology", "--job", "no-such-job")
    check(r.returncode == shown.returncode == 1 and "no-such-job" in r.stderr and not r.stdout,
          f"unknown job: exit {r.returncode} (job show: {shown.returncode}): {r.stderr}")
    env = dict(os.environ, PATH="/nonexistent")
    r = ocsctl(t, "topology", "--format", "svg", env=env)
    check(r.returncode == 2 and "graphviz" in r.stderr and not r.stdout,
          f"svg without dot: exit {r.returncode}: {r.stderr}")
    check(fleet.stop_ocsd() == 0, "ocsd did not exit cleanly")


def on_fleet(rf, checks):
    """Starts rf's devices and ocsd, runs checks(rf), stops ocsd and removes
    rf (its logs printed first when anything failed)."""
    try:
        rf.start_devices()
        rf.start_ocsd()
        checks(rf)
        check(rf.stop_ocsd() == 0, f"ocsd ({rf.work}) did not exit cleanly")
    finally:
        if script.failures:
            rf.dump_logs()
        rf.close()
        rf.remove()


def ring(rf):
    t = rf.target
    submit(t, {"id": "topo-ring", "ring": {"tp": 16, "rings": 2}})
    rings = json.loads(ocsctl(t, "--json", "rings").stdout)["rings"]
    text = dot_text(t)
    dot_reads(text, "the ring domain")
    ns = nodes(text)
    check(all(f"node {n}" in ns for n in range(16)), f"nodes drawn: {sorted(ns)}")
    es = edges(text)
    line = [e for e in es if e[3] == ""]
    check(len(line) == 15, f"deployment line: {len(line)} links, want 15")
    for r in rings:
        want = sorted(tuple(sorted((f"node {a}", f"node {b}")))
                      for a, b in zip(r["nodes"], r["nodes"][1:]))
        got = sorted(tuple(sorted((e[0], e[1]))) for e in es
                     if e[3].split("\n")[0] == f"topo-ring ring {r['ring']}")
        check(got == want, f"ring {r['ring']}: links {got}, want {want}")
    check(len({e[2] for e in es if e[3]}) == 1, "the job's rings in more than one colour")
    r = ocsctl(t, "topology", "--pod", "0")
    check(r.returncode == 2 and "leaf-spine" in r.stderr and not r.stdout,
          f"--pod on a ring domain: exit {r.returncode}: {r.stderr}")

    victim = rings[0]["nodes"][1]
    r = ocsctl(t, "node", "fail", str(victim))
    check(r.returncode == 0, f"node fail {victim}: {r.stderr}")
    text = dot_text(t)
    dot_reads(text, "the ring domain after a node failed")
    label, fill = nodes(text).get(f"node {victim}", ("", ""))
    check("failed" in label and fill == FILL_DOWN, f"failed node drawn as {label!r} {fill}")
    check(any(re.search(f"\n(bypass_extended|replaced), node {victim} failed$", e[3])
              for e in edges(text)), "no ring says it was repaired around the failed node")
    # 6 ring links > 3: the rings counted in the legend, the failed node joined to its job
    text = dot_text(t, "--max-edges", "3")
    dot_reads(text, "the ring domain aggregated")
    es = [(a, b) for a, b, _, _ in edges(text)]
    drawn = sorted(n for n in nodes(text) if n.startswith("node "))
    check(es == [(f"node {victim}", "job topo-ring")] and drawn == [f"node {victim}"] and
          nodes(text)["job topo-ring"][0] == "topo-ring\n2 rings",
          f"--max-edges 3 on the ring domain: edges {es}, nodes {drawn}")


def rail(rf):
    t = rf.target
    submit(t, {"id": "topo-rail", "placement": {"gpus": [{"gpu": g} for g in (0, 1, 2)]}})
    submit(t, {"id": "topo-rail-b", "placement": {"gpus": [{"gpu": g} for g in (4, 5, 6, 7)]}})
    for gpu in (1, 5):  # case 1: idle GPU 3 takes port 1; case 2: spare server 2 takes 4..7
        r = ocsctl(t, "gpu", "replace", str(gpu))
        check(r.returncode == 0, f"gpu replace {gpu}: {r.stderr}")
    r = ocsctl(t, "--json", "rail-ports")
    ports = json.loads(r.stdout).get("ports", [])
    want, n_swapped = [], 0
    for p in ports:
        gpu, home = p.get("gpu", 0), p.get("server", 0) * rf.rails + p.get("rail", 0)
        if gpu < 0:
            continue
        job_id = p.get("job_id", "")
        lab = (job_id + "\n" if job_id else "") + \
            f"rail {p.get('rail', 0)} port {p.get('rail_port', 0)}: gpu {gpu}"
        if gpu != home:
            lab += f"\nswapped in for gpu {home}"
            n_swapped += 1
        want.append((f"server {p.get('gpu_server', 0)}", f"OCS group {p.get('group', 0)}", lab))
    text = dot_text(t)
    dot_reads(text, "the rail-OCS fabric")
    es = edges(text)
    got = sorted((a, b, lab) for a, b, _, lab in es)
    check(got == sorted(want) and n_swapped == 5,
          f"rail ports: {got} vs {sorted(want)} ({n_swapped} swapped)")
    check("\nswapped in for gpu 1" in text.replace("\\n", "\n") and
          'style="bold,dashed"' in text, "the swapped GPU is not drawn as swapped")
    check(sum(e[0] == "server 2" for e in es) == 4, "the spare server's GPUs not drawn from it")
    held = [e for e in es if e[3].startswith("topo-rail\n")]
    check(len(held) == 3 and len({e[2] for e in held}) == 1,
          f"the job's GPUs: {held}")
    check(nodes(text).get("job topo-rail", ("",))[0] == "topo-rail\n3 GPUs" and
          text.count('"job topo-rail" [') == 1, "the legend does not count the job's GPUs")
    check(all(f"server {s}" in nodes(text) for s in range(rf.servers)) and
          "spare" in nodes(text)["server 2"][0], "servers (and the spare) drawn")


def main():
    lab()
    on_fleet(ocsd_fleet.RingFleet(BUILD, SRC, tors=4, nodes_per_tor=4, gpus_per_node=4,
                                  prefix="ocsd-topology-ring-"), ring)
    on_fleet(ocsd_fleet.RailFleet(BUILD, SRC, prefix="ocsd-topology-rail-"), rail)


sys.exit(script.run(main))

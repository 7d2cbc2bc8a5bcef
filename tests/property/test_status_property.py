#!/usr/bin/python3
"""test_status_property.py - random fabric states render a valid status page
(issue 27): status_gen (status_gen.c) renders COUNT random snapshots with
daemon/status/'s renderers; every /state.json must parse with Python's json
and every /topology.svg with xml.etree (parsers nobody here wrote), never
an error. Then, from the two outputs alone:
  - the SVG's root is <svg>, and it has at most SP_MAX_MARKS device marks;
  - leaf-spine: with at most SP_MAX_CIRCUIT_PATHS circuits in the JSON, one
    <path class="circuit"> per circuit, whose titles (XML-unescaped) name
    each JSON job as often as it has circuits; above, no circuit path and
    pod-pair edges whose counts add up to at most the circuits;
  - ring: one <path class="ring"> per JSON ring (up to the limit); the
    JSON lists every bundle_drift entry with its node, job and settings;
    the node marks of class "drift" are one per block (SP_MAX_MARKS) that
    holds a listed node within the fabric's nodes;
  - the JSON's job ids, device names and fabric name are strings; each job
    lists its n_circuits circuits up to SP_MAX_JSON_CIRCUITS in all, none
    above, where pod_pairs (a <= b) count at most every circuit.

usage: test_status_property.py STATUS_GEN [SEED [COUNT]]
A failure names the instance K: `status_gen DIR SEED+K 1` replays it.
"""
import collections
import json
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

SVG = "{http://www.w3.org/2000/svg}"
MAX_PATHS, MAX_MARKS, MAX_JSON_CIRCUITS = 2000, 512, 16384


def check_one(d, k, failures):
    def fail(what):
        failures.append(f"instance {k}: {what}")

    try:
        with open(os.path.join(d, f"{k}.json"), encoding="utf-8") as f:
            s = json.load(f)
    except (ValueError, UnicodeDecodeError) as e:
        return fail(f"JSON does not parse: {e}")
    try:
        root = ET.parse(os.path.join(d, f"{k}.svg")).getroot()
    except ET.ParseError as e:
        return fail(f"SVG does not parse: {e}")
    if root.tag != SVG + "svg":
        return fail(f"SVG root is {root.tag}")
    for key in ("name", "kind"):
        if not isinstance(s["fabric"][key], str):
            fail(f"fabric {key} is not a string")
    if any(not isinstance(j["id"], str) for j in s["jobs"]):
        fail("a job id is not a string")
    if any(not isinstance(dv["name"], str) for dv in s["devices"]):
        fail("a device name is not a string")
    classes = collections.Counter(e.get("class") for e in root.iter())
    if classes["device"] > MAX_MARKS:
        fail(f"{classes['device']} device marks")
    if len(s["devices"]) and not classes["device"]:
        fail("devices but no device mark")
    total = sum(j["n_circuits"] for j in s["jobs"])
    if s["circuits_listed"] != (total <= MAX_JSON_CIRCUITS):
        fail(f"circuits_listed {s['circuits_listed']} with {total} circuits")
    if s["circuits_listed"] and any(len(j["circuits"]) != j["n_circuits"] for j in s["jobs"]):
        fail("a job lists a number of circuits other than its n_circuits")
    if not s["circuits_listed"]:
        if any("circuits" in j for j in s["jobs"]):
            fail("circuits listed above the limit")
        if sum(n for _, _, n in s["pod_pairs"]) > total or \
                any(a > b for a, b, _ in s["pod_pairs"]):
            fail(f"pod_pairs do not add up: {s['pod_pairs'][:5]}")
    kind = s["fabric"]["kind"]
    if kind == "leaf-spine-ocs" and total <= MAX_PATHS:
        paths = [p for p in root.iter(SVG + "path") if p.get("class") == "circuit"]
        if len(paths) != total:
            fail(f"{len(paths)} circuit paths for {total} circuits")
        titles = collections.Counter(re.match(r"job (.*): [^:]* in -?\d+ -> out -?\d+",
                                              p.findtext(SVG + "title") or "", re.S)
                                     .group(1) for p in paths)
        want = collections.Counter()
        for j in s["jobs"]:
            # the SVG writes control characters as '?', JSON keeps them
            want[re.sub(r"[\x00-\x08\x0b-\x1f]", "?", j["id"])] += j["n_circuits"]
        if titles != +want:
            fail(f"circuit titles name {dict(titles)}, want {dict(+want)}")
    elif kind == "leaf-spine-ocs":
        if classes["circuit"]:
            fail(f"{classes['circuit']} circuit paths above the limit")
        counted = 0
        for p in root.iter(SVG + "path"):
            if p.get("class") == "pod-pair":
                counted += int(p.findtext(SVG + "title").split()[0])
        if counted > total:
            fail(f"pod-pair edges count {counted} circuits of {total}")
    elif kind == "ocstrx-ring":
        if classes["ring"] != min(len(s["rings"]), MAX_PATHS):
            fail(f"{classes['ring']} ring paths for {len(s['rings'])} rings")
        n = s["fabric"]["nodes"]
        block = 1 if n <= MAX_MARKS else -(-n // MAX_MARKS)
        want = {b["node"] // block for b in s["bundle_drift"] if 0 <= b["node"] < n}
        marks = sum("drift" in (e.get("class") or "").split() for e in root.iter(SVG + "circle"))
        if marks != len(want):
            fail(f"{marks} drift node marks, want {len(want)} (blocks of {block})")
        if any(not isinstance(b["job"], str) or not b["found"] or not b["expected"]
               for b in s["bundle_drift"]):
            fail(f"a bundle_drift entry lacks job or settings: {s['bundle_drift'][:3]}")
    elif kind != "rail-ocs":
        fail(f"unknown kind {kind}")


def main():
    gen = sys.argv[1]
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    count = int(sys.argv[3]) if len(sys.argv) > 3 else 400
    failures = []
    with tempfile.TemporaryDirectory(prefix="status-prop-") as d:
        r = subprocess.run([gen, d, str(seed), str(count)], capture_output=True, text=True)
        if r.returncode != 0:
            print(f"status_gen failed ({r.returncode}): {r.stderr}")
            return 1
        for k in range(count):
            check_one(d, k, failures)
    for f in failures[:20]:
        print("FAIL:", f)
    print(f"test_status_property: {count} instances from seed {seed}, "
          f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

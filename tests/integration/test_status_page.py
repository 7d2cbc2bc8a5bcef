#!/usr/bin/python3
"""test_status_page.py - ocsd's status page on the metrics listener (issue 27),
on the lab fabric with an ocs-devsim fleet (ocsd_fleet.Fleet):

  1. before any job: `/` is HTML with a Content-Security-Policy of 'self',
     X-Content-Type-Options nosniff, and links to /status.js and /status.css,
     which are served; /state.json parses and has the 16 devices; an
     unknown path is 404;
  2. the lab job submitted: /state.json lists it ACTIVE with exactly the
     cross-connects the devices hold (read back over NETCONF with ncclient,
     by device and ports); /topology.svg parses as XML and has one
     <path class="circuit"> per circuit of the job, each titled with the
     job's id;
  3. POST, PUT and DELETE on every page path are 405 with Allow: GET, HEAD,
     and change nothing (the job is still there);
  4. ocs-devsim killed: /state.json shows a device down (session
     disconnected or health unreachable) within 2 s of ocsd knowing it
     (/metrics' ocsd_devices{state="unreachable"} above 0).
  5. an OCSTrx ring domain (ocsd_fleet.RingFleet, 64 nodes): a TP-16 job of
     3 rings (`ocsctl job submit`, status_helpers.start_ring_job) is listed
     with its rings; a node of a ring failed through the devsim knob
     (node-fault): within RING_WITHIN_S /state.json lists it faulty and its
     ring changed around it (the node gone from the ring, failed_node
     naming it, bypass-extended or replaced), and /topology.svg draws the
     node as a faulty circle and the ring's path titled with the bypass.

usage: test_status_page.py BUILD_DIR SOURCE_DIR
"""
import os
import sys
import time
import urllib.error
import urllib.request
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ocsd_fleet  # noqa: E402
import status_helpers  # noqa: E402
from status_helpers import state  # noqa: E402

BUILD, SRC = sys.argv[1], sys.argv[2]
SVG = "{http://www.w3.org/2000/svg}"
JOB = "lab-ring"
# ocsd learns a session is down at a reconciliation pass (every 1 s here) once
# its reads fail (3-4 s after the kill measured here); /metrics says so from
# the same memory. The page must show it within the 2 s of that.
KNOW_WITHIN_S = 15
PAGE_WITHIN_S = 2.0
# a node fault: the devsim's notification, the repair's transaction, stored
RING_WITHIN_S = 10


def get(port, path, method="GET"):
    """(status, headers, body bytes)."""
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method,
                                 data=b"x" if method in ("POST", "PUT") else None)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def main(fleet, check):
    fleet.start_devices()
    fleet.start_ocsd()
    port = fleet.metrics_port

    # 1. the page and its parts
    status, headers, body = get(port, "/")
    check(status == 200, f"/: {status}")
    csp = headers.get("Content-Security-Policy", "")
    check("default-src 'self'" in csp and "script-src 'self'" in csp
          and "unsafe-inline" not in csp, f"/: Content-Security-Policy {csp!r}")
    check(headers.get("X-Content-Type-Options") == "nosniff", "/: no nosniff")
    check(headers.get("Content-Type", "").startswith("text/html"), "/: not text/html")
    page = body.decode()
    check('src="/status.js"' in page and 'href="/status.css"' in page,
          "/ does not load /status.js and /status.css")
    check("http://" not in page and "https://" not in page, "/ names an external address")
    for path, kind in (("/status.js", "text/javascript"), ("/status.css", "text/css")):
        status, headers, body = get(port, path)
        check(status == 200 and headers.get("Content-Type", "").startswith(kind) and body,
              f"{path}: {status} {headers.get('Content-Type')}")
    check(get(port, "/nothing-here")[0] == 404, "an unknown path is not 404")
    s = state(port)
    check(s["fabric"]["kind"] == "leaf-spine-ocs" and s["fabric"]["pods"] == 4,
          f"fabric: {s['fabric']}")
    check(len(s["devices"]) == fleet.N_DEV, f"{len(s['devices'])} devices, want {fleet.N_DEV}")
    check(s["jobs"] == [], f"jobs before any submit: {s['jobs']}")
    check(s["role"] == "standalone", f"role {s['role']}")

    # 2. a job: its circuits in the JSON, one titled path each in the SVG
    r = fleet.submit_lab_job()
    check(r.returncode == 0, f"submit: {r.stdout} {r.stderr}")
    held = {(name, i, o) for name, rows in fleet.read_devices().items() for i, o, _ in rows}
    check(held, "the devices hold no cross-connect after the submit")
    s = state(port)
    jobs = {j["id"]: j for j in s["jobs"]}
    check(JOB in jobs, f"/state.json does not list {JOB}: {list(jobs)}")
    if JOB in jobs:
        job = jobs[JOB]
        check(job["state"] == "ACTIVE", f"{JOB} is {job['state']}")
        listed = {(c["device"], c["in"], c["out"]) for c in job["circuits"]}
        check(listed == held, f"/state.json circuits {sorted(listed)} != devices' {sorted(held)}")
        check(len(listed) == len(job["circuits"]), "a circuit is listed twice")
        status, headers, body = get(port, "/topology.svg")
        check(status == 200 and headers.get("Content-Type") == "image/svg+xml",
              f"/topology.svg: {status} {headers.get('Content-Type')}")
        root = ET.fromstring(body)
        paths = [p for p in root.iter(SVG + "path") if p.get("class") == "circuit"]
        titled = [p for p in paths if JOB in (p.findtext(SVG + "title") or "")]
        check(len(paths) == len(job["circuits"]) == len(titled),
              f"{len(paths)} circuit paths ({len(titled)} naming {JOB}), "
              f"{len(job['circuits'])} circuits")
        for c in job["circuits"]:
            want = f"job {JOB}: {c['device']} in {c['in']} -> out {c['out']}"
            check(any((p.findtext(SVG + "title") or "").startswith(want) for p in paths),
                  f"no path titled {want!r}")

    # 3. read-only
    for path in ("/", "/state.json", "/topology.svg", "/status.js", "/status.css"):
        for method in ("POST", "PUT", "DELETE"):
            status, headers, _ = get(port, path, method)
            check(status == 405 and headers.get("Allow") == "GET, HEAD",
                  f"{method} {path}: {status}, Allow {headers.get('Allow')}")
    check(JOB in {j["id"] for j in state(port)["jobs"]}, "the job went after the writes")

    # 4. the devices killed: the page shows it as soon as ocsd knows
    status_helpers.kill_devices_and_time(
        fleet, {"metrics": lambda: unreachable(fleet) > 0,
                "page": lambda: status_helpers.any_device_down(port)},
        check, "page", "metrics", PAGE_WITHIN_S, KNOW_WITHIN_S)


def unreachable(fleet):
    for line in fleet.metrics().splitlines():
        if line.startswith('ocsd_devices{state="unreachable"}'):
            return float(line.split()[-1])
    return 0



def ring_main(fleet, check):
    """Part 5: a ring domain with a node failed."""
    rings = status_helpers.start_ring_job(fleet, check)
    if not rings:
        return
    port, job = fleet.metrics_port, status_helpers.RING_JOB
    ring = rings[0]
    victim = ring["nodes"][1]
    fleet.set_faults(victim, "node-fault")
    deadline, changed = time.time() + RING_WITHIN_S, None
    while time.time() < deadline and changed is None:
        changed = status_helpers.ring_bypassed(state(port), ring["index"], victim)
        time.sleep(0.1)
    check(changed is not None, f"node {victim} not shown faulty and bypassed within "
          f"{RING_WITHIN_S} s: {state(port)['rings']}, faulty {state(port)['faulty_nodes']}")
    if changed is None:
        return
    print(f"ring {ring['index']} after node {victim} failed: {changed}", flush=True)
    check(changed["change"] in ("bypass-extended", "replaced"), f"change {changed}")
    status, _, body = get(port, "/topology.svg")
    root = ET.fromstring(body)
    circles = {c.findtext(SVG + "title"): c.get("class") for c in root.iter(SVG + "circle")}
    check(circles.get(f"node {victim}: faulty") == "node faulty",
          f"node {victim} not drawn faulty: {circles.get(f'node {victim}: faulty')}")
    titles = [p.findtext(SVG + "title") or "" for p in root.iter(SVG + "path")
              if p.get("class") == "ring"]
    check(any(t.startswith(f"job {job} ring {ring['index']} (") and
              f"node {victim} failed, bypassed" in t for t in titles),
          f"no ring path titled with node {victim}'s bypass: {titles}")


if __name__ == "__main__":
    fleet = ocsd_fleet.Fleet(BUILD, SRC, prefix="ocsd-status-")
    t = ocsd_fleet.Script("status_page", fleet)
    rc = t.run(lambda: main(fleet, t.check))
    ring_fleet = ocsd_fleet.RingFleet(BUILD, SRC, prefix="ocsd-status-ring-")
    t = ocsd_fleet.Script("status_page (ring domain)", ring_fleet)
    sys.exit(rc | t.run(lambda: ring_main(ring_fleet, t.check)))

#!/usr/bin/python3
"""test_e2e_lab.py - the whole product on the lab fabric: 16 ocs-devsim
devices (real NETCONF servers), the real ocsd, driven with ocsctl, and every
device read back directly with ncclient (a NETCONF client nobody here wrote)
to check what ocsd claims against what the devices hold.

usage: test_e2e_lab.py BUILD_DIR SOURCE_DIR"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(sys.argv[2], "deploy"))
import importlib.util  # noqa: E402

spec = importlib.util.spec_from_file_location(
    "show_device", os.path.join(sys.argv[2], "deploy", "show-device.py"))
show_device = importlib.util.module_from_spec(spec)
spec.loader.exec_module(show_device)

build, src = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import testports  # noqa: E402
DEVSIM = os.path.join(build, "southbound", "ocs-devsim")
OCSD = os.path.join(build, "daemon", "ocsd")
OCSCTL = os.path.join(build, "northbound", "ocsctl", "ocsctl")
N_DEV = 16
passed = failed = 0
metrics_port = 0


def check(cond, what):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print("FAIL:", what, flush=True)


work = tempfile.mkdtemp(prefix="ocsd-e2e-")
procs = []


def start_ocsd():
    log = open(os.path.join(work, "ocsd.log"), "a")
    p = subprocess.Popen([OCSD, "--config", cfg, "--state-dir", work, "--listen",
                          "127.0.0.1:0", "--insecure", "--metrics-listen", "127.0.0.1:0",
                          "--reconcile-interval-s", "1"],
                         stderr=log, stdout=log)
    procs.append(p)
    for _ in range(200):
        with open(os.path.join(work, "ocsd.log")) as f:
                text = f.read()
        m = re.findall(r"gRPC on \S+ \(port (\d+)", text)
        if len(m) >= starts + 1:
            global metrics_port
            metrics_port = int(re.findall(r"metrics on \S+ \(port (\d+)", text)[-1])
            for port in (int(m[-1]), metrics_port):
                testports.wait_listening("127.0.0.1", port, "ocsd", 30, proc=p)
            return p, int(m[-1])
        if p.poll() is not None:
            raise RuntimeError("ocsd exited: " + open(os.path.join(work, "ocsd.log")).read())
        time.sleep(0.05)
    raise RuntimeError("ocsd did not start")


def ocsctl(*args, json_out=False):
    cmd = [OCSCTL, "--insecure", "--server", f"127.0.0.1:{grpc_port}"]
    if json_out:
        cmd.append("--json")
    r = subprocess.run(cmd + list(args), capture_output=True, text=True, timeout=60)
    out = json.loads(r.stdout) if json_out and r.returncode == 0 and r.stdout else r.stdout
    return r.returncode, out, r.stderr


def read_devices():
    """{(group, device): [(in, out, status)]} read over NETCONF."""
    state = {}
    for d in range(N_DEV):
        rows = show_device.read("127.0.0.1", base + d, "ocsd", password)
        state[(d // 4, d % 4)] = sorted((r["input"], r["output"], r["status"]) for r in rows)
    return state


def xcs_of(devices):
    return sorted((g, d, i, o) for (g, d), rows in devices.items() for (i, o, _) in rows)


def l2_ok(devices):
    """Independent L2 check for cross wiring: device 2m carries in p -> out q
    exactly when device 2m+1 carries in q -> out p, and p != q."""
    have = set(xcs_of(devices))
    for (g, d, i, o) in have:
        if i == o or (g, d ^ 1, o, i) not in have:
            return False
    return True


try:
    password = "e2e-" + os.urandom(8).hex()
    with open(os.open(os.path.join(work, "pw"), os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
        f.write(password + "\n")
    base = testports.reserve(N_DEV)
    with open(os.path.join(src, "deploy", "fabrics", "lab.json")) as f:
        lab = f.read()
    cfg = os.path.join(work, "fabric.json")
    with open(cfg, "w") as f:
        f.write(lab.replace("/etc/ocsd/device-password", os.path.join(work, "pw"))
                .replace('"port-base": 18300', f'"port-base": {base}'))
    dlog = open(os.path.join(work, "devsim.log"), "w")
    procs.append(subprocess.Popen([DEVSIM, "--listen", f"127.0.0.1:{base}", "--count",
                                   str(N_DEV), "--ports", "8", "--user", "ocsd",
                                   "--password-file", os.path.join(work, "pw"),
                                   "--unidirectional", "--switch-ms", "5"],
                                  stdout=dlog, stderr=dlog))
    testports.wait_listening("127.0.0.1", base, "ocs-devsim", 30, count=N_DEV, proc=procs[-1])
    starts = 0
    ocsd, grpc_port = start_ocsd()
    starts += 1
    for _ in range(100):
        if ocsctl("status")[0] == 0:
            break
        time.sleep(0.1)
    job = os.path.join(src, "deploy", "jobs", "lab-ring.json")

    # Health from the start-up read-back: every device reachable.
    healthy = False
    for _ in range(100):
        rc, devs, err = ocsctl("devices", json_out=True)
        healthy = rc == 0 and len(devs.get("devices", [])) == N_DEV and all(
            d.get("health") == "DEVICE_HEALTH_HEALTHY" for d in devs["devices"])
        if healthy:
            break
        time.sleep(0.1)
    check(healthy, f"devices not all healthy: {rc} {err}")
    rc, fab, err = ocsctl("fabric", json_out=True)
    check(rc == 0 and fab.get("devices_connected") == N_DEV, f"fabric summary: {fab} {err}")

    # Dry run: figures and circuits, and no device touched.
    rc, plan, err = ocsctl("job", "plan", job, json_out=True)
    check(rc == 0, f"job plan: {rc} {err}")
    fig = plan.get("figures", {}) if rc == 0 else {}
    check(fig.get("links_requested") == 8 and fig.get("links_placed") == 8,
          f"plan figures {fig}")
    check(fig.get("max_contention", 9) <= 1.0, f"contention {fig.get('max_contention')}")
    check(len(plan.get("circuits", [])) == 8 if rc == 0 else False, "8 circuits planned")
    check(xcs_of(read_devices()) == [], "a dry run touched a device")

    # Submit: ACTIVE, and the devices hold exactly what ocsd reports.
    rc, out, err = ocsctl("job", "submit", job, json_out=True)
    check(rc == 0 and out["job"]["state"] == "JOB_STATE_ACTIVE" and out.get("created"),
          f"submit: {rc} {out} {err}")
    rc, circ, err = ocsctl("circuits", "--job", "lab-ring", json_out=True)
    reported = sorted(
        (c["group"], x["device"], x["in_port"], x["out_port"])
        for c in circ.get("circuits", []) for x in c["cross_connects"]) if rc == 0 else []
    devices = read_devices()
    held = xcs_of(devices)
    names = {f"ocs-g{g}-d{d}": (g, d) for g in range(4) for d in range(4)}
    check(len(held) == 16, f"devices hold {len(held)} cross-connects, want 16")
    check(sorted((g, names[dev][1], i, o) for (g, dev, i, o) in reported) == held,
          f"ocsd reports {reported}, devices hold {held}")
    check(all(st == "connected" for rows in devices.values() for (_, _, st) in rows),
          "every connection connected")
    check(l2_ok(devices), "one-way circuit on the devices")

    # Drift: a cross-connect nobody asked for appears on a device, then goes.
    def drift(kind):
        import urllib.request
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics") as r:
            text = r.read().decode()
        m = re.search(r'ocsd_drift_cross_connects\{kind="%s"\} (\S+)' % kind, text)
        return float(m.group(1)) if m else None

    def edit_stray(operation):
        from ncclient import manager
        NS = "urn:ocsd:yang:ocs-switch"
        cfg_xml = (f'<config xmlns="urn:ietf:params:xml:ns:netconf:base:1.0">'
                   f'<cross-connects xmlns="{NS}"><connection'
                   f' xmlns:nc="urn:ietf:params:xml:ns:netconf:base:1.0"'
                   f'{" nc:operation=" + chr(34) + operation + chr(34) if operation else ""}>'
                   f'<input>5</input><output>6</output></connection></cross-connects></config>')
        with manager.connect(host="127.0.0.1", port=base + 15, username="ocsd",
                             password=password, hostkey_verify=False, allow_agent=False,
                             look_for_keys=False, timeout=10) as m:
            m.edit_config(target="candidate", config=cfg_xml)
            m.commit()

    def wait_drift(kind, want):
        for _ in range(100):
            if drift(kind) == want:
                return True
            time.sleep(0.1)
        return False

    check(wait_drift("unowned", 0) and drift("missing") == 0, "no drift at rest")
    edit_stray(None)
    check(wait_drift("unowned", 1), f"stray cross-connect not reported: {drift('unowned')}")
    edit_stray("delete")
    check(wait_drift("unowned", 0), "drift did not clear")

    # Idempotent resubmission; conflicting one; bad input; no capacity.
    rc, out, err = ocsctl("job", "submit", job, json_out=True)
    check(rc == 0 and not out.get("created"), f"resubmit: {rc} {out} {err}")
    with open(job) as f:
        spec_json = json.load(f)
    other = dict(spec_json, idempotency_key="other-key")
    other["leaf_demand"] = {"pairs": [{"a": 0, "b": 2, "links": 1}]}
    p = os.path.join(work, "conflict.json")
    json.dump(other, open(p, "w"))
    rc, _, err = ocsctl("job", "submit", p)
    check(rc == 1 and "ALREADY_EXISTS" in err, f"conflicting id: {rc} {err}")
    bad = dict(spec_json, id="bad-1", idempotency_key="")
    bad["leaf_demand"] = {"pairs": [{"a": 0, "b": 9, "links": 1}]}
    json.dump(bad, open(p, "w"))
    rc, _, err = ocsctl("job", "submit", p)
    check(rc == 1 and "INVALID_ARGUMENT" in err and "leaf_demand.pairs[0]" in err,
          f"bad leaf: {rc} {err}")
    big = {"id": "big-1", "placement": {"gpus": [
        {"gpu": 4 + i, "leaf": 0, "pod": 0} for i in range(4)] + [
        {"gpu": 20 + i, "leaf": 2, "pod": 1} for i in range(4)]},
        "leaf_demand": {"pairs": [{"a": 0, "b": 2, "links": 8}]}}
    json.dump(big, open(p, "w"))
    rc, _, err = ocsctl("job", "submit", p)
    check(rc == 1 and "RESOURCE_EXHAUSTED" in err and
          "the uplinks of leaf 0" in err,
          f"a leaf shared beyond its uplinks: {rc} {err}")
    check(xcs_of(read_devices()) == held, "a refused job changed the devices")

    # Restart: the job and its circuits survive, the devices are untouched.
    ocsd.send_signal(signal.SIGTERM)
    check(ocsd.wait(timeout=30) == 0, "ocsd exit code on SIGTERM")
    ocsd, grpc_port = start_ocsd()
    starts += 1
    for _ in range(100):
        if ocsctl("status")[0] == 0:
            break
        time.sleep(0.1)
    rc, out, err = ocsctl("job", "show", "lab-ring", json_out=True)
    check(rc == 0 and out["job"]["state"] == "JOB_STATE_ACTIVE" and
          len(out["job"].get("circuits", [])) == 8, f"after restart: {rc} {err}")
    check(xcs_of(read_devices()) == held, "restart changed the devices")

    # Release: RELEASED and every device empty.
    rc, out, err = ocsctl("job", "release", "lab-ring", json_out=True)
    check(rc == 0 and out["job"]["state"] == "JOB_STATE_RELEASED", f"release: {rc} {err}")
    check(xcs_of(read_devices()) == [], "devices not empty after release")
finally:
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()
    if failed:
        for name in ("ocsd.log", "devsim.log"):
            path = os.path.join(work, name)
            if os.path.exists(path):
                print(f"--- {name} (tail)")
                print("".join(open(path).readlines()[-30:]))
    shutil.rmtree(work, ignore_errors=True)

print(f"e2e-lab: {passed} passed, {failed} failed")
sys.exit(1 if failed else 0)

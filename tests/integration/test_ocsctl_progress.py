#!/usr/bin/python3
"""test_ocsctl_progress.py - ocsctl's progress line (issue 27) against the
REAL ocsd on the lab fleet (16 ocs-devsim devices): `job submit` (waiting)
and `job release` with stderr a real terminal (pty.openpty()) show on
stderr, redrawn in place on one line, the job's phases and its
transaction's progress as Watch reports them, and clear the line before
the answer; the devices the job touches are slowed down with the devsim
knob hang@commit (a different time on each, so that they finish one after
the other).

  - submit: the transcript of stderr (split at "\\r", erase-to-end-of-line
    dropped) shows, in order, planning, programming N of M devices with M
    the number of devices the job's circuits are on (`ocsctl circuits
    --job --json`) and N never above M (and rising), verifying, confirming;
    it ends with the line cleared; stdout's first line is the answer as
    without a terminal ("job lab-ring: active (submitted)");
  - release: the same with releasing first; stdout "job lab-ring: released";
  - the same job again as lab-ring-2: submitted with stderr a pipe, stderr
    empty and the usual answer; released with --quiet on a terminal,
    nothing on the terminal and the usual answer.
Then an OCSTrx ring domain of 16 nodes (RingFleet) with a job of 2 rings:
  - `node fail` of a ring's node on a terminal: the repair's transaction
    drawn for the ring's job, its steps in order up to every device
    confirmed, the line cleared; stdout's answer unchanged.
Then a rail-OCS fabric (RailFleet: 6 servers, 4 rails) with a job on GPUs
0-2:
  - `gpu replace 1` on a terminal: the swap (idle GPU 3 takes GPU 1's rail
    port) drawn for the job whose GPU it moves, its steps in order up to
    every device confirmed, the line cleared; stdout's answer unchanged.

usage: test_ocsctl_progress.py BUILD_DIR SOURCE_DIR
"""
import json
import os
import pty
import re
import subprocess
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ocsd_fleet  # noqa: E402

BUILD, SRC = sys.argv[1:3]
OCSCTL = os.path.join(BUILD, "northbound", "ocsctl", "ocsctl")
JOB = os.path.join(SRC, "deploy", "jobs", "lab-ring.json")
STEP = re.compile(r"^job lab-ring: (preparing|programming|verifying|confirming|rolling back) "
                  r"(\d+) of (\d+) devices$")

fleet = ocsd_fleet.Fleet(BUILD, SRC, prefix="ocsd-progress-")
script = ocsd_fleet.Script("ocsctl_progress", fleet)
check = script.check


def ocsctl_args(*args, on=None):
    target = (on or fleet).target
    return [OCSCTL, "--insecure", "--server", target, "--timeout-ms", "30000"] + list(args)


def run_on_tty(*args, on=None):
    """ocsctl (on fleet `on`, else the lab fleet) with stderr a
    pseudo-terminal: (exit code, stdout, what the terminal received)."""
    master, slave = pty.openpty()
    p = subprocess.Popen(ocsctl_args(*args, on=on), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=slave)
    os.close(slave)
    got = []

    def read_terminal():
        while True:
            try:
                data = os.read(master, 4096)
            except OSError:  # EIO: every writer of the terminal has gone
                return
            if not data:
                return
            got.append(data)

    reader = threading.Thread(target=read_terminal)
    reader.start()
    out = p.stdout.read().decode()
    p.wait(timeout=60)
    reader.join(timeout=10)
    os.close(master)
    return p.returncode, out, b"".join(got).decode(errors="replace")


def lines_drawn(tty):
    """The lines the terminal showed one after the other: the text between
    carriage returns, with erase-to-end-of-line dropped ("" for a clear)."""
    return [s.replace("\033[K", "").replace("\n", "") for s in tty.split("\r")][1:]


def slow_down(devices):
    """Each device's next commit waits a little longer than the one before."""
    for i, d in enumerate(devices):
        fleet.set_faults(d, f"hang@commit={150 + 100 * i}")


def check_transcript(what, tty, first, total):
    """first (the phase the job is in before its transaction), then every
    step of the transaction in order, counts within total; cleared at the end."""
    drawn = lines_drawn(tty)
    print(f"{what}: terminal lines {drawn}", flush=True)
    check(drawn and drawn[-1] == "", f"{what}: the line is cleared at the end: {drawn[-3:]}")
    check(f"job lab-ring: {first}" in drawn, f"{what}: shows {first}: {drawn}")
    steps, seen = [], {}
    for line in drawn:
        m = STEP.match(line)
        if m:
            step, done, of = m.group(1), int(m.group(2)), int(m.group(3))
            check(of == total, f"{what}: {line!r}: {total} devices expected")
            check(done <= of, f"{what}: {line!r}: more done than devices")
            check(done >= seen.get(step, 0), f"{what}: {line!r}: the count went down")
            seen[step] = done
            if not steps or steps[-1] != step:
                steps.append(step)
    check(steps == ["preparing", "programming", "verifying", "confirming"],
          f"{what}: steps in order: {steps}")
    check(seen.get("programming") == total,
          f"{what}: programming reached {total} of {total}: {seen}")
    if first in drawn and steps:
        check(drawn.index(f"job lab-ring: {first}") <
              next(i for i, line in enumerate(drawn) if STEP.match(line)),
              f"{what}: {first} before the transaction's steps")


def job_devices():
    """The devices the job's circuits are on."""
    r = fleet.ocsctl("--json", "circuits", "--job", "lab-ring")
    check(r.returncode == 0, f"circuits --job: {r.stderr}")
    circuits = json.loads(r.stdout).get("circuits", [])
    return sorted({x["device"] for c in circuits for x in c["cross_connects"]})


def plan_devices():
    """The devices the job's plan would touch (a dry run)."""
    r = fleet.ocsctl("--json", "job", "plan", JOB)
    check(r.returncode == 0, f"job plan: {r.stderr}")
    circuits = json.loads(r.stdout).get("circuits", [])
    return sorted({x["device"] for c in circuits for x in c["cross_connects"]})


def check_repair(what, tty, name):
    """A repair's transcript: name's transaction steps in order up to
    confirming, each count within its total, the last confirm complete;
    the line cleared at the end."""
    drawn = lines_drawn(tty)
    print(f"{what}: terminal lines {drawn}", flush=True)
    check(drawn and drawn[-1] == "", f"{what}: the line is cleared at the end: {drawn[-3:]}")
    steps, last = [], None
    for line in drawn:
        m = re.match(r"^" + re.escape(name) + r": (preparing|programming|verifying|confirming) "
                     r"(\d+) of (\d+) devices$", line)
        if not m:
            continue
        done, of = int(m.group(2)), int(m.group(3))
        check(0 < of and done <= of, f"{what}: {line!r}")
        if not steps or steps[-1] != m.group(1):
            steps.append(m.group(1))
        last = (m.group(1), done, of)
    check(steps == ["preparing", "programming", "verifying", "confirming"],
          f"{what}: steps in order: {steps}")
    check(last and last[0] == "confirming" and last[1] == last[2],
          f"{what}: ends with every device confirmed: {last}")


def submit_json(on, spec):
    path = os.path.join(on.work, spec["id"] + ".json")
    with open(path, "w") as f:
        json.dump(spec, f)
    r = subprocess.run(ocsctl_args("--quiet", "job", "submit", path, on=on),
                       capture_output=True, text=True, timeout=60)
    check(r.returncode == 0, f"submit {spec['id']}: {r.stderr}")


def on_fleet(other, checks):
    """Starts another fleet's devices and ocsd, runs checks(other), removes it."""
    try:
        other.start_devices()
        other.start_ocsd()
        checks(other)
    finally:
        if script.failures:
            other.dump_logs()
        other.close()
        other.remove()


def ring(rf):
    """node fail of a ring's node: the repair's progress, named by the ring's job."""
    submit_json(rf, {"id": "prog-ring", "ring": {"tp": 16, "rings": 2}})
    r = subprocess.run(ocsctl_args("--json", "rings", on=rf), capture_output=True, text=True,
                       timeout=60)
    victim = json.loads(r.stdout)["rings"][0]["nodes"][1]
    rc, out, tty = run_on_tty("node", "fail", str(victim), on=rf)
    check(rc == 0, f"node fail {victim}: exit {rc}")
    check(out.startswith(f"node {victim}: faulty\n") and
          "ring repaired for job prog-ring\n" in out, f"node fail: the answer unchanged: {out!r}")
    check_repair("node fail", tty, "job prog-ring")


def rail(rl):
    """gpu replace of a job's GPU: the swap's progress, named by the job."""
    submit_json(rl, {"id": "prog-rail", "placement": {"gpus": [{"gpu": g} for g in (0, 1, 2)]}})
    rc, out, tty = run_on_tty("gpu", "replace", "1", on=rl)
    check(rc == 0, f"gpu replace 1: exit {rc}")
    check(out.startswith("gpu 1 (server 0, group 0): idle-gpu (gpu 3 took over)") and
          "rail port 1: gpu 1 -> 3, job prog-rail\n" in out,
          f"gpu replace: the answer unchanged: {out!r}")
    check_repair("gpu replace", tty, "job prog-rail")


def main():
    fleet.start_devices()
    fleet.start_ocsd()
    for _ in range(100):
        if fleet.ocsctl("status").returncode == 0:
            break
    planned = plan_devices()
    check(planned, "the plan touches devices")
    names = [fleet.device_name(d) for d in range(fleet.N_DEV)]
    slow_down([names.index(n) for n in planned])

    rc, out, tty = run_on_tty("job", "submit", JOB)
    check(rc == 0, f"submit on a terminal: exit {rc}")
    check(out.splitlines()[:1] == ["job lab-ring: active (submitted)"],
          f"submit: the answer unchanged: {out[:200]!r}")
    devices = job_devices()
    check(devices == planned, f"the job holds the planned devices: {devices} vs {planned}")
    check_transcript("submit", tty, "planning", len(devices))

    slow_down([names.index(n) for n in devices])
    rc, out, tty = run_on_tty("job", "release", "lab-ring")
    check(rc == 0, f"release on a terminal: exit {rc}")
    check(out == "job lab-ring: released\n", f"release: the answer unchanged: {out!r}")
    check_transcript("release", tty, "releasing", len(devices))

    # the same job again as lab-ring-2, with stderr a pipe: nothing on it
    with open(JOB) as f:
        spec = json.load(f)
    spec["id"], spec["idempotency_key"] = "lab-ring-2", "progress-2"
    job2 = os.path.join(fleet.work, "lab-ring-2.json")
    with open(job2, "w") as f:
        json.dump(spec, f)
    slow_down([names.index(n) for n in planned])
    r = subprocess.run(ocsctl_args("job", "submit", job2), capture_output=True, text=True,
                       timeout=60)
    check(r.returncode == 0 and r.stderr == "",
          f"stderr a pipe: nothing on it (exit {r.returncode}): {r.stderr!r}")
    check(r.stdout.splitlines()[:1] == ["job lab-ring-2: active (submitted)"],
          f"piped submit's answer: {r.stdout[:200]!r}")

    # --quiet on a terminal: nothing on it, the same answer
    slow_down([names.index(n) for n in planned])
    rc, out, tty = run_on_tty("--quiet", "job", "release", "lab-ring-2")
    check(rc == 0 and tty == "", f"--quiet: nothing on the terminal (exit {rc}): {tty!r}")
    check(out == "job lab-ring-2: released\n", f"--quiet: the answer unchanged: {out!r}")
    fleet.stop_ocsd()

    on_fleet(ocsd_fleet.RingFleet(BUILD, SRC, tors=4, nodes_per_tor=4, gpus_per_node=4,
                                  prefix="ocsd-progress-ring-"), ring)
    on_fleet(ocsd_fleet.RailFleet(BUILD, SRC, prefix="ocsd-progress-rail-"), rail)

sys.exit(script.run(main))

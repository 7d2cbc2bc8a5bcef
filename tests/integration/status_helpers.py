"""status_helpers.py - shared by test_status_page.py and test_status_browser.py
(the status page, issue 27): reading /state.json, and timing when a change
first shows in each of several places after the devices are killed.
Not a test itself."""
import json
import signal
import time
import urllib.request


def state(port):
    """/state.json of the metrics listener on port, parsed."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/state.json", timeout=10) as r:
        return json.loads(r.read())


def any_device_down(port):
    return any(d["session"] == "disconnected" or d["health"] == "unreachable"
               for d in state(port)["devices"])


def kill_devices_and_time(fleet, probes, check, later, earlier, within_s, limit_s=15):
    """Kills ocs-devsim (SIGKILL), then polls probes ({name: callable}) until
    each has returned true once or limit_s passed; checks that every probe
    fired and that probe `later` fired at most within_s after `earlier`.
    Returns {name: seconds after the kill}."""
    fleet.devsim_proc.send_signal(signal.SIGKILL)
    fleet.devsim_proc.wait()
    start, seen = time.monotonic(), {}
    while time.monotonic() - start < limit_s and len(seen) < len(probes):
        now = time.monotonic() - start
        for name, probe in probes.items():
            if name not in seen and probe():
                seen[name] = now
        time.sleep(0.05)
    print(f"devices killed; shown down after (s): {seen}", flush=True)
    check(len(seen) == len(probes), f"not all shown down within {limit_s} s: {seen}")
    if len(seen) == len(probes):
        check(seen[later] - seen[earlier] <= within_s,
              f"{later} showed it {seen[later] - seen[earlier]:.2f} s after {earlier}, "
              f"want <= {within_s}")
    return seen

#!/usr/bin/python3
"""test_devsim_stalled_clients.py - clients stuck in their SSH handshake on
some devices of an ocs-devsim fleet must not keep another client out.

A client that stops mid-handshake (a replica under SIGSTOP while it
connects, a dead link) holds the simulator thread that runs the handshake
until libnetconf2's transport timeout (10 s). Real devices each run their
own SSH server, so one device's stuck clients never delay another device.
ocs-devsim used to accept with four threads for the whole fleet: four such
connections made every device refuse new sessions for 10 s, and the
replicas' fence test waited 20 s for a takeover that had to connect its
devices (issue 15's fence case, CI of 2026-12-02).

The test opens STALLED silent TCP connections spread over devices 0..2
(more than the simulator's first acceptors, and more than one doubling of
them), then connects ncclient to devices 3 and 0 one after another: each
session must be up and answer a read within LIMIT_S. With four acceptors
for the fleet the first waited 6.7 to 7.1 s (three runs) and the second got
no session at all (its SSH banner never came).

usage: test_devsim_stalled_clients.py DEVSIM_BINARY
"""
import socket
import subprocess
import sys
import time

import testports

from ncclient import manager
import ncclient.transport.ssh

ncclient.transport.ssh.TICK = 0.001
NS = "urn:ocsd:yang:ocs-switch"
DEVSIM = sys.argv[1]
DEVICES = 4
STALLED = 24
LIMIT_S = 4.0  # behind stuck acceptors: 6.7 to 7.1 s (three runs), or no session at all


def connect_and_read(port):
    with manager.connect(host="127.0.0.1", port=port, username="ocsd", password="pw",
                         hostkey_verify=False, allow_agent=False, look_for_keys=False,
                         timeout=30) as m:
        m.get(filter=("subtree", f'<cross-connects xmlns="{NS}"/>'))


base = testports.reserve(DEVICES)
# its stderr (errors, and the doublings under DEVSIM_TRACE=1) goes to the test's log
proc = subprocess.Popen([DEVSIM, "--listen", f"127.0.0.1:{base}", "--count", str(DEVICES),
                         "--ports", "8", "--user", "ocsd", "--password", "pw",
                         "--switch-ms", "0"], stdout=subprocess.DEVNULL)
try:
    testports.wait_listening("127.0.0.1", base, "ocs-devsim", 30, count=DEVICES, proc=proc)
    connect_and_read(base + 3)  # the simulator works before anything stalls
    silent = [socket.create_connection(("127.0.0.1", base + k % 3)) for k in range(STALLED)]
    time.sleep(1.0)  # every first acceptor is inside a stuck handshake by now
    failures = 0
    for device in (3, 0):
        began = time.time()
        try:
            connect_and_read(base + device)
            error = None
        except Exception as e:  # ncclient's SSHError, a timeout: the session never came
            error = e
        took = time.time() - began
        ok = error is None and took <= LIMIT_S
        failures += not ok
        print(f"device {device}: " + (f"no session after {took:.2f} s: {error!r}" if error else
                                      f"connected and read in {took:.2f} s")
              + f" beside {STALLED} stuck handshakes ({'ok' if ok else 'FAIL'})", flush=True)
    for s in silent:
        s.close()
    if proc.poll() is not None:
        raise SystemExit(f"FAIL: ocs-devsim exited ({proc.returncode})")
    if failures:
        raise SystemExit(f"FAIL: {failures} of 2 sessions waited behind the stuck handshakes")
    print("PASS")
finally:
    proc.terminate()
    proc.wait(10)

#!/usr/bin/python3
"""test_devsim_same_port.py - ocs-devsim must never attach a session to the
wrong device when one client port talks to two devices at once.

Linux reuses an ephemeral port for different destinations, so ocsd (or a
reader) can reach device 0 and device 1 from the same local port. While a
connection to device 0 sits in its SSH handshake, a session to device 1 from
the same port completes; ocs-devsim names the device of a session by its
peer port, and used to bind the second session to device 0's socket. Every
RPC of that session then went to device 0: a cross-connect written "to
device 1" landed on device 0 (in the recovery test: a committed circuit
missing on one device, a one-way circuit).

The test holds a silent TCP connection to device 0 from port P, writes a
cross-connect to device 1 over NETCONF from the same port P, then reads both
devices on fresh sessions: device 1 must hold it and device 0 must be empty
(ocs-devsim may refuse the ambiguous session instead; then nothing may have
been written anywhere).

usage: test_devsim_same_port.py DEVSIM_BINARY
"""
import socket
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

import testports

from ncclient import manager
import ncclient.transport.ssh
from ncclient.operations.errors import TimeoutExpiredError
from ncclient.transport.errors import TransportError

ncclient.transport.ssh.TICK = 0.001
NS = "urn:ocsd:yang:ocs-switch"
CONFIG = '<config xmlns="urn:ietf:params:xml:ns:netconf:base:1.0">'
DEVSIM = sys.argv[1]


def connect(port, sock=None):
    return manager.connect(host="127.0.0.1", port=port, username="ocsd", password="pw",
                           hostkey_verify=False, allow_agent=False, look_for_keys=False,
                           timeout=10, sock=sock)


def read(port):
    with connect(port) as m:
        reply = m.get(filter=("subtree", f'<cross-connects xmlns="{NS}"/>'))
    return sorted((int(c.findtext(f"{{{NS}}}input")), int(c.findtext(f"{{{NS}}}output")))
                  for c in ET.fromstring(reply.data_xml).iter(f"{{{NS}}}connection"))


def socket_from(local_port, dest_port):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", local_port))
    s.connect(("127.0.0.1", dest_port))
    return s


base = testports.reserve(2)
local_ports = testports.reserve(5)  # one client port per attempt
if True:
    proc = subprocess.Popen([DEVSIM, "--listen", f"127.0.0.1:{base}", "--count", "2",
                             "--ports", "8", "--user", "ocsd", "--password", "pw",
                             "--switch-ms", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        line = proc.stdout.readline()
        while line and not line.startswith("ready"):
            line = proc.stdout.readline()
        if not line:
            raise SystemExit("FAIL: ocs-devsim did not start")
        testports.wait_listening("127.0.0.1", base, "ocs-devsim", 30, count=2, proc=proc)
        failures = 0
        for attempt in range(5):
            local = local_ports + attempt
            silent = socket_from(local, base)  # device 0, stays in the handshake
            time.sleep(0.2)
            written = False
            try:
                with connect(base + 1, socket_from(local, base + 1)) as m:
                    m.timeout = 2
                    m.edit_config(target="candidate", config=(
                        CONFIG + f'<cross-connects xmlns="{NS}">'
                        '<connection><input>0</input><output>1</output></connection>'
                        '<connection><input>1</input><output>0</output></connection>'
                        '</cross-connects></config>'))
                    m.commit()
                    written = True
            except (TransportError, TimeoutExpiredError) as e:
                # a refused session is allowed: closed before any RPC ran
                print(f"attempt {attempt}: session to device 1 refused: {e!r}")
            silent.close()
            d0, d1 = read(base), read(base + 1)
            want1 = [(0, 1), (1, 0)] if written else []
            ok = d0 == [] and d1 == want1
            print(f"attempt {attempt}: written={written} device0={d0} device1={d1} "
                  f"{'ok' if ok else 'WRONG DEVICE'}")
            failures += not ok
            if d1:
                with connect(base + 1) as m:
                    m.edit_config(target="candidate", default_operation="replace", config=(
                        CONFIG + f'<cross-connects xmlns="{NS}"/></config>'))
                    m.commit()
            if d0:
                with connect(base) as m:
                    m.edit_config(target="candidate", default_operation="replace", config=(
                        CONFIG + f'<cross-connects xmlns="{NS}"/></config>'))
                    m.commit()
        if failures:
            raise SystemExit(f"FAIL: {failures} of 5 sessions were attached to the wrong device")
        print("PASS")
    finally:
        proc.terminate()
        proc.wait(10)

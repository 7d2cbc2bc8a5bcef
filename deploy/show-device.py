#!/usr/bin/python3
"""show-device.py - reads one OCS device's cross-connects and their state
over NETCONF with ncclient (a client nobody here wrote), as an operator
would check what ocsd programmed.

usage: show-device.py HOST PORT USER PASSWORD-FILE [--json]"""
import json
import sys
import time
import xml.etree.ElementTree as ET

from ncclient import manager
from ncclient.transport.errors import SessionCloseError, TransportError
import ncclient.transport.ssh

NS = "urn:ocsd:yang:ocs-switch"


def read(host, port, user, password):
    """The device's connections. ocs-devsim may close a session right after
    its hello when it cannot tell which device the session's socket belongs
    to; nothing was read then, so the read is tried again (3 times)."""
    ncclient.transport.ssh.TICK = 0.001  # ncclient polls every 0.1 s otherwise
    for attempt in range(3):
        try:
            with manager.connect(host=host, port=port, username=user, password=password,
                                 hostkey_verify=False, allow_agent=False, look_for_keys=False,
                                 timeout=10) as m:
                reply = m.get(filter=("subtree", f'<cross-connects xmlns="{NS}"/>'))
            break
        except (TransportError, SessionCloseError):
            if attempt == 2:
                raise
            time.sleep(0.05)
    root = ET.fromstring(reply.data_xml)
    rows = []
    for conn in root.iter(f"{{{NS}}}connection"):
        rows.append({
            "input": int(conn.findtext(f"{{{NS}}}input")),
            "output": int(conn.findtext(f"{{{NS}}}output")),
            "status": conn.findtext(f"{{{NS}}}status") or "",
        })
    return sorted(rows, key=lambda r: r["input"])


def main():
    if len(sys.argv) < 5:
        print(__doc__, file=sys.stderr)
        return 2
    host, port, user = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    with open(sys.argv[4]) as f:
        password = f.readline().strip()
    rows = read(host, port, user, password)
    if "--json" in sys.argv:
        print(json.dumps(rows))
        return 0
    print(f"{'INPUT':>5}  {'OUTPUT':>6}  STATUS")
    for r in rows:
        print(f"{r['input']:>5}  {r['output']:>6}  {r['status']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

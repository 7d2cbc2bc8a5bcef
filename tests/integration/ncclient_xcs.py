#!/usr/bin/python3
"""A reader of cross-connects nobody here wrote: python3-ncclient reads the
running datastore of ocs-devsim devices for a C test (test_sb_txn_polatis.c),
so that what the driver reads back is confirmed by another client.

It serves requests on stdin, one a line, and answers each on stdout with one
line (flushed):
  MODEL PORT   ->  "ok A:B C:D ..." (the device's own ids, in document order)
                   or "err WHY"
MODEL is "ocs-switch" (connection input:output) or "polatis" (pair
ingress:egress, as the device numbers its ports: the caller maps them). One
session per device is kept open between requests, and opened again (up to 8
tries, backing off from 50 ms) when it is gone: a test's faults drop
sessions, and ocs-devsim closes a session it cannot place right after its
hello (southbound/devsim/README.md).

usage: ncclient_xcs.py USER PASSWORD
"""
import sys
import time
import xml.etree.ElementTree as ET

import ncclient.transport.ssh
from ncclient import manager
from ncclient.operations.errors import TimeoutExpiredError
from ncclient.operations.rpc import RPCError
from ncclient.transport.errors import SessionCloseError, TransportError

ncclient.transport.ssh.TICK = 0.001  # ncclient polls every 0.1 s otherwise

MODELS = {
    "ocs-switch": ("urn:ocsd:yang:ocs-switch", "connection", "input", "output"),
    "polatis": ("http://www.polatis.com/yang/optical-switch", "pair", "ingress", "egress"),
}


def read(sessions, user, password, model, port):
    ns, entry, a, b = MODELS[model]
    flt = ("subtree", '<cross-connects xmlns="%s"/>' % ns)
    for attempt in range(8):
        try:
            m = sessions.get(port)
            if m is None or not m.connected:
                m = manager.connect(host="127.0.0.1", port=port, username=user,
                                    password=password, hostkey_verify=False,
                                    allow_agent=False, look_for_keys=False, timeout=10)
                m.timeout = 10
                sessions[port] = m
            reply = m.get_config(source="running", filter=flt)
            root = ET.fromstring(reply.data_xml)
            return "ok" + "".join(" %d:%d" % (int(e.findtext("{%s}%s" % (ns, a))),
                                              int(e.findtext("{%s}%s" % (ns, b))))
                                  for e in root.iter("{%s}%s" % (ns, entry)))
        except (TransportError, SessionCloseError, TimeoutExpiredError, RPCError, OSError) as e:
            sessions.pop(port, None)
            if attempt == 7:
                return "err %s: %s" % (type(e).__name__, str(e).replace("\n", " "))
            time.sleep(min(0.05 * 2 ** attempt, 0.5))
    return "err unreachable"


def main():
    user, password = sys.argv[1], sys.argv[2]
    sessions = {}
    for line in sys.stdin:
        words = line.split()
        if len(words) != 2 or words[0] not in MODELS:
            print("err bad request %r" % line.strip(), flush=True)
            continue
        print(read(sessions, user, password, words[0], int(words[1])), flush=True)
    for m in sessions.values():
        try:
            m.close_session()
        except Exception:  # noqa: BLE001 - the device may be gone: nothing to close
            pass


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""Interop: python3-ncclient (a NETCONF client nobody here wrote) against
ocs-devsim transceiver agents (--model ocs-transceiver --count 4, an open
line of nodes 0..3, K = 2): it edits the bundles of two nodes into a ring,
reads back peer-node and path status, receives node-fault and
loss-of-light after create-subscription when the node-fault knob fails a
node, sees the device refuse a path beyond K with an error path naming the
leaf, and receives node-fault (faulty=false) when the node heals.

usage: test_devsim_trx_ncclient.py PATH-TO-ocs-devsim
"""
import os
import subprocess
import sys
import time

import ncclient.transport.ssh
from ncclient import manager
from ncclient.operations.rpc import RPCError
from ncclient.xml_ import to_ele

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import testports  # noqa: E402

ncclient.transport.ssh.TICK = 0.001  # ncclient polls every 0.1 s by default (TOOLCHAIN.md)

TRX = "urn:ocsd:yang:ocs-transceiver"
NC = "urn:ietf:params:xml:ns:netconf:base:1.0"
DEVSIM = "urn:ocsd:yang:ocs-devsim"
USER, PASSWORD = "ocs", "interop-test"
NODES = 4


def start_devsim(path):
    port = testports.reserve(NODES)
    proc = subprocess.Popen(
        [path, "--listen", "127.0.0.1:%d" % port, "--user", USER, "--password", PASSWORD,
         "--model", "ocs-transceiver", "--count", str(NODES), "--ring-k", "2",
         "--switch-us", "300"], stdout=subprocess.PIPE, text=True)
    for line in proc.stdout:
        if line.startswith("ready "):
            testports.wait_listening("127.0.0.1", port, "ocs-devsim", 30, proc=proc,
                                     count=NODES)
            return proc, port
    proc.wait()
    sys.exit("ocs-devsim did not start on port %d (exit status %d)" % (port, proc.returncode))


def connect(port):
    return manager.connect(host="127.0.0.1", port=port, username=USER, password=PASSWORD,
                           hostkey_verify=False, allow_agent=False, look_for_keys=False,
                           timeout=10)


def bundle_xml(bid, distance=None, direction=None):
    if distance is None:
        return "<bundle><id>%d</id><path>loopback</path></bundle>" % bid
    return ("<bundle><id>%d</id><path>external</path><external><distance>%d</distance>"
            "<direction>%s</direction></external></bundle>" % (bid, distance, direction))


def program(m, node, *bundles):
    cfg = ('<nc:config xmlns:nc="%s"><transceivers xmlns="%s"><node nc:operation="replace">'
           '<id>%d</id>%s</node></transceivers></nc:config>' % (NC, TRX, node, "".join(bundles)))
    with m.locked("candidate"):
        m.edit_config(target="candidate", config=cfg)
        m.validate(source="candidate")
        m.commit()


def read(m):
    """(faulty, {bundle: (peer-node or None, status)}) from <get>."""
    r = m.get(filter=("subtree", '<transceivers xmlns="%s"/>' % TRX))
    node = next(r.data_ele.iter("{%s}node" % TRX))
    out = {}
    for b in node.iter("{%s}bundle" % TRX):
        st = b.find("{%s}path-status" % TRX)
        peer = b.findtext("{%s}peer-node" % TRX)
        out[int(b.findtext("{%s}id" % TRX))] = (int(peer) if peer else None,
                                                st.findtext("{%s}status" % TRX))
    return node.findtext("{%s}faulty" % TRX) == "true", out


def settled(m, want_faulty, want):
    deadline = time.time() + 5
    while True:
        got = read(m)
        if got == (want_faulty, want) or time.time() > deadline:
            assert got == (want_faulty, want), "got %r, expected %r" % (got, (want_faulty, want))
            return
        time.sleep(0.01)


def set_faults(m, spec):
    m.dispatch(to_ele('<set-faults xmlns="%s"><spec>%s</spec></set-faults>' % (DEVSIM, spec)))


def notification(m, name):
    n = m.take_notification(timeout=5)
    assert n is not None, "no %s notification within 5 s" % name
    x = n.notification_ele
    ev = next(e for e in x if e.tag.startswith("{%s}" % TRX))
    assert ev.tag == "{%s}%s" % (TRX, name), ev.tag
    return {c.tag.split("}")[1]: c.text for c in ev}


def main():
    proc, port = start_devsim(sys.argv[1])
    try:
        m = [connect(port + i) for i in range(NODES)]
        # a YANG 1.1 module is in the yang-library, not the <hello>: ask for it
        text = m[0].get_schema("ocs-transceiver").data
        assert 'namespace "%s"' % TRX in text and "revision 2026-11-24" in text

        # a ring 0 - 1 - 3: node 1's neighbours are at distances 1 (down) and 2 (up)
        program(m[0], 0, bundle_xml(0), bundle_xml(1, 1, "up"))
        program(m[1], 1, bundle_xml(0, 1, "down"), bundle_xml(1, 2, "up"))
        program(m[3], 3, bundle_xml(0, 2, "down"), bundle_xml(1))
        settled(m[0], False, {0: (None, "active"), 1: (1, "active")})
        settled(m[1], False, {0: (0, "active"), 1: (3, "active")})
        settled(m[3], False, {0: (1, "active"), 1: (None, "active")})

        # the device refuses a path beyond K, its error path naming the leaf
        try:
            program(m[0], 0, bundle_xml(0), bundle_xml(1, 3, "up"))
            raise AssertionError("distance 3 > K accepted")
        except RPCError as e:
            errors = getattr(e, "errors", None) or [e]
            assert any("beyond the domain's K" in (x.message or "") for x in errors), str(e)
            assert any("external/distance" in (x.path or "") for x in errors), \
                [x.path for x in errors]
        m[0].discard_changes()

        # subscribe on the faulty node's agent and on its peers' agents
        for i in (0, 1, 3):
            m[i].create_subscription()
        set_faults(m[1], "node-fault")
        ev = notification(m[1], "node-fault")
        assert ev == {"node": "1", "faulty": "true"}, ev
        ev = notification(m[0], "loss-of-light")
        assert ev == {"node": "0", "bundle": "1"}, ev
        ev = notification(m[3], "loss-of-light")
        assert ev == {"node": "3", "bundle": "0"}, ev
        settled(m[0], False, {0: (None, "active"), 1: (1, "failed")})
        faulty, _ = read(m[1])
        assert faulty

        # healing: node-fault faulty=false, the peers' paths active again
        set_faults(m[1], "")
        ev = notification(m[1], "node-fault")
        assert ev == {"node": "1", "faulty": "false"}, ev
        settled(m[0], False, {0: (None, "active"), 1: (1, "active")})
        settled(m[3], False, {0: (1, "active"), 1: (None, "active")})
        for x in m:
            x.close_session()
        print("ncclient transceiver interop: all checks passed")
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    return 0 if proc.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

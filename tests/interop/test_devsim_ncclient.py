#!/usr/bin/python3
"""Interop: python3-ncclient (a NETCONF client nobody here wrote) drives
ocs-devsim through a full cycle: capabilities, lock, edit-config, validate,
confirmed commit with persist, state read-back (pending -> connected),
confirm with persist-id, confirmed commit that times out and reverts,
cancel-commit, discard-changes, kill-session (lock-denied names the
holder; the killed session's lock and unconfirmed commit go with it, and
the session ends), subtree filters, get-schema, the
bidirectional refusal of a one-way circuit, a notification, and the
ocs-transceiver model (path selection settling from pending to active).

usage: test_devsim_ncclient.py PATH-TO-ocs-devsim
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

# ncclient polls its SSH channel every 0.1 s by default (TOOLCHAIN.md).
ncclient.transport.ssh.TICK = 0.001

NS = "urn:ocsd:yang:ocs-switch"
NC = "urn:ietf:params:xml:ns:netconf:base:1.0"
USER, PASSWORD = "ocs", "interop-test"


def start_devsim(path, *extra):
    port = testports.reserve(1)
    proc = subprocess.Popen(
        [path, "--listen", "127.0.0.1:%d" % port, "--user", USER, "--password",
         PASSWORD, "--ports", "8", "--switch-ms", "200"] + list(extra),
        stdout=subprocess.PIPE, text=True)
    for line in proc.stdout:
        if line.startswith("ready "):
            testports.wait_listening("127.0.0.1", port, "ocs-devsim", 30, proc=proc)
            return proc, port
    proc.wait()
    sys.exit("ocs-devsim did not start on port %d (exit status %d)" % (port, proc.returncode))


def connect(port):
    return manager.connect(host="127.0.0.1", port=port, username=USER, password=PASSWORD,
                           hostkey_verify=False, allow_agent=False, look_for_keys=False,
                           timeout=10)


def config(body):
    return ('<nc:config xmlns:nc="%s"><cross-connects xmlns="%s">%s</cross-connects>'
            '</nc:config>' % (NC, NS, body))


def xc(i, o, op=None):
    attr = ' nc:operation="%s"' % op if op else ""
    out = "" if op in ("delete", "remove") else "<output>%d</output>" % o
    return "<connection%s><input>%d</input>%s</connection>" % (attr, i, out)


def connections(reply):
    """{input: (output, status)} from a get/get-config reply."""
    res = {}
    for c in reply.data_ele.iter("{%s}connection" % NS):
        i = int(c.findtext("{%s}input" % NS))
        res[i] = (int(c.findtext("{%s}output" % NS)), c.findtext("{%s}status" % NS))
    return res


XC_FILTER = ("subtree", '<cross-connects xmlns="%s"/>' % NS)


def expect_error(fn, text):
    try:
        fn()
    except RPCError as e:
        errors = getattr(e, "errors", None) or [e]  # .errors only with several
        msgs = " ".join(err.message or "" for err in errors)
        assert text in msgs, "expected %r in %r" % (text, msgs)
        return
    raise AssertionError("expected an rpc-error containing %r" % text)


TRX = "urn:ocsd:yang:ocs-transceiver"


def transceiver_cycle(path):
    """The ocs-transceiver model: select an external path, watch it settle."""
    # the agent of node 5 (node 3, two positions below, exists)
    proc, port = start_devsim(path, "--model", "ocs-transceiver", "--node-base", "5")
    try:
        m = connect(port)
        cfg = ('<nc:config xmlns:nc="%s"><transceivers xmlns="%s"><node><id>5</id>'
               '<bundle><id>0</id><path>external</path><external><distance>2</distance>'
               '<direction>down</direction></external></bundle>'
               '<bundle><id>1</id><path>loopback</path></bundle></node></transceivers>'
               '</nc:config>' % (NC, TRX))
        with m.locked("candidate"):
            m.edit_config(target="candidate", config=cfg)
            m.commit()
        flt = ("subtree", '<transceivers xmlns="%s"/>' % TRX)

        def bundles():
            r = m.get(filter=flt)
            out = {}
            for b in r.data_ele.iter("{%s}bundle" % TRX):
                st = b.find("{%s}path-status" % TRX)
                out[int(b.findtext("{%s}id" % TRX))] = (
                    b.findtext("{%s}peer-node" % TRX), st.findtext("{%s}status" % TRX))
            return out
        got = bundles()
        # only the bundle whose path changed switches
        assert got == {0: ("3", "pending"), 1: (None, "active")}, got
        time.sleep(0.3)
        got = bundles()
        assert got == {0: ("3", "active"), 1: (None, "active")}, got
        # an external path without its peer is refused by the model
        bad = ('<nc:config xmlns:nc="%s"><transceivers xmlns="%s"><node><id>5</id>'
               '<bundle><id>2</id><path>external</path><external><distance>1</distance>'
               '</external></bundle></node></transceivers></nc:config>' % (NC, TRX))
        m.edit_config(target="candidate", config=bad)
        expect_error(lambda: m.commit(), "direction")
        m.discard_changes()
        m.close_session()
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert proc.returncode == 0


def main():
    transceiver_cycle(sys.argv[1])
    proc, port = start_devsim(sys.argv[1])
    try:
        m = connect(port)
        caps = set(m.server_capabilities)
        for cap in (":candidate:1.0", ":confirmed-commit:1.1", ":validate:1.1",
                    ":rollback-on-error:1.0"):
            assert any(c.endswith(cap) for c in caps), cap

        # full cycle: lock, edit, validate, confirmed commit (persist), read state, confirm
        with m.locked("candidate"):
            m.edit_config(target="candidate", config=config(xc(0, 1) + xc(1, 0)))
            m.validate(source="candidate")
            m.commit(confirmed=True, timeout="30", persist="ncclient-1")
        state = connections(m.get(filter=XC_FILTER))
        assert state == {0: (1, "pending"), 1: (0, "pending")}, state
        time.sleep(0.3)  # --switch-ms 200
        state = connections(m.get(filter=XC_FILTER))
        assert state == {0: (1, "connected"), 1: (0, "connected")}, state
        m2 = connect(port)  # persist: another session may confirm
        m2.commit(persist_id="ncclient-1")
        m2.close_session()

        # a confirmed commit that is never confirmed reverts after its timeout
        m.edit_config(target="candidate", config=config(xc(2, 3) + xc(3, 2)))
        m.commit(confirmed=True, timeout="1")
        assert set(connections(m.get_config(source="running"))) == {0, 1, 2, 3}
        time.sleep(1.5)
        assert set(connections(m.get_config(source="running"))) == {0, 1}

        # cancel-commit reverts at once
        m.edit_config(target="candidate", config=config(xc(4, 5) + xc(5, 4)))
        m.commit(confirmed=True, timeout="60")
        m.cancel_commit()
        assert set(connections(m.get_config(source="running"))) == {0, 1}

        # kill-session (RFC 6241 7.9): another session holds the lock and an
        # unconfirmed commit; lock-denied names it, the kill reverts the commit
        m3 = connect(port)
        m3.lock("candidate")
        m3.edit_config(target="candidate", config=config(xc(4, 5) + xc(5, 4)))
        m3.commit(confirmed=True, timeout="60")
        try:
            m.lock("candidate")
            assert False, "lock granted while another session holds it"
        except RPCError as e:
            assert e.tag == "lock-denied", e.tag
            assert str(m3.session_id) in (e.info or ""), e.info
        expect_error(lambda: m.dispatch(to_ele(
            '<kill-session xmlns="%s"><session-id>%s</session-id></kill-session>'
            % (NC, m.session_id))), "not another session")
        m.dispatch(to_ele('<kill-session xmlns="%s"><session-id>%s</session-id>'
                          '</kill-session>' % (NC, m3.session_id)))
        assert set(connections(m.get_config(source="running"))) == {0, 1}
        m.lock("candidate")
        m.unlock("candidate")
        deadline = time.time() + 10
        while m3.connected and time.time() < deadline:
            time.sleep(0.05)
        assert not m3.connected, "the killed session still runs"

        # the device refuses a one-way circuit; discard-changes drops it
        m.edit_config(target="candidate", config=config(xc(6, 7)))
        expect_error(lambda: m.commit(), "one-way circuit")
        m.discard_changes()
        assert set(connections(m.get_config(source="candidate"))) == {0, 1}

        # delete/remove/create semantics
        expect_error(lambda: m.edit_config(target="candidate", config=config(
            xc(4, 0, "delete"))), "missing")
        m.edit_config(target="candidate", config=config(xc(0, 0, "remove") + xc(1, 0, "remove")))
        m.commit()
        assert connections(m.get_config(source="running")) == {}

        # subtree filter with a content match and a selection node
        m.edit_config(target="candidate", config=config(xc(0, 1) + xc(1, 0)))
        m.commit()
        r = m.get(filter=("subtree", '<ports xmlns="%s"><port><id>1</id><oper-state/></port>'
                          '</ports>' % NS))
        ports = list(r.data_ele.iter("{%s}port" % NS))
        assert len(ports) == 1 and ports[0].findtext("{%s}oper-state" % NS) == "up"
        assert ports[0].find("{%s}input-power" % NS) is None

        # get-schema returns our module
        text = m.get_schema("ocs-switch").data
        assert 'namespace "urn:ocsd:yang:ocs-switch"' in text
        # ...and an IETF module it does not load (clients ask for the NMDA
        # ones), read from its module directory; names that are not module
        # names (a path, a bad revision) find nothing
        text = m.get_schema("ietf-netconf-nmda").data
        assert 'module ietf-netconf-nmda' in text
        for ident, rev in (("../../../etc/passwd", None), ("ietf-netconf-nmda", "../x"),
                           ("no-such-module", None)):
            try:
                m.get_schema(ident, version=rev)
                assert False, f"get-schema {ident} {rev} answered"
            except RPCError as e:
                assert "no such schema" in str(e), str(e)

        # notifications: subscribe, ask the device to emit one, receive it
        m.create_subscription()
        m.dispatch(to_ele('<emit-notification xmlns="urn:ocsd:yang:ocs-devsim">'
                          '<kind>port-state-change</kind><port>3</port></emit-notification>'))
        n = m.take_notification(timeout=5)
        assert n is not None and "port-state-change" in n.notification_xml
        m.close_session()
        print("ncclient interop: all checks passed")
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    return 0 if proc.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

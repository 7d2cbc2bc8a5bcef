#!/usr/bin/python3
"""Interop: python3-ncclient (a NETCONF client nobody here wrote) against
ocs-devsim --model polatis, two 8 x 8 devices (ingress 1..8, egress 9..16)
of the optical-switch model (southbound/yang/optical-switch.yang).

Checked: the hello offers :writable-running and RFC 5277 notifications,
no :candidate, :confirmed-commit or :validate, and the optical-switch and
polatis-switch modules at the vendor revisions; pairs edited into running
are there at once, read back with <get> and <get-config> (and deleted with
nc:operation="delete"); product-information says it is ocs-devsim, with a
serial per device; port-config lists every port 1..16 ENABLED, with label
and peer-port; the peer-port knob (at start and through set-faults) is what
both ports of an ocsd port report, unless running configures one; refused
edits (ingress out of 1..8, egress out of 9..16, a second pair onto one
egress, a good pair with a bad one) answer rpc-error with the tag and the
error-path naming the pair and leave running unchanged; refuse-port and
drop@edit work as on ocs-switch; port-set-state disables and enables;
fail-port=1 sends port-power-alarm (port-id 2, its label) to two
subscribers, shows port 2 FAILED and its light gone, and its repair sends
port-power-clear.

usage: test_devsim_polatis_ncclient.py PATH-TO-ocs-devsim
"""
import os
import subprocess
import sys

import ncclient.transport.ssh
from ncclient import manager
from ncclient.operations.rpc import RPCError
from ncclient.xml_ import to_ele

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import testports  # noqa: E402

ncclient.transport.ssh.TICK = 0.001  # ncclient polls every 0.1 s by default (TOOLCHAIN.md)

OPSW = "http://www.polatis.com/yang/optical-switch"
PLTS = "http://www.polatis.com/yang/polatis-switch"
NC = "urn:ietf:params:xml:ns:netconf:base:1.0"
DEVSIM = "urn:ocsd:yang:ocs-devsim"
USER, PASSWORD = "ocs", "polatis-interop"
N = 8


def start_devsim(path):
    port = testports.reserve(2)
    proc = subprocess.Popen(
        [path, "--listen", "127.0.0.1:%d" % port, "--user", USER, "--password", PASSWORD,
         "--model", "polatis", "--ports", str(N), "--count", "2",
         "--fault", "0/peer-port=2:pod1/gpu9"], stdout=subprocess.PIPE, text=True)
    for line in proc.stdout:
        if line.startswith("ready "):
            assert "model polatis ports %d" % N in line, line
            testports.wait_listening("127.0.0.1", port, "ocs-devsim", 30, count=2, proc=proc)
            return proc, port
    proc.wait()
    sys.exit("ocs-devsim did not start on port %d (exit status %d)" % (port, proc.returncode))


def connect(port):
    return manager.connect(host="127.0.0.1", port=port, username=USER, password=PASSWORD,
                           hostkey_verify=False, allow_agent=False, look_for_keys=False,
                           timeout=10)


def pair(i, e=None, op=None):
    attr = ' nc:operation="%s"' % op if op else ""
    egress = "" if e is None else "<egress>%d</egress>" % e
    return "<pair%s><ingress>%d</ingress>%s</pair>" % (attr, i, egress)


def edit(m, body, top="cross-connects"):
    m.edit_config(target="running", config='<nc:config xmlns:nc="%s"><%s xmlns="%s">%s</%s>'
                  '</nc:config>' % (NC, top, OPSW, body, top))


def pairs(reply):
    return {int(p.findtext("{%s}ingress" % OPSW)): int(p.findtext("{%s}egress" % OPSW))
            for p in reply.data_ele.iter("{%s}pair" % OPSW)}


XC = ("subtree", '<cross-connects xmlns="%s"/>' % OPSW)


def running_pairs(m):
    """The pairs of running, read both ways; they must agree."""
    by_get_config = pairs(m.get_config(source="running", filter=XC))
    by_get = pairs(m.get(filter=XC))
    assert by_get_config == by_get, (by_get_config, by_get)
    return by_get


def ports(m):
    """{port-id: (status, label, peer-port, power in dBm)} from one <get>."""
    r = m.get(filter='<filter xmlns="%s" type="subtree"><port-config xmlns="%s"/>'
              '<opm-power xmlns="%s"/></filter>' % (NC, OPSW, OPSW))
    power = {int(p.findtext("{%s}port-id" % OPSW)): float(p.findtext("{%s}power" % OPSW))
             for p in r.data_ele.iter("{%s}port" % OPSW) if p.find("{%s}power" % OPSW) is not None}
    res = {}
    for p in r.data_ele.iter("{%s}port" % OPSW):
        if p.find("{%s}status" % OPSW) is None:
            continue
        pid = int(p.findtext("{%s}port-id" % OPSW))
        res[pid] = (p.findtext("{%s}status" % OPSW), p.findtext("{%s}label" % OPSW),
                    p.findtext("{%s}peer-port" % OPSW), power.get(pid))
    return res


def refused(fn, tag, path=None, text=None):
    try:
        fn()
    except RPCError as e:
        assert e.tag == tag, (e.tag, tag, e.message)
        if path is not None:
            assert e.path and path in e.path, (e.path, path, e.message)
        if text is not None:
            assert e.message and text in e.message, (e.message, text)
        return e
    raise AssertionError("not refused (expected %s)" % tag)


def set_faults(m, spec):
    m.dispatch(to_ele('<set-faults xmlns="%s"><spec>%s</spec></set-faults>' % (DEVSIM, spec)))


def power_event(m):
    """The next notification, a polatis-switch one: (name, port-id, port-label)."""
    n = m.take_notification(timeout=5)
    assert n is not None, "no notification within 5 s"
    ev = next(e for e in n.notification_ele if e.tag.startswith("{%s}" % PLTS))
    return (ev.tag.split("}")[1], int(ev.findtext("{%s}port-id" % PLTS)),
            ev.findtext("{%s}port-label" % PLTS))


def check_hello(m):
    caps = list(m.server_capabilities)
    assert "urn:ietf:params:netconf:capability:writable-running:1.0" in caps, caps
    assert "urn:ietf:params:netconf:capability:notification:1.0" in caps, caps
    for absent in (":candidate", ":confirmed-commit", ":validate"):
        assert not any(c.startswith("urn:ietf:params:netconf:capability" + absent)
                       for c in caps), (absent, caps)
    assert any(c.startswith(OPSW + "?module=optical-switch&revision=2018-03-22") for c in caps)
    assert any(c.startswith(PLTS + "?module=polatis-switch&revision=2017-09-11") for c in caps)
    assert not any("ocs-switch" in c for c in caps), "a polatis device serves ocs-switch"


def check_product(m, port, other):
    f = ("subtree", '<product-information xmlns="%s"/>' % OPSW)
    info = m.get(filter=f).data_ele.find(".//{%s}product-information" % OPSW)
    manufacturer = info.findtext("{%s}manufacturer" % OPSW)
    assert "ocs-devsim" in manufacturer and "simulation" in manufacturer, manufacturer
    assert "8x8" in info.findtext("{%s}model-name" % OPSW)
    assert info.findtext("{%s}software-version" % OPSW)
    assert info.findtext("{%s}serial-number" % OPSW) == "ocs-devsim-%d" % port
    info1 = other.get(filter=f).data_ele.find(".//{%s}product-information" % OPSW)
    assert info1.findtext("{%s}serial-number" % OPSW) == "ocs-devsim-%d" % (port + 1)


def check_edits(m):
    assert running_pairs(m) == {}
    edit(m, pair(1, 9) + pair(2, 12))
    assert running_pairs(m) == {1: 9, 2: 12}  # in running at once, no commit
    p = ports(m)
    assert sorted(p) == list(range(1, 2 * N + 1)), sorted(p)
    assert all(v[0] == "ENABLED" for v in p.values()), p
    assert p[9][3] == -3.0 and p[12][3] == -3.0 and p[10][3] == -60.0, p
    assert p[1][3] == -3.0
    # the one <get> of ocsd's polatis driver: pairs and every port's status, nothing else
    r = m.get(filter='<filter xmlns="%s" type="subtree"><cross-connects xmlns="%s"/>'
              '<port-config xmlns="%s"><port><port-id/><status/></port></port-config></filter>'
              % (NC, OPSW, OPSW))
    assert pairs(r) == {1: 9, 2: 12}
    got = [(x.findtext("{%s}port-id" % OPSW), x.findtext("{%s}status" % OPSW), len(x))
           for x in r.data_ele.iter("{%s}port" % OPSW)]
    assert got == [(str(i), "ENABLED", 2) for i in range(1, 2 * N + 1)], got
    assert r.data_ele.find(".//{%s}opm-power" % OPSW) is None
    want = {1: 9, 2: 12}
    # ingress out of 1..N, egress out of N+1..2N, a second pair onto egress 9
    refused(lambda: edit(m, pair(9, 10)), "invalid-value", "pair[ingress='9']/ingress")
    refused(lambda: edit(m, pair(3, 5)), "invalid-value", "pair[ingress='3']/egress")
    refused(lambda: edit(m, pair(3, 17)), "invalid-value", "pair[ingress='3']/egress")
    refused(lambda: edit(m, pair(3, 9)), "data-exists", "pair[ingress='3']/egress",
            "ingress 1")
    # all or nothing: a good pair with a bad one changes nothing
    refused(lambda: edit(m, pair(4, 13) + pair(5, 99)), "invalid-value",
            "pair[ingress='5']/egress")
    refused(lambda: edit(m, pair(6)), "invalid-value")  # egress is mandatory
    refused(lambda: edit(m, pair(4, 13) + pair(5, 13)), "data-exists")
    assert running_pairs(m) == want
    # no candidate to lock, nothing to commit
    try:
        m.lock(target="candidate")
        raise AssertionError("a candidate lock was granted")
    except RPCError:
        pass
    try:
        m.dispatch(to_ele('<commit xmlns="%s"/>' % NC))
        raise AssertionError("commit answered")
    except RPCError:
        pass
    # a pair moves (merge), one goes (delete); lock running around it like a client would
    with m.locked("running"):
        edit(m, pair(1, 10) + pair(2, op="delete"))
    assert running_pairs(m) == {1: 10}
    edit(m, pair(1, op="delete"))
    assert running_pairs(m) == {}


def check_port_knobs(m, other):
    p = ports(m)
    # the start knob 0/peer-port=2:... names ocsd port 2: ingress 3 and egress 11
    assert p[3][2] == "pod1/gpu9" and p[11][2] == "pod1/gpu9", p
    assert all(v[2] == "" and v[1] == "" for k, v in p.items() if k not in (3, 11)), p
    assert ports(other)[3][2] == "", "the knob of device 0 reached device 1"
    # set-faults replaces the knobs; running's peer-port wins over the knob
    set_faults(m, "peer-port=0:rack2/gpu1,peer-port=5:rack3/gpu4")
    edit(m, '<port><port-id>14</port-id><peer-port>configured</peer-port></port>',
         top="port-config")
    p = ports(m)
    assert (p[1][2], p[9][2], p[6][2], p[14][2], p[3][2]) == \
        ("rack2/gpu1", "rack2/gpu1", "rack3/gpu4", "configured", ""), p
    set_faults(m, "")
    assert ports(m)[1][2] == "" and ports(m)[14][2] == "configured"
    # port-set-state: out and back in service; a port the switch lacks is refused
    edit(m, pair(2, 12))
    m.dispatch(to_ele('<port-set-state xmlns="%s"><port-disab>2</port-disab></port-set-state>'
                      % OPSW))
    p = ports(m)
    assert p[2][0] == "DISABLED" and p[12][3] == -60.0, p
    refused(lambda: m.dispatch(to_ele('<port-set-state xmlns="%s"><port-enab>2</port-enab>'
                                      '<port-enab>17</port-enab></port-set-state>' % OPSW)),
            "invalid-value", "port-enab")
    assert ports(m)[2][0] == "DISABLED", "a refused port-set-state changed a port"
    m.dispatch(to_ele('<port-set-state xmlns="%s"><port-enab>2</port-enab></port-set-state>'
                      % OPSW))
    assert ports(m)[2][0] == "ENABLED" and ports(m)[12][3] == -3.0
    # refuse-port=3: pairs touching ingress 4 or egress 12 (3 + N + 1) are refused
    set_faults(m, "refuse-port=3")
    refused(lambda: edit(m, pair(4, 13)), "operation-failed", text="refuse-port=3")
    refused(lambda: edit(m, pair(2, op="delete") + pair(5, 12)), "operation-failed",
            text="refuse-port=3")
    edit(m, pair(5, 13))  # leaves port 3 alone
    assert running_pairs(m) == {2: 12, 5: 13}
    set_faults(m, "")


def check_drop(port):
    """drop@edit: the session ends without executing the edit."""
    s = connect(port)
    set_faults(s, "drop@edit")
    try:
        edit(s, pair(7, 15))
    except Exception:  # the session went away: ncclient's error depends on timing
        pass
    m = connect(port)
    assert running_pairs(m) == {2: 12, 5: 13}, "a dropped edit was executed"
    set_faults(m, "")
    return m


def check_power_alarm(m, port):
    listener = connect(port)
    edit(m, '<port><port-id>2</port-id><label>gpu-a</label></port>', top="port-config")
    m.create_subscription()
    listener.create_subscription()
    set_faults(m, "fail-port=1")  # ocsd port 1: the light into ingress 2 is gone
    for s in (m, listener):
        assert power_event(s) == ("port-power-alarm", 2, "gpu-a")
    p = ports(m)
    assert p[2][0] == "FAILED" and p[2][3] == -60.0 and p[12][3] == -60.0, p
    assert p[2][1] == "gpu-a" and p[5][0] == "ENABLED" and p[13][3] == -3.0, p
    set_faults(m, "")
    for s in (m, listener):
        assert power_event(s) == ("port-power-clear", 2, "gpu-a")
    p = ports(m)
    assert p[2][0] == "ENABLED" and p[12][3] == -3.0, p
    # nothing else was sent: the marker below is the next notification
    m.dispatch(to_ele('<emit-notification xmlns="%s"><kind>port-state-change</kind>'
                      '<port>6</port></emit-notification>' % DEVSIM))
    assert power_event(m) == ("port-power-clear", 7, "")
    listener.close_session()


def main():
    proc, port = start_devsim(sys.argv[1])
    try:
        m = connect(port)
        other = connect(port + 1)
        check_hello(m)
        check_product(m, port, other)
        check_edits(m)
        check_port_knobs(m, other)
        m.close_session()
        m = check_drop(port)
        check_power_alarm(m, port)
        assert running_pairs(other) == {}, "device 1 saw device 0's edits"
        m.close_session()
        other.close_session()
        print("ncclient polatis interop: all checks passed")
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    return 0 if proc.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

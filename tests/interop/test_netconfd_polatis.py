#!/usr/bin/python3
"""Driver of test_netconfd_polatis.sh: python3-ncclient against netconfd
(yuma123) loaded with ocsd's optical-switch and polatis-switch modules,
writable running and no candidate, as a Polatis switch offers.

Checked: the hello offers :writable-running and no :candidate, and lists
both modules at the vendor revisions; pairs edited into running as the
ocsd polatis driver writes them (merge, then nc:operation="delete") read
back with <get-config> and <get> (subtree filter on cross-connects), and a
port-config entry with label and peer-port reads back too; a pair without
its mandatory egress and an ingress outside portFormat's 1..65535 are
refused by netconfd itself and leave running unchanged.

usage: test_netconfd_polatis.py PORT USER PRIVATE-KEY
"""
import sys

import ncclient.transport.ssh
from ncclient import manager
from ncclient.operations.rpc import RPCError

ncclient.transport.ssh.TICK = 0.001  # ncclient polls every 0.1 s by default (TOOLCHAIN.md)

OPSW = "http://www.polatis.com/yang/optical-switch"
PLTS = "http://www.polatis.com/yang/polatis-switch"
NC = "urn:ietf:params:xml:ns:netconf:base:1.0"
XC = ("subtree", '<cross-connects xmlns="%s"/>' % OPSW)


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


def running_pairs(m):
    by_get_config = pairs(m.get_config(source="running", filter=XC))
    by_get = pairs(m.get(filter=XC))
    assert by_get_config == by_get, (by_get_config, by_get)
    return by_get


def refused(fn):
    try:
        fn()
    except RPCError as e:
        return e
    raise AssertionError("netconfd accepted an edit it must refuse")


def main():
    port, user, key = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    m = manager.connect(host="127.0.0.1", port=port, username=user, key_filename=key,
                        hostkey_verify=False, allow_agent=False, look_for_keys=False,
                        timeout=20)
    caps = list(m.server_capabilities)
    assert "urn:ietf:params:netconf:capability:writable-running:1.0" in caps, caps
    assert not any(c.startswith("urn:ietf:params:netconf:capability:candidate") for c in caps)
    assert any(c.startswith(OPSW + "?") and "module=optical-switch" in c and
               "revision=2018-03-22" in c for c in caps), caps
    assert any(c.startswith(PLTS + "?") and "module=polatis-switch" in c and
               "revision=2017-09-11" in c for c in caps), caps

    assert running_pairs(m) == {}
    # what ocsd's polatis driver writes: pairs merged into running
    edit(m, pair(1, 17) + pair(2, 18) + pair(3, 20))
    assert running_pairs(m) == {1: 17, 2: 18, 3: 20}
    edit(m, pair(2, op="delete") + pair(4, 19))
    assert running_pairs(m) == {1: 17, 3: 20, 4: 19}
    edit(m, "<port><port-id>17</port-id><label>gpu-7</label><peer-port>pod0/gpu7</peer-port>"
         "</port>", top="port-config")
    r = m.get_config(source="running", filter=("subtree", '<port-config xmlns="%s"/>' % OPSW))
    got = [(p.findtext("{%s}port-id" % OPSW), p.findtext("{%s}label" % OPSW),
            p.findtext("{%s}peer-port" % OPSW)) for p in r.data_ele.iter("{%s}port" % OPSW)]
    assert got == [("17", "gpu-7", "pod0/gpu7")], got

    # the module's own constraints, enforced by a server nobody here wrote
    refused(lambda: edit(m, pair(5)))        # egress is mandatory
    refused(lambda: edit(m, pair(0, 21)))    # portFormat is 1..65535
    assert running_pairs(m) == {1: 17, 3: 20, 4: 19}
    edit(m, pair(1, op="delete") + pair(3, op="delete") + pair(4, op="delete"))
    assert running_pairs(m) == {}
    m.close_session()
    print("netconfd polatis interop: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""Interop: python3-ncclient (a NETCONF client nobody here wrote) against an
ocs-switch ocs-devsim standing in for a rail OCS (issue 12), started with
--password-file (issue 14 #17).

The password: the file's first line logs in, another password is refused,
the password is nowhere on the simulator's command line (what `ps` shows),
and a missing or empty file stops the simulator with exit status 2 naming
--password-file.

The GPU fault: GPU-side ports 0 and 1 are joined to rail-switch ports 4 and
5 (two one-way cross-connects each, as ocsd programs a rail OCS). Two
sessions subscribe; set-faults fail-port=0 (the GPU behind port 0 lost
light) sends port-state-change (port 0, failed) to both, and the state
shows port 0 failed and both connections of its join failed, naming the
port, while the other join stays connected; clearing the knob sends
port-state-change (port 0, up) to both and the join is connected again.

usage: test_devsim_gpu_fault_ncclient.py PATH-TO-ocs-devsim
"""
import os
import subprocess
import sys
import tempfile
import time

import ncclient.transport.ssh
from ncclient import manager
from ncclient.transport.errors import AuthenticationError
from ncclient.xml_ import to_ele

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import testports  # noqa: E402

ncclient.transport.ssh.TICK = 0.001  # ncclient polls every 0.1 s by default (TOOLCHAIN.md)

NS = "urn:ocsd:yang:ocs-switch"
NC = "urn:ietf:params:xml:ns:netconf:base:1.0"
DEVSIM = "urn:ocsd:yang:ocs-devsim"
USER = "ocs"


def start_devsim(path, pw_file):
    port = testports.reserve(1)
    proc = subprocess.Popen(
        [path, "--listen", "127.0.0.1:%d" % port, "--user", USER, "--password-file", pw_file,
         "--ports", "8", "--switch-ms", "25"], stdout=subprocess.PIPE, text=True)
    for line in proc.stdout:
        if line.startswith("ready "):
            testports.wait_listening("127.0.0.1", port, "ocs-devsim", 30, proc=proc)
            return proc, port
    proc.wait()
    sys.exit("ocs-devsim did not start on port %d (exit status %d)" % (port, proc.returncode))


def connect(port, password):
    return manager.connect(host="127.0.0.1", port=port, username=USER, password=password,
                           hostkey_verify=False, allow_agent=False, look_for_keys=False,
                           timeout=10)


def check_refused_files(path, work):
    """A missing and an empty password file: exit status 2, the option named."""
    empty = os.path.join(work, "empty")
    open(empty, "w").close()
    for pw_file, why in ((os.path.join(work, "missing"), "No such file"),
                         (empty, "the first line is empty")):
        r = subprocess.run([path, "--listen", "127.0.0.1:1", "--user", USER,
                            "--password-file", pw_file], capture_output=True, text=True,
                           timeout=30)
        assert r.returncode == 2, (pw_file, r.returncode, r.stderr)
        assert "--password-file" in r.stderr and why in r.stderr, r.stderr


def join(gpu, rail):
    """A rail OCS join: the two one-way cross-connects gpu -> rail and rail -> gpu."""
    return ("<connection><input>%d</input><output>%d</output></connection>"
            "<connection><input>%d</input><output>%d</output></connection>"
            % (gpu, rail, rail, gpu))


def program(m, body):
    cfg = ('<nc:config xmlns:nc="%s"><cross-connects xmlns="%s">%s</cross-connects>'
           '</nc:config>' % (NC, NS, body))
    with m.locked("candidate"):
        m.edit_config(target="candidate", config=cfg)
        m.commit()


def state(m):
    """({port: oper-state}, {input: (status, reason)}) from <get>."""
    r = m.get()
    ports = {int(p.findtext("{%s}id" % NS)): p.findtext("{%s}oper-state" % NS)
             for p in r.data_ele.iter("{%s}port" % NS)}
    conns = {int(c.findtext("{%s}input" % NS)): (c.findtext("{%s}status" % NS),
                                                  c.findtext("{%s}reason" % NS))
             for c in r.data_ele.iter("{%s}connection" % NS)}
    return ports, conns


def settled(m, port0, conn_status, reason=None):
    """Waits (switch time) until port 0 and the join 0 <-> 4 are as given, join 1 <-> 5 connected."""
    deadline = time.time() + 5
    while True:
        ports, conns = state(m)
        want = ({0: port0, 1: "up"}, {0: (conn_status, reason), 4: (conn_status, reason),
                                      1: ("connected", None), 5: ("connected", None)})
        got = ({0: ports[0], 1: ports[1]}, {k: conns[k] for k in (0, 4, 1, 5)})
        if got == want:
            return
        assert time.time() < deadline, "got %r, expected %r" % (got, want)
        time.sleep(0.01)


def set_faults(m, spec):
    m.dispatch(to_ele('<set-faults xmlns="%s"><spec>%s</spec></set-faults>' % (DEVSIM, spec)))


def port_state_change(m):
    """The next notification, which must be ocs-switch port-state-change: (port, oper-state)."""
    n = m.take_notification(timeout=5)
    assert n is not None, "no port-state-change within 5 s"
    ev = next(e for e in n.notification_ele if e.tag.startswith("{%s}" % NS))
    assert ev.tag == "{%s}port-state-change" % NS, ev.tag
    return int(ev.findtext("{%s}port" % NS)), ev.findtext("{%s}oper-state" % NS)


def main():
    path = sys.argv[1]
    work = tempfile.mkdtemp(prefix="devsim-gpu-fault-")
    password = "gpu-fault-" + os.urandom(6).hex()
    pw_file = os.path.join(work, "pw")
    fd = os.open(pw_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, (password + "\n").encode())
    os.close(fd)
    check_refused_files(path, work)
    proc, port = start_devsim(path, pw_file)
    try:
        with open("/proc/%d/cmdline" % proc.pid, "rb") as f:
            assert password.encode() not in f.read(), "the password is on the command line"
        try:
            connect(port, password + "-wrong").close_session()
            assert False, "a wrong password logged in"
        except AuthenticationError:
            pass
        m = connect(port, password)
        listener = connect(port, password)
        program(m, join(0, 4) + join(1, 5))
        settled(m, "up", "connected")
        m.create_subscription()
        listener.create_subscription()

        set_faults(m, "fail-port=0")  # the GPU behind port 0 lost light
        for s in (m, listener):
            assert port_state_change(s) == (0, "failed")
        settled(m, "failed", "failed", "port 0 failed")

        set_faults(m, "")  # light is back
        for s in (m, listener):
            assert port_state_change(s) == (0, "up")
        settled(m, "up", "connected")
        # nothing else was sent: a marker is the next notification
        m.dispatch(to_ele('<emit-notification xmlns="%s"><kind>port-state-change</kind>'
                          '<port>7</port></emit-notification>' % DEVSIM))
        assert port_state_change(m) == (7, "up")
        m.close_session()
        listener.close_session()
        print("ncclient GPU-fault interop: all checks passed")
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        for name in ("pw", "empty"):
            os.unlink(os.path.join(work, name))
        os.rmdir(work)
    return 0 if proc.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""testports.py - the one place where tests choose TCP ports, and check that
a server they started really listens.

Every test that starts a server on a fixed loopback port (ocs-devsim fleets,
sshd + netconfd, prometheus, a client bound to a given local port) takes its
ports from here: the Python tests import it, the shell tests and the C tests
(tests/integration/sb_testlib.c) run it as a command. Servers that can bind
port 0 and report the port they got (ocsd, nb_test_server) do that instead,
and only use wait_listening().

Why: ports drawn at random from 20000-60000 overlapped the kernel's ephemeral
range (net.ipv4.ip_local_port_range, usually 32768-60999), so any outgoing
connection on the machine could take a test server's port between the check
and the bind. Ports handed out here lie outside that range (read from /proc,
not assumed), from POOL_LOW upwards, so the kernel never gives them to an
outgoing connection.

Concurrent tests (ctest -j, two checkouts on one machine) never get the same
ports: the pool is cut into blocks of BLOCK ports, and a reservation writes
one lock file per block in LOCK_DIR naming its owner process (pid and start
time). Reservations are made under an flock of the directory, so two
processes never take the same block. A block stays reserved until its owner
exits (the in-process API also removes its files at exit); a later
reservation reclaims the blocks of owners that are gone. A block some other
program already uses (a port that cannot be bound) is skipped.

Python:
    base = testports.reserve(16)            # ports base .. base+15
    testports.wait_listening("127.0.0.1", base, "ocs-devsim", count=16, proc=p)

Command line (owner defaults to the calling process, the parent):
    testports.py reserve [--count N] [--owner PID]      prints the first port
    testports.py wait --name NAME [--timeout S] [--pid PID] HOST PORT [COUNT]
    testports.py release [--owner PID]                   drops the owner's blocks
Exit codes: 0 ok, 1 no port free / server never listened (the reason is
printed on stderr), 2 usage.
"""
import argparse
import atexit
import fcntl
import os
import random
import socket
import sys
import time

BLOCK = 16
POOL_LOW = 20000  # above the quickstart lab (18300..18315) and NETCONF's 830
LOCK_DIR = os.environ.get("OCSD_TEST_PORT_DIR", "/tmp/ocsd-test-ports-%d" % os.getuid())
EPHEMERAL_FILE = "/proc/sys/net/ipv4/ip_local_port_range"

_mine = []  # lock files this process wrote through reserve(); removed at exit


def ephemeral_range():
    """(low, high) of the kernel's ephemeral ports, both included."""
    with open(EPHEMERAL_FILE) as f:
        low, high = (int(x) for x in f.read().split())
    return low, high


def pool_bases(count):
    """Every block-aligned first port of a run of `count` ports that lies
    entirely outside the ephemeral range, lowest first."""
    low, high = ephemeral_range()
    bases = []
    for start, end in ((POOL_LOW, low - 1), (max(POOL_LOW, high + 1), 65535)):
        first = start + (-(start - POOL_LOW)) % BLOCK
        bases.extend(range(first, end - count + 2, BLOCK))
    return bases


def _start_time(pid):
    """The process's start time in clock ticks (field 22 of /proc/PID/stat),
    or None when there is no such process or it has exited (a zombie)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    return None if fields[0] in ("Z", "X") else int(fields[19])


def _owner_alive(text):
    try:
        pid, start = (int(x) for x in text.split())
    except ValueError:
        return False  # torn or foreign file: treat as free
    return _start_time(pid) == start


def _bindable(port):
    """True when a listener could bind 127.0.0.1:port now (SO_REUSEADDR, as
    servers set it, so a TIME_WAIT left by an earlier test does not count)."""
    s = socket.socket()
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def _lock_path(block_base):
    return os.path.join(LOCK_DIR, "%d.lock" % block_base)


def _block_free(block_base):
    try:
        with open(_lock_path(block_base)) as f:
            return not _owner_alive(f.read())
    except FileNotFoundError:
        return True


def reserve(count=1, owner=None):
    """Reserves `count` consecutive loopback ports outside the ephemeral
    range for process `owner` (default: this process, whose blocks are
    released at exit) and returns the first. Raises RuntimeError naming the
    range searched when none is free."""
    if not 1 <= count <= 4096:
        raise ValueError("count %d outside 1..4096" % count)
    in_process = owner is None
    owner = os.getpid() if in_process else owner
    start = _start_time(owner)
    if start is None:
        raise RuntimeError("owner process %d does not exist" % owner)
    os.makedirs(LOCK_DIR, exist_ok=True)
    bases = pool_bases(count)
    if not bases:
        raise RuntimeError("no room for %d test ports between %d and 65535 outside the "
                           "ephemeral range %d-%d" % ((count, POOL_LOW) + ephemeral_range()))
    # A random first candidate: successive tests do not reuse the ports just freed.
    first = random.randrange(len(bases))
    dir_fd = os.open(LOCK_DIR, os.O_RDONLY)
    try:
        fcntl.flock(dir_fd, fcntl.LOCK_EX)
        for base in bases[first:] + bases[:first]:
            blocks = range(base, base + count, BLOCK)
            if not all(_block_free(b) for b in blocks):
                continue
            if not all(_bindable(p) for p in range(base, base + count)):
                continue
            for b in blocks:
                path = _lock_path(b)
                with open(path + ".new", "w") as f:
                    f.write("%d %d\n" % (owner, start))
                os.replace(path + ".new", path)
                if in_process:
                    _mine.append(path)
            return base
    finally:
        os.close(dir_fd)  # also drops the flock
    raise RuntimeError("no %d free consecutive test ports outside the ephemeral range %d-%d "
                       "(%s holds the reservations)" % ((count,) + ephemeral_range() + (LOCK_DIR,)))


def release(owner):
    """Removes every reservation of process `owner`."""
    mark = "%d %s\n" % (owner, _start_time(owner))
    try:
        names = os.listdir(LOCK_DIR)
    except FileNotFoundError:
        return
    for name in names:
        path = os.path.join(LOCK_DIR, name)
        try:
            with open(path) as f:
                if f.read() == mark:
                    os.unlink(path)
        except OSError:
            pass


@atexit.register
def _release_mine():
    for path in _mine:
        try:
            os.unlink(path)
        except OSError:
            pass


def wait_listening(host, port, name, timeout_s=30, count=1, proc=None, pid=None):
    """Returns once each of ports port .. port+count-1 on host accepts a TCP
    connection. Raises RuntimeError naming the server and the port when the
    deadline passes first, or when the server's process (a subprocess.Popen
    `proc`, or a child or other process `pid`) is gone before it listens."""
    deadline = time.monotonic() + timeout_s
    for p in range(port, port + count):
        while True:
            try:
                socket.create_connection((host, p), timeout=1).close()
                break
            except OSError as e:
                err = e
            gone = None
            if proc is not None and proc.poll() is not None:
                gone = "exited with status %d" % proc.returncode
            elif pid is not None and _start_time(pid) is None:
                gone = "(pid %d) is gone" % pid
            if gone:
                raise RuntimeError("%s %s before listening on %s:%d" % (name, gone, host, p))
            if time.monotonic() > deadline:
                raise RuntimeError("%s is not listening on %s:%d after %g s (last error: %s)"
                                   % (name, host, p, timeout_s, err.strerror or err))
            time.sleep(0.02)


def main(argv):
    ap = argparse.ArgumentParser(prog="testports.py", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("reserve", help="reserve consecutive ports, print the first")
    r.add_argument("--count", type=int, default=1)
    r.add_argument("--owner", type=int, default=os.getppid(),
                   help="process that holds the ports (default: the caller)")
    w = sub.add_parser("wait", help="wait until a server listens")
    w.add_argument("--name", required=True, help="server name for the error message")
    w.add_argument("--timeout", type=float, default=30)
    w.add_argument("--pid", type=int, help="fail early when this process is gone (0: none)")
    w.add_argument("host")
    w.add_argument("port", type=int)
    w.add_argument("count", type=int, nargs="?", default=1)
    rel = sub.add_parser("release", help="drop the reservations of a process")
    rel.add_argument("--owner", type=int, default=os.getppid())
    a = ap.parse_args(argv)
    try:
        if a.cmd == "reserve":
            print(reserve(a.count, a.owner))
        elif a.cmd == "wait":
            wait_listening(a.host, a.port, a.name, a.timeout, a.count, pid=a.pid or None)
        else:
            release(a.owner)
    except (RuntimeError, ValueError) as e:
        print("testports: %s" % e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

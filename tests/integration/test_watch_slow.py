#!/usr/bin/python3
"""test_watch_slow.py - Events.Watch streams that never read cannot grow the
server's memory, slow its writers or its other clients (issue 14 #4).

nb_test_server (the real northbound library) is started insecure on
loopback with a per-stream queue of 256 events (1,024 under ASan) and a cap of 600 streams.
python3-grpcio clients then
  - open 8 connections x 60 Watch streams that read their first event and
    then nothing (no BDP probing, so each stream's window holds up to 2,340
    events), and publish 1.5 times what a window and the queue hold, in
    floods of 50 job events (PlanJob "flood-50"): every slow stream is
    ended with RESOURCE_EXHAUSTED "watch: client too slow ..." (a sample is
    read to its end), the server's RSS (from /proc) grows less than 64 MB during
    the flood and is back within 8 MB of its baseline once the slow streams
    were ended (their clients still connected and not reading) and once the
    clients are gone;
  - meanwhile a fast watcher gets every event without a gap, publishing 50
    events takes (median) at most 4x + 20 ms what it takes with no slow
    stream, and a plain RPC (GetFabric) keeps a p99 under 1 s (a loaded CI machine);
  - the cap: with 600 streams open the next Watch is refused with
    RESOURCE_EXHAUSTED "watch: 600 streams open ...", and once streams
    close a new Watch is served again.

usage: test_watch_slow.py NB_TEST_SERVER PROTO_DIR
"""
import atexit
import os
import select
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import grpc

SERVER, PROTO_DIR = sys.argv[1:3]
del sys.argv[1:3]

WORK = tempfile.mkdtemp(prefix="watch_slow_")
atexit.register(shutil.rmtree, WORK, ignore_errors=True)
GEN = os.path.join(WORK, "gen")
os.makedirs(GEN)
subprocess.run(
    [sys.executable, "-m", "grpc_tools.protoc", "-I" + PROTO_DIR, "--python_out=" + GEN,
     "--grpc_python_out=" + GEN, "ocs/v1/fabric.proto", "ocs/v1/jobs.proto",
     "ocs/v1/events.proto"], check=True)
sys.path.insert(0, GEN)
from ocs.v1 import events_pb2, events_pb2_grpc  # noqa: E402
from ocs.v1 import fabric_pb2, fabric_pb2_grpc  # noqa: E402
from ocs.v1 import jobs_pb2, jobs_pb2_grpc  # noqa: E402

TIMEOUT_S = 10
# Under ASan the server's one completion-queue thread serves the 481 streams
# several times slower, and a watcher that reads may lag past 256 in a flood
# (it did once in CI): 1,024 there.
with open(SERVER, "rb") as _f:
    # an ASan build, shared runtime or (gcc's -static-libasan, clang) linked in
    ASAN = b"__asan_init" in _f.read()
QUEUE = 1024 if ASAN else 256
CAP = 600
CONNS, PER_CONN = 8, 60  # 480 slow streams, below the cap
# A job event is 23-24 bytes of protobuf and 5 of gRPC framing, so a stream's
# 64 KiB window holds up to 65,535 / 28 = 2,340 of them. A slow stream ends
# only once its window, the message in flight and QUEUE are full: when the
# server writes fast that takes every one of 2,340 + 1 + QUEUE events (3,366
# under ASan: 3,000 published passed only while the server wrote slowly).
# Publish half as many again.
WINDOW_EVENTS = 65535 // 28
PER_FLOOD = 50
FLOODS = -(-(WINDOW_EVENTS + 1 + QUEUE) * 3 // 2 // PER_FLOOD)  # 78, or 101 under ASan
SLOW_MSG = "watch: client too slow"


def job(job_id):
    return jobs_pb2.JobSpec(
        id=job_id,
        placement=jobs_pb2.Placement(gpus=[jobs_pb2.GpuPlacement(gpu=0, leaf=0, pod=0),
                                           jobs_pb2.GpuPlacement(gpu=40, leaf=5, pod=1)]),
        leaf_demand=jobs_pb2.LeafDemand(pairs=[jobs_pb2.LeafPair(a=0, b=5, links=1)]))


class Server:
    def __init__(self, *args):
        self.proc = subprocess.Popen([SERVER, "--insecure"] + list(args),
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        ready, _, _ = select.select([self.proc.stdout], [], [], TIMEOUT_S)
        line = self.proc.stdout.readline().decode() if ready else ""
        if not line.startswith("port "):
            self.proc.kill()
            raise RuntimeError("server did not start: %r %r" %
                               (line, self.proc.stderr.read().decode()))
        self.target = "127.0.0.1:%d" % int(line.split()[1])

    def rss_kb(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        raise RuntimeError("no VmRSS")

    def sanitized(self):
        """ASan keeps freed memory in its quarantine: RSS says nothing then."""
        return ASAN

    def stop(self):
        self.proc.terminate()
        try:
            rc = self.proc.wait(TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
        if rc != 0:
            raise AssertionError("server exit %d: %s" % (rc, self.proc.stderr.read().decode()))


def subscribed(streams, ch):
    """Waits until every stream in `streams` got its first event, probing
    with PlanJob flood-1 every 50 ms (10 s at most). Streams on several
    channels reach the server in any order: each one is waited for. A stream
    ended meanwhile raises its grpc.RpcError."""
    done, err = [], []

    def read():
        try:
            for st in streams:
                next(st)
                done.append(st)
        except grpc.RpcError as e:
            err.append(e)
    t = threading.Thread(target=read, daemon=True)
    t.start()
    for _ in range(200):
        jobs_pb2_grpc.JobsStub(ch).PlanJob(job("flood-1"), timeout=TIMEOUT_S)
        t.join(0.05)
        if err:
            raise err[0]
        if not t.is_alive():
            return
    raise AssertionError("%d of %d streams never got an event" %
                         (len(streams) - len(done), len(streams)))


def rss_settled(server, base_kb):
    """The server's RSS once within 8 MB of base_kb, or after 5 s."""
    deadline = time.monotonic() + 5
    while True:
        rss = server.rss_kb()
        if rss - base_kb < 8 * 1024 or time.monotonic() > deadline:
            return rss
        time.sleep(0.2)


def flood(ch):
    """Publishes PER_FLOOD job events; returns how long that took (s)."""
    t0 = time.monotonic()
    jobs_pb2_grpc.JobsStub(ch).PlanJob(job("flood-%d" % PER_FLOOD), timeout=60)
    return time.monotonic() - t0


def end_of(stream):
    """Reads a stream to its end (10 s at most); returns (status code,
    details, events)."""
    out, got = [], [0]

    def read():
        try:
            for _ in stream:
                got[0] += 1
        except grpc.RpcError as e:
            out.append((e.code(), e.details(), got[0]))
            return
        out.append((grpc.StatusCode.OK, "", got[0]))
    t = threading.Thread(target=read, daemon=True)
    t.start()
    t.join(TIMEOUT_S)
    if not out:
        stream.cancel()
        raise AssertionError("the stream did not end in %d s: %d events read" %
                             (TIMEOUT_S, got[0]))
    return out[0]


class WatchSlow(unittest.TestCase):
    def test_slow_streams_bounded(self):
        server = Server("--queue", str(QUEUE), "--max-streams", str(CAP))
        try:
            self.run_slow(server)
        finally:
            server.stop()

    def run_slow(self, server):
        ctl = grpc.insecure_channel(server.target)
        plain = grpc.insecure_channel(server.target)  # its own connection
        fabric = fabric_pb2_grpc.FabricStub(plain)
        fabric.GetFabric(fabric_pb2.GetFabricRequest(), timeout=TIMEOUT_S)
        fast_ch = grpc.insecure_channel(server.target)
        fast = events_pb2_grpc.EventsStub(fast_ch).Watch(events_pb2.WatchRequest(jobs=True))
        subscribed([fast], ctl)
        fast_got, fast_end = [], []

        def read_fast():
            try:
                for e in fast:
                    fast_got.append(e.seq)
            except grpc.RpcError as e:
                fast_end.append((e.code(), e.details()))
        fast_reader = threading.Thread(target=read_fast, daemon=True)
        fast_reader.start()
        time.sleep(0.5)
        alone = sorted(flood(ctl) for _ in range(20))[10]
        time.sleep(0.5)
        base = server.rss_kb()

        # No BDP probing: the streams' windows stay at 64 KiB (up to 2,340 events).
        chans = [grpc.insecure_channel(server.target, options=[("grpc.http2.bdp_probe", 0)])
                 for _ in range(CONNS)]
        slow = [events_pb2_grpc.EventsStub(ch).Watch(events_pb2.WatchRequest())
                for ch in chans for _ in range(PER_CONN)]
        subscribed(slow, ctl)

        # A plain RPC's latency, sampled all along the flood.
        lat, stop = [], threading.Event()

        def sample():
            while not stop.is_set():
                t0 = time.monotonic()
                fabric.GetFabric(fabric_pb2.GetFabricRequest(), timeout=TIMEOUT_S)
                lat.append(time.monotonic() - t0)
                time.sleep(0.01)
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        peak, publish_s = base, []
        for i in range(FLOODS):
            want = len(fast_got) + PER_FLOOD
            publish_s.append(flood(ctl))
            peak = max(peak, server.rss_kb())
            # The fast watcher keeps up between floods.
            deadline = time.monotonic() + TIMEOUT_S
            while time.monotonic() < deadline and len(fast_got) < want and not fast_end:
                time.sleep(0.002)
            self.assertEqual(fast_end, [], "the fast watcher was ended")
        stop.set()
        sampler.join(TIMEOUT_S)
        lat.sort()
        p99 = lat[int(len(lat) * 0.99)] if lat else 99
        publish_s.sort()
        print("rss baseline %d kB, peak %d kB; publishing %d events: p50 %.1f ms (%.1f ms "
              "with no slow stream), max %.1f ms; GetFabric p50 %.1f ms p99 %.1f ms over %d "
              "calls" %
              (base, peak, PER_FLOOD, publish_s[len(publish_s) // 2] * 1e3, alone * 1e3,
               publish_s[-1] * 1e3, lat[len(lat) // 2] * 1e3, p99 * 1e3, len(lat)))

        # The slow streams were ended while their clients stay connected and
        # read nothing: their memory is back already.
        ended = rss_settled(server, base)
        print("rss with the slow streams ended, their clients connected: %d kB" % ended)
        check_rss = not server.sanitized()
        if check_rss:
            self.assertLess(ended - base, 8 * 1024)

        # Every slow stream was ended: sample some of them to the end.
        for st in slow[::PER_CONN // 2]:
            code, details, n = end_of(st)
            self.assertEqual(code, grpc.StatusCode.RESOURCE_EXHAUSTED)
            self.assertTrue(details.startswith(SLOW_MSG), details)
            self.assertLess(n, FLOODS * PER_FLOOD)
        # The fast watcher lost nothing (seq has no gap).
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline and len(fast_got) < FLOODS * PER_FLOOD:
            time.sleep(0.05)
        self.assertGreaterEqual(len(fast_got), FLOODS * PER_FLOOD)
        self.assertEqual(fast_got, list(range(fast_got[0], fast_got[0] + len(fast_got))))
        self.assertLess(p99, 1.0, "GetFabric p99 %.3f s during the flood" % p99)
        self.assertLess(publish_s[len(publish_s) // 2], 4 * alone + 0.02,
                        "publishing slowed by the slow streams")
        if check_rss:
            self.assertLess(peak - base, 64 * 1024, "RSS grew %d kB" % (peak - base))

        # The clients go: memory comes back near the baseline.
        for ch in chans:
            ch.close()
        after = rss_settled(server, base)
        print("rss after the clients left: %d kB (baseline %d kB)%s" %
              (after, base, "" if check_rss else "; not checked under ASan"))
        if check_rss:
            self.assertLess(after - base, 8 * 1024)
        fast.cancel()
        for ch in (ctl, plain, fast_ch):
            ch.close()

    def test_stream_cap(self):
        server = Server("--max-streams", "20")
        try:
            ctl = grpc.insecure_channel(server.target)
            ch = grpc.insecure_channel(server.target)
            streams = [events_pb2_grpc.EventsStub(ch).Watch(events_pb2.WatchRequest())
                       for _ in range(20)]
            # Every one of the 20 is open at the server before the 21st comes
            # (the server sees streams of one channel in any order).
            subscribed(streams, ctl)
            extra = events_pb2_grpc.EventsStub(ctl).Watch(events_pb2.WatchRequest())
            code, details, _ = end_of(extra)
            self.assertEqual(code, grpc.StatusCode.RESOURCE_EXHAUSTED)
            self.assertTrue(details.startswith("watch: 20 streams open, at most 20"), details)
            for st in streams[:5]:
                st.cancel()
            again = None
            for _ in range(100):  # the cancellations reach the server soon
                again = events_pb2_grpc.EventsStub(ctl).Watch(events_pb2.WatchRequest())
                try:
                    subscribed([again], ctl)
                    break
                except grpc.RpcError as e:
                    self.assertEqual(e.code(), grpc.StatusCode.RESOURCE_EXHAUSTED)
                    time.sleep(0.05)
            else:
                self.fail("no Watch served after streams closed")
            again.cancel()
            ch.close()
            ctl.close()
        finally:
            server.stop()


if __name__ == "__main__":
    unittest.main(verbosity=2)

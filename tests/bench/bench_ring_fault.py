"""bench_ring_fault.py - fault reaction of the REAL ocsd on an OCSTrx ring
domain of 1,024 nodes (64 ToRs x 16 nodes, 4 GPUs per node, K = 3, 2
bundles), every node's transceiver agent in ONE ocs-devsim (--count 1024,
200 us switching).

The domain is kept populated with ring jobs (one TP-32 ring of 8 nodes
each, as many as fit). Each of N faults (1,000 by default) fails a node in
the middle of a ring through the devsim knob (node-fault, set over
NETCONF with ncclient), waits for the RingEvent of its repair on Watch
(bypass-extend, re-place or lost: a ring keeps its 8 nodes or is lost),
then heals it (knob cleared, MarkNode healthy: the node is set back to
loopback) and, once a ring is lost, releases and resubmits its job (a job
that no longer fits, because re-placements fragmented the free nodes,
leaves the pool). From each RingEvent: reaction_us (the
node-fault notification reaching ocsd to every changed transceiver
confirmed) and devices_us (the transaction engine's time, device steps
included); the controller's share is the difference.

Prints the median and p99 of both, of the controller's share and of the
reaction minus the devices' switching time (issue 11's own definition of
the controller's share), and from ocsd's log the profile of each repair
transaction (txn_driver.c: the intent's commit, overlapped with the prepare
steps, how long the confirm waited for it, the engine's steps) and of each
repair's stages (jobs.c, log_repair_profile: the notification to the loop,
the repair computed, its transaction handed to the engine, the engine, the
engine's waits for the store, the outcome back on the loop) with the stage
the slowest 1% spent most in, and the target (controller share <= 5 ms at
p99). Exit 0 when the run completed
(the figures are recorded in tests/bench/README.md), 1 on an error.

With --pin (issue 28 #5: a calm machine), ocsd runs on CPU 0 and
everything else (ocs-devsim, this script, its clients) on CPU 1. With
OCSD_WRAP set (e.g. "valgrind --tool=callgrind --toggle-collect=..."),
ocsd runs under it (ocsd_fleet.py): the instruction count per repair.

usage: bench_ring_fault.py BUILD_DIR SOURCE_DIR [FAULTS] [TORS NODES_PER_TOR] [--pin]
"""
import os
import queue
import random
import re
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                "integration"))
import ocsd_fleet  # noqa: E402

PIN = "--pin" in sys.argv
ARGS = [a for a in sys.argv if a != "--pin"]
BUILD, SRC = ARGS[1:3]
FAULTS = int(ARGS[3]) if len(ARGS) > 3 else 1000
TORS = int(ARGS[4]) if len(ARGS) > 4 else 64
PER_TOR = int(ARGS[5]) if len(ARGS) > 5 else 16
if PIN:
    os.sched_setaffinity(0, {1})  # this script, and ocs-devsim started from it
TP = 32  # 8 nodes of 4 GPUs
TIMEOUT_S = 60
TARGET_US = 5000
REPAIRS = (3, 4, 6)  # RING_CHANGE_REPLACED, _LOST, _BYPASS_EXTENDED
SWITCH_US = 200  # the devices' switching time (start_devices below)
PROFILE = re.compile(r"fault repair\) profile: intent commit (\d+) us \(overlapped\), verify "
                     r"waited (\d+) us for it, engine (\d+) us \(prepare (\d+), commit (\d+), "
                     r"verify (\d+), confirm (\d+) ms\)")
STAGES = re.compile(r"fault repair profile: (\d+) us from the notification to every node "
                    r"confirmed: to the loop (-?\d+), repair computed (-?\d+), to the engine "
                    r"(-?\d+), engine (\d+) \(the devices\), engine waited (-?\d+) for the "
                    r"store; outcome on the loop (-?\d+) us later")

FLEET = ocsd_fleet.RingFleet(BUILD, SRC, tors=TORS, nodes_per_tor=PER_TOR,
                             prefix="ocsd-bench-ring-")
ocsd_fleet.gen_stubs(os.path.join(SRC, "proto"), os.path.join(FLEET.work, "gen"))
import grpc  # noqa: E402
from ocs.v1 import events_pb2, events_pb2_grpc  # noqa: E402
from ocs.v1 import fabric_pb2, fabric_pb2_grpc  # noqa: E402
from ocs.v1 import jobs_pb2, jobs_pb2_grpc  # noqa: E402


def pct(values, p):
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100.0 * (len(s) - 1))))]


class Agents:
    """ncclient sessions to the node agents, kept open (at most 64)."""

    def __init__(self):
        self.open = {}

    def set_faults(self, node, spec):
        from ncclient.xml_ import to_ele
        for attempt in range(2):
            m = self.open.pop(node, None) or FLEET._session(node)
            try:
                m.dispatch(to_ele(f'<set-faults xmlns="{ocsd_fleet.DEVSIM_NS}"><spec>{spec}'
                                  "</spec></set-faults>"))
            except Exception:  # noqa: BLE001 - a stale session: once more on a new one
                if attempt:
                    raise
                continue
            if len(self.open) >= 64:
                old = next(iter(self.open))
                self.open.pop(old).close_session()
            self.open[node] = m
            return

    def close(self):
        for m in self.open.values():
            m.close_session()


def pin_ocsd():
    """Every thread of ocsd on CPU 0 (threads it makes later inherit it)."""
    pid = FLEET.ocsd.pid
    for tid in os.listdir(f"/proc/{pid}/task"):
        os.sched_setaffinity(int(tid), {0})
    print("pinned: ocsd on CPU 0, ocs-devsim and the bench on CPU 1", flush=True)


def main():
    FLEET.start_devices(switch_us=SWITCH_US)
    FLEET.start_ocsd()
    if PIN:
        pin_ocsd()
    ch = grpc.insecure_channel(FLEET.target)
    jobs = jobs_pb2_grpc.JobsStub(ch)
    fabric = fabric_pb2_grpc.FabricStub(ch)
    events = events_pb2_grpc.EventsStub(ch)
    evq = queue.Queue()
    watch = events.Watch(events_pb2.WatchRequest(rings=True))

    def pump():
        try:
            for ev in watch:
                evq.put(ev)
        except grpc.RpcError:
            pass

    threading.Thread(target=pump, daemon=True).start()
    n_jobs = 0
    t0 = time.time()
    while True:
        try:
            jobs.SubmitJob(jobs_pb2.JobSpec(id=f"r{n_jobs}",
                                            ring=jobs_pb2.RingRequest(tp=TP, rings=1)),
                           timeout=TIMEOUT_S)
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.RESOURCE_EXHAUSTED:
                raise
            break
        n_jobs += 1
    print(f"{n_jobs} ring jobs placed in {time.time() - t0:.1f} s", flush=True)
    live = [f"r{k}" for k in range(n_jobs)]
    rng = random.Random(11)
    agents = Agents()
    reaction, devices, share, kinds = [], [], [], {}
    for i in range(FAULTS):
        job_id = live[rng.randrange(len(live))]
        ring = fabric.ListRings(fabric_pb2.ListRingsRequest(job_id=job_id),
                                timeout=TIMEOUT_S).rings[0]
        nodes = list(ring.nodes)
        if len(nodes) < TP // 4:
            # the ring was lost (a repair never shrinks one): give the job a ring again
            jobs.ReleaseJob(jobs_pb2.ReleaseJobRequest(id=job_id), timeout=TIMEOUT_S)
            try:
                jobs.SubmitJob(jobs_pb2.JobSpec(id=job_id,
                                                ring=jobs_pb2.RingRequest(tp=TP, rings=1)),
                               timeout=TIMEOUT_S)
            except grpc.RpcError as e:
                if e.code() != grpc.StatusCode.RESOURCE_EXHAUSTED:
                    raise
                live.remove(job_id)  # re-placements fragmented the free nodes
                continue
            nodes = list(fabric.ListRings(fabric_pb2.ListRingsRequest(job_id=job_id),
                                          timeout=TIMEOUT_S).rings[0].nodes)
        victim = nodes[rng.randrange(1, len(nodes) - 1)]
        agents.set_faults(victim, "node-fault")
        deadline = time.time() + TIMEOUT_S
        ev = None
        while time.time() < deadline:
            try:
                e = evq.get(timeout=max(0.01, deadline - time.time()))
            except queue.Empty:
                break
            if e.HasField("ring") and e.ring.ring.failed_node == victim and \
                    e.ring.ring.job_id == job_id and e.ring.ring.last_change in REPAIRS:
                ev = e.ring
                break
        if ev is None:
            raise RuntimeError(f"fault {i}: no ring event for node {victim} of {job_id}")
        kind = fabric_pb2.RingChange.Name(ev.ring.last_change)
        kinds[kind] = kinds.get(kind, 0) + 1
        if ev.reaction_us > 0:
            reaction.append(ev.reaction_us)
            devices.append(ev.devices_us)
            share.append(ev.reaction_us - ev.devices_us)
        agents.set_faults(victim, "")
        fabric.MarkNode(fabric_pb2.MarkNodeRequest(
            node=victim, condition=fabric_pb2.NODE_CONDITION_HEALTHY), timeout=TIMEOUT_S)
        if (i + 1) % 100 == 0:
            print(f"{i + 1} faults, controller share p99 so far {pct(share, 99)} us", flush=True)
    agents.close()
    watch.cancel()
    print(f"\n{FLEET.N_DEV} nodes, {n_jobs} TP-{TP} ring jobs ({len(live)} at the end), "
          f"{FAULTS} node faults: {kinds}")
    minus_switch = [r - SWITCH_US for r in reaction]
    for name, v in (("reaction_us", reaction), ("devices_us", devices),
                    ("controller_us", share), ("reaction-switch", minus_switch)):
        print(f"{name:14s} median {statistics.median(v):8.0f}  p99 {pct(v, 99):8.0f}  "
              f"max {max(v):8.0f}")
    p99 = pct(share, 99)
    print(f"controller share p99 {p99} us: {'within' if p99 <= TARGET_US else 'ABOVE'} "
          f"the {TARGET_US} us target")
    profile(FLEET.log())
    FLEET.close()


def profile(log):
    """Medians and p99 of the repair transactions' profile lines (txn_driver.c)."""
    rows = [tuple(int(x) for x in m) for m in PROFILE.findall(log)]
    if not rows:
        print("no transaction profile in the log (an ocsd before the overlapped intent)")
        return
    print(f"profile of {len(rows)} fault repairs (fast path):")
    names = ("intent commit us (overlapped)", "verify waited for it us", "engine us",
             "prepare ms", "commit ms", "verify ms", "confirm ms")
    for k, name in enumerate(names):
        v = [r[k] for r in rows]
        print(f"  {name:30s} median {statistics.median(v):8.0f}  p99 {pct(v, 99):8.0f}")
    stages(log)


def stages(log):
    """Where each repair's time went (jobs.c, log_repair_profile), and which
    stage the slowest 1% spent most in (the controller's stages only)."""
    rows = [tuple(int(x) for x in m) for m in STAGES.findall(log)]
    if not rows:
        return
    names = ("reaction us", "notification to the loop", "repair computed", "to the engine",
             "engine (devices)", "engine waited for store", "outcome on the loop")
    print(f"stages of {len(rows)} fault repairs (us):")
    for k, name in enumerate(names):
        v = [r[k] for r in rows]
        print(f"  {name:30s} median {statistics.median(v):8.0f}  p99 {pct(v, 99):8.0f}  "
              f"max {max(v):8.0f}")
    share = sorted(rows, key=lambda r: r[0] - r[4])
    slow = share[-max(1, len(share) // 100):]
    worst = {}
    for r in slow:
        k = max((1, 2, 3, 5), key=lambda i: r[i])
        worst[names[k]] = worst.get(names[k], 0) + 1
    print(f"  slowest 1% by controller share ({len(slow)}): largest stage {worst}")


if __name__ == "__main__":
    try:
        main()
    except Exception:
        FLEET.dump_logs()
        FLEET.close()
        FLEET.remove()
        raise
    FLEET.remove()

"""test_rail_polatis.py - GPU faults reported by Polatis switches on a
rail-OCS fabric (issues 12 and 23), end to end through the REAL ocsd: the
fabric of test_rail_daemon.py (6 servers of 4 GPUs, 3 per OCS group, one
spare; two OCS devices of 20 ports) with `"model": "polatis"` in its
devices entry (no port-map: ocsd's port k is ingress 1+k and egress 21+k),
served by ONE `ocs-devsim --model polatis --count 2`. A device's
`fail-port=k` knob (set with ncclient) sends port-power-alarm for ingress
1+k, and clearing it port-power-clear; ocsd must handle them exactly as an
ocs-switch's port-state-change. Both devices are read back after every
step with ncclient (pairs and port status straight from the optical-switch
YANG data, mapped by the test itself): a join g <-> w is the two pairs
g -> w and w -> g, each between ENABLED ports, and no other pair may be
there.

Checks, in order:
  - start-up: the initial port map is programmed as pairs on the polatis
    devices (GPU r of every active server on its rail port r);
  - job-a holds GPUs 0,1,2 (group 0), job-b 12..15 (server 3, group 1);
  - fail-port=1 on device 0 (GPU 1's port): RailEvent source "device",
    case 1, idle GPU 3 takes rail port 1, job-a told (gpus, gpu_moves);
    ListRailPorts and `ocsctl rail-ports` agree (the event also has GPU 3
    leaving rail port 3, which no job held); on device 0 the pairs
    4 <-> 14 (ocsd ports 3 <-> 13) both there and connected, nothing
    left on ingress 2 / egress 22;
  - fail-port=13 on device 1 (GPU 13, no idle GPU in server 3): case 2,
    server 3's four rail ports move to spare server 5, job-b holds 20..23;
    device 1's pairs moved in one go;
  - an alarm on a switch-side port of device 0 (rail port 0's): no GPU
    marked, no swap, ListRailPorts unchanged;
  - the knobs cleared (port-power-clear): GPUs 1 and 13 stay faulty;
    `ocsctl gpu heal 1` gives a GpuEvent healthy, GPU 1 leaves the faulty
    list, and `ocsctl gpu replace 0` (case 1) puts the healed GPU 1 on
    rail port 0, its pairs connected on device 0 (its port back in use).

usage: test_rail_polatis.py BUILD_DIR SOURCE_DIR
"""
import atexit
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ocsd_fleet  # noqa: E402
import rail_helpers  # noqa: E402
import testports  # noqa: E402


class PolatisRailFleet(ocsd_fleet.RailFleet):
    """RailFleet whose OCS devices are polatis switches (one ocs-devsim
    --model polatis); read_device reads their pairs as MixedFleet does."""

    def __init__(self, build, src, prefix):
        super().__init__(build, src, prefix=prefix)
        with open(self.cfg) as f:
            fabric = json.load(f)
        fabric["ocsd-fabric:fabric"]["rail-ocs"]["devices"]["model"] = "polatis"
        self._write_config(fabric)

    def start_devices(self, switch_ms=5):
        log = open(os.path.join(self.work, "devsim.log"), "w")
        self.devsim_proc = subprocess.Popen(
            [self.devsim, "--listen", f"127.0.0.1:{self.base}", "--count", str(self.N_DEV),
             "--ports", str(self.PORTS), "--model", "polatis", "--user", "ocsd",
             "--password-file", self.pw_path, "--unidirectional", "--switch-ms",
             str(switch_ms)], stdout=log, stderr=log)
        log.close()
        testports.wait_listening("127.0.0.1", self.base, "ocs-devsim",
                                 ocsd_fleet.START_TIMEOUT_S, count=self.N_DEV,
                                 proc=self.devsim_proc)

    def read_device(self, d, datastore=None):
        """[(in, out, status)] in ocsd's ports (see MixedFleet.read_device)."""
        flt = (f'<filter xmlns="urn:ietf:params:xml:ns:netconf:base:1.0" type="subtree">'
               f'<cross-connects xmlns="{ocsd_fleet.OPSW_NS}"/>'
               f'<port-config xmlns="{ocsd_fleet.OPSW_NS}"><port><port-id/><status/></port>'
               "</port-config></filter>")
        return ocsd_fleet.MixedFleet.polatis_rows(self.get_data(d, flt), self.PORTS)


BUILD, SRC = sys.argv[1:3]
FLEET = PolatisRailFleet(BUILD, SRC, prefix="ocsd-rail-polatis-")
atexit.register(FLEET.remove)
ocsd_fleet.gen_stubs(os.path.join(SRC, "proto"), os.path.join(FLEET.work, "gen"))
from ocs.v1 import events_pb2  # noqa: E402
from ocs.v1 import fabric_pb2  # noqa: E402
from ocs.v1 import jobs_pb2  # noqa: E402

TIMEOUT_S = rail_helpers.TIMEOUT_S
FAILURES = []
OCSCTL = os.path.join(BUILD, "northbound", "ocsctl", "ocsctl")
KIND = fabric_pb2.RailSwapKind


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        FAILURES.append(what)
    return cond


def Client():
    return rail_helpers.Client(FLEET)


def ocsctl(*args):
    return rail_helpers.ocsctl(OCSCTL, FLEET.target, *args)


def initial_map():
    return rail_helpers.initial_map(FLEET)


def pairs(d):
    """{(in, out): status} of polatis device d in ocsd's ports."""
    return {(i, o): st for (i, o, st) in FLEET.read_device(d)}


def check_devices(client, what):
    """The devices' joins are ListRailPorts', every pair connected, none one-way."""
    joins, one_way = FLEET.port_map()
    ports, _ = client.ports()
    want = {p: g for p, g in ports.items() if g >= 0}
    rows = [(d, i, o, st) for d in range(FLEET.N_DEV) for (i, o, st) in FLEET.read_device(d)]
    bad = [r for r in rows if r[3] != "connected"]
    check(joins == want and not one_way and not bad,
          f"{what}: the polatis devices hold exactly ListRailPorts' joins, every pair "
          f"connected, none one-way" +
          ("" if joins == want else f" (devices {joins}, ListRailPorts {want})") +
          (f" one-way: {one_way}" if one_way else "") + (f" not connected: {bad}" if bad else ""))
    return joins


def check_join(d, gpu_port, switch_port, what):
    """Both pairs of the join gpu_port <-> switch_port on device d, connected."""
    p = pairs(d)
    there = (p.get((gpu_port, switch_port)), p.get((switch_port, gpu_port)))
    check(there == ("connected", "connected"),
          f"{what}: device {d} has ingress {gpu_port + 1} -> egress "
          f"{switch_port + FLEET.PORTS + 1} and ingress {switch_port + 1} -> egress "
          f"{gpu_port + FLEET.PORTS + 1}, both connected ({there})")


def wait_map(client, timeout=TIMEOUT_S):
    deadline = time.time() + timeout
    while time.time() < deadline:
        ports, _ = client.ports()
        if any(g >= 0 for g in ports.values()):
            return ports
        time.sleep(0.1)
    return {}


def rail_ports_cli():
    """{rail port: GPU} and the faulty GPUs from `ocsctl rail-ports --json`."""
    rc, out, err = ocsctl("rail-ports")
    if rc != 0 or out is None:
        return None, None
    ports = {int(p.get("rail_port", 0)): int(p.get("gpu", -1)) for p in out.get("ports", [])}
    return ports, sorted(int(g) for g in out.get("faulty_gpus", []))


def device_fault(c, w, gpu, kind, what):
    """fail-port on gpu's port; the RailEvent for it (or None)."""
    dev, port = FLEET.gpu_port(gpu)
    FLEET.set_faults(dev, f"fail-port={port}")
    ev = w.wait(lambda e: e.WhichOneof("kind") == "rail" and e.rail.swap.failed_gpu == gpu)
    check(ev is not None and ev.rail.source == "device" and ev.rail.swap.kind == kind and
          ev.rail.reaction_us >= ev.rail.devices_us > 0,
          f"{what}: port-power-alarm for ingress {port + 1} of {FLEET.device_name(dev)} "
          f"swapped GPU {gpu} out (RailEvent source device, {KIND.Name(kind)}) ({ev})")
    return ev


def main():
    FLEET.start_devices()
    FLEET.start_ocsd()
    c = Client()
    w = ocsd_fleet.Watcher(c.events.Watch(events_pb2.WatchRequest(rings=True)), TIMEOUT_S)

    # ---- start-up: the initial port map as polatis pairs
    ports = wait_map(c)
    check(ports == initial_map(), f"initial port map programmed ({ports})")
    check_devices(c, "initial map")

    # ---- rail jobs
    a = c.submit("job-a", [0, 1, 2])
    check(a.state == jobs_pb2.JOB_STATE_ACTIVE, "job-a ACTIVE holding 0,1,2")
    b = c.submit("job-b", [12, 13, 14, 15])
    check(b.state == jobs_pb2.JOB_STATE_ACTIVE, "job-b ACTIVE holding 12..15")

    # ---- case 1 from a port-power-alarm on device 0
    ev = device_fault(c, w, 1, KIND.RAIL_SWAP_KIND_IDLE_GPU, "GPU 1")
    # GPU 3 leaves rail port 3 (no job on it) for rail port 1 (job-a's)
    check(ev is not None and ev.rail.swap.idle_gpu == 3 and
          sorted((m.rail_port, m.old_gpu, m.new_gpu, m.job_id) for m in ev.rail.swap.moves) ==
          [(1, 1, 3, "job-a"), (3, 3, -1, "")],
          f"GPU 1: idle GPU 3 took over, the event has job-a's move and port 3 dark ({ev})")
    ports, faulty = c.ports()
    check(ports[1] == 3 and ports[3] == -1 and faulty == [1],
          f"GPU 1: rail port 1 on GPU 3, port 3 dark, GPU 1 faulty ({ports}, {faulty})")
    cli_ports, cli_faulty = rail_ports_cli()
    check(cli_ports == ports and cli_faulty == faulty,
          f"ocsctl rail-ports agrees ({cli_ports}, {cli_faulty})")
    a = c.job("job-a")
    check(list(a.gpus) == [0, 3, 2] and [(m.old_gpu, m.new_gpu) for m in a.gpu_moves] ==
          [(1, 3)], f"GPU 1: job-a told its new GPU ({list(a.gpus)}, {a.gpu_moves})")
    _, sw = FLEET.switch_port(1)
    check_join(0, FLEET.gpu_port(3)[1], sw, "GPU 1's rail port on GPU 3")
    left = [k for k in pairs(0) if 1 in k]
    check(not left, f"GPU 1: no pair left on ingress 2 or egress {FLEET.PORTS + 2} ({left})")
    check_devices(c, "GPU 1 swapped out")

    # ---- case 2 from a port-power-alarm on device 1
    ev = device_fault(c, w, 13, KIND.RAIL_SWAP_KIND_SPARE_SERVER, "GPU 13")
    check(ev is not None and ev.rail.swap.spare_server == 5 and
          {(m.old_gpu, m.new_gpu, m.job_id) for m in ev.rail.swap.moves} ==
          {(12, 20, "job-b"), (13, 21, "job-b"), (14, 22, "job-b"), (15, 23, "job-b")},
          f"GPU 13: server 3's ports onto spare server 5, job-b's four moves ({ev})")
    ports, faulty = c.ports()
    check([ports[p] for p in range(8, 12)] == [20, 21, 22, 23] and faulty == [1, 13],
          f"GPU 13: rail ports 8..11 on GPUs 20..23, GPUs 1 and 13 faulty ({ports}, {faulty})")
    check(list(c.job("job-b").gpus) == [20, 21, 22, 23], "GPU 13: job-b holds 20..23")
    for r in range(4):
        check_join(1, FLEET.gpu_port(20 + r)[1], FLEET.switch_port(8 + r)[1],
                   f"rail port {8 + r} on GPU {20 + r}")
    check_devices(c, "GPU 13 swapped out")

    # ---- an alarm on a switch-side port (ingress 13: rail port 0's) is no GPU fault
    before = c.ports()
    FLEET.set_faults(0, f"fail-port={FLEET.gpu_port(1)[1]},fail-port={FLEET.switch_port(0)[1]}")
    ev = w.wait(lambda e: e.WhichOneof("kind") in ("rail", "gpu"), timeout=1.0)
    check(ev is None and c.ports() == before,
          f"port-power-alarm on switch-side ingress 13: no GPU marked, nothing moved ({ev})")
    check("rail-ocs-g0: switch-side port 12 (rail port 0) is down" in FLEET.log(),
          "the switch-side alarm reached ocsd (logged as switch-side port 12 down)")

    # ---- light back (port-power-clear), then heal
    FLEET.set_faults(0, "")
    FLEET.set_faults(1, "")
    time.sleep(0.5)
    ports, faulty = c.ports()
    check(faulty == [1, 13] and ports[1] == 3,
          f"port-power-clear: GPUs 1 and 13 stay faulty until marked healthy ({faulty})")
    rc, out, err = ocsctl("gpu", "heal", "1")
    ev = w.wait(lambda e: e.WhichOneof("kind") == "gpu" and e.gpu.gpu == 1)
    check(rc == 0 and ev is not None and ev.gpu.condition == fabric_pb2.GPU_CONDITION_HEALTHY,
          f"ocsctl gpu heal 1: GpuEvent healthy ({rc} {err} {ev})")
    check(c.ports()[1] == [13], f"GPU 1 no longer faulty ({c.ports()[1]})")
    rc, out, err = ocsctl("gpu", "replace", "0")
    swap = (out or {}).get("swap", {})
    check(rc == 0 and swap.get("kind") == "RAIL_SWAP_KIND_IDLE_GPU" and
          int(swap.get("idle_gpu", -1)) == 1,
          f"ocsctl gpu replace 0: the healed GPU 1 took over rail port 0 ({rc} {out} {err})")
    check(c.ports()[0][0] == 1 and list(c.job("job-a").gpus) == [1, 3, 2],
          f"rail port 0 on GPU 1, job-a holds 1,3,2 ({c.ports()[0]})")
    check_join(0, FLEET.gpu_port(1)[1], FLEET.switch_port(0)[1], "rail port 0 on healed GPU 1")
    check_devices(c, "the healed GPU back on a rail port")
    check(FLEET.stop_ocsd() == 0, "ocsd stops cleanly")


def run():
    try:
        main()
    except Exception as e:  # reported with the daemon's log
        FAILURES.append(repr(e))
        print("ERROR:", repr(e), flush=True)
    finally:
        if FAILURES:
            FLEET.dump_logs(80)
        FLEET.close()
    print("test_rail_polatis:", "FAILED" if FAILURES else "passed",
          f"({len(FAILURES)} failure(s))")
    return 1 if FAILURES else 0


sys.exit(run())

"""ocsd_fleet.py - shared by the end-to-end tests that run the real product:
an ocs-devsim fleet (real NETCONF servers) for a fabric file derived from
deploy/fabrics/lab.json, the real ocsd started and killed as a process, and
the devices read back directly with ncclient (a NETCONF client nobody here
wrote) so that what ocsd claims is checked against what the devices hold.

Not a test itself; imported by test_recovery.py, test_daemon_grpcio.py,
test_daemon_reload.py, test_daemon_share.py, test_daemon_wave.py,
tests/interop/test_prometheus.py and tests/bench/bench_daemon_load.py; RingFleet (an OCSTrx ring domain on
ocs-devsim transceivers) by test_ring_daemon.py, test_ring_drift.py, status_helpers.py and
tests/bench/bench_ring_fault.py; RailFleet (a rail-OCS fabric on ocs-devsim
switches) by test_rail_daemon.py; MixedFleet (the mixed lab fabric of
polatis and ocs-switch devices) by test_daemon_polatis.py.
Loopback only; every process started here is stopped by Fleet.close().
"""
import faulthandler
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import xml.etree.ElementTree as ET

import testports

# A test process that dies of a signal (an abort in grpcio's or libssh's C
# code, say) prints every Python thread's stack on stderr, which ctest keeps:
# a crash seen once under load is then diagnosable from its log.
faulthandler.enable()

NS = "urn:ocsd:yang:ocs-switch"
START_TIMEOUT_S = 30


class Fleet:
    """A devsim fleet for the lab fabric (4 pods, 16 devices of 8 ports,
    cross wiring), with `confirm_timeout_s` written into the fabric file,
    and at most one ocsd on it at a time.

    build, src: the build and source trees. ocsd_args: extra daemon options
    (e.g. TLS files; without them ocsd runs --insecure on loopback).
    transport: "ssh" (password) or "tls": the devices serve NETCONF over TLS
    with certificates made afresh in the work directory by
    nb_make_certs.sh (server.pem for the devices, operator.pem as ocsd's
    client certificate, both of ca.pem); read_device and set_faults then
    speak NETCONF over TLS themselves (ncclient 0.6 has no TLS)."""

    N_DEV = 16
    GROUPS = 4
    PER_GROUP = 4

    def __init__(self, build, src, confirm_timeout_s=60, prefix="ocsd-fleet-", transport="ssh",
                 rpc_timeout_ms=None):
        fabric = self._prepare(build, src, prefix, "lab.json")
        dev = fabric["ocsd-fabric:fabric"]["devices"]
        self._set_access(dev, confirm_timeout_s, 5000)  # start_devices()' default switch time
        if rpc_timeout_ms:
            dev["rpc-timeout-ms"] = rpc_timeout_ms
        self.transport = transport
        if transport == "tls":
            self.certs = os.path.join(self.work, "certs")
            subprocess.run(["bash", os.path.join(src, "tests", "integration", "nb_make_certs.sh"),
                            self.certs], check=True, stdout=subprocess.DEVNULL)
            dev["transport"] = "tls"
            dev["certificate-file"] = os.path.join(self.certs, "operator.pem")
            dev["private-key-file"] = os.path.join(self.certs, "operator.key")
            dev["ca-file"] = os.path.join(self.certs, "ca.pem")
        self._write_config(fabric)

    def _devsim_credentials(self):
        """ocs-devsim's options for the fleet's transport."""
        if self.transport == "tls":
            c = self.certs
            return ["--user", "ocsd", "--tls-cert", os.path.join(c, "server.pem"),
                    "--tls-key", os.path.join(c, "server.key"),
                    "--tls-ca", os.path.join(c, "ca.pem")]
        return ["--user", "ocsd", "--password-file", self.pw_path]

    def _prepare(self, build, src, prefix, fabric_file):
        """What every fleet has: binaries, a work directory with the device
        password file and the state directory, N_DEV reserved ports; returns
        the example fabric file deploy/fabrics/<fabric_file> to adapt."""
        self.build, self.src = build, src
        self.devsim = os.path.join(build, "southbound", "ocs-devsim")
        self.ocsd_bin = os.path.join(build, "daemon", "ocsd")
        self.work = tempfile.mkdtemp(prefix=prefix)
        self.password = prefix + os.urandom(8).hex()
        self.ocsd = None
        self.grpc_port = self.metrics_port = 0
        self.starts = 0
        self.devsim_proc = None
        self.transport = "ssh"
        self.pw_path = os.path.join(self.work, "pw")
        with open(os.open(self.pw_path, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
            f.write(self.password + "\n")
        self.base = testports.reserve(self.N_DEV)
        self.state_dir = os.path.join(self.work, "state")
        os.makedirs(self.state_dir)
        self.log_path = os.path.join(self.work, "ocsd.log")
        with open(os.path.join(src, "deploy", "fabrics", fabric_file)) as f:
            return json.load(f)

    def _set_access(self, dev, confirm_timeout_s, switch_time_us):
        """The fabric file's `devices` object pointed at this fleet."""
        dev["password-file"] = self.pw_path
        dev["port-base"] = self.base
        dev["username"] = "ocsd"
        dev["confirm-timeout-s"] = confirm_timeout_s
        dev["switch-time-us"] = switch_time_us

    def _write_config(self, fabric):
        self.cfg = os.path.join(self.work, "fabric.json")
        with open(self.cfg, "w") as f:
            json.dump(fabric, f, indent=2)

    def start_devices(self, switch_ms=5, *extra):
        """Starts the fleet (again, on the same ports); extra: more ocs-devsim
        arguments, e.g. "--fault", "hang@confirm=20000"."""
        log = open(os.path.join(self.work, "devsim.log"), "a")
        self.devsim_proc = subprocess.Popen(
            [self.devsim, "--listen", f"127.0.0.1:{self.base}", "--count", str(self.N_DEV),
             "--ports", "8"] + self._devsim_credentials() +
            ["--unidirectional", "--switch-ms", str(switch_ms)] + list(extra),
            stdout=log, stderr=log)
        log.close()
        testports.wait_listening("127.0.0.1", self.base, "ocs-devsim", START_TIMEOUT_S,
                                 count=self.N_DEV, proc=self.devsim_proc)

    def start_ocsd(self, *extra, insecure=True, reconcile_s=1):
        """Starts ocsd and waits until it logged its gRPC and metrics ports.
        OCSD_WRAP in the environment is put before ocsd's command line (a
        benchmark run under valgrind; started with START_TIMEOUT_S x 10)."""
        assert self.ocsd is None or self.ocsd.poll() is not None
        wrap = os.environ.get("OCSD_WRAP", "").split()
        args = wrap + [self.ocsd_bin, "--config", self.cfg, "--state-dir", self.state_dir,
                "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0",
                "--reconcile-interval-s", str(reconcile_s)]
        if insecure:
            args.append("--insecure")
        log = open(self.log_path, "a")
        log.write(f"=== start {self.starts + 1}\n")
        log.flush()
        self.ocsd = subprocess.Popen(args + list(extra), stdout=log, stderr=log)
        log.close()
        deadline = time.time() + START_TIMEOUT_S * (10 if wrap else 1)
        while time.time() < deadline:
            text = self.log()
            grpc_ports = re.findall(r"gRPC on \S+ \(port (\d+)", text)
            if len(grpc_ports) >= self.starts + 1:
                self.grpc_port = int(grpc_ports[-1])
                self.metrics_port = int(re.findall(r"metrics on \S+ \(port (\d+)", text)[-1])
                self.starts += 1
                for port in (self.grpc_port, self.metrics_port):
                    testports.wait_listening("127.0.0.1", port, "ocsd", START_TIMEOUT_S,
                                             proc=self.ocsd)
                return self.ocsd
            if self.ocsd.poll() is not None:
                raise RuntimeError("ocsd exited %d:\n%s" % (self.ocsd.returncode, text))
            time.sleep(0.05)
        raise RuntimeError("ocsd did not start:\n" + self.log())

    def kill_ocsd(self):
        """kill -9: no chance to clean up."""
        self.ocsd.send_signal(signal.SIGKILL)
        self.ocsd.wait()

    def stop_ocsd(self, timeout_s=30):
        """SIGTERM; returns the exit code."""
        self.ocsd.send_signal(signal.SIGTERM)
        try:
            return self.ocsd.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.ocsd.kill()
            self.ocsd.wait()
            return None

    @property
    def target(self):
        return f"127.0.0.1:{self.grpc_port}"

    def ocsctl(self, *args):
        """ocsctl (plaintext, this ocsd, 30 s deadline): the CompletedProcess."""
        return subprocess.run([os.path.join(self.build, "northbound", "ocsctl", "ocsctl"),
                               "--insecure", "--server", self.target, "--timeout-ms", "30000"] +
                              list(args), capture_output=True, text=True, timeout=60)

    def start_lab_job(self):
        """The devices and ocsd started, then submit_lab_job()."""
        self.start_devices()
        self.start_ocsd()
        return self.submit_lab_job()

    def submit_lab_job(self):
        """Once `ocsctl status` answers, the quickstart's job
        (deploy/jobs/lab-ring.json) submitted: the submit's CompletedProcess."""
        for _ in range(100):
            if self.ocsctl("status").returncode == 0:
                break
            time.sleep(0.1)
        return self.ocsctl("job", "submit",
                           os.path.join(self.src, "deploy", "jobs", "lab-ring.json"))

    def log(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def metrics(self):
        import urllib.request
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics",
                                    timeout=10) as r:
            return r.read().decode()

    def device_name(self, d):
        return f"ocs-g{d // self.PER_GROUP}-d{d % self.PER_GROUP}"

    def read_device(self, d, datastore=None):
        """[(in, out, status)] of device d, read over NETCONF (a <get>; with
        datastore "candidate", a <get-config> of it). ocs-devsim
        closes a session right after its hello when it cannot tell which
        device the session's socket belongs to (see southbound/README.md);
        nothing was read then, so the read is tried again (up to 8 times, backing
        off from 50 ms: under load ocsd's own sessions may keep such a port busy).
        ncclient usually reports that close as SessionCloseError or TransportError
        (paramiko's own EOFError during the key exchange), but when the close
        lands while the get is being sent, the get is queued to
        a session that is gone and ends in TimeoutExpiredError: retried too (the
        daemon_delta flake of issue 10, right after ocsd restarts and opens its 16
        sessions)."""
        subtree = f'<filter type="subtree"><cross-connects xmlns="{NS}"/></filter>'
        if self.transport == "tls":
            op = (f"<get-config><source><{datastore}/></source>{subtree}</get-config>"
                  if datastore else f"<get>{subtree}</get>")
            return self._rows(self.tls_rpc(d, op))
        from ncclient import manager
        from ncclient.operations.errors import TimeoutExpiredError
        from ncclient.transport.errors import TransportError
        from ncclient.transport.errors import SessionCloseError
        import ncclient.transport.ssh
        ncclient.transport.ssh.TICK = 0.001  # ncclient polls every 0.1 s otherwise
        for attempt in range(8):
            try:
                with manager.connect(host="127.0.0.1", port=self.base + d, username="ocsd",
                                     password=self.password, hostkey_verify=False,
                                     allow_agent=False, look_for_keys=False,
                                     timeout=10) as m:
                    m.timeout = 10  # the get's own deadline (ncclient's default: 30 s)
                    flt = ("subtree", f'<cross-connects xmlns="{NS}"/>')
                    reply = (m.get_config(source=datastore, filter=flt) if datastore
                             else m.get(filter=flt))
                break
            except (TransportError, SessionCloseError, TimeoutExpiredError, EOFError) as e:
                # EOFError: paramiko's, raised as is when the simulator
                # closes the session during the SSH key exchange
                # (daemon_release_fail under ASan, in CI)
                if attempt == 7:
                    raise
                if isinstance(e, TimeoutExpiredError):
                    print(f"{self.device_name(d)}: read timed out, reading again", flush=True)
                time.sleep(min(0.05 * 2 ** attempt, 0.5))
        return self._rows(reply.data_xml)

    @staticmethod
    def _rows(xml):
        rows = []
        for conn in ET.fromstring(xml).iter(f"{{{NS}}}connection"):
            rows.append((int(conn.findtext(f"{{{NS}}}input")),
                         int(conn.findtext(f"{{{NS}}}output")),
                         conn.findtext(f"{{{NS}}}status") or ""))
        return sorted(rows)

    def tls_rpc(self, d, op):
        """One RPC (op: the operation's XML) to device d over NETCONF 1.1 on
        TLS with the fleet's client certificate; returns the <rpc-reply> XML.
        Retried like read_device when the device closes the session after
        its hello; an <rpc-error> raises RuntimeError."""
        import socket
        import ssl
        ctx = ssl.create_default_context(cafile=os.path.join(self.certs, "ca.pem"))
        ctx.load_cert_chain(os.path.join(self.certs, "operator.pem"),
                            os.path.join(self.certs, "operator.key"))
        hello = ('<hello xmlns="urn:ietf:params:xml:ns:netconf:base:1.0"><capabilities>'
                 "<capability>urn:ietf:params:netconf:base:1.1</capability>"
                 "</capabilities></hello>]]>]]>").encode()
        rpc = ('<rpc xmlns="urn:ietf:params:xml:ns:netconf:base:1.0" message-id="1">'
               f"{op}</rpc>").encode()
        for attempt in range(8):
            try:
                with socket.create_connection(("127.0.0.1", self.base + d), timeout=30) as raw, \
                        ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
                    s.sendall(hello + b"\n#%d\n" % len(rpc) + rpc + b"\n##\n")
                    buf = b""
                    while b"]]>]]>" not in buf:
                        buf += self._recv(s)
                    buf = buf.split(b"]]>]]>", 1)[1]
                    reply = b""
                    while True:  # RFC 6242 chunks up to the end-of-chunks marker
                        while not re.match(rb"\n#(#|\d+)\n", buf):
                            buf += self._recv(s)
                        m = re.match(rb"\n#(#|\d+)\n", buf)
                        buf = buf[m.end():]
                        if m.group(1) == b"#":
                            break
                        n = int(m.group(1))
                        while len(buf) < n:
                            buf += self._recv(s)
                        reply, buf = reply + buf[:n], buf[n:]
                break
            except (OSError, EOFError):
                if attempt == 7:
                    raise
                time.sleep(min(0.05 * 2 ** attempt, 0.5))
        text = reply.decode()
        if "<rpc-error>" in text:
            raise RuntimeError(f"{self.device_name(d)}: {text}")
        return text

    @staticmethod
    def _recv(s):
        data = s.recv(65536)
        if not data:
            raise EOFError("the device closed the session")
        return data

    def read_devices(self):
        """{device name: [(in, out, status)]} for every device, read one after
        another (16 ncclient sessions at once time out against the fleet)."""
        out, errors = {}, []

        def one(d):
            try:
                out[self.device_name(d)] = self.read_device(d)
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(f"{self.device_name(d)}: {e!r}")

        for d in range(self.N_DEV):
            one(d)
        if errors:
            raise RuntimeError("reading devices: " + "; ".join(errors))
        return out

    def one_way(self, devices):
        """Cross-connects that break L2 symmetry under cross wiring: device
        2m carries in p -> out q exactly when device 2m+1 of the same group
        carries in q -> out p, with p != q. Returns the offending ones
        (empty when the fabric is symmetric)."""
        have = {(name, i, o) for name, rows in devices.items() for (i, o, _) in rows}
        bad = []
        for (name, i, o) in sorted(have):
            g, d = (int(x) for x in re.match(r"ocs-g(\d+)-d(\d+)$", name).groups())
            peer = f"ocs-g{g}-d{d ^ 1}"
            if i == o or (peer, o, i) not in have:
                bad.append((name, i, o))
        return bad

    def _session(self, node):
        """An ncclient session to device `node` (a ring node's agent, a switch),
        retried like read_device."""
        from ncclient import manager
        from ncclient.transport.errors import TransportError
        from ncclient.transport.errors import SessionCloseError
        import ncclient.transport.ssh
        ncclient.transport.ssh.TICK = 0.001
        for attempt in range(8):
            try:
                m = manager.connect(host="127.0.0.1", port=self.base + node, username="ocsd",
                                    password=self.password, hostkey_verify=False,
                                    allow_agent=False, look_for_keys=False, timeout=30)
                # 30 s: one ocs-devsim serves every node, and under ASan on a
                # loaded 2-core machine a read took longer than 10 s
                m.timeout = 30
                return m
            except (TransportError, SessionCloseError, EOFError):  # as read_device
                if attempt == 7:
                    raise
                time.sleep(min(0.05 * 2 ** attempt, 0.5))

    def get_data(self, node, flt, timeout=None):
        """The data_xml of one <get> on device `node` with filter `flt`, read on
        a fresh session and read again (up to 8 times, backing off from 50 ms)
        when the session is closed under it or the reply does not come: a read
        changes nothing, and on a loaded machine ocs-devsim may close a session
        mid-RPC (libnetconf2's inactive-read timeout; ring_daemon in CI)."""
        from ncclient.operations.errors import TimeoutExpiredError
        from ncclient.transport.errors import SessionCloseError, TransportError
        for attempt in range(8):
            try:
                with self._session(node) as m:
                    if timeout is not None:
                        m.timeout = timeout
                    return m.get(filter=flt).data_xml
            except (TransportError, SessionCloseError, TimeoutExpiredError):
                if attempt == 7:
                    raise
                print(f"{self.device_name(node)}: read failed, reading again", flush=True)
                time.sleep(min(0.05 * 2 ** attempt, 0.5))

    def set_faults(self, node, spec):
        """The ocs-devsim:set-faults RPC on device `node` (e.g. "node-fault",
        "fail-port=3", "hang@confirm=3000"; "" clears every knob)."""
        if self.transport == "tls":
            self.tls_rpc(node, f'<set-faults xmlns="{DEVSIM_NS}"><spec>{spec}</spec>'
                         "</set-faults>")
            return
        from ncclient.xml_ import to_ele
        from ncclient.operations.errors import TimeoutExpiredError
        from ncclient.transport.errors import SessionCloseError, TransportError
        # set-faults replaces every knob, so it is safe to send again: on a
        # fresh session when the simulator closed the first one under it (on
        # a loaded machine libnetconf2's 20 s inactive-read timeout closed
        # one mid-RPC: ring_daemon, in CI), or when its reply never came
        # (the same close, seen by ncclient as a timeout: daemon_release_fail
        # under ASan, in CI)
        for attempt in range(3):
            try:
                with self._session(node) as m:
                    m.dispatch(to_ele(f'<set-faults xmlns="{DEVSIM_NS}"><spec>{spec}</spec>'
                                      "</set-faults>"))
                return
            except (TransportError, SessionCloseError, TimeoutExpiredError):
                if attempt == 2:
                    raise

    def close(self):
        for p in (self.ocsd, self.devsim_proc):
            if p is not None and p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in (self.ocsd, self.devsim_proc):
            if p is None:
                continue
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def dump_logs(self, lines=40):
        for name in ("ocsd.log", "devsim.log"):
            path = os.path.join(self.work, name)
            if os.path.exists(path):
                print(f"--- {name} (tail)")
                with open(path, errors="replace") as f:
                    print("".join(f.readlines()[-lines:]))

    def remove(self):
        """Removes the work directory, unless OCSD_TEST_KEEP is set (then it
        says where it is, with the logs and the state store)."""
        if os.environ.get("OCSD_TEST_KEEP"):
            print(f"kept {self.work}")
            return
        shutil.rmtree(self.work, ignore_errors=True)


def gen_stubs(proto_dir, out_dir):
    """Generates the python stubs of proto/ into out_dir with grpc_tools and
    makes them importable (ocs.v1.*, grpc.health.v1.*)."""
    import sys
    import grpc
    os.makedirs(out_dir, exist_ok=True)
    subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", "-I" + proto_dir, "--python_out=" + out_dir,
         "--grpc_python_out=" + out_dir, "ocs/v1/fabric.proto", "ocs/v1/jobs.proto",
         "ocs/v1/events.proto", "grpc/health/v1/health.proto"], check=True)
    sys.path.insert(0, out_dir)
    # The generated grpc/health/v1 package lives beside grpcio's own "grpc".
    grpc.__path__.append(os.path.join(out_dir, "grpc"))


def fabric_counter_problems(fabric, fabric_pb2, timeout=30):
    """Every device counter of GetFabric against ListDevices, read back to
    back (issue 28 #2): devices = the devices listed, devices_connected =
    those HEALTHY, devices_drained = those drained. Returns what differs
    ([] when all agree)."""
    s = fabric.GetFabric(fabric_pb2.GetFabricRequest(), timeout=timeout)
    devs = fabric.ListDevices(fabric_pb2.ListDevicesRequest(), timeout=timeout).devices
    want = {"devices": len(devs),
            "devices_connected": sum(d.health == fabric_pb2.DEVICE_HEALTH_HEALTHY for d in devs),
            "devices_drained": sum(d.drained for d in devs)}
    return [f"GetFabric.{k} {getattr(s, k)} != {v} from ListDevices"
            for k, v in want.items() if getattr(s, k) != v]


class Script:
    """A scripted end-to-end test on a fleet: check() records failures and
    goes on, run() runs main(), reports an exception as a failure, dumps
    the logs when anything failed, always stops and removes the fleet, and
    returns the exit code (0 passed, 1 failed)."""

    def __init__(self, name, fleet):
        self.name, self.fleet, self.failures = name, fleet, []

    def check(self, cond, what):
        if not cond:
            self.failures.append(what)
            print("FAIL:", what, flush=True)

    def run(self, main):
        try:
            main()
        except Exception as e:  # reported with the daemon's log, not a bare traceback
            self.failures.append(repr(e))
            print("ERROR:", repr(e), flush=True)
        finally:
            if self.failures:
                self.fleet.dump_logs()
            self.fleet.close()
            self.fleet.remove()
        print(f"{self.name}:", "FAILED" if self.failures else "passed",
              f"({len(self.failures)} failure(s))")
        return 1 if self.failures else 0


TRX_NS = "urn:ocsd:yang:ocs-transceiver"
NC_NS = "urn:ietf:params:xml:ns:netconf:base:1.0"
DEVSIM_NS = "urn:ocsd:yang:ocs-devsim"


def ring_bundles(rings):
    """{node: {bundle: peer or None}} for the nodes of rings (the physical
    model of solvers/hbd_ring.h: node i of a ring reaches node i-1 through
    bundle 0 and node i+1 through bundle 1; None: loopback)."""
    out = {}
    for r in rings:
        nodes = list(r.nodes)
        for i, n in enumerate(nodes):
            out[n] = {0: nodes[i - 1] if i > 0 else None,
                      1: nodes[i + 1] if i + 1 < len(nodes) else None}
    return out


class RingFleet(Fleet):
    """An OCSTrx ring domain: one ocs-devsim process serving every node's
    transceiver agent (--model ocs-transceiver --count N, device i on port
    base+i serves node i), the fabric file derived from
    deploy/fabrics/ocstrx-ring.json with the sizes given, and at most one
    ocsd on it at a time. Nodes are read and fault knobs set over NETCONF
    with ncclient."""

    def __init__(self, build, src, tors=16, nodes_per_tor=4, gpus_per_node=4, k_hops=3,
                 bundles=2, closed=False, confirm_timeout_s=60, prefix="ocsd-ring-"):
        self.geometry = (tors, nodes_per_tor, k_hops, bundles, closed)
        self.N_DEV = tors * nodes_per_tor
        fabric = self._prepare(build, src, prefix, "ocstrx-ring.json")
        ring = fabric["ocsd-fabric:fabric"]["ocstrx-ring"]
        ring.update({"tors": tors, "nodes-per-tor": nodes_per_tor,
                     "gpus-per-node": gpus_per_node, "k-hops": k_hops, "bundles": bundles,
                     "closed": closed})
        self._set_access(ring["devices"], confirm_timeout_s, 200)  # start_devices()' default
        self._write_config(fabric)

    def start_devices(self, switch_us=200):
        tors, per_tor, k, bundles, closed = self.geometry
        log = open(os.path.join(self.work, "devsim.log"), "w")
        args = [self.devsim, "--listen", f"127.0.0.1:{self.base}", "--count", str(self.N_DEV),
                "--model", "ocs-transceiver", "--ring-tors", str(tors),
                "--ring-nodes-per-tor", str(per_tor), "--ring-k", str(k),
                "--bundles", str(bundles), "--switch-us", str(switch_us),
                "--user", "ocsd", "--password-file", self.pw_path]
        if closed:
            args.append("--ring-closed")
        self.devsim_proc = subprocess.Popen(args, stdout=log, stderr=log)
        log.close()
        testports.wait_listening("127.0.0.1", self.base, "ocs-devsim", START_TIMEOUT_S,
                                 count=self.N_DEV, proc=self.devsim_proc)

    def start_ocsd(self, *extra, insecure=True, reconcile_s=0, subscribed_timeout_s=None):
        """Starts ocsd and waits until every node's notification subscription
        is up (ocsd_nodes_subscribed), so that no injected fault goes unseen."""
        proc = super().start_ocsd(*extra, insecure=insecure, reconcile_s=reconcile_s)
        deadline = time.time() + (subscribed_timeout_s or max(START_TIMEOUT_S, self.N_DEV / 4))
        while time.time() < deadline:
            m = re.search(r"^ocsd_nodes_subscribed (\S+)$", self.metrics(), re.M)
            if m and int(float(m.group(1))) == self.N_DEV:
                return proc
            time.sleep(0.1)
        raise RuntimeError("ocsd did not subscribe to every node:\n" + self.log())

    def device_name(self, d):
        return f"trx-n{d}"

    def set_bundle(self, node, bundle, distance, direction):
        """Edits one bundle of node on its agent (candidate, then commit),
        behind ocsd's back: external `distance` hops `direction` ("up",
        "down"), or loopback when distance is 0."""
        if distance:
            body = (f"<path>external</path><external><distance>{distance}</distance>"
                    f"<direction>{direction}</direction></external>")
        else:
            body = "<path>loopback</path>"
        cfg = (f'<nc:config xmlns:nc="{NC_NS}"><transceivers xmlns="{TRX_NS}"><node>'
               f'<id>{node}</id><bundle nc:operation="replace"><id>{bundle}</id>{body}</bundle>'
               "</node></transceivers>"
               "</nc:config>")
        with self._session(node) as m:
            with m.locked("candidate"):
                m.edit_config(target="candidate", config=cfg)
                m.commit()

    def position(self, node):
        """Deployment position of a node on the line (fabric.h: index * tors + tor)."""
        tors, per_tor = self.geometry[0], self.geometry[1]
        return (node % per_tor) * tors + node // per_tor

    def read_node(self, node):
        """(faulty, {bundle: (path, distance, direction, peer_node or None)}) of
        node as its agent reports it (configuration and state)."""
        xml = self.get_data(node, ("subtree", f'<transceivers xmlns="{TRX_NS}"/>'))
        faulty, bundles = False, {}
        for n in ET.fromstring(xml).iter(f"{{{TRX_NS}}}node"):
            if int(n.findtext(f"{{{TRX_NS}}}id")) != node:
                continue
            faulty = (n.findtext(f"{{{TRX_NS}}}faulty") or "false") == "true"
            for b in n.findall(f"{{{TRX_NS}}}bundle"):
                ext = b.find(f"{{{TRX_NS}}}external")
                peer = b.findtext(f"{{{TRX_NS}}}peer-node")
                bundles[int(b.findtext(f"{{{TRX_NS}}}id"))] = (
                    b.findtext(f"{{{TRX_NS}}}path") or "loopback",
                    int(ext.findtext(f"{{{TRX_NS}}}distance")) if ext is not None else 0,
                    ext.findtext(f"{{{TRX_NS}}}direction") if ext is not None else None,
                    int(peer) if peer is not None else None)
        return faulty, bundles



class RailFleet(Fleet):
    """A rail-OCS fabric (issue 12): one ocs-devsim process serving one
    ocs-switch per OCS group (--count groups, --unidirectional: a join is
    two one-way cross-connects), the fabric file derived from
    deploy/fabrics/rail-ocs.json with the sizes given, and at most one ocsd
    on it at a time. Numbering as solvers/fabric.h: GPU g = server * rails +
    rail; device d serves group d."""

    def __init__(self, build, src, servers=6, rails=4, servers_per_ocs=3, spares=1,
                 confirm_timeout_s=60, prefix="ocsd-rail-"):
        self.servers, self.rails = servers, rails
        self.spo, self.spares = servers_per_ocs, spares
        self.active = servers_per_ocs - spares  # A
        self.GROUPS = self.N_DEV = servers // servers_per_ocs
        self.PER_GROUP = 1
        self.PORTS = (servers_per_ocs + self.active) * rails
        fabric = self._prepare(build, src, prefix, "rail-ocs.json")
        rail = fabric["ocsd-fabric:fabric"]["rail-ocs"]
        rail.update({"servers": servers, "rails": rails, "servers-per-ocs": servers_per_ocs,
                     "spare-servers-per-ocs": spares})
        self._set_access(rail["devices"], confirm_timeout_s, 5000)  # start_devices()' default
        self._write_config(fabric)

    def start_devices(self, switch_ms=5):
        log = open(os.path.join(self.work, "devsim.log"), "w")
        self.devsim_proc = subprocess.Popen(
            [self.devsim, "--listen", f"127.0.0.1:{self.base}", "--count", str(self.N_DEV),
             "--ports", str(self.PORTS), "--user", "ocsd", "--password-file", self.pw_path,
             "--unidirectional", "--switch-ms", str(switch_ms)],
            stdout=log, stderr=log)
        log.close()
        testports.wait_listening("127.0.0.1", self.base, "ocs-devsim", START_TIMEOUT_S,
                                 count=self.N_DEV, proc=self.devsim_proc)

    def device_name(self, d):
        return f"rail-ocs-g{d}"

    # the numbering of solvers/fabric.h
    def gpu(self, server, rail):
        return server * self.rails + rail

    def gpu_port(self, gpu):
        """(device, GPU-side port) of a GPU."""
        s, r = divmod(gpu, self.rails)
        return s // self.spo, (s % self.spo) * self.rails + r

    def switch_port(self, rail_port):
        """(device, switch-side port) of a rail port."""
        per_group = self.active * self.rails
        g, k = divmod(rail_port, per_group)
        return g, self.spo * self.rails + k

    def port_map(self):
        """{rail port: GPU} read from every device with ncclient: rail port w
        is joined to GPU g when both g -> w and w -> g are there. Also
        returns the cross-connects that are not such a join (one-way ones)."""
        joins, one_way = {}, []
        per_group = self.active * self.rails
        gpu_side = self.spo * self.rails
        for d in range(self.N_DEV):
            have = {(i, o) for (i, o, _) in self.read_device(d)}
            for (i, o) in sorted(have):
                if (o, i) not in have or (i < gpu_side) == (o < gpu_side):
                    one_way.append((self.device_name(d), i, o))
                elif i < gpu_side:
                    s = d * self.spo + i // self.rails
                    joins[d * per_group + (o - gpu_side)] = s * self.rails + i % self.rails
        return joins, one_way


class Watcher:
    """Collects the events of one Watch call (a gRPC response stream) on a
    thread; wait() returns the first one a predicate accepts."""

    def __init__(self, call, timeout_s):
        self.q = queue.Queue()
        self.call = call
        self.timeout_s = timeout_s
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self):
        try:
            for ev in self.call:
                self.q.put(ev)
        except Exception:  # the call cancelled or ended: no more events
            pass

    def wait(self, pred, timeout=None):
        deadline = time.time() + (self.timeout_s if timeout is None else timeout)
        while time.time() < deadline:
            try:
                ev = self.q.get(timeout=max(0.01, deadline - time.time()))
            except queue.Empty:
                break
            if pred(ev):
                return ev
        return None

    def close(self):
        self.call.cancel()


OPSW_NS = "http://www.polatis.com/yang/optical-switch"


class MixedFleet(Fleet):
    """The mixed lab fabric (deploy/fabrics/lab-mixed.json, issue 23): the lab
    fabric's 16 devices of 8 ports with the OCS groups the file names
    `polatis` simulated as Polatis switches (ocs-devsim --model polatis) and
    the others as ocs-switch devices; one ocs-devsim process per OCS group
    (devsim_procs[g]), so that a group can be stopped alone. read_device
    reads a polatis device's pairs with ncclient and maps them to ocsd's
    ports from the YANG data itself (an N x N switch: ocsd's port k is
    ingress 1+k and egress N+1+k, the fabric file's default port map);
    a pair outside that numbering comes back with status "unmapped I->E"."""

    PORTS = 8

    def __init__(self, build, src, confirm_timeout_s=60, prefix="ocsd-mixed-",
                 rpc_timeout_ms=None):
        fabric = self._prepare(build, src, prefix, "lab-mixed.json")
        dev = fabric["ocsd-fabric:fabric"]["devices"]
        self._set_access(dev, confirm_timeout_s, 5000)
        if rpc_timeout_ms:
            dev["rpc-timeout-ms"] = rpc_timeout_ms
        polatis = {g["id"] for g in dev.get("group", []) if g.get("model") == "polatis"}
        self.models = ["polatis" if d // self.PER_GROUP in polatis else "ocs-switch"
                       for d in range(self.N_DEV)]
        self.devsim_procs = []
        self._write_config(fabric)

    def start_devices(self, switch_ms=5, *extra):
        """One ocs-devsim per OCS group, of that group's model; extra as Fleet's."""
        log = open(os.path.join(self.work, "devsim.log"), "a")
        self.devsim_procs = []
        for g in range(self.GROUPS):
            first = g * self.PER_GROUP
            self.devsim_procs.append(subprocess.Popen(
                [self.devsim, "--listen", f"127.0.0.1:{self.base + first}",
                 "--count", str(self.PER_GROUP), "--ports", str(self.PORTS),
                 "--model", self.models[first]] + self._devsim_credentials() +
                ["--unidirectional", "--switch-ms", str(switch_ms)] + list(extra),
                stdout=log, stderr=log))
        log.close()
        for g, proc in enumerate(self.devsim_procs):
            testports.wait_listening("127.0.0.1", self.base + g * self.PER_GROUP, "ocs-devsim",
                                     START_TIMEOUT_S, count=self.PER_GROUP, proc=proc)
        self.devsim_proc = self.devsim_procs[0]

    def read_device(self, d, datastore=None):
        """[(in, out, status)] of device d in ocsd's port numbers. A polatis
        device's pairs come from one <get> of cross-connects and port-config;
        status is "connected" when both ports of a pair are ENABLED, else
        their two statuses."""
        if self.models[d] != "polatis":
            return super().read_device(d, datastore)
        flt = (f'<filter xmlns="urn:ietf:params:xml:ns:netconf:base:1.0" type="subtree">'
               f'<cross-connects xmlns="{OPSW_NS}"/>'
               f'<port-config xmlns="{OPSW_NS}"><port><port-id/><status/></port></port-config>'
               "</filter>")
        return self.polatis_rows(self.get_data(d, flt, timeout=10), self.PORTS)

    @staticmethod
    def polatis_rows(xml, n):
        """The rows of a polatis <get> reply on an n x n switch (see read_device)."""
        q = lambda tag: f"{{{OPSW_NS}}}{tag}"  # noqa: E731
        root = ET.fromstring(xml)
        status = {int(p.findtext(q("port-id"))): p.findtext(q("status")) or ""
                  for pc in root.iter(q("port-config")) for p in pc.iter(q("port"))}
        rows = []
        for p in root.iter(q("pair")):
            i, e = int(p.findtext(q("ingress"))), int(p.findtext(q("egress")))
            if not (1 <= i <= n and n + 1 <= e <= 2 * n):
                rows.append((i, e, f"unmapped {i}->{e}"))
                continue
            st = (status.get(i, "?"), status.get(e, "?"))
            rows.append((i - 1, e - n - 1,
                         "connected" if st == ("ENABLED", "ENABLED") else "/".join(st)))
        return sorted(rows)

    def close(self):
        procs = [self.ocsd] + list(self.devsim_procs)
        for p in procs:
            if p is not None and p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            if p is None:
                continue
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

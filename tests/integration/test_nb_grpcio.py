#!/usr/bin/python3
"""test_nb_grpcio.py - drives the northbound gRPC server with python3-grpcio,
a client nobody here wrote, using stubs generated at test time from
proto/ with grpc_tools.protoc.

The server is nb_test_server (the real ocs_northbound library with a
test-only table-answering handler), started with mTLS certificates made by
nb_make_certs.sh. Checks: health Check and Watch, roles from the client
certificate, clients without (or with an untrusted) certificate refused,
validation errors naming the field path, a 64 MB message refused, unknown
methods, idempotent resubmission, the Events stream, concurrent clients,
and a clean shutdown that ends streams with UNAVAILABLE. A second server
(--ring) plays an OCSTrx ring domain: ring jobs, ListRings, operator-only
MarkNode, ring-request validation and the ring/node events of Watch.

usage: test_nb_grpcio.py NB_TEST_SERVER PROTO_DIR MAKE_CERTS_SCRIPT
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

SERVER, PROTO_DIR, MAKE_CERTS = sys.argv[1:4]
del sys.argv[1:4]  # leave unittest's own arguments

WORK = tempfile.mkdtemp(prefix="nb_grpcio_")
atexit.register(shutil.rmtree, WORK, ignore_errors=True)
GEN = os.path.join(WORK, "gen")
CERTS = os.path.join(WORK, "certs")
os.makedirs(GEN)
subprocess.run(
    [sys.executable, "-m", "grpc_tools.protoc", "-I" + PROTO_DIR, "--python_out=" + GEN,
     "--grpc_python_out=" + GEN, "ocs/v1/fabric.proto", "ocs/v1/jobs.proto",
     "ocs/v1/events.proto", "grpc/health/v1/health.proto"], check=True)
subprocess.run(["bash", MAKE_CERTS, CERTS], check=True)
sys.path.insert(0, GEN)
# The generated grpc/health/v1 package lives beside grpcio's own "grpc".
grpc.__path__.append(os.path.join(GEN, "grpc"))
from ocs.v1 import events_pb2, events_pb2_grpc  # noqa: E402
from ocs.v1 import fabric_pb2, fabric_pb2_grpc  # noqa: E402
from ocs.v1 import jobs_pb2, jobs_pb2_grpc  # noqa: E402
from grpc.health.v1 import health_pb2, health_pb2_grpc  # noqa: E402

TIMEOUT_S = 10


def cert(name):
    with open(os.path.join(CERTS, name), "rb") as f:
        return f.read()


class Server:
    """One nb_test_server process; stop() checks that it exits cleanly."""

    def __init__(self, *args):
        self.proc = subprocess.Popen([SERVER] + list(args), stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
        self.args = args
        ready, _, _ = select.select([self.proc.stdout], [], [], TIMEOUT_S)
        line = self.proc.stdout.readline().decode() if ready else ""
        if not line.startswith("port "):
            self.proc.kill()
            raise RuntimeError("server did not start: %r %r" %
                               (line, self.proc.stderr.read().decode()))
        self.port = int(line.split()[1])
        self.target = "127.0.0.1:%d" % self.port

    def stop(self):
        self.proc.terminate()
        try:
            rc = self.proc.wait(TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError("server did not stop within %d s" % TIMEOUT_S)
        err = self.proc.stderr.read().decode()
        self.proc.stdout.close()
        self.proc.stderr.close()
        if rc != 0:
            raise AssertionError("server exited %d: %s" % (rc, err))


def tls_channel(target, role):
    if role is None:
        creds = grpc.ssl_channel_credentials(root_certificates=cert("ca.pem"))
    else:
        creds = grpc.ssl_channel_credentials(root_certificates=cert("ca.pem"),
                                             private_key=cert(role + ".key"),
                                             certificate_chain=cert(role + ".pem"))
    return grpc.secure_channel(target, creds)


def gpu(g):
    leaf = g // 8
    return jobs_pb2.GpuPlacement(gpu=g, leaf=leaf, pod=leaf // 4)


def job(job_id, gpus=(0, 40, 100), pairs=((0, 5, 2), (5, 12, 1)), **kw):
    return jobs_pb2.JobSpec(
        id=job_id, placement=jobs_pb2.Placement(gpus=[gpu(g) for g in gpus]),
        leaf_demand=jobs_pb2.LeafDemand(
            pairs=[jobs_pb2.LeafPair(a=a, b=b, links=n) for a, b, n in pairs]), **kw)


class NorthboundTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server("--ca", os.path.join(CERTS, "ca.pem"),
                            "--cert", os.path.join(CERTS, "server.pem"),
                            "--key", os.path.join(CERTS, "server.key"))
        cls.channels = {r: tls_channel(cls.server.target, r)
                        for r in ("viewer", "scheduler", "operator", "norole", "tworoles")}

    @classmethod
    def tearDownClass(cls):
        for ch in cls.channels.values():
            ch.close()
        cls.server.stop()

    def jobs(self, role="scheduler"):
        return jobs_pb2_grpc.JobsStub(self.channels[role])

    def fabric(self, role="operator"):
        return fabric_pb2_grpc.FabricStub(self.channels[role])

    def refused(self, fn, req, code, details=None):
        with self.assertRaises(grpc.RpcError) as cm:
            fn(req, timeout=TIMEOUT_S)
        self.assertEqual(cm.exception.code(), code, cm.exception.details())
        if details is not None:
            self.assertEqual(cm.exception.details(), details)
        return cm.exception.details()

    def test_health_check(self):
        stub = health_pb2_grpc.HealthStub(self.channels["viewer"])
        for service in ("", "ocs.v1.Jobs", "ocs.v1.Fabric", "ocs.v1.Events"):
            r = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=TIMEOUT_S)
            self.assertEqual(r.status, health_pb2.HealthCheckResponse.SERVING)
        self.refused(stub.Check, health_pb2.HealthCheckRequest(service="ocs.v9.Nope"),
                     grpc.StatusCode.NOT_FOUND, 'service: "ocs.v9.Nope" is not known')
        # A certificate without a role may still ask for health.
        stub = health_pb2_grpc.HealthStub(self.channels["norole"])
        self.assertEqual(stub.Check(health_pb2.HealthCheckRequest(), timeout=TIMEOUT_S).status,
                         health_pb2.HealthCheckResponse.SERVING)

    def test_health_watch(self):
        stub = health_pb2_grpc.HealthStub(self.channels["viewer"])
        stream = stub.Watch(health_pb2.HealthCheckRequest(service="ocs.v1.Jobs"))
        self.assertEqual(next(stream).status, health_pb2.HealthCheckResponse.SERVING)
        stream.cancel()
        stream = stub.Watch(health_pb2.HealthCheckRequest(service="unknown.Service"))
        self.assertEqual(next(stream).status, health_pb2.HealthCheckResponse.SERVICE_UNKNOWN)
        stream.cancel()

    def test_roles(self):
        spec = job("role-job")
        self.refused(self.jobs("viewer").SubmitJob, spec, grpc.StatusCode.PERMISSION_DENIED,
                     "role viewer may not call Jobs/SubmitJob (needs scheduler)")
        self.refused(self.jobs("viewer").PlanJob, spec, grpc.StatusCode.PERMISSION_DENIED)
        for role in ("norole", "tworoles"):
            self.refused(self.jobs(role).ListJobs, jobs_pb2.ListJobsRequest(),
                         grpc.StatusCode.PERMISSION_DENIED,
                         "client certificate has no role (its subject needs exactly one OU "
                         "of scheduler, operator, viewer)")
        # viewer reads
        self.jobs("viewer").ListJobs(jobs_pb2.ListJobsRequest(), timeout=TIMEOUT_S)
        self.fabric("viewer").ListDevices(fabric_pb2.ListDevicesRequest(), timeout=TIMEOUT_S)
        # scheduler submits but may not drain
        self.assertTrue(self.jobs("scheduler").SubmitJob(spec, timeout=TIMEOUT_S).created)
        self.refused(self.fabric("scheduler").DrainDevice,
                     fabric_pb2.DrainDeviceRequest(device="ocs-g1-d1"),
                     grpc.StatusCode.PERMISSION_DENIED,
                     "role scheduler may not call Fabric/DrainDevice (needs operator)")
        # operator drains and also submits
        r = self.fabric("operator").DrainDevice(fabric_pb2.DrainDeviceRequest(device="ocs-g1-d1"),
                                                timeout=TIMEOUT_S)
        self.assertTrue(r.device.drained)
        r = self.fabric("operator").UndrainDevice(
            fabric_pb2.UndrainDeviceRequest(device="ocs-g1-d1"), timeout=TIMEOUT_S)
        self.assertFalse(r.device.drained)
        self.jobs("operator").PlanJob(spec, timeout=TIMEOUT_S)

    def test_clients_without_trusted_certificate_refused(self):
        for role in (None, "rogue"):
            ch = tls_channel(self.server.target, role)
            stub = jobs_pb2_grpc.JobsStub(ch)
            with self.assertRaises(grpc.RpcError) as cm:
                stub.ListJobs(jobs_pb2.ListJobsRequest(), timeout=TIMEOUT_S)
            self.assertEqual(cm.exception.code(), grpc.StatusCode.UNAVAILABLE)
            ch.close()
        # and plaintext against the TLS port
        ch = grpc.insecure_channel(self.server.target)
        with self.assertRaises(grpc.RpcError) as cm:
            jobs_pb2_grpc.JobsStub(ch).ListJobs(jobs_pb2.ListJobsRequest(), timeout=TIMEOUT_S)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.UNAVAILABLE)
        ch.close()

    def test_validation_names_the_field(self):
        submit = self.jobs().SubmitJob
        bad = job("v1")
        bad.placement.gpus[1].leaf = 100
        self.refused(submit, bad, grpc.StatusCode.INVALID_ARGUMENT,
                     "placement.gpus[1].leaf: 100 is outside 0..15")
        bad = job("v2", gpus=(0, 40, 100, 40))
        self.refused(submit, bad, grpc.StatusCode.INVALID_ARGUMENT,
                     "placement.gpus[3].gpu: 40 is listed twice (first at gpus[1])")
        bad = job("v3", pairs=((0, 7, 1),))
        self.refused(submit, bad, grpc.StatusCode.INVALID_ARGUMENT,
                     "leaf_demand.pairs[0].b: leaf 7 holds none of the job's GPUs")
        bad = job("v4", options=jobs_pb2.JobOptions(planner="delta-fast"))
        self.refused(self.jobs().PlanJob, bad, grpc.StatusCode.INVALID_ARGUMENT,
                     'options.planner: "delta-fast" is not a known planner '
                     '(leaf-centric, pod-centric)')
        self.refused(submit, jobs_pb2.JobSpec(id="v5", placement=job("x").placement),
                     grpc.StatusCode.INVALID_ARGUMENT,
                     "demand: required: set leaf_demand or parallelism")
        self.refused(self.fabric().ListCircuits, fabric_pb2.ListCircuitsRequest(has_pod=True,
                                                                               pod=4),
                     grpc.StatusCode.INVALID_ARGUMENT, "pod: 4 is outside 0..3")
        self.refused(self.fabric().DrainDevice, fabric_pb2.DrainDeviceRequest(),
                     grpc.StatusCode.INVALID_ARGUMENT, "device: required")

    def test_nul_bytes_in_strings_refused(self):
        # issue 14 #10: protobuf-c gives strings as C strings, so "nul\0A" and
        # "nul\0B" were both job "nul"; a NUL is refused naming the field
        nul = "byte 0x00 at offset 3 is not allowed (a NUL byte would cut the string short)"
        for jid in ("nul\0A", "nul\0B"):
            self.refused(self.jobs().SubmitJob, job(jid), grpc.StatusCode.INVALID_ARGUMENT,
                         "id: " + nul)
        self.refused(self.jobs().GetJob, jobs_pb2.GetJobRequest(id="nul\0A"),
                     grpc.StatusCode.INVALID_ARGUMENT, "id: " + nul)
        self.refused(self.jobs().PlanJob,
                     job("nul-planner", options=jobs_pb2.JobOptions(planner="lea\0f-centric")),
                     grpc.StatusCode.INVALID_ARGUMENT, "options.planner: " + nul)
        self.refused(self.fabric().DrainDevice, fabric_pb2.DrainDeviceRequest(device="ocs\0x"),
                     grpc.StatusCode.INVALID_ARGUMENT, "device: " + nul)

    def test_malformed_bytes_and_big_messages(self):
        raw = self.channels["scheduler"].unary_unary("/ocs.v1.Jobs/SubmitJob")
        with self.assertRaises(grpc.RpcError) as cm:
            raw(b"\x0a\x7fabc", timeout=TIMEOUT_S)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("request: not a valid ocs.v1.JobSpec message", cm.exception.details())
        big = jobs_pb2.JobSpec(id="big", idempotency_key="k" * (64 << 20))
        self.refused(self.jobs().SubmitJob, big, grpc.StatusCode.RESOURCE_EXHAUSTED)
        # the server is still fine afterwards
        self.jobs().ListJobs(jobs_pb2.ListJobsRequest(), timeout=TIMEOUT_S)

    def test_unknown_method(self):
        raw = self.channels["operator"].unary_unary("/ocs.v1.Jobs/DeleteEverything")
        with self.assertRaises(grpc.RpcError) as cm:
            raw(b"", timeout=TIMEOUT_S)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.UNIMPLEMENTED)
        self.assertIn("/ocs.v1.Jobs/DeleteEverything is not served", cm.exception.details())

    def test_submit_is_idempotent_and_refuses_conflicts(self):
        spec = job("idem", idempotency_key="once")
        first = self.jobs().SubmitJob(spec, timeout=TIMEOUT_S)
        again = self.jobs().SubmitJob(spec, timeout=TIMEOUT_S)
        self.assertTrue(first.created)
        self.assertFalse(again.created)
        self.assertEqual(first.job.created_unix_ms, again.job.created_unix_ms)
        self.assertEqual(len(first.job.circuits), 2)
        other = job("idem", gpus=(0, 40))
        other.leaf_demand.pairs.pop()
        self.refused(self.jobs().SubmitJob, other, grpc.StatusCode.ALREADY_EXISTS,
                     "id: job idem exists with a different request")
        got = self.jobs("viewer").GetJob(jobs_pb2.GetJobRequest(id="idem"), timeout=TIMEOUT_S)
        self.assertEqual(got.job.spec, spec)
        self.assertEqual(got.job.state, jobs_pb2.JOB_STATE_ACTIVE)
        self.refused(self.jobs().GetJob, jobs_pb2.GetJobRequest(id="nope"),
                     grpc.StatusCode.NOT_FOUND, "id: no job nope")
        self.refused(self.jobs().SubmitJob, job("unavailable-1"), grpc.StatusCode.UNAVAILABLE)

    def test_events_stream(self):
        stub = events_pb2_grpc.EventsStub(self.channels["viewer"])
        stream = stub.Watch(events_pb2.WatchRequest(jobs=True))
        got = []
        lock = threading.Lock()
        done = threading.Event()

        def reader():
            try:
                for e in stream:
                    with lock:
                        got.append(e)
                        if sum(1 for x in got if x.job.job_id == "ev-1") == 3:
                            break
            except grpc.RpcError:
                pass
            done.set()

        t = threading.Thread(target=reader)
        t.start()
        # Subscribed once a probe event arrives (PlanJob "flood-1" publishes one).
        for _ in range(100):
            self.jobs().PlanJob(job("flood-1"), timeout=TIMEOUT_S)
            with lock:
                if got:
                    break
            time.sleep(0.05)
        self.fabric().DrainDevice(fabric_pb2.DrainDeviceRequest(device="ocs-g1-d0"),
                                  timeout=TIMEOUT_S)  # a device event: filtered out
        self.jobs().SubmitJob(job("ev-1"), timeout=TIMEOUT_S)
        self.jobs().ReleaseJob(jobs_pb2.ReleaseJobRequest(id="ev-1"), timeout=TIMEOUT_S)
        self.assertTrue(done.wait(TIMEOUT_S), "events: %r" % got)
        stream.cancel()
        t.join()
        self.assertTrue(all(e.WhichOneof("kind") == "job" for e in got))
        self.assertEqual([(e.job.job_id, e.job.state) for e in got if e.job.job_id == "ev-1"],
                         [("ev-1", jobs_pb2.JOB_STATE_PENDING), ("ev-1", jobs_pb2.JOB_STATE_ACTIVE),
                          ("ev-1", jobs_pb2.JOB_STATE_RELEASED)])
        seqs = [e.seq for e in got]
        self.assertEqual(seqs, sorted(seqs))
        self.assertEqual(len(set(seqs)), len(seqs))
        self.assertTrue(all(e.time_unix_ms > 0 for e in got))

    def test_concurrent_clients(self):
        errors = []

        def worker(n):
            ch = tls_channel(self.server.target, "scheduler")
            stub = jobs_pb2_grpc.JobsStub(ch)
            try:
                for i in range(25):
                    # 16 TLS handshakes at once: a connect attempt may fail
                    # transiently; wait_for_ready lets gRPC retry it within
                    # the deadline, as a real scheduler's client would.
                    r = stub.PlanJob(job("c-%d-%d" % (n, i)), timeout=TIMEOUT_S,
                                     wait_for_ready=True)
                    if r.figures.links_placed != 3 or len(r.circuits) != 2:
                        errors.append("bad plan %r" % r)
            except grpc.RpcError as e:
                errors.append("%s %s" % (e.code(), e.details()))
            ch.close()

        threads = [threading.Thread(target=worker, args=(n,)) for n in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])

    def test_ring_calls_need_a_ring_domain(self):
        self.refused(self.jobs().PlanJob,
                     jobs_pb2.JobSpec(id="r", ring=jobs_pb2.RingRequest(tp=8, gpus=16)),
                     grpc.StatusCode.FAILED_PRECONDITION,
                     "ring: a ring request needs an ocstrx-ring domain; this fabric is "
                     "leaf-spine-ocs")
        self.refused(self.fabric().MarkNode,
                     fabric_pb2.MarkNodeRequest(node=1, condition=fabric_pb2.NODE_CONDITION_FAULTY),
                     grpc.StatusCode.FAILED_PRECONDITION,
                     "node: nodes exist only on an ocstrx-ring domain; this fabric is "
                     "leaf-spine-ocs")
        self.refused(self.fabric("viewer").ListRings, fabric_pb2.ListRingsRequest(),
                     grpc.StatusCode.FAILED_PRECONDITION,
                     "rings exist only on an ocstrx-ring domain; this fabric is leaf-spine-ocs")
        summary = self.fabric("viewer").GetFabric(fabric_pb2.GetFabricRequest(),
                                                  timeout=TIMEOUT_S)
        self.assertEqual(summary.kind, "leaf-spine-ocs")


def ring_job(job_id, tp=8, **kw):
    return jobs_pb2.JobSpec(id=job_id, ring=jobs_pb2.RingRequest(tp=tp, **kw))


class RingDomainTest(unittest.TestCase):
    """nb_test_server --ring: a fake OCSTrx ring domain of 32 nodes x 4 GPUs
    behind the real library (mTLS, roles, validation)."""

    @classmethod
    def setUpClass(cls):
        cls.server = Server("--ring", "--ca", os.path.join(CERTS, "ca.pem"),
                            "--cert", os.path.join(CERTS, "server.pem"),
                            "--key", os.path.join(CERTS, "server.key"))
        cls.channels = {r: tls_channel(cls.server.target, r)
                        for r in ("viewer", "scheduler", "operator")}

    @classmethod
    def tearDownClass(cls):
        for ch in cls.channels.values():
            ch.close()
        cls.server.stop()

    def jobs(self, role="scheduler"):
        return jobs_pb2_grpc.JobsStub(self.channels[role])

    def fabric(self, role="operator"):
        return fabric_pb2_grpc.FabricStub(self.channels[role])

    refused = NorthboundTest.refused

    def test_fabric_summary(self):
        s = self.fabric("viewer").GetFabric(fabric_pb2.GetFabricRequest(), timeout=TIMEOUT_S)
        self.assertEqual((s.kind, s.nodes, s.tors, s.nodes_per_tor, s.gpus_per_node, s.k_hops,
                          s.gpus), ("ocstrx-ring", 32, 8, 4, 4, 2, 128))

    def test_validation_names_the_field(self):
        plan = self.jobs().PlanJob
        invalid = grpc.StatusCode.INVALID_ARGUMENT
        self.refused(plan, ring_job("v", tp=6), invalid,
                     "ring.tp: 6 is not a multiple of the 4 GPUs per node")
        self.refused(plan, ring_job("v", gpus=12), invalid,
                     "ring.gpus: 12 is not a multiple of ring.tp (8)")
        self.refused(plan, ring_job("v", gpus=8, rings=1), invalid,
                     "ring.rings: 1 given together with ring.gpus (8); ask for GPUs or for "
                     "rings, not both")
        self.refused(plan, ring_job("v", gpus=136), invalid,
                     "ring.gpus: 136 exceeds the domain's 128 GPUs")
        self.refused(plan, ring_job("v", orchestration="random"), invalid,
                     'ring.orchestration: "random" is not a known orchestration (dcn-free, '
                     'fat-tree or greedy)')
        with_placement = ring_job("v")
        with_placement.placement.gpus.add(gpu=0)
        self.refused(plan, with_placement, invalid,
                     "placement: a ring job has no placement: ocsd picks the nodes")
        self.refused(plan, job("v"), grpc.StatusCode.FAILED_PRECONDITION,
                     "leaf_demand: an ocstrx-ring domain takes ring requests (ring), not "
                     "leaf_demand; this fabric is ocstrx-ring")
        self.refused(self.fabric().MarkNode, fabric_pb2.MarkNodeRequest(node=32,
                     condition=fabric_pb2.NODE_CONDITION_FAULTY), invalid,
                     "node: 32 is outside 0..31")
        self.refused(self.fabric().MarkNode, fabric_pb2.MarkNodeRequest(node=1), invalid,
                     "condition: required: NODE_CONDITION_HEALTHY or NODE_CONDITION_FAULTY")
        self.refused(self.fabric("viewer").ListRings, fabric_pb2.ListRingsRequest(node=3),
                     invalid, "node: 3 given but has_node is false")
        self.refused(self.fabric("viewer").ListCircuits,
                     fabric_pb2.ListCircuitsRequest(has_pod=True, pod=0),
                     grpc.StatusCode.FAILED_PRECONDITION,
                     "pod: an ocstrx-ring domain has no pods; this fabric is ocstrx-ring")

    def test_rings_mark_node_and_events(self):
        stream = events_pb2_grpc.EventsStub(self.channels["viewer"]).Watch(
            events_pb2.WatchRequest(rings=True))
        got = []
        lock = threading.Lock()
        done = threading.Event()

        def reader():
            try:
                for e in stream:
                    with lock:
                        got.append(e)
                        if e.WhichOneof("kind") == "ring" and \
                                e.ring.ring.last_change == fabric_pb2.RING_CHANGE_RELEASED:
                            break
            except grpc.RpcError:
                pass
            done.set()

        t = threading.Thread(target=reader)
        t.start()
        # Subscribed once a probe node event arrives (node 31 fails and heals).
        for _ in range(100):
            for cond in (fabric_pb2.NODE_CONDITION_FAULTY, fabric_pb2.NODE_CONDITION_HEALTHY):
                self.fabric().MarkNode(fabric_pb2.MarkNodeRequest(node=31, condition=cond),
                                       timeout=TIMEOUT_S)
            with lock:
                if got:
                    break
            time.sleep(0.05)
        plan = self.jobs().PlanJob(ring_job("rg", rings=2, orchestration="greedy", seed=3),
                                   timeout=TIMEOUT_S)
        self.assertEqual([list(r.nodes) for r in plan.rings], [[0, 1], [2, 3]])
        self.assertEqual((plan.figures.ring.rings, plan.figures.ring.nodes_per_ring,
                          plan.figures.ring.gpus_placed, plan.figures.ring.orchestration),
                         (2, 2, 16, "greedy"))
        sub = self.jobs().SubmitJob(ring_job("rg", rings=2, orchestration="greedy", seed=3),
                                    timeout=TIMEOUT_S)
        self.assertTrue(sub.created)
        self.assertEqual([(r.job_id, r.index, list(r.nodes)) for r in sub.job.rings],
                         [("rg", 0, [0, 1]), ("rg", 1, [2, 3])])
        listed = self.fabric("viewer").ListRings(
            fabric_pb2.ListRingsRequest(job_id="rg", has_node=True, node=3), timeout=TIMEOUT_S)
        self.assertEqual([list(r.nodes) for r in listed.rings], [[2, 3]])
        for role in ("viewer", "scheduler"):
            self.refused(self.fabric(role).MarkNode,
                         fabric_pb2.MarkNodeRequest(node=2,
                                                    condition=fabric_pb2.NODE_CONDITION_FAULTY),
                         grpc.StatusCode.PERMISSION_DENIED,
                         "role %s may not call Fabric/MarkNode (needs operator)" % role)
        marked = self.fabric().MarkNode(
            fabric_pb2.MarkNodeRequest(node=2, condition=fabric_pb2.NODE_CONDITION_FAULTY),
            timeout=TIMEOUT_S)
        self.assertEqual(list(marked.affected_jobs), ["rg"])
        after = self.jobs("viewer").GetJob(jobs_pb2.GetJobRequest(id="rg"), timeout=TIMEOUT_S)
        ring1 = after.job.rings[1]
        self.assertEqual((list(ring1.nodes), ring1.last_change, ring1.failed_node),
                         ([3], fabric_pb2.RING_CHANGE_BYPASSED, 2))
        self.jobs().ReleaseJob(jobs_pb2.ReleaseJobRequest(id="rg"), timeout=TIMEOUT_S)
        self.fabric().MarkNode(fabric_pb2.MarkNodeRequest(
            node=2, condition=fabric_pb2.NODE_CONDITION_HEALTHY), timeout=TIMEOUT_S)
        self.assertTrue(done.wait(TIMEOUT_S), "events: %r" % got)
        stream.cancel()
        t.join()
        # rings=True: ring and node events only, never the jobs' own events
        self.assertEqual({e.WhichOneof("kind") for e in got}, {"ring", "node"})
        rg = [e.ring for e in got if e.WhichOneof("kind") == "ring"]
        self.assertEqual([(r.ring.index, r.ring.last_change) for r in rg[:3]],
                         [(0, fabric_pb2.RING_CHANGE_PLACED), (1, fabric_pb2.RING_CHANGE_PLACED),
                          (1, fabric_pb2.RING_CHANGE_BYPASSED)])
        bypass = rg[2]
        self.assertEqual((list(bypass.old_nodes), list(bypass.ring.nodes)), ([2, 3], [3]))
        self.assertGreater(bypass.reaction_us, bypass.devices_us)
        node2 = [e.node for e in got if e.WhichOneof("kind") == "node" and e.node.node == 2]
        self.assertEqual([(n.condition, n.source) for n in node2],
                         [(fabric_pb2.NODE_CONDITION_FAULTY, "operator")])


class ShutdownTest(unittest.TestCase):
    def test_shutdown_ends_streams_and_health(self):
        server = Server("--ca", os.path.join(CERTS, "ca.pem"),
                        "--cert", os.path.join(CERTS, "server.pem"),
                        "--key", os.path.join(CERTS, "server.key"))
        ch = tls_channel(server.target, "viewer")
        events = events_pb2_grpc.EventsStub(ch).Watch(events_pb2.WatchRequest())
        health = health_pb2_grpc.HealthStub(ch).Watch(health_pb2.HealthCheckRequest())
        got = {"events": [], "health": []}
        ends = {}

        # grpcio stops handing out messages once it knows the status, so the
        # streams are read while the server shuts down.
        def reader(name, stream):
            try:
                for m in stream:
                    got[name].append(m)
            except grpc.RpcError as e:
                ends[name] = (e.code(), e.details())

        threads = [threading.Thread(target=reader, args=(n, s))
                   for n, s in (("events", events), ("health", health))]
        for t in threads:
            t.start()
        op = tls_channel(server.target, "operator")
        for _ in range(100):  # both streams are open once they saw something
            fabric_pb2_grpc.FabricStub(op).UndrainDevice(
                fabric_pb2.UndrainDeviceRequest(device="ocs-g0-d0"), timeout=TIMEOUT_S)
            if got["health"] and got["events"]:
                break
            time.sleep(0.05)
        op.close()
        server.stop()  # asserts a clean exit with streams open
        for t in threads:
            t.join(TIMEOUT_S)
        self.assertEqual([m.status for m in got["health"]],
                         [health_pb2.HealthCheckResponse.SERVING,
                          health_pb2.HealthCheckResponse.NOT_SERVING])
        self.assertTrue(got["events"])
        self.assertTrue(all(e.device.device == "ocs-g0-d0" for e in got["events"]))
        self.assertEqual(ends, {"events": (grpc.StatusCode.UNAVAILABLE, "server: shutting down"),
                                "health": (grpc.StatusCode.UNAVAILABLE, "server: shutting down")})
        ch.close()

    def test_slow_watcher_is_ended(self):
        server = Server("--insecure", "--queue", "16")
        ch = grpc.insecure_channel(server.target)
        slow = events_pb2_grpc.EventsStub(ch).Watch(events_pb2.WatchRequest())
        ch2 = grpc.insecure_channel(server.target)  # its own connection and windows
        fast = events_pb2_grpc.EventsStub(ch2).Watch(events_pb2.WatchRequest(devices=True))
        # Subscribed once one probe event was read (then nothing more is read).
        first = []
        t = threading.Thread(target=lambda: first.append(next(slow)))
        t.start()
        for _ in range(100):
            jobs_pb2_grpc.JobsStub(ch).PlanJob(job("flood-1"), timeout=TIMEOUT_S)
            t.join(0.05)
            if first:
                break
        self.assertEqual(first[0].job.job_id, "flood-1")
        # 200000 events (~6 MB) cannot all sit in the transport's windows
        # while nobody reads: the server's queue of 16 overflows.
        jobs_pb2_grpc.JobsStub(ch).PlanJob(job("flood-200000"), timeout=60)
        got = 0
        with self.assertRaises(grpc.RpcError) as cm:
            for e in slow:
                self.assertIn(e.job.job_id, ("flood-1", "flood-200000"))
                got += 1
        self.assertEqual(cm.exception.code(), grpc.StatusCode.RESOURCE_EXHAUSTED)
        self.assertEqual(cm.exception.details(),
                         "watch: client too slow: it fell 16 messages behind; watch again")
        self.assertLess(got, 200000)
        # A watcher that filtered job events out is unaffected (bounded wait:
        # device events until one arrives).
        seen = []
        t = threading.Thread(target=lambda: seen.append(next(fast)))
        t.start()
        for _ in range(100):
            fabric_pb2_grpc.FabricStub(ch).DrainDevice(
                fabric_pb2.DrainDeviceRequest(device="ocs-g0-d1"), timeout=TIMEOUT_S)
            t.join(0.05)
            if seen:
                break
        self.assertEqual(seen[0].device.device, "ocs-g0-d1")
        fast.cancel()
        ch.close()
        ch2.close()
        server.stop()

    def test_insecure_only_on_loopback(self):
        proc = subprocess.run([SERVER, "--insecure", "--listen", "0.0.0.0:0"],
                              capture_output=True, timeout=TIMEOUT_S)
        self.assertEqual(proc.returncode, 1)
        self.assertIn(b"listen_addr: 0.0.0.0:0 is not a loopback address", proc.stderr)
        server = Server("--insecure", "--listen", "127.0.0.1:0")
        ch = grpc.insecure_channel(server.target)
        r = jobs_pb2_grpc.JobsStub(ch).SubmitJob(job("plain"), timeout=TIMEOUT_S)
        self.assertTrue(r.created)
        ch.close()
        server.stop()

    def test_tls_server_needs_certificates(self):
        proc = subprocess.run([SERVER, "--listen", "127.0.0.1:0"], capture_output=True,
                              timeout=TIMEOUT_S)
        self.assertEqual(proc.returncode, 1)
        self.assertIn(b"tls_ca_file: required unless insecure is set", proc.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)

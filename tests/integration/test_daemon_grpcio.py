#!/usr/bin/python3
"""test_daemon_grpcio.py - the REAL ocsd (on the lab fabric, 16 ocs-devsim
devices) driven over mTLS by python3-grpcio, a client nobody here wrote,
with stubs generated at test time from proto/ by grpc_tools.protoc and
certificates made by nb_make_certs.sh (roles from the subject OU).

Checks:
  - roles: viewer reads only, scheduler submits/plans/releases but may not
    drain, operator drains and undrains; clients without a certificate or
    with one from another CA cannot connect; an OU of "operator\0viewer"
    (made here with python3-cryptography) grants no role and is logged;
  - the job lifecycle: PlanJob touches no device, SubmitJob -> ACTIVE with
    the circuits on the devices (read back with ncclient), GetJob, ListJobs
    (with a state filter), ListCircuits filters, idempotent resubmission,
    ReleaseJob -> RELEASED and empty devices;
  - drain: a drained device gets no new circuits; draining a device that
    holds a running job's circuits needs force and names the job;
  - a table of malformed or out-of-range requests: status code and the
    exact "field: reason" text the daemon answers;
  - a 64 MB message is refused with RESOURCE_EXHAUSTED and ocsd still
    answers afterwards; malformed bytes name the request.

usage: test_daemon_grpcio.py BUILD_DIR SOURCE_DIR
"""
import atexit
import os
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ocsd_fleet  # noqa: E402

BUILD, SRC = sys.argv[1:3]
del sys.argv[1:3]  # leave unittest's own arguments
TIMEOUT_S = 30

FLEET = ocsd_fleet.Fleet(BUILD, SRC, prefix="ocsd-grpcio-")
atexit.register(FLEET.remove)
CERTS = os.path.join(FLEET.work, "certs")
ocsd_fleet.gen_stubs(os.path.join(SRC, "proto"), os.path.join(FLEET.work, "gen"))
subprocess.run(["bash", os.path.join(SRC, "tests", "integration", "nb_make_certs.sh"), CERTS],
               check=True)


def make_nul_ou_cert(name, ou):
    """A client certificate signed by the test CA whose subject OU is `ou`
    byte for byte (openssl's -subj cannot carry a NUL; cryptography can)."""
    import datetime
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
    with open(os.path.join(CERTS, "ca.pem"), "rb") as f:
        ca = x509.load_pem_x509_certificate(f.read())
    with open(os.path.join(CERTS, "ca.key"), "rb") as f:
        ca_key = serialization.load_pem_private_key(f.read(), None)
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    crt = (x509.CertificateBuilder()
           .subject_name(x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "ocsd-test"),
                                    x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, ou),
                                    x509.NameAttribute(NameOID.COMMON_NAME, "nul")]))
           .issuer_name(ca.subject).public_key(key.public_key())
           .serial_number(x509.random_serial_number())
           .not_valid_before(now - datetime.timedelta(minutes=5))
           .not_valid_after(now + datetime.timedelta(days=1))
           .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), False)
           .sign(ca_key, hashes.SHA256()))
    with open(os.path.join(CERTS, name + ".pem"), "wb") as f:
        f.write(crt.public_bytes(serialization.Encoding.PEM))
    with open(os.path.join(CERTS, name + ".key"), "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM,
                                  serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()))


# An OU that reads "operator" up to its NUL: it must grant no role at all.
make_nul_ou_cert("nulou", "operator\0viewer")
import grpc  # noqa: E402
from ocs.v1 import fabric_pb2, fabric_pb2_grpc  # noqa: E402
from ocs.v1 import jobs_pb2, jobs_pb2_grpc  # noqa: E402
from grpc.health.v1 import health_pb2, health_pb2_grpc  # noqa: E402

INVALID = grpc.StatusCode.INVALID_ARGUMENT


def cert(name):
    with open(os.path.join(CERTS, name), "rb") as f:
        return f.read()


def tls_channel(role):
    if role is None:
        creds = grpc.ssl_channel_credentials(root_certificates=cert("ca.pem"))
    else:
        creds = grpc.ssl_channel_credentials(root_certificates=cert("ca.pem"),
                                             private_key=cert(role + ".key"),
                                             certificate_chain=cert(role + ".pem"))
    return grpc.secure_channel(FLEET.target, creds)


def gpu(g):
    """Lab fabric: 8 GPUs per leaf, 2 leaves per pod."""
    return jobs_pb2.GpuPlacement(gpu=g, leaf=g // 8, pod=g // 16)


def job(job_id, gpus=(0, 16), pairs=((0, 2, 2),), **kw):
    return jobs_pb2.JobSpec(
        id=job_id, placement=jobs_pb2.Placement(gpus=[gpu(g) for g in gpus]),
        leaf_demand=jobs_pb2.LeafDemand(
            pairs=[jobs_pb2.LeafPair(a=a, b=b, links=n) for a, b, n in pairs]), **kw)


def xcs_of_circuits(circuits):
    return sorted((x.device, x.in_port, x.out_port) for c in circuits for x in c.cross_connects)


def held_on_devices():
    devices = FLEET.read_devices()
    return devices, sorted((n, i, o) for n, rows in devices.items() for (i, o, _) in rows)


def setUpModule():
    FLEET.start_devices()
    FLEET.start_ocsd("--tls-ca", os.path.join(CERTS, "ca.pem"),
                     "--tls-cert", os.path.join(CERTS, "server.pem"),
                     "--tls-key", os.path.join(CERTS, "server.key"), insecure=False)
    ch = tls_channel("viewer")
    stub = health_pb2_grpc.HealthStub(ch)
    for _ in range(100):
        try:
            if stub.Check(health_pb2.HealthCheckRequest(), timeout=2).status == \
                    health_pb2.HealthCheckResponse.SERVING:
                break
        except grpc.RpcError:
            pass
    ch.close()


def tearDownModule():
    rc = FLEET.stop_ocsd()
    FLEET.close()
    if rc != 0:
        FLEET.dump_logs()
        raise AssertionError(f"ocsd exited {rc} on SIGTERM")


class DaemonTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.channels = {r: tls_channel(r) for r in ("viewer", "scheduler", "operator")}

    @classmethod
    def tearDownClass(cls):
        for ch in cls.channels.values():
            ch.close()

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

    def release(self, job_id):
        r = self.jobs().ReleaseJob(jobs_pb2.ReleaseJobRequest(id=job_id), timeout=TIMEOUT_S)
        self.assertEqual(r.job.state, jobs_pb2.JOB_STATE_RELEASED, r.job.reason)

    def test_roles(self):
        spec = job("role-1")
        self.refused(self.jobs("viewer").SubmitJob, spec, grpc.StatusCode.PERMISSION_DENIED,
                     "role viewer may not call Jobs/SubmitJob (needs scheduler)")
        self.refused(self.jobs("viewer").PlanJob, spec, grpc.StatusCode.PERMISSION_DENIED,
                     "role viewer may not call Jobs/PlanJob (needs scheduler)")
        self.refused(self.jobs("viewer").ReleaseJob, jobs_pb2.ReleaseJobRequest(id="role-1"),
                     grpc.StatusCode.PERMISSION_DENIED,
                     "role viewer may not call Jobs/ReleaseJob (needs scheduler)")
        for role in ("viewer", "scheduler"):
            self.refused(self.fabric(role).DrainDevice,
                         fabric_pb2.DrainDeviceRequest(device="ocs-g1-d1"),
                         grpc.StatusCode.PERMISSION_DENIED,
                         f"role {role} may not call Fabric/DrainDevice (needs operator)")
            self.refused(self.fabric(role).UndrainDevice,
                         fabric_pb2.UndrainDeviceRequest(device="ocs-g1-d1"),
                         grpc.StatusCode.PERMISSION_DENIED,
                         f"role {role} may not call Fabric/UndrainDevice (needs operator)")
        for role in ("norole", "tworoles", "nulou"):
            ch = tls_channel(role)
            self.refused(jobs_pb2_grpc.JobsStub(ch).ListJobs, jobs_pb2.ListJobsRequest(),
                         grpc.StatusCode.PERMISSION_DENIED,
                         "client certificate has no role (its subject needs exactly one OU "
                         "of scheduler, operator, viewer)")
            ch.close()
        # "operator\0viewer" drains nothing, and ocsd says why in its log.
        ch = tls_channel("nulou")
        self.refused(fabric_pb2_grpc.FabricStub(ch).DrainDevice,
                     fabric_pb2.DrainDeviceRequest(device="ocs-g1-d1"),
                     grpc.StatusCode.PERMISSION_DENIED)
        ch.close()
        deadline = time.monotonic() + TIMEOUT_S
        while "an OU holds a NUL byte" not in FLEET.log() and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertIn("an OU holds a NUL byte", FLEET.log())
        # Every role reads.
        for role in ("viewer", "scheduler", "operator"):
            self.jobs(role).ListJobs(jobs_pb2.ListJobsRequest(), timeout=TIMEOUT_S)
            f = self.fabric(role).GetFabric(fabric_pb2.GetFabricRequest(), timeout=TIMEOUT_S)
            self.assertEqual((f.pods, f.devices, f.groups, f.leaves, f.gpus, f.wiring),
                             (4, 16, 4, 8, 64, "cross"))
        # The operator also plans (scheduler's calls included).
        r = self.jobs("operator").PlanJob(spec, timeout=TIMEOUT_S)
        self.assertEqual(r.figures.links_placed, 2)

    def test_untrusted_clients_cannot_connect(self):
        for role in (None, "rogue"):
            ch = tls_channel(role)
            self.refused(jobs_pb2_grpc.JobsStub(ch).ListJobs, jobs_pb2.ListJobsRequest(),
                         grpc.StatusCode.UNAVAILABLE)
            ch.close()
        ch = grpc.insecure_channel(FLEET.target)
        self.refused(jobs_pb2_grpc.JobsStub(ch).ListJobs, jobs_pb2.ListJobsRequest(),
                     grpc.StatusCode.UNAVAILABLE)
        ch.close()

    def test_job_lifecycle(self):
        spec = job("life-1", gpus=(8, 9, 40, 41), pairs=((1, 5, 3),),
                   idempotency_key="life-key-1")
        _, before = held_on_devices()
        plan = self.jobs().PlanJob(spec, timeout=TIMEOUT_S)
        self.assertEqual((plan.figures.links_requested, plan.figures.links_placed), (3, 3))
        self.assertEqual(plan.figures.planner, "leaf-centric")
        self.assertEqual(len(plan.circuits), 3)
        self.assertLessEqual(plan.figures.max_contention, 1.0)
        self.assertEqual(held_on_devices()[1], before, "a dry run touched a device")
        self.refused(self.jobs().GetJob, jobs_pb2.GetJobRequest(id="life-1"),
                     grpc.StatusCode.NOT_FOUND, "id: no job life-1")

        r = self.jobs().SubmitJob(spec, timeout=TIMEOUT_S)
        self.assertTrue(r.created)
        self.assertEqual(r.job.state, jobs_pb2.JOB_STATE_ACTIVE, r.job.reason)
        self.assertEqual(len(r.job.circuits), 3)
        self.assertTrue(all(c.job_id == "life-1" for c in r.job.circuits))
        self.assertTrue(all({c.pod_a, c.pod_b} == {0, 2} for c in r.job.circuits))
        mine = xcs_of_circuits(r.job.circuits)
        self.assertEqual(len(mine), 6)  # cross wiring: two cross-connects per circuit
        devices, held = held_on_devices()
        self.assertEqual(held, sorted(before + mine))
        self.assertEqual(FLEET.one_way(devices), [])

        again = self.jobs().SubmitJob(spec, timeout=TIMEOUT_S)
        self.assertFalse(again.created)
        self.assertEqual(again.job.created_unix_ms, r.job.created_unix_ms)
        self.assertEqual(xcs_of_circuits(again.job.circuits), mine)

        got = self.jobs("viewer").GetJob(jobs_pb2.GetJobRequest(id="life-1"), timeout=TIMEOUT_S)
        self.assertEqual(got.job.spec, spec)
        self.assertEqual(got.job.state, jobs_pb2.JOB_STATE_ACTIVE)
        self.assertEqual(got.job.figures.links_placed, 3)
        active = self.jobs("viewer").ListJobs(
            jobs_pb2.ListJobsRequest(state=jobs_pb2.JOB_STATE_ACTIVE), timeout=TIMEOUT_S)
        self.assertIn("life-1", [j.spec.id for j in active.jobs])
        self.assertTrue(all(j.state == jobs_pb2.JOB_STATE_ACTIVE for j in active.jobs))

        fab = self.fabric("viewer")
        by_job = fab.ListCircuits(fabric_pb2.ListCircuitsRequest(job_id="life-1"),
                                  timeout=TIMEOUT_S)
        self.assertEqual(xcs_of_circuits(by_job.circuits), mine)
        dev = mine[0][0]
        by_dev = fab.ListCircuits(fabric_pb2.ListCircuitsRequest(device=dev), timeout=TIMEOUT_S)
        self.assertTrue(by_dev.circuits)
        self.assertTrue(all(any(x.device == dev for x in c.cross_connects)
                            for c in by_dev.circuits))
        by_pod = fab.ListCircuits(fabric_pb2.ListCircuitsRequest(has_pod=True, pod=1),
                                  timeout=TIMEOUT_S)
        self.assertNotIn("life-1", [c.job_id for c in by_pod.circuits])
        by_pod = fab.ListCircuits(fabric_pb2.ListCircuitsRequest(has_pod=True, pod=2),
                                  timeout=TIMEOUT_S)
        self.assertIn("life-1", [c.job_id for c in by_pod.circuits])
        devs = fab.ListDevices(fabric_pb2.ListDevicesRequest(has_group=True, group=1),
                               timeout=TIMEOUT_S)
        self.assertEqual(sorted(d.name for d in devs.devices),
                         ["ocs-g1-d0", "ocs-g1-d1", "ocs-g1-d2", "ocs-g1-d3"])
        self.assertEqual(sum(d.circuits for d in devs.devices),
                         sum(1 for (name, _, _) in before + mine if name.startswith("ocs-g1-")))

        # The same id with another request; the same key for another id.
        other = job("life-1", gpus=(8, 40), pairs=((1, 5, 1),), idempotency_key="life-key-1")
        self.refused(self.jobs().SubmitJob, other, grpc.StatusCode.ALREADY_EXISTS,
                     "id: job life-1 exists with a different request (state ACTIVE)")
        self.refused(self.jobs().SubmitJob, job("life-2", gpus=(56, 24), pairs=((7, 3, 1),),
                                                idempotency_key="life-key-1"),
                     grpc.StatusCode.ALREADY_EXISTS,
                     "idempotency_key: already used by job life-1")
        # Jobs share leaves, each planned around the others' leaf-spine links...
        # (a GPU is one live job's: issue 14 #9)
        self.refused(self.jobs().SubmitJob, job("life-5", gpus=(60, 9), pairs=((1, 7, 1),)),
                     grpc.StatusCode.FAILED_PRECONDITION,
                     "placement.gpus[1].gpu: gpu 9 is held by job life-1 (ACTIVE); release it "
                     "first")
        shared = self.jobs().SubmitJob(job("life-3", gpus=(11, 56), pairs=((1, 7, 1),)),
                                       timeout=TIMEOUT_S)
        self.assertEqual(shared.job.state, jobs_pb2.JOB_STATE_ACTIVE, shared.job.reason)
        self.assertLessEqual(shared.job.figures.max_contention, 1.0)
        devices, held = held_on_devices()
        self.assertEqual(held, sorted(before + mine + xcs_of_circuits(shared.job.circuits)))
        self.assertEqual(FLEET.one_way(devices), [])
        # ...but only up to the uplinks leaf 1 has left (8 - 3 - 1).
        self.refused(self.jobs().SubmitJob, job("life-4", gpus=(10, 57), pairs=((1, 7, 5),)),
                     grpc.StatusCode.RESOURCE_EXHAUSTED,
                     "leaf_demand: no placement of the job exists without moving other jobs' "
                     "circuits; what binds is the uplinks of leaf 1: the job needs 5 and 4 "
                     "are free (other jobs' links on its uplinks to spines 0-3: 2,1,1,0, at "
                     "most 2 each and 8 in all); nothing was touched")
        self.release("life-3")

        rel = self.jobs().ReleaseJob(jobs_pb2.ReleaseJobRequest(id="life-1"), timeout=TIMEOUT_S)
        self.assertEqual(rel.job.state, jobs_pb2.JOB_STATE_RELEASED)
        self.assertEqual(held_on_devices()[1], before)
        got = self.jobs("viewer").GetJob(jobs_pb2.GetJobRequest(id="life-1"), timeout=TIMEOUT_S)
        self.assertEqual(got.job.state, jobs_pb2.JOB_STATE_RELEASED)
        self.assertEqual(len(got.job.circuits), 0)
        # released, its GPUs are free again
        again = self.jobs().SubmitJob(job("life-5", gpus=(60, 9), pairs=((1, 7, 1),)),
                                      timeout=TIMEOUT_S)
        self.assertEqual(again.job.state, jobs_pb2.JOB_STATE_ACTIVE, again.job.reason)
        self.release("life-5")

    def test_drain(self):
        op = self.fabric("operator")
        # Which devices would a job on leaves 6-3 use? Drain one of them.
        spec = job("drain-1", gpus=(48, 24), pairs=((6, 3, 2),))
        plan = self.jobs().PlanJob(spec, timeout=TIMEOUT_S)
        victim = plan.circuits[0].cross_connects[0].device
        r = op.DrainDevice(fabric_pb2.DrainDeviceRequest(device=victim), timeout=TIMEOUT_S)
        self.assertTrue(r.device.drained)
        self.assertEqual(list(r.affected_jobs), [])
        try:
            summary = op.GetFabric(fabric_pb2.GetFabricRequest(), timeout=TIMEOUT_S)
            self.assertEqual(summary.devices_drained, 1)
            sub = self.jobs().SubmitJob(spec, timeout=TIMEOUT_S)
            self.assertEqual(sub.job.state, jobs_pb2.JOB_STATE_ACTIVE, sub.job.reason)
            used = {x.device for c in sub.job.circuits for x in c.cross_connects}
            self.assertNotIn(victim, used)
            # A device holding the running job's circuits needs force.
            busy = sorted(used)[0]
            self.refused(op.DrainDevice, fabric_pb2.DrainDeviceRequest(device=busy),
                         grpc.StatusCode.FAILED_PRECONDITION,
                         f"force: {busy} holds circuits of 1 running job(s) (first: drain-1); "
                         "they stay in place, set force to drain anyway")
            r = op.DrainDevice(fabric_pb2.DrainDeviceRequest(device=busy, force=True),
                               timeout=TIMEOUT_S)
            self.assertTrue(r.device.drained)
            self.assertEqual(list(r.affected_jobs), ["drain-1"])
            # The job keeps its circuits.
            got = self.jobs().GetJob(jobs_pb2.GetJobRequest(id="drain-1"), timeout=TIMEOUT_S)
            self.assertEqual(got.job.state, jobs_pb2.JOB_STATE_ACTIVE)
            self.assertEqual(len(got.job.circuits), 2)
            r = op.UndrainDevice(fabric_pb2.UndrainDeviceRequest(device=busy), timeout=TIMEOUT_S)
            self.assertFalse(r.device.drained)
            self.release("drain-1")
        finally:
            r = op.UndrainDevice(fabric_pb2.UndrainDeviceRequest(device=victim),
                                 timeout=TIMEOUT_S)
            self.assertFalse(r.device.drained)
        self.assertEqual(op.GetFabric(fabric_pb2.GetFabricRequest(),
                                      timeout=TIMEOUT_S).devices_drained, 0)
        # Every device drained: no capacity, said with what is missing.
        names = [FLEET.device_name(d) for d in range(FLEET.N_DEV)]
        try:
            for name in names:
                op.DrainDevice(fabric_pb2.DrainDeviceRequest(device=name, force=True),
                               timeout=TIMEOUT_S)
            self.assertEqual(op.GetFabric(fabric_pb2.GetFabricRequest(),
                                          timeout=TIMEOUT_S).devices_drained, FLEET.N_DEV)
            details = self.refused(self.jobs().SubmitJob, job("drain-2"),
                                   grpc.StatusCode.RESOURCE_EXHAUSTED)
            self.assertTrue(details.startswith("leaf_demand: "), details)
            self.assertIn("nothing was touched", details)
            got = self.jobs().GetJob(jobs_pb2.GetJobRequest(id="drain-2"), timeout=TIMEOUT_S)
            self.assertEqual(got.job.state, jobs_pb2.JOB_STATE_FAILED)
        finally:
            for name in names:
                op.UndrainDevice(fabric_pb2.UndrainDeviceRequest(device=name), timeout=TIMEOUT_S)

    def test_paging(self):
        """ListJobs and ListCircuits in pages (issue 14 #5): every page
        follows the one before in id (circuit key) order, the union is the
        unpaged answer, a job added between pages shows up once or not at
        all, and bad page fields are refused by name."""
        ids = [f"page-{i}" for i in (4, 0, 3, 1, 2)]
        for i, job_id in enumerate(ids):
            r = self.jobs().SubmitJob(job(job_id, gpus=(32 + i, 48 + i), pairs=((4, 6, 1),)),
                                      timeout=TIMEOUT_S)
            self.assertEqual(r.job.state, jobs_pb2.JOB_STATE_ACTIVE, r.job.reason)
        try:
            lj = self.jobs("viewer").ListJobs
            everything = [j.spec.id for j in lj(jobs_pb2.ListJobsRequest(),
                                                timeout=TIMEOUT_S).jobs]
            self.assertEqual(everything, sorted(everything))
            self.assertTrue(set(ids) <= set(everything))
            got, token, pages, added = [], "", 0, False
            while True:
                r = lj(jobs_pb2.ListJobsRequest(page_size=2, page_token=token),
                       timeout=TIMEOUT_S)
                self.assertLessEqual(len(r.jobs), 2)
                got += [j.spec.id for j in r.jobs]
                pages += 1
                if not added:  # sorts before every page-*: never listed by this walk
                    added = True
                    self.jobs().SubmitJob(job("a-page-late", gpus=(37, 53),
                                              pairs=((4, 6, 1),)), timeout=TIMEOUT_S)
                if not r.next_page_token:
                    break
                token = r.next_page_token
            self.assertEqual(got, everything)
            self.assertEqual(pages, (len(everything) + 1) // 2)
            # the filter and the page size combine
            act = lj(jobs_pb2.ListJobsRequest(state=jobs_pb2.JOB_STATE_ACTIVE, page_size=1),
                     timeout=TIMEOUT_S)
            self.assertEqual(len(act.jobs), 1)
            self.assertTrue(act.next_page_token)

            lc = self.fabric("viewer").ListCircuits
            whole = lc(fabric_pb2.ListCircuitsRequest(), timeout=TIMEOUT_S).circuits
            self.assertGreaterEqual(len(whole), 6)
            keys, token = [], ""
            while True:
                r = lc(fabric_pb2.ListCircuitsRequest(page_size=4, page_token=token),
                       timeout=TIMEOUT_S)
                keys += [(c.group, c.pod_a, c.port_a, c.pod_b, c.port_b) for c in r.circuits]
                if not r.next_page_token:
                    break
                token = r.next_page_token
            self.assertEqual(keys, sorted((c.group, c.pod_a, c.port_a, c.pod_b, c.port_b)
                                          for c in whole))
            mine = lc(fabric_pb2.ListCircuitsRequest(job_id="page-3", page_size=1),
                      timeout=TIMEOUT_S)
            self.assertEqual([c.job_id for c in mine.circuits], ["page-3"])
            self.assertEqual(mine.next_page_token, "")

            bad = grpc.StatusCode.INVALID_ARGUMENT
            self.refused(lj, jobs_pb2.ListJobsRequest(page_size=1001), bad,
                         "page_size: 1001 is out of range 0..1000 (0: 500)")
            self.refused(lj, jobs_pb2.ListJobsRequest(page_size=-1), bad,
                         "page_size: -1 is out of range 0..1000 (0: 500)")
            self.refused(lj, jobs_pb2.ListJobsRequest(page_token="page-1"), bad,
                         "page_token: not a next_page_token of this call; start again "
                         "with \"\"")
            self.refused(lc, fabric_pb2.ListCircuitsRequest(page_token=act.next_page_token), bad,
                         "page_token: not a next_page_token of this call; start again "
                         "with \"\"")
            self.refused(lc, fabric_pb2.ListCircuitsRequest(page_size=5001), bad,
                         "page_size: 5001 is out of range 0..5000 (0: 1000)")
        finally:
            for job_id in ids + ["a-page-late"]:
                self.release(job_id)

    def test_bad_requests_name_the_field(self):
        S, P = self.jobs().SubmitJob, self.jobs().PlanJob
        R, G, L = self.jobs().ReleaseJob, self.jobs().GetJob, self.jobs().ListJobs
        op = self.fabric("operator")
        DR, UN, LC, LD = op.DrainDevice, op.UndrainDevice, op.ListCircuits, op.ListDevices
        HC = health_pb2_grpc.HealthStub(self.channels["viewer"]).Check

        def mod(base, fn):
            m = jobs_pb2.JobSpec()
            m.CopyFrom(base)
            fn(m)
            return m

        ok = job("bad-1", gpus=(0, 1, 16, 32), pairs=((0, 2, 2), (2, 4, 1)))
        NF = grpc.StatusCode.NOT_FOUND
        cases = [
            (S, mod(ok, lambda m: setattr(m, "id", "")), INVALID, "id: required"),
            (S, mod(ok, lambda m: setattr(m, "id", "x" * 65)), INVALID,
             "id: 65 characters, at most 64"),
            (P, mod(ok, lambda m: setattr(m, "id", "job/1")), INVALID,
             "id: character '/' at offset 3 is not allowed (use A-Z a-z 0-9 . _ -)"),
            (S, mod(ok, lambda m: setattr(m, "id", "j\u00e9")), INVALID,
             "id: byte 0xc3 at offset 1 is not allowed (use A-Z a-z 0-9 . _ -)"),
            (S, mod(ok, lambda m: setattr(m, "idempotency_key", "k" * 129)), INVALID,
             "idempotency_key: 129 characters, at most 128"),
            (S, mod(ok, lambda m: setattr(m, "idempotency_key", "a\tb")), INVALID,
             "idempotency_key: byte 0x09 at offset 1 is not printable ASCII"),
            (S, mod(ok, lambda m: m.ClearField("placement")), INVALID, "placement: required"),
            (S, mod(ok, lambda m: m.placement.ClearField("gpus")), INVALID,
             "placement.gpus: empty; a job needs at least one GPU"),
            (S, mod(ok, lambda m: setattr(m.placement.gpus[3], "gpu", -1)), INVALID,
             "placement.gpus[3].gpu: -1 is outside 0..63"),
            (P, mod(ok, lambda m: setattr(m.placement.gpus[2], "gpu", 64)), INVALID,
             "placement.gpus[2].gpu: 64 is outside 0..63"),
            (S, mod(ok, lambda m: setattr(m.placement.gpus[1], "leaf", 8)), INVALID,
             "placement.gpus[1].leaf: 8 is outside 0..7"),
            (S, mod(ok, lambda m: setattr(m.placement.gpus[0], "leaf", -5)), INVALID,
             "placement.gpus[0].leaf: -5 is outside 0..7"),
            (S, mod(ok, lambda m: setattr(m.placement.gpus[2], "leaf", 3)), INVALID,
             "placement.gpus[2].leaf: leaf 3 does not hold gpu 16 (leaf 2 does)"),
            (S, mod(ok, lambda m: setattr(m.placement.gpus[3], "pod", 4)), INVALID,
             "placement.gpus[3].pod: 4 is outside 0..3"),
            (S, mod(ok, lambda m: setattr(m.placement.gpus[2], "pod", 0)), INVALID,
             "placement.gpus[2].pod: pod 0 does not hold leaf 2 (pod 1 does)"),
            (S, mod(ok, lambda m: m.placement.gpus.append(gpu(1))), INVALID,
             "placement.gpus[4].gpu: 1 is listed twice (first at gpus[1])"),
            (S, mod(ok, lambda m: m.ClearField("leaf_demand")), INVALID,
             "demand: required: set leaf_demand or parallelism"),
            (S, mod(ok, lambda m: m.leaf_demand.ClearField("pairs")), INVALID,
             "leaf_demand.pairs: empty; list the leaf pairs that need links"),
            (S, mod(ok, lambda m: setattr(m.leaf_demand.pairs[1], "a", 9000)), INVALID,
             "leaf_demand.pairs[1].a: 9000 is outside 0..7"),
            (P, mod(ok, lambda m: setattr(m.leaf_demand.pairs[0], "b", -1)), INVALID,
             "leaf_demand.pairs[0].b: -1 is outside 0..7"),
            (S, mod(ok, lambda m: setattr(m.leaf_demand.pairs[0], "b", 0)), INVALID,
             "leaf_demand.pairs[0].b: equals a (0); a pair joins two different leaves"),
            (S, mod(ok, lambda m: setattr(m.leaf_demand.pairs[0], "links", 0)), INVALID,
             "leaf_demand.pairs[0].links: 0 is outside 1..8"),
            (S, mod(ok, lambda m: setattr(m.leaf_demand.pairs[0], "links", 9)), INVALID,
             "leaf_demand.pairs[0].links: 9 is outside 1..8"),
            (S, mod(ok, lambda m: setattr(m.leaf_demand.pairs[1], "b", 7)), INVALID,
             "leaf_demand.pairs[1].b: leaf 7 holds none of the job's GPUs"),
            (S, mod(ok, lambda m: m.leaf_demand.pairs.append(
                jobs_pb2.LeafPair(a=2, b=0, links=1))), INVALID,
             "leaf_demand.pairs[2]: leaves 0 and 2 are listed twice (first at pairs[0])"),
            (S, mod(ok, lambda m: setattr(m.leaf_demand.pairs[1], "links", 7)), INVALID,
             "leaf_demand.pairs[1].links: leaf 2 would need 9 links in total, it has 8"),
            (P, mod(ok, lambda m: setattr(m.options, "planner", "delta-slow")), INVALID,
             "options.planner: \"delta-slow\" is not a known planner (leaf-centric, "
             "pod-centric, delta-fast, prop-alloc, sqrt-alloc, iter-halve)"),
            (P, mod(ok, lambda m: setattr(m.options, "planner", "x\n")), INVALID,
             "options.planner: byte 0x0a at offset 1 is not printable ASCII"),
            (LD, fabric_pb2.ListDevicesRequest(group=2), INVALID,
             "group: 2 given but has_group is false"),
            (LD, fabric_pb2.ListDevicesRequest(has_group=True, group=4), INVALID,
             "group: 4 is outside 0..3"),
            (LC, fabric_pb2.ListCircuitsRequest(job_id="a b"), INVALID,
             "job_id: character ' ' at offset 1 is not allowed (use A-Z a-z 0-9 . _ -)"),
            (LC, fabric_pb2.ListCircuitsRequest(device="ocs/1"), INVALID,
             "device: character '/' at offset 3 is not allowed (use A-Z a-z 0-9 . _ - :)"),
            (LC, fabric_pb2.ListCircuitsRequest(has_pod=True, pod=-1), INVALID,
             "pod: -1 is outside 0..3"),
            (LC, fabric_pb2.ListCircuitsRequest(pod=3), INVALID,
             "pod: 3 given but has_pod is false"),
            (DR, fabric_pb2.DrainDeviceRequest(), INVALID, "device: required"),
            (DR, fabric_pb2.DrainDeviceRequest(device="d" * 65), INVALID,
             "device: 65 characters, at most 64"),
            (UN, fabric_pb2.UndrainDeviceRequest(device="ocs g0"), INVALID,
             "device: character ' ' at offset 3 is not allowed (use A-Z a-z 0-9 . _ - :)"),
            (R, jobs_pb2.ReleaseJobRequest(), INVALID, "id: required"),
            (G, jobs_pb2.GetJobRequest(id="../etc"), INVALID, "id: character '/' at offset 2 is not allowed (use A-Z a-z 0-9 . _ -)"),
            (L, jobs_pb2.ListJobsRequest(state=42), INVALID, "state: 42 is not a JobState"),
            (HC, health_pb2.HealthCheckRequest(service="s" * 129), INVALID,
             "service: 129 characters, at most 128"),
            # Well-formed, refused by the daemon itself.
            (G, jobs_pb2.GetJobRequest(id="no-such-job"), NF, "id: no job no-such-job"),
            (R, jobs_pb2.ReleaseJobRequest(id="no-such-job"), NF, "id: no job no-such-job"),
            (DR, fabric_pb2.DrainDeviceRequest(device="ocs-g9-d9"), NF,
             "device: no device ocs-g9-d9"),
            (UN, fabric_pb2.UndrainDeviceRequest(device="ocs-g0-d4"), NF,
             "device: no device ocs-g0-d4"),
            (HC, health_pb2.HealthCheckRequest(service="ocs.v9.Nope"), NF,
             'service: "ocs.v9.Nope" is not known'),
            (S, job("bad-2", gpus=(0, 8), pairs=((0, 1, 1),)), INVALID,
             "leaf_demand.pairs[0]: leaves 0 and 1 are both in pod 0"),
        ]
        self.assertGreaterEqual(len(cases), 30)
        for n, (fn, req, code, details) in enumerate(cases):
            with self.subTest(case=n, details=details):
                self.refused(fn, req, code, details)
        # Nothing of it became a job or touched a device.
        ids = [j.spec.id for j in self.jobs().ListJobs(jobs_pb2.ListJobsRequest(),
                                                       timeout=TIMEOUT_S).jobs]
        self.assertFalse([i for i in ids if i.startswith("bad-")], ids)

    def test_malformed_bytes_and_64mb(self):
        raw = self.channels["scheduler"].unary_unary("/ocs.v1.Jobs/SubmitJob")
        with self.assertRaises(grpc.RpcError) as cm:
            raw(b"\x0a\x7fabc", timeout=TIMEOUT_S)
        self.assertEqual(cm.exception.code(), INVALID)
        self.assertIn("request: not a valid ocs.v1.JobSpec message", cm.exception.details())
        big = job("big-1", idempotency_key="k" * (64 << 20))
        self.refused(self.jobs().SubmitJob, big, grpc.StatusCode.RESOURCE_EXHAUSTED)
        self.refused(self.jobs().GetJob, jobs_pb2.GetJobRequest(id="big-1"),
                     grpc.StatusCode.NOT_FOUND, "id: no job big-1")
        raw = self.channels["operator"].unary_unary("/ocs.v1.Jobs/DeleteEverything")
        with self.assertRaises(grpc.RpcError) as cm:
            raw(b"", timeout=TIMEOUT_S)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.UNIMPLEMENTED)


if __name__ == "__main__":
    unittest.main(verbosity=2)

"""rail_helpers.py - what the rail-OCS daemon tests (test_rail_daemon.py,
test_rail_polatis.py) share: a gRPC client of the rail API, ocsctl with
--json, and the port map a fresh ocsd programs. The generated stubs are
imported when a client is made (ocsd_fleet.gen_stubs must have run)."""
import json
import subprocess

TIMEOUT_S = 30


class Client:
    """The Jobs, Fabric and Events services of the ocsd at fleet.target."""

    def __init__(self, fleet):
        import grpc
        from ocs.v1 import events_pb2_grpc, fabric_pb2, fabric_pb2_grpc
        from ocs.v1 import jobs_pb2, jobs_pb2_grpc
        self._fabric_pb2, self._jobs_pb2 = fabric_pb2, jobs_pb2
        ch = grpc.insecure_channel(fleet.target)
        self.jobs = jobs_pb2_grpc.JobsStub(ch)
        self.fabric = fabric_pb2_grpc.FabricStub(ch)
        self.events = events_pb2_grpc.EventsStub(ch)

    def ports(self):
        """({rail port: GPU or -1}, [faulty GPUs]) from ListRailPorts."""
        r = self.fabric.ListRailPorts(self._fabric_pb2.ListRailPortsRequest(),
                                      timeout=TIMEOUT_S)
        return {p.rail_port: p.gpu for p in r.ports}, sorted(r.faulty_gpus)

    def submit(self, job_id, gpus):
        pb = self._jobs_pb2
        spec = pb.JobSpec(id=job_id, placement=pb.Placement(
            gpus=[pb.GpuPlacement(gpu=g) for g in gpus]))
        return self.jobs.SubmitJob(spec, timeout=TIMEOUT_S).job

    def job(self, job_id):
        return self.jobs.GetJob(self._jobs_pb2.GetJobRequest(id=job_id), timeout=TIMEOUT_S).job


def ocsctl(ocsctl_path, target, *args):
    """(exit code, the --json answer or None, stderr) of `ocsctl ARGS`."""
    r = subprocess.run([ocsctl_path, "--insecure", "--server", target, "--json"] + list(args),
                       capture_output=True, text=True, timeout=60)
    return r.returncode, (json.loads(r.stdout) if r.returncode == 0 and r.stdout else None), \
        r.stderr


def initial_map(fleet):
    """{rail port: GPU}: GPU r of every active server on its rail port r."""
    out = {}
    for s in range(fleet.servers):
        if s % fleet.spo >= fleet.active:
            continue
        for r in range(fleet.rails):
            g, i = divmod(s, fleet.spo)
            out[(g * fleet.active + i) * fleet.rails + r] = fleet.gpu(s, r)
    return out

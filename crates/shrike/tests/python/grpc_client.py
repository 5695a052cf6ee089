"""A third-party client of `shrike service`: Python grpcio, with stubs generated here from
proto/shrike/v1/shrike.proto. Drives a run (stream samples, Cancel), a run cancelled by
closing its stream, the busy and refused cases, health and reflection.

usage: grpc_client.py PROTO_ROOT SERVICE_ADDR TOKEN TARGET_URL
Prints one line per check; exits non-zero on the first failure.
"""
import importlib
import json
import os
import sys
import tempfile

import grpc
from grpc_tools import protoc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

proto_root, addr, token, target = sys.argv[1:5]
out = tempfile.mkdtemp(prefix="shrike-grpc-py-")
well_known = os.path.join(os.path.dirname(protoc.__file__), "_proto")
rc = protoc.main(["protoc", f"-I{proto_root}", f"-I{well_known}", f"--python_out={out}",
                  f"--grpc_python_out={out}", "shrike/v1/shrike.proto"])
assert rc == 0, f"protoc failed: {rc}"
sys.path.insert(0, out)
pb = importlib.import_module("shrike.v1.shrike_pb2")
pb_grpc = importlib.import_module("shrike.v1.shrike_pb2_grpc")
from google.protobuf import struct_pb2, duration_pb2  # noqa: E402

auth = [("authorization", f"Bearer {token}")]
channel = grpc.insecure_channel(addr)
stub = pb_grpc.ShrikeStub(channel)


def spec(**options):
    s = struct_pb2.Struct()
    s.update(options)
    return pb.RunSpec(options=s)


def request(run_id, **options):
    return pb.RunRequest(spec=spec(**options), run_id=run_id,
                         sample_period=duration_pb2.Duration(nanos=100_000_000))


# Health needs no token (Kubernetes probes send none).
health = health_pb2_grpc.HealthStub(channel)
status = health.Check(health_pb2.HealthCheckRequest(service="shrike.v1.Shrike")).status
assert status == health_pb2.HealthCheckResponse.SERVING, status
print("health: SERVING")

# Reflection lists the service.
refl = reflection_pb2_grpc.ServerReflectionStub(channel)
answers = refl.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")]),
                                    metadata=auth)
names = [s.name for a in answers for s in a.list_services_response.service]
assert "shrike.v1.Shrike" in names, names
print("reflection:", ",".join(sorted(names)))

# No token: UNAUTHENTICATED.
try:
    next(iter(stub.Run(request("nope", uri=target, duration="1s"))))
    raise AssertionError("ran without a token")
except grpc.RpcError as e:
    assert e.code() == grpc.StatusCode.UNAUTHENTICATED, e
print("no token: UNAUTHENTICATED")

# A run streamed, then cancelled with Cancel: the stream still ends with the result.
call = stub.Run(request("py-1", uri=target, requests_per_second=200, duration="30s"), metadata=auth)
started = None
samples = []
result = None
for event in call:
    kind = event.WhichOneof("event")
    if kind == "started":
        started = event.started
        assert started.run_id == "py-1", started
    elif kind == "sample":
        samples.append(event.sample)
        if len(samples) == 4:
            # The rate changes while the run goes on (a coordinator re-spreading a lost
            # generator's share); what cannot be changed is refused by name.
            for run_id, factor, code in [("py-none", 2.0, grpc.StatusCode.NOT_FOUND),
                                         ("py-1", 0.0, grpc.StatusCode.INVALID_ARGUMENT)]:
                try:
                    stub.ScaleRate(pb.ScaleRateRequest(run_id=run_id, factor=factor), metadata=auth)
                    raise AssertionError(f"ScaleRate {run_id} {factor} was accepted")
                except grpc.RpcError as e:
                    assert e.code() == code, (run_id, factor, e)
            stub.ScaleRate(pb.ScaleRateRequest(run_id="py-1", factor=2.0), metadata=auth)
        if len(samples) == 10:
            # Meanwhile the service is busy: a second run is refused.
            try:
                next(iter(stub.Run(request("py-2", uri=target, duration="1s"), metadata=auth)))
                raise AssertionError("a second run was accepted")
            except grpc.RpcError as e:
                assert e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, e
                assert "--max-concurrent-runs" in e.details(), e.details()
            print("busy: RESOURCE_EXHAUSTED")
            assert stub.Cancel(pb.CancelRequest(run_id="py-1"), metadata=auth).cancelled
    elif kind == "result":
        result = event.result
assert started is not None and result is not None
assert result.termination == "interrupted", result.termination
doc = json.loads(result.json)
glob = [r for r in doc["results"] if r["name"] == "global"][0]
total = int([c for c in glob["counters"] if c["name"] == "upstream_rq_total"][0]["value"])
streamed = sum(s.counters.get("upstream_rq_total", 0) for s in samples)
assert total == streamed and total > 0, (total, streamed)
hist = [h for s in samples for h in s.histograms if h.id.endswith("request_to_response")]
assert sum(h.count for h in hist) == total and all(len(h.hdr_v2) > 0 for h in hist)
assert samples[-1].last
per = [s.counters.get("upstream_rq_total", 0) for s in samples]
before, after = sum(per[1:4]) / 3, sum(per[6:9]) / 3
assert after > 1.6 * before, ("ScaleRate 2.0 doubles the rate", per)
print(f"run: {len(samples)} samples, {total} requests, rate x{after / before:.1f}, cancelled")

# Closing the stream stops the run: the service is free again at once.
call = stub.Run(request("py-3", uri=target, requests_per_second=50, duration="30s"), metadata=auth)
for event in call:
    if event.WhichOneof("event") == "sample":
        call.cancel()
        break
for attempt in range(50):
    try:
        events = list(stub.Run(request("py-4", uri=target, duration="200ms"), metadata=auth))
        break
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, e
        import time
        time.sleep(0.1)
else:
    raise AssertionError("the closed stream's run still holds the service")
assert events[-1].result.termination == "completed", events[-1]
print("closed stream: run stopped")

# Options a remote run may not use, and limits, are INVALID_ARGUMENT naming them.
for options, says in [({"metrics_listen": "127.0.0.1:0"}, "metrics_listen"),
                      ({"request_file": "/etc/passwd"}, "request_file"),
                      ({"requests_per_second": 100000}, "--max-rps")]:
    try:
        list(stub.Run(request("py-bad", uri=target, duration="1s", **options), metadata=auth))
        raise AssertionError(f"{options} was accepted")
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.INVALID_ARGUMENT, (options, e)
        assert says in e.details(), (options, e.details())
print("refusals: INVALID_ARGUMENT")

# A capacity search run by the service: each trial streams as it is judged, then the report.
def search(**options):
    s = struct_pb2.Struct()
    s.update(options)
    return s


slow = {"request_options": {"request_headers": [{"header": {
    "key": "x-nighthawk-test-server-config", "value": '{"static_delay": "0.03s"}'}}]}}
trials, report = [], None
for event in stub.Capacity(pb.CapacityRequest(
        spec=spec(uri=target, **slow), run_id="py-cap",
        search=search(slos=["p99<=10ms"], start=50, trial_duration="300ms",
                      final_duration="500ms", max_trials=3)), metadata=auth):
    kind = event.WhichOneof("event")
    if kind == "trial":
        trials.append(event.trial)
    elif kind == "report":
        report = event.report
assert report is not None and report.complete and report.failed, report
doc = json.loads(report.json)
assert len(doc["capacity"]["trials"]) == len(trials) > 0, (doc["capacity"]["trials"], trials)
# Each trial fails its SLO, or (on a machine too busy to pace) is judged invalid: never a pass.
assert all(t.verdicts[0] in ("fail", "invalid") for t in trials), trials
assert any(t.verdicts[0] == "fail" for t in trials), trials
print(f"capacity: {len(trials)} trials streamed, no rate meets p99<=10ms")
# A trial beyond the service's --max-rps ends the search, naming the limit.
try:
    list(stub.Capacity(pb.CapacityRequest(
        spec=spec(uri=target), run_id="py-cap2",
        search=search(slos=["p99<=1s"], start=5000, trial_duration="300ms")), metadata=auth))
    raise AssertionError("a trial over --max-rps ran")
except grpc.RpcError as e:
    assert e.code() == grpc.StatusCode.FAILED_PRECONDITION and "--max-rps" in e.details(), e
print("capacity: a trial over --max-rps is refused")

# A sweep run by the service: each measured run streams as it ends, then the report.
runs, report = [], None
for event in stub.Sweep(pb.SweepRequest(
        spec=spec(uri=target, duration="300ms"), run_id="py-sweep",
        sweep=search(rates="50,100", iterations=2, wait="0s")), metadata=auth):
    kind = event.WhichOneof("event")
    if kind == "run":
        runs.append(event.run)
    elif kind == "report":
        report = event.report
assert report is not None and report.complete, report
doc = json.loads(report.json)
points = doc["sweep"]["points"]
assert [p["level"] for p in points] == [50, 100], points
assert all(len(p["iterations"]) == 2 for p in points), points
assert [(r.level, r.iteration) for r in runs] == [(50, 0), (50, 1), (100, 0), (100, 1)], runs
assert all(r.throughput_rps > 0 and r.errors == 0 for r in runs), runs
assert doc["peak"]["rate"] == 100, doc["peak"]
print(f"sweep: {len(runs)} runs streamed over 2 points, peak at {doc['peak']['rate']}/s")
# A grid beyond the service's limits ends the sweep, naming the limit.
try:
    list(stub.Sweep(pb.SweepRequest(
        spec=spec(uri=target, duration="300ms"), run_id="py-sweep2",
        sweep=search(rates="500,5000", iterations=1)), metadata=auth))
    raise AssertionError("a run over --max-rps ran")
except grpc.RpcError as e:
    assert e.code() == grpc.StatusCode.FAILED_PRECONDITION and "--max-rps" in e.details(), e
print("sweep: a run over --max-rps is refused")
print("all ok")

"""A third-party client of Nighthawk's gRPC API as `shrike service` serves it: Python grpcio,
with stubs generated here from Shrike's Nighthawk-compatible protos (proto/nighthawk), as a
Nighthawk user's script would generate them from Nighthawk's own.

Runs a test through NighthawkService.ExecutionStream and checks the Output it decodes (counters
and statistics, Shrike's exact histogram in its extension field), then that an unsupported
option gets an error_detail naming it, that a failed run carries error_detail beside its
output, and that reflection lists the service.

usage: nighthawk_client.py PROTO_ROOT SERVICE_ADDR TARGET_URL
Prints one line per check; exits non-zero on the first failure.
"""
import importlib
import os
import sys
import tempfile

import grpc
from grpc_tools import protoc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

proto_root, addr, target = sys.argv[1:4]
out = tempfile.mkdtemp(prefix="shrike-nighthawk-py-")
well_known = os.path.join(os.path.dirname(protoc.__file__), "_proto")
rc = protoc.main(["protoc", f"-I{proto_root}", f"-I{well_known}", f"--python_out={out}",
                  f"--grpc_python_out={out}", "api/client/service.proto",
                  "api/client/options.proto", "api/client/output.proto",
                  "envoy/config/core/v3/base.proto", "envoy/config/core/v3/address.proto",
                  "envoy/config/core/v3/extension.proto", "envoy/config/core/v3/protocol.proto",
                  "envoy/config/metrics/v3/stats.proto",
                  "envoy/extensions/transport_sockets/tls/v3/tls.proto",
                  "envoy/type/v3/semantic_version.proto", "google/rpc/status.proto",
                  "api/rate_limiter/linear_ramping_rate_limiter.proto"])
assert rc == 0, f"protoc failed: {rc}"
sys.path.insert(0, out)
service_pb2 = importlib.import_module("api.client.service_pb2")
service_grpc = importlib.import_module("api.client.service_pb2_grpc")
options_pb2 = importlib.import_module("api.client.options_pb2")
extension_pb2 = importlib.import_module("envoy.config.core.v3.extension_pb2")
ramping_pb2 = importlib.import_module("api.rate_limiter.linear_ramping_rate_limiter_pb2")
from google.protobuf import any_pb2, duration_pb2, wrappers_pb2  # noqa: E402

channel = grpc.insecure_channel(addr)
stub = service_grpc.NighthawkServiceStub(channel)


def execute(options):
    """One StartRequest on its own stream, as Nighthawk's own Python tooling sends it."""
    req = service_pb2.ExecutionRequest(start_request=service_pb2.StartRequest(options=options))
    responses = list(stub.ExecutionStream(iter([req])))
    assert len(responses) == 1, responses
    return responses[0]


def options(**extra):
    o = options_pb2.CommandLineOptions(
        uri=wrappers_pb2.StringValue(value=target),
        requests_per_second=wrappers_pb2.UInt32Value(value=200),
        connections=wrappers_pb2.UInt32Value(value=2),
        duration=duration_pb2.Duration(seconds=1),
        execution_id=wrappers_pb2.StringValue(value="py-1"),
        **extra,
    )
    return o


# A run: the Output has the counters and statistics Nighthawk's readers look for.
r = execute(options())
assert not r.HasField("error_detail"), r.error_detail
assert r.execution_id == "py-1", r.execution_id
out = r.output
glob = [x for x in out.results if x.name == "global"]
assert len(glob) == 1, [x.name for x in out.results]
g = glob[0]
counters = {c.name: c.value for c in g.counters}
assert counters.get("benchmark.http_2xx", 0) >= 150, counters
assert counters["upstream_rq_total"] == counters["benchmark.http_2xx"], counters
stats = {s.id: s for s in g.statistics}
latency = stats["benchmark_http_client.request_to_response"]
assert latency.count == counters["benchmark.http_2xx"], (latency.count, counters)
assert latency.HasField("mean") and latency.mean.ToNanoseconds() > 0, latency.mean
assert any(p.percentile >= 0.99 and p.duration.ToNanoseconds() > 0 for p in latency.percentiles)
# Shrike's extension: the whole histogram, which Nighthawk's readers skip.
assert len(latency.shrike_histogram) > 0
assert out.options.requests_per_second.value == 200, out.options
assert out.options.uri.value == target, out.options
print(f"run: {counters['benchmark.http_2xx']} responses, p99 present, histogram "
      f"{len(latency.shrike_histogram)} bytes")

# Nighthawk's linear-ramping rate limiter plugin, packed in an Any as Nighthawk's tooling
# packs it: 0→200/s over 0.5 s (50 requests), then 200/s for 0.5 s (100).
ramp = any_pb2.Any()
ramp.Pack(ramping_pb2.LinearRampingRateLimiterConfig(ramp_time=duration_pb2.Duration(nanos=500000000)))
r = execute(options(rate_limiter_plugin_config=extension_pb2.TypedExtensionConfig(
    name="nighthawk.linear-ramping-rate-limiter-plugin", typed_config=ramp)))
assert not r.HasField("error_detail"), r.error_detail
g = [x for x in r.output.results if x.name == "global"][0]
counters = {c.name: c.value for c in g.counters}
assert counters["benchmark.http_2xx"] == 150, counters
echoed = r.output.options.rate_limiter_plugin_config
assert echoed.name == "nighthawk.linear-ramping-rate-limiter-plugin", echoed
back = ramping_pb2.LinearRampingRateLimiterConfig()
assert echoed.typed_config.Unpack(back) and back.ramp_time.ToNanoseconds() == 500000000, echoed
print("ramp: 150 responses, the plugin echoed")

# Options that cannot run (an HTTP/3 tunnel without TLS to the proxy, which Nighthawk refuses
# too): error_detail names them, no output.
r = execute(options(tunnel_options=options_pb2.CommandLineOptions.TunnelOptions(
    tunnel_uri="127.0.0.1:1", tunnel_protocol=options_pb2.Protocol(value=options_pb2.Protocol.HTTP3))))
assert r.HasField("error_detail") and not r.HasField("output"), r
assert "tunnel_tls_context" in r.error_detail.message, r.error_detail.message
assert r.error_detail.code == grpc.StatusCode.INVALID_ARGUMENT.value[0], r.error_detail.code
print("unsupported:", r.error_detail.message)

# A failed run (the target answers 503, so the default failure predicate fires): the output
# and an error_detail, as Nighthawk answers.
failing = options()
h = failing.request_options.request_headers.add()
h.header.key = "x-nighthawk-test-server-config"
h.header.value = '{"response_status": 503}'
r = execute(failing)
assert r.HasField("error_detail") and r.HasField("output"), r.error_detail
assert "benchmark.http_5xx" in r.error_detail.message, r.error_detail.message
print("failed run:", r.error_detail.message)

# Reflection lists Nighthawk's service beside Shrike's.
refl = reflection_pb2_grpc.ServerReflectionStub(channel)
answers = refl.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")]))
names = [s.name for a in answers for s in a.list_services_response.service]
assert "nighthawk.client.NighthawkService" in names, names
print("reflection:", ",".join(sorted(names)))
print("all ok")

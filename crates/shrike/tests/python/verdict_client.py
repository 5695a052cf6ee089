"""Runs one spec on `shrike service` through Python's grpcio (stubs generated here from
proto/shrike/v1/shrike.proto) and prints how the service judged it: one JSON object with the
Result's `failed` and `verdict`, and the verdict its result document stores.

usage: verdict_client.py PROTO_ROOT SERVICE_ADDR SPEC_JSON
"""
import importlib
import json
import os
import sys
import tempfile

import grpc
from grpc_tools import protoc

proto_root, addr, spec_json = sys.argv[1:4]
out = tempfile.mkdtemp(prefix="shrike-grpc-verdict-")
well_known = os.path.join(os.path.dirname(protoc.__file__), "_proto")
rc = protoc.main(["protoc", f"-I{proto_root}", f"-I{well_known}", f"--python_out={out}",
                  f"--grpc_python_out={out}", "shrike/v1/shrike.proto"])
assert rc == 0, f"protoc failed: {rc}"
sys.path.insert(0, out)
pb = importlib.import_module("shrike.v1.shrike_pb2")
pb_grpc = importlib.import_module("shrike.v1.shrike_pb2_grpc")
from google.protobuf import struct_pb2  # noqa: E402

options = struct_pb2.Struct()
options.update(json.loads(spec_json))
stub = pb_grpc.ShrikeStub(grpc.insecure_channel(addr))
result = None
for event in stub.Run(pb.RunRequest(spec=pb.RunSpec(options=options))):
    if event.HasField("result"):
        result = event.result
assert result is not None, "the stream ended without a result"
document = json.loads(result.json)
print(json.dumps({"failed": result.failed, "verdict": result.verdict,
                  "document": document["shrike"]["verdict"]}))

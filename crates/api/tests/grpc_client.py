"""A gRPC client that is not Trainyard's: Python grpcio, with every
message learnt from the server's reflection (no generated code).

Usage: grpc_client.py ADDRESS NAMESPACE JOB
Prints one line per check; exits non-zero on the first failure.
"""
import re
import sys

import grpc
from google.protobuf import descriptor_pool, json_format, message_factory
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)

address, namespace, job = sys.argv[1:4]
channel = grpc.insecure_channel(address)
db = ProtoReflectionDescriptorDatabase(channel)
services = sorted(db.get_services())
print("services:", ", ".join(services))
assert "trainyard.v1alpha1.Scheduler" in services, services
assert "grpc.health.v1.Health" in services, services
pool = descriptor_pool.DescriptorPool(db)


def call(service, method, fields):
    m = pool.FindServiceByName(service).FindMethodByName(method)
    request = message_factory.GetMessageClass(m.input_type)
    response = message_factory.GetMessageClass(m.output_type)
    stub = channel.unary_unary(
        f"/{service}/{method}",
        request_serializer=lambda r: r.SerializeToString(),
        response_deserializer=response.FromString,
    )
    return json_format.MessageToDict(stub(json_format.ParseDict(fields, request())))


health = call("grpc.health.v1.Health", "Check", {"service": "trainyard.v1alpha1.Scheduler"})
print("health:", health.get("status"))
assert health.get("status") == "SERVING", health

queues = call("trainyard.v1alpha1.Scheduler", "ListQueues", {})
print("queues:", ", ".join(q["path"] for q in queues["queues"]))
assert queues["queues"], queues

jobs = call("trainyard.v1alpha1.Scheduler", "ListJobs", {"namespace": namespace})
print("jobs:", ", ".join(f'{j["namespace"]}/{j["name"]}' for j in jobs["jobs"]))

why = call("trainyard.v1alpha1.Scheduler", "ExplainJob", {"namespace": namespace, "name": job})
print("explain:", why.get("reason"), "|", why.get("message"))
assert why.get("pending"), why

when = call(
    "trainyard.v1alpha1.Scheduler",
    "ForecastStart",
    {"existing": {"namespace": namespace, "name": job}, "horizonSeconds": "3600"},
)
print("forecast:", when.get("job"), "starts" if when.get("starts") else "not within an hour")
assert when.get("job") == f"{namespace}/{job}", when
assert int(when.get("horizonMs", "0")) > 0, when

snap = call("trainyard.v1alpha1.Scheduler", "GetSnapshot", {})
assert re.search(r'^kind: "?List"?$', snap["objectsYaml"], re.M), snap
print("snapshot: ok")

try:
    call("trainyard.v1alpha1.Scheduler", "ExplainJob", {"namespace": namespace, "name": "nope"})
    raise SystemExit("an unknown job was explained")
except grpc.RpcError as e:
    assert e.code() == grpc.StatusCode.NOT_FOUND, e
    print("unknown job:", e.code().name)

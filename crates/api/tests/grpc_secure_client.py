"""A gRPC client that is not Trainyard's against the API exposed with TLS
and bearer tokens: Python grpcio, tokens as call credentials (the
`authorization: Bearer TOKEN` metadata), messages from reflection.

Usage: grpc_secure_client.py ADDRESS CA_PEM ALICE_TOKEN AUDITOR_TOKEN
(alice may read pods in namespace a only; the auditor may list pods
everywhere). Prints one line per check; exits non-zero on the first failure.
"""
import re
import sys

import grpc
from google.protobuf import descriptor_pool, json_format, message_factory
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)

address, ca_path, alice, auditor = sys.argv[1:5]
with open(ca_path, "rb") as f:
    tls = grpc.ssl_channel_credentials(root_certificates=f.read())
options = (("grpc.ssl_target_name_override", "localhost"),)
SCHEDULER = "trainyard.v1alpha1.Scheduler"


def channel(token=None):
    creds = tls
    if token is not None:
        creds = grpc.composite_channel_credentials(tls, grpc.access_token_call_credentials(token))
    return grpc.secure_channel(address, creds, options)


def raw(ch, path, payload=b"", metadata=None):
    """A call with raw bytes: no messages needed without reflection."""
    return ch.unary_unary(path)(payload, metadata=metadata, timeout=10)


def code_of(f):
    try:
        f()
    except grpc.RpcError as e:
        return e.code().name
    return "OK"


bare = channel()
# Health needs no token (the kubelet's gRPC probes send none):
# HealthCheckResponse{status: SERVING} is field 1 = 1.
health = raw(bare, "/grpc.health.v1.Health/Check")
assert health == b"\x08\x01", health
print("health without a token: SERVING")
print("no token:", code_of(lambda: raw(bare, f"/{SCHEDULER}/ListQueues")))
print(
    "wrong token:",
    code_of(lambda: raw(bare, f"/{SCHEDULER}/ListQueues", metadata=(("authorization", "Bearer nope"),))),
)


class Client:
    def __init__(self, token):
        self.channel = channel(token)
        self.pool = descriptor_pool.DescriptorPool(ProtoReflectionDescriptorDatabase(self.channel))

    def call(self, method, fields):
        m = self.pool.FindServiceByName(SCHEDULER).FindMethodByName(method)
        request = message_factory.GetMessageClass(m.input_type)
        response = message_factory.GetMessageClass(m.output_type)
        stub = self.channel.unary_unary(
            f"/{SCHEDULER}/{method}",
            request_serializer=lambda r: r.SerializeToString(),
            response_deserializer=response.FromString,
        )
        return json_format.MessageToDict(stub(json_format.ParseDict(fields, request()), timeout=10))


a = Client(alice)
queues = a.call("ListQueues", {})
assert queues["queues"], queues
print("alice's queues:", ", ".join(q["path"] for q in queues["queues"]))
print("alice explains b/wait:", code_of(lambda: a.call("ExplainJob", {"namespace": "b", "name": "wait"})))
jobs = a.call("ListJobs", {})
print("alice's jobs:", ", ".join(f'{j["namespace"]}/{j["name"]}' for j in jobs.get("jobs", [])))
print("alice's snapshot:", code_of(lambda: a.call("GetSnapshot", {})))
snap = Client(auditor).call("GetSnapshot", {})
assert re.search(r'^kind: "?List"?$', snap["objectsYaml"], re.M), snap
print("auditor's snapshot: ok")

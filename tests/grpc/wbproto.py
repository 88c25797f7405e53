"""Compiles proto/wirebench_echo.proto with grpc_tools.protoc into a temporary directory and
imports the generated modules, so the Python side speaks exactly the wire format the .proto
file describes (and never wirebench's Rust source)."""

import importlib
import os
import sys
import tempfile

UNIT = {"data": 1, "doubles": 8, "records": 32}
ENCODING = {"bytes": "data", "doubles": "doubles", "records": "records"}


def load():
    from grpc_tools import protoc

    here = os.path.dirname(os.path.abspath(__file__))
    proto_dir = os.path.join(here, "..", "..", "proto")
    out = tempfile.mkdtemp(prefix="wirebench-grpc-py-")
    rc = protoc.main(
        [
            "protoc",
            f"-I{proto_dir}",
            f"--python_out={out}",
            f"--grpc_python_out={out}",
            os.path.join(proto_dir, "wirebench_echo.proto"),
        ]
    )
    if rc != 0:
        raise SystemExit(f"protoc failed: {rc}")
    sys.path.insert(0, out)
    pb = importlib.import_module("wirebench_echo_pb2")
    rpc = importlib.import_module("wirebench_echo_pb2_grpc")
    return pb, rpc


def kind(p):
    """The body field a payload carries ('data' without one)."""
    return p.WhichOneof("body") or "data"


def values(p):
    k = kind(p)
    if k == "data":
        return len(p.data)
    if k == "doubles":
        return len(p.doubles.v)
    return len(p.records.r)


def app_len(p):
    return values(p) * UNIT[kind(p)] + len(p.tail)


def make(pb, field, n, response_size=0):
    """A payload of n application bytes in `field`'s encoding, the rest in tail."""
    unit = UNIT[field]
    whole, rest = divmod(n, unit)
    p = pb.Payload(response_size=response_size, tail=bytes(rest))
    if field == "data":
        p.data = bytes(whole)
    elif field == "doubles":
        p.doubles.v.extend([1.5] * whole)
    else:
        for i in range(whole):
            p.records.r.append(pb.Record(id=i, value=0.25, stamp=i, tag="abcdefghijkl"))
    return p

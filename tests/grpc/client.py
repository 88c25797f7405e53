"""A grpcio client of wirebench.v1.Echo: for each encoding, CALLS calls of REQUEST bytes
asking for RESPONSE bytes back, and an Upload of MESSAGES messages of REQUEST bytes; prints
what came back as one JSON line. Usage: client.py HOST:PORT CALLS REQUEST RESPONSE MESSAGES"""

import json
import sys

import grpc

import wbproto

pb, rpc = wbproto.load()


def main():
    target, calls, request, response, messages = sys.argv[1], *map(int, sys.argv[2:6])
    out = {}
    limit = 256 << 20
    with grpc.insecure_channel(target, options=[
        ("grpc.max_receive_message_length", limit),
        ("grpc.max_send_message_length", limit),
    ]) as channel:
        stub = rpc.EchoStub(channel)
        for encoding, field in wbproto.ENCODING.items():
            answers, answer_bytes, answer_values, fields = 0, 0, 0, set()
            for _ in range(calls):
                a = stub.Call(wbproto.make(pb, field, request, response))
                answers += 1
                answer_bytes += wbproto.app_len(a)
                answer_values += wbproto.values(a)
                fields.add(wbproto.kind(a))
            echo = stub.Call(wbproto.make(pb, field, request, 0))
            summary = stub.Upload(iter([wbproto.make(pb, field, request) for _ in range(messages)]))
            out[encoding] = {
                "answers": answers,
                "answer_bytes": answer_bytes,
                "answer_values": answer_values,
                "answer_fields": sorted(fields),
                "echo_bytes": wbproto.app_len(echo),
                "upload_messages": summary.messages,
                "upload_bytes": summary.bytes,
            }
    print(json.dumps(out), flush=True)


main()

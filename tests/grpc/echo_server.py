"""A grpcio implementation of wirebench.v1.Echo: answers Call with response_size bytes in
the request's encoding (the request itself when 0) and Upload with its counts. Prints
"PORT <n>" once listening on 127.0.0.1; when its standard input closes, prints what it
received as one JSON line and exits."""

import json
import sys
import threading
from concurrent import futures

import grpc

import wbproto

pb, rpc = wbproto.load()
lock = threading.Lock()
seen = {"calls": 0, "bytes_in": 0, "values_in": {}, "bytes_out": 0, "uploads": 0,
        "upload_messages": 0, "encodings": []}


class Echo(rpc.EchoServicer):
    def Call(self, request, context):
        field = wbproto.kind(request)
        if request.response_size > 0:
            answer = wbproto.make(pb, field, request.response_size)
        else:
            answer = request
        with lock:
            seen["calls"] += 1
            seen["bytes_in"] += wbproto.app_len(request)
            seen["values_in"][field] = seen["values_in"].get(field, 0) + wbproto.values(request)
            seen["bytes_out"] += wbproto.app_len(answer)
            if field not in seen["encodings"]:
                seen["encodings"].append(field)
        return answer

    def Upload(self, request_iterator, context):
        n = b = 0
        for p in request_iterator:
            n += 1
            b += wbproto.app_len(p)
        with lock:
            seen["uploads"] += 1
            seen["upload_messages"] += n
        return pb.UploadSummary(messages=n, bytes=b)


def main():
    limit = 256 << 20
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=4),
        options=[("grpc.max_receive_message_length", limit),
                 ("grpc.max_send_message_length", limit)],
    )
    rpc.add_EchoServicer_to_server(Echo(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(f"PORT {port}", flush=True)
    sys.stdin.read()
    server.stop(0)
    with lock:
        print(json.dumps(seen), flush=True)


main()

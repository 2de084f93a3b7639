"""A Python grpcio greeter server for the gRPC interop tests (generic
handlers, no generated code).

usage: grpc_server.py [--tls CERTFILE KEYFILE]   -- listens on 127.0.0.1 (a
free port; with --tls, TLS with that PEM certificate and key), prints the
port when ready, serves until its stdin closes (so it never outlives the
test that started it).

SayHello answers "Hello, NAME, from grpcio!"; SayHelloStream answers COUNT
times "Hello, NAME, from grpcio! (i/COUNT)"; an empty name is
INVALID_ARGUMENT "name is empty". A SayHello name "sleep:MS" first waits
MS milliseconds, or until the client cancels the call.
"""

import argparse
import sys
import time
from concurrent import futures

import grpc

from greeter_pb import decode_request, encode_reply


def greeting(name, context):
    if not name:
        context.abort(grpc.StatusCode.INVALID_ARGUMENT, "name is empty")
    return f"Hello, {name}, from grpcio!"


def say_hello(request, context):
    name, _ = request
    if name.startswith("sleep:"):
        end = time.monotonic() + int(name[len("sleep:"):]) / 1000
        while context.is_active() and time.monotonic() < end:
            time.sleep(0.01)
    return greeting(name, context)


def say_hello_stream(request, context):
    name, count = request
    hello = greeting(name, context)
    for i in range(1, count + 1):
        yield f"{hello} ({i}/{count})"


def add_port(server, tls):
    """Listens on a free port of 127.0.0.1: plain (h2c), or TLS with the
    PEM certificate and key files TLS names; returns the port."""
    if tls is None:
        return server.add_insecure_port("127.0.0.1:0")
    cert_file, key_file = tls
    with open(cert_file, "rb") as f:
        cert = f.read()
    with open(key_file, "rb") as f:
        key = f.read()
    credentials = grpc.ssl_server_credentials([(key, cert)])
    return server.add_secure_port("127.0.0.1:0", credentials)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tls", nargs=2, metavar=("CERTFILE", "KEYFILE"))
    args = parser.parse_args()
    handlers = {
        "SayHello": grpc.unary_unary_rpc_method_handler(
            say_hello, request_deserializer=decode_request,
            response_serializer=encode_reply),
        "SayHelloStream": grpc.unary_stream_rpc_method_handler(
            say_hello_stream, request_deserializer=decode_request,
            response_serializer=encode_reply),
    }
    options = [("grpc.max_receive_message_length", 8 << 20),
               ("grpc.max_send_message_length", 8 << 20)]
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4), options=options)
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler("helloworld.Greeter", handlers),))
    port = add_port(server, args.tls)
    server.start()
    print(port, flush=True)
    sys.stdin.read()
    server.stop(None)


if __name__ == "__main__":
    main()

"""A Python grpcio greeter server for the gRPC interop tests (generic
handlers, no generated code).

usage: grpc_server.py   -- listens on 127.0.0.1 (a free port), prints the
port when ready, serves until its stdin closes (so it never outlives the
test that started it).

SayHello answers "Hello, NAME, from grpcio!"; SayHelloStream answers COUNT
times "Hello, NAME, from grpcio! (i/COUNT)"; an empty name is
INVALID_ARGUMENT "name is empty".
"""

import sys
from concurrent import futures

import grpc

from greeter_pb import decode_request, encode_reply


def greeting(name, context):
    if not name:
        context.abort(grpc.StatusCode.INVALID_ARGUMENT, "name is empty")
    return f"Hello, {name}, from grpcio!"


def say_hello(request, context):
    name, _ = request
    return greeting(name, context)


def say_hello_stream(request, context):
    name, count = request
    hello = greeting(name, context)
    for i in range(1, count + 1):
        yield f"{hello} ({i}/{count})"


def main():
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
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(port, flush=True)
    sys.stdin.read()
    server.stop(None)


if __name__ == "__main__":
    main()

"""A Python grpcio client for the gRPC interop tests (generic API, no
generated code).

usage: grpc_client.py [--tls CAFILE] PORT CALL...   -- one line of output
per CALL (with --tls, over TLS to 127.0.0.1, trusting CAFILE's PEM
certificate; the server's must name 127.0.0.1):
    hello:NAME          SayHello          -> "OK <message>"
    big:N               SayHello with an N-character name; the reply is
                        checked in full   -> "OK big <reply length>"
    stream:NAME:COUNT   SayHelloStream    -> "OK stream <replies> <last>"
    method:PATH         a unary call to PATH with an empty request
    deadline:MS:NAME    SayHello with a deadline MS milliseconds away
                                          -> "OK <message>"
A call that fails prints "ERR <status code name> <details>".
"""

import argparse

import grpc

from greeter_pb import decode_reply, encode_request

TIMEOUT = 30


def pattern(n):
    return "".join(chr(33 + (i * 7 + (i >> 12)) % 90) for i in range(n))


def unary(channel, path):
    return channel.unary_unary(
        path, request_serializer=lambda req: req, response_deserializer=decode_reply)


def run(channel, call):
    kind, _, arg = call.partition(":")
    if kind == "hello":
        reply = unary(channel, "/helloworld.Greeter/SayHello")(
            encode_request(arg), timeout=TIMEOUT)
        return f"OK {reply}"
    if kind == "big":
        name = pattern(int(arg))
        reply = unary(channel, "/helloworld.Greeter/SayHello")(
            encode_request(name), timeout=TIMEOUT)
        if reply != f"Hello, {name}!":
            return f"MISMATCH big reply of {len(reply)} characters"
        return f"OK big {len(reply)}"
    if kind == "stream":
        name, _, count = arg.rpartition(":")
        call = channel.unary_stream(
            "/helloworld.Greeter/SayHelloStream",
            request_serializer=lambda req: req, response_deserializer=decode_reply)
        replies = list(call(encode_request(name, int(count)), timeout=TIMEOUT))
        for i, reply in enumerate(replies, 1):
            if not reply.endswith(f"({i}/{count})"):
                return f"MISMATCH stream reply {i}: {reply}"
        return f"OK stream {len(replies)} {replies[-1] if replies else ''}"
    if kind == "deadline":
        ms, _, name = arg.partition(":")
        reply = unary(channel, "/helloworld.Greeter/SayHello")(
            encode_request(name), timeout=int(ms) / 1000)
        return f"OK {reply}"
    if kind == "method":
        reply = unary(channel, arg)(b"", timeout=TIMEOUT)
        return f"OK {reply}"
    raise ValueError(f"unknown call {call}")


def channel(port, ca_file):
    """A channel to 127.0.0.1:PORT: plain (h2c), or TLS trusting CA_FILE."""
    target = f"127.0.0.1:{port}"
    options = [("grpc.max_receive_message_length", 8 << 20),
               ("grpc.max_send_message_length", 8 << 20)]
    if ca_file is None:
        return grpc.insecure_channel(target, options=options)
    with open(ca_file, "rb") as f:
        credentials = grpc.ssl_channel_credentials(root_certificates=f.read())
    return grpc.secure_channel(target, credentials, options=options)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tls", metavar="CAFILE")
    parser.add_argument("port")
    parser.add_argument("calls", nargs="*")
    args = parser.parse_args()
    with channel(args.port, args.tls) as ch:
        for call in args.calls:
            try:
                line = run(ch, call)
            except grpc.RpcError as e:
                line = f"ERR {e.code().name} {e.details()}"
            print(line, flush=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""gRPC calls for the soak (scripts/soak.sh), with Python `grpcio` against
the server's `helloworld.Greeter`, over h2c and over TLS.

    grpc_calls.py SECONDS GRPC_PORT GRPCS_PORT CA_FILE [WORKERS]

WORKERS (default 4) threads, half plain, half TLS. Each opens a channel,
makes 1 to 200 calls on it and closes it (connection churn): SayHello
with names of 1 byte to 64 KiB, SayHelloStream with 1 to 300 replies (all
checked), an empty name (INVALID_ARGUMENT expected), and one stream in
ten cancelled after its first reply (a deliberate abort). Every call has
a CALL_TIMEOUT deadline: DEADLINE_EXCEEDED is a hang.
"""

import os
import sys

import grpc

from common import Hang, Tally, exit_with, run_workers

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..",
                                "crates", "spargio-http", "tests", "py"))
from greeter_pb import decode_reply, encode_request  # noqa: E402

CALL_TIMEOUT = 10
SAY_HELLO = "/helloworld.Greeter/SayHello"
SAY_HELLO_STREAM = "/helloworld.Greeter/SayHelloStream"


def channel(port, ca):
    target = f"127.0.0.1:{port}"
    # A subchannel pool of its own: grpcio otherwise shares one
    # connection between every channel to the same target, and closing a
    # channel would close no connection.
    options = [("grpc.max_receive_message_length", 1 << 20),
               ("grpc.use_local_subchannel_pool", 1)]
    if ca is None:
        return grpc.insecure_channel(target, options=options)
    with open(ca, "rb") as f:
        creds = grpc.ssl_channel_credentials(root_certificates=f.read())
    return grpc.secure_channel(target, creds, options=options)


def call(tally, kind, rng, ch):
    unary = ch.unary_unary(SAY_HELLO, request_serializer=bytes,
                           response_deserializer=decode_reply)
    stream = ch.unary_stream(SAY_HELLO_STREAM, request_serializer=bytes,
                             response_deserializer=decode_reply)
    pick = rng.random()
    try:
        if pick < 0.5:
            name = "n" * rng.choice([1, 100, rng.randrange(1, 65536)])
            reply = unary(encode_request(name), timeout=CALL_TIMEOUT)
            if reply != f"Hello, {name}!":
                raise ValueError(f"SayHello reply of {len(reply)} characters differs")
            tally.add("ok", f"{kind}-unary")
        elif pick < 0.55:
            try:
                unary(encode_request(""), timeout=CALL_TIMEOUT)
                raise ValueError("an empty name was not refused")
            except grpc.RpcError as e:
                if e.code() != grpc.StatusCode.INVALID_ARGUMENT:
                    raise
            tally.add("ok", f"{kind}-refused")
        else:
            count = rng.randrange(1, 301)
            replies = stream(encode_request("s", count), timeout=CALL_TIMEOUT)
            if pick < 0.6:
                next(replies)
                replies.cancel()
                tally.add("aborted", f"{kind}-cancelled")
                return
            got = 0
            for got, reply in enumerate(replies, 1):
                if not reply.endswith(f"({got}/{count})"):
                    raise ValueError(f"stream reply {got}: {reply}")
            if got != count:
                raise ValueError(f"{got} stream replies of {count}")
            tally.add("ok", f"{kind}-stream")
    except grpc.RpcError as e:
        if e.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
            raise Hang(f"{kind}: DEADLINE_EXCEEDED ({CALL_TIMEOUT} s)") from e
        raise ValueError(f"{kind}: {e.code().name} {e.details()}") from e


def worker(tally, port, ca):
    kind = "grpcs" if ca else "grpc"

    def step(rng):
        with channel(port, ca) as ch:
            for _ in range(rng.randrange(1, 201)):
                call(tally, kind, rng, ch)

    return kind, step


def main():
    seconds, plain, tls, ca = float(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    workers = int(sys.argv[5]) if len(sys.argv) > 5 else 4
    tally = Tally("grpcio")
    exit_with(run_workers(tally, seconds, [
        worker(tally, tls, ca) if i % 2 else worker(tally, plain, None)
        for i in range(workers)
    ]))


if __name__ == "__main__":
    main()

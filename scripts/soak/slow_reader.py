#!/usr/bin/env python3
"""Slow readers for the soak (scripts/soak.sh): each asks for a large
response and reads it a few bytes at a time, with a small receive buffer
and now and then a pause, so the server's writes wait on a full socket
for most of the response. One in seven abandons the response halfway
(reset or close): a deliberate abort.

    slow_reader.py SECONDS HTTP_PORT HTTPS_PORT CA_FILE [WORKERS]

WORKERS (default 4) threads, half over plain HTTP/1.1, half over TLS.
A response must complete within RESPONSE_TIMEOUT, and each read within
READ_TIMEOUT, or it is a hang.
"""

import sys
import time

from common import (
    Hang, Tally, abort, connect, exit_with, read_head, recv_some, request,
    run_workers, tls_context,
)

READ_TIMEOUT = 15
RESPONSE_TIMEOUT = 60


def slow_read(tally, port, ctx):
    name = "tls" if ctx else "plain"

    def step(rng):
        size = rng.randrange(64 << 10, 512 << 10)
        sock = connect(port, READ_TIMEOUT, rcvbuf=4096)
        try:
            if ctx:
                sock = ctx.wrap_socket(sock, server_hostname="localhost")
            sock.sendall(request("GET", f"/big/{size}"))
            deadline = time.monotonic() + RESPONSE_TIMEOUT
            status, headers, body = read_head(sock)
            length = int(headers.get("content-length", -1))
            if status != 200 or length != size:
                tally.add("failed", name, f"status {status}, length {length} for {size}")
                return
            quit_at = rng.randrange(size) if rng.random() < 1 / 7 else None
            got = len(body)
            while got < size:
                if time.monotonic() > deadline:
                    raise Hang(f"{name}: {got}/{size} bytes after {RESPONSE_TIMEOUT} s")
                if quit_at is not None and got >= quit_at:
                    abort(sock, rng)
                    sock = None
                    tally.add("aborted", name)
                    return
                chunk = recv_some(sock, rng.randrange(1, 256))
                if not chunk:
                    tally.add("failed", name, f"EOF after {got}/{size} bytes")
                    return
                if chunk.count(b"x") != len(chunk):
                    tally.add("failed", name, "a byte other than x in the body")
                    return
                got += len(chunk)
                time.sleep(0.001)
                if rng.random() < 0.0005:
                    time.sleep(rng.uniform(0.5, 2))
            tally.add("ok", name)
        finally:
            if sock is not None:
                sock.close()

    return name, step


def main():
    seconds, http_port, https_port, ca = (
        float(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
    workers = int(sys.argv[5]) if len(sys.argv) > 5 else 4
    tally = Tally("slow-reader")
    ctx = tls_context(ca)
    exit_with(run_workers(tally, seconds, [
        slow_read(tally, https_port if i % 2 else http_port, ctx if i % 2 else None)
        for i in range(workers)
    ]))


if __name__ == "__main__":
    main()

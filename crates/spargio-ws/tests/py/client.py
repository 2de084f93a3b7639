"""A Python `websockets` client for the interop tests.

usage: client.py URL echo            -- text and binary messages of every
                                        size in SIZES, each checked byte
                                        for byte, then close 1000 "py done"
       client.py URL oversize N [F]  -- send N bytes (in F fragments), print
                                        the close code and reason we get
With a wss:// URL, the CA file in $WS_CA is trusted.
"""

import os
import ssl
import sys

from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

SIZES = [1, 125, 126, 127, 65_535, 65_536, 65_537, 300_000, 1 << 20]
TIMEOUT = 30


def binary(n):
    return bytes(((i % 251) ^ ((i >> 12) & 0xFF)) for i in range(n))


def text(n):
    return bytes(33 + (i * 7 + (i >> 12)) % 90 for i in range(n)).decode("ascii")


def main():
    url, mode = sys.argv[1], sys.argv[2]
    ctx = None
    if url.startswith("wss://"):
        ctx = ssl.create_default_context(cafile=os.environ["WS_CA"])
    with connect(url, ssl=ctx, max_size=None, open_timeout=TIMEOUT,
                 close_timeout=TIMEOUT, compression=None) as ws:
        if mode == "echo":
            count = 0
            for n in SIZES:
                for msg in (text(n), binary(n)):
                    ws.send(msg)
                    back = ws.recv(timeout=TIMEOUT)
                    if type(back) is not type(msg) or back != msg:
                        print(f"MISMATCH size {n} {type(msg).__name__}", flush=True)
                        sys.exit(1)
                    count += 1
            ws.close(code=1000, reason="py done")
            print(f"OK {count}", flush=True)
        elif mode == "oversize":
            n = int(sys.argv[3])
            fragments = int(sys.argv[4]) if len(sys.argv) > 4 else 1
            part = n // fragments
            try:
                if fragments == 1:
                    ws.send(b"x" * n)
                else:
                    ws.send([b"x" * part for _ in range(fragments)])
                ws.recv(timeout=TIMEOUT)
                print("NOT CLOSED", flush=True)
                sys.exit(1)
            except ConnectionClosed as e:
                rcvd = e.rcvd
                if rcvd is None:
                    print("CLOSED none", flush=True)
                else:
                    print(f"CLOSED {rcvd.code} {rcvd.reason}", flush=True)
        else:
            sys.exit(f"unknown mode {mode}")


main()

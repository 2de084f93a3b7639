#!/usr/bin/env python3
"""WebSocket sessions for the soak (scripts/soak.sh), with Python
`websockets` against the server's `/ws` echo, plain (ws://) and over TLS
(wss://).

    ws_client.py SECONDS HTTP_PORT HTTPS_PORT CA_FILE [SESSIONS]

SESSIONS (default 8) concurrent loops, half ws://, half wss://; each opens
a session, sends 1 to 40 messages (text or binary, 0 to 64 KiB) and checks
every echo, pings now and then, and closes with the closing handshake;
one session in eight instead drops its TCP connection right after a send
(a deliberate abort). Every step (opening, each echo, each pong, the
close) has STEP_TIMEOUT, and a close whose handshake does not complete is
a hang too.
"""

import asyncio
import os
import random
import sys
import time

from websockets.asyncio.client import connect
from websockets.exceptions import WebSocketException

from common import MAX_OPS, SEED, Tally, exit_with, tls_context

STEP_TIMEOUT = 10


class Hang(Exception):
    pass


async def step(what, aw):
    try:
        return await asyncio.wait_for(aw, STEP_TIMEOUT)
    except asyncio.TimeoutError as e:
        raise Hang(f"{what}: no answer within {STEP_TIMEOUT} s") from e


async def session(url, ssl_ctx, rng, tally, kind):
    ws = await step("open", connect(
        url, ssl=ssl_ctx, server_hostname="localhost" if ssl_ctx else None,
        open_timeout=STEP_TIMEOUT, close_timeout=STEP_TIMEOUT, proxy=None,
        compression=None, ping_interval=None, max_size=1 << 20))
    try:
        drop = rng.random() < 1 / 8
        for i in range(rng.randrange(1, 41)):
            size = rng.choice([0, 1, 125, 126, 65535, rng.randrange(65536)])
            msg = ("t" * size) if rng.random() < 0.5 else os.urandom(size)
            await step("send", ws.send(msg))
            if drop and i >= 1:
                ws.transport.abort()
                tally.add("aborted", f"{kind}-drop")
                return
            echo = await step("echo", ws.recv())
            if echo != msg:
                raise ValueError(f"echo of a {size}-byte message differs")
            if rng.random() < 0.1:
                pong = await step("ping", ws.ping())
                await step("pong", pong)
        await step("close", ws.close())
        if ws.close_code != 1000:
            raise ValueError(f"close code {ws.close_code} ({ws.close_reason!r})")
        tally.add("ok", kind)
    finally:
        ws.transport.abort()


async def loop(url, ssl_ctx, seed, tally, deadline, kind):
    rng = random.Random(seed)
    for _ in range(MAX_OPS):
        if time.monotonic() >= deadline:
            return
        try:
            await session(url, ssl_ctx, rng, tally, kind)
        except Hang as e:
            tally.add("hung", kind, str(e))
        except (OSError, WebSocketException, ValueError) as e:
            tally.add("failed", kind, f"{type(e).__name__}: {e}")


async def main():
    seconds, http, https, ca = float(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    sessions = int(sys.argv[5]) if len(sys.argv) > 5 else 8
    tally = Tally("websockets")
    ctx = tls_context(ca)
    deadline = time.monotonic() + seconds
    await asyncio.gather(*(
        loop(f"wss://127.0.0.1:{https}/ws", ctx, SEED + i, tally, deadline, "wss") if i % 2
        else loop(f"ws://127.0.0.1:{http}/ws", None, SEED + i, tally, deadline, "ws")
        for i in range(sessions)
    ))
    return tally.report()


if __name__ == "__main__":
    exit_with(asyncio.run(main()))

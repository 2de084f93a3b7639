"""An asyncio Python `websockets` echo server for the interop tests.

Listens on 127.0.0.1, port 0, and prints the port. Echoes every message,
except the text "close-me", which it answers with close code 4000 and
reason "server bye". With $WS_CERT and $WS_KEY set it serves wss://.
Exits by itself after 120 s.
"""

import asyncio
import os
import ssl

from websockets.asyncio.server import serve


async def echo(ws):
    async for msg in ws:
        if msg == "close-me":
            await ws.close(code=4000, reason="server bye")
            return
        await ws.send(msg)


async def main():
    ctx = None
    if os.environ.get("WS_CERT"):
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(os.environ["WS_CERT"], os.environ["WS_KEY"])
    async with serve(echo, "127.0.0.1", 0, max_size=None, ssl=ctx,
                     compression=None) as server:
        port = server.sockets[0].getsockname()[1]
        print(port, flush=True)
        await asyncio.sleep(120)


asyncio.run(main())

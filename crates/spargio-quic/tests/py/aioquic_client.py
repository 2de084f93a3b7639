"""An aioquic (PyPI) QUIC client for interop tests.

Prints machine-readable lines and exits 0 when the mode's outcome was
seen, 1 otherwise:
  ALPN <protocol>                 after the handshake
  OK echo <n> <checksum>          echo: pattern(n, seed) came back intact
  OK upload <n> <checksum>        upload N: the server answered the right
                                  checksum (8 bytes LE) for N bytes
  CLOSED <code> <reason>          the peer closed the connection (close
                                  mode: the expected outcome)
  MISMATCH ... / ERROR ...        anything else
Checksums are FNV-1a 64 in decimal. In echo and upload modes the client
ends by closing with application code 0, reason "done".
"""

import argparse
import asyncio
import sys

from aioquic.asyncio import QuicConnectionProtocol, connect
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import (
    ConnectionTerminated,
    HandshakeCompleted,
    StreamDataReceived,
    StreamReset,
)

from quic_data import checksum, pattern


class Client(QuicConnectionProtocol):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        loop = asyncio.get_running_loop()
        self.streams = {}
        self.terminated = loop.create_future()
        self.alpn = None

    def quic_event_received(self, event):
        if isinstance(event, HandshakeCompleted):
            self.alpn = event.alpn_protocol
        elif isinstance(event, StreamDataReceived):
            entry = self.streams.get(event.stream_id)
            if entry is None:
                return
            entry[0] += event.data
            if event.end_stream and not entry[1].done():
                entry[1].set_result(bytes(entry[0]))
        elif isinstance(event, StreamReset):
            entry = self.streams.get(event.stream_id)
            if entry is not None and not entry[1].done():
                entry[1].set_exception(ConnectionError(f"stream reset {event.error_code}"))
        elif isinstance(event, ConnectionTerminated):
            if not self.terminated.done():
                self.terminated.set_result((event.error_code, event.reason_phrase))
            for _, fut in self.streams.values():
                if not fut.done():
                    fut.set_exception(ConnectionError("connection terminated"))

    async def exchange(self, data):
        """Sends data and FIN on a new bi stream; returns the answer."""
        stream_id = self._quic.get_next_available_stream_id()
        fut = asyncio.get_running_loop().create_future()
        self.streams[stream_id] = [bytearray(), fut]
        self._quic.send_stream_data(stream_id, data, end_stream=True)
        self.transmit()
        return await fut


def closed_line(client):
    code, reason = client.terminated.result()
    return f"CLOSED {code} {reason}"


async def run(args):
    config = QuicConfiguration(
        is_client=True,
        alpn_protocols=[args.alpn],
        server_name=args.server_name,
        max_datagram_frame_size=65536,
    )
    config.load_verify_locations(args.ca)
    async with connect(
        args.host, args.port, configuration=config, create_protocol=Client
    ) as client:
        await client.wait_connected()
        print(f"ALPN {client.alpn}", flush=True)
        mode = args.mode[0]
        try:
            if mode == "echo":
                data = pattern(args.bytes, args.seed)
                answer = await client.exchange(data)
                if answer != data:
                    print(f"MISMATCH echo sent {len(data)} got {len(answer)}", flush=True)
                    return 1
                print(f"OK echo {len(answer)} {checksum(answer)}", flush=True)
            elif mode == "upload":
                n = int(args.mode[1])
                data = pattern(n, args.seed)
                answer = await client.exchange(data)
                want = checksum(data)
                got = int.from_bytes(answer, "little") if len(answer) == 8 else None
                if got != want:
                    print(f"MISMATCH upload {n} want {want} got {got} ({len(answer)} bytes)", flush=True)
                    return 1
                print(f"OK upload {n} {got}", flush=True)
            elif mode == "close":
                try:
                    await client.exchange(b"hello")
                except ConnectionError:
                    pass
                await client.terminated
                print(closed_line(client), flush=True)
                return 0
            else:
                print(f"ERROR unknown mode {args.mode}", flush=True)
                return 1
        except ConnectionError as e:
            if client.terminated.done():
                print(closed_line(client), flush=True)
            else:
                print(f"ERROR {e}", flush=True)
            return 1
        client.close(error_code=0, reason_phrase="done")
        await client.wait_closed()
        return 0


async def main(args):
    try:
        return await asyncio.wait_for(run(args), args.timeout)
    except asyncio.TimeoutError:
        print("ERROR timeout", flush=True)
        return 1
    except ConnectionError as e:
        print(f"ERROR {e}", flush=True)
        return 1


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--ca", required=True)
    p.add_argument("--alpn", default="spargio-test")
    p.add_argument("--server-name", default="localhost")
    p.add_argument("--bytes", type=int, default=65536, help="echo mode: payload size")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--timeout", type=float, default=30.0)
    p.add_argument(
        "--mode",
        nargs="+",
        default=["echo"],
        help="echo | upload N | close",
    )
    sys.exit(asyncio.run(main(p.parse_args())))

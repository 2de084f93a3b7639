"""An aioquic (PyPI) QUIC server for interop tests.

Prints "LISTENING <port>" once bound, then serves until killed.
Modes:
  echo  each bi stream is echoed back after its FIN (then FIN); each uni
        stream is echoed on a new uni stream; datagrams are echoed
  sink  each bi stream is answered, after its FIN, with the FNV-1a 64
        checksum of what arrived (8 bytes LE), then FIN
  close the connection is closed with application code 42, reason "bye",
        when the first stream's FIN arrives
"""

import argparse
import asyncio
import functools
import sys

from aioquic.asyncio import QuicConnectionProtocol, serve
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import DatagramFrameReceived, StreamDataReceived

from quic_data import checksum


def is_uni(stream_id):
    return stream_id & 2 != 0


class Server(QuicConnectionProtocol):
    def __init__(self, *args, mode, **kwargs):
        super().__init__(*args, **kwargs)
        self.mode = mode
        self.buffers = {}

    def quic_event_received(self, event):
        if isinstance(event, DatagramFrameReceived):
            if self.mode == "echo":
                self._quic.send_datagram_frame(event.data)
                self.transmit()
        elif isinstance(event, StreamDataReceived):
            buf = self.buffers.setdefault(event.stream_id, bytearray())
            buf += event.data
            if event.end_stream:
                self.stream_done(event.stream_id, bytes(self.buffers.pop(event.stream_id)))
                self.transmit()

    def stream_done(self, stream_id, data):
        if self.mode == "close":
            self._quic.close(error_code=42, reason_phrase="bye")
        elif self.mode == "echo":
            if is_uni(stream_id):
                back = self._quic.get_next_available_stream_id(is_unidirectional=True)
                self._quic.send_stream_data(back, data, end_stream=True)
            else:
                self._quic.send_stream_data(stream_id, data, end_stream=True)
        elif self.mode == "sink" and not is_uni(stream_id):
            answer = checksum(data).to_bytes(8, "little")
            self._quic.send_stream_data(stream_id, answer, end_stream=True)


async def main(args):
    config = QuicConfiguration(
        is_client=False,
        alpn_protocols=[args.alpn],
        max_datagram_frame_size=65536,
        idle_timeout=args.idle_timeout,
    )
    config.load_cert_chain(args.cert, args.key)
    server = await serve(
        args.host,
        args.port,
        configuration=config,
        create_protocol=functools.partial(Server, mode=args.mode),
    )
    port = server._transport.get_extra_info("sockname")[1]
    print(f"LISTENING {port}", flush=True)
    await asyncio.Future()


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--cert", required=True)
    p.add_argument("--key", required=True)
    p.add_argument("--alpn", default="spargio-test")
    p.add_argument("--mode", choices=["echo", "sink", "close"], default="echo")
    p.add_argument("--idle-timeout", type=float, default=60.0)
    try:
        asyncio.run(main(p.parse_args()))
    except KeyboardInterrupt:
        sys.exit(0)

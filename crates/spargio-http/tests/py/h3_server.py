"""An HTTP/3 server on aioquic (PyPI) for interop tests.

Usage:
  h3_server.py --cert FILE --key FILE [--host 127.0.0.1] [--port 0]
               [--idle-timeout 60] [--max-streams 256] [--no-goaway-close]
               [--verbose]

  --cert, --key    PEM certificate chain and private key
  --host, --port   UDP address to bind (port 0, the default: any free port)
  --idle-timeout   QUIC idle timeout in seconds (default 60)
  --max-streams    bidirectional streams a client may have open at once
                   (default 256; one more is granted for each that closes)
  --no-goaway-close  after GOAWAY, leave the connection open (see /goaway)
  --verbose        one line per request (and reset) on stderr

Prints exactly one line "LISTENING <port>" on stdout (flushed) once bound
and nothing else on stdout, then serves until killed. SIGTERM and SIGINT
close every connection with H3_NO_ERROR (0x100), reason "shutdown", and
exit with status 0. Errors go to stderr.

QUIC: ALPN "h3" only. Initial max_data 64 MiB and max_stream_data 16 MiB
(aioquic doubles both as they are used). Requests are served
concurrently, one asyncio task per request stream. Responses are sent
with back-pressure: a handler waits while more than 1 MiB of its stream
is unacknowledged, and at most 8 streams at a time have unsent data
(see H3Server.write). Request bodies are buffered in memory (no size
limit; the client's flow-control window is reopened as data arrives).

Routes (method and path; a query string is allowed on every route). Every
response has "server: spargio-test-h3". Routes that do not read the body
answer without waiting for the request to end.
  GET  /hello       200 "hello over h3"; content-type: text/plain,
                    content-length: 13
  GET  /bytes?n=N   200, N bytes where byte i = i % 251, sent as DATA
                    frames of at most 64 KiB each (a streamed response;
                    content-type: application/octet-stream, no
                    content-length); N missing or not a non-negative
                    integer: 400
  POST /echo        200 once the request has ended, its body exactly (DATA
                    frames of at most 64 KiB); x-body-sha256: <lowercase
                    hex sha256 of the body>, x-body-len: <len>,
                    content-length: <len>, content-type:
                    application/octet-stream
  POST /sha256      200 once the request has ended; the body is the
                    64-character lowercase hex sha256 of the request body
                    (no newline); x-body-len: <len>, content-type:
                    text/plain, content-length: 64
  GET  /trailers    200 "with trailers" (content-type: text/plain,
                    content-length: 13), then a trailing HEADERS frame
                    with x-trailer: yes and x-count: 3 that ends the stream
  GET  /slow?ms=M   sleeps M ms (asyncio.sleep: other requests go on),
                    then 200 "slow" (content-length: 4); M missing or
                    invalid: 400
  GET  /goaway      200 "bye" (content-length: 3); right after its last
                    frame, an HTTP/3 GOAWAY frame on the control stream
                    carrying the lowest request stream ID not yet seen
                    (the highest request stream ID received + 4). New
                    requests on stream IDs at or above it are refused:
                    the stream is reset and stopped with
                    H3_REQUEST_REJECTED (0x10b). Once every request below
                    it has ended and its response has been acknowledged
                    (at most 5 s), the connection is closed with
                    H3_NO_ERROR (0x100), reason "goaway"; with
                    --no-goaway-close it stays open until the client
                    closes it or it idles out
  anything else     404 "not found" (text/plain, content-length: 9)
A client reset or STOP_SENDING on a request stream aborts that request
only: its response is reset with H3_REQUEST_CANCELLED (0x10c) (with
--verbose, stderr gets "reset stream=<id> code=<hex> <path>" or
"stop_sending ..." and "<method> <path> stream=<id> aborted"). A handler
failure resets the stream with H3_INTERNAL_ERROR (0x102).

aioquic 1.7.2 (the version this was written against):
- has no API to send GOAWAY (H3Connection has no send_goaway, and a
  received GOAWAY is parsed and dropped without an event), so the server
  writes the GOAWAY frame itself on the H3Connection's control stream
  (private attribute _local_control_stream_id);
- supports trailers: a second send_headers after the DATA frames sends
  them, and a received trailing HEADERS frame is a HeadersReceived event;
- has no configuration for the concurrent-stream limit (fixed at 128), so
  --max-streams sets QuicConnection's private _local_max_streams_bidi
  before the handshake;
- is pure Python, and its cost per packet grows with the number of open
  streams: one 16 MiB download takes about 2-3 s on loopback, 100
  concurrent 1 MiB downloads on one connection about 25 s.
"""

import argparse
import asyncio
import hashlib
import signal
import sys
from urllib.parse import parse_qs, urlsplit

from aioquic.asyncio import QuicConnectionProtocol, serve
from aioquic.buffer import encode_uint_var
from aioquic.h3.connection import (
    H3_ALPN,
    ErrorCode,
    FrameType,
    H3Connection,
    encode_frame,
)
from aioquic.h3.events import DataReceived, H3Event, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import (
    ConnectionTerminated,
    ProtocolNegotiated,
    QuicEvent,
    StopSendingReceived,
    StreamReset,
)

CHUNK = 64 * 1024  # largest DATA frame payload the server sends
HIGH_WATER = 1 << 20  # unacknowledged bytes per stream before a handler waits
SEND_SLOTS = 8  # streams which may have unsent data at once (see H3Server.write)

_PERIOD = bytes(range(251))
_BLOCK = _PERIOD * (CHUNK // 251 + 2)


def pattern_chunk(offset, size):
    """Bytes offset..offset+size of the pattern byte i = i % 251 (size <= CHUNK)."""
    start = offset % 251
    return _BLOCK[start : start + size]


class Refused(Exception):
    """The request was reset or stopped by the client, or the connection closed."""


class Request:
    def __init__(self, stream_id, headers):
        self.stream_id = stream_id
        self.headers = headers
        self.method = ""
        self.path = ""
        for name, value in headers:
            if name == b":method":
                self.method = value.decode()
            elif name == b":path":
                self.path = value.decode()
        self.body = bytearray()
        self.ended = asyncio.Event()
        self.task = None


class H3Server(QuicConnectionProtocol):
    def __init__(self, *args, options, **kwargs):
        super().__init__(*args, **kwargs)
        self.options = options
        # Peer-initiated bidi stream limit (aioquic: fixed 128 by default).
        limit = self._quic._local_max_streams_bidi
        limit.value = limit.sent = options.max_streams
        self.h3 = None
        self.requests = {}  # stream_id -> Request
        self.highest_request_id = -4
        self.goaway_id = None
        self.closed = False
        self._progress = asyncio.Event()
        self.send_slots = asyncio.Semaphore(SEND_SLOTS)

    # --- plumbing -------------------------------------------------------

    def _wake(self):
        """Wakes every task waiting for progress (a send, an ACK, a reset, a close)."""
        event, self._progress = self._progress, asyncio.Event()
        event.set()

    def transmit(self):
        # Called after each received datagram (ACKs), on timers and after writes.
        super().transmit()
        self._wake()

    def log(self, msg):
        if self.options.verbose:
            print(msg, file=sys.stderr, flush=True)

    def quic_event_received(self, event: QuicEvent):
        if isinstance(event, ProtocolNegotiated):
            if event.alpn_protocol in H3_ALPN:
                self.h3 = H3Connection(self._quic)
        elif isinstance(event, ConnectionTerminated):
            self.closed = True
            for req in list(self.requests.values()):
                if req.task is not None:
                    req.task.cancel()
            self._wake()
        if self.h3 is None:
            return
        for h3_event in self.h3.handle_event(event):
            self.h3_event_received(h3_event)
        if isinstance(event, (StreamReset, StopSendingReceived)):
            code = event.error_code
            req = self.requests.pop(event.stream_id, None)
            if req is not None:
                kind = "reset" if isinstance(event, StreamReset) else "stop_sending"
                self.log(f"{kind} stream={event.stream_id} code={code:#x} {req.path}")
                if req.task is not None:
                    req.task.cancel()
                self._quic.reset_stream(event.stream_id, ErrorCode.H3_REQUEST_CANCELLED)
            self._wake()

    def h3_event_received(self, event: H3Event):
        sid = event.stream_id
        if isinstance(event, HeadersReceived):
            req = self.requests.get(sid)
            if req is None:
                # A new request (a trailing HEADERS of a known one is ignored).
                if self.goaway_id is not None and sid >= self.goaway_id:
                    self.log(f"rejected stream={sid} (after GOAWAY)")
                    self._quic.reset_stream(sid, ErrorCode.H3_REQUEST_REJECTED)
                    self._quic.stop_stream(sid, ErrorCode.H3_REQUEST_REJECTED)
                    return
                req = Request(sid, event.headers)
                self.requests[sid] = req
                self.highest_request_id = max(self.highest_request_id, sid)
                req.task = asyncio.ensure_future(self.serve_request(req))
            if event.stream_ended:
                req.ended.set()
        elif isinstance(event, DataReceived):
            req = self.requests.get(sid)
            if req is None:
                return
            req.body += event.data
            if event.stream_ended:
                req.ended.set()

    def _sender(self, stream_id):
        """The stream's QUIC sender, None once it is finished and discarded."""
        if self.closed:
            raise Refused("connection closed")
        stream = self._quic._streams.get(stream_id)
        if stream is not None and stream.sender._reset_error_code is not None:
            raise Refused("stream reset")
        return stream

    async def write(self, stream_id, data, end_stream):
        """Sends one DATA frame, with back-pressure.

        aioquic spends time on every stream with unsent data for each packet
        it builds, so at most SEND_SLOTS streams get to have unsent data: a
        writer holds a slot until its frame is on the wire (or flow control
        blocks it). Then it waits while more than HIGH_WATER bytes of the
        stream are unacknowledged.
        """
        async with self.send_slots:
            self._sender(stream_id)
            self.h3.send_data(stream_id, data, end_stream)
            self.transmit()
            while True:
                stream = self._sender(stream_id)
                if stream is None:
                    break
                sender = stream.sender
                if sender.highest_offset >= sender._buffer_stop:
                    break  # all of it sent (at least once)
                if sender.highest_offset >= stream.max_stream_data_remote:
                    break  # stream flow control: the client is not reading
                if self._quic._remote_max_data_used >= self._quic._remote_max_data:
                    break  # connection flow control
                await self._progress.wait()
        while True:
            stream = self._sender(stream_id)
            if stream is None or stream.sender._buffer_stop - stream.sender._buffer_start <= HIGH_WATER:
                return
            await self._progress.wait()

    async def send_body(self, stream_id, data, end_stream=True):
        """Sends data in DATA frames of at most CHUNK bytes."""
        view = memoryview(data)
        for start in range(0, len(data), CHUNK):
            last = start + CHUNK >= len(data)
            await self.write(stream_id, bytes(view[start : start + CHUNK]), end_stream and last)
        if not data and end_stream:
            await self.write(stream_id, b"", True)

    def send_head(self, stream_id, status, headers=(), end_stream=False):
        head = [(b":status", str(status).encode()), (b"server", b"spargio-test-h3")]
        head += [(k.encode(), str(v).encode()) for k, v in headers]
        self.h3.send_headers(stream_id, head, end_stream=end_stream)
        self.transmit()

    async def simple(self, stream_id, status, body, content_type="text/plain", extra=()):
        headers = [("content-type", content_type), ("content-length", len(body))]
        self.send_head(stream_id, status, headers + list(extra))
        await self.send_body(stream_id, body)

    # --- routes ---------------------------------------------------------

    async def serve_request(self, req: Request):
        sid = req.stream_id
        try:
            status = await self.route(req)
            self.log(f"{req.method} {req.path} stream={sid} -> {status}")
        except (asyncio.CancelledError, Refused):
            self.log(f"{req.method} {req.path} stream={sid} aborted")
        except Exception as e:  # a handler bug: fail this request only
            print(f"ERROR {req.method} {req.path} stream={sid}: {e!r}", file=sys.stderr, flush=True)
            if not self.closed:
                self._quic.reset_stream(sid, ErrorCode.H3_INTERNAL_ERROR)
                self.transmit()
        finally:
            if self.requests.get(sid) is req:
                del self.requests[sid]
            self._wake()

    async def route(self, req: Request):
        sid = req.stream_id
        url = urlsplit(req.path)
        query = parse_qs(url.query)
        key = (req.method, url.path)

        def int_param(name):
            try:
                value = int(query[name][0])
            except (KeyError, ValueError, IndexError):
                return None
            return value if value >= 0 else None

        if key == ("GET", "/hello"):
            await self.simple(sid, 200, b"hello over h3")
            return 200
        if key == ("GET", "/bytes"):
            n = int_param("n")
            if n is None:
                await self.simple(sid, 400, b"bad n")
                return 400
            self.send_head(sid, 200, [("content-type", "application/octet-stream")])
            if n == 0:
                await self.write(sid, b"", True)
            for offset in range(0, n, CHUNK):
                size = min(CHUNK, n - offset)
                await self.write(sid, pattern_chunk(offset, size), offset + size == n)
            return 200
        if key == ("POST", "/echo"):
            await req.ended.wait()
            body = bytes(req.body)
            extra = [
                ("x-body-sha256", hashlib.sha256(body).hexdigest()),
                ("x-body-len", len(body)),
            ]
            await self.simple(sid, 200, body, "application/octet-stream", extra)
            return 200
        if key == ("POST", "/sha256"):
            await req.ended.wait()
            digest = hashlib.sha256(req.body).hexdigest().encode()
            await self.simple(sid, 200, digest, extra=[("x-body-len", len(req.body))])
            return 200
        if key == ("GET", "/trailers"):
            body = b"with trailers"
            self.send_head(sid, 200, [("content-type", "text/plain"), ("content-length", len(body))])
            self.h3.send_data(sid, body, False)
            self.h3.send_headers(sid, [(b"x-trailer", b"yes"), (b"x-count", b"3")], end_stream=True)
            self.transmit()
            return 200
        if key == ("GET", "/slow"):
            ms = int_param("ms")
            if ms is None:
                await self.simple(sid, 400, b"bad ms")
                return 400
            await asyncio.sleep(ms / 1000)
            await self.simple(sid, 200, b"slow")
            return 200
        if key == ("GET", "/goaway"):
            await self.simple(sid, 200, b"bye")
            self.send_goaway()
            return 200
        await self.simple(sid, 404, b"not found")
        return 404

    # --- GOAWAY ---------------------------------------------------------

    def send_goaway(self):
        if self.goaway_id is not None or self.closed:
            return
        self.goaway_id = self.highest_request_id + 4
        frame = encode_frame(FrameType.GOAWAY, encode_uint_var(self.goaway_id))
        self._quic.send_stream_data(self.h3._local_control_stream_id, frame)
        self.transmit()
        self.log(f"GOAWAY {self.goaway_id}")
        if not self.options.no_goaway_close:
            asyncio.ensure_future(self.close_after_goaway())

    async def close_after_goaway(self):
        """Closes with H3_NO_ERROR once the accepted requests are answered."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 5.0
        while not self.closed and loop.time() < deadline:
            in_flight = [r for r in self.requests.values() if r.stream_id < self.goaway_id]
            unacked = [
                s
                for sid, s in self._quic._streams.items()
                if sid % 4 == 0 and sid < self.goaway_id and not s.sender.is_finished
            ]
            if not in_flight and not unacked:
                break
            try:
                await asyncio.wait_for(self._progress.wait(), 0.05)
            except asyncio.TimeoutError:
                pass
        if not self.closed:
            self.log("closing after GOAWAY")
            self._quic.close(error_code=ErrorCode.H3_NO_ERROR, reason_phrase="goaway")
            self.transmit()


async def main(args):
    config = QuicConfiguration(
        is_client=False,
        alpn_protocols=H3_ALPN,
        idle_timeout=args.idle_timeout,
        max_data=64 << 20,
        max_stream_data=16 << 20,
    )
    config.load_cert_chain(args.cert, args.key)

    def create_protocol(*a, **kw):
        return H3Server(*a, options=args, **kw)

    server = await serve(args.host, args.port, configuration=config, create_protocol=create_protocol)
    port = server._transport.get_extra_info("sockname")[1]
    print(f"LISTENING {port}", flush=True)

    stop = asyncio.get_running_loop().create_future()
    for sig in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(sig, lambda: stop.done() or stop.set_result(None))
    await stop
    for protocol in set(server._protocols.values()):
        protocol.close(error_code=ErrorCode.H3_NO_ERROR, reason_phrase="shutdown")
    server.close()


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--cert", required=True, help="PEM certificate chain")
    p.add_argument("--key", required=True, help="PEM private key")
    p.add_argument("--idle-timeout", type=float, default=60.0)
    p.add_argument("--max-streams", type=int, default=256, help="concurrent bidi streams the client may open")
    p.add_argument("--no-goaway-close", action="store_true", help="after GOAWAY, keep the connection open")
    p.add_argument("--verbose", action="store_true", help="log each request to stderr")
    try:
        asyncio.run(main(p.parse_args()))
    except KeyboardInterrupt:
        pass
    sys.exit(0)

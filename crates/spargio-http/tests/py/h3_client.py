"""An HTTP/3 client on aioquic (PyPI) for interop tests.

Usage:
  h3_client.py --url https://HOST:PORT/PATH[?QUERY] (--ca FILE | --insecure)
               [--method GET|POST] [--body-bytes N] [--requests R]
               [--concurrency C] [--connections K] [--cancel-after-bytes N]
               [--server-name NAME] [--timeout SECONDS]

  --url          request target; HOST may be an IP address or a name; the
                 :authority is HOST:PORT as written, :path is PATH?QUERY
                 ("/" if empty)
  --ca FILE      PEM CA certificate(s) to trust; --insecure skips
                 certificate verification instead
  --method       request method (default GET; any token is sent as is)
  --body-bytes N request body of N bytes, byte i = i % 251, sent as DATA
                 frames of at most 64 KiB with content-length: N; 0 (the
                 default) sends no DATA frame and no content-length (the
                 HEADERS frame ends the stream)
  --requests R   requests per connection (default 1)
  --concurrency C  requests in flight at once on each connection (default 1)
  --connections K  separate QUIC connections, run at the same time, each
                 doing R requests (default 1)
  --cancel-after-bytes N  every request sends its HEADERS (no
                 content-length) and N body bytes (byte i = i % 251, no
                 FIN), waits (at most 5 s) until the server has
                 acknowledged them, then resets the request stream and
                 stops reading it, both with H3_REQUEST_CANCELLED (0x10c);
                 the response is not awaited and no result line is
                 printed for it (it counts as "cancelled")
  --server-name  TLS SNI and certificate name to verify (default localhost)
  --timeout      overall limit in seconds (default 120); requests not
                 finished (or not started) by then are errors

Request headers: :method, :scheme https, :authority, :path, user-agent:
spargio-test-h3-client, and content-length with --body-bytes N > 0.

QUIC: ALPN "h3" only; initial max_data 64 MiB and max_stream_data 16 MiB
(aioquic doubles both as they are used). Streams beyond the server's
concurrent-stream limit wait (STREAMS_BLOCKED) until it grants more.
Request bodies are sent with back-pressure (a request waits while more
than 1 MiB of its stream is unacknowledged, and at most 8 streams at a
time have unsent data). If the server sends STOP_SENDING on a request
stream, the rest of the body is not sent and the response is still
awaited. Response bodies are hashed as they arrive, not kept.
Each connection is closed with H3_NO_ERROR (0x100) once its requests are
done (after the resets of cancelled requests were acknowledged, at most
2 s).

Output on stdout, one JSON object per line:
  for each completed request (any status), as it completes:
    {"status": 200, "len": <body length>, "sha256": "<hex sha256 of body>",
     "headers": {...}, "trailers": {...}, "conn": <connection index 0..K-1>,
     "stream": <QUIC stream id>}
    headers and trailers map lowercase names to values (pseudo-headers
    left out; a repeated name's values are joined with ", "); interim
    1xx responses are skipped
  once, at the end:
    {"done": true, "ok": <completed requests with a 2xx status>,
     "errors": <requests that were sent and failed, other than rejected>,
     "rejected": <requests the server refused unprocessed>,
     "not_started": <requests never sent>,
     "cancelled": <requests cancelled by --cancel-after-bytes>,
     "goaway": <connections that received an HTTP/3 GOAWAY>,
     "conns": [{"conn": k, "goaway": <bool>, "goaway_id": <int or null>,
                "peer_close_code": <int or null>}, ...]}
    every request is counted once: completed (any status), errors,
    rejected, not_started or cancelled; goaway_id is the stream ID of
    the server's last GOAWAY (null without one); peer_close_code is null
    when the client closed the connection first (or never connected);
    otherwise the error code that ended it: the server's CONNECTION_CLOSE
    code (e.g. 256 = H3_NO_ERROR), or 0 after an idle timeout
Exit status 0 if every request completed (or was cancelled as asked),
whatever its status; 1 otherwise (errors, rejected or not started
requests). Each failure is described on stderr ("ERROR conn=<k> ..."),
and each rejected or not started request too ("REJECTED conn=<k> ...",
"NOT STARTED conn=<k> ...").

A request fails when the server resets its stream, the connection closes
before its response ends, or the timeout passes. It counts as rejected
(RFC 9114, 4.1.1 and 5.2: the server did not process it) instead of an
error if no response HEADERS had arrived and either the server reset the
stream or stopped it with H3_REQUEST_REJECTED (0x10b), or the server had
sent a GOAWAY whose stream ID is at or below the request's stream ID
(checked when it fails). After a GOAWAY (or a close by the server), the
connection starts no further request; those are not started. Requests
of a connection that could not connect, and requests not finished (or
not started) when the timeout passes, are errors.

aioquic 1.7.2 (the version this was written against) raises no event for
a received GOAWAY (it parses and drops the frame); this client notices it
by overriding H3Connection._check_control_frame_type (private), and
reads the GOAWAY's stream ID with a parser of its own that follows the
server's control stream (H3Connection.handle_event is overridden to see
the stream data first). aioquic is pure Python and its cost
per packet grows with the number of open streams: 16 MiB on one stream
takes about 2-3 s on loopback, 100 concurrent 1 MiB responses about 25 s.
"""

import argparse
import asyncio
import hashlib
import json
import ssl
import sys
from urllib.parse import urlsplit

from aioquic.asyncio import QuicConnectionProtocol, connect
from aioquic.buffer import Buffer, BufferReadError
from aioquic.h3.connection import H3_ALPN, ErrorCode, FrameType, H3Connection, StreamType
from aioquic.h3.events import DataReceived, H3Event, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import (
    ConnectionTerminated,
    QuicEvent,
    StopSendingReceived,
    StreamDataReceived,
    StreamReset,
)

CHUNK = 64 * 1024  # largest DATA frame payload the client sends
HIGH_WATER = 1 << 20  # unacknowledged bytes per stream before sending waits
SEND_SLOTS = 8  # streams which may have unsent data at once (see H3Client.write)

_PERIOD = bytes(range(251))
_BLOCK = _PERIOD * (CHUNK // 251 + 2)


def pattern_chunk(offset, size):
    """Bytes offset..offset+size of the pattern byte i = i % 251 (size <= CHUNK)."""
    start = offset % 251
    return _BLOCK[start : start + size]


def emit(obj):
    print(json.dumps(obj), flush=True)


def report(kind, msg):
    print(f"{kind} {msg}", file=sys.stderr, flush=True)


def error(msg):
    report("ERROR", msg)


class RequestFailed(Exception):
    """A request that failed; rejected if the server refused it unprocessed."""

    def __init__(self, msg, rejected=False):
        super().__init__(msg)
        self.rejected = rejected


class ControlScanner:
    """Reads the GOAWAY frames of one server-initiated unidirectional stream.

    The stream's type comes first; any other type than the control stream
    is ignored. Other frames' payloads are skipped as they arrive.
    """

    def __init__(self):
        self.buf = b""
        self.control = None  # unknown until the stream type is read
        self.skip = 0  # payload bytes of a frame still to skip

    def feed(self, data):
        """The stream IDs of the GOAWAY frames completed by data."""
        ids = []
        if self.control is False:
            return ids
        self.buf += data
        while True:
            if self.skip:
                n = min(self.skip, len(self.buf))
                self.buf = self.buf[n:]
                self.skip -= n
                if self.skip:
                    return ids
            buf = Buffer(data=self.buf)
            try:
                if self.control is None:
                    self.control = buf.pull_uint_var() == StreamType.CONTROL
                    if not self.control:
                        self.buf = b""
                        return ids
                else:
                    frame_type = buf.pull_uint_var()
                    size = buf.pull_uint_var()
                    if frame_type == FrameType.GOAWAY:
                        ids.append(Buffer(data=buf.pull_bytes(size)).pull_uint_var())
                    else:
                        self.skip = size
            except BufferReadError:
                return ids  # an incomplete varint or frame: wait for more
            self.buf = self.buf[buf.tell() :]


class H3ClientConnection(H3Connection):
    """H3Connection that remembers whether the server sent GOAWAY, and its ID."""

    goaway_received = False
    goaway_id = None  # the stream ID of the last GOAWAY

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._scanners = {}  # server unidirectional stream id -> ControlScanner

    def handle_event(self, event):
        # Server-initiated unidirectional streams have IDs 3 mod 4.
        if isinstance(event, StreamDataReceived) and event.stream_id % 4 == 3:
            scanner = self._scanners.setdefault(event.stream_id, ControlScanner())
            for goaway_id in scanner.feed(event.data):
                self.goaway_id = goaway_id
        return super().handle_event(event)

    def _check_control_frame_type(self, frame_type):
        super()._check_control_frame_type(frame_type)
        if frame_type == FrameType.GOAWAY:
            self.goaway_received = True


def header_map(headers):
    out = {}
    for name, value in headers:
        if name.startswith(b":"):
            continue
        key = name.decode("latin-1").lower()
        val = value.decode("latin-1")
        out[key] = f"{out[key]}, {val}" if key in out else val
    return out


def request_headers(method, authority, path):
    return [
        (b":method", method.encode()),
        (b":scheme", b"https"),
        (b":authority", authority.encode()),
        (b":path", path.encode()),
        (b"user-agent", b"spargio-test-h3-client"),
    ]


class Response:
    def __init__(self, stream_id):
        self.stream_id = stream_id
        self.status = None
        self.headers = {}
        self.trailers = {}
        self.length = 0
        self.sha256 = hashlib.sha256()
        self.done = asyncio.get_running_loop().create_future()

    def fail(self, msg, rejected=False):
        if not self.done.done():
            self.done.set_exception(RequestFailed(msg, rejected=rejected and self.status is None))

    def finish(self):
        if not self.done.done():
            if self.status is None:
                self.done.set_exception(RequestFailed("stream ended without a response"))
            else:
                self.done.set_result(self)


class H3Client(QuicConnectionProtocol):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.h3 = H3ClientConnection(self._quic)
        self.responses = {}  # stream_id -> Response
        self.cancelled = []  # stream ids reset by us
        self.terminated = False
        self.closing = False  # we initiated the close
        self.peer_close_code = None
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

    @property
    def goaway(self):
        return self.h3.goaway_received

    def above_goaway(self, stream_id):
        """Whether a GOAWAY from the server says it did not process stream_id."""
        return self.h3.goaway_id is not None and stream_id >= self.h3.goaway_id

    def quic_event_received(self, event: QuicEvent):
        if isinstance(event, ConnectionTerminated):
            self.terminated = True
            if not self.closing:
                self.peer_close_code = event.error_code
            why = f"connection closed (code {event.error_code:#x} {event.reason_phrase!r})"
            for resp in self.responses.values():
                resp.fail(why, rejected=self.above_goaway(resp.stream_id))
            self._wake()
            return
        for h3_event in self.h3.handle_event(event):
            self.h3_event_received(h3_event)
        if isinstance(event, StreamReset):
            resp = self.responses.get(event.stream_id)
            if resp is not None:
                rejected = event.error_code == ErrorCode.H3_REQUEST_REJECTED or self.above_goaway(event.stream_id)
                resp.fail(f"stream {event.stream_id} reset by the server (code {event.error_code:#x})", rejected)
        if isinstance(event, StopSendingReceived) and event.error_code == ErrorCode.H3_REQUEST_REJECTED:
            resp = self.responses.get(event.stream_id)
            if resp is not None:
                resp.fail(f"stream {event.stream_id} stopped by the server (code {event.error_code:#x})", True)
        if isinstance(event, (StreamReset, StopSendingReceived)):
            self._wake()

    def h3_event_received(self, event: H3Event):
        resp = self.responses.get(event.stream_id)
        if resp is None:
            return
        if isinstance(event, HeadersReceived):
            if resp.status is None:
                status = dict(event.headers).get(b":status", b"")
                if status.startswith(b"1") and len(status) == 3:
                    return  # interim response
                resp.status = int(status)
                resp.headers = header_map(event.headers)
            else:
                resp.trailers = header_map(event.headers)
        elif isinstance(event, DataReceived):
            resp.length += len(event.data)
            resp.sha256.update(event.data)
        if getattr(event, "stream_ended", False):
            resp.finish()

    async def wait_progress(self, timeout=None):
        try:
            await asyncio.wait_for(self._progress.wait(), timeout)
        except asyncio.TimeoutError:
            pass

    def unacked(self, stream_id):
        """Bytes written to the stream and not yet acknowledged, None once reset."""
        stream = self._quic._streams.get(stream_id)
        if stream is None:
            return 0
        if stream.sender._reset_error_code is not None:
            return None
        return stream.sender._buffer_stop - stream.sender._buffer_start

    async def write(self, stream_id, data, end_stream):
        """Sends one DATA frame, with back-pressure; False if the stream was reset.

        aioquic spends time on every stream with unsent data for each packet
        it builds, so at most SEND_SLOTS streams get to have unsent data: a
        writer holds a slot until its frame is on the wire (or flow control
        blocks it). Then it waits while more than HIGH_WATER bytes of the
        stream are unacknowledged.
        """
        async with self.send_slots:
            if self.terminated or self.unacked(stream_id) is None:
                return False
            self.h3.send_data(stream_id, data, end_stream)
            self.transmit()
            while not self.terminated:
                stream = self._quic._streams.get(stream_id)
                if stream is None or stream.sender._reset_error_code is not None:
                    break
                sender = stream.sender
                if sender.highest_offset >= sender._buffer_stop:
                    break  # all of it sent (at least once)
                if sender.highest_offset >= stream.max_stream_data_remote:
                    break  # stream flow control: the server is not reading
                if self._quic._remote_max_data_used >= self._quic._remote_max_data:
                    break  # connection flow control
                await self._progress.wait()
        while True:
            if self.terminated:
                return False
            pending = self.unacked(stream_id)
            if pending is None:
                return False
            if pending <= HIGH_WATER:
                return True
            await self._progress.wait()

    async def send_pattern(self, stream_id, n, end_stream):
        """Sends n pattern bytes in DATA frames; False if the server stopped it."""
        for offset in range(0, n, CHUNK):
            size = min(CHUNK, n - offset)
            if not await self.write(stream_id, pattern_chunk(offset, size), end_stream and offset + size == n):
                return False
        return True

    # --- requests -------------------------------------------------------

    async def request(self, method, authority, path, body_bytes):
        stream_id = self._quic.get_next_available_stream_id()
        headers = request_headers(method, authority, path)
        if body_bytes:
            headers.append((b"content-length", str(body_bytes).encode()))
        resp = Response(stream_id)
        self.responses[stream_id] = resp
        try:
            self.h3.send_headers(stream_id, headers, end_stream=body_bytes == 0)
            self.transmit()
            if body_bytes:
                await self.send_pattern(stream_id, body_bytes, end_stream=True)
            return await resp.done
        finally:
            del self.responses[stream_id]

    async def cancelled_request(self, method, authority, path, after_bytes):
        stream_id = self._quic.get_next_available_stream_id()
        headers = request_headers(method, authority, path)
        self.h3.send_headers(stream_id, headers, end_stream=False)
        self.transmit()
        if not await self.send_pattern(stream_id, after_bytes, end_stream=False):
            raise RequestFailed(f"stream {stream_id} stopped before {after_bytes} bytes were sent")
        # Let the bytes reach the server: a reset drops whatever is unsent.
        deadline = self._loop.time() + 5.0
        while not self.terminated and self._loop.time() < deadline:
            if not self.unacked(stream_id):
                break
            await self.wait_progress(0.05)
        if self.terminated:
            raise RequestFailed(f"connection closed before stream {stream_id} was cancelled")
        self._quic.reset_stream(stream_id, ErrorCode.H3_REQUEST_CANCELLED)
        if stream_id in self._quic._streams:
            self._quic.stop_stream(stream_id, ErrorCode.H3_REQUEST_CANCELLED)
        self.transmit()
        self.cancelled.append(stream_id)
        return stream_id

    async def finish(self):
        """Waits (at most 2 s) until the resets of cancelled requests are acknowledged."""
        deadline = self._loop.time() + 2.0
        while not self.terminated and self._loop.time() < deadline:
            streams = self._quic._streams
            if all(sid not in streams or streams[sid].sender.is_finished for sid in self.cancelled):
                break
            await self.wait_progress(0.05)
        if not self.terminated:
            self.closing = True
            self.close(error_code=ErrorCode.H3_NO_ERROR)


class Tally:
    def __init__(self):
        self.ok = 0
        self.completed = 0
        self.cancelled = 0
        self.rejected = 0
        self.not_started = 0
        self.conns = {}


async def run_connection(k, args, target, config, tally):
    host, port, authority, path = target
    info = tally.conns[k] = {"conn": k, "goaway": False, "goaway_id": None, "peer_close_code": None}
    try:
        async with connect(host, port, configuration=config, create_protocol=H3Client) as client:
            requests = iter(range(args.requests))

            async def worker():
                for i in requests:
                    if client.goaway or client.terminated:
                        why = "GOAWAY" if client.goaway else "connection closed"
                        tally.not_started += 1
                        report("NOT STARTED", f"conn={k} request={i}: not sent ({why})")
                        continue
                    try:
                        if args.cancel_after_bytes is not None:
                            await client.cancelled_request(args.method, authority, path, args.cancel_after_bytes)
                            tally.cancelled += 1
                            continue
                        resp = await client.request(args.method, authority, path, args.body_bytes)
                    except RequestFailed as e:
                        if e.rejected:
                            tally.rejected += 1
                            report("REJECTED", f"conn={k} request={i}: {e}")
                        else:
                            error(f"conn={k} request={i}: {e}")
                        continue
                    except Exception as e:  # a local failure: count it, go on
                        error(f"conn={k} request={i}: {e!r}")
                        continue
                    tally.completed += 1
                    if 200 <= resp.status < 300:
                        tally.ok += 1
                    emit(
                        {
                            "status": resp.status,
                            "len": resp.length,
                            "sha256": resp.sha256.hexdigest(),
                            "headers": resp.headers,
                            "trailers": resp.trailers,
                            "conn": k,
                            "stream": resp.stream_id,
                        }
                    )

            try:
                workers = max(1, min(args.concurrency, args.requests))
                await asyncio.gather(*(worker() for _ in range(workers)))
                await client.finish()
            finally:
                info["goaway"] = client.goaway
                info["goaway_id"] = client.h3.goaway_id
                info["peer_close_code"] = client.peer_close_code
    except ConnectionError as e:
        error(f"conn={k}: {e!r}")
    except OSError as e:
        error(f"conn={k}: {e!r}")


async def main(args):
    url = urlsplit(args.url)
    if url.scheme != "https" or not url.hostname or not url.port:
        error(f"--url must be https://HOST:PORT/PATH, got {args.url!r}")
        return 1
    path = (url.path or "/") + (f"?{url.query}" if url.query else "")
    target = (url.hostname, url.port, url.netloc, path)

    config = QuicConfiguration(
        is_client=True,
        alpn_protocols=H3_ALPN,
        server_name=args.server_name,
        max_data=64 << 20,
        max_stream_data=16 << 20,
        idle_timeout=max(args.timeout, 30.0),
    )
    if args.insecure:
        config.verify_mode = ssl.CERT_NONE
    else:
        config.load_verify_locations(args.ca)

    tally = Tally()
    tasks = [asyncio.ensure_future(run_connection(k, args, target, config, tally)) for k in range(args.connections)]
    done, pending = await asyncio.wait(tasks, timeout=args.timeout)
    if pending:
        error(f"timeout after {args.timeout} s")
        for task in pending:
            task.cancel()
        await asyncio.wait(pending, timeout=3.0)

    total = args.connections * args.requests
    # Failed requests, and those on a connection that could not connect or
    # not finished (or not started) when the timeout passed.
    errors = total - tally.completed - tally.cancelled - tally.rejected - tally.not_started
    conns = [
        tally.conns.get(k, {"conn": k, "goaway": False, "goaway_id": None, "peer_close_code": None})
        for k in range(args.connections)
    ]
    emit(
        {
            "done": True,
            "ok": tally.ok,
            "errors": errors,
            "rejected": tally.rejected,
            "not_started": tally.not_started,
            "cancelled": tally.cancelled,
            "goaway": sum(1 for c in conns if c["goaway"]),
            "conns": conns,
        }
    )
    return 0 if errors == 0 and tally.rejected == 0 and tally.not_started == 0 else 1


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--url", required=True)
    trust = p.add_mutually_exclusive_group(required=True)
    trust.add_argument("--ca", help="PEM CA certificate(s) to trust")
    trust.add_argument("--insecure", action="store_true", help="skip certificate verification")
    p.add_argument("--method", default="GET")
    p.add_argument("--body-bytes", type=int, default=0)
    p.add_argument("--requests", type=int, default=1)
    p.add_argument("--concurrency", type=int, default=1)
    p.add_argument("--connections", type=int, default=1)
    p.add_argument("--cancel-after-bytes", type=int, default=None)
    p.add_argument("--server-name", default="localhost")
    p.add_argument("--timeout", type=float, default=120.0)
    sys.exit(asyncio.run(main(p.parse_args())))

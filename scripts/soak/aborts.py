#!/usr/bin/env python3
"""Deliberate aborts and stalls for the soak (scripts/soak.sh), on raw
sockets: requests, handshakes and bodies cut off halfway, closed with a
FIN or a reset (SO_LINGER 0), and connections that stall and must be
closed by the server's own timeouts.

    aborts.py SECONDS HTTP HTTPS GRPC GRPCS CA_FILE

Abort workers (2 threads) pick an abort at random: half a request head,
half a body, a reset mid-response, half a TLS ClientHello, half a
WebSocket upgrade, a partial WebSocket frame, half the HTTP/2 preface, an
HTTP/2 or gRPC request cut off inside its body, a pipelined burst reset
at once. Every tenth operation is a check instead, which must complete:
a plain request on a fresh connection, or an HTTP/2 connection that
resets a large response's stream and must still get the next stream's
response. Checks time out after CHECK_TIMEOUT (a hang).

Stall workers (3 threads) open a connection that goes quiet (or dribbles
one header byte every 2 s): HTTP/1.1 inside its request head, TLS inside
its handshake, HTTP/2 after its preface. The server must close it by its
header read timeout (10 s, enforced between 1 and 1.25 times that) or its
TLS handshake timeout (10 s); STALL_LIMIT without that is a hang.
"""

import base64
import os
import ssl
import sys
import time

from common import (
    Hang, Tally, abort, connect, exit_with, read_head, read_response, recv_some,
    request, run_workers, tls_context,
)

CHECK_TIMEOUT = 10
STALL_LIMIT = 25

# HTTP/2 (RFC 9113) frame types and flags.
DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE = 0, 1, 3, 4, 6, 7, 8
END_STREAM, END_HEADERS, ACK = 0x1, 0x4, 0x1
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def frame(kind, flags, stream, payload=b""):
    return (len(payload).to_bytes(3, "big") + bytes([kind, flags])
            + stream.to_bytes(4, "big") + payload)


def literal(index, value):
    """HPACK: a literal without indexing, its name from the static table."""
    return bytes([index, len(value)]) + value


def literal_new(name, value):
    return bytes([0, len(name)]) + name + bytes([len(value)]) + value


def h2_headers(method, path, grpc=False):
    # Indexed :method GET (2) or POST (3), :scheme http (6); :path (4) and
    # :authority (1) as literals on their static names.
    block = bytes([0x82 if method == "GET" else 0x83, 0x86])
    block += literal(4, path.encode()) + literal(1, b"localhost")
    if grpc:
        block += literal_new(b"content-type", b"application/grpc")
        block += literal_new(b"te", b"trailers")
    return block


class Ports:
    def __init__(self, http, https, grpc, grpcs, ca):
        self.http, self.https, self.grpc, self.grpcs = http, https, grpc, grpcs
        self.tls = tls_context(ca)
        self.h2_tls = tls_context(ca)
        self.h2_tls.set_alpn_protocols(["h2"])
        self.h1_tls = tls_context(ca)
        self.h1_tls.set_alpn_protocols(["http/1.1"])


def client_hello(ctx):
    """The first flight of a TLS client handshake, as bytes."""
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(incoming, outgoing, server_hostname="localhost")
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return outgoing.read()


def ws_upgrade():
    key = base64.b64encode(os.urandom(16)).decode()
    return (f"GET /ws HTTP/1.1\r\nHost: localhost\r\nConnection: Upgrade\r\n"
            f"Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
            f"Sec-WebSocket-Key: {key}\r\n\r\n").encode()


def cut(data, rng):
    """A strict, non-empty prefix of `data`."""
    return data[:rng.randrange(1, len(data))]


# ===== aborts: each returns after abandoning its connection =====

def half_head(p, rng):
    sock = connect(p.http, CHECK_TIMEOUT)
    sock.sendall(cut(request("GET", "/"), rng))
    abort(sock, rng)


def half_body(p, rng):
    tls = rng.random() < 0.5
    sock = connect(p.https if tls else p.http, CHECK_TIMEOUT)
    if tls:
        sock = p.h1_tls.wrap_socket(sock, server_hostname="localhost")
    body = os.urandom(rng.randrange(2, 256 << 10))
    sock.sendall(cut(request("POST", "/echo", body), rng))
    abort(sock, rng)


def mid_response(p, rng):
    tls = rng.random() < 0.5
    sock = connect(p.https if tls else p.http, CHECK_TIMEOUT)
    if tls:
        sock = p.h1_tls.wrap_socket(sock, server_hostname="localhost")
    sock.sendall(request("GET", f"/big/{4 << 20}"))
    want, got = rng.randrange(1, 256 << 10), 0
    while got < want:
        chunk = recv_some(sock, 65536)
        if not chunk:
            raise ConnectionError(f"EOF after {got} bytes of a 4 MiB response")
        got += len(chunk)
    abort(sock, rng)


def pipelined_reset(p, rng):
    sock = connect(p.http, CHECK_TIMEOUT)
    sock.sendall(request("GET", f"/big/{1 << 20}") * rng.randrange(2, 8))
    abort(sock, rng)


def half_tls_hello(p, rng):
    port = rng.choice([p.https, p.grpcs])
    sock = connect(port, CHECK_TIMEOUT)
    sock.sendall(cut(client_hello(p.tls), rng))
    abort(sock, rng)


def half_tls_request(p, rng):
    sock = p.h1_tls.wrap_socket(connect(p.https, CHECK_TIMEOUT), server_hostname="localhost")
    sock.sendall(cut(request("GET", "/"), rng))
    abort(sock, rng)


def half_ws_upgrade(p, rng):
    sock = connect(p.http, CHECK_TIMEOUT)
    sock.sendall(cut(ws_upgrade(), rng))
    abort(sock, rng)


def ws_mid_frame(p, rng):
    tls = rng.random() < 0.5
    sock = connect(p.https if tls else p.http, CHECK_TIMEOUT)
    if tls:
        sock = p.h1_tls.wrap_socket(sock, server_hostname="localhost")
    sock.sendall(ws_upgrade())
    status, _, _ = read_head(sock)
    if status != 101:
        raise ValueError(f"WebSocket upgrade answered {status}")
    payload = os.urandom(rng.randrange(200, 60000))
    mask = os.urandom(4)
    masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    # A binary frame, masked, with a 16-bit length.
    head = bytes([0x82, 0x80 | 126]) + len(payload).to_bytes(2, "big") + mask
    sock.sendall(cut(head + masked, rng))
    abort(sock, rng)


def half_h2_preface(p, rng):
    sock = connect(rng.choice([p.http, p.grpc]), CHECK_TIMEOUT)
    sock.sendall(cut(PREFACE + frame(SETTINGS, 0, 0), rng))
    abort(sock, rng)


def h2_connection(p, port, tls):
    sock = connect(port, CHECK_TIMEOUT)
    if tls:
        sock = p.h2_tls.wrap_socket(sock, server_hostname="localhost")
        if sock.selected_alpn_protocol() != "h2":
            raise ValueError(f"ALPN chose {sock.selected_alpn_protocol()!r}, not h2")
    return sock


def h2_mid_body(p, rng):
    """An HTTP/2 POST (or a gRPC call) whose body stops halfway."""
    grpc = rng.random() < 0.5
    tls = rng.random() < 0.5
    port = (p.grpcs if tls else p.grpc) if grpc else (p.https if tls else p.http)
    sock = h2_connection(p, port, tls)
    path = "/helloworld.Greeter/SayHello" if grpc else "/echo"
    # Half of it fits one DATA frame (the default largest is 16 KiB).
    body = os.urandom(rng.randrange(10, 32000))
    if grpc:
        body = b"\x00" + len(body).to_bytes(4, "big") + body
    data = (PREFACE + frame(SETTINGS, 0, 0)
            + frame(HEADERS, END_HEADERS, 1, h2_headers("POST", path, grpc))
            + frame(DATA, 0, 1, body[:len(body) // 2]))
    if rng.random() < 0.3:
        sock.sendall(cut(data, rng))
    else:
        sock.sendall(data)
        if rng.random() < 0.3:
            sock.sendall(frame(RST_STREAM, 0, 1, (8).to_bytes(4, "big")))
    abort(sock, rng)


ABORTS = [half_head, half_body, mid_response, pipelined_reset, half_tls_hello,
          half_tls_request, half_ws_upgrade, ws_mid_frame, half_h2_preface, h2_mid_body]


# ===== checks: each must get its answer within CHECK_TIMEOUT =====

def check_plain(p, rng):
    tls = rng.random() < 0.5
    sock = connect(p.https if tls else p.http, CHECK_TIMEOUT)
    try:
        if tls:
            sock = p.h1_tls.wrap_socket(sock, server_hostname="localhost")
        sock.sendall(request("GET", "/", close=rng.random() < 0.5))
        status, body = read_response(sock, time.monotonic() + CHECK_TIMEOUT)
        if status != 200 or not body.startswith(b"hello"):
            raise ValueError(f"GET / answered {status} {body[:40]!r}")
    finally:
        sock.close()


def check_h2_reset_then_get(p, rng):
    """Resets a 1 MiB response's stream, then needs the next stream's
    response: a reset must not leave the connection (or its flow-control
    window) stuck."""
    tls = rng.random() < 0.5
    sock = h2_connection(p, p.https if tls else p.http, tls)
    try:
        sock.sendall(PREFACE + frame(SETTINGS, 0, 0)
                     + frame(HEADERS, END_STREAM | END_HEADERS, 1, h2_headers("GET", f"/big/{1 << 20}"))
                     + frame(RST_STREAM, 0, 1, (8).to_bytes(4, "big"))
                     + frame(HEADERS, END_STREAM | END_HEADERS, 3, h2_headers("GET", "/")))
        deadline = time.monotonic() + CHECK_TIMEOUT
        buf = b""
        while True:
            while len(buf) < 9 or len(buf) < 9 + int.from_bytes(buf[:3], "big"):
                if time.monotonic() > deadline:
                    raise Hang("no response on stream 3 after resetting stream 1")
                chunk = recv_some(sock, 65536)
                if not chunk:
                    raise ConnectionError("EOF before stream 3's response")
                buf += chunk
            length = int.from_bytes(buf[:3], "big")
            kind, flags = buf[3], buf[4]
            stream = int.from_bytes(buf[5:9], "big") & 0x7FFFFFFF
            buf = buf[9 + length:]
            if kind == SETTINGS and not flags & ACK:
                sock.sendall(frame(SETTINGS, ACK, 0))
            elif kind == GOAWAY:
                raise ConnectionError("GOAWAY before stream 3's response")
            elif kind == RST_STREAM and stream == 3:
                raise ConnectionError("stream 3 was reset")
            elif kind == DATA and length:
                # Data of the reset stream still counts against the
                # connection's window: give it back.
                sock.sendall(frame(WINDOW_UPDATE, 0, 0, length.to_bytes(4, "big")))
            if stream == 3 and kind in (DATA, HEADERS) and flags & END_STREAM:
                return
    finally:
        sock.close()


def aborter(tally, p):
    ops = {"n": 0}

    def step(rng):
        ops["n"] += 1
        if ops["n"] % 10 == 0:
            check = rng.choice([check_plain, check_h2_reset_then_get])
            try:
                check(p, rng)
            except (Hang, TimeoutError) as e:
                tally.add("hung", check.__name__, f"{type(e).__name__}: {e}")
            except Exception as e:  # noqa: BLE001 -- every error is a finding
                tally.add("failed", check.__name__, f"{type(e).__name__}: {e}")
            else:
                tally.add("ok", check.__name__)
            return
        # Up to the abort itself every step is a well-formed exchange: an
        # error before it (the server closing first, a wrong answer) is
        # a failure.
        op = rng.choice(ABORTS)
        try:
            op(p, rng)
        except (Hang, TimeoutError) as e:
            tally.add("hung", op.__name__, f"{type(e).__name__}: {e}")
        except Exception as e:  # noqa: BLE001 -- every error is a finding
            tally.add("failed", op.__name__, f"{type(e).__name__}: {e}")
        else:
            tally.add("aborted", op.__name__)

    return "abort", step


# ===== stalls: the server must close them =====

def wait_closed(sock, what, dribble=None):
    """Reads (discarding) until the server closes `sock`; past STALL_LIMIT
    it is a hang. `dribble`: bytes to send one at a time every 2 s."""
    sock.settimeout(2)
    start = time.monotonic()
    while time.monotonic() - start < STALL_LIMIT:
        try:
            if not sock.recv(65536):
                return time.monotonic() - start
        except TimeoutError:
            if dribble:
                try:
                    sock.sendall(dribble[:1])
                except OSError:
                    return time.monotonic() - start
                dribble = dribble[1:]
        except (ConnectionError, ssl.SSLError):
            return time.monotonic() - start
    raise Hang(f"{what}: still open after {STALL_LIMIT} s")


def staller(tally, p, kind):
    def step(rng):
        if kind == "h1-head":
            sock = connect(p.http, CHECK_TIMEOUT)
            sock.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\n")
            dribble = b"X-Dribble: " + b"d" * 100 if rng.random() < 0.5 else None
            what = "HTTP/1.1 head " + ("dribbled" if dribble else "stalled")
        elif kind == "tls-handshake":
            sock = connect(rng.choice([p.https, p.grpcs]), CHECK_TIMEOUT)
            sock.sendall(cut(client_hello(p.tls), rng))
            dribble, what = None, "TLS handshake stalled"
        else:
            sock = connect(rng.choice([p.http, p.grpc]), CHECK_TIMEOUT)
            sock.sendall(PREFACE + frame(SETTINGS, 0, 0))
            dribble, what = None, "HTTP/2 connection idle after its preface"
        try:
            took = wait_closed(sock, what, dribble)
        finally:
            sock.close()
        tally.add("ok", f"{kind}-closed-{'early' if took < 9 else 'by-timeout'}")

    return f"stall-{kind}", step


def main():
    seconds = float(sys.argv[1])
    http, https, grpc, grpcs = (int(a) for a in sys.argv[2:6])
    p = Ports(http, https, grpc, grpcs, sys.argv[6])
    tally = Tally("aborts")
    workers = [aborter(tally, p), aborter(tally, p)]
    workers += [staller(tally, p, k) for k in ("h1-head", "tls-handshake", "h2-idle")]
    exit_with(run_workers(tally, seconds, workers))


if __name__ == "__main__":
    main()

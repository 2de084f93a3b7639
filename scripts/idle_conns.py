#!/usr/bin/env python3
"""Opens idle keep-alive connections to an HTTP server, for measuring what
an idle connection costs the server (scripts/http_bench.sh's idle-memory
row).

    idle_conns.py <port> <count> <h1|h2>

Opens <count> TCP connections to 127.0.0.1:<port>, one after another, and
on each makes one `GET /` and reads the whole response: HTTP/1.1 (with
keep-alive), or HTTP/2 by prior knowledge (h2c: the preface, an empty
SETTINGS frame, one HEADERS frame; the server's SETTINGS are acknowledged).
Then prints `open <count>` and keeps every connection open, reading
nothing more, until killed. Exits non-zero (with the reason on stderr) when
a connection or a response fails.
"""

import signal
import socket
import sys

HOST = "127.0.0.1"


def recv_exact(sock, n):
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("server closed the connection")
        data += chunk
    return data


def get_h1(sock, port):
    sock.sendall(b"GET / HTTP/1.1\r\nHost: %s:%d\r\n\r\n" % (HOST.encode(), port))
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            raise ConnectionError("server closed the connection")
        data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    lines = head.split(b"\r\n")
    if not lines[0].startswith(b"HTTP/1.1 200"):
        raise ConnectionError("unexpected status line %r" % lines[0])
    length = None
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    if length is None:
        raise ConnectionError("no content-length in the response")
    if len(body) < length:
        recv_exact(sock, length - len(body))


# Frame types and flags (RFC 9113).
DATA, HEADERS, SETTINGS, GOAWAY, RST_STREAM = 0x0, 0x1, 0x4, 0x7, 0x3
END_STREAM, END_HEADERS, ACK = 0x1, 0x4, 0x1
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def frame(kind, flags, stream, payload=b""):
    return len(payload).to_bytes(3, "big") + bytes([kind, flags]) + stream.to_bytes(4, "big") + payload


def get_h2(sock, port):
    authority = b"%s:%d" % (HOST.encode(), port)
    # HPACK: indexed :method GET (2), :scheme http (6), :path / (4), then
    # :authority as a literal with incremental indexing on name index 1.
    block = b"\x82\x86\x84\x41" + bytes([len(authority)]) + authority
    sock.sendall(
        PREFACE
        + frame(SETTINGS, 0, 0)
        + frame(HEADERS, END_STREAM | END_HEADERS, 1, block)
    )
    while True:
        header = recv_exact(sock, 9)
        length = int.from_bytes(header[:3], "big")
        kind, flags = header[3], header[4]
        stream = int.from_bytes(header[5:9], "big") & 0x7FFFFFFF
        if length:
            recv_exact(sock, length)
        if kind == SETTINGS and not flags & ACK:
            sock.sendall(frame(SETTINGS, ACK, 0))
        elif kind in (GOAWAY, RST_STREAM):
            raise ConnectionError("server sent frame type %d" % kind)
        elif kind in (DATA, HEADERS) and stream == 1 and flags & END_STREAM:
            return


def main():
    if len(sys.argv) != 4 or sys.argv[3] not in ("h1", "h2"):
        sys.exit("usage: idle_conns.py <port> <count> <h1|h2>")
    port, count, proto = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    get = get_h1 if proto == "h1" else get_h2
    conns = []
    for i in range(count):
        try:
            sock = socket.create_connection((HOST, port), timeout=10)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            get(sock, port)
        except (OSError, ValueError) as e:
            sys.exit("connection %d of %d: %s" % (i + 1, count, e))
        conns.append(sock)
    print("open %d" % len(conns), flush=True)
    while True:
        signal.pause()


if __name__ == "__main__":
    main()

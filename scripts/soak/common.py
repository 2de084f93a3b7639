"""What every soak client (scripts/soak.sh) shares: the tally and its
report, the deadline loop, and a small HTTP/1.1 reader for raw sockets.

Every client talks to 127.0.0.1 only, runs until its deadline (and at most
MAX_OPS operations per worker), and bounds every request by a timeout of
its own. Outcomes:

  ok       the request completed as expected
  aborted  we abandoned it on purpose (a deliberate abort: RST, half a
           request, a cancelled call); whatever error follows is expected
  failed   an unexpected error or a wrong answer, within the deadline
  hung     the request's own timeout ran out: the soak fails

The report is one line, `soak-client NAME: ok=N aborted=N failed=N hung=N`
plus its detail and the seed (SOAK_SEED=N replays the random choices),
then up to 8 sample lines per kind of problem; the exit
status is 1 when anything failed or hung.
"""

import os
import random
import socket
import ssl
import struct
import sys
import threading
import time
from collections import Counter

HOST = "127.0.0.1"
# Every worker's random choices derive from this: SOAK_SEED replays a run.
SEED = int(os.environ.get("SOAK_SEED") or random.SystemRandom().randrange(1 << 30))
# Per worker: an upper bound on the operations of one run, whatever the
# deadline.
MAX_OPS = 1_000_000


class Hang(Exception):
    """A request ran out of its own timeout."""


class Tally:
    def __init__(self, name):
        self.name = name
        self.lock = threading.Lock()
        self.counts = Counter()
        self.detail = Counter()
        self.samples = {"failed": [], "hung": []}

    def add(self, outcome, what="", note=""):
        with self.lock:
            self.counts[outcome] += 1
            if what:
                self.detail[f"{outcome}:{what}"] += 1
            if outcome in self.samples and len(self.samples[outcome]) < 8:
                stamp = time.strftime("%H:%M:%S")
                self.samples[outcome].append(f"{stamp} {what}: {note}")

    def report(self):
        c = self.counts
        detail = " ".join(f"{k}={v}" for k, v in sorted(self.detail.items()))
        print(
            f"soak-client {self.name}: ok={c['ok']} aborted={c['aborted']} "
            f"failed={c['failed']} hung={c['hung']} [{detail}] seed={SEED}",
            flush=True,
        )
        for kind, lines in self.samples.items():
            for line in lines:
                print(f"  {kind}: {line}", flush=True)
        return 1 if c["failed"] or c["hung"] else 0


def run_workers(tally, seconds, workers):
    """Runs each `(name, step)` of `workers` in a thread of its own, calling
    `step(rng)` until `seconds` have passed; `step` records its own
    outcomes. An exception out of `step` counts as failed (`Hang` and a
    socket timeout as hung). Returns the exit status of the report."""
    deadline = time.monotonic() + seconds

    def loop(name, step, seed):
        rng = random.Random(seed)
        for _ in range(MAX_OPS):
            if time.monotonic() >= deadline:
                return
            try:
                step(rng)
            except (Hang, TimeoutError) as e:
                tally.add("hung", name, f"{type(e).__name__}: {e}")
            except Exception as e:  # noqa: BLE001 -- every error is a finding
                tally.add("failed", name, f"{type(e).__name__}: {e}")

    threads = [
        threading.Thread(target=loop, args=(name, step, SEED + i), daemon=True)
        for i, (name, step) in enumerate(workers)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return tally.report()


def tls_context(ca_file):
    ctx = ssl.create_default_context(cafile=ca_file)
    ctx.check_hostname = True
    return ctx


def connect(port, timeout, rcvbuf=None):
    """A TCP connection to 127.0.0.1:`port`, `timeout` on every call."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.settimeout(timeout)
    try:
        sock.connect((HOST, port))
    except socket.timeout as e:
        sock.close()
        raise Hang(f"connect to {port} timed out") from e
    except BaseException:
        sock.close()
        raise
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def rst(sock):
    """Closes `sock` with a reset (SO_LINGER 0) instead of a FIN."""
    raw = sock
    if isinstance(sock, ssl.SSLSocket):
        # Close the TCP socket under TLS without a close_notify.
        raw = socket.socket(fileno=sock.detach())
    try:
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    raw.close()


def abort(sock, rng):
    """Ends `sock` abruptly: half the time a reset, else a plain close."""
    if rng.random() < 0.5:
        rst(sock)
    else:
        sock.close()


def recv_some(sock, n):
    """Up to `n` bytes; b"" at EOF. A socket timeout is a hang."""
    try:
        return sock.recv(n)
    except socket.timeout as e:
        raise Hang("no data within the socket timeout") from e


def read_head(sock, buf=b""):
    """Reads up to the end of a response head: (status, headers, rest)."""
    while b"\r\n\r\n" not in buf:
        chunk = recv_some(sock, 65536)
        if not chunk:
            raise ConnectionError(f"EOF inside the response head ({len(buf)} bytes)")
        buf += chunk
        if len(buf) > 65536:
            raise ValueError("response head over 64 KiB")
    head, rest = buf.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return status, headers, rest


def read_response(sock, deadline):
    """One HTTP/1.1 response with a Content-Length: (status, body). Past
    `deadline` (monotonic) it is a hang."""
    status, headers, body = read_head(sock)
    if "content-length" not in headers:
        raise ValueError(f"status {status} without content-length: {headers}")
    length = int(headers["content-length"])
    while len(body) < length:
        if time.monotonic() > deadline:
            raise Hang(f"body {len(body)}/{length} bytes at the deadline")
        chunk = recv_some(sock, 65536)
        if not chunk:
            raise ConnectionError(f"EOF after {len(body)}/{length} body bytes")
        body += chunk
    return status, body


def request(method, path, body=b"", close=False):
    head = f"{method} {path} HTTP/1.1\r\nHost: localhost\r\n"
    if body or method == "POST":
        head += f"Content-Length: {len(body)}\r\n"
    if close:
        head += "Connection: close\r\n"
    return head.encode() + b"\r\n" + body


def exit_with(status):
    sys.stdout.flush()
    sys.exit(status)

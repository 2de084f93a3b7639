#!/usr/bin/env bash
# Runs h3_server.py and h3_client.py (aioquic HTTP/3 peers) against each
# other: a throwaway self-signed certificate, one server, a series of
# client runs whose JSON lines are checked. Prints "ok"/"FAIL" per check
# and exits 0 only if every check passed (and the server exits 0 on
# SIGTERM). Needs python3 with aioquic, and openssl.
#
#   crates/spargio-http/tests/py/h3_selftest.sh
set -u

here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
server_pid=

cleanup() {
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
    kill "$server_pid" 2>/dev/null
    wait "$server_pid" 2>/dev/null
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT

if ! openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
  -subj /CN=localhost -addext subjectAltName=DNS:localhost,IP:127.0.0.1 -days 1 \
  -keyout "$tmp/key.pem" -out "$tmp/cert.pem" >/dev/null 2>&1; then
  echo "FAIL openssl could not make a certificate" >&2
  exit 1
fi

python3 "$here/h3_server.py" --cert "$tmp/cert.pem" --key "$tmp/key.pem" --verbose \
  >"$tmp/server.out" 2>"$tmp/server.err" &
server_pid=$!

port=
for _ in $(seq 100); do
  port=$(sed -n 's/^LISTENING \([0-9][0-9]*\)$/\1/p' "$tmp/server.out")
  [ -n "$port" ] && break
  kill -0 "$server_pid" 2>/dev/null || break
  sleep 0.1
done
if [ -z "$port" ]; then
  echo "FAIL server did not print LISTENING" >&2
  cat "$tmp/server.err" >&2
  exit 1
fi
base=https://127.0.0.1:$port
failures=0

# check NAME CONDITION CLIENT-ARGS...
# Runs the client; CONDITION is a Python expression over: res (the result
# lines), done (the final line), rc (the client's exit status), secs (its
# run time), sha(bytes), pattern(n), and server_log (the server's stderr).
check() {
  local name=$1 cond=$2
  shift 2
  local start end rc
  start=$(date +%s.%N)
  python3 "$here/h3_client.py" --ca "$tmp/cert.pem" "$@" >"$tmp/client.out" 2>"$tmp/client.err"
  rc=$?
  end=$(date +%s.%N)
  if python3 - "$tmp/client.out" "$rc" "$start" "$end" "$tmp/server.err" "$cond" <<'EOF'; then
import hashlib, json, sys

out, rc, start, end, server_err, cond = sys.argv[1:]
lines = [json.loads(line) for line in open(out) if line.strip()]
rc = int(rc)
secs = float(end) - float(start)
server_log = open(server_err).read()
done = lines[-1] if lines and lines[-1].get("done") is True else None
res = [line for line in lines if "status" in line]


def sha(data):
    return hashlib.sha256(data).hexdigest()


def pattern(n):
    return (bytes(range(251)) * (n // 251 + 1))[:n]


assert done is not None, "no done line"
sys.exit(0 if eval("(" + cond + ")") else 1)
EOF
    printf 'ok   %-28s (%.1f s)\n' "$name" "$(awk "BEGIN { print $end - $start }")"
  else
    echo "FAIL $name (client exit $rc): $cond"
    cut -c1-300 "$tmp/client.out" | head -5 | sed 's/^/  stdout: /'
    head -5 "$tmp/client.err" | sed 's/^/  stderr: /'
    failures=$((failures + 1))
  fi
}

MiB=1048576
check "GET /hello" \
  'rc == 0 and done["ok"] == 1 and done["errors"] == 0 and len(res) == 1
   and res[0]["status"] == 200 and res[0]["len"] == 13
   and res[0]["sha256"] == sha(b"hello over h3")
   and res[0]["headers"]["content-type"] == "text/plain" and res[0]["conn"] == 0' \
  --url "$base/hello"

check "GET /bytes 16 MiB" \
  'rc == 0 and len(res) == 1 and res[0]["status"] == 200
   and res[0]["len"] == 16 * 2**20 and res[0]["sha256"] == sha(pattern(16 * 2**20))' \
  --url "$base/bytes?n=$((16 * MiB))"

check "POST /sha256 1 MiB" \
  'rc == 0 and len(res) == 1 and res[0]["status"] == 200 and res[0]["len"] == 64
   and res[0]["sha256"] == sha(sha(pattern(2**20)).encode())
   and res[0]["headers"]["x-body-len"] == str(2**20)' \
  --url "$base/sha256" --method POST --body-bytes "$MiB"

check "POST /sha256 16 MiB" \
  'rc == 0 and len(res) == 1 and res[0]["status"] == 200
   and res[0]["sha256"] == sha(sha(pattern(16 * 2**20)).encode())' \
  --url "$base/sha256" --method POST --body-bytes "$((16 * MiB))"

check "POST /echo 1 MiB" \
  'rc == 0 and len(res) == 1 and res[0]["status"] == 200 and res[0]["len"] == 2**20
   and res[0]["sha256"] == sha(pattern(2**20))
   and res[0]["headers"]["x-body-sha256"] == sha(pattern(2**20))
   and res[0]["headers"]["x-body-len"] == str(2**20)' \
  --url "$base/echo" --method POST --body-bytes "$MiB"

check "GET /trailers" \
  'rc == 0 and len(res) == 1 and res[0]["status"] == 200
   and res[0]["sha256"] == sha(b"with trailers")
   and res[0]["trailers"] == {"x-trailer": "yes", "x-count": "3"}' \
  --url "$base/trailers"

check "GET /nope -> 404" \
  'rc == 0 and done["ok"] == 0 and done["errors"] == 0 and res[0]["status"] == 404' \
  --url "$base/nope"

check "100 concurrent on one conn" \
  'rc == 0 and done["ok"] == 100 and done["errors"] == 0 and len(res) == 100
   and len({r["stream"] for r in res}) == 100
   and all(r["sha256"] == sha(b"hello over h3") and r["conn"] == 0 for r in res)' \
  --url "$base/hello" --requests 100 --concurrency 100

check "5 connections x 10" \
  'rc == 0 and done["ok"] == 50 and done["errors"] == 0 and len(done["conns"]) == 5
   and sorted(r["conn"] for r in res) == sorted(list(range(5)) * 10)' \
  --url "$base/hello" --requests 10 --connections 5

check "50 concurrent /slow overlap" \
  'rc == 0 and done["ok"] == 50 and secs < 10' \
  --url "$base/slow?ms=500" --requests 50 --concurrency 50

check "cancelled POST" \
  'rc == 0 and done["cancelled"] == 1 and done["errors"] == 0 and res == []
   and "code=0x10c /echo" in server_log and " /echo stream=0 aborted" in server_log' \
  --url "$base/echo" --method POST --body-bytes "$MiB" --cancel-after-bytes 100000

check "GET /hello after the cancel" \
  'rc == 0 and done["ok"] == 1' \
  --url "$base/hello"

check "GOAWAY" \
  'rc == 0 and done["ok"] == 1 and done["goaway"] == 1 and res[0]["sha256"] == sha(b"bye")
   and done["conns"][0]["goaway_id"] == 4' \
  --url "$base/goaway"

# The requests after the first are not sent or, sent before the GOAWAY
# arrived, rejected by the server (H3_REQUEST_REJECTED).
check "requests after GOAWAY not served" \
  'rc == 1 and done["ok"] == 1 and done["errors"] == 0 and done["goaway"] == 1
   and done["not_started"] + done["rejected"] == 2' \
  --url "$base/goaway" --requests 3

kill -TERM "$server_pid"
wait "$server_pid"
server_rc=$?
server_pid=
if [ "$server_rc" -eq 0 ]; then
  echo "ok   server exits 0 on SIGTERM"
else
  echo "FAIL server exited $server_rc on SIGTERM"
  tail -5 "$tmp/server.err"
  failures=$((failures + 1))
fi
if [ "$(wc -l <"$tmp/server.out")" -ne 1 ]; then
  echo "FAIL server printed more than the LISTENING line on stdout"
  failures=$((failures + 1))
fi

if [ "$failures" -ne 0 ]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all checks passed"

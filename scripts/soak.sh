#!/usr/bin/env bash
# Soak: one spargio-http server (crates/spargio-http/examples/soak_server.rs,
# release build) on loopback, driven for SECONDS by real clients at once,
# to prove that nothing hangs and nothing leaks. Not part of
# `cargo test`; .ci/run runs it for 60 s on each backend.
#
#   scripts/soak.sh SECONDS                        # the runtime's default backend
#   SPARGIO_BACKEND=epoll scripts/soak.sh SECONDS  # forced epoll (or io_uring)
#
# The server serves HTTP/1.1 and h2c, HTTPS (ALPN h2 or http/1.1, a
# self-signed certificate made at start), WebSocket (ws and wss) and the
# gRPC greeter (h2c and TLS), each on its own 127.0.0.1 port. The clients,
# all at once, all bounded in time and count, all to 127.0.0.1 only:
#
#   wrk keep-alive     wrk -c8, GET / on HTTP/1.1 keep-alive
#   wrk close          wrk -c4 with `Connection: close`: a connection per request
#   h2load             rounds of h2load (-n, -c4 -m8): h2c GET, h2c POST /echo,
#                      HTTPS by ALPN h2 GET and /big, HTTP/1.1 over TLS
#   websockets         scripts/soak/ws_client.py: echo sessions, ping/pong,
#                      closing handshakes, dropped connections
#   grpcio             scripts/soak/grpc_calls.py: unary, streaming, refused and
#                      cancelled calls, a channel (connection) per 1-200 calls
#   node tls           scripts/soak/tls_client.js: HTTP/1.1 over node's tls,
#                      keep-alive and Connection: close, aborts mid-handshake,
#                      mid-head, mid-body, mid-response
#   aborts             scripts/soak/aborts.py: raw sockets cut off mid-request,
#                      mid-body, mid-TLS-handshake, mid-WebSocket-upgrade,
#                      mid-frame, mid-HTTP/2, closed with FIN or RST (SO_LINGER
#                      0), with checks in between; and stalled connections
#                      the server's own timeouts must close
#   slow reader        scripts/soak/slow_reader.py: large responses read a few
#                      bytes at a time through a 4 KiB receive buffer (plain
#                      and TLS), some abandoned halfway
#
# Pass means all of these (the script says which failed and exits 1):
#
#   1. No hang: every request finishes (or fails) within its client's own
#      per-request timeout (10 s; 60 s for a slow-read response; 25 s for
#      the server to close a stalled connection). A request that hits its
#      timeout is a hang; so is wrk's or h2load's `timeout` count above 0,
#      and a client still running SECONDS + 90 s after it started. Errors
#      that follow our own deliberate aborts are expected and counted as
#      `aborted`; any other error or a wrong body fails the soak too.
#   2. Flat resources: the server's fds and RSS (and socket states) are
#      printed every minute (every 10 s for runs under 2 minutes). RSS may
#      grow at most RSS_GROWTH_PCT (20%) plus RSS_SLACK_KB (4 MiB) from the
#      post-warm-up sample (the first one at or after a fifth of the run)
#      to any later sample: a leak of one allocation per request grows
#      without bound (the server accepts ~85,000 connections and answers
#      ~1 million requests a minute here: 16 bytes lost per connection
#      is 13 MiB in 10 minutes), while allocator arenas and buffer pools
#      settle in the warm-up. The absolute slack covers the glibc arenas'
#      swings on a 12-16 MiB process (2 MiB seen between samples over 10
#      minutes), where 20% is under 3 MiB.
#   3. Everything closed: within SETTLE_S (15 s) of the last client
#      stopping, the server reports no open connection (accepted ==
#      closed, counted per server, and no WebSocket session open), its fd
#      count is back to the baseline taken after a warm-up round of every
#      client (exactly: within FD_SLACK, 0), and its live task count is
#      back to the baseline too. 15 s is ample for closes the server
#      sees (a client's FIN or RST); a connection only its idle timeout
#      would close (10 s) is one whose close the server missed.
#   4. Clean shutdown: on SIGTERM the server drains (5 s grace), prints
#      its final counts (accepted == closed) and exits 0 within 20 s.
#
# The backend comes from the environment (SPARGIO_BACKEND, read by the
# runtime); the server prints the one it runs on, and a backend asked for
# by SPARGIO_BACKEND must be the one reported. Logs go to a temp dir,
# kept (and named) when the soak fails.
#
# Needs what scripts/install-test-peers.sh installs (wrk, h2load, node,
# curl, Python websockets and grpcio); uses ss (iproute2) when present.
set -euo pipefail
cd "$(dirname "$0")/.."
# No __pycache__ left in scripts/soak.
export PYTHONDONTWRITEBYTECODE=1

usage() { echo "usage: $0 SECONDS (at least 20)" >&2; exit 2; }
[ $# -eq 1 ] || usage
seconds=$1
case "$seconds" in '' | *[!0-9]*) usage ;; esac
[ "$seconds" -ge 20 ] || usage

RSS_GROWTH_PCT=20
RSS_SLACK_KB=$((4 * 1024))
FD_SLACK=0
SETTLE_S=15
WARMUP_S=3
if [ "$seconds" -lt 120 ]; then interval=10; else interval=60; fi
# The post-warm-up sample: the first at or after a fifth of the run.
warm_at=$(((seconds / 5 + interval - 1) / interval * interval))
[ "$warm_at" -ge "$interval" ] || warm_at=$interval

missing=()
for tool in wrk h2load node curl python3 timeout; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
python3 -c 'import websockets.asyncio.client, grpc' 2>/dev/null || missing+=("python websockets/grpcio")
if [ ${#missing[@]} -gt 0 ]; then
  echo "soak: missing ${missing[*]}: run scripts/install-test-peers.sh" >&2
  exit 1
fi

work=$(mktemp -d /tmp/spargio-soak.XXXXXX)
server=""
pids=()
names=()
# Ends every client still running, with whatever it started.
stop_clients() {
  local pid
  for pid in "${pids[@]}"; do
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
  done
}
cleanup() {
  local status=$?
  stop_clients
  if [ -n "$server" ]; then
    kill -KILL "$server" 2>/dev/null || true
  fi
  wait 2>/dev/null || true
  if [ "$status" -eq 0 ]; then rm -rf "$work"; else echo "soak: logs kept in $work" >&2; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Failures go to a file: some are found in subshells (`$(stats)`).
fail() { echo "$*" >>"$work/failures"; echo "FAIL: $*"; }

echo "== build (release): cargo build --release -p spargio-http --example soak_server"
build_start=$(date +%s)
cargo build --release -q -p spargio-http --example soak_server
echo "   built in $(($(date +%s) - build_start)) s"

target/release/examples/soak_server "$work" >"$work/server.log" 2>&1 &
server=$!
for _ in $(seq 1 300); do
  grep -q '^soak_server: ready' "$work/server.log" && break
  kill -0 "$server" 2>/dev/null || break
  sleep 0.1
done
if ! grep -q '^soak_server: ready' "$work/server.log"; then
  cat "$work/server.log" >&2
  echo "soak: the server did not start within 30 s" >&2
  exit 1
fi
grep '^soak_server: backend' "$work/server.log"
backend=$(sed -n 's/^soak_server: backend \([^ ]*\).*/\1/p' "$work/server.log")
case "${SPARGIO_BACKEND:-auto}" in
  epoll | io_uring)
    if [ "$backend" != "$SPARGIO_BACKEND" ]; then
      echo "soak: SPARGIO_BACKEND=$SPARGIO_BACKEND but the server runs on $backend" >&2
      exit 1
    fi ;;
esac
ready=$(grep '^soak_server: ready' "$work/server.log")
port() { sed -n "s/.* $1=\([0-9]*\).*/\1/p" <<<"$ready"; }
http=$(port http) https=$(port https) grpc=$(port grpc) grpcs=$(port grpcs) admin=$(port admin)
ca=$work/ca.pem
echo "   ports: http $http, https $https, grpc $grpc, grpcs $grpcs, admin $admin"

# ===== what the server looks like =====

fds() { find "/proc/$server/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l; }
rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$server/status" 2>/dev/null || echo 0; }
threads() { awk '/^Threads/ {print $2}' "/proc/$server/status" 2>/dev/null || echo 0; }
# The admin port's counters; an answer slower than 5 s is a hang too.
stats() {
  curl -s --max-time 5 "http://127.0.0.1:$admin/stats" 2>/dev/null && return
  echo "unanswered"
  fail "the admin port's /stats did not answer within 5 s" >&2
}
server_alive() { [ -n "$server" ] && kill -0 "$server" 2>/dev/null; }
stat_field() { sed -n "s/.*\b$1=\([0-9]*\).*/\1/p" <<<"$2"; }
# The server's TCP sockets by state, its listeners left out (ss is
# iproute2's, on every Debian image; without it, nothing).
sockets() {
  command -v ss >/dev/null || return 0
  ss -tanpH 2>/dev/null | awk -v pid="pid=$server," \
    'index($0, pid) && $1 != "LISTEN" {n[$1]++} END {for (s in n) printf "%s=%d ", s, n[s]}'
}
# One line of figures; leaves the RSS it printed in $rss.
sample() {
  local s f
  f=$(fds)
  s=$(stats)
  rss=$(rss_kb)
  printf '   %-6s fds=%-5s rss=%6s KiB threads=%-3s sockets: %-28s| %s\n' \
    "$1" "$f" "$rss" "$(threads)" "$(sockets)" "$s"
}

# ===== the clients =====

# Starts a client in the background, bounded: each stops by itself at its
# deadline, and `timeout` only catches one that does not (the longest
# request timeout is 60 s). `timeout` is the job itself and leads a
# process group of its own (it calls setpgid), so the cleanup ends the
# client with everything it started.
launch() {
  local name=$1
  shift
  timeout -k 5 $((client_secs + 90)) "$@" >"$work/$name.log" 2>&1 &
  pids+=($!)
  names+=("$name")
}

# Runs every client for $client_secs; returns at once.
run_clients() {
  pids=()
  names=()
  local py=(python3 -u)
  launch wrk-keepalive wrk -t1 -c8 -d"${client_secs}s" --timeout 10s "http://127.0.0.1:$http/"
  launch wrk-close wrk -t1 -c4 -d"${client_secs}s" --timeout 10s \
    -H "Connection: close" "http://127.0.0.1:$http/"
  launch h2load scripts/soak/h2load_rounds.sh "$client_secs" "$http" "$https" "$work/body16k"
  launch websockets "${py[@]}" scripts/soak/ws_client.py "$client_secs" "$http" "$https" "$ca"
  launch grpcio "${py[@]}" scripts/soak/grpc_calls.py "$client_secs" "$grpc" "$grpcs" "$ca"
  launch node-tls node scripts/soak/tls_client.js "$client_secs" "$https" "$ca"
  launch aborts "${py[@]}" scripts/soak/aborts.py "$client_secs" "$http" "$https" "$grpc" "$grpcs" "$ca"
  launch slow-reader "${py[@]}" scripts/soak/slow_reader.py "$client_secs" "$http" "$https" "$ca"
}

# Whether any client is still running.
clients_running() {
  local pid
  for pid in "${pids[@]}"; do
    kill -0 "$pid" 2>/dev/null && return 0
  done
  return 1
}

# Waits for every client and judges its log; $1 names the phase.
judge_clients() {
  local i name status log line
  for i in "${!pids[@]}"; do
    name=${names[i]}
    log=$work/${names[i]}.log
    status=0
    wait "${pids[i]}" || status=$?
    case "$name" in
      wrk-*)
        line="$(grep -m1 'requests in' "$log" | sed 's/^ *//'); $(grep -m1 'Socket errors' "$log" || echo 'no socket errors')"
        line+="$(grep -m1 'Non-2xx' "$log" | sed 's/^ */; /' || true)"
        if grep -q 'Socket errors:.*timeout [1-9]' "$log"; then
          fail "$1 $name: requests timed out (hung): $(grep 'Socket errors' "$log")"
        elif grep -q 'Socket errors\|Non-2xx' "$log"; then
          fail "$1 $name: errors: $(grep 'Socket errors\|Non-2xx' "$log" | tr '\n' ' ')"
        fi ;;
      h2load)
        line=$(awk '/^.*requests:/ {
            sub(/^.*requests: /, ""); split($0, f, /, /)
            for (j in f) { split(f[j], kv, / /); sum[kv[2]] += kv[1] } }
          /^h2load-summary/ { rounds = $2 }
          END { printf "%s: %d total, %d succeeded, %d failed, %d errored, %d timeout",
            rounds, sum["total"], sum["succeeded"], sum["failed"], sum["errored"], sum["timeout"] }' "$log")
        if grep -q 'hung' "$log"; then
          fail "$1 $name: a round did not finish: $(grep -B3 'hung' "$log" | tr '\n' ' ')"
        elif grep '^.*requests:' "$log" | grep -qv ' 0 failed, 0 errored, 0 timeout'; then
          fail "$1 $name: $(grep '^.*requests:' "$log" | grep -v ' 0 failed, 0 errored, 0 timeout' | head -3 | tr '\n' ' ')"
        fi ;;
      *)
        line=$(grep -m1 '^soak-client' "$log" | sed 's/^soak-client [^:]*: //' || true)
        [ -n "$line" ] || line="no report"
        if [ "$status" -ne 0 ] || ! grep -q '^soak-client.* failed=0 hung=0' "$log"; then
          fail "$1 $name (exit $status): $line"
          grep '^  \(failed\|hung\):' "$log" | head -8 || tail -5 "$log"
        fi ;;
    esac
    if [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
      fail "$1 $name: still running $((client_secs + 90)) s after it started (hung)"
    elif [ "$status" -ne 0 ] && [[ "$name" == wrk-* ]]; then
      fail "$1 $name exited $status: $(tail -3 "$log" | tr '\n' ' ')"
    fi
    printf '   %-14s %s\n' "$name" "$line"
  done
}

# Waits up to SETTLE_S for no open connection and at most $1 fds; leaves
# the last figures in $settled_fds and $settled_stats. The fds are counted
# before asking /stats: the server closes its end of that connection only
# after curl has closed its own, a moment after curl returns.
settle() {
  local until=$((SECONDS + SETTLE_S))
  while :; do
    settled_fds=$(fds)
    settled_stats=$(stats)
    if [ "$(stat_field open "$settled_stats")" = 0 ] && [ "$(stat_field ws_open "$settled_stats")" = 0 ] \
      && [ "$settled_fds" -le $(($1 + FD_SLACK)) ]; then
      return
    fi
    [ "$SECONDS" -lt "$until" ] || return
    sleep 0.5
  done
}

head -c 16384 /dev/urandom >"$work/body16k"

echo "== warm-up: every client for $WARMUP_S s"
client_secs=$WARMUP_S
run_clients
judge_clients warm-up
settle 1000000
sleep 1
base_fds=$(fds)
base_stats=$(stats)
base_tasks=$(stat_field live_tasks "$base_stats")
echo "   baseline: fds=$base_fds rss=$(rss_kb) KiB live_tasks=$base_tasks | $base_stats"

echo "== soak: every client for $seconds s (samples every $interval s; post-warm-up sample at ${warm_at} s)"
client_secs=$seconds
start=$SECONDS
next=$interval
warm_rss=""
max_rss=0
max_rss_at=0
run_clients
while clients_running; do
  sleep 1
  if ! server_alive; then
    fail "the server exited during the soak: $(tail -5 "$work/server.log" | tr '\n' ' ')"
    stop_clients
    break
  fi
  t=$((SECONDS - start))
  if [ "$t" -ge "$next" ] && [ "$next" -le "$seconds" ]; then
    sample "t=${next}s"
    if [ "$next" -eq "$warm_at" ]; then warm_rss=$rss; fi
    if [ -n "$warm_rss" ] && [ "$next" -gt "$warm_at" ] && [ "$rss" -gt "$max_rss" ]; then
      max_rss=$rss
      max_rss_at=$next
    fi
    next=$((next + interval))
  fi
done
echo "== clients (ok / aborted on purpose / failed / hung)"
judge_clients soak

echo "== after the clients: waiting up to $SETTLE_S s for every connection to close"
settle "$base_fds"
end_stats=$settled_stats
end_fds=$settled_fds
end_tasks=$(stat_field live_tasks "$end_stats")
sample "end"
if [ "$(stat_field open "$end_stats")" != 0 ] || [ "$(stat_field ws_open "$end_stats")" != 0 ]; then
  fail "connections still open $SETTLE_S s after the last client stopped: $end_stats"
  echo "   the server's sockets (ss -tanp):"
  if command -v ss >/dev/null; then
    ss -tanp | awk -v pid="pid=$server," 'NR == 1 || index($0, pid)' | head -50 || true
  fi
fi
if [ "$end_fds" -gt $((base_fds + FD_SLACK)) ]; then
  fail "fds: $end_fds at the end, baseline $base_fds (slack $FD_SLACK)"
  find "/proc/$server/fd" -mindepth 1 -printf '   %f -> %l\n' | head -80 || true
fi
if [ -n "$end_tasks" ] && [ -n "$base_tasks" ] && [ "$end_tasks" -gt "$base_tasks" ]; then
  fail "live tasks: $end_tasks at the end, baseline $base_tasks"
fi
if [ -z "$warm_rss" ]; then
  fail "no post-warm-up RSS sample (the clients ended before ${warm_at} s)"
else
  limit=$((warm_rss * (100 + RSS_GROWTH_PCT) / 100 + RSS_SLACK_KB))
  echo "   RSS: post-warm-up ${warm_rss} KiB at ${warm_at} s, highest after it ${max_rss} KiB at ${max_rss_at} s, limit ${limit} KiB"
  if [ "$max_rss" -gt "$limit" ]; then
    fail "RSS grew from ${warm_rss} KiB (${warm_at} s) to ${max_rss} KiB (${max_rss_at} s): over ${RSS_GROWTH_PCT}% + ${RSS_SLACK_KB} KiB"
  fi
fi

echo "== shutdown (SIGTERM)"
kill -TERM "$server" 2>/dev/null || fail "the server was gone before SIGTERM"
for _ in $(seq 1 200); do
  kill -0 "$server" 2>/dev/null || break
  sleep 0.1
done
if kill -0 "$server" 2>/dev/null; then
  fail "the server did not exit within 20 s of SIGTERM"
else
  status=0
  wait "$server" || status=$?
  server=""
  [ "$status" -eq 0 ] || fail "the server exited $status: $(tail -3 "$work/server.log" | tr '\n' ' ')"
fi
grep '^soak_server: \(signal\|final\)' "$work/server.log" | sed 's/^/   /' || true
# Anything else the server said (a panic, the runtime's notes, the epoll
# fault mode's seed).
if grep -qv '^soak_server: ' "$work/server.log"; then
  echo "   the server's other output:"
  grep -v '^soak_server: ' "$work/server.log" | head -20 | sed 's/^/     /' || true
fi
final=$(grep '^soak_server: final' "$work/server.log" || true)
if [ -z "$final" ]; then
  fail "the server printed no final counts"
else
  accepted=$(stat_field accepted "$final")
  closed=$(stat_field closed "$final")
  echo "   accepted $accepted connections, closed $closed"
  if [ "$accepted" != "$closed" ] || [ "$(stat_field ws_open "$final")" != 0 ]; then
    fail "at shutdown, accepted $accepted != closed $closed or WebSocket sessions open: $final"
  fi
fi

if [ -s "$work/failures" ]; then
  echo "SOAK FAILED (backend $backend, $seconds s): $(wc -l <"$work/failures") problem(s):"
  sed 's/^/  - /' "$work/failures"
  exit 1
fi
echo "SOAK PASSED (backend $backend, $seconds s)"

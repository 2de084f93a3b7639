#!/usr/bin/env bash
# A/B of two builds of the spargio side of bench/src/bin/http_server.rs:
# each load alternates OLD and NEW for ROUNDS rounds, a fresh server per run,
# and prints req/s and the server's CPU µs per request (utime + stime over
# wrk's request count). Used to check that a change costs the io_uring path
# nothing (bench/README.md, "epoll backend").
#
#   git worktree add /tmp/spargio-old <commit>
#   (cd /tmp/spargio-old && CARGO_TARGET_DIR=$PWD/../target-old \
#      cargo build --release -p spargio-bench --bin http_server)
#   cargo build --release -p spargio-bench --bin http_server
#   scripts/http_ab.sh /tmp/target-old/release/http_server target/release/http_server
#
# Env: ROUNDS (3), DURATION (4 s), PORT (18095), SPARGIO_BACKEND (passed on).
set -euo pipefail
old="$1"; new="$2"
ROUNDS="${ROUNDS:-3}"; DURATION="${DURATION:-4}"; PORT="${PORT:-18095}"
tck="$(getconf CLK_TCK)"
ticks() { sed 's/^.*) //' "/proc/$1/stat" | awk '{ print $12 + $13 }'; }
run() {
    local bin="$1"; shift
    "$bin" spargio "$PORT" 2 >/dev/null 2>&1 &
    local pid=$!
    sleep 0.4
    local t0 out t1
    t0="$(ticks "$pid")"
    out="$(wrk -t2 -d"${DURATION}s" "$@" "http://127.0.0.1:$PORT/" 2>&1)"
    t1="$(ticks "$pid")"
    kill "$pid"; wait "$pid" 2>/dev/null || true
    local reqs rps
    reqs="$(echo "$out" | awk '/requests in/ { print $1 }')"
    rps="$(echo "$out" | awk '/Requests\/sec/ { printf "%.0f", $2 }')"
    awk -v a="$t0" -v b="$t1" -v n="$reqs" -v t="$tck" -v r="$rps" \
        'BEGIN { printf "%7d req/s %6.2f µs/req", r, (b - a) / t * 1e6 / n }'
    sleep 0.3
}
for load in c16 c256 churn; do
    case "$load" in
        c16) args=(-c16) ;;
        c256) args=(-c256) ;;
        churn) args=(-c32 -H 'Connection: close') ;;
    esac
    for r in $(seq 1 "$ROUNDS"); do
        echo "$load round $r: old $(run "$old" "${args[@]}") | new $(run "$new" "${args[@]}")"
    done
done

#!/usr/bin/env bash
# Where the kernel places the database's backends against the server's
# threads, and what it does to sqlx on spargio and on tokio (issue 51).
#
#   scripts/db_placement.sh                  # /db, 3 rounds of each case
#   ROUNDS=5 ROW=/fortunes scripts/db_placement.sh
#
# The server (bench/src/bin/db_server.rs, --workers 2 --pool 2: sqlx's
# PgPool, one connection opened from each shard, TechEmpower's sizing)
# runs with its two worker threads pinned one to each CPU, and the two
# PostgreSQL backends of its pool pinned one to each CPU in either of the
# two ways: assignment A (backends in the order of the server's local
# ports: backend 1 on CPU 0, backend 2 on CPU 1) or B (swapped). wrk
# (-t2 -c64) and the rest of PostgreSQL float. Per case and round: a
# fresh server, a 1 s warm-up, then RUNS wrk runs of 1 s, each printed
# with the machine's idle share and the function-call IPIs ("CAL" in
# /proc/interrupts: wakeups sent to an idle CPU) per request.
#
# On spargio a pool connection's socket is watched by the tokio reactor
# of the shard that opened it, so one assignment puts each shard beside
# the backend it talks to and the other puts every database message
# across CPUs; on tokio any worker serves any socket, so the two should
# read the same.
#
# Env: ROUNDS (3), RUNS (6), ROW (/db), RUNTIMES ("spargio tokio"),
# PORT (18530; each server takes the next port), DATABASE_URL (else a private PostgreSQL from
# spargio-peer-db). Needs 2 or more CPUs, taskset and ss.
set -euo pipefail
. "$(dirname "$0")/bench_lib.sh"
cd "$(dirname "$0")/.."

ROUNDS="${ROUNDS:-3}"
RUNS="${RUNS:-6}"
ROW="${ROW:-/db}"
RUNTIMES="${RUNTIMES:-spargio tokio}"
PORT="${PORT:-18530}"
target="${CARGO_TARGET_DIR:-target}"

need_wrk
for tool in taskset ss; do
    command -v "$tool" >/dev/null || { echo "$tool is required" >&2; exit 1; }
done
[ "$(nproc)" -ge 2 ] || { echo "needs 2 CPUs" >&2; exit 1; }

cargo build --release -p spargio-bench --features db --bin db_server
tmp="$(mktemp -d)"
srv=""
cleanup() {
    [ -n "$srv" ] && kill "$srv" 2>/dev/null && wait "$srv" 2>/dev/null
    stop_db
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ -z "${DATABASE_URL:-}" ]; then
    cargo build --release -p spargio-test-peers --bin spargio-peer-db
    start_db
fi
export DATABASE_URL
pg_port="$(sed -n 's|.*@[^:/]*:\([0-9]*\)/.*|\1|p' <<<"$DATABASE_URL")"

# Function-call IPIs summed over CPUs, the machine's idle ticks, wrk's count.
cal() { awk '$1 == "CAL:" { s = 0; for (i = 2; i <= NF && $i ~ /^[0-9]+$/; i++) s += $i; print s }' /proc/interrupts; }
idle() { awk '$1 == "cpu" { print $5 }' /proc/stat; }

launches=0
for rt in $RUNTIMES; do
    for round in $(seq 1 "$ROUNDS"); do
        for assign in A B; do
            # A port per server: the last one's closed connections linger.
            port=$((PORT + launches))
            launches=$((launches + 1))
            "$target/release/db_server" --runtime "$rt" --workers 2 --pool 2 --port "$port" \
                >"$tmp/server.out" 2>&1 &
            srv=$!
            for _ in $(seq 1 300); do
                grep -q "^ready" "$tmp/server.out" && break
                sleep 0.05
            done
            grep -q "^ready" "$tmp/server.out" || { echo "db_server did not start: $(cat "$tmp/server.out")" >&2; exit 1; }
            mapfile -t workers < <(grep -l -x -E "spargio-shard-[0-9]+|tokio-rt-worker" /proc/"$srv"/task/*/comm |
                cut -d/ -f5)
            mapfile -t backends < <(ss -tnpH state established "( sport = :$pg_port )" |
                sort -k4 | sed -n 's/.*pid=\([0-9]*\).*/\1/p')
            if [ "${#workers[@]}" -ne 2 ] || [ "${#backends[@]}" -ne 2 ]; then
                echo "expected 2 workers and 2 backends, found ${#workers[@]} and ${#backends[@]}" >&2
                exit 1
            fi
            taskset -pc 0 "${workers[0]}" >/dev/null
            taskset -pc 1 "${workers[1]}" >/dev/null
            if [ "$assign" = A ]; then first=0; else first=1; fi
            taskset -pc "$first" "${backends[0]}" >/dev/null
            taskset -pc "$((1 - first))" "${backends[1]}" >/dev/null
            wrk -t2 -c64 -d1 "http://127.0.0.1:$port$ROW" >/dev/null
            line=""
            for _ in $(seq 1 "$RUNS"); do
                c0=$(cal); i0=$(idle)
                wrk -t2 -c64 -d1 "http://127.0.0.1:$port$ROW" >"$tmp/wrk.out"
                c1=$(cal); i1=$(idle)
                reqs=$(awk '/requests in/ { print $1 }' "$tmp/wrk.out")
                line+=$(awk -v r="$reqs" -v c="$((c1 - c0))" -v i="$((i1 - i0))" -v hz="$(getconf CLK_TCK)" \
                    -v n="$(nproc)" 'BEGIN { printf " %.1fk (idle %d%%, CAL %.2f)", r / 1000, 100 * i / hz / n, c / r }')
            done
            echo "$rt round $round assignment $assign:$line"
            for p in "${backends[@]}"; do taskset -pc "0-$(($(nproc) - 1))" "$p" >/dev/null; done
            kill "$srv" 2>/dev/null
            wait "$srv" 2>/dev/null || true
            srv=""
        done
    done
done

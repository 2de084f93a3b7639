#!/usr/bin/env bash
# Syscalls and context switches per request of the DB-backed rows
# (bench/src/bin/db_server.rs, the servers of scripts/db_bench.sh), for
# spargio (sqlx on tokio-compat) against tokio (sqlx on a multi-thread
# runtime): what each request costs in epoll_wait, io_uring_enter,
# eventfd writes, futex, sched_yield and switches.
#
#   scripts/db_syscalls.sh                     # /db and /queries?q=20
#   PATHS="/fortunes" RUNTIMES="spargio" scripts/db_syscalls.sh
#   BIN=/other/target/release/db_server scripts/db_syscalls.sh   # another build
#   BINS="a/db_server b/db_server" RUNTIMES=spargio ROUNDS=3 scripts/db_syscalls.sh  # A/B
#
# Shared mode of db_bench.sh: WORKERS (2) workers, wrk with 2 threads and
# CONNS (64) connections, a pool of POOL (16), nothing pinned. Per run: a
# 1 s warm-up, then `perf stat` on the server over a DURATION (4) s wrk
# run; counts over wrk's request count. Needs perf with syscall
# tracepoints (root, or perf_event_paranoid <= 1).
set -euo pipefail
cd "$(dirname "$0")/.."
target="${CARGO_TARGET_DIR:-target}"
PATHS="${PATHS:-/db /queries?q=20}"
RUNTIMES="${RUNTIMES:-spargio tokio}"
WORKERS="${WORKERS:-2}"
POOL="${POOL:-16}"
CONNS="${CONNS:-64}"
DURATION="${DURATION:-4}"
PORT="${PORT:-18190}"
ROUNDS="${ROUNDS:-1}"
if [ -z "${BINS:-}" ]; then
    if [ -z "${BIN:-}" ]; then
        cargo build --release -p spargio-bench --features db --bin db_server
        BIN="$target/release/db_server"
    fi
    BINS="$BIN"
fi
cargo build --release -p spargio-test-peers --bin spargio-peer-db
tmp="$(mktemp -d)"
srv=""
cleanup() {
    [ -n "$srv" ] && kill "$srv" 2>/dev/null && wait "$srv" 2>/dev/null
    exec 3>&- || true
    rm -rf "$tmp"
}
trap cleanup EXIT
# A private PostgreSQL, stopped when our fd 3 closes.
exec 3> >(exec "$target/release/spargio-peer-db" >"$tmp/db.out" 2>"$tmp/db.err")
for _ in $(seq 1 600); do
    grep -q "^DATABASE_URL=" "$tmp/db.out" && break
    sleep 0.1
done
DATABASE_URL="$(sed -n 's/^DATABASE_URL=//p' "$tmp/db.out")"
[ -n "$DATABASE_URL" ] || { echo "spargio-peer-db did not start: $(cat "$tmp/db.err")" >&2; exit 1; }
export DATABASE_URL
events=(epoll_wait io_uring_enter write read futex sched_yield sendto recvfrom)
ev="context-switches"
for e in "${events[@]}"; do ev+=",syscalls:sys_enter_$e"; done
printf '| path | runtime | build | req/s | CPU µs/req |'
for e in "${events[@]}"; do printf ' %s |' "$e"; done
printf ' switches |\n|---|---|---|---:|---:|'
for _ in "${events[@]}" x; do printf -- '---:|'; done
echo
for path in $PATHS; do
  for round in $(seq 1 "$ROUNDS"); do
   for BIN in $BINS; do
    for rt in $RUNTIMES; do
        # tokio's server is the same in every build: once a round.
        [ "$rt" = tokio ] && [ "$BIN" != "${BINS%% *}" ] && continue
        "$BIN" --runtime "$rt" --port "$PORT" --workers "$WORKERS" --pool "$POOL" \
            >"$tmp/srv.out" 2>"$tmp/srv.err" &
        srv=$!
        for _ in $(seq 1 300); do
            grep -q ready "$tmp/srv.out" && break
            sleep 0.1
        done
        grep -q ready "$tmp/srv.out" || { echo "$rt did not start: $(cat "$tmp/srv.err")" >&2; exit 1; }
        url="http://127.0.0.1:$PORT$path"
        wrk -t2 -c"$CONNS" -d1s "$url" >/dev/null
        perf stat -x, -e "$ev" -p "$srv" -o "$tmp/perf.txt" -- sleep "$((DURATION + 1))" &
        perf_pid=$!
        t0="$(awk '{ print $14 + $15 }' "/proc/$srv/stat")"
        reqs="$(wrk -t2 -c"$CONNS" -d"${DURATION}s" "$url" | awk '/requests in/ { print $1 }')"
        t1="$(awk '{ print $14 + $15 }' "/proc/$srv/stat")"
        wait "$perf_pid"
        printf '| %s | %s | %s | %d | %.1f |' "$path" "$rt" "$BIN" "$((reqs / DURATION))" \
            "$(awk -v t="$((t1 - t0))" -v r="$reqs" -v hz="$(getconf CLK_TCK)" 'BEGIN { print t * 1e6 / hz / r }')"
        for e in "${events[@]}" context-switches; do
            awk -F, -v r="$reqs" -v e="$e" '
                $3 == e || $3 == "syscalls:sys_enter_" e { printf " %.2f |", $1 / r }' "$tmp/perf.txt"
        done
        echo
        kill "$srv"
        wait "$srv" 2>/dev/null || true
        srv=""
    done
   done
  done
done

#!/usr/bin/env bash
# TechEmpower-shaped benchmark with PostgreSQL: one axum Router
# (bench/src/bin/db_server.rs) served three ways, driven by wrk.
#
#   scripts/db_bench.sh                          # ROUNDS=3 DURATION=4, split and shared
#   ROUNDS=1 DURATION=2 MODES=shared scripts/db_bench.sh   # a quick pass
#   DATABASE_URL=postgres://... PG_PID=1234 scripts/db_bench.sh
#
# Servers (db_server --runtime ...), each with the same pool of database
# connections, all opened before the run. Pool sizes (POOLS, space-
# separated, each run in turn; default "workers 16"): a number, or
# `workers`: one connection per server worker, as TechEmpower's own axum
# entry sizes it (1 in split mode, WORKERS in shared mode).
# - spargio:    spargio_http::serve, sqlx PgPool on spargio's tokio-compat.
# - spargio-pg: spargio_http::serve, tokio-postgres over spargio's own
#               sockets (queries of a request pipelined on one connection).
# - tokio:      axum::serve on a multi-thread tokio runtime, sqlx PgPool.
#
# Rows (TechEmpower's test types): /plaintext with HTTP/1.1 pipelining of
# depth 16 (scripts/pipeline.lua) over PLAINTEXT_CONNS connections, and
# /json, /db, /queries?q=20, /fortunes, /updates?q=20 over CONNS
# connections.
#
# Modes (MODES, space-separated; default "split shared"):
# - split: the server pinned to CPU 0 with ONE worker; wrk (one thread)
#   and PostgreSQL (every process, by taskset -p) pinned to CPU 1.
# - shared: the server with WORKERS workers, wrk with two threads,
#   PostgreSQL on every CPU: nothing pinned.
#
# For each mode and row, ROUNDS rounds of spargio, spargio-pg, tokio in
# turn, each run against a freshly started server. Per run: req/s, p99
# (wrk --latency), the server's CPU time per request (utime + stime from
# /proc/PID/stat before and after wrk, over the request count) and
# PostgreSQL's (the same summed over the postmaster and its children; a
# backend that started during the run counts from zero). Per row: the
# median of each over the rounds, and each spargio variant's ratios to
# tokio (of the medians, and their range over the rounds, round i against
# round i).
#
# PostgreSQL: a private server started with spargio-peer-db (the
# TechEmpower tables `world` and `fortune`; stopped at exit), unless
# DATABASE_URL is set; then its postmaster's pid is PG_PID, or found by
# its port with `ss`, for pinning (without one PostgreSQL is not pinned,
# and its CPU is not measured).
#
# The summary is printed and written to <target>/db_bench.md (<target> =
# $CARGO_TARGET_DIR, else target). Exits non-zero when a run failed: a
# server that did not start, stopped answering or died, wrk connect or
# timeout errors, non-2xx responses, or more read/write errors than the
# end-of-run resets of its connections explain.
#
# Env: MODES, ROWS (a regex on the row labels; all), ROUNDS (3), DURATION (seconds per run, 4), WORKERS (2, the
# shared mode's), POOLS ("workers 16"; POOL=n is POOLS=n), CONNS (64), PLAINTEXT_CONNS (256), DEPTH
# (pipelining depth of /plaintext, 16), PORT (18084; the three servers use
# PORT, PORT+1, PORT+2), DATABASE_URL, PG_PID.
set -euo pipefail
. "$(dirname "$0")/bench_lib.sh"
cd "$(dirname "$0")/.."

MODES="${MODES:-split shared}"
ROUNDS="${ROUNDS:-3}"
DURATION="${DURATION:-4}"
WORKERS="${WORKERS:-2}"
POOLS="${POOLS:-${POOL:-workers 16}}"
CONNS="${CONNS:-64}"
PLAINTEXT_CONNS="${PLAINTEXT_CONNS:-256}"
DEPTH="${DEPTH:-16}"
PORT="${PORT:-18084}"
target="${CARGO_TARGET_DIR:-target}"
bin="$target/release/db_server"
runtimes=(spargio spargio-pg tokio)
# A row: label|path|connections|pipelining depth (1: none).
rows=(
    "plaintext (pipelined ×$DEPTH)|/plaintext|$PLAINTEXT_CONNS|$DEPTH"
    "json|/json|$CONNS|1"
    "db|/db|$CONNS|1"
    "queries q=20|/queries?q=20|$CONNS|1"
    "fortunes|/fortunes|$CONNS|1"
    "updates q=20|/updates?q=20|$CONNS|1"
)
# ROWS: an extended regex; only rows whose label matches run (e.g.
# ROWS='db|fortunes').
if [ -n "${ROWS:-}" ]; then
    kept=()
    for r in "${rows[@]}"; do
        if [[ "${r%%|*}" =~ ^($ROWS) ]]; then kept+=("$r"); fi
    done
    rows=("${kept[@]}")
fi

need_wrk
command -v curl >/dev/null || { echo "curl is required" >&2; exit 1; }
check_split_mode

cargo build --release -p spargio-bench --features db --bin db_server
if [ -z "${DATABASE_URL:-}" ]; then
    cargo build --release -p spargio-test-peers --bin spargio-peer-db
fi

tmp="$(mktemp -d)"
trap 'stop_server; stop_db; rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

# ===== PostgreSQL =====

pg_note=""
if [ -z "${DATABASE_URL:-}" ]; then
    start_db
    pg_note="private PostgreSQL $("$(readlink -f "/proc/$PG_PID/exe")" --version 2>/dev/null | awk '{ print $3 }') from spargio-peer-db (fsync off)"
else
    if [ -z "${PG_PID:-}" ] && command -v ss >/dev/null; then
        pg_port="$(sed -n 's|.*@[^:/]*:\([0-9]*\)/.*|\1|p' <<<"$DATABASE_URL")"
        PG_PID="$(ss -Hltnp "sport = :${pg_port:-5432}" 2>/dev/null |
            sed -n 's/.*pid=\([0-9]*\).*/\1/p' | head -n 1)"
    fi
    pg_note="PostgreSQL at DATABASE_URL"
    [ -n "${PG_PID:-}" ] || pg_note+=" (postmaster pid unknown: not pinned, its CPU not measured)"
fi
PG_PID="${PG_PID:-}"
export DATABASE_URL

# Pins the postmaster and every child to CPU list $1 (new backends fork
# from the postmaster and inherit it).
pin_pg() {
    [ -n "$PG_PID" ] || return 0
    local pid
    for pid in "$PG_PID" $(pgrep -P "$PG_PID" || true); do
        taskset -a -p -c "$1" "$pid" >/dev/null 2>&1 || true
    done
}

# "pid ticks" for the postmaster and each child, one a line.
pg_ticks() {
    [ -n "$PG_PID" ] || return 0
    local pid
    for pid in "$PG_PID" $(pgrep -P "$PG_PID" || true); do
        echo "$pid $(cpu_ticks "$pid" 2>/dev/null || echo 0)"
    done
}

# PostgreSQL's ticks between two pg_ticks snapshots (a process missing
# from the first counts from zero; one gone by the second is lost).
pg_delta() {
    awk 'NR == FNR { before[$1] = $2; next } { d += $2 - before[$1] } END { print d + 0 }' "$1" "$2"
}

# ===== servers and runs =====

port_of() {
    case "$1" in
        spargio) echo "$PORT" ;;
        spargio-pg) echo $((PORT + 1)) ;;
        tokio) echo $((PORT + 2)) ;;
    esac
}

# The mode's server pinning and workers, wrk's pinning and threads, and
# PostgreSQL's CPUs (this script's own, in place of bench_lib.sh's).
set_mode() {
    case "$1" in
        shared) server_pin=() workers="$WORKERS" client_pin=() threads=2 pg_cpus="0-$(($(nproc) - 1))" ;;
        split) server_pin=(taskset -c 0) workers=1 client_pin=(taskset -c 1) threads=1 pg_cpus=1 ;;
        *) echo "unknown mode '$1' (split or shared)" >&2; exit 2 ;;
    esac
}

# Starts a server (pinned as the mode says) and waits for its `ready
# <pid>` line (after its pool is open). A port can stay busy for a moment
# after the previous server exits: bench_lib.sh retries a bind failure.
start_server() {
    local rt="$1" port
    port="$(port_of "$rt")"
    launch_server "$rt" 200 " on port $port" \
        "$bin" --runtime "$rt" --port "$port" --workers "$workers" --pool "$pool"
}

# check_server (bench_lib.sh): GET /plaintext, and a server that wrote to
# stderr is a failure too; check_wrk: a run without requests shows wrk's
# last lines.
check_path=/plaintext
check_body="Hello, World!"
check_stderr=1
check_wrk_tail=3

# One wrk run against a fresh server. Sets req_s, p99 (µs), cpu and pg
# (server and PostgreSQL CPU µs per request).
run_once() {
    local rt="$1" label="$2" path="$3" conns="$4" depth="$5" out="$tmp/client.out" before after
    local args=("-t$threads" "-c$conns" "-d${DURATION}s" --latency)
    start_server "$rt"
    pg_ticks >"$tmp/pg.before"
    before="$(cpu_ticks "$server_pid")"
    if [ "$depth" -gt 1 ]; then
        "${client_pin[@]}" wrk "${args[@]}" -s scripts/pipeline.lua \
            "http://127.0.0.1:$(port_of "$rt")$path" -- "$depth" >"$out" 2>&1 3>&- || true
    else
        "${client_pin[@]}" wrk "${args[@]}" "http://127.0.0.1:$(port_of "$rt")$path" >"$out" 2>&1 3>&- || true
    fi
    after="$(cpu_ticks "$server_pid" 2>/dev/null || echo "$before")"
    pg_ticks >"$tmp/pg.after"
    check_wrk "$label $rt" "$conns" "$out"
    check_server "$rt" "$label" || true
    stop_server
    wrk_parse "$out"
    cpu="$(awk -v n="${requests:-0}" -v d=$((after - before)) -v hz="$clk_tck" 'BEGIN {
        if (n > 0) printf "%.2f", d * 1e6 / hz / n; else print "nan" }')"
    if [ -n "$PG_PID" ]; then
        pg="$(awk -v n="${requests:-0}" -v d="$(pg_delta "$tmp/pg.before" "$tmp/pg.after")" -v hz="$clk_tck" 'BEGIN {
            if (n > 0) printf "%.2f", d * 1e6 / hz / n; else print "nan" }')"
    else
        pg=nan
    fi
}

mode_title() {
    case "$1" in
        shared) echo "shared: $WORKERS workers each, wrk with 2 threads, PostgreSQL on every CPU, nothing pinned" ;;
        split) echo "split: server on CPU 0 with 1 worker; wrk (1 thread) and PostgreSQL on CPU 1 (taskset)" ;;
    esac
}

# Other compilers or builds running now (they share the two cores).
# (pgrep matches one name pattern at most 15 characters long.)
# shellcheck disable=SC2009
busy() { ps -eo comm= | grep -cxE 'rustc|cc1|cc1plus|ld|cargo' || true; }

title="TechEmpower shapes with PostgreSQL: spargio (sqlx), spargio-pg (tokio-postgres over spargio sockets), tokio (sqlx)"
echo "# $title"
echo "# $pg_note; DATABASE_URL=$DATABASE_URL"
echo "# ROUNDS=$ROUNDS DURATION=${DURATION}s MODES='$MODES' POOLS='$POOLS' CONNS=$CONNS PLAINTEXT_CONNS=$PLAINTEXT_CONNS; per run: req/s, p99, server CPU µs/req, PostgreSQL CPU µs/req"
report="## $title (ROUNDS=$ROUNDS, DURATION=${DURATION}s, pools $POOLS, wrk -c$CONNS (plaintext -c$PLAINTEXT_CONNS, pipelined ×$DEPTH); medians; ratios: of the medians, and their range over the rounds)"
report+=$'\n\n'"$pg_note; $(nproc) CPUs, $(uname -r)."
busy_runs=0
total_runs=0
for pool_spec in $POOLS; do
for mode in $MODES; do
    set_mode "$mode"
    pool="$pool_spec"
    [ "$pool" = workers ] && pool="$workers"
    pin_pg "$pg_cpus"
    echo
    echo "# $(mode_title "$mode"); pool $pool"
    table="| row | spargio req/s | spargio-pg req/s | tokio req/s | spargio CPU µs/req | spargio-pg CPU µs/req | tokio CPU µs/req | req/s spargio/tokio | req/s spargio-pg/tokio | CPU/req spargio/tokio | CPU/req spargio-pg/tokio | PostgreSQL CPU µs/req (spargio / spargio-pg / tokio) |
|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    for row in "${rows[@]}"; do
        IFS='|' read -r label path conns depth <<<"$row"
        echo
        echo "## $mode, $label: wrk -t$threads -c$conns -d${DURATION}s $path$([ "$depth" -gt 1 ] && echo " (pipelined ×$depth)")"
        for rt in "${runtimes[@]}"; do : >"$tmp/$rt.runs"; done
        for round in $(seq 1 "$ROUNDS"); do
            for rt in "${runtimes[@]}"; do
                b="$(busy)"
                run_once "$rt" "$mode $label round $round" "$path" "$conns" "$depth"
                b=$((b + $(busy)))
                total_runs=$((total_runs + 1))
                note="$client_note"
                if [ "$b" -gt 0 ]; then
                    busy_runs=$((busy_runs + 1))
                    note+="  (another build was running)"
                fi
                echo "$req_s $p99 $cpu $pg" >>"$tmp/$rt.runs"
                printf "round %d %-10s %9s req/s  p99 %9s  CPU %7s µs/req  PostgreSQL %7s µs/req%s\n" \
                    "$round" "$rt" "$req_s" "$(fmt_us "$p99")" "$cpu" "$pg" "$note"
            done
        done
        declare -A med_req med_cpu med_pg
        for rt in "${runtimes[@]}"; do
            med_req[$rt]="$(awk '{ print $1 }' "$tmp/$rt.runs" | median)"
            med_cpu[$rt]="$(awk '{ print $3 }' "$tmp/$rt.runs" | median)"
            med_pg[$rt]="$(awk '{ print $4 }' "$tmp/$rt.runs" | median)"
            printf "median   %-10s %9.0f req/s  CPU %7.2f µs/req  PostgreSQL %7.2f µs/req\n" \
                "$rt" "${med_req[$rt]}" "${med_cpu[$rt]}" "${med_pg[$rt]}"
        done
        row_md="| $label"
        for rt in "${runtimes[@]}"; do row_md+="$(printf " | %.0f" "${med_req[$rt]}")"; done
        for rt in "${runtimes[@]}"; do row_md+="$(printf " | %.2f" "${med_cpu[$rt]}")"; done
        for rt in spargio spargio-pg; do
            row_md+=" | $(ratio "${med_req[$rt]}" "${med_req[tokio]}")× ($(ratio_range 1 "$rt"))"
        done
        for rt in spargio spargio-pg; do
            row_md+=" | $(ratio "${med_cpu[$rt]}" "${med_cpu[tokio]}")× ($(ratio_range 3 "$rt"))"
        done
        row_md+="$(printf " | %.2f / %.2f / %.2f |" "${med_pg[spargio]}" "${med_pg[spargio-pg]}" "${med_pg[tokio]}")"
        for rt in spargio spargio-pg; do
            echo "$rt/tokio: req/s $(ratio "${med_req[$rt]}" "${med_req[tokio]}")× ($(ratio_range 1 "$rt"))," \
                "CPU per request $(ratio "${med_cpu[$rt]}" "${med_cpu[tokio]}")× ($(ratio_range 3 "$rt"))"
        done
        table+=$'\n'"$row_md"
    done
    report+=$'\n\n'"### $(mode_title "$mode"); pool of $pool ($pool_spec)"$'\n\n'"$table"
done
done
if [ "$busy_runs" -gt 0 ]; then
    report+=$'\n\n'"Another build (rustc, cc, ld or cargo) was running during $busy_runs of $total_runs runs."
fi

write_report db_bench
report_failures

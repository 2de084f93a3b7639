#!/usr/bin/env bash
# HTTP/3 benchmark: one axum Router served by spargio-http's serve_h3 on
# spargio against h3 + h3-quinn on tokio (bench/src/bin/h3_server.rs),
# driven by bench/src/bin/h3_load.rs (quinn + h3 + h3-quinn on tokio,
# independent of both servers).
#
#   scripts/h3_bench.sh                     # ROUNDS=3 DURATION=2
#   ROUNDS=1 MODES=split scripts/h3_bench.sh
#
# Modes (MODES, space-separated; default "shared split"):
# - shared: the server with WORKERS (2) workers, the loader unpinned with
#   two threads: loader and server share the cores, as on a loaded host.
# - split: the server pinned to CPU 0 with ONE worker (taskset -c 0), the
#   loader pinned to CPU 1 with one thread (taskset -c 1): the server's
#   own CPU per request decides its throughput, unless the loader's
#   core is the bottleneck (see "loader busy").
#
# Loads (each for DURATION seconds after h3_load's 1 s warm-up): 1
# connection × 32 requests in flight, and 16 connections × 32, each on
# GET /json (a small JSON object) and GET /bytes/1048576 (1 MiB).
#
# For each mode and load, ROUNDS rounds of spargio then tokio, each run
# against a freshly started server. Per run: req/s and p99 latency of the
# measured window (h3_load), the server's CPU time per request (utime +
# stime from /proc/PID/stat before and after the loader, over every
# request the loader completed, warm-up included: h3_load's
# `all_requests`), how busy the server was over the loader's run (its CPU
# time over the loader's wall time, in cores) and how busy the loader was
# in the window (h3_load's `cpu_busy`, in cores). Per load: the median of
# each column over the rounds, and the spargio/tokio ratios of the medians
# with their range over the rounds (round i against round i).
#
# The summary is printed and written to <target>/h3_bench.md (<target> =
# $CARGO_TARGET_DIR, else target). Exits non-zero when a run failed: a
# server that did not start or died, a loader that failed or counted no
# request, or any request error.
#
# Env: MODES, LOADS (only the loads whose label contains it, e.g.
# 'c16 × m32 /json'), ROUNDS (3), DURATION (seconds per run, 2), WORKERS (2),
# SPARGIO_PORT and TOKIO_PORT (UDP; default 0: a free port each run).
set -euo pipefail
. "$(dirname "$0")/bench_lib.sh"
cd "$(dirname "$0")/.."

ROUNDS="${ROUNDS:-3}"
DURATION="${DURATION:-2}"
WORKERS="${WORKERS:-2}"
MODES="${MODES:-shared split}"
LOADS="${LOADS:-}"
SPARGIO_PORT="${SPARGIO_PORT:-0}"
TOKIO_PORT="${TOKIO_PORT:-0}"
target="${CARGO_TARGET_DIR:-target}"
server_bin="$target/release/h3_server"
load_bin="$target/release/h3_load"
# A load: label|connections|requests in flight per connection|path.
loads=(
    "c1 × m32 /json|1|32|/json"
    "c16 × m32 /json|16|32|/json"
    "c1 × m32 /bytes/1048576|1|32|/bytes/1048576"
    "c16 × m32 /bytes/1048576|16|32|/bytes/1048576"
)

check_split_mode

cargo build --release -p spargio-bench --bin h3_server --bin h3_load

tmp="$(mktemp -d)"
port=""
trap 'stop_server; rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

# set_mode (bench_lib.sh) sets the mode's server pinning and workers, and
# the loader's pinning (client_pin) and threads.

# Starts a server (pinned as the mode says) and waits for its `LISTENING
# <port>` line; sets server_pid and port. A fixed port can stay busy for
# a moment after the previous server exits: bench_lib.sh retries a bind
# failure for a few seconds.
server_ready() {
    port="$(awk '$1 == "LISTENING" { print $2 }' "$tmp/server.out" 2>/dev/null || true)"
    [ -n "$port" ]
}
start_server() {
    local rt="$1"
    launch_server "$rt" 100 "" "$server_bin" "$rt" --workers "$workers" --port "$(port_of "$rt")"
}

# A number field of h3_load's one-line JSON object.
field() { grep -o "\"$1\": *[0-9.eE+-]*" "$2" | head -n 1 | sed 's/^.*: *//'; }

# One loader run against a fresh server. Sets req_s, p99 (µs), cpu
# (server CPU µs per request), server_busy and load_busy (cores).
run_once() {
    local rt="$1" label="$2" conns="$3" streams="$4" path="$5" out="$tmp/load.out"
    local before after t0 t1 status=0 errors requests all
    start_server "$rt"
    before="$(cpu_ticks "$server_pid")"
    t0="$(date +%s.%N)"
    "${client_pin[@]}" "$load_bin" --url "https://127.0.0.1:$port$path" --connections "$conns" \
        --concurrency "$streams" --duration "$DURATION" --threads "$threads" --insecure \
        >"$out" 2>"$tmp/load.err" || status=$?
    t1="$(date +%s.%N)"
    if kill -0 "$server_pid" 2>/dev/null; then
        after="$(cpu_ticks "$server_pid")"
    else
        fail "$label $rt: the server died: $(tail -n 5 "$tmp/server.err")"
        after="$before"
    fi
    stop_server
    requests="$(field requests "$out")"
    all="$(field all_requests "$out")"
    errors="$(field errors "$out")"
    if [ "$status" -ne 0 ] || [ -z "$requests" ]; then
        fail "$label $rt: h3_load exited with $status: $(tail -n 3 "$tmp/load.err")"
    elif [ "$requests" -eq 0 ]; then
        fail "$label $rt: h3_load counted no request: $(tail -n 3 "$tmp/load.err")"
    elif [ "${errors:-0}" -gt 0 ]; then
        fail "$label $rt: $errors request errors: $(tail -n 1 "$tmp/load.err")"
    fi
    req_s="$(awk -v r="$(field rps "$out")" 'BEGIN { printf "%.0f", r }')"
    p99="$(field p99_us "$out")"
    p99="${p99:-nan}"
    load_busy="$(field cpu_busy "$out")"
    load_busy="${load_busy:-nan}"
    cpu="$(awk -v n="${all:-0}" -v d=$((after - before)) -v hz="$clk_tck" 'BEGIN {
        if (n > 0) printf "%.2f", d * 1e6 / hz / n; else print "nan" }')"
    server_busy="$(awk -v d=$((after - before)) -v hz="$clk_tck" -v a="$t0" -v b="$t1" 'BEGIN {
        printf "%.2f", d / hz / (b - a) }')"
}

# fmt_us (bench_lib.sh) prints seconds from 1 s on, and nan as nan.
fmt_us_seconds=1
# Each runs file has 5 columns a round (ratio_range, bench_lib.sh):
# req_s p99 cpu server_busy load_busy.
runs_cols=5

mode_title() {
    case "$1" in
        shared) echo "shared cores: server with $WORKERS workers, loader unpinned with 2 threads" ;;
        split) echo "split: server on CPU 0 with 1 worker, loader on CPU 1 with 1 thread (taskset)" ;;
    esac
}

title="HTTP/3: spargio-http serve_h3 on spargio vs h3 + h3-quinn on tokio (axum Router on both), loader h3_load"
echo "# $title"
echo "# ROUNDS=$ROUNDS DURATION=${DURATION}s (+1 s warm-up) MODES='$MODES'"
echo "# per run: req/s, p99, server CPU µs/req, server cores busy, loader cores busy"
report="## $title (ROUNDS=$ROUNDS, DURATION=${DURATION}s after a 1 s warm-up; medians; ratios: of the medians, and their range over the rounds)"
report+=$'\n\n'"Server CPU µs/req: the server's utime + stime over the loader's whole run, over every request completed (warm-up included). Busy: CPU time over wall time in cores (server: over the loader's run; loader: in the measured window)."
for mode in $MODES; do
    set_mode "$mode"
    echo
    echo "# $(mode_title "$mode")"
    table="| load | spargio req/s | spargio p99 | spargio CPU µs/req | tokio req/s | tokio p99 | tokio CPU µs/req | req/s spargio/tokio | CPU/req spargio/tokio | server busy spargio / tokio | loader busy spargio / tokio |
|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    for load in "${loads[@]}"; do
        IFS='|' read -r label conns streams path <<<"$load"
        case "$label" in *"$LOADS"*) ;; *) continue ;; esac
        echo
        echo "## $mode, $label: h3_load --connections $conns --concurrency $streams --duration $DURATION --threads $threads"
        : >"$tmp/spargio.runs"
        : >"$tmp/tokio.runs"
        for round in $(seq 1 "$ROUNDS"); do
            for rt in spargio tokio; do
                run_once "$rt" "$mode $label round $round" "$conns" "$streams" "$path"
                echo "$req_s $p99 $cpu $server_busy $load_busy" >>"$tmp/$rt.runs"
                printf "round %d %-8s %8s req/s  p99 %9s  CPU %7s µs/req  server busy %5s  loader busy %5s\n" \
                    "$round" "$rt" "$req_s" "$(fmt_us "$p99")" "$cpu" "$server_busy" "$load_busy"
            done
        done
        row="| $label"
        for rt in spargio tokio; do
            declare "${rt}_req=$(awk '{ print $1 }' "$tmp/$rt.runs" | median)"
            declare "${rt}_p99=$(awk '{ print $2 }' "$tmp/$rt.runs" | median)"
            declare "${rt}_cpu=$(awk '{ print $3 }' "$tmp/$rt.runs" | median)"
            declare "${rt}_sbusy=$(awk '{ print $4 }' "$tmp/$rt.runs" | median)"
            declare "${rt}_lbusy=$(awk '{ print $5 }' "$tmp/$rt.runs" | median)"
        done
        req_range="$(ratio_range 1)"
        cpu_range="$(ratio_range 3)"
        for rt in spargio tokio; do
            r="${rt}_req" p="${rt}_p99" c="${rt}_cpu" s="${rt}_sbusy" l="${rt}_lbusy"
            printf "median   %-8s %8.0f req/s  p99 %9s  CPU %7.2f µs/req  server busy %5.2f  loader busy %5.2f\n" \
                "$rt" "${!r}" "$(fmt_us "${!p}")" "${!c}" "${!s}" "${!l}"
            row+="$(printf " | %.0f | %s | %.2f" "${!r}" "$(fmt_us "${!p}")" "${!c}")"
        done
        echo "spargio/tokio: req/s $(ratio "$spargio_req" "$tokio_req")× ($req_range)," \
            "CPU per request $(ratio "$spargio_cpu" "$tokio_cpu")× ($cpu_range)"
        row+=" | $(ratio "$spargio_req" "$tokio_req")× ($req_range) | $(ratio "$spargio_cpu" "$tokio_cpu")× ($cpu_range)"
        row+="$(printf " | %.2f / %.2f | %.2f / %.2f |" "$spargio_sbusy" "$tokio_sbusy" "$spargio_lbusy" "$tokio_lbusy")"
        table+=$'\n'"$row"
    done
    report+=$'\n\n'"### $(mode_title "$mode")"$'\n\n'"$table"
done

write_report h3_bench
report_failures

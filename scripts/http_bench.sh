#!/usr/bin/env bash
# Real-client HTTP benchmark: a server on spargio against the same server
# on tokio, both with the same number of workers, driven by wrk (and, for
# the axum server, h2load) on the same machine.
#
#   scripts/http_bench.sh                     # hyper; ROUNDS=3 DURATION=4
#   ROUNDS=1 DURATION=3 scripts/http_bench.sh # a quick pass
#   SCHEME=https scripts/http_bench.sh        # = scripts/https_bench.sh
#   SERVER=axum_server scripts/http_bench.sh  # = scripts/axum_bench.sh
#
# Servers (SERVER):
# - http_server (bench/src/bin/http_server.rs): hyper 1.x HTTP/1.1 on
#   spargio vs on tokio. With SCHEME=https it is https_server (hyper over
#   spargio-tls against hyper over tokio-rustls: rustls with ring, one
#   ServerConfig, TLS 1.3, P-256); the keep-alive load is c64 and churn is
#   a full TLS handshake per request.
# - axum_server (bench/src/bin/axum_server.rs): one axum Router served by
#   spargio_http::serve vs axum::serve on tokio; `/` and a 1 KiB `/json`
#   over HTTP/1.1 (wrk), and HTTP/2 by prior knowledge (h2load -c16 -m32).
#
# Modes (MODES, space-separated):
# - shared: the server with WORKERS workers, the client unpinned with two
#   threads: client and server share the cores, as on a loaded host.
# - split: the server pinned to CPU 0 with ONE worker (taskset -c 0), the
#   client pinned to CPU 1 with one thread (taskset -c 1): the server's
#   own CPU per request decides its throughput.
# Default: shared; for axum_server, shared and split.
#
# For each mode and load, ROUNDS rounds of spargio then tokio, each run
# against a freshly started server. Per run: req/s, p99 latency (wrk
# --latency; h2load's per-request log), the server's CPU time per request
# (utime + stime from /proc/PID/stat before and after the client, over the
# request count) and its VmRSS at the end of the run. Per load: the median
# of each column over the rounds, and the spargio/tokio ratios of the
# medians with their range over the rounds (round i against round i).
#
# Memory (MEMORY): `rounds` (http_server's default): per runtime, a fresh
# server, 6 rounds of `wrk -t2 -c512 -d1s` (wrk closes its connections with
# requests in flight) and VmRSS after each round. `idle` (axum_server's
# default): per runtime, protocol (HTTP/1.1, HTTP/2) and round, a fresh
# server answers one curl request, then scripts/idle_conns.py opens
# IDLE_CONNS (5000) keep-alive connections, makes one request on each and
# keeps them open; the server's VmRSS before and after gives KiB per idle
# connection (median over the rounds).
#
# The summary is printed and written to <target>/<name>_bench.md (<name>:
# http, https or axum; <target> = $CARGO_TARGET_DIR, else target). Exits
# non-zero when a run failed: a server that did not start, stopped
# answering or died, client connect/timeout errors, non-2xx responses, or
# more read/write errors than the end-of-run resets of its connections
# explain.
#
# Env: SCHEME (http | https), SERVER (http_server | axum_server), MODES,
# MEMORY (rounds | idle), ROUNDS (3), DURATION (seconds per run, 4),
# WORKERS (2), IDLE_CONNS (5000), SPARGIO_PORT and TOKIO_PORT (http
# 18080/18081, https 18443/18444, axum 18082/18083).
set -euo pipefail
. "$(dirname "$0")/bench_lib.sh"
cd "$(dirname "$0")/.."

SCHEME="${SCHEME:-http}"
SERVER="${SERVER:-http_server}"
ROUNDS="${ROUNDS:-3}"
DURATION="${DURATION:-4}"
WORKERS="${WORKERS:-2}"
IDLE_CONNS="${IDLE_CONNS:-5000}"
MEM_ROUNDS=6
server="$SERVER"
target="${CARGO_TARGET_DIR:-target}"
# A load: label|client|connections|option|path. Option: keep or close for
# wrk (`Connection: close` on every request), streams per connection for
# h2load.
case "$SCHEME/$SERVER" in
    http/http_server)
        name=http
        SPARGIO_PORT="${SPARGIO_PORT:-18080}"
        TOKIO_PORT="${TOKIO_PORT:-18081}"
        curl_flags=(-s)
        title="hyper on spargio vs hyper on tokio"
        loads=(
            "keep-alive c16|wrk|16|keep|/"
            "keep-alive c256|wrk|256|keep|/"
            "churn c32 (Connection: close)|wrk|32|close|/"
        )
        default_modes=shared
        default_memory=rounds
        ;;
    https/http_server)
        name=https
        server=https_server
        SPARGIO_PORT="${SPARGIO_PORT:-18443}"
        TOKIO_PORT="${TOKIO_PORT:-18444}"
        # The server's certificate is self-signed, made at its start.
        curl_flags=(-sk)
        title="hyper over spargio-tls vs hyper over tokio-rustls"
        # keep-alive c64: record layer, hyper, scheduling; churn: a full
        # TLS 1.3 handshake per request.
        loads=(
            "keep-alive c64|wrk|64|keep|/"
            "churn c32 (Connection: close)|wrk|32|close|/"
        )
        default_modes=shared
        default_memory=rounds
        ;;
    http/axum_server)
        name=axum
        SPARGIO_PORT="${SPARGIO_PORT:-18082}"
        TOKIO_PORT="${TOKIO_PORT:-18083}"
        curl_flags=(-s)
        title="axum: spargio-http vs axum::serve on tokio"
        loads=(
            "keep-alive c16 /|wrk|16|keep|/"
            "keep-alive c16 /json|wrk|16|keep|/json"
            "keep-alive c256 /|wrk|256|keep|/"
            "keep-alive c256 /json|wrk|256|keep|/json"
            "churn c32 / (Connection: close)|wrk|32|close|/"
            "HTTP/2 c16 × m32 /|h2load|16|32|/"
        )
        default_modes="shared split"
        default_memory=idle
        ;;
    *) echo "SCHEME must be http or https; SERVER http_server or (http only) axum_server" >&2; exit 2 ;;
esac
MODES="${MODES:-$default_modes}"
MEMORY="${MEMORY:-$default_memory}"
bin="$target/release/$server"

need_wrk
if [ "$name" = axum ] && ! command -v h2load >/dev/null; then
    apt_install nghttp2-client
fi
command -v curl >/dev/null || { echo "curl is required" >&2; exit 1; }
check_split_mode
# The idle-memory row keeps IDLE_CONNS connections open: a file descriptor
# each in the client and in the server.
if [ "$MEMORY" = idle ]; then
    ulimit -n "$(ulimit -Hn)"
    if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt $((IDLE_CONNS + 100)) ]; then
        echo "ulimit -n is $(ulimit -n), too low for IDLE_CONNS=$IDLE_CONNS" >&2
        exit 1
    fi
fi

cargo build --release -p spargio-bench --bin "$server"

tmp="$(mktemp -d)"
trap 'stop_client; stop_server; rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

# check_server's request (bench_lib.sh).
check_scheme="$SCHEME"
set_mode shared

# Starts a server (pinned as the mode says) and waits for its `ready
# <pid>` line (bench_lib.sh retries a port still busy).
start_server() {
    local rt="$1"
    launch_server "$rt" 100 " on port $(port_of "$rt")" "$bin" "$rt" "$(port_of "$rt")" "$workers"
}

# Runs wrk; sets requests, req_s and p99 (µs).
run_wrk() {
    local url="$1" conns="$2" option="$3" label="$4" out="$tmp/client.out"
    local args=("-t$threads" "-c$conns" "-d${DURATION}s" --latency)
    [ "$option" = close ] && args+=(-H "Connection: close")
    "${client_pin[@]}" wrk "${args[@]}" "$url" >"$out" 2>&1 || true
    check_wrk "$label" "$conns" "$out"
    wrk_parse "$out"
}

# Runs h2load (HTTP/2 by prior knowledge on http://); sets requests, req_s
# and p99 (µs, from its per-request log). Streams cut off by the end of
# the run are neither done nor failed; any failed, errored, timed-out or
# non-2xx request is a failure.
run_h2load() {
    local url="$1" conns="$2" streams="$3" label="$4" out="$tmp/client.out" log="$tmp/h2load.log"
    local failed errored timeout other
    rm -f "$log"
    "${client_pin[@]}" h2load "-t$threads" "-c$conns" "-m$streams" -D "$DURATION" \
        --log-file="$log" "$url" >"$out" 2>&1 || true
    requests="$(awk '/^requests:/ { print $8 }' "$out")"
    read -r failed errored timeout < <(awk '/^requests:/ { print $10, $12, $14 }' "$out") || true
    # A response cut off by the end of the run can count in the status
    # codes without counting as done: only non-2xx codes are failures.
    other="$(awk '/^status codes:/ { print $5 + $7 + $9 }' "$out")"
    client_note=""
    if [ -z "$requests" ] || [ "${requests:-0}" -eq 0 ]; then
        fail "$label: h2load reported no requests: $(tail -n 3 "$out")"
    elif [ "${failed:-0}" -gt 0 ] || [ "${errored:-0}" -gt 0 ] || [ "${timeout:-0}" -gt 0 ] ||
        [ "${other:-0}" -gt 0 ]; then
        fail "$label: h2load: $requests succeeded, ${other:-0} non-2xx, failed ${failed:-0}," \
            "errored ${errored:-0}, timeout ${timeout:-0}"
    fi
    req_s="$(awk '/^finished in/ { print $4 }' "$out")"
    p99="$(awk -F'\t' '$2 == 200 { print $3 }' "$log" 2>/dev/null | sort -n | awk '{ v[NR] = $1 }
        END { if (NR == 0) print "nan"; else { i = int(NR * 0.99); if (i < 1) i = 1; print v[i] } }')"
}

# One client run against a fresh server. Sets req_s, p99 (µs), cpu
# (server CPU µs per request) and rss (server VmRSS at the end, MiB).
run_once() {
    local rt="$1" label="$2" client="$3" conns="$4" option="$5" path="$6" url before after
    url="$SCHEME://127.0.0.1:$(port_of "$rt")$path"
    start_server "$rt"
    before="$(cpu_ticks "$server_pid")"
    "run_$client" "$url" "$conns" "$option" "$label $rt"
    after="$(cpu_ticks "$server_pid" 2>/dev/null || echo "$before")"
    rss="$(rss_mib "$server_pid" 2>/dev/null || echo nan)"
    check_server "$rt" "$label" || true
    stop_server
    req_s="$(awk -v r="${req_s:-0}" 'BEGIN { printf "%.0f", r }')"
    cpu="$(awk -v n="${requests:-0}" -v d=$((after - before)) -v hz="$clk_tck" 'BEGIN {
        if (n > 0) printf "%.2f", d * 1e6 / hz / n; else print "nan" }')"
}

mode_title() {
    case "$1" in
        shared) echo "shared cores: $WORKERS workers each, client unpinned with 2 threads" ;;
        split) echo "split: server on CPU 0 with 1 worker, client on CPU 1 with 1 thread (taskset)" ;;
    esac
}

client_cmd() {
    local client="$1" conns="$2" option="$3"
    if [ "$client" = wrk ]; then
        echo "wrk -t$threads -c$conns -d${DURATION}s$([ "$option" = close ] && echo " -H 'Connection: close'")"
    else
        echo "h2load -t$threads -c$conns -m$option -D $DURATION"
    fi
}

echo "# $title"
echo "# ROUNDS=$ROUNDS DURATION=${DURATION}s MODES='$MODES'; per run: req/s, p99, server CPU µs/req, RSS"
report="## $title (ROUNDS=$ROUNDS, DURATION=${DURATION}s, medians; ratios: of the medians, and their range over the rounds)"
for mode in $MODES; do
    set_mode "$mode"
    echo
    echo "# $(mode_title "$mode")"
    table="| load | spargio req/s | spargio p99 | spargio CPU µs/req | spargio RSS MiB | tokio req/s | tokio p99 | tokio CPU µs/req | tokio RSS MiB | req/s spargio/tokio | CPU/req spargio/tokio |
|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    for load in "${loads[@]}"; do
        IFS='|' read -r label client conns option path <<<"$load"
        echo
        echo "## $mode, $label: $(client_cmd "$client" "$conns" "$option") $path"
        : >"$tmp/spargio.runs"
        : >"$tmp/tokio.runs"
        for round in $(seq 1 "$ROUNDS"); do
            for rt in spargio tokio; do
                run_once "$rt" "$mode $label round $round" "$client" "$conns" "$option" "$path"
                echo "$req_s $p99 $cpu $rss" >>"$tmp/$rt.runs"
                printf "round %d %-8s %9s req/s  p99 %9s  CPU %6s µs/req  RSS %5s MiB%s\n" \
                    "$round" "$rt" "$req_s" "$(fmt_us "$p99")" "$cpu" "$rss" "$client_note"
            done
        done
        row="| $label"
        for rt in spargio tokio; do
            declare "${rt}_req=$(awk '{ print $1 }' "$tmp/$rt.runs" | median)"
            declare "${rt}_p99=$(awk '{ print $2 }' "$tmp/$rt.runs" | median)"
            declare "${rt}_cpu=$(awk '{ print $3 }' "$tmp/$rt.runs" | median)"
            declare "${rt}_rss=$(awk '{ print $4 }' "$tmp/$rt.runs" | median)"
        done
        req_range="$(ratio_range 1)"
        cpu_range="$(ratio_range 3)"
        for rt in spargio tokio; do
            r="${rt}_req" p="${rt}_p99" c="${rt}_cpu" m="${rt}_rss"
            printf "median   %-8s %9.0f req/s  p99 %9s  CPU %6.2f µs/req  RSS %5.1f MiB\n" \
                "$rt" "${!r}" "$(fmt_us "${!p}")" "${!c}" "${!m}"
            row+="$(printf " | %.0f | %s | %.2f | %.1f" "${!r}" "$(fmt_us "${!p}")" "${!c}" "${!m}")"
        done
        echo "spargio/tokio: req/s $(ratio "$spargio_req" "$tokio_req")× ($req_range)," \
            "CPU per request $(ratio "$spargio_cpu" "$tokio_cpu")× ($cpu_range)"
        row+=" | $(ratio "$spargio_req" "$tokio_req")× ($req_range) | $(ratio "$spargio_cpu" "$tokio_cpu")× ($cpu_range) |"
        table+=$'\n'"$row"
    done
    report+=$'\n\n'"### $(mode_title "$mode")"$'\n\n'"$table"
done

# ===== memory =====

memory_rounds() {
    echo
    echo "## memory: fresh server, $MEM_ROUNDS × wrk -t2 -c512 -d1s, VmRSS after each round"
    mem="| runtime | VmRSS at start, then after rounds 1-$MEM_ROUNDS (MiB) | growth round 3 → $MEM_ROUNDS |
|---|---|---:|"
    for rt in spargio tokio; do
        start_server "$rt"
        series="$(rss_mib "$server_pid")"
        r3="" r6=""
        for round in $(seq 1 "$MEM_ROUNDS"); do
            wrk -t2 -c512 -d1s "$SCHEME://127.0.0.1:$(port_of "$rt")/" >"$tmp/client.out" 2>&1 || true
            sleep 0.5
            check_wrk "memory round $round $rt" 512 "$tmp/client.out"
            [ -z "$client_note" ] || echo "memory round $round $rt:$client_note"
            check_server "$rt" "memory round $round" || break
            rss="$(rss_mib "$server_pid")"
            series+=" $rss"
            [ "$round" -eq 3 ] && r3="$rss"
            [ "$round" -eq "$MEM_ROUNDS" ] && r6="$rss"
        done
        stop_server
        growth="$(awk -v a="$r3" -v b="$r6" 'BEGIN {
            if (a == "" || b == "") print "n/a"; else printf "%+.1f MiB", b - a }')"
        printf "%-8s %s  (round 3 → %d: %s)\n" "$rt" "$series" "$MEM_ROUNDS" "$growth"
        mem+=$'\n'"| $rt | $series | $growth |"
    done
    report+=$'\n\n'"$mem"
}

# One idle-memory run: a fresh server answers one request (so what is set
# up on first use is not counted), then IDLE_CONNS connections each make
# one request and stay open. Sets before and after (VmRSS, KiB) and kib
# (per connection).
idle_once() {
    local rt="$1" proto="$2" port
    port="$(port_of "$rt")"
    start_server "$rt"
    check_server "$rt" "start" || true
    sleep 0.3
    before="$(rss_kib "$server_pid")"
    python3 scripts/idle_conns.py "$port" "$IDLE_CONNS" "$proto" >"$tmp/idle.out" 2>"$tmp/idle.err" &
    client_pid=$!
    while ! grep -q "^open " "$tmp/idle.out"; do
        if ! kill -0 "$client_pid" 2>/dev/null; then
            fail "idle $proto $rt: $(cat "$tmp/idle.err")"
            break
        fi
        sleep 0.1
    done
    sleep 0.5
    after="$(rss_kib "$server_pid")"
    check_server "$rt" "idle $proto" || true
    stop_client
    stop_server
    kib="$(awk -v a="$before" -v b="$after" -v n="$IDLE_CONNS" 'BEGIN { printf "%.1f", (b - a) / n }')"
}

memory_idle() {
    set_mode shared
    echo
    echo "## memory: $IDLE_CONNS idle keep-alive connections, each after one GET /; server VmRSS before and after"
    mem="| protocol | spargio VmRSS before → after (MiB) | spargio KiB/conn | tokio VmRSS before → after (MiB) | tokio KiB/conn | KiB/conn spargio/tokio |
|---|---:|---:|---:|---:|---:|"
    for proto in h1 h2; do
        row="| $([ "$proto" = h1 ] && echo HTTP/1.1 || echo "HTTP/2 (h2c)")"
        for rt in spargio tokio; do
            : >"$tmp/$rt.idle"
            for round in $(seq 1 "$ROUNDS"); do
                idle_once "$rt" "$proto"
                echo "$kib $before $after" >>"$tmp/$rt.idle"
                printf "round %d %-3s %-8s VmRSS %6.1f → %6.1f MiB  %5s KiB/conn\n" "$round" "$proto" "$rt" \
                    "$(awk -v k="$before" 'BEGIN { print k / 1024 }')" \
                    "$(awk -v k="$after" 'BEGIN { print k / 1024 }')" "$kib"
            done
            declare "${rt}_kib=$(awk '{ print $1 }' "$tmp/$rt.idle" | median)"
            declare "${rt}_before=$(awk '{ print $2 / 1024 }' "$tmp/$rt.idle" | median)"
            declare "${rt}_after=$(awk '{ print $3 / 1024 }' "$tmp/$rt.idle" | median)"
            b="${rt}_before" a="${rt}_after" k="${rt}_kib"
            row+="$(printf " | %.1f → %.1f | %.1f" "${!b}" "${!a}" "${!k}")"
        done
        row+=" | $(ratio "$spargio_kib" "$tokio_kib")× |"
        echo "median $proto: spargio $spargio_kib KiB/conn, tokio $tokio_kib KiB/conn"
        mem+=$'\n'"$row"
    done
    report+=$'\n\n'"### idle memory ($IDLE_CONNS keep-alive connections, $WORKERS workers, medians over $ROUNDS rounds)"$'\n\n'"$mem"
}

case "$MEMORY" in
    rounds) memory_rounds ;;
    idle) memory_idle ;;
    none) ;;
    *) echo "MEMORY must be rounds, idle or none" >&2; exit 2 ;;
esac

write_report "${name}_bench"
report_failures

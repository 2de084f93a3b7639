#!/usr/bin/env bash
# Real-client HTTP benchmark: hyper 1.x on spargio against hyper on tokio,
# both with the same number of workers (2), driven by wrk on the same
# machine (shared cores: the client's CPU competes with the server's, as it
# does on a loaded host). Server: bench/src/bin/http_server.rs.
#
#   scripts/http_bench.sh                     # ROUNDS=3 DURATION=4
#   ROUNDS=1 DURATION=3 scripts/http_bench.sh # a quick pass
#   SCHEME=https scripts/http_bench.sh        # = scripts/https_bench.sh
#
# With SCHEME=https the servers are bench/src/bin/https_server.rs (hyper
# over spargio-tls against hyper over tokio-rustls: rustls with ring, one
# ServerConfig, TLS 1.3, P-256), the keep-alive load is c64 and churn is a
# full TLS handshake per request.
#
# For each load, ROUNDS rounds of spargio then tokio, each run against a
# freshly started server. Per run: req/s, p99 latency (wrk --latency) and
# the server's CPU time per request (utime + stime from /proc/PID/stat
# before and after wrk, over the request count). Per load: the median of
# each column over the rounds and the spargio/tokio ratios. Then memory:
# per runtime, a fresh server, 6 rounds of `wrk -t2 -c512 -d1s` (wrk closes
# its connections with requests in flight) and VmRSS after each round.
#
# The summary table is printed and written to <target>/${SCHEME}_bench.md
# (<target> = $CARGO_TARGET_DIR, else target). Exits non-zero when a run
# failed: a server that did not start, stopped answering or died, wrk
# connect/timeout errors, non-2xx responses, or more read/write errors
# than the end-of-run resets of its connections explain.
#
# Env: SCHEME (http | https), ROUNDS (3), DURATION (seconds per run, 4),
# WORKERS (2), SPARGIO_PORT (18080; https 18443), TOKIO_PORT (18081; https
# 18444).
set -euo pipefail
cd "$(dirname "$0")/.."

SCHEME="${SCHEME:-http}"
ROUNDS="${ROUNDS:-3}"
DURATION="${DURATION:-4}"
WORKERS="${WORKERS:-2}"
MEM_ROUNDS=6
target="${CARGO_TARGET_DIR:-target}"
case "$SCHEME" in
    http)
        SPARGIO_PORT="${SPARGIO_PORT:-18080}"
        TOKIO_PORT="${TOKIO_PORT:-18081}"
        server=http_server
        curl_flags=(-s)
        title="hyper on spargio vs hyper on tokio"
        loads=(
            "keep-alive c16|16|keep"
            "keep-alive c256|256|keep"
            "churn c32 (Connection: close)|32|close"
        )
        ;;
    https)
        SPARGIO_PORT="${SPARGIO_PORT:-18443}"
        TOKIO_PORT="${TOKIO_PORT:-18444}"
        server=https_server
        # The server's certificate is self-signed, made at its start.
        curl_flags=(-sk)
        title="hyper over spargio-tls vs hyper over tokio-rustls"
        # keep-alive c64: record layer, hyper, scheduling; churn: a full
        # TLS 1.3 handshake per request.
        loads=(
            "keep-alive c64|64|keep"
            "churn c32 (Connection: close)|32|close"
        )
        ;;
    *) echo "SCHEME must be http or https" >&2; exit 2 ;;
esac
bin="$target/release/$server"

if ! command -v wrk >/dev/null; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get install -y wrk
fi
command -v curl >/dev/null || { echo "curl is required" >&2; exit 1; }

cargo build --release -p spargio-bench --bin "$server"

tmp="$(mktemp -d)"
server_pid=""
stop_server() {
    if [ -n "$server_pid" ]; then
        kill "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
        server_pid=""
    fi
}
trap 'stop_server; rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

failures=()
fail() {
    echo "FAIL: $*" >&2
    failures+=("$*")
}

port_of() { if [ "$1" = spargio ]; then echo "$SPARGIO_PORT"; else echo "$TOKIO_PORT"; fi; }

# Starts a server and waits for its `ready <pid>` line. A port can stay
# busy for a moment after the previous server exits (io_uring tears a ring
# down asynchronously, and its pending accept holds the listener), so a
# bind failure is retried for a few seconds.
start_server() {
    local rt="$1" port
    port="$(port_of "$rt")"
    for _ in $(seq 1 50); do
        "$bin" "$rt" "$port" "$WORKERS" >"$tmp/server.out" 2>"$tmp/server.err" &
        server_pid=$!
        for _ in $(seq 1 100); do
            grep -q "^ready $server_pid\$" "$tmp/server.out" && return 0
            kill -0 "$server_pid" 2>/dev/null || break
            sleep 0.05
        done
        wait "$server_pid" 2>/dev/null || true
        server_pid=""
        grep -q "Address already in use" "$tmp/server.err" || break
        sleep 0.1
    done
    echo "$rt server did not start on port $port: $(cat "$tmp/server.err")" >&2
    exit 1
}

# utime + stime (fields 14 and 15 of /proc/PID/stat) in clock ticks. The
# fields are counted after the `(comm)` field, which may hold spaces.
cpu_ticks() { sed 's/^.*) //' "/proc/$1/stat" | awk '{ print $12 + $13 }'; }
clk_tck="$(getconf CLK_TCK)"

rss_mib() { awk '/^VmRSS:/ { printf "%.1f", $2 / 1024 }' "/proc/$1/status"; }

# Checks that the server is alive and answers; records a failure if not.
check_server() {
    local rt="$1" what="$2" port body
    port="$(port_of "$rt")"
    if ! kill -0 "$server_pid" 2>/dev/null; then
        fail "$rt server died during $what: $(tail -n 5 "$tmp/server.err")"
        return 1
    fi
    body="$(curl "${curl_flags[@]}" -m 5 "$SCHEME://127.0.0.1:$port/" || true)"
    if [ "$body" != "Hello, world!" ]; then
        fail "$rt server stopped answering after $what (curl got '$body')"
        return 1
    fi
}

# Latency as wrk prints it (850.00us, 1.23ms, 2.00s) -> µs.
to_us() {
    awk -v v="$1" 'BEGIN {
        n = v + 0
        if (v ~ /us$/) print n; else if (v ~ /ms$/) print n * 1000;
        else if (v ~ /s$/) print n * 1000000; else print "nan"
    }'
}

# Checks wrk's output for errors beyond the end-of-run resets (at most one
# read or write error per connection). Sets wrk_note to the read/write
# error counts when there were any.
check_wrk() {
    local label="$1" conns="$2" out="$3" connect read write timeout non2xx
    read -r connect read write timeout < <(awk '/Socket errors:/ {
        gsub(",", ""); print $4, $6, $8, $10 }' "$out") || true
    non2xx="$(awk '/Non-2xx or 3xx responses:/ { print $NF }' "$out")"
    wrk_note=""
    if [ $((${read:-0} + ${write:-0})) -gt 0 ]; then
        wrk_note="  (wrk socket errors: read ${read:-0}, write ${write:-0})"
    fi
    if [ "${connect:-0}" -gt 0 ] || [ "${timeout:-0}" -gt 0 ] || [ -n "$non2xx" ] ||
        [ $((${read:-0} + ${write:-0})) -gt "$conns" ]; then
        fail "$label: wrk errors: connect ${connect:-0}, read ${read:-0}," \
            "write ${write:-0}, timeout ${timeout:-0}, non-2xx ${non2xx:-0}"
    fi
    if ! grep -q "requests in" "$out"; then
        fail "$label: wrk reported no requests"
    fi
}

# One wrk run against a fresh server. Sets req_s, p99 (µs) and cpu
# (server CPU µs per request).
run_once() {
    local rt="$1" label="$2" conns="$3" close="$4" port out before after requests
    port="$(port_of "$rt")"
    out="$tmp/wrk.out"
    start_server "$rt"
    local args=(-t2 "-c$conns" "-d${DURATION}s" --latency)
    [ "$close" = close ] && args+=(-H "Connection: close")
    before="$(cpu_ticks "$server_pid")"
    wrk "${args[@]}" "$SCHEME://127.0.0.1:$port/" >"$out" 2>&1 || true
    after="$(cpu_ticks "$server_pid" 2>/dev/null || echo "$before")"
    check_wrk "$label $rt" "$conns" "$out"
    check_server "$rt" "$label" || true
    stop_server
    requests="$(awk '/requests in/ { print $1 }' "$out")"
    req_s="$(awk '/^Requests\/sec:/ { print $2 }' "$out")"
    p99="$(to_us "$(awk '$1 == "99%" { print $2 }' "$out")")"
    req_s="$(awk -v r="${req_s:-0}" 'BEGIN { printf "%.0f", r }')"
    cpu="$(awk -v n="${requests:-0}" -v d=$((after - before)) -v hz="$clk_tck" 'BEGIN {
        if (n > 0) printf "%.2f", d * 1e6 / hz / n; else print "nan" }')"
}

median() { sort -g | awk '{ v[NR] = $1 } END {
    if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2];
    else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

fmt_us() { awk -v v="$1" 'BEGIN { if (v >= 1000) printf "%.2f ms", v / 1000; else printf "%.0f µs", v }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "nan" }'; }

echo "# $title, $WORKERS workers each, wrk -t2 on the same host"
echo "# ROUNDS=$ROUNDS DURATION=${DURATION}s; per run: req/s, p99, server CPU µs/req"
table="| load | spargio req/s | spargio p99 | spargio CPU µs/req | tokio req/s | tokio p99 | tokio CPU µs/req | req/s spargio/tokio | CPU/req spargio/tokio |
|---|---:|---:|---:|---:|---:|---:|---:|---:|"
for load in "${loads[@]}"; do
    IFS='|' read -r label conns close <<<"$load"
    echo
    echo "## $label: wrk -t2 -c$conns -d${DURATION}s$([ "$close" = close ] && echo " -H 'Connection: close'")"
    : >"$tmp/spargio.runs"
    : >"$tmp/tokio.runs"
    for round in $(seq 1 "$ROUNDS"); do
        for rt in spargio tokio; do
            run_once "$rt" "$label round $round" "$conns" "$close"
            echo "$req_s $p99 $cpu" >>"$tmp/$rt.runs"
            printf "round %d %-8s %9s req/s  p99 %9s  CPU %6s µs/req%s\n" \
                "$round" "$rt" "$req_s" "$(fmt_us "$p99")" "$cpu" "$wrk_note"
        done
    done
    row="| $label"
    for rt in spargio tokio; do
        declare "${rt}_req=$(awk '{ print $1 }' "$tmp/$rt.runs" | median)"
        declare "${rt}_p99=$(awk '{ print $2 }' "$tmp/$rt.runs" | median)"
        declare "${rt}_cpu=$(awk '{ print $3 }' "$tmp/$rt.runs" | median)"
    done
    printf "median   spargio %9.0f req/s  p99 %9s  CPU %6.2f µs/req\n" \
        "$spargio_req" "$(fmt_us "$spargio_p99")" "$spargio_cpu"
    printf "median   tokio   %9.0f req/s  p99 %9s  CPU %6.2f µs/req\n" \
        "$tokio_req" "$(fmt_us "$tokio_p99")" "$tokio_cpu"
    echo "spargio/tokio: req/s $(ratio "$spargio_req" "$tokio_req")×," \
        "CPU per request $(ratio "$spargio_cpu" "$tokio_cpu")×"
    for rt in spargio tokio; do
        r="${rt}_req" p="${rt}_p99" c="${rt}_cpu"
        row+="$(printf " | %.0f | %s | %.2f" "${!r}" "$(fmt_us "${!p}")" "${!c}")"
    done
    row+=" | $(ratio "$spargio_req" "$tokio_req")× | $(ratio "$spargio_cpu" "$tokio_cpu")× |"
    table+=$'\n'"$row"
done

echo
echo "## memory: fresh server, $MEM_ROUNDS × wrk -t2 -c512 -d1s, VmRSS after each round"
mem="| runtime | VmRSS at start, then after rounds 1-$MEM_ROUNDS (MiB) | growth round 3 → $MEM_ROUNDS |
|---|---|---:|"
for rt in spargio tokio; do
    start_server "$rt"
    series="$(rss_mib "$server_pid")"
    r3="" r6=""
    for round in $(seq 1 "$MEM_ROUNDS"); do
        wrk -t2 -c512 -d1s "$SCHEME://127.0.0.1:$(port_of "$rt")/" >"$tmp/wrk.out" 2>&1 || true
        sleep 0.5
        check_wrk "memory round $round $rt" 512 "$tmp/wrk.out"
        [ -z "$wrk_note" ] || echo "memory round $round $rt:$wrk_note"
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

report="## $title ($WORKERS workers, wrk -t2 on the same host; ROUNDS=$ROUNDS, DURATION=${DURATION}s, medians)

$table

$mem"
echo
echo "$report"
mkdir -p "$target"
echo "$report" >"$target/${SCHEME}_bench.md"
echo
echo "written to $target/${SCHEME}_bench.md"

if [ "${#failures[@]}" -gt 0 ]; then
    echo
    echo "${#failures[@]} failure(s):" >&2
    printf '  %s\n' "${failures[@]}" >&2
    exit 1
fi

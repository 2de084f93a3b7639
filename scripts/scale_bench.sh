#!/usr/bin/env bash
# Scale benchmark (issue 42): how a server's throughput, CPU, memory and
# tail latency hold up as the connection count grows, spargio beside its
# tokio twin, driven by `wrk -t2` on the same machine.
#
#   scripts/scale_bench.sh          # ROUNDS=3 DURATION=6, both servers, both modes
#   SERVERS=http_server MODES=shared CONNS="256 1000" CHURN=32 ROUNDS=1 DURATION=1 \
#       scripts/scale_bench.sh      # a quick pass
#
# Servers (SERVERS, space-separated; default both):
# - http_server (bench/src/bin/http_server.rs): hyper 1.x over spargio's
#   io::Compat (one task per connection pinned on its session shard, as
#   the book shows) vs hyper on tokio.
# - axum_server (bench/src/bin/axum_server.rs): one axum Router served by
#   spargio_http::serve vs axum::serve on tokio.
# Both answer GET / with `Hello, world!`.
#
# Loads: keep-alive at each of CONNS connections (default 256 1000 4000
# 8000), and churn (`Connection: close` on every request: a connection
# per request) at each of CHURN connections (default 32 512); every load
# is `wrk -t2 -cN -dDURATION --latency --timeout WRK_TIMEOUT` on GET /.
# A connection count below wrk's 2 threads is refused.
#
# Modes (MODES, space-separated; default "shared split"):
# - shared: the server with WORKERS workers, wrk unpinned: client and
#   server share the cores, as on a loaded host.
# - split: the server pinned to CPU 0 with ONE worker (taskset -c 0), wrk
#   (still two threads) pinned to CPU 1 (taskset -c 1).
#
# For each server, mode and load, ROUNDS rounds of spargio then tokio
# (alternating: spargio, tokio, spargio, tokio, ...), each run against a
# freshly started server that first answers one curl request (so what it
# sets up on first use is not counted). Per run:
# - req/s (wrk);
# - server CPU µs per request: utime + stime from /proc/PID/stat before
#   and after wrk, over wrk's request count (for churn: per connection);
# - RSS KiB per connection (keep-alive only): (the server's VmRSS in the
#   last sample taken while wrk still ran, sampled every 0.25 s − its
#   VmRSS idle after start) / connections;
# - p99 latency (wrk --latency; WRK_TIMEOUT, 10 s, is wrk's histogram
#   limit, so that multi-second tails are measured rather than dropped);
# - wrk's connect errors (a full accept backlog or a short file limit):
#   counted and reported per run and in the table, not failures in
#   themselves; with any, fewer than N connections took part.
# Per load: the median of each column over the rounds, and the
# spargio/tokio ratios of the medians with their range over the rounds
# (round i against round i).
#
# File descriptors: wrk and the server each hold a descriptor per
# connection; before starting them the script raises its own `ulimit -n`
# (soft, and the hard one where allowed, e.g. as root) to the largest
# connections × 2 + 1024 of the loads. A load that still does not fit is
# skipped, said on stderr and in the report (not a failure).
#
# The summary (a table per server and mode) is printed and written to
# <target>/scale_bench.md (<target> = $CARGO_TARGET_DIR, else target).
# Exits non-zero when a run failed: a server that did not start, stopped
# answering or died, wrk timeouts (responses slower than WRK_TIMEOUT),
# non-2xx responses, no requests, or more read/write errors than the
# end-of-run resets of its connections explain (one per connection).
#
# Env: SERVERS, MODES, CONNS, CHURN (empty: none), ROUNDS (3), DURATION
# (seconds per run, 6), WORKERS (2), WRK_TIMEOUT (seconds, 10),
# SPARGIO_PORT and TOKIO_PORT (18090/18091).
set -euo pipefail
. "$(dirname "$0")/bench_lib.sh"
cd "$(dirname "$0")/.."

SERVERS="${SERVERS:-http_server axum_server}"
MODES="${MODES:-shared split}"
CONNS="${CONNS-256 1000 4000 8000}"
CHURN="${CHURN-32 512}"
ROUNDS="${ROUNDS:-3}"
DURATION="${DURATION:-6}"
WORKERS="${WORKERS:-2}"
WRK_TIMEOUT="${WRK_TIMEOUT:-10}"
SPARGIO_PORT="${SPARGIO_PORT:-18090}"
TOKIO_PORT="${TOKIO_PORT:-18091}"
target="${CARGO_TARGET_DIR:-target}"
# wrk's threads, in both modes.
wrk_threads=2

for server in $SERVERS; do
    case "$server" in
        http_server | axum_server) ;;
        *) echo "SERVERS: '$server' is not http_server or axum_server" >&2; exit 2 ;;
    esac
done
for mode in $MODES; do
    case "$mode" in
        shared | split) ;;
        *) echo "unknown mode '$mode' (shared or split)" >&2; exit 2 ;;
    esac
done
for n in $CONNS $CHURN; do
    if ! [[ "$n" =~ ^[0-9]+$ ]] || [ "$n" -lt "$wrk_threads" ]; then
        echo "CONNS and CHURN: '$n' is not a connection count of at least $wrk_threads (wrk -t$wrk_threads)" >&2
        exit 2
    fi
done

# A load: label|connections|keep or close (`Connection: close`).
loads=()
for n in $CONNS; do loads+=("keep-alive c$n|$n|keep"); done
for n in $CHURN; do loads+=("churn c$n (Connection: close)|$n|close"); done
[ "${#loads[@]}" -gt 0 ] || { echo "no loads: CONNS and CHURN are both empty" >&2; exit 2; }

need_wrk
command -v curl >/dev/null || { echo "curl is required" >&2; exit 1; }
check_split_mode

# ===== file descriptors =====

fd_need() { echo $(($1 * 2 + 1024)); }
want=0
for load in "${loads[@]}"; do
    IFS='|' read -r _ conns _ <<<"$load"
    [ "$(fd_need "$conns")" -le "$want" ] || want="$(fd_need "$conns")"
done
hard="$(ulimit -Hn)"
if [ "$hard" != unlimited ] && [ "$hard" -lt "$want" ]; then
    # Raising the hard limit needs CAP_SYS_RESOURCE (root), and at most
    # fs.nr_open.
    ulimit -Hn "$want" 2>/dev/null || true
    hard="$(ulimit -Hn)"
fi
soft="$(ulimit -Sn)"
if [ "$soft" != unlimited ] && [ "$soft" -lt "$want" ]; then
    if [ "$hard" = unlimited ] || [ "$hard" -ge "$want" ]; then
        ulimit -Sn "$want"
    else
        ulimit -Sn "$hard"
    fi
    soft="$(ulimit -Sn)"
fi
fits() { [ "$soft" = unlimited ] || [ "$soft" -ge "$(fd_need "$1")" ]; }
skipped=()
for load in "${loads[@]}"; do
    IFS='|' read -r label conns _ <<<"$load"
    if ! fits "$conns"; then
        skipped+=("$label: needs ulimit -n $(fd_need "$conns"), the limit is $soft (hard $hard)")
        echo "ulimit -n is $soft (hard limit $hard, which this user cannot raise):" \
            "skipping '$label', which needs $(fd_need "$conns") (connections × 2 + 1024)" >&2
    fi
done

bins=()
for server in $SERVERS; do bins+=(--bin "$server"); done
cargo build --release -p spargio-bench "${bins[@]}"

tmp="$(mktemp -d)"
trap 'stop_client; stop_server; rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

# The runs files: req_s p99 cpu rss_per_conn connect_errors, a round a line.
runs_cols=5
fmt_us_seconds=1

start_server() {
    local rt="$1"
    launch_server "$rt" 100 " on port $(port_of "$rt")" "$bin" "$rt" "$(port_of "$rt")" "$workers"
}

# Sets rss_last to the VmRSS (KiB) of pid $1, unless it is gone; no fork.
sample_rss() {
    local k v _
    { while read -r k v _; do
        if [ "$k" = VmRSS: ]; then rss_last="$v"; break; fi
    done <"/proc/$1/status"; } 2>/dev/null || true
}

# wrk's errors for a run: connect errors are counted (connect_errors) and
# noted, not failures; timeouts, non-2xx responses, no requests, and more
# read + write errors than connections (the end-of-run resets) fail it.
# Sets client_note.
check_scale_wrk() {
    local label="$1" conns="$2" out="$3" connect read write timeout non2xx
    wrk_errors "$out"
    connect_errors="${connect:-0}"
    client_note=""
    if [ "$connect_errors" -gt 0 ]; then
        client_note+="  (wrk connect errors: $connect_errors)"
    fi
    if [ $((${read:-0} + ${write:-0})) -gt 0 ]; then
        client_note+="  (wrk socket errors: read ${read:-0}, write ${write:-0})"
    fi
    if [ "${timeout:-0}" -gt 0 ] || [ -n "$non2xx" ] ||
        [ $((${read:-0} + ${write:-0})) -gt "$conns" ]; then
        fail "$label: wrk errors: connect ${connect:-0}, read ${read:-0}," \
            "write ${write:-0}, timeout ${timeout:-0} (over ${WRK_TIMEOUT}s), non-2xx ${non2xx:-0}"
    fi
    if ! grep -q "requests in" "$out"; then
        fail "$label: wrk reported no requests: $(tail -n 3 "$out")"
    fi
}

# One wrk run against a fresh server. Sets req_s, p99 (µs), cpu (server
# CPU µs per request), rss_idle and rss_end (KiB), per_conn (KiB per
# connection, nan for churn) and connect_errors.
run_once() {
    local rt="$1" label="$2" conns="$3" option="$4" out="$tmp/client.out" before after
    local args=("-t$wrk_threads" "-c$conns" "-d${DURATION}s" "--timeout" "${WRK_TIMEOUT}s" --latency)
    [ "$option" = close ] && args+=(-H "Connection: close")
    start_server "$rt"
    check_server "$rt" "start" || true
    sleep 0.2
    rss_last=""
    sample_rss "$server_pid"
    rss_idle="${rss_last:-0}"
    before="$(cpu_ticks "$server_pid")"
    "${client_pin[@]}" wrk "${args[@]}" "http://127.0.0.1:$(port_of "$rt")/" >"$out" 2>&1 &
    client_pid=$!
    while kill -0 "$client_pid" 2>/dev/null; do
        sample_rss "$server_pid"
        sleep 0.25
    done
    wait "$client_pid" 2>/dev/null || true
    client_pid=""
    after="$(cpu_ticks "$server_pid" 2>/dev/null || echo "$before")"
    rss_end="${rss_last:-$rss_idle}"
    check_scale_wrk "$label $rt" "$conns" "$out"
    check_server "$rt" "$label" || true
    stop_server
    wrk_parse "$out"
    req_s="${req_s:-0}"
    cpu="$(awk -v n="${requests:-0}" -v d=$((after - before)) -v hz="$clk_tck" 'BEGIN {
        if (n > 0) printf "%.2f", d * 1e6 / hz / n; else print "nan" }')"
    if [ "$option" = keep ]; then
        per_conn="$(awk -v a="$rss_idle" -v b="$rss_end" -v n="$conns" 'BEGIN { printf "%.2f", (b - a) / n }')"
    else
        per_conn=nan
    fi
}

mode_title() {
    case "$1" in
        shared) echo "shared cores: server with $WORKERS workers, wrk -t$wrk_threads unpinned" ;;
        split) echo "split: server on CPU 0 with 1 worker, wrk -t$wrk_threads on CPU 1 (taskset)" ;;
    esac
}

server_title() {
    case "$1" in
        http_server) echo "http_server: hyper over spargio's io::Compat vs hyper on tokio" ;;
        axum_server) echo "axum_server: axum on spargio_http::serve vs axum::serve on tokio" ;;
    esac
}

# A median or ratio for the table; "—" for none.
num() { awk -v v="$1" -v f="$2" 'BEGIN { if (v == "nan" || v == "") print "—"; else printf f, v }'; }

sysctl_of() { cat "/proc/sys/$1" 2>/dev/null | tr '\t' ' ' || echo "?"; }
limits="ulimit -n $soft; net.core.somaxconn $(sysctl_of net/core/somaxconn), tcp_max_syn_backlog $(sysctl_of net/ipv4/tcp_max_syn_backlog), local ports $(sysctl_of net/ipv4/ip_local_port_range); $(nproc) CPUs, $(uname -r)"
title="Scale: spargio vs tokio as connections grow (wrk -t$wrk_threads)"
echo "# $title"
echo "# SERVERS='$SERVERS' MODES='$MODES' CONNS='$CONNS' CHURN='$CHURN' ROUNDS=$ROUNDS DURATION=${DURATION}s WRK_TIMEOUT=${WRK_TIMEOUT}s"
echo "# $limits"
echo "# per run: req/s, p99, server CPU µs/req, server VmRSS idle → end of run, KiB/conn, wrk connect errors"
report="## $title (ROUNDS=$ROUNDS, DURATION=${DURATION}s, wrk --timeout ${WRK_TIMEOUT}s; medians; ratios: of the medians, and their range over the rounds)"
report+=$'\n\n'"$limits."
report+=$'\n\n'"CPU µs/req: the server's utime + stime over wrk's requests (churn: one connection each). RSS KiB/conn (keep-alive): (VmRSS while wrk still ran − VmRSS idle after start) / connections. Connect errors: wrk's, summed over the rounds (with any, fewer connections took part)."
if [ "${#skipped[@]}" -gt 0 ]; then
    report+=$'\n\n'"Skipped (file descriptor limit):"
    for s in "${skipped[@]}"; do report+=$'\n'"- $s"; done
fi
for server in $SERVERS; do
    bin="$target/release/$server"
    for mode in $MODES; do
        set_mode "$mode"
        echo
        echo "# $(server_title "$server"); $(mode_title "$mode")"
        table="| load | spargio req/s | tokio req/s | req/s spargio/tokio | spargio CPU µs/req | tokio CPU µs/req | CPU/req spargio/tokio | spargio RSS KiB/conn | tokio RSS KiB/conn | RSS/conn spargio/tokio | spargio p99 | tokio p99 | p99 spargio/tokio | connect errors spargio / tokio |
|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
        for load in "${loads[@]}"; do
            IFS='|' read -r label conns option <<<"$load"
            fits "$conns" || continue
            echo
            echo "## $server, $mode, $label: wrk -t$wrk_threads -c$conns -d${DURATION}s --timeout ${WRK_TIMEOUT}s --latency$([ "$option" = close ] && echo " -H 'Connection: close'") /"
            : >"$tmp/spargio.runs"
            : >"$tmp/tokio.runs"
            for round in $(seq 1 "$ROUNDS"); do
                for rt in spargio tokio; do
                    run_once "$rt" "$server $mode $label round $round" "$conns" "$option"
                    echo "$req_s $p99 $cpu $per_conn $connect_errors" >>"$tmp/$rt.runs"
                    printf "round %d %-8s %9s req/s  p99 %9s  CPU %6s µs/req  VmRSS %6.1f → %6.1f MiB  %6s KiB/conn%s\n" \
                        "$round" "$rt" "$req_s" "$(fmt_us "$p99")" "$cpu" \
                        "$(awk -v k="$rss_idle" 'BEGIN { print k / 1024 }')" \
                        "$(awk -v k="$rss_end" 'BEGIN { print k / 1024 }')" "$(num "$per_conn" "%.2f")" "$client_note"
                done
            done
            for rt in spargio tokio; do
                declare "${rt}_req=$(awk '{ print $1 }' "$tmp/$rt.runs" | median)"
                declare "${rt}_p99=$(awk '{ print $2 }' "$tmp/$rt.runs" | median)"
                declare "${rt}_cpu=$(awk '{ print $3 }' "$tmp/$rt.runs" | median)"
                declare "${rt}_rss=$(awk '{ print $4 }' "$tmp/$rt.runs" | median)"
                declare "${rt}_conerr=$(awk '{ s += $5 } END { print s + 0 }' "$tmp/$rt.runs")"
                r="${rt}_req" p="${rt}_p99" c="${rt}_cpu" m="${rt}_rss" e="${rt}_conerr"
                printf "median   %-8s %9.0f req/s  p99 %9s  CPU %6.2f µs/req  %6s KiB/conn  connect errors %s\n" \
                    "$rt" "${!r}" "$(fmt_us "${!p}")" "${!c}" "$(num "${!m}" "%.2f")" "${!e}"
            done
            req_ratio="$(ratio "$spargio_req" "$tokio_req")× ($(ratio_range 1))"
            cpu_ratio="$(ratio "$spargio_cpu" "$tokio_cpu")× ($(ratio_range 3))"
            p99_ratio="$(ratio "$spargio_p99" "$tokio_p99")× ($(ratio_range 2))"
            if [ "$option" = keep ]; then
                rss_ratio="$(ratio "$spargio_rss" "$tokio_rss")× ($(ratio_range 4))"
            else
                rss_ratio="—"
            fi
            echo "spargio/tokio: req/s $req_ratio, CPU per request $cpu_ratio, RSS per connection $rss_ratio, p99 $p99_ratio"
            row="| $label | $(num "$spargio_req" "%.0f") | $(num "$tokio_req" "%.0f") | $req_ratio"
            row+=" | $(num "$spargio_cpu" "%.2f") | $(num "$tokio_cpu" "%.2f") | $cpu_ratio"
            row+=" | $(num "$spargio_rss" "%.2f") | $(num "$tokio_rss" "%.2f") | $rss_ratio"
            row+=" | $(fmt_us "$spargio_p99") | $(fmt_us "$tokio_p99") | $p99_ratio"
            row+=" | $spargio_conerr / $tokio_conerr |"
            table+=$'\n'"$row"
        done
        report+=$'\n\n'"### $(server_title "$server"); $(mode_title "$mode")"$'\n\n'"$table"
    done
done

write_report scale_bench
report_failures

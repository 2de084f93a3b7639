#!/usr/bin/env bash
# HTTP client benchmark: spargio-http's Client on spargio against
# hyper-util's pooled client (what reqwest wraps) on tokio, both with the
# same number of workers, fetching static files from a local nginx.
#
#   ROUNDS=3 DURATION=4 scripts/http_client_bench.sh
#
# The client is bench/src/bin/http_client.rs (`http_client <spargio|tokio>
# <url> <concurrency> <seconds> [workers]`): `concurrency` tasks each GET
# the URL in a loop and read the whole body. nginx (apt-get installed when
# missing) runs from a private config in a temp dir (`daemon off`,
# NGINX_WORKERS worker processes, access log off, sendfile, keep-alive
# for 1,000,000 requests per connection so no run reconnects), with a
# plain HTTP/1.1 port and a TLS + HTTP/2 port (a self-signed certificate
# for 127.0.0.1 made by `http_client cert`, which both clients trust and
# nothing else), serving a 1 KiB and a 1 MiB file. Client and nginx share
# the cores, unpinned.
#
# Loads: plain HTTP/1.1 1 KiB with 16 and 64 tasks (one keep-alive
# connection per task), HTTPS HTTP/2 (ALPN) 1 KiB with 64 tasks and 1 MiB
# with 4 tasks (one connection, the tasks its streams). For each load,
# ROUNDS rounds of spargio then tokio, DURATION seconds each. Per run:
# req/s, the client process's CPU time per request (utime + stime from
# /proc/self/stat), and nginx's (its processes' /proc/PID/stat). Per load:
# medians over the rounds, the spargio/tokio ratios of the medians and
# their range over the rounds (round i against round i).
#
# A run fails (the script exits non-zero) when the client reports an
# error, a non-2xx response, a body of the wrong size or the wrong HTTP
# version. The table is printed and written to <target>/http_client_bench.md
# (<target> = $CARGO_TARGET_DIR, else target). nginx is stopped on exit.
#
# Env: ROUNDS (3), DURATION (seconds per run, 4), WORKERS (client workers
# on both sides, 2), NGINX_WORKERS (1), PLAIN_PORT (18090), TLS_PORT
# (18453).
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS="${ROUNDS:-3}"
DURATION="${DURATION:-4}"
WORKERS="${WORKERS:-2}"
NGINX_WORKERS="${NGINX_WORKERS:-1}"
PLAIN_PORT="${PLAIN_PORT:-18090}"
TLS_PORT="${TLS_PORT:-18453}"
target="${CARGO_TARGET_DIR:-target}"
bin="$target/release/http_client"

# label|url|concurrency|expected version|expected body bytes
loads=(
    "HTTP/1.1 1 KiB c16|http://127.0.0.1:$PLAIN_PORT/1k|16|HTTP/1.1|1024"
    "HTTP/1.1 1 KiB c64|http://127.0.0.1:$PLAIN_PORT/1k|64|HTTP/1.1|1024"
    "HTTPS h2 1 KiB c64|https://127.0.0.1:$TLS_PORT/1k|64|HTTP/2.0|1024"
    "HTTPS h2 1 MiB c4|https://127.0.0.1:$TLS_PORT/1m|4|HTTP/2.0|1048576"
)

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
command -v nginx >/dev/null || $sudo apt-get install -y nginx
command -v curl >/dev/null || { echo "curl is required" >&2; exit 1; }

cargo build --release -p spargio-bench --bin http_client

tmp="$(mktemp -d)"
# nginx's workers run as an unprivileged user: they must read www/.
chmod 755 "$tmp"
nginx_pid=""
stop_nginx() {
    if [ -n "$nginx_pid" ]; then
        kill "$nginx_pid" 2>/dev/null || true
        wait "$nginx_pid" 2>/dev/null || true
        nginx_pid=""
    fi
}
trap 'stop_nginx; rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

failures=()
fail() {
    echo "FAIL: $*" >&2
    failures+=("$*")
}

# ===== nginx =====

mkdir "$tmp/www"
head -c 1024 /dev/urandom >"$tmp/www/1k"
head -c 1048576 /dev/urandom >"$tmp/www/1m"
chmod 644 "$tmp/www/"*
"$bin" cert "$tmp"
ca="$tmp/cert.pem"
cat >"$tmp/nginx.conf" <<EOF
daemon off;
pid $tmp/nginx.pid;
error_log $tmp/error.log;
worker_processes $NGINX_WORKERS;
events { worker_connections 4096; }
http {
    access_log off;
    default_type application/octet-stream;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 1000000;
    keepalive_timeout 75s;
    open_file_cache max=16;
    client_body_temp_path $tmp;
    proxy_temp_path $tmp;
    fastcgi_temp_path $tmp;
    uwsgi_temp_path $tmp;
    scgi_temp_path $tmp;
    server { listen 127.0.0.1:$PLAIN_PORT; root $tmp/www; }
    server {
        listen 127.0.0.1:$TLS_PORT ssl http2;
        ssl_certificate $tmp/cert.pem;
        ssl_certificate_key $tmp/key.pem;
        root $tmp/www;
    }
}
EOF
nginx -e "$tmp/error.log" -c "$tmp/nginx.conf" >"$tmp/nginx.out" 2>&1 &
nginx_pid=$!
for _ in $(seq 1 100); do
    if curl -s -o /dev/null "http://127.0.0.1:$PLAIN_PORT/1k" &&
        curl -s -o /dev/null --cacert "$ca" "https://127.0.0.1:$TLS_PORT/1k"; then
        break
    fi
    kill -0 "$nginx_pid" 2>/dev/null || { echo "nginx died: $(cat "$tmp/nginx.out" "$tmp/error.log" 2>/dev/null)" >&2; exit 1; }
    sleep 0.05
done
got="$(curl -s --cacert "$ca" --http2 -o /dev/null -w '%{http_version} %{size_download}' "https://127.0.0.1:$TLS_PORT/1m")"
[ "$got" = "2 1048576" ] || { echo "nginx over TLS answered '$got', not HTTP/2 with 1 MiB" >&2; exit 1; }

# utime + stime (fields 14 and 15 of /proc/PID/stat, counted after the
# `(comm)` field) of nginx's master and workers, in clock ticks.
nginx_ticks() {
    local total=0 pid
    for pid in "$nginx_pid" $(pgrep -P "$nginx_pid" || true); do
        total=$((total + $(sed 's/^.*) //' "/proc/$pid/stat" | awk '{ print $12 + $13 }')))
    done
    echo "$total"
}
clk_tck="$(getconf CLK_TCK)"

# ===== runs =====

field() { sed -n "s/.*\b$1=\([^ ]*\).*/\1/p" "$tmp/client.out"; }

# One client run. Sets req_s, cpu (client CPU µs/request) and ncpu (nginx
# CPU µs/request); records a failure when the run went wrong.
run_once() {
    local rt="$1" label="$2" url="$3" conns="$4" version="$5" bytes="$6" before after requests
    before="$(nginx_ticks)"
    if ! HTTP_CLIENT_CA="$ca" "$bin" "$rt" "$url" "$conns" "$DURATION" "$WORKERS" \
        >"$tmp/client.out" 2>"$tmp/client.err"; then
        fail "$label $rt: $(cat "$tmp/client.out" "$tmp/client.err")"
    fi
    after="$(nginx_ticks)"
    kill -0 "$nginx_pid" 2>/dev/null || { echo "nginx died during $label $rt" >&2; exit 1; }
    requests="$(field requests)"
    req_s="$(field req_s)"
    cpu="$(field cpu_us_per_req)"
    [ "$(field version)" = "$version" ] || fail "$label $rt: responses were $(field version), not $version"
    [ "$(field body_bytes_per_req)" = "$bytes" ] || fail "$label $rt: $(field body_bytes_per_req) body bytes per request, not $bytes"
    ncpu="$(awk -v n="${requests:-0}" -v d=$((after - before)) -v hz="$clk_tck" 'BEGIN {
        if (n > 0) printf "%.2f", d * 1e6 / hz / n; else print "nan" }')"
}

median() { sort -g | awk '{ v[NR] = $1 } END {
    if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2];
    else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "nan" }'; }
# Column $1 of spargio's rounds over column $1 of tokio's (three columns
# a round), round by round: "lowest–highest".
ratio_range() {
    paste -d' ' "$tmp/spargio.runs" "$tmp/tokio.runs" | awk -v c="$1" '
        { a = $c; b = $(c + 3); if (b > 0) { r = a / b;
          if (lo == "" || r < lo) lo = r; if (hi == "" || r > hi) hi = r } }
        END { if (lo == "") print "nan"; else printf "%.2f–%.2f", lo, hi }'
}

title="HTTP client: spargio-http vs hyper-util on tokio, against nginx ($NGINX_WORKERS worker process(es)), $WORKERS client workers each"
echo "# $title"
echo "# ROUNDS=$ROUNDS DURATION=${DURATION}s; per run: req/s, client CPU µs/req, nginx CPU µs/req"
table="| load | spargio req/s | spargio CPU µs/req | tokio req/s | tokio CPU µs/req | nginx CPU µs/req (spargio / tokio runs) | req/s spargio/tokio | CPU/req spargio/tokio |
|---|---:|---:|---:|---:|---:|---:|---:|"
for load in "${loads[@]}"; do
    IFS='|' read -r label url conns version bytes <<<"$load"
    echo
    echo "## $label: $url, $conns tasks"
    : >"$tmp/spargio.runs"
    : >"$tmp/tokio.runs"
    for round in $(seq 1 "$ROUNDS"); do
        for rt in spargio tokio; do
            run_once "$rt" "$label round $round" "$url" "$conns" "$version" "$bytes"
            echo "${req_s:-0} ${cpu:-nan} $ncpu" >>"$tmp/$rt.runs"
            printf "round %d %-8s %9s req/s  client CPU %7s µs/req  nginx CPU %7s µs/req\n" \
                "$round" "$rt" "${req_s:-0}" "${cpu:-nan}" "$ncpu"
        done
    done
    for rt in spargio tokio; do
        declare "${rt}_req=$(awk '{ print $1 }' "$tmp/$rt.runs" | median)"
        declare "${rt}_cpu=$(awk '{ print $2 }' "$tmp/$rt.runs" | median)"
        declare "${rt}_ncpu=$(awk '{ print $3 }' "$tmp/$rt.runs" | median)"
    done
    req_range="$(ratio_range 1)"
    cpu_range="$(ratio_range 2)"
    echo "median: spargio $spargio_req req/s, $spargio_cpu µs/req; tokio $tokio_req req/s, $tokio_cpu µs/req"
    echo "spargio/tokio: req/s $(ratio "$spargio_req" "$tokio_req")× ($req_range)," \
        "CPU per request $(ratio "$spargio_cpu" "$tokio_cpu")× ($cpu_range)"
    table+=$'\n'"$(printf "| %s | %.0f | %.2f | %.0f | %.2f | %.2f / %.2f | %s× (%s) | %s× (%s) |" \
        "$label" "$spargio_req" "$spargio_cpu" "$tokio_req" "$tokio_cpu" "$spargio_ncpu" "$tokio_ncpu" \
        "$(ratio "$spargio_req" "$tokio_req")" "$req_range" \
        "$(ratio "$spargio_cpu" "$tokio_cpu")" "$cpu_range")"
done

report="## $title (ROUNDS=$ROUNDS, DURATION=${DURATION}s, medians; ratios: of the medians, and their range over the rounds)"$'\n\n'"$table"
echo
echo "$report"
echo "$report" >"$target/http_client_bench.md"
echo
echo "written to $target/http_client_bench.md"
if [ "${#failures[@]}" -gt 0 ]; then
    echo
    echo "${#failures[@]} run(s) failed:" >&2
    printf '  %s\n' "${failures[@]}" >&2
    exit 1
fi

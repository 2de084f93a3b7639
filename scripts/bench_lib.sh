# shellcheck shell=bash
# What the benchmark scripts share (http_bench.sh, h3_bench.sh,
# db_bench.sh, db_placement.sh, scale_bench.sh). Sourced, never run:
#
#   . "$(dirname "$0")/bench_lib.sh"
#
# It defines functions, failures, server_pid, clk_tck and the settings
# at the end of this comment with their defaults (set them after sourcing
# to change them). The script sets `set -euo pipefail`, cds to the
# repository root, makes "$tmp" (a mktemp -d directory), sets its own
# traps and wraps launch_server in its own start_server. A script may
# redefine any function after sourcing (db_bench.sh has its own port_of
# and set_mode; h3_bench.sh its own server_ready).
#
# Failures
#   fail MSG...        prints "FAIL: MSG" on stderr and appends MSG to the
#                      failures array.
#   report_failures    when failures is not empty: prints them on stderr
#                      and exits 1.
#
# Setup
#   apt_install PKG... apt-get install -y PKG..., with sudo unless root.
#   need_wrk           installs wrk when it is missing.
#   check_split_mode   when MODES holds `split`: exits 1 unless taskset and
#                      2 CPUs are there.
#   port_of RT         SPARGIO_PORT for spargio, else TOKIO_PORT.
#   set_mode MODE      sets server_pin (array), workers, client_pin (array)
#                      and threads for `shared` (WORKERS workers, nothing
#                      pinned, 2 client threads) or `split` (server on CPU
#                      0 with 1 worker, client on CPU 1 with 1 thread).
#
# Servers (server_pid: the running server's pid, or empty)
#   launch_server RT POLLS WHAT CMD...
#                      runs CMD (prefixed by server_pin; taskset execs, so
#                      $! is the server) with stdout in $tmp/server.out,
#                      stderr in $tmp/server.err and fd 3 closed; sets
#                      server_pid and polls server_ready every 0.05 s, at
#                      most POLLS times. A bind failure ("Address already
#                      in use": a port stays busy for a moment after the
#                      previous server exits, as io_uring tears a ring down
#                      asynchronously) is retried, 50 starts at most; any
#                      other failure prints "RT server did not startWHAT:
#                      <its stderr>" and exits 1.
#   server_ready       the default readiness test: $tmp/server.out holds
#                      the line `ready <server_pid>`. A script may redefine
#                      it (h3_bench.sh reads the port from `LISTENING`).
#   stop_server        kills and reaps server_pid, if any; clears it.
#   check_server RT WHAT
#                      records a failure and returns 1 when the server died
#                      or `curl ${curl_flags[@]} -m 5
#                      $check_scheme://127.0.0.1:<port_of RT>$check_path`
#                      does not answer $check_body; with check_stderr=1, a
#                      server that wrote to stderr is a failure too.
#
# PostgreSQL (db_bench.sh, db_placement.sh; target set by the script)
#   start_db           unless DATABASE_URL is set: starts a private
#                      PostgreSQL (spargio-peer-db, already built; its
#                      stdin is our fd 3, so it stops when we exit however
#                      we exit) and sets DATABASE_URL, db_pid and PG_PID
#                      (the postmaster). Exits 1 when it does not start.
#   stop_db            stops it, if started; clears db_pid.
#
# Measures
#   cpu_ticks PID      utime + stime of PID in clock ticks (clk_tck a
#                      second).
#   rss_kib PID        VmRSS of PID in KiB; rss_mib PID: in MiB, "%.1f".
#
# wrk
#   to_us LATENCY      wrk's 850.00us, 1.23ms, 2.00s -> µs ("nan" if not
#                      one of those).
#   wrk_errors OUT     sets connect, read, write, timeout (wrk's "Socket
#                      errors:" line, empty when none) and non2xx (empty
#                      when none) from wrk's output OUT.
#   check_wrk LABEL CONNS OUT
#                      fails on connect or timeout errors, non-2xx
#                      responses, more read + write errors than CONNS (one
#                      end-of-run reset per connection is expected), or no
#                      "requests in" line (with check_wrk_tail=N, the
#                      message carries OUT's last N lines). Sets
#                      client_note to the read/write counts, when any.
#   wrk_parse OUT      sets requests, req_s (rounded; empty when wrk
#                      printed none) and p99 (µs) from wrk --latency's
#                      output OUT.
#
# Summaries
#   median             the median of the numbers on stdin, one a line
#                      ("nan" for none).
#   ratio A B          A / B, "%.2f" ("nan" unless B > 0).
#   ratio_range COL [RT]
#                      column COL of $tmp/RT.runs (RT: spargio) over column
#                      COL of $tmp/tokio.runs, line (round) by line:
#                      "lowest–highest" ("nan" when no line has tokio's
#                      value > 0). Each line has runs_cols columns (4).
#   fmt_us US          "850 µs" or "1.23 ms"; with fmt_us_seconds=1 also
#                      "2.00 s" from 1 s on, and "nan" for nan.
#   write_report NAME  prints $report and writes it to
#                      <target>/NAME.md (target: set by the script).
#
# Settings (defaults): check_scheme (http), curl_flags (-s), check_path (/),
# check_body (Hello, world!), check_stderr (0): check_server's; runs_cols
# (4): ratio_range's; check_wrk_tail (0): check_wrk's; fmt_us_seconds (0):
# fmt_us's.

check_scheme=http
curl_flags=(-s)
check_path=/
check_body="Hello, world!"
check_stderr=0
runs_cols=4
check_wrk_tail=0
fmt_us_seconds=0

failures=()
db_pid=""

start_db() {
    [ -z "${DATABASE_URL:-}" ] || return 0
    exec 3> >(exec "$target/release/spargio-peer-db" >"$tmp/db.out" 2>"$tmp/db.err")
    db_pid=$!
    for _ in $(seq 1 600); do
        grep -q "^DATABASE_URL=" "$tmp/db.out" && break
        kill -0 "$db_pid" 2>/dev/null || break
        sleep 0.1
    done
    DATABASE_URL="$(sed -n 's/^DATABASE_URL=//p' "$tmp/db.out")"
    [ -n "$DATABASE_URL" ] || { echo "spargio-peer-db did not start: $(cat "$tmp/db.err")" >&2; exit 1; }
    PG_PID="$(sed -n 's/.*PostgreSQL (pid \([0-9]*\)).*/\1/p' "$tmp/db.err")"
}

stop_db() {
    if [ -n "$db_pid" ]; then
        # Closing its stdin stops spargio-peer-db (and its server); the
        # signal too, should anything else hold the pipe.
        exec 3>&-
        kill "$db_pid" 2>/dev/null || true
        wait "$db_pid" 2>/dev/null || true
        db_pid=""
    fi
}

fail() {
    echo "FAIL: $*" >&2
    failures+=("$*")
}

report_failures() {
    if [ "${#failures[@]}" -gt 0 ]; then
        echo
        echo "${#failures[@]} failure(s):" >&2
        printf '  %s\n' "${failures[@]}" >&2
        exit 1
    fi
}

# ===== setup =====

apt_install() {
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get install -y "$@"
}

need_wrk() { command -v wrk >/dev/null || apt_install wrk; }

check_split_mode() {
    case " $MODES " in
        *" split "*)
            command -v taskset >/dev/null || { echo "split mode needs taskset" >&2; exit 1; }
            [ "$(nproc)" -ge 2 ] || { echo "split mode needs 2 CPUs" >&2; exit 1; }
            ;;
    esac
}

port_of() { if [ "$1" = spargio ]; then echo "$SPARGIO_PORT"; else echo "$TOKIO_PORT"; fi; }

# The mode's server pinning and workers, client pinning and threads.
set_mode() {
    case "$1" in
        shared) server_pin=() workers="$WORKERS" client_pin=() threads=2 ;;
        split) server_pin=(taskset -c 0) workers=1 client_pin=(taskset -c 1) threads=1 ;;
        *) echo "unknown mode '$1' (shared or split)" >&2; exit 2 ;;
    esac
}

# ===== servers =====

server_pid=""

server_ready() { grep -q "^ready $server_pid\$" "$tmp/server.out"; }

launch_server() {
    local rt="$1" polls="$2" what="$3"
    shift 3
    for _ in $(seq 1 50); do
        # taskset execs the server: $! is the server's pid.
        "${server_pin[@]}" "$@" >"$tmp/server.out" 2>"$tmp/server.err" 3>&- &
        server_pid=$!
        for _ in $(seq 1 "$polls"); do
            server_ready && return 0
            kill -0 "$server_pid" 2>/dev/null || break
            sleep 0.05
        done
        wait "$server_pid" 2>/dev/null || true
        server_pid=""
        grep -q "Address already in use" "$tmp/server.err" || break
        sleep 0.1
    done
    echo "$rt server did not start$what: $(cat "$tmp/server.err")" >&2
    exit 1
}

# Stops the load generator started in the background, if any (reads and
# clears client_pid).
client_pid=""
stop_client() {
    if [ -n "$client_pid" ]; then
        kill "$client_pid" 2>/dev/null || true
        wait "$client_pid" 2>/dev/null || true
        client_pid=""
    fi
}

stop_server() {
    if [ -n "$server_pid" ]; then
        kill "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
        server_pid=""
    fi
}

check_server() {
    local rt="$1" what="$2" body
    if ! kill -0 "$server_pid" 2>/dev/null; then
        fail "$rt server died during $what: $(tail -n 5 "$tmp/server.err")"
        return 1
    fi
    body="$(curl "${curl_flags[@]}" -m 5 "$check_scheme://127.0.0.1:$(port_of "$rt")$check_path" || true)"
    if [ "$body" != "$check_body" ]; then
        fail "$rt server stopped answering after $what (curl got '$body')"
        return 1
    fi
    if [ "$check_stderr" = 1 ] && [ -s "$tmp/server.err" ]; then
        fail "$rt server wrote to stderr during $what: $(tail -n 3 "$tmp/server.err")"
    fi
}

# ===== measures =====

# utime + stime (fields 14 and 15 of /proc/PID/stat) in clock ticks. The
# fields are counted after the `(comm)` field, which may hold spaces.
cpu_ticks() { sed 's/^.*) //' "/proc/$1/stat" | awk '{ print $12 + $13 }'; }
clk_tck="$(getconf CLK_TCK)"

rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }
rss_mib() { awk -v k="$(rss_kib "$1")" 'BEGIN { printf "%.1f", k / 1024 }'; }

# ===== wrk =====

to_us() {
    awk -v v="$1" 'BEGIN {
        n = v + 0
        if (v ~ /us$/) print n; else if (v ~ /ms$/) print n * 1000;
        else if (v ~ /s$/) print n * 1000000; else print "nan"
    }'
}

wrk_errors() {
    connect="" read="" write="" timeout=""
    read -r connect read write timeout < <(awk '/Socket errors:/ {
        gsub(",", ""); print $4, $6, $8, $10 }' "$1") || true
    non2xx="$(awk '/Non-2xx or 3xx responses:/ { print $NF }' "$1")"
}

check_wrk() {
    local label="$1" conns="$2" out="$3" connect read write timeout non2xx
    wrk_errors "$out"
    client_note=""
    if [ $((${read:-0} + ${write:-0})) -gt 0 ]; then
        client_note="  (wrk socket errors: read ${read:-0}, write ${write:-0})"
    fi
    if [ "${connect:-0}" -gt 0 ] || [ "${timeout:-0}" -gt 0 ] || [ -n "$non2xx" ] ||
        [ $((${read:-0} + ${write:-0})) -gt "$conns" ]; then
        fail "$label: wrk errors: connect ${connect:-0}, read ${read:-0}," \
            "write ${write:-0}, timeout ${timeout:-0}, non-2xx ${non2xx:-0}"
    fi
    if ! grep -q "requests in" "$out"; then
        if [ "$check_wrk_tail" -gt 0 ]; then
            fail "$label: wrk reported no requests: $(tail -n "$check_wrk_tail" "$out")"
        else
            fail "$label: wrk reported no requests"
        fi
    fi
}

wrk_parse() {
    requests="$(awk '/requests in/ { print $1 }' "$1")"
    req_s="$(awk '/^Requests\/sec:/ { printf "%.0f", $2 }' "$1")"
    p99="$(to_us "$(awk '$1 == "99%" { print $2 }' "$1")")"
}

# ===== summaries =====

median() { sort -g | awk '{ v[NR] = $1 } END {
    if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2];
    else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "nan" }'; }

ratio_range() {
    paste -d' ' "$tmp/${2:-spargio}.runs" "$tmp/tokio.runs" | awk -v c="$1" -v n="$runs_cols" '
        { a = $c; b = $(c + n); if (b > 0) { r = a / b;
          if (lo == "" || r < lo) lo = r; if (hi == "" || r > hi) hi = r } }
        END { if (lo == "") print "nan"; else printf "%.2f–%.2f", lo, hi }'
}

fmt_us() {
    if [ "$fmt_us_seconds" = 1 ]; then
        awk -v v="$1" 'BEGIN { if (v == "nan") print "nan";
            else if (v >= 1000000) printf "%.2f s", v / 1000000;
            else if (v >= 1000) printf "%.2f ms", v / 1000; else printf "%.0f µs", v }'
    else
        awk -v v="$1" 'BEGIN { if (v >= 1000) printf "%.2f ms", v / 1000; else printf "%.0f µs", v }'
    fi
}

write_report() {
    echo
    echo "$report"
    mkdir -p "$target"
    echo "$report" >"$target/$1.md"
    echo
    echo "written to $target/$1.md"
}

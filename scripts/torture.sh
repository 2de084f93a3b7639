#!/usr/bin/env bash
# The tortures for SECONDS each on each backend: spargio's byte streams
# (spargio/tests/torture.rs), TLS (crates/spargio-tls/tests/tls_torture.rs,
# with tokio's traits too), WebSocket (crates/spargio-ws/tests/ws_torture.rs),
# HTTP bodies (crates/spargio-http/tests/http_torture.rs), QUIC streams
# (crates/spargio-quic/tests/quic_torture.rs) and the PostgreSQL wire
# protocol through the pool (crates/spargio-postgres/tests/pg_torture.rs,
# with a private PostgreSQL), on io_uring, io_uring with injected faults (SPARGIO_URING_FAULTS,
# spargio/src/driver/uring/faults.rs), epoll, then epoll with injected
# faults (SPARGIO_EPOLL_FAULTS, spargio/src/driver/epoll/faults.rs): twenty-
# four runs of SECONDS. Random seeds from a base printed per run; a failure
# prints its seed, op trace and the exact replay command, and this script
# exits 1.
#
#   scripts/torture.sh SECONDS
#   TORTURE_SKIP=segments scripts/torture.sh 60   # look past a known failure
#
# Dev build, as the CI builds. Build knobs from the environment pass through
# (CARGO_TARGET_DIR ...).
set -u
secs=${1:?usage: scripts/torture.sh SECONDS}
cd "$(dirname "$0")/.."
# What `cargo test` selects for each torture.
tortures=(
    "-p spargio --test torture"
    "-p spargio-tls --features tokio-io --test tls_torture"
    "-p spargio-ws --test ws_torture"
    "-p spargio-http --test http_torture"
    "-p spargio-quic --test quic_torture"
    "-p spargio-postgres --test pg_torture"
)
for t in "${tortures[@]}"; do
    # shellcheck disable=SC2086 # one word per argument
    cargo test $t --no-run || exit 1
done
fault_seed=$(( $(date +%s%N) % 1000000007 + 1 ))
status=0
run_leg() {
    local name=$1
    shift
    for t in "${tortures[@]}"; do
        echo "== torture: $name, ${secs}s: cargo test $t"
        # shellcheck disable=SC2086
        if ! env "$@" TORTURE_SECONDS="$secs" cargo test -q $t -- --nocapture; then
            echo "== torture: $name FAILED (cargo test $t); replay with the command in the report above ($*)"
            status=1
        fi
    done
}
if [ "$(uname -s)" = Linux ]; then
    run_leg io_uring SPARGIO_BACKEND=io_uring
    run_leg "io_uring with faults (SPARGIO_URING_FAULTS=$fault_seed)" SPARGIO_BACKEND=io_uring SPARGIO_URING_FAULTS="$fault_seed"
fi
run_leg epoll SPARGIO_BACKEND=epoll
run_leg "epoll with faults (SPARGIO_EPOLL_FAULTS=$fault_seed)" SPARGIO_BACKEND=epoll SPARGIO_EPOLL_FAULTS="$fault_seed"
exit $status

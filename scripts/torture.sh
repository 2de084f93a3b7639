#!/usr/bin/env bash
# The byte-stream torture (spargio/tests/torture.rs), the HTTP body
# torture (crates/spargio-http/tests/http_torture.rs) and the QUIC stream
# torture (crates/spargio-quic/tests/quic_torture.rs), each for SECONDS on
# each backend: io_uring, io_uring with injected faults (SPARGIO_URING_FAULTS,
# spargio/src/driver/uring/faults.rs), epoll, then epoll with injected
# faults (SPARGIO_EPOLL_FAULTS, spargio/src/driver/epoll/faults.rs). Random seeds
# from a base printed per leg; a failure prints its seed, op trace and the
# exact replay command, and this script exits 1.
#
#   scripts/torture.sh SECONDS
#   TORTURE_SKIP=segments scripts/torture.sh 60   # look past a known failure
#
# Dev build, as the CI builds. Build knobs from the environment pass through
# (CARGO_TARGET_DIR ...).
set -u
secs=${1:?usage: scripts/torture.sh SECONDS}
cd "$(dirname "$0")/.."
# Each harness: the package and its test binary.
harnesses=("spargio torture" "spargio-http http_torture" "spargio-quic quic_torture")
for h in "${harnesses[@]}"; do
    set -- $h
    cargo test -p "$1" --test "$2" --no-run || exit 1
done
fault_seed=$(( $(date +%s%N) % 1000000007 + 1 ))
status=0
run_leg() {
    local name=$1
    shift
    for h in "${harnesses[@]}"; do
        local pkg=${h% *} bin=${h#* }
        echo "== torture: $bin, $name, ${secs}s"
        if ! env "$@" TORTURE_SECONDS="$secs" cargo test -q -p "$pkg" --test "$bin" -- --nocapture; then
            echo "== torture: $bin, $name FAILED; replay with the command in the report above ($*)"
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

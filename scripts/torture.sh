#!/usr/bin/env bash
# The byte-stream torture (spargio/tests/torture.rs) for SECONDS on each
# backend: io_uring, io_uring with injected faults (SPARGIO_URING_FAULTS,
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
cargo test -p spargio --test torture --no-run || exit 1
fault_seed=$(( $(date +%s%N) % 1000000007 + 1 ))
status=0
run_leg() {
    local name=$1
    shift
    echo "== torture: $name, ${secs}s"
    if ! env "$@" TORTURE_SECONDS="$secs" cargo test -q -p spargio --test torture -- --nocapture; then
        echo "== torture: $name FAILED; replay with the command in the report above ($*)"
        status=1
    fi
}
if [ "$(uname -s)" = Linux ]; then
    run_leg io_uring SPARGIO_BACKEND=io_uring
    run_leg "io_uring with faults (SPARGIO_URING_FAULTS=$fault_seed)" SPARGIO_BACKEND=io_uring SPARGIO_URING_FAULTS="$fault_seed"
fi
run_leg epoll SPARGIO_BACKEND=epoll
run_leg "epoll with faults (SPARGIO_EPOLL_FAULTS=$fault_seed)" SPARGIO_BACKEND=epoll SPARGIO_EPOLL_FAULTS="$fault_seed"
exit $status

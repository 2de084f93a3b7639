#!/usr/bin/env bash
# fs_api with tokio's io_uring file operations beside tokio, spargio and
# compio (issue 42).
#
#   scripts/fs_uring_bench.sh                 # ROUNDS=2, WARMUP=1, MEASURE=3
#   PERF=1 ROUNDS=0 scripts/fs_uring_bench.sh # only the syscall/SQE counts
#
# tokio's `io-uring` feature exists only under `--cfg tokio_unstable`, so
# this builds spargio-bench with RUSTFLAGS="--cfg tokio_unstable" and
# `--features tokio-uring` into its own target directory (TARGET, default
# target/tokio-uring: the flag changes every crate's build, and would
# otherwise invalidate the default target directory's cache).
#
# ROUNDS runs of the whole `fs_api` bench (`--warm-up-time WARMUP
# --measurement-time MEASURE`); after each, every variant's median (from
# criterion's estimates.json) and each other variant's median over the
# group's spargio median (above 1: spargio is faster). The table goes to
# stdout and to $TARGET/fs_uring_bench.md.
#
# PERF=1: for every tokio_uring_* variant (and VARIANTS, a space-separated
# list of group/variant to add), a short run under `perf stat` counting
# io_uring SQEs (io_uring:io_uring_submit_req), work punted to io-wq
# (io_uring:io_uring_queue_async_work) and the file syscalls; the counts of
# a run that measures nothing (the fixtures and every side's setup) are
# subtracted and the rest divided by the operations run (criterion
# iterations from the variant's cpu.json × operations per iteration).
set -euo pipefail

cd "$(dirname "$0")/.."
TARGET=${TARGET:-$PWD/target/tokio-uring}
ROUNDS=${ROUNDS:-2}
WARMUP=${WARMUP:-1}
MEASURE=${MEASURE:-3}
PERF=${PERF:-0}
VARIANTS=${VARIANTS:-}
export CARGO_TARGET_DIR=$TARGET
export RUSTFLAGS="${RUSTFLAGS:-} --cfg tokio_unstable"

bench() {
    cargo bench -q -p spargio-bench --features tokio-uring --bench fs_api -- "$@"
}

# The bench executable cargo built last.
exe=$(cargo bench -p spargio-bench --features tokio-uring --bench fs_api --no-run \
    --message-format=json 2>/dev/null |
    python3 -c 'import json,sys
for l in sys.stdin:
    m=json.loads(l)
    if m.get("reason")=="compiler-artifact" and m["target"]["name"]=="fs_api" and m.get("executable"):
        print(m["executable"])')

report=$TARGET/fs_uring_bench.md
{
    echo "# fs_api with tokio io_uring ($(date -u +%Y-%m-%dT%H:%MZ), $(git rev-parse --short HEAD))"
    echo
    echo "$(cargo tree -q -p spargio-bench -e normal -i tokio --depth 0 2>/dev/null | sed -n 1p || true)," \
        "--warm-up-time $WARMUP --measurement-time $MEASURE, load before: $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$report"

summarize() {
    python3 - "$TARGET/criterion" "$1" <<'PY'
import json, os, sys
root, label = sys.argv[1], sys.argv[2]
groups = ["fs_read_rtt_4k", "fs_read_throughput_4k_qd32", "fs_metadata_rtt",
          "fs_read_whole_file_4k", "fs_read_whole_file_1m"]
def fmt(ns):
    return f"{ns/1e3:.1f} µs" if ns < 1e6 else f"{ns/1e6:.2f} ms"
print(f"\n## {label}\n")
print("| group | variant | median | / spargio |")
print("|---|---|---:|---:|")
for g in groups:
    d = os.path.join(root, g)
    if not os.path.isdir(d):
        continue
    med = {}
    for v in sorted(os.listdir(d)):
        f = os.path.join(d, v, "new", "estimates.json")
        if os.path.exists(f):
            med[v] = json.load(open(f))["median"]["point_estimate"]
    base = next((m for v, m in med.items() if v.startswith("spargio")), None)
    for v, m in med.items():
        r = "" if base is None or v.startswith("spargio") else f"{m / base:.2f}×"
        print(f"| `{g}` | `{v}` | {fmt(m)} | {r} |")
PY
}

for round in $(seq 1 "$ROUNDS"); do
    echo "round $round/$ROUNDS" >&2
    bench --warm-up-time "$WARMUP" --measurement-time "$MEASURE" >&2
    summarize "round $round (load after: $(cut -d' ' -f1-3 /proc/loadavg))" | tee -a "$report"
done

if [ "$PERF" = 1 ]; then
    events=io_uring:io_uring_submit_req,io_uring:io_uring_queue_async_work
    for s in io_uring_enter pread64 preadv2 read lseek openat statx close epoll_wait futex; do
        events+=",syscalls:sys_enter_$s"
    done
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    perf stat -x, -e "$events" -o "$tmp/base" "$exe" --bench '^fs_read_rtt_4k/nothing$' >/dev/null 2>&1
    # group/variant and operations per iteration.
    list="fs_read_rtt_4k/tokio_uring_seek_read_qd1:256
fs_read_rtt_4k/tokio_uring_dup_lseek_read_qd1:256
fs_read_throughput_4k_qd32/tokio_uring_seek_read_qd32:1024
fs_read_throughput_4k_qd32/tokio_uring_dup_lseek_read_qd32:1024
fs_read_whole_file_4k/tokio_uring_fs_read:32
fs_read_whole_file_1m/tokio_uring_fs_read:32"
    for v in $VARIANTS; do
        case $v in
        fs_read_rtt_4k/* | fs_metadata_rtt/*) list+=$'\n'"$v:256" ;;
        fs_read_throughput_4k_qd32/*) list+=$'\n'"$v:1024" ;;
        *) list+=$'\n'"$v:32" ;;
        esac
    done
    {
        echo
        echo "## syscalls and SQEs per operation (perf stat, setup subtracted)"
        echo
        echo "| variant | SQEs | io-wq | $(echo "$events" | tr ',' '\n' | tail -n +3 | sed 's/syscalls:sys_enter_//' | paste -sd'|' | sed 's/|/ | /g') |"
        echo "|---|$(printf -- '---:|%.0s' $(seq 1 12))"
    } | tee -a "$report"
    while IFS=: read -r gv per; do
        perf stat -x, -e "$events" -o "$tmp/run" "$exe" --bench "^$gv\$" \
            --warm-up-time 1 --measurement-time 2 >/dev/null 2>&1
        python3 - "$tmp/base" "$tmp/run" "$TARGET/criterion/$gv/cpu.json" "$per" "$gv" <<'PY' | tee -a "$report"
import json, sys
def load(f):
    out = {}
    for l in open(f):
        p = l.strip().split(",")
        if len(p) > 3 and p[0].isdigit():
            out[p[2]] = int(p[0])
    return out
base, run = load(sys.argv[1]), load(sys.argv[2])
ops = json.load(open(sys.argv[3]))["iters"] * int(sys.argv[4])
cells = [f"{(run[k] - base.get(k, 0)) / ops:.2f}" for k in run]
print(f"| `{sys.argv[5]}` | " + " | ".join(cells) + " |")
PY
    done <<<"$list"
fi
echo "report: $report" >&2

#!/usr/bin/env bash
# Runs the soundness tests (drop mid-flight, fd reclaim, multishot, buffer
# rings, cancellation, panic safety) under valgrind's memcheck; fails on any
# user-space memory error. Kernel writes into user memory are invisible to
# valgrind (hence --undef-value-errors=no); the op-table audit covers those
# natively (docs/design/native-io.md).
set -euo pipefail
cd "$(dirname "$0")/.."

command -v valgrind >/dev/null || { apt-get update -qq && apt-get install -y -qq valgrind >/dev/null; }

# test binary : tests (each run alone, one thread)
CASES=(
  "fs_drop:dropped_pipe_reads_keep_their_buffer_until_the_cqe"
  "fs_drop:reads_dropped_from_outside_the_runtime_go_through_the_inbox"
  "fs_drop:dropped_file_reads_under_load_never_free_early"
  "rt_reclaim:opens_dropped_in_flight_close_the_fd"
  "rt_reclaim:opens_dropped_after_their_completion_close_the_fd"
  "rt_reclaim:a_queued_op_dropped_on_its_owner_shard_is_cancelled"
  "rt_reclaim:unsafe_ops_abandoned_after_completion_drop_their_output"
  "net_multishot:dropping_incoming_closes_connections_accepted_but_not_taken"
  "net_multishot:segments_carry_every_byte_in_order_until_eof"
  "net_multishot:segments_dropped_on_another_thread_go_back_to_the_pool"
  "net_multishot:stop_hands_back_what_was_received_and_leaves_the_rest_in_the_socket"
  "rt_panic:a_panicking_destructor_of_abandoned_op_state_costs_only_that_value"
  "rt_panic:a_panicking_waker_of_a_native_op_costs_only_that_wake"
  "net_multishot:held_segments_stall_the_kernel_until_given_back"
  "net_multishot:dropping_segment_streams_mid_flow_keeps_the_socket_usable"
  "fs_file:reads_into_a_slice_of_a_shrunk_buffer_stay_inside_the_allocation"
  "rt_reclaim:fd_producing_ops_under_random_timeouts_leak_nothing"
  "net_batch:a_batch_dropped_mid_flight_keeps_its_buffers_until_the_completion"
  "net_udp_offload:a_receive_dropped_mid_flight_then_a_datagram_arrives"
  "sync_cancel:"
  "net_cancel_safe:a_receive_dropped_after_its_data_arrived_hands_it_to_the_next_read"
  "net_cancel_safe:a_receive_dropped_in_flight_then_a_new_one_at_once_keep_the_order"
)

bins=$(printf '%s\n' "${CASES[@]}" | cut -d: -f1 | sort -u)
args=()
for b in $bins; do args+=(--test "$b"); done
cargo test -p spargio --no-run "${args[@]}" 2>/dev/null
declare -A path
for b in $bins; do
  path[$b]=$(cargo test -p spargio --no-run --test "$b" --message-format=json 2>/dev/null \
    | grep -o '"executable":"[^"]*"' | cut -d'"' -f4 | tail -1)
done

# valgrind runs one thread at a time and does not let others run while
# one blocks in io_uring_enter: bound every blocking enter (see
# driver/ring.rs, `max_block`).
export SPARGIO_MAX_BLOCK_US=2000

failed=0
# Every case on both backends: io_uring (the default where allowed) and
# epoll, whose driver runs the same operations itself.
for backend in auto epoll; do
  export SPARGIO_BACKEND=$backend
  for case in "${CASES[@]}"; do
    bin=${case%%:*}; name=${case#*:}
    filter=()
    [ -n "$name" ] && filter=(--exact "$name")
    echo "== valgrind ($backend) $bin ${name:-(all)}"
    if ! timeout 600 valgrind -q --error-exitcode=99 --undef-value-errors=no \
        "${path[$bin]}" --test-threads=1 "${filter[@]}" >/tmp/valgrind-$bin.log 2>&1; then
      echo "FAILED ($backend): $bin $name"; tail -40 /tmp/valgrind-$bin.log; failed=1
    fi
  done
done
exit $failed

//! `RuntimeStats` read the way the reference crate reads it: flat totals
//! (`stats.steal_attempts`), per-shard vectors as fields, and the counters
//! it names, each moved by the event it counts.

mod common;

use std::time::{Duration, Instant};

use spargio::fs::File;
use spargio::{block_on, RuntimeStats, SendError};

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < common::HANG, "never happened: {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn totals_read_flat_and_per_shard_vectors_are_fields() {
    let rt = common::runtime(3);
    let h = rt.handle();
    let jobs: Vec<_> = (0..10)
        .map(|i| h.spawn_stealable(async move { i }).unwrap())
        .collect();
    for job in jobs {
        block_on(job).unwrap();
    }
    let stats: RuntimeStats = h.stats_snapshot();
    assert_eq!(stats.spawn_stealable, 10);
    assert_eq!(stats.spawn_stealable, stats.totals.spawn_stealable);
    assert_eq!(stats.stealable_stolen, stats.totals.stealable_stolen);
    assert_eq!(stats.shard_command_depths.len(), 3);
    assert_eq!(stats.pending_native_ops_by_shard.len(), 3);
    assert_eq!(
        stats.shard_command_depths.iter().sum::<usize>(),
        stats.total_command_depth()
    );
    assert_eq!(
        stats
            .pending_native_ops_by_shard
            .iter()
            .copied()
            .max()
            .unwrap(),
        stats.max_pending_native_ops_by_shard()
    );
}

#[test]
fn pending_native_ops_by_shard_counts_operations_in_flight() {
    let rt = common::runtime(2);
    let h = rt.handle();
    let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
    let a = spargio::net::UnixStream::from_std(&h, a).unwrap();
    let session = a.session_shard();
    // A receive nobody answers stays in flight on the session shard.
    let pending = h.spawn_stealable(async move { a.recv(16).await }).unwrap();
    wait_until("the receive is in flight", || {
        h.stats_snapshot().pending_native_ops_by_shard[session] == 1
    });
    pending.abort();
    wait_until("the cancelled receive completes", || {
        h.stats_snapshot().pending_native_ops_by_shard[session] == 0
    });
}

#[test]
fn stealable_wakes_are_sent_or_coalesced() {
    let rt = common::runtime(2);
    let h = rt.handle();
    let mut injected = 0u64;
    // Spawns from outside go to a shard's injector; each either rings the
    // shard (it was parked) or rides on a wake already under way.
    // Idle shards park within moments; a spawn after a pause finds its
    // target parked (retried, bounded, in case it was not yet).
    let start = Instant::now();
    while h.stats_snapshot().stealable_wake_sent == 0 {
        assert!(start.elapsed() < common::HANG, "no spawn ever rang a shard");
        std::thread::sleep(Duration::from_millis(5));
        block_on(h.spawn_stealable(async {}).unwrap()).unwrap();
        injected += 1;
    }
    let burst: Vec<_> = (0..100)
        .map(|_| h.spawn_stealable(async {}).unwrap())
        .collect();
    injected += burst.len() as u64;
    for job in burst {
        block_on(job).unwrap();
    }
    let stats = h.stats_snapshot();
    assert!(stats.stealable_wake_sent >= 1);
    assert_eq!(
        stats.stealable_wake_sent + stats.stealable_wake_coalesced,
        injected,
        "{stats:?}"
    );
}

#[test]
fn refused_sends_count_as_failed() {
    let rt = common::runtime(2);
    let h = rt.handle();
    assert_eq!(
        h.remote(7).send_raw_nowait(1, 1),
        Err(SendError::InvalidShard(7))
    );
    // From outside the runtime the failure is counted on shard 0.
    assert_eq!(h.stats_snapshot().shards[0].counters.ring_msgs_failed, 1);
    let on_shard = h
        .spawn_pinned(1, async {
            let ctx = spargio::ShardCtx::current().unwrap();
            ctx.send_raw_nowait(9, 1, 1)
        })
        .unwrap();
    assert_eq!(block_on(on_shard).unwrap(), Err(SendError::InvalidShard(9)));
    let stats = h.stats_snapshot();
    assert_eq!(stats.shards[1].counters.ring_msgs_failed, 1);
    assert_eq!(stats.ring_msgs_failed, 2);
    assert_eq!(stats.ring_msgs_backpressure, 0, "not backpressure");
}

#[test]
fn failed_steal_scans_record_their_longest_streak() {
    let rt = common::runtime(2);
    let h = rt.handle();
    // A shard that runs out of work scans the other for some before it
    // parks; with nothing anywhere every scan fails.
    wait_until("failed scans", || {
        block_on(h.spawn_pinned(0, async {}).unwrap()).unwrap();
        h.stats_snapshot().steal_failed_streak_max >= 2
    });
    let stats = h.stats_snapshot();
    assert!(
        stats.steal_failed_streak_max <= stats.steal_scans,
        "{stats:?}"
    );
    let per_shard = stats
        .shards
        .iter()
        .map(|s| s.counters.steal_failed_streak_max)
        .max()
        .unwrap();
    assert_eq!(
        stats.steal_failed_streak_max, per_shard,
        "the total is the longest streak of any shard, not a sum"
    );
}

#[test]
fn native_ops_count_their_route() {
    let dir = std::env::temp_dir().join(format!("spargio-rt-stats-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let rt = common::runtime(2);
    let h = rt.handle();

    // From outside the runtime: the op crosses to a shard in an envelope.
    let before = h.stats_snapshot();
    let file = block_on(File::create(&h, dir.join("f"))).unwrap();
    let after = h.stats_snapshot();
    assert!(after.native_any_envelope_submitted > before.native_any_envelope_submitted);

    // From a task: straight into its own shard's ring.
    let before = after;
    let job = h
        .spawn_pinned(1, async move {
            file.write_all_at(0, b"local").await.unwrap();
            file
        })
        .unwrap();
    let file = block_on(job).unwrap();
    let after = h.stats_snapshot();
    assert!(
        after.shards[1].counters.native_any_local_fastpath_submitted
            > before.shards[1]
                .counters
                .native_any_local_fastpath_submitted
    );
    drop(file);

    // A stream's op from a task on its session shard: the direct path.
    let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
    let a = spargio::net::UnixStream::from_std(&h, a).unwrap();
    let before = h.stats_snapshot().native_any_local_direct_submitted;
    std::io::Write::write_all(&mut &b, b"direct").unwrap();
    let a2 = a.clone();
    let job = a
        .spawn_on_session(&h, async move { a2.recv(16).await })
        .unwrap();
    assert_eq!(block_on(job).unwrap().unwrap(), b"direct");
    let after = h.stats_snapshot();
    assert!(
        after.native_any_local_direct_submitted > before,
        "{after:?}"
    );
    assert!(
        after.native_any_local_direct_submitted <= after.native_any_local_fastpath_submitted,
        "direct submissions are local ones"
    );
}

#[test]
fn live_tasks_counts_tasks_until_they_end() {
    let rt = common::runtime(2);
    let h = rt.handle();
    assert_eq!(h.stats_snapshot().live_tasks(), 0);
    let waiting: Vec<_> = (0..2)
        .map(|shard| {
            h.spawn_pinned(shard, async { std::future::pending::<()>().await })
                .unwrap()
        })
        .collect();
    let stats = h.stats_snapshot();
    assert_eq!(stats.live_tasks(), 2);
    assert_eq!(
        stats
            .shards
            .iter()
            .map(|s| s.live_tasks)
            .collect::<Vec<_>>(),
        vec![1, 1]
    );
    for task in &waiting {
        task.abort();
    }
    wait_until("aborted tasks end", || h.stats_snapshot().live_tasks() == 0);
    let done = h.spawn_stealable(async { 1 }).unwrap();
    assert_eq!(block_on(done).unwrap(), 1);
    wait_until("a finished task ends", || {
        h.stats_snapshot().live_tasks() == 0
    });
}

#[test]
fn time_spent_parked_is_counted() {
    let rt = common::runtime(2);
    let h = rt.handle();
    // An idle runtime: both shards park for (nearly) all of it.
    std::thread::sleep(std::time::Duration::from_millis(100));
    let done = h.spawn_pinned(1, async { 1 }).unwrap();
    assert_eq!(block_on(done).unwrap(), 1);
    let stats = h.stats_snapshot();
    for shard in &stats.shards {
        assert!(
            shard.counters.parked_ns >= 50_000_000,
            "{:?}",
            shard.counters
        );
    }
}

#[test]
fn poll_times_are_sampled_into_power_of_two_buckets() {
    let rt = common::runtime(1);
    let h = rt.handle();
    // 640 polls of about 200 µs: one in 64 is timed, so about ten land in
    // the bucket below 256 µs (some a bucket above, if preempted).
    let task = h
        .spawn_pinned(0, async {
            for _ in 0..640 {
                let start = std::time::Instant::now();
                while start.elapsed() < std::time::Duration::from_micros(200) {
                    std::hint::spin_loop();
                }
                common::yield_now().await;
            }
        })
        .unwrap();
    block_on(task).unwrap();
    let stats = h.stats_snapshot();
    let buckets = stats.shards[0].poll_time_buckets;
    assert_eq!(buckets.len(), spargio::POLL_TIME_BUCKETS);
    let sampled: u64 = buckets.iter().sum();
    assert!(sampled >= 9, "{buckets:?}");
    let long: u64 = buckets[8..].iter().sum();
    assert!(long >= 9, "polls of 200 µs sampled as shorter: {buckets:?}");
    assert!(stats.shards[0].poll_time_sum_ns >= 9 * 200_000);
}

#[test]
fn operations_in_flight_are_counted_by_opcode() {
    let rt = common::runtime(2);
    let h = rt.handle();
    let mut peers = Vec::new();
    let mut receives = Vec::new();
    for _ in 0..3 {
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        let a = spargio::net::UnixStream::from_std(&h, a).unwrap();
        receives.push(h.spawn_stealable(async move { a.recv(16).await }).unwrap());
        peers.push(b);
    }
    let h2 = h.clone();
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    let accept = h
        .spawn_pinned(1, async move {
            let listener = spargio::net::TcpListener::bind(&h2, "127.0.0.1:0")
                .await
                .unwrap();
            addr_tx.send(listener.local_addr().unwrap()).unwrap();
            listener.accept().await.map(|_| ())
        })
        .unwrap();
    let addr = addr_rx.recv_timeout(common::HANG).unwrap();
    wait_until("three receives and an accept in flight", || {
        h.stats_snapshot().ops_in_flight() == [("recv", 3), ("accept", 1)]
    });
    let stats = h.stats_snapshot();
    for shard in &stats.shards {
        let sum: usize = shard.ops_in_flight.iter().map(|(_, n)| n).sum();
        assert_eq!(sum, shard.pending_native_ops, "{shard:?}");
    }
    assert!(stats
        .to_prometheus_text()
        .contains("spargio_ops_in_flight{shard=\"1\",op=\"accept\"} 1"));

    // Each ends as the peer acts; the counts follow.
    let _client = std::net::TcpStream::connect(addr).unwrap();
    block_on(accept).unwrap().unwrap();
    for (peer, recv) in peers.iter_mut().zip(receives) {
        use std::io::Write;
        peer.write_all(b"x").unwrap();
        assert_eq!(block_on(recv).unwrap().unwrap(), b"x");
    }
    wait_until("nothing in flight", || {
        h.stats_snapshot().ops_in_flight().is_empty()
    });
}

#[test]
fn the_local_queue_depth_shows_pinned_tasks_waiting_on_their_shard() {
    common::within_hang_bound(|| {
        // A pass runs at most 8 tasks; each queued task takes 2 ms, so a
        // hundred of them keep the shard's own queue busy for a while.
        let rt = spargio::Runtime::builder()
            .shards(2)
            .steal_budget(8)
            .build()
            .unwrap();
        let h = rt.handle();
        let h2 = h.clone();
        let spawner = h
            .spawn_pinned(1, async move {
                (0..100)
                    .map(|_| {
                        h2.spawn_pinned(1, async {
                            std::thread::sleep(Duration::from_millis(2));
                        })
                        .unwrap()
                    })
                    .collect::<Vec<_>>()
            })
            .unwrap();
        let tasks = block_on(spawner).unwrap();
        wait_until("pinned tasks seen queued on shard 1", || {
            let stats = h.stats_snapshot();
            assert_eq!(stats.shards[0].local_queue_depth, 0);
            stats.shards[1].local_queue_depth > 0
        });
        assert!(h
            .stats_snapshot()
            .to_prometheus_text()
            .contains("# TYPE spargio_local_queue_depth gauge"));
        for t in tasks {
            block_on(t).unwrap();
        }
        wait_until("the queue drained", || {
            h.stats_snapshot().shards[1].local_queue_depth == 0
        });
    });
}

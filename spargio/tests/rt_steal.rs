//! Work stealing under skew: stealable work leaves a blocked shard, pinned
//! work never does.

mod common;

use std::sync::mpsc;
use std::time::Duration;

use common::{runtime, shard, within_hang_bound};
use spargio::block_on;

/// Shard 0 queues stealable tasks locally, then blocks its thread until all
/// of them have run. They can only run if another shard steals them.
#[test]
fn stealable_work_moves_off_a_blocked_shard() {
    let rt = runtime(2);
    let h = rt.handle();
    let h2 = h.clone();
    let ran_on = within_hang_bound(move || {
        block_on(
            h2.clone()
                .spawn_pinned(0, async move {
                    let (tx, rx) = mpsc::channel();
                    for _ in 0..64 {
                        let tx = tx.clone();
                        h2.spawn_stealable_on(0, async move {
                            tx.send(shard()).unwrap();
                        })
                        .unwrap();
                    }
                    // Block shard 0's thread (on purpose) until every task
                    // has reported; only shard 1 can be running them.
                    (0..64)
                        .map(|_| {
                            rx.recv_timeout(common::HANG)
                                .expect("stealable task stranded")
                        })
                        .collect::<Vec<_>>()
                })
                .unwrap(),
        )
        .unwrap()
    });
    assert!(ran_on.iter().all(|&s| s == 1), "{ran_on:?}");
    let stats = h.stats_snapshot();
    assert!(stats.totals.stealable_stolen > 0 || stats.shards[1].counters.stealable_executed >= 64);
    // Every task steered to shard 0 left it by a steal (the rest were
    // steered to shard 1 at spawn), and steals out of shard 0 are steals
    // into shard 1, task for task.
    let out = stats.shards[0].counters.stealable_stolen_from;
    assert_eq!(out, stats.shards[0].counters.spawn_stealable, "{stats:?}");
    assert_eq!(stats.shards[1].counters.stealable_stolen, out);
    assert_eq!(stats.shards[1].counters.stealable_stolen_from, 0);
}

/// A pinned task for a blocked shard waits for it; it is never run by the
/// idle shard.
#[test]
fn pinned_work_never_migrates() {
    let rt = runtime(2);
    let h = rt.handle();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let blocker = h
        .spawn_pinned(0, async move {
            release_rx.recv_timeout(common::HANG).unwrap();
        })
        .unwrap();
    let pinned: Vec<_> = (0..16)
        .map(|_| h.spawn_pinned(0, async { shard() }).unwrap())
        .collect();
    // Give shard 1 every chance to (wrongly) take them.
    std::thread::sleep(Duration::from_millis(50));
    assert!(
        pinned.iter().all(|j| !j.is_finished()),
        "a pinned task ran while its shard was blocked"
    );
    release_tx.send(()).unwrap();
    block_on(blocker).unwrap();
    for j in pinned {
        assert_eq!(block_on(j).unwrap(), 0);
    }
}

/// Skewed fan-out: a request spawns many stealable branches from one shard;
/// both shards end up running some.
#[test]
fn skewed_fanout_uses_every_shard() {
    let rt = runtime(2);
    let h = rt.handle();
    let h2 = h.clone();
    let shards = block_on(
        h.spawn_pinned(0, async move {
            let branches: Vec<_> = (0..256)
                .map(|_| {
                    h2.spawn_stealable(async {
                        // Enough work that a single shard cannot drain the
                        // queue before the other one looks.
                        let mut x = 1u64;
                        for i in 0..20_000u64 {
                            x = std::hint::black_box(
                                x.wrapping_mul(6364136223846793005).wrapping_add(i),
                            );
                        }
                        shard()
                    })
                    .unwrap()
                })
                .collect();
            let mut seen = [0usize; 2];
            for b in branches {
                seen[b.await.unwrap()] += 1;
            }
            seen
        })
        .unwrap(),
    )
    .unwrap();
    assert!(shards[0] > 0 && shards[1] > 0, "{shards:?}");
}

/// A stealable task woken (not spawned) by a task that then blocks its
/// thread sits in that shard's LIFO slot; an idle shard must rescue it.
#[test]
fn a_woken_task_in_the_lifo_slot_of_a_blocked_shard_is_rescued() {
    let rt = runtime(2);
    let h = rt.handle();
    let go = common::Signal::default();
    let go2 = go.clone();
    let (tx, rx) = mpsc::channel();
    // The stealable waiter, parked on `go`.
    let waiter = h
        .spawn_stealable_on(0, async move {
            go2.wait().await;
            shard()
        })
        .unwrap();
    while h.stats_snapshot().totals.tasks_polled == 0 {
        std::thread::yield_now();
    }
    // A pinned task on shard 0 wakes it (into shard 0's LIFO slot), then
    // blocks shard 0 until the waiter has finished somewhere else.
    let blocker = h
        .spawn_pinned(0, async move {
            go.set();
            let ran_on: usize = rx.recv_timeout(common::HANG).expect("woken task stranded");
            ran_on
        })
        .unwrap();
    let ran_on = within_hang_bound(move || block_on(waiter).unwrap());
    tx.send(ran_on).unwrap();
    assert_eq!(within_hang_bound(move || block_on(blocker).unwrap()), 1);
}

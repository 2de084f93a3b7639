//! The guide's chapter on the runtime model (`book/src/runtime_model.md`):
//! every way to place a task, and what the stats say afterwards.
//!
//! ```text
//! cargo run -p spargio --example book_placement
//! ```

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use spargio::{Runtime, RuntimeBuilder, RuntimeError, ShardCtx, TaskPlacement};

/// CPU work that the optimiser cannot remove.
fn spin(iters: u64) -> u64 {
    let mut x = iters | 1;
    for _ in 0..iters {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    x
}

fn shard() -> usize {
    ShardCtx::current().expect("on a shard").shard_id()
}

// ANCHOR: tuning
/// A runtime for a latency-sensitive service on a dedicated machine.
fn tuned() -> Result<(), spargio::RuntimeError> {
    let rt = RuntimeBuilder::new()
        .shards(2)
        .thread_name("api")
        .thread_affinity(true)
        .ring_entries(1024)
        .msg_ring_queue_capacity(16 * 1024)
        .spin_before_park(Duration::from_micros(100))
        .stealable_queue_capacity(10_000)
        .steal_batch_size(16)
        .max_blocking_threads(64)
        .build()?;
    let ring = &rt.handle().stats_snapshot().shards[0].ring;
    println!(
        "ring: {} SQ entries, single_issuer={}, defer_taskrun={}, coop_taskrun={}",
        ring.sq_entries, ring.single_issuer, ring.defer_taskrun, ring.coop_taskrun
    );

    // A value the runtime cannot use is an error naming the knob.
    let err = RuntimeBuilder::new().steal_budget(0).build().unwrap_err();
    assert!(matches!(
        err,
        RuntimeError::InvalidConfig {
            knob: "steal_budget",
            ..
        }
    ));
    Ok(())
}
// ANCHOR_END: tuning

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // ANCHOR: build
    let rt = Runtime::builder().shards(4).build()?;
    let handle = rt.handle();
    // ANCHOR_END: build

    // ANCHOR: pinned
    // Pinned: runs on shard 2 from its first poll to its last.
    let on = handle.spawn_pinned(2, async { shard() })?;
    assert_eq!(spargio::block_on(on)?, 2);
    // ANCHOR_END: pinned

    // ANCHOR: stealable
    // Stealable: each task goes to the least-loaded shard at spawn time;
    // a shard that runs out of work takes tasks queued on busier ones.
    let tasks: Vec<_> = (0..64u64)
        .map(|i| handle.spawn_stealable(async move { spin(20_000 + i) }))
        .collect::<Result<_, _>>()?;
    for task in tasks {
        spargio::block_on(task)?;
    }
    // A preferred shard: shard 3 unless it is clearly busier than the rest.
    let hinted = handle.spawn_stealable_on(3, async { shard() })?;
    println!("hinted task ran on shard {}", spargio::block_on(hinted)?);
    // ANCHOR_END: stealable

    // ANCHOR: placement
    // Sticky keys: the same key lands on the same shard (here: a tenant id),
    // so per-key state can live on one shard without locks.
    let a = handle.spawn_with_placement(TaskPlacement::Sticky(42), async { shard() })?;
    let b = handle.spawn_with_placement(TaskPlacement::Sticky(42), async { shard() })?;
    assert_eq!(spargio::block_on(a)?, spargio::block_on(b)?);
    // Round-robin: pinned, to the next shard in rotation.
    let rr = handle.spawn_with_placement(TaskPlacement::RoundRobin, async { shard() })?;
    spargio::block_on(rr)?;
    // ANCHOR_END: placement

    // ANCHOR: local
    // `!Send` state: the closure runs on shard 1 and builds the future
    // there, so it may hold `Rc` and `RefCell` across awaits.
    let local = handle.spawn_local_on(1, |ctx| async move {
        let seen = Rc::new(RefCell::new(Vec::new()));
        for i in 0..3 {
            seen.borrow_mut().push(i);
            spargio::time::sleep(Duration::from_millis(1)).await;
        }
        let len = seen.borrow().len();
        (ctx.shard_id(), len)
    })?;
    assert_eq!(spargio::block_on(local)?, (1, 3));
    // ANCHOR_END: local

    // ANCHOR: blocking
    // Blocking calls go to the blocking pool, never onto a shard.
    let listing = handle.spawn_blocking(|| std::fs::read_dir("/").map(|d| d.count()))?;
    println!("/ has {} entries", spargio::block_on(listing)??);
    // ANCHOR_END: blocking

    // ANCHOR: abort
    // Aborting drops the task's future on its shard; the handle reports it.
    let forever = handle.spawn_stealable(async {
        spargio::time::sleep(Duration::from_secs(3600)).await;
    })?;
    forever.abort();
    let err = spargio::block_on(forever).unwrap_err();
    assert!(err.is_cancelled());
    // ANCHOR_END: abort

    // ANCHOR: stats
    let stats = handle.stats_snapshot();
    println!(
        "stealable spawned {}, stolen {}, parks {}",
        stats.totals.spawn_stealable, stats.totals.stealable_stolen, stats.totals.parks
    );
    for (i, s) in stats.shards.iter().enumerate() {
        println!(
            "  shard {i}: {} polls, ring: single_issuer={} defer_taskrun={} msg_ring={}",
            s.counters.tasks_polled, s.ring.single_issuer, s.ring.defer_taskrun, s.ring.msg_ring
        );
    }
    // ANCHOR_END: stats

    // ANCHOR: shutdown
    // Unfinished tasks are dropped on their shards; their handles report
    // cancellation. Dropping `rt` does the same, blocking.
    spargio::block_on(rt.shutdown());
    // ANCHOR_END: shutdown
    tuned()?;
    Ok(())
}

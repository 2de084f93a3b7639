//! Where tasks run: pinned, round-robin, sticky, local, stealable hints.

mod common;

use std::collections::HashSet;
use std::rc::Rc;

use common::{pin, runtime, shard};
use spargio::{block_on, RuntimeError, TaskPlacement};

#[test]
fn pinned_task_runs_on_its_shard() {
    let rt = runtime(3);
    let h = rt.handle();
    for s in 0..3 {
        let ran = block_on(h.spawn_pinned(s, async { shard() }).unwrap()).unwrap();
        assert_eq!(ran, s);
    }
}

#[test]
fn pinned_task_stays_on_its_shard_across_awaits() {
    let rt = runtime(2);
    let h = rt.handle();
    let seen = block_on(
        h.spawn_pinned(1, async {
            let mut seen = HashSet::new();
            for _ in 0..100 {
                seen.insert(shard());
                common::yield_now().await;
            }
            seen
        })
        .unwrap(),
    )
    .unwrap();
    assert_eq!(seen, HashSet::from([1]));
}

#[test]
fn round_robin_visits_every_shard() {
    let rt = runtime(3);
    let h = rt.handle();
    let shards: HashSet<usize> = (0..9)
        .map(|_| {
            h.spawn_with_placement(TaskPlacement::RoundRobin, async { shard() })
                .unwrap()
        })
        .map(|j| block_on(j).unwrap())
        .collect();
    assert_eq!(shards, HashSet::from([0, 1, 2]));
}

#[test]
fn sticky_key_always_lands_on_the_same_shard() {
    let rt = runtime(4);
    let h = rt.handle();
    let mut distinct = HashSet::new();
    for key in 0..32u64 {
        let first = block_on(
            h.spawn_with_placement(TaskPlacement::Sticky(key), async { shard() })
                .unwrap(),
        )
        .unwrap();
        for _ in 0..3 {
            let again = block_on(
                h.spawn_with_placement(TaskPlacement::Sticky(key), async { shard() })
                    .unwrap(),
            )
            .unwrap();
            assert_eq!(first, again, "key {key} moved");
        }
        distinct.insert(first);
    }
    assert!(distinct.len() > 1, "32 keys all on one shard");
}

#[test]
fn local_task_may_hold_rc_and_runs_on_its_shard() {
    let rt = runtime(2);
    let h = rt.handle();
    let out = block_on(
        h.spawn_local_on(1, |ctx| async move {
            let rc = Rc::new(std::cell::RefCell::new(Vec::new()));
            let rc2 = rc.clone();
            let inner = ctx.spawn_local(async move {
                rc2.borrow_mut().push(shard());
            });
            inner.unwrap().await.unwrap();
            common::yield_now().await;
            rc.borrow_mut().push(shard());
            let v = rc.borrow().clone();
            v
        })
        .unwrap(),
    )
    .unwrap();
    assert_eq!(out, vec![1, 1]);
}

#[test]
fn invalid_shard_is_an_error_not_a_panic() {
    let rt = runtime(2);
    let h = rt.handle();
    assert!(matches!(
        h.spawn_pinned(2, async {}),
        Err(RuntimeError::InvalidShard(2))
    ));
    assert!(matches!(
        h.spawn_stealable_on(9, async {}),
        Err(RuntimeError::InvalidShard(9))
    ));
    assert!(matches!(
        h.spawn_local_on(5, |_| async {}),
        Err(RuntimeError::InvalidShard(5))
    ));
    assert!(matches!(
        h.spawn_with_placement(TaskPlacement::Pinned(7), async {}),
        Err(RuntimeError::InvalidShard(7))
    ));
}

#[test]
fn spawns_from_foreign_threads_run() {
    let rt = runtime(2);
    let h = rt.handle();
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let h = h.clone();
            std::thread::spawn(move || {
                let jobs: Vec<_> = (0..250u64)
                    .map(|i| h.spawn_stealable(async move { t * 1000 + i }).unwrap())
                    .collect();
                jobs.into_iter().map(|j| block_on(j).unwrap()).sum::<u64>()
            })
        })
        .collect();
    let total: u64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
    let want: u64 = (0..4u64)
        .map(|t| (0..250u64).map(|i| t * 1000 + i).sum::<u64>())
        .sum();
    assert_eq!(total, want);
}

#[test]
fn stealable_preferred_shard_receives_the_submission_when_idle() {
    let rt = runtime(2);
    let h = rt.handle();
    // Both shards idle: the hint decides where the task is submitted (an
    // idle shard may still steal it before it runs; that is the point).
    for s in [0, 1, 1, 0, 1] {
        let before = h.stats_snapshot().shards[s].counters.spawn_stealable;
        block_on(h.spawn_stealable_on(s, async {}).unwrap()).unwrap();
        let after = h.stats_snapshot().shards[s].counters.spawn_stealable;
        assert_eq!(after, before + 1, "hint {s} not honoured");
    }
}

#[test]
fn a_task_spawning_ten_thousand_children_just_works() {
    let rt = runtime(2);
    let h = rt.handle();
    let h2 = h.clone();
    let total = block_on(
        h.spawn_stealable(async move {
            let children: Vec<_> = (0..10_000u64)
                .map(|i| h2.spawn_stealable(async move { i }).unwrap())
                .collect();
            let mut sum = 0;
            for c in children {
                sum += c.await.unwrap();
            }
            sum
        })
        .unwrap(),
    )
    .unwrap();
    assert_eq!(total, (0..10_000u64).sum::<u64>());
}

#[test]
fn a_stealable_spawn_from_outside_goes_to_the_shard_on_the_callers_cpu() {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cpus < 2 {
        eprintln!("SKIP: needs two CPUs, this process may use {cpus}");
        return;
    }
    let rt = spargio::Runtime::builder()
        .shards(2)
        .thread_affinity(true)
        .build()
        .unwrap();
    let h = rt.handle();
    // `build` does not wait for the shards: let each run once, so that each
    // has published the CPU it is pinned to.
    for s in 0..2 {
        block_on(h.spawn_pinned(s, async {}).unwrap()).unwrap();
    }
    // Both shards idle, so the loads tie: the caller's CPU decides. Shard
    // `i` is pinned to CPU `i`. A spawning thread per CPU, so that its
    // affinity is its own.
    for cpu in [0, 1, 1, 0, 1, 0, 0, 1] {
        let h = h.clone();
        let (before, after) = std::thread::spawn(move || {
            pin(cpu);
            let count = |h: &spargio::RuntimeHandle| {
                h.stats_snapshot().shards[cpu].counters.spawn_stealable
            };
            let before = count(&h);
            block_on(h.spawn_stealable(async {}).unwrap()).unwrap();
            (before, count(&h))
        })
        .join()
        .unwrap();
        assert_eq!(after, before + 1, "a spawn from CPU {cpu} went elsewhere");
    }
}

/// A future this large, built on a shard thread (2 MiB of stack), fits
/// once on the stack but not once per layer of a spawn path: every spawn
/// path moves a large future to the heap where it enters.
const BIG: usize = 384 * 1024;

fn big_future(seed: u8) -> impl std::future::Future<Output = usize> + Send + 'static {
    let block = [seed; BIG];
    async move {
        common::yield_now().await;
        let _on_a_shard = shard();
        block.iter().map(|&b| b as usize).sum::<usize>()
    }
}

// Each path in a frame of its own, which holds the future only while
// it spawns it (a debug build gives every temporary its own stack slot).
#[inline(never)]
fn big_pinned(h: &spargio::RuntimeHandle) -> spargio::JoinHandle<usize> {
    h.spawn_pinned(1, big_future(1)).unwrap()
}
#[inline(never)]
fn big_stealable(h: &spargio::RuntimeHandle) -> spargio::JoinHandle<usize> {
    h.spawn_stealable(big_future(2)).unwrap()
}
#[inline(never)]
fn big_stealable_on(h: &spargio::RuntimeHandle) -> spargio::JoinHandle<usize> {
    h.spawn_stealable_on(1, big_future(3)).unwrap()
}
#[inline(never)]
fn big_placed(h: &spargio::RuntimeHandle) -> spargio::JoinHandle<usize> {
    h.spawn_with_placement(TaskPlacement::RoundRobin, big_future(4))
        .unwrap()
}
#[inline(never)]
fn big_local(ctx: &spargio::ShardCtx) -> spargio::JoinHandle<usize> {
    ctx.spawn_local(big_future(5)).unwrap()
}
#[inline(never)]
fn big_member(group: &spargio::sync::TaskGroup) -> spargio::sync::TaskGroupJoinHandle<usize> {
    group
        .spawn_with_placement(TaskPlacement::Pinned(1), big_future(6))
        .unwrap()
}

#[test]
fn large_futures_spawn_from_a_shard_through_every_spawn_path() {
    let rt = runtime(2);
    let h = rt.handle();
    let sums = block_on(
        h.spawn_pinned(0, async move {
            let ctx = spargio::ShardCtx::current().expect("on a shard");
            let h = ctx.handle();
            let group = spargio::sync::TaskGroup::new(&h);
            vec![
                big_pinned(&h).await.unwrap(),
                big_stealable(&h).await.unwrap(),
                big_stealable_on(&h).await.unwrap(),
                big_placed(&h).await.unwrap(),
                big_local(&ctx).await.unwrap(),
                big_member(&group).await.unwrap(),
            ]
        })
        .unwrap(),
    )
    .unwrap();
    let want: Vec<usize> = (1..=6).map(|s| s * BIG).collect();
    assert_eq!(sums, want);
}

/// Large enough to overflow a shard's stack through a spawn path that
/// holds it more than once, small enough to be built once.
const HUGE: usize = 768 * 1024;

#[inline(never)]
fn huge_local_on(h: &spargio::RuntimeHandle) -> spargio::JoinHandle<usize> {
    h.spawn_local_on(1, |_ctx| {
        let block = [7u8; HUGE];
        async move {
            common::yield_now().await;
            block.iter().map(|&b| b as usize).sum::<usize>()
        }
    })
    .unwrap()
}

/// A closure this large is built twice in its caller's frame in a debug
/// build (the array, then the closure that takes it).
const HUGE_CLOSURE: usize = BIG;

#[inline(never)]
fn huge_blocking(h: &spargio::RuntimeHandle) -> spargio::JoinHandle<usize> {
    let block = [8u8; HUGE_CLOSURE];
    h.spawn_blocking(move || block.iter().map(|&b| b as usize).sum::<usize>())
        .unwrap()
}

/// Runs `spawn` on shard 0 and returns what its task returns.
fn on_shard_0(spawn: fn(&spargio::RuntimeHandle) -> spargio::JoinHandle<usize>) -> usize {
    let rt = runtime(2);
    let h = rt.handle();
    block_on(
        h.spawn_pinned(0, async move {
            let h = spargio::ShardCtx::current().expect("on a shard").handle();
            spawn(&h).await.unwrap()
        })
        .unwrap(),
    )
    .unwrap()
}

#[test]
fn a_huge_future_spawns_local_on_another_shard_from_a_shard() {
    assert_eq!(on_shard_0(huge_local_on), 7 * HUGE);
}

#[test]
fn a_huge_closure_spawns_blocking_from_a_shard() {
    assert_eq!(on_shard_0(huge_blocking), 8 * HUGE_CLOSURE);
}

//! Fan-out/fan-in of CPU-bound branches over a work-stealing pool.
//!
//! Each iteration runs 64 requests one after another; each request spawns
//! 16 stealable branches of [`spin_work`] and awaits all of them.
//!
//! * `fanout_fanin_balanced`: every branch is `spin_work(2000)`.
//! * `fanout_fanin_skewed`: 15 branches of `spin_work(500)` and one hot
//!   branch of `spin_work(20_000)` at index `request % 16`.
//!
//! Variants: `spargio_4` / `tokio_mt_4` (4 workers) and `spargio_ncpu` /
//! `tokio_mt_ncpu` (`std::thread::available_parallelism()` workers).

#[path = "common/cpu.rs"]
mod cpu;

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use spargio::{Runtime, RuntimeHandle};
use spargio_bench::{fanout_branch_iters, spin_work, FANOUT_BRANCHES, FANOUT_REQUESTS};

/// The sum of every branch's result, to check each runtime did all the
/// work.
fn expected(skewed: bool) -> u64 {
    let mut acc = 0u64;
    for request in 0..FANOUT_REQUESTS {
        for branch in 0..FANOUT_BRANCHES {
            acc = acc.wrapping_add(spin_work(fanout_branch_iters(skewed, request, branch)));
        }
    }
    acc
}

/// spargio: the driver is a stealable task; branches are stealable tasks
/// spawned through a clone of the handle; the benchmark thread waits with
/// `spargio::block_on`.
fn spargio_fanout(handle: &RuntimeHandle, skewed: bool) -> u64 {
    let h = handle.clone();
    let driver = handle
        .spawn_stealable(async move {
            let mut acc = 0u64;
            for request in 0..FANOUT_REQUESTS {
                let branches: Vec<_> = (0..FANOUT_BRANCHES)
                    .map(|branch| {
                        let iters = fanout_branch_iters(skewed, request, branch);
                        h.spawn_stealable(async move { spin_work(iters) })
                            .expect("spawn branch")
                    })
                    .collect();
                for branch in branches {
                    acc = acc.wrapping_add(branch.await.expect("branch task"));
                }
            }
            acc
        })
        .expect("spawn driver");
    spargio::block_on(driver).expect("driver task")
}

/// tokio: `rt.block_on` of a driver that `tokio::spawn`s the branches.
fn tokio_fanout(rt: &tokio::runtime::Runtime, skewed: bool) -> u64 {
    rt.block_on(async move {
        let mut acc = 0u64;
        for request in 0..FANOUT_REQUESTS {
            let branches: Vec<_> = (0..FANOUT_BRANCHES)
                .map(|branch| {
                    let iters = fanout_branch_iters(skewed, request, branch);
                    tokio::spawn(async move { spin_work(iters) })
                })
                .collect();
            for branch in branches {
                acc = acc.wrapping_add(branch.await.expect("branch task"));
            }
        }
        acc
    })
}

fn bench_shape(group: &mut cpu::Group<'_>, skewed: bool) {
    let want = expected(skewed);
    let ncpu = std::thread::available_parallelism().map_or(1, |n| n.get());
    for (label, workers) in [("4", 4), ("ncpu", ncpu)] {
        {
            let rt = Runtime::builder()
                .shards(workers)
                .build()
                .expect("spargio runtime");
            let handle = rt.handle();
            group.bench(format!("spargio_{label}"), || {
                let got = spargio_fanout(&handle, skewed);
                assert_eq!(got, want);
                black_box(got)
            });
        }
        {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(workers)
                .build()
                .expect("tokio runtime");
            group.bench(format!("tokio_mt_{label}"), || {
                let got = tokio_fanout(&rt, skewed);
                assert_eq!(got, want);
                black_box(got)
            });
        }
    }
}

fn fanout_fanin_balanced(c: &mut Criterion) {
    let mut group = cpu::Group::new(c, "fanout_fanin_balanced");
    group.throughput(Throughput::Elements(
        (FANOUT_REQUESTS * FANOUT_BRANCHES) as u64,
    ));
    bench_shape(&mut group, false);
    group.finish();
}

fn fanout_fanin_skewed(c: &mut Criterion) {
    let mut group = cpu::Group::new(c, "fanout_fanin_skewed");
    group.throughput(Throughput::Elements(
        (FANOUT_REQUESTS * FANOUT_BRANCHES) as u64,
    ));
    bench_shape(&mut group, true);
    group.finish();
}

criterion_group!(benches, fanout_fanin_balanced, fanout_fanin_skewed);
criterion_main!(benches);

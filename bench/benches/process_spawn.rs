//! Spawning and waiting for child processes: `spargio-process` against
//! `tokio::process`.
//!
//! Each iteration runs `/bin/true` [`SPAWNS`] times and waits for every
//! exit status:
//!
//! * `*_sequential`: one task, one child at a time (spawn, wait, next).
//! * `*_concurrent_32`: 32 tasks, each running its share of the children
//!   one after another, so 32 are in flight at once.
//!
//! Variants: `spargio` (2 shards; `CommandBuilder::status`, the exit
//! awaited with `IORING_OP_WAITID` on a ring) and `tokio_mt_2` (a
//! multi-thread runtime with 2 workers; `tokio::process::Command::status`,
//! tokio's own reaper). Every iteration starts on the benchmark thread,
//! hands the work to a runtime task and waits for it.
//!
//! Fork and exec dominate: this measures what each runtime adds around
//! them (the wait, the wakeups) and what CPU it burns doing so.

#[path = "common/cpu.rs"]
mod cpu;

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use spargio::{Runtime, RuntimeHandle};
use spargio_process::CommandBuilder;

/// Children per iteration.
const SPAWNS: usize = 128;
/// Tasks (children in flight) in the concurrent variants.
const CONCURRENCY: usize = 32;
const PROGRAM: &str = "/bin/true";

// ---------------------------------------------------------------- spargio

/// Runs `count` children one after another; returns how many succeeded.
async fn spargio_run(handle: RuntimeHandle, count: usize) -> usize {
    let mut ok = 0;
    for _ in 0..count {
        let status = CommandBuilder::new(PROGRAM)
            .status(&handle)
            .await
            .expect("spargio spawn");
        ok += usize::from(status.success());
    }
    ok
}

struct SpargioSide {
    _rt: Runtime,
    handle: RuntimeHandle,
}

impl SpargioSide {
    fn new() -> SpargioSide {
        let rt = Runtime::builder()
            .shards(2)
            .build()
            .expect("spargio runtime");
        let handle = rt.handle();
        SpargioSide { _rt: rt, handle }
    }

    fn sequential(&self) -> usize {
        let task = self
            .handle
            .spawn_stealable(spargio_run(self.handle.clone(), SPAWNS))
            .expect("spawn");
        spargio::block_on(task).expect("driver task")
    }

    fn concurrent(&self) -> usize {
        let handle = self.handle.clone();
        let task = self
            .handle
            .spawn_stealable(async move {
                let tasks: Vec<_> = (0..CONCURRENCY)
                    .map(|_| {
                        handle
                            .spawn_stealable(spargio_run(handle.clone(), SPAWNS / CONCURRENCY))
                            .expect("spawn")
                    })
                    .collect();
                let mut ok = 0;
                for task in tasks {
                    ok += task.await.expect("child task");
                }
                ok
            })
            .expect("spawn");
        spargio::block_on(task).expect("driver task")
    }
}

// ------------------------------------------------------------------ tokio

async fn tokio_run(count: usize) -> usize {
    let mut ok = 0;
    for _ in 0..count {
        let status = tokio::process::Command::new(PROGRAM)
            .status()
            .await
            .expect("tokio spawn");
        ok += usize::from(status.success());
    }
    ok
}

struct TokioSide {
    rt: tokio::runtime::Runtime,
}

impl TokioSide {
    fn new() -> TokioSide {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("tokio multi-thread runtime");
        TokioSide { rt }
    }

    fn sequential(&self) -> usize {
        self.rt
            .block_on(async { tokio::spawn(tokio_run(SPAWNS)).await.expect("driver task") })
    }

    fn concurrent(&self) -> usize {
        self.rt.block_on(async {
            tokio::spawn(async {
                let tasks: Vec<_> = (0..CONCURRENCY)
                    .map(|_| tokio::spawn(tokio_run(SPAWNS / CONCURRENCY)))
                    .collect();
                let mut ok = 0;
                for task in tasks {
                    ok += task.await.expect("child task");
                }
                ok
            })
            .await
            .expect("driver task")
        })
    }
}

// ------------------------------------------------------------- benchmarks

fn process_spawn_wait(c: &mut Criterion) {
    let mut group = cpu::Group::new(c, "process_spawn_wait");
    group.throughput(Throughput::Elements(SPAWNS as u64));
    group.inner().sample_size(10);
    {
        let side = SpargioSide::new();
        group.bench("spargio_sequential", || {
            let ok = side.sequential();
            assert_eq!(ok, SPAWNS);
            black_box(ok)
        });
        group.bench("spargio_concurrent_32", || {
            let ok = side.concurrent();
            assert_eq!(ok, SPAWNS);
            black_box(ok)
        });
    }
    {
        let side = TokioSide::new();
        group.bench("tokio_mt_2_sequential", || {
            let ok = side.sequential();
            assert_eq!(ok, SPAWNS);
            black_box(ok)
        });
        group.bench("tokio_mt_2_concurrent_32", || {
            let ok = side.concurrent();
            assert_eq!(ok, SPAWNS);
            black_box(ok)
        });
    }
    group.finish();
}

criterion_group!(benches, process_spawn_wait);
criterion_main!(benches);

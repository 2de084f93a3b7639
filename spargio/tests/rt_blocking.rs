//! The blocking pool.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Barrier};
use std::time::Duration;

use common::{runtime, within_hang_bound};
use spargio::{block_on, RuntimeBuilder, RuntimeError, ShardCtx};

#[test]
fn blocking_work_never_runs_on_a_shard() {
    let rt = runtime(2);
    let h = rt.handle();
    let (on_shard, name) = block_on(
        h.spawn_blocking(|| {
            (
                ShardCtx::current().is_some(),
                std::thread::current().name().unwrap().to_string(),
            )
        })
        .unwrap(),
    )
    .unwrap();
    assert!(!on_shard);
    assert!(name.starts_with("spargio-shard-blocking-"), "{name}");
    // Also when spawned from a task on a shard.
    let h2 = h.clone();
    let from_task = block_on(
        h.spawn_pinned(1, async move {
            h2.spawn_blocking(|| ShardCtx::current().is_some())
                .unwrap()
                .await
                .unwrap()
        })
        .unwrap(),
    )
    .unwrap();
    assert!(!from_task);
    assert_eq!(h.stats_snapshot().totals.spawn_blocking, 2);
}

#[test]
fn a_panic_in_blocking_work_is_a_join_error() {
    let rt = runtime(1);
    let err = block_on(
        rt.handle()
            .spawn_blocking(|| panic!("disk on fire"))
            .unwrap(),
    )
    .unwrap_err();
    assert!(
        err.is_panic() && err.to_string().contains("disk on fire"),
        "{err}"
    );
    assert_eq!(
        block_on(rt.handle().spawn_blocking(|| 1).unwrap()).unwrap(),
        1
    );
}

#[test]
fn the_pool_grows_on_demand() {
    // Eight jobs that can only finish together need eight threads at once.
    let rt = runtime(1);
    let h = rt.handle();
    let barrier = Arc::new(Barrier::new(8));
    let jobs: Vec<_> = (0..8)
        .map(|_| {
            let b = barrier.clone();
            h.spawn_blocking(move || b.wait().is_leader()).unwrap()
        })
        .collect();
    let leaders = within_hang_bound(move || {
        jobs.into_iter()
            .map(|j| block_on(j).unwrap())
            .filter(|&l| l)
            .count()
    });
    assert_eq!(leaders, 1);
}

#[test]
fn the_thread_limit_queues_extra_jobs() {
    let rt = RuntimeBuilder::new()
        .shards(1)
        .max_blocking_threads(2)
        .build()
        .unwrap();
    let h = rt.handle();
    let running = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let jobs: Vec<_> = (0..6)
        .map(|_| {
            let (running, peak) = (running.clone(), peak.clone());
            h.spawn_blocking(move || {
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(now, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(5));
                running.fetch_sub(1, Ordering::SeqCst);
            })
            .unwrap()
        })
        .collect();
    for j in jobs {
        block_on(j).unwrap();
    }
    assert!(peak.load(Ordering::SeqCst) <= 2);
    assert!(h.stats_snapshot().blocking_threads <= 2);
}

#[test]
fn idle_threads_retire_after_the_keep_alive() {
    let rt = RuntimeBuilder::new()
        .shards(1)
        .blocking_keep_alive(Duration::from_millis(20))
        .build()
        .unwrap();
    let h = rt.handle();
    block_on(h.spawn_blocking(|| ()).unwrap()).unwrap();
    within_hang_bound(move || {
        while h.stats_snapshot().blocking_threads > 0 {
            std::thread::sleep(Duration::from_millis(5));
        }
    });
}

#[test]
fn shutdown_cancels_queued_jobs_and_waits_for_running_ones() {
    let rt = RuntimeBuilder::new()
        .shards(1)
        .max_blocking_threads(1)
        .build()
        .unwrap();
    let h = rt.handle();
    let (started_tx, started_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let running = h
        .spawn_blocking(move || {
            started_tx.send(()).unwrap();
            release_rx.recv().unwrap();
            "finished"
        })
        .unwrap();
    started_rx.recv().unwrap();
    let queued = h.spawn_blocking(|| "never").unwrap();
    let releaser = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        release_tx.send(()).unwrap();
    });
    within_hang_bound(move || drop(rt));
    releaser.join().unwrap();
    assert_eq!(block_on(running).unwrap(), "finished");
    assert!(block_on(queued).unwrap_err().is_cancelled());
    assert!(matches!(
        h.spawn_blocking(|| ()),
        Err(RuntimeError::Shutdown)
    ));
}

#[test]
fn zero_blocking_threads_is_refused() {
    let err = RuntimeBuilder::new()
        .max_blocking_threads(0)
        .build()
        .unwrap_err();
    assert!(matches!(
        err,
        RuntimeError::InvalidConfig {
            knob: "max_blocking_threads",
            ..
        }
    ));
}

/// Aborting a job still queued in a full pool cancels it: its handle
/// resolves as cancelled, it never runs, and no thread spins on it.
#[test]
fn aborting_a_queued_blocking_job_cancels_it() {
    within_hang_bound(|| {
        let rt = RuntimeBuilder::new()
            .shards(2)
            .max_blocking_threads(1)
            .build()
            .unwrap();
        let h = rt.handle();
        let (release, wait) = mpsc::channel::<()>();
        let (started_tx, started) = mpsc::channel::<()>();
        let first = h
            .spawn_blocking(move || {
                started_tx.send(()).unwrap();
                wait.recv().unwrap();
            })
            .unwrap();
        started.recv().unwrap();
        let ran = Arc::new(AtomicUsize::new(0));
        let r = ran.clone();
        let queued = h
            .spawn_blocking(move || {
                r.fetch_add(1, Ordering::SeqCst);
            })
            .unwrap();
        queued.abort();
        release.send(()).unwrap();
        block_on(first).unwrap();
        let err = block_on(queued).expect_err("an aborted job must not report success");
        assert!(err.is_cancelled(), "{err:?}");
        assert_eq!(ran.load(Ordering::SeqCst), 0, "the aborted job ran");
        // The pool's thread goes idle instead of rescheduling the job.
        let start = std::time::Instant::now();
        loop {
            let s = h.stats_snapshot();
            if s.blocking_queued == 0 && s.blocking_idle == s.blocking_threads {
                break;
            }
            assert!(start.elapsed() < common::HANG, "the pool never went idle");
            std::thread::sleep(Duration::from_millis(2));
        }
        drop(rt);
    });
}

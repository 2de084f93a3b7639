//! The harness every test in this crate runs through: the body once per
//! backend (epoll always, io_uring where the kernel allows it) on a fresh
//! 2-shard runtime, bounded in time; and the check that a runtime that
//! used these clients leaves no `spargio-*` thread behind once dropped.

// Each test binary uses part of this module.
#![allow(dead_code)]

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

use spargio::{BackendKind, RuntimeBuilder, RuntimeHandle};

/// A hang fails the test, naming the backend, instead of stalling the run.
pub const BOUND: Duration = Duration::from_secs(60);

/// Shards per runtime.
pub const SHARDS: usize = 2;

/// Tests share it for reading and run side by side; the thread check
/// takes it for writing, so no other test's runtime is alive while it
/// counts threads.
static THREADS: RwLock<()> = RwLock::new(());

fn shared() -> RwLockReadGuard<'static, ()> {
    THREADS.read().unwrap_or_else(|e| e.into_inner())
}

fn exclusive() -> RwLockWriteGuard<'static, ()> {
    THREADS.write().unwrap_or_else(|e| e.into_inner())
}

/// The backends this machine runs: epoll, and io_uring when it is allowed.
pub fn backends() -> Vec<BackendKind> {
    let mut out = vec![BackendKind::Epoll];
    if spargio::probe_io_uring().is_ok() {
        out.push(BackendKind::IoUring);
    }
    out
}

/// A short lowercase name for `backend`, for table and channel names that
/// must differ between the two runs.
pub fn tag(backend: BackendKind) -> &'static str {
    match backend {
        BackendKind::Epoll => "epoll",
        _ => "uring",
    }
}

/// Runs `body` as a stealable task of a 2-shard runtime on `backend`
/// (shards driving tokio runtimes when `tokio_compat`), on a thread of its
/// own, and waits for it within `BOUND`. The runtime is shut down and
/// dropped before this returns (unless it hung). A panic in the body
/// fails the test with the backend's name.
fn run_on<F, Fut>(backend: BackendKind, tokio_compat: bool, body: F)
where
    F: FnOnce(RuntimeHandle, BackendKind) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = mpsc::channel();
    let thread = std::thread::Builder::new()
        .name(format!("eco-{}", tag(backend)))
        .spawn(move || {
            let builder = RuntimeBuilder::new()
                .shards(SHARDS)
                .backend(backend)
                .tokio_compat(tokio_compat);
            let out = spargio::block_on(spargio::run_with(builder, |h| body(h, backend)));
            let _ = tx.send(out.map_err(|e| e.to_string()));
        })
        .expect("spawn the runtime's thread");
    match rx.recv_timeout(BOUND) {
        Ok(Ok(())) => thread.join().expect("the runtime's thread"),
        Ok(Err(e)) => panic!("{backend:?}: the runtime failed: {e}"),
        Err(RecvTimeoutError::Disconnected) => {
            let payload = thread.join().expect_err("no answer: the body panicked");
            let msg = payload
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| payload.downcast_ref::<&str>().copied())
                .unwrap_or("(a non-string panic)");
            panic!("{backend:?}: {msg}");
        }
        Err(RecvTimeoutError::Timeout) => {
            panic!("{backend:?}: no answer within {BOUND:?} (a hang or a lost wakeup?)")
        }
    }
}

/// Runs `body` (given the runtime's handle and the backend) once on each
/// backend, each run on a fresh 2-shard runtime and bounded by `BOUND`.
pub fn on_each_backend<F, Fut>(tokio_compat: bool, body: F)
where
    F: Fn(RuntimeHandle, BackendKind) -> Fut + Send + Clone + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let _shared = shared();
    for backend in backends() {
        run_on(backend, tokio_compat, body.clone());
    }
}

/// Like [`on_each_backend`], alone (no other test of this binary runs a
/// runtime meanwhile), then checks that no thread named `spargio-*` (the
/// shards, their blocking pools, the shards' tokio blocking pools) is
/// left once each runtime has been dropped.
pub fn on_each_backend_then_no_threads_left<F, Fut>(tokio_compat: bool, body: F)
where
    F: Fn(RuntimeHandle, BackendKind) -> Fut + Send + Clone + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let _alone = exclusive();
    for backend in backends() {
        run_on(backend, tokio_compat, body.clone());
        // A joined thread's /proc entry can outlive the join by a moment.
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut left = spargio_threads();
        while !left.is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
            left = spargio_threads();
        }
        assert!(
            left.is_empty(),
            "{backend:?}: threads left after the runtime was dropped: {left:?}"
        );
    }
}

/// The names of this process's threads that start with `spargio-`, but
/// for the test peers' own.
pub fn spargio_threads() -> Vec<String> {
    let mut out = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").expect("/proc/self/task") {
        let Ok(task) = task else { continue };
        // A thread that exits between the listing and the read is gone.
        let Ok(comm) = std::fs::read_to_string(task.path().join("comm")) else {
            continue;
        };
        let comm = comm.trim_end();
        // `spargio-peer-servers` (truncated to 15 bytes) is the test
        // peers' process-wide watcher, not the runtime's.
        if comm.starts_with("spargio-") && !comm.starts_with("spargio-peer") {
            out.push(comm.to_owned());
        }
    }
    out
}

/// The shard the calling task runs on.
pub fn shard() -> usize {
    spargio::ShardCtx::current()
        .expect("called inside a spargio task")
        .shard_id()
}

/// File descriptors this process has open.
pub fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count())
}

/// Fails unless the count of open fds is back to `before` within 5 s
/// (sockets closed by a dropped runtime's shards, moments after the drop).
pub fn assert_fds_back_to(before: usize) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while open_fds() > before && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        open_fds() <= before,
        "fds: {} open after, {before} before",
        open_fds()
    );
}

/// Waits (sleeping on the shard's timer) until `count` passes `target`;
/// false if `BOUND / 3` passed first.
pub async fn until_above(count: &AtomicUsize, target: usize) -> bool {
    let start = Instant::now();
    while count.load(Ordering::SeqCst) <= target {
        if start.elapsed() > BOUND / 3 {
            return false;
        }
        spargio::time::sleep(Duration::from_millis(10)).await;
    }
    true
}

/// Kills the test PostgreSQL, keeps it down for `down` and starts it
/// again (`spargio_test_peers`' `restart`), on the blocking pool.
pub async fn restart_postgres(h: &RuntimeHandle, down: Duration) {
    h.spawn_blocking(move || spargio_test_peers::postgres().restart(down))
        .expect("spawn the restart")
        .await
        .expect("the restart ran")
        .expect("restart PostgreSQL");
}

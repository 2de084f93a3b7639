//! Shutdown drops every task even when one is polled after its home
//! shard's shutdown woke it: that poll may return `Pending` holding no
//! waker anywhere, and nothing else would ever schedule it again.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::task::{Context, Poll};
use std::time::Duration;

use spargio::{Runtime, RuntimeHandle, ShardCtx};

/// Homed on shard 1, running on shard 0: on its first poll it holds shard
/// 0 until shard 1 has closed its registry (spawns there fail), which
/// wakes it while it runs; then, on every poll, it returns `Pending` and
/// keeps no waker.
struct Orphan {
    handle: RuntimeHandle,
    started: Arc<AtomicBool>,
    on_zero: Arc<AtomicBool>,
}

impl Future for Orphan {
    type Output = ();

    fn poll(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<()> {
        if !self.started.swap(true, Ordering::SeqCst) {
            let here = ShardCtx::current().map(|c| c.shard_id());
            self.on_zero.store(here == Some(0), Ordering::SeqCst);
            if here == Some(0) {
                // Until shard 1 has closed its registry (and woken us).
                while self.handle.spawn_pinned(1, async {}).is_ok() {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        }
        Poll::Pending
    }
}

#[test]
fn a_task_polled_after_its_home_shard_closed_is_still_dropped() {
    let mut stolen = false;
    for _ in 0..20 {
        let rt = Runtime::builder().shards(2).build().unwrap();
        let h = rt.handle();
        // Keep shard 1 busy so shard 0 steals the orphan from its queue.
        h.spawn_pinned(1, async { std::thread::sleep(Duration::from_millis(50)) })
            .unwrap();
        let started = Arc::new(AtomicBool::new(false));
        let on_zero = Arc::new(AtomicBool::new(false));
        h.spawn_stealable_on(
            1,
            Orphan {
                handle: h.clone(),
                started: started.clone(),
                on_zero: on_zero.clone(),
            },
        )
        .unwrap();
        while !started.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(1));
        }
        // Drop the runtime on a thread of its own: a hang fails the test
        // instead of hanging it.
        let (done_tx, done_rx) = mpsc::channel();
        std::thread::spawn(move || {
            drop(rt);
            let _ = done_tx.send(());
        });
        assert!(
            done_rx.recv_timeout(Duration::from_secs(10)).is_ok(),
            "Runtime::drop hung: a task polled after its shard's shutdown woke it was never dropped"
        );
        stolen |= on_zero.load(Ordering::SeqCst);
        if stolen {
            break;
        }
    }
    assert!(stolen, "setup: shard 0 never stole the task in 20 tries");
}

/// Tasks that keep arming timers while the runtime shuts down are dropped
/// like any other: arming one then is not a panic.
#[test]
fn tasks_arming_timers_during_shutdown_do_not_panic() {
    let panics = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = panics.clone();
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if info.to_string().contains("Sleep") {
            seen.fetch_add(1, Ordering::SeqCst);
        }
    }));
    for _ in 0..20 {
        let rt = Runtime::builder().shards(2).build().unwrap();
        let h = rt.handle();
        for i in 0..64 {
            h.spawn_stealable(async move {
                loop {
                    // Busy for a moment (the runtime may start closing
                    // meanwhile), then arm a timer.
                    std::thread::sleep(Duration::from_micros(200));
                    spargio::time::sleep(Duration::from_micros(50 + i)).await;
                }
            })
            .unwrap();
        }
        std::thread::sleep(Duration::from_millis(5));
        drop(rt);
    }
    std::panic::set_hook(previous);
    assert_eq!(
        panics.load(Ordering::SeqCst),
        0,
        "a Sleep armed during shutdown panicked"
    );
}

//! Real signals raised at this process. Signals are process-wide, so the
//! tests take a lock and each uses its own signal numbers where it can.

use std::sync::Mutex;
use std::time::Duration;

use spargio::RuntimeHandle;
use spargio_signal::{signal, SignalHub};

fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

fn raise(sig: i32) {
    // SAFETY: kill on our own pid with a signal a test subscribed to.
    assert_eq!(unsafe { libc::kill(libc::getpid(), sig) }, 0);
}

fn on_runtime<T: Send + 'static, F>(f: impl FnOnce(RuntimeHandle) -> F + Send + 'static) -> T
where
    F: std::future::Future<Output = T> + Send + 'static,
{
    let rt = spargio::Runtime::builder().shards(2).build().unwrap();
    let h = rt.handle();
    let j = h.spawn_stealable(f(h.clone())).unwrap();
    spargio::block_on(j).unwrap()
}

/// The calling thread's mask bit and the action for `sig`.
fn thread_state(sig: i32) -> (bool, usize) {
    // SAFETY: plain queries into zeroed structs.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), &mut set);
        let mut act: libc::sigaction = std::mem::zeroed();
        libc::sigaction(sig, std::ptr::null(), &mut act);
        (libc::sigismember(&set, sig) == 1, act.sa_sigaction)
    }
}

#[test]
fn each_of_two_subscribers_receives_a_signal_once() {
    let _s = serial();
    on_runtime(|h| async move {
        let hub = SignalHub::new(&h, &[libc::SIGUSR1]).unwrap();
        let mut a = hub.subscribe().unwrap();
        let mut b = hub.subscribe().unwrap();
        raise(libc::SIGUSR1);
        assert_eq!(a.recv().await.unwrap(), libc::SIGUSR1);
        assert_eq!(b.recv().await.unwrap(), libc::SIGUSR1);
        assert_eq!(a.try_recv(), None, "delivered once");
        assert_eq!(b.try_recv(), None, "delivered once");
    });
}

#[test]
fn subscribers_on_different_shards_both_receive() {
    let _s = serial();
    on_runtime(|h| async move {
        let hub = SignalHub::new(&h, &[libc::SIGUSR2]).unwrap();
        let mut waiters = Vec::new();
        for shard in 0..2 {
            let mut s = hub.subscribe().unwrap();
            waiters.push(
                h.spawn_pinned(shard, async move { s.recv().await.unwrap() })
                    .unwrap(),
            );
        }
        // Both are waiting (each with a read in flight on its shard) before
        // the signal is raised.
        spargio::time::sleep(Duration::from_millis(20)).await;
        raise(libc::SIGUSR2);
        for w in waiters {
            assert_eq!(w.await.unwrap(), libc::SIGUSR2);
        }
    });
}

#[test]
fn a_burst_of_two_kinds_loses_no_kind() {
    let _s = serial();
    on_runtime(|h| async move {
        let mut s = signal(&h, &[libc::SIGUSR1, libc::SIGUSR2]).unwrap();
        for i in 0..1000 {
            raise(if i % 2 == 0 {
                libc::SIGUSR1
            } else {
                libc::SIGUSR2
            });
        }
        let mut seen = std::collections::HashMap::new();
        while seen.len() < 2 {
            let sig = s.recv().await.unwrap();
            *seen.entry(sig).or_insert(0) += 1;
        }
        assert!(seen.values().all(|&n| (1..=500).contains(&n)), "{seen:?}");
        // Drain what is left: each kind at most once more in the queue.
        while let Some(sig) = s.recv_timeout(Duration::from_millis(50)).await {
            *seen.entry(sig).or_insert(0) += 1;
        }
        assert!(seen.values().all(|&n| n <= 500), "{seen:?}");
    });
}

#[test]
fn recv_timeout_returns_none_when_nothing_comes() {
    let _s = serial();
    on_runtime(|h| async move {
        let mut s = signal(&h, &[libc::SIGWINCH]).unwrap();
        assert_eq!(s.recv_timeout(Duration::from_millis(30)).await, None);
        assert_eq!(s.try_recv(), None);
    });
}

#[test]
fn recv_matching_leaves_the_others_queued() {
    let _s = serial();
    on_runtime(|h| async move {
        let mut s = signal(&h, &[libc::SIGUSR1, libc::SIGUSR2]).unwrap();
        raise(libc::SIGUSR1);
        raise(libc::SIGUSR2);
        let got = s.recv_matching(|sig| sig == libc::SIGUSR2).await.unwrap();
        assert_eq!(got, libc::SIGUSR2);
        assert_eq!(s.recv().await.unwrap(), libc::SIGUSR1);
    });
}

#[test]
fn a_dropped_recv_loses_no_signal() {
    let _s = serial();
    on_runtime(|h| async move {
        let mut s = signal(&h, &[libc::SIGUSR1]).unwrap();
        // A recv with its read in flight, abandoned.
        assert_eq!(s.recv_timeout(Duration::from_millis(10)).await, None);
        raise(libc::SIGUSR1);
        assert_eq!(s.recv().await.unwrap(), libc::SIGUSR1);
    });
}

#[test]
fn a_signal_subscribed_after_threads_exist_still_arrives() {
    let _s = serial();
    // A thread started before the subscription, with the signal unblocked,
    // alive throughout (the kernel may pick it for the delivery).
    let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
    let bystander = std::thread::spawn(move || {
        let _ = stop_rx.recv();
        thread_state(libc::SIGHUP).0
    });
    on_runtime(|h| async move {
        // Subscribed on a shard thread: the main thread, the other shard
        // and the bystander all still have SIGHUP unblocked. SIGHUP's
        // default action would end the process.
        let mut s = signal(&h, &[libc::SIGHUP]).unwrap();
        for _ in 0..3 {
            raise(libc::SIGHUP);
            assert_eq!(s.recv().await.unwrap(), libc::SIGHUP);
        }
    });
    stop_tx.send(()).unwrap();
    bystander.join().unwrap();
}

/// Whether the thread named `name` in this process blocks `sig`
/// (`SigBlk` in `/proc/self/task/*/status`). `build` does not wait for its
/// shard threads, which name themselves when they start: a thread not
/// found is looked for again, for a bounded while.
fn named_thread_blocks(name: &str, sig: i32) -> Option<bool> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let found = find_named_thread_blocks(name, sig);
        if found.is_some() || std::time::Instant::now() > deadline {
            return found;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

fn find_named_thread_blocks(name: &str, sig: i32) -> Option<bool> {
    for task in std::fs::read_dir("/proc/self/task").unwrap() {
        let dir = task.unwrap().path();
        let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        if comm.trim() != name {
            continue;
        }
        let status = std::fs::read_to_string(dir.join("status")).unwrap();
        let mask = status.lines().find_map(|l| l.strip_prefix("SigBlk:"))?;
        let bits = u64::from_str_radix(mask.trim(), 16).unwrap();
        return Some(bits & (1 << (sig - 1)) != 0);
    }
    None
}

#[test]
fn subscribing_changes_no_threads_mask() {
    let _s = serial();
    let sig = libc::SIGURG;
    std::thread::spawn(move || {
        let before = thread_state(sig).0;
        let early = spargio::Runtime::builder()
            .shards(1)
            .thread_name("early")
            .build()
            .unwrap();
        let stream = signal(early.handle(), &[sig]).unwrap();
        assert_eq!(thread_state(sig).0, before, "subscribing thread");
        assert_eq!(named_thread_blocks("early-0", sig), Some(before));
        // A runtime built afterwards by the subscribing thread: its shard
        // and its blocking-pool threads start with the subscriber's mask,
        // which the subscription did not touch.
        let rt = spargio::Runtime::builder()
            .shards(1)
            .thread_name("later")
            .build()
            .unwrap();
        assert_eq!(named_thread_blocks("later-0", sig), Some(before));
        let job = rt
            .handle()
            .spawn_blocking(move || thread_state(sig).0)
            .unwrap();
        assert_eq!(spargio::block_on(job).unwrap(), before, "blocking pool");
        drop(stream);
        assert_eq!(thread_state(sig).0, before);
    })
    .join()
    .unwrap();
}

#[test]
fn dropping_the_last_subscriber_restores_the_disposition() {
    let _s = serial();
    let sig = libc::SIGPWR;
    std::thread::spawn(move || {
        let before = thread_state(sig);
        let rt = spargio::Runtime::builder().shards(1).build().unwrap();
        let hub = SignalHub::new(rt.handle(), &[sig]).unwrap();
        let stream = hub.subscribe().unwrap();
        let during = thread_state(sig);
        assert_eq!(during.0, before.0, "the mask is left alone");
        assert_ne!(during.1, before.1, "the crate's handler is installed");
        drop(hub);
        assert_eq!(thread_state(sig), during, "a stream still subscribes");
        drop(stream);
        assert_eq!(thread_state(sig), before);
    })
    .join()
    .unwrap();
}

#[test]
fn bad_signal_numbers_are_invalid_input() {
    let rt = spargio::Runtime::builder().shards(1).build().unwrap();
    for bad in [0, -3, 65, libc::SIGKILL, libc::SIGSTOP, libc::SIGSEGV] {
        let err = signal(rt.handle(), &[bad]).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput, "{bad}");
    }
    assert_eq!(
        SignalHub::new(rt.handle(), &[]).unwrap_err().kind(),
        std::io::ErrorKind::InvalidInput
    );
}

#[test]
fn try_recv_reads_a_pending_signal_without_waiting() {
    let _s = serial();
    on_runtime(|h| async move {
        let mut s = signal(&h, &[libc::SIGUSR2]).unwrap();
        raise(libc::SIGUSR2);
        // No recv in flight: only try_recv hands out what the handler
        // recorded. The kernel may have picked another thread, whose
        // handler may not have run yet, hence the bounded retries.
        let mut got = None;
        for _ in 0..2000 {
            got = s.try_recv();
            if got.is_some() {
                break;
            }
            spargio::time::sleep(Duration::from_millis(1)).await;
        }
        assert_eq!(got, Some(libc::SIGUSR2));
        assert_eq!(s.try_recv(), None, "taken once");
    });
}

#[test]
fn a_signal_left_unread_at_the_last_drop_is_taken_not_delivered_to_the_old_disposition() {
    let _s = serial();
    on_runtime(|h| async move {
        for _ in 0..20 {
            let s = signal(&h, &[libc::SIGUSR1]).unwrap();
            raise(libc::SIGUSR1);
            // Dropped unread at once: SIGUSR1's default action would end the
            // process if the pending signal survived the restore.
            drop(s);
        }
    });
}

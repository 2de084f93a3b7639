//! Whatever an abandoned operation produced is reclaimed: fds from opens,
//! accepts, sockets and connects whose futures are dropped before, while
//! or after the kernel completes them; queued operations dropped on their
//! own shard are cancelled, not run to completion.
//!
//! These tests count `/proc/self/fd`, so they run one at a time.

mod common;

use std::future::Future;
use std::io::Read;
use std::net::SocketAddr;
use std::os::fd::{FromRawFd, OwnedFd};
use std::pin::Pin;
use std::sync::Mutex;
use std::task::Poll;
use std::time::{Duration, Instant};

use spargio::fs::File;
use spargio::net::{TcpListener, TcpStream};
use spargio::RuntimeHandle;

fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    let guard = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    // Process-wide fds some runtime makes once and keeps: with the shards'
    // tokio runtimes on in a workspace build (which turns on tokio's
    // `signal` feature), the first tokio runtime with I/O opens tokio's
    // signal socket pair for the life of the process. Made here, before
    // any test takes its fd baseline.
    static WARM: std::sync::Once = std::sync::Once::new();
    WARM.call_once(|| drop(common::runtime(2)));
    guard
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// Waits (a bounded while) for the fd count to come back to `baseline`,
/// and returns the count it settled at.
fn settle_fds(baseline: usize) -> usize {
    let start = Instant::now();
    loop {
        let now = open_fds();
        if now <= baseline || start.elapsed() > Duration::from_secs(5) {
            return now;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Polls `fut` once; `Some` if it finished.
async fn poll_once<F: Future + Unpin>(fut: &mut F) -> Option<F::Output> {
    std::future::poll_fn(|cx| {
        Poll::Ready(match Pin::new(&mut *fut).poll(cx) {
            Poll::Ready(v) => Some(v),
            Poll::Pending => None,
        })
    })
    .await
}

/// Writes a test's data file. Under the lock: the write's fd would
/// otherwise show up in the count of a test that holds it (seen once as
/// `streams_dropped_with_their_tasks_at_shutdown_are_closed_by_the_drop`
/// finding one fd too many). Callers do not hold the lock.
fn data_file(name: &str) -> std::path::PathBuf {
    let _serial = serial();
    let path = std::env::temp_dir().join(format!("spargio-reclaim-{}-{name}", std::process::id()));
    std::fs::write(&path, b"reclaim").unwrap();
    path
}

/// Runs `body` on a fresh runtime and checks that the process holds no
/// more fds afterwards than before (the runtime's own are counted in the
/// baseline, which is taken once the runtime exists).
fn no_fd_leak<F>(body: impl FnOnce(RuntimeHandle) -> F + Send + 'static)
where
    F: Future<Output = ()> + Send + 'static,
{
    let _serial = serial();
    common::within_hang_bound(move || {
        let rt = common::runtime(2);
        let h = rt.handle();
        let baseline = open_fds();
        let join = h.spawn_stealable(body(h.clone())).unwrap();
        spargio::block_on(join).unwrap();
        let after = settle_fds(baseline);
        // At most the baseline: under valgrind the baseline can include
        // the tool's own transient descriptors.
        assert!(
            after <= baseline,
            "fds leaked by abandoned operations: {after} open, {baseline} before"
        );
    });
}

#[test]
fn opens_dropped_after_their_completion_close_the_fd() {
    let path = data_file("after");
    no_fd_leak(move |h| async move {
        let mut pending = Vec::new();
        for _ in 0..100 {
            let mut open = Box::pin(File::open(&h, &path));
            if poll_once(&mut open).await.is_none() {
                pending.push(open);
            }
        }
        // Let every completion arrive, then abandon the futures.
        spargio::time::sleep(Duration::from_millis(50)).await;
        drop(pending);
    });
}

#[test]
fn opens_dropped_in_flight_close_the_fd() {
    let path = data_file("inflight");
    no_fd_leak(move |h| async move {
        for _ in 0..100 {
            let mut open = Box::pin(File::open(&h, &path));
            let _ = poll_once(&mut open).await;
        }
    });
}

#[test]
fn accepts_dropped_as_the_peer_connects_close_the_fd() {
    no_fd_leak(|h| async move {
        let listener = TcpListener::bind_socket_addr(&h, "127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = listener.local_addr().unwrap();
        for _ in 0..50 {
            let mut accept = Box::pin(listener.accept());
            assert!(poll_once(&mut accept).await.is_none());
            let mut client = std::net::TcpStream::connect(addr).unwrap();
            // The accept completes while nobody polls it; then it is dropped.
            spargio::time::sleep(Duration::from_millis(2)).await;
            drop(accept);
            client
                .set_read_timeout(Some(common::HANG))
                .expect("read timeout");
            let mut byte = [0u8; 1];
            // The accepted socket was closed: EOF or a reset, not a hang.
            assert!(matches!(client.read(&mut byte), Ok(0) | Err(_)));
        }
    });
}

#[test]
fn connects_dropped_mid_flight_close_their_socket() {
    no_fd_leak(move |h| async move {
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = std_listener.local_addr().unwrap();
        for i in 0..60u64 {
            let mut connect = Box::pin(TcpStream::connect_socket_addr(&h, addr));
            if poll_once(&mut connect).await.is_none() && i % 2 == 0 {
                spargio::time::sleep(Duration::from_millis(1)).await;
            }
            drop(connect);
        }
        drop(std_listener);
    });
}

#[test]
fn unsafe_ops_abandoned_after_completion_drop_their_output() {
    let path = data_file("unsafe");
    no_fd_leak(move |h| async move {
        let native = h.uring_native_unbound();
        let mut pending = Vec::new();
        for _ in 0..50 {
            let c_path = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
            // SAFETY: the SQE points at the CString's heap buffer, owned by
            // the state; OPENAT posts one completion.
            let op = unsafe {
                native.submit_unsafe(
                    c_path,
                    |p: &mut std::ffi::CString| {
                        io_uring::opcode::OpenAt::new(
                            io_uring::types::Fd(libc::AT_FDCWD),
                            p.as_ptr(),
                        )
                        .flags(libc::O_RDONLY | libc::O_CLOEXEC)
                        .build()
                    },
                    |cqe, _p| {
                        let cqe = cqe?;
                        if cqe.result < 0 {
                            return Err(std::io::Error::from_raw_os_error(-cqe.result));
                        }
                        // A successful OPENAT returns a new fd nothing else
                        // owns (inside the outer unsafe block).
                        Ok(OwnedFd::from_raw_fd(cqe.result))
                    },
                )
            };
            let mut op = Box::pin(op);
            if poll_once(&mut op).await.is_none() {
                pending.push(op);
            }
        }
        spargio::time::sleep(Duration::from_millis(50)).await;
        drop(pending);
    });
}

/// A tiny deterministic generator for the random delays.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[test]
fn fd_producing_ops_under_random_timeouts_leak_nothing() {
    let path = data_file("timeouts");
    no_fd_leak(move |h| async move {
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let connect_to = std_listener.local_addr().unwrap();
        std_listener.set_nonblocking(true).unwrap();
        let listener = TcpListener::bind_socket_addr(&h, "127.0.0.1:0".parse().unwrap()).unwrap();
        let accept_at: SocketAddr = listener.local_addr().unwrap();
        let mut rng = XorShift(0x5eed_1234_abcd_0001);
        let mut clients = Vec::new();
        for i in 0..300 {
            let delay = Duration::from_micros(rng.next() % 400);
            match i % 3 {
                0 => {
                    let _ = spargio::time::timeout(delay, File::open(&h, &path)).await;
                }
                1 => {
                    clients.push(std::net::TcpStream::connect(accept_at).unwrap());
                    let _ = spargio::time::timeout(delay, listener.accept()).await;
                }
                _ => {
                    let _ = spargio::time::timeout(
                        delay,
                        TcpStream::connect_socket_addr(&h, connect_to),
                    )
                    .await;
                    // Keep the std listener's backlog from filling up.
                    while let Ok((s, _)) = std_listener.accept() {
                        drop(s);
                    }
                }
            }
        }
        // Connections whose accept timed out before the kernel took them
        // are still in the backlog: take them now so they are counted.
        while let Ok(res) =
            spargio::time::timeout(Duration::from_millis(20), listener.accept()).await
        {
            drop(res.unwrap());
        }
        drop(clients);
        drop(std_listener);
    });
}

/// A queued operation (submitted from another shard into this shard's
/// inbox) dropped on this shard before this shard drained its inbox is
/// cancelled: it must not stay in the ring, and it must not eat data that
/// a later receive is owed.
#[test]
fn a_queued_op_dropped_on_its_owner_shard_is_cancelled() {
    let _serial = serial();
    common::within_hang_bound(|| {
        let rt = common::runtime(2);
        let h = rt.handle();
        let h2 = h.clone();
        let join = h
            .spawn_pinned(0, async move {
                let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
                let std_client =
                    std::net::TcpStream::connect(std_listener.local_addr().unwrap()).unwrap();
                let (std_server, _) = std_listener.accept().unwrap();
                let client = TcpStream::from_std(&h2, std_client).unwrap();
                let server = std::sync::Arc::new(
                    TcpStream::from_std_with_session_policy(
                        &h2,
                        std_server,
                        spargio::net::StreamSessionPolicy::Fixed(0),
                    )
                    .unwrap(),
                );
                assert_eq!(server.session_shard(), 0);
                let before = h2.stats_snapshot().shards[0].pending_native_ops;
                let (tx, rx) = std::sync::mpsc::channel();
                let s = server.clone();
                // Shard 1 starts a receive for shard 0's ring (queued in
                // shard 0's inbox) and hands the future over.
                h2.spawn_pinned(1, async move {
                    let mut recv = Box::pin(async move { s.recv(16).await });
                    assert!(poll_once(&mut recv).await.is_none());
                    tx.send(recv).unwrap();
                })
                .unwrap();
                // Block this shard (no yield: its inbox is not drained)
                // until the future arrives, then drop it here.
                let recv = rx.recv_timeout(common::HANG).unwrap();
                drop(recv);
                spargio::time::sleep(Duration::from_millis(20)).await;
                assert_eq!(
                    h2.stats_snapshot().shards[0].pending_native_ops,
                    before,
                    "the dropped receive is still in the ring"
                );
                client.write_all(b"owed").await.unwrap();
                let got = spargio::time::timeout(Duration::from_secs(5), server.recv(16))
                    .await
                    .expect("the data went to the abandoned receive")
                    .unwrap();
                assert_eq!(got, b"owed");
            })
            .unwrap();
        spargio::block_on(join).unwrap();
    });
}

/// `build` returns before the shard threads have started, and yet every
/// fd the runtime holds is open by then: a count taken right after
/// `build` is still right once the shards have started, run tasks and
/// idled (sampling their CPU contention, parking), and the drop closes
/// them all.
#[test]
fn every_fd_the_runtime_holds_is_open_when_build_returns() {
    let _serial = serial();
    common::within_hang_bound(|| {
        for _ in 0..20 {
            let before = open_fds();
            let rt = common::runtime(2);
            let built = open_fds();
            assert!(built > before, "a runtime holds fds of its own");
            let h = rt.handle();
            for shard in 0..2 {
                let j = h
                    .spawn_pinned(shard, async {
                        // Long enough for an idle shard to sample its
                        // contention (once a millisecond at most).
                        spargio::time::sleep(Duration::from_millis(3)).await;
                        common::shard()
                    })
                    .unwrap();
                assert_eq!(spargio::block_on(j).unwrap(), shard);
            }
            std::thread::sleep(Duration::from_millis(3));
            assert_eq!(
                open_fds(),
                built,
                "the shards opened fds after build returned"
            );
            drop(h);
            drop(rt);
            assert_eq!(open_fds(), before, "the drop left fds open");
        }
    });
}

/// Streams owned by tasks that the runtime's shutdown drops are closed by
/// the time the drop returns: the closes they queue in their shard's ring
/// reach the kernel before the ring is torn down.
#[test]
fn streams_dropped_with_their_tasks_at_shutdown_are_closed_by_the_drop() {
    let _serial = serial();
    common::within_hang_bound(|| {
        for _ in 0..10 {
            let before = open_fds();
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = listener.local_addr().unwrap();
            let rt = common::runtime(2);
            let h = rt.handle();
            let (tx, rx) = std::sync::mpsc::channel();
            for shard in 0..2 {
                let (h2, tx) = (h.clone(), tx.clone());
                h.spawn_pinned(shard, async move {
                    let stream = TcpStream::connect(&h2, addr).await.unwrap();
                    tx.send(()).unwrap();
                    std::future::pending::<()>().await;
                    drop(stream);
                })
                .unwrap();
            }
            let peers: Vec<_> = (0..2).map(|_| listener.accept().unwrap()).collect();
            for _ in 0..2 {
                rx.recv().unwrap();
            }
            drop(h);
            drop(rt);
            drop(peers);
            drop(listener);
            assert_eq!(open_fds(), before, "a stream's fd outlived the runtime");
        }
    });
}

/// A runtime dropped on one of its own shards cannot join its threads (it
/// would wait for itself): they finish on their own, and what they held,
/// their rings included, is closed once they have. The fd count comes
/// back to where it was before `build`.
#[test]
fn a_runtime_dropped_on_its_own_shard_closes_its_fds_once_its_threads_end() {
    let _serial = serial();
    common::within_hang_bound(|| {
        for _ in 0..10 {
            let before = open_fds();
            let rt = common::runtime(2);
            let h = rt.handle();
            let (tx, rx) = std::sync::mpsc::channel();
            h.spawn_pinned(1, async move {
                drop(rt);
                tx.send(common::shard()).unwrap();
            })
            .unwrap();
            assert_eq!(rx.recv().unwrap(), 1, "the drop ran on shard 1");
            // The eventfds live as long as a handle does (one may still
            // try to wake a shard); the rings go with the threads.
            drop(h);
            let now = settle_fds(before);
            if now != before {
                for e in std::fs::read_dir("/proc/self/fd").unwrap() {
                    let e = e.unwrap();
                    eprintln!(
                        "open fd {:?} -> {:?}",
                        e.file_name(),
                        std::fs::read_link(e.path())
                    );
                }
            }
            assert_eq!(now, before, "the shard threads' fds outlived them");
        }
    });
}

/// Where the runtime's shards outnumber the CPUs, they wait for each
/// other's CPUs whenever it is busy, so the CPU-contention counter would
/// say contended and make idle shards park instead of spinning; such a
/// runtime does not sample it and opens no `schedstat` file. A runtime
/// with one shard opens one (where the kernel has them).
#[test]
fn an_oversubscribed_runtime_opens_no_contention_counters() {
    let _serial = serial();
    let schedstat_fds = || {
        std::fs::read_dir("/proc/self/fd")
            .unwrap()
            .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
            .filter(|target| target.ends_with("schedstat"))
            .count()
    };
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let baseline = schedstat_fds();
    if std::path::Path::new("/proc/thread-self/schedstat").exists() {
        let one = common::runtime(1);
        assert_eq!(schedstat_fds(), baseline + 1, "one shard, one counter");
        drop(one);
    }
    let over = common::runtime(cpus + 1);
    assert_eq!(
        schedstat_fds(),
        baseline,
        "an oversubscribed runtime opened contention counters"
    );
    drop(over);
}

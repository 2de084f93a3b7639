//! What `io::Compat` connections hold in memory, counted in live heap
//! bytes by a counting global allocator (not RSS, which the allocator's
//! own caching blurs). One binary of its own, so nothing else allocates
//! meanwhile; the tests in it run one at a time.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::Write;
use std::pin::Pin;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_io::AsyncRead;
use spargio::io::Compat;
use spargio::net::TcpListener;
use spargio::RuntimeHandle;

struct Counting;

static LIVE: AtomicI64 = AtomicI64::new(0);

// SAFETY: forwards to the system allocator unchanged; only counts bytes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as i64, Ordering::Relaxed);
        // SAFETY: same contract as ours.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as i64, Ordering::Relaxed);
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size as i64 - layout.size() as i64, Ordering::Relaxed);
        // SAFETY: same contract as ours.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn live() -> i64 {
    LIVE.load(Ordering::Relaxed)
}

fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

const CONNS: usize = 64;

/// What hyper asks for per read.
const READ: usize = 8 * 1024;

/// Accepts `CONNS` connections, each served by a task that reads once
/// through `Compat` with a `READ`-byte buffer. Returns the clients, once
/// every server read is pending, and a count of finished tasks.
fn serve_reads(
    h: &RuntimeHandle,
    listener: &Arc<TcpListener>,
) -> (Vec<std::net::TcpStream>, Arc<AtomicUsize>) {
    let addr = listener.local_addr().unwrap();
    let reading = Arc::new(AtomicUsize::new(0));
    let finished = Arc::new(AtomicUsize::new(0));
    let (l, hh, r, f) = (
        listener.clone(),
        h.clone(),
        reading.clone(),
        finished.clone(),
    );
    h.spawn_stealable(async move {
        for _ in 0..CONNS {
            let (stream, _) = l.accept().await.unwrap();
            let (r, f) = (r.clone(), f.clone());
            // On the stream's session shard, as the book serves connections.
            hh.spawn_pinned(stream.session_shard(), async move {
                let mut compat = Compat::new(stream);
                let mut buf = vec![0u8; READ];
                let mut counted = false;
                let _ = std::future::poll_fn(|cx| {
                    let res = Pin::new(&mut compat).poll_read(cx, &mut buf);
                    if !counted {
                        counted = true;
                        r.fetch_add(1, Ordering::SeqCst);
                    }
                    res
                })
                .await;
                drop(compat);
                f.fetch_add(1, Ordering::SeqCst);
            })
            .unwrap();
        }
    })
    .unwrap();
    let clients: Vec<_> = (0..CONNS)
        .map(|_| std::net::TcpStream::connect(addr).unwrap())
        .collect();
    wait_until(|| reading.load(Ordering::SeqCst) == CONNS);
    // The receives go in flight right after the first poll; let them.
    std::thread::sleep(Duration::from_millis(50));
    (clients, finished)
}

/// Registers every shard's shared receive pool (memory per shard, taken
/// on a shard's first waiting read, not per connection) before anything
/// is counted: one waiting read through `Compat` on each shard.
fn warm_pools(h: &RuntimeHandle, shards: usize) {
    for shard in 0..shards {
        let hh = h.clone();
        let task = h
            .spawn_pinned(shard, async move {
                let (a, mut b) = std::os::unix::net::UnixStream::pair().unwrap();
                let mut a = Compat::new(spargio::net::UnixStream::from_std(&hh, a).unwrap());
                let mut buf = [0u8; 16];
                let mut polled = false;
                let n = std::future::poll_fn(|cx| {
                    let res = Pin::new(&mut a).poll_read(cx, &mut buf);
                    if !std::mem::replace(&mut polled, true) {
                        assert!(res.is_pending(), "the socket was empty");
                        b.write_all(b"x").unwrap();
                    }
                    res
                })
                .await
                .unwrap();
                assert_eq!(n, 1);
            })
            .unwrap();
        spargio::block_on(task).unwrap();
    }
}

fn wait_until(mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "condition not reached"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn an_idle_connection_holds_about_what_its_read_asked_for() {
    let _serial = serial();
    common::within_hang_bound(|| {
        let rt = common::runtime(2);
        let h = rt.handle();
        let listener =
            Arc::new(TcpListener::bind_socket_addr(&h, "127.0.0.1:0".parse().unwrap()).unwrap());
        warm_pools(&h, 2);
        let before = live();
        let (mut clients, finished) = serve_reads(&h, &listener);
        let per_conn = (live() - before) / CONNS as i64;
        // The caller's 8 KiB, the task, the stream and its op-table entry;
        // no receive buffer: a waiting read is armed on the shard's shared
        // pool (about 9 KiB measured; with a receive buffer of the read's
        // size, 17 KiB; with a fixed 64 KiB one, 74 KiB).
        assert!(
            per_conn < (READ + 4 * 1024) as i64,
            "an idle connection holds {per_conn} bytes"
        );
        for c in &mut clients {
            c.write_all(b"x").unwrap();
        }
        wait_until(|| finished.load(Ordering::SeqCst) == CONNS);
    });
}

#[test]
fn connections_closed_mid_read_leave_nothing_behind() {
    let _serial = serial();
    common::within_hang_bound(|| {
        let rt = common::runtime(2);
        let h = rt.handle();
        let listener =
            Arc::new(TcpListener::bind_socket_addr(&h, "127.0.0.1:0".parse().unwrap()).unwrap());
        warm_pools(&h, 2);
        let mut after_round = Vec::new();
        for _ in 0..6 {
            let (clients, finished) = serve_reads(&h, &listener);
            // The peers go away with the server's reads in flight.
            drop(clients);
            wait_until(|| finished.load(Ordering::SeqCst) == CONNS);
            std::thread::sleep(Duration::from_millis(50));
            after_round.push(live());
        }
        // Round 1 warms caches (queues, slabs, the listener's state); after
        // it, rounds must not add up: what 64 connections leave behind, if
        // anything, is below 1 KiB each in total over five rounds.
        let growth = after_round[5] - after_round[1];
        assert!(
            growth < (CONNS * 1024) as i64,
            "live heap grew by {growth} bytes over rounds 2-6: {after_round:?}"
        );
    });
}

#[test]
fn a_big_read_does_not_pin_its_buffer_to_an_idle_connection() {
    let _serial = serial();
    common::within_hang_bound(|| {
        let rt = common::runtime(2);
        let h = rt.handle();
        warm_pools(&h, 2);
        let listener = TcpListener::bind_socket_addr(&h, "127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = listener.local_addr().unwrap();
        let mut client = std::net::TcpStream::connect(addr).unwrap();
        let stage = Arc::new(AtomicUsize::new(0));
        let held = Arc::new(AtomicI64::new(0));
        let (s, hd) = (stage.clone(), held.clone());
        let server = h
            .spawn_stealable(async move {
                let (stream, _) = listener.accept().await.unwrap();
                let mut compat = Compat::new(stream);
                let before = live();
                // A 256 KiB read: its receive buffer is as large.
                let mut big = vec![0u8; 256 * 1024];
                let n = std::future::poll_fn(|cx| {
                    let r = Pin::new(&mut compat).poll_read(cx, &mut big);
                    s.store(1, Ordering::SeqCst);
                    r
                })
                .await
                .unwrap();
                assert_eq!(n, 5);
                drop(big);
                // Then an 8 KiB read that waits: the adaptor holds about
                // 8 KiB now, not the 256 KiB of before.
                let mut small = vec![0u8; READ];
                let mut counted = false;
                let n = std::future::poll_fn(|cx| {
                    let r = Pin::new(&mut compat).poll_read(cx, &mut small);
                    if !counted {
                        counted = true;
                        hd.store(live() - before, Ordering::SeqCst);
                        s.store(2, Ordering::SeqCst);
                    }
                    r
                })
                .await
                .unwrap();
                assert_eq!(n, 3);
            })
            .unwrap();
        wait_until(|| stage.load(Ordering::SeqCst) == 1);
        client.write_all(b"hello").unwrap();
        wait_until(|| stage.load(Ordering::SeqCst) == 2);
        let held = held.load(Ordering::SeqCst);
        assert!(held < 64 * 1024, "the idle read holds {held} bytes");
        client.write_all(b"bye").unwrap();
        spargio::block_on(server).unwrap();
    });
}

//! Handshake timeouts: a client that connects and says nothing gets
//! `TimedOut`, and nothing is left behind (fds, ring operations, timers).
//! In its own test binary, since other tests open fds concurrently.

mod common;

use std::io::Write;
use std::time::{Duration, Instant};

use common::HANG;
use spargio::net::TcpListener;
use spargio_ws::WsOptions;

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

fn ops_and_timers(h: &spargio::RuntimeHandle) -> (usize, usize) {
    let stats = h.stats_snapshot();
    (
        stats.shards.iter().map(|s| s.pending_native_ops).sum(),
        stats.shards.iter().map(|s| s.timers_armed).sum(),
    )
}

#[test]
fn silent_clients_time_out_and_leave_no_fd_op_or_timer_behind() {
    let rt = spargio::Runtime::builder().shards(2).build().unwrap();
    let h = rt.handle();
    let listener = spargio::block_on(
        h.spawn_stealable({
            let h = h.clone();
            async move { TcpListener::bind(&h, "127.0.0.1:0").await.unwrap() }
        })
        .unwrap(),
    )
    .unwrap();
    let addr = listener.local_addr().unwrap();
    let before = open_fds();
    let baseline = ops_and_timers(&h);

    let task = h
        .spawn_stealable(async move {
            let options =
                WsOptions::default().with_handshake_timeout(Some(Duration::from_millis(30)));
            for i in 0..20 {
                let mut client = std::net::TcpStream::connect(addr).unwrap();
                if i % 2 == 1 {
                    // Half a request, then silence.
                    client.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n").unwrap();
                }
                let (tcp, _) = listener.accept().await.unwrap();
                let start = Instant::now();
                let err = spargio_ws::accept_with_options(tcp, options)
                    .await
                    .unwrap_err();
                assert_eq!(err.kind(), std::io::ErrorKind::TimedOut, "{err}");
                assert!(start.elapsed() >= Duration::from_millis(30));
                drop(client);
            }
            drop(listener);
        })
        .unwrap();
    spargio::block_on(task).unwrap();

    // Closes and cancellations complete through the rings: poll, bounded.
    let start = Instant::now();
    let mut now = (open_fds(), ops_and_timers(&h));
    while now != (before - 1, baseline) && start.elapsed() < HANG {
        std::thread::sleep(Duration::from_millis(10));
        now = (open_fds(), ops_and_timers(&h));
    }
    // The listener is gone too, hence one fd fewer than the baseline.
    assert_eq!(now.0, before - 1, "fds leaked");
    assert_eq!(
        now.1, baseline,
        "ring operations or timers left (ops, timers)"
    );
    drop(rt);
}

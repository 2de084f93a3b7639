//! `StreamSessionPolicy::IncomingCpu`: an accepted connection is served by
//! the shard running on the CPU its packets arrive on (on loopback, the
//! peer's CPU), within one stream of an even spread.

mod common;

use std::io::Write;
use std::net::SocketAddr;
use std::sync::Arc;

use common::pin;
use spargio::net::{StreamSessionPolicy, TcpListener, TcpStream};
use spargio::{Runtime, RuntimeHandle};

/// Two shards pinned to CPUs 0 and 1, or `None` (printed) on a machine
/// with fewer CPUs.
fn two_pinned_shards() -> Option<Runtime> {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cpus < 2 {
        eprintln!("SKIP: needs two CPUs, this process may use {cpus}");
        return None;
    }
    let rt = Runtime::builder()
        .shards(2)
        .thread_affinity(true)
        .build()
        .expect("runtime");
    // `build` does not wait for the shards: let each run once, so that
    // each has seen which CPU it is on.
    for shard in 0..2 {
        let on = rt.handle().spawn_pinned(shard, async {}).unwrap();
        spargio::block_on(on).unwrap();
    }
    Some(rt)
}

/// Connects from a thread pinned to `cpu` and sends one byte, so the
/// connection's packets have been processed on `cpu` before it is accepted.
fn connect_from(cpu: usize, addr: SocketAddr) -> std::net::TcpStream {
    std::thread::spawn(move || {
        pin(cpu);
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.write_all(b"x").unwrap();
        s
    })
    .join()
    .unwrap()
}

/// Accepts one connection on a task pinned to `on`, with `IncomingCpu`,
/// and returns its session shard.
fn accept_on(handle: &RuntimeHandle, on: usize, listener: &Arc<TcpListener>) -> usize {
    let listener = listener.clone();
    let task = handle
        .spawn_pinned(on, async move {
            let (stream, _) = listener
                .accept_with_session_policy(StreamSessionPolicy::IncomingCpu)
                .await
                .unwrap();
            let got = stream.recv(1).await.unwrap();
            assert_eq!(got, b"x", "the byte sent before the accept");
            stream.session_shard()
        })
        .unwrap();
    spargio::block_on(task).unwrap()
}

/// Runs `body` with a listener on a runtime of two pinned shards (within
/// the hang bound); skipped on a machine with fewer than two CPUs.
fn on_pinned_listener(
    body: impl FnOnce(&RuntimeHandle, &Arc<TcpListener>, SocketAddr) + Send + 'static,
) {
    let Some(rt) = two_pinned_shards() else {
        return;
    };
    let h = rt.handle();
    common::within_hang_bound(move || {
        let listener =
            Arc::new(TcpListener::bind_socket_addr(&h, "127.0.0.1:0".parse().unwrap()).unwrap());
        let addr = listener.local_addr().unwrap();
        body(&h, &listener, addr);
    });
}

#[test]
fn an_accepted_connection_is_served_on_the_shard_of_its_cpu() {
    on_pinned_listener(|h, listener, addr| {
        // Whichever shard accepts, the session follows the client's CPU.
        for (client_cpu, accepting) in [(1, 0), (0, 1), (1, 1), (0, 0), (1, 0), (0, 1)] {
            let _client = connect_from(client_cpu, addr);
            let session = accept_on(h, accepting, listener);
            assert_eq!(
                session, client_cpu,
                "client on CPU {client_cpu}, accepted on shard {accepting}"
            );
        }
    });
}

#[test]
fn connections_from_one_cpu_still_spread_over_every_shard() {
    on_pinned_listener(|h, listener, addr| {
        let mut per_shard = [0usize; 2];
        let mut clients = Vec::new();
        for _ in 0..16 {
            clients.push(connect_from(1, addr));
            per_shard[accept_on(h, 0, listener)] += 1;
        }
        // The near shard may lead by one stream plus an even share (8):
        // 12 and 4, with nothing else placed.
        assert_eq!(per_shard, [4, 12], "16 connections from CPU 1");
    });
}

#[test]
fn incoming_cpu_without_an_incoming_connection_spreads_evenly() {
    let rt = common::runtime(2);
    let h = rt.handle();
    common::within_hang_bound(move || {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let mut per_shard = [0usize; 2];
        let mut keep = Vec::new();
        for _ in 0..8 {
            let h2 = h.clone();
            let out = spargio::block_on(async move {
                TcpStream::connect_with_session_policy(&h2, addr, StreamSessionPolicy::IncomingCpu)
                    .await
                    .unwrap()
            });
            per_shard[out.session_shard()] += 1;
            let std = std::net::TcpStream::connect(addr).unwrap();
            let wrapped =
                TcpStream::from_std_with_session_policy(&h, std, StreamSessionPolicy::IncomingCpu)
                    .unwrap();
            per_shard[wrapped.session_shard()] += 1;
            keep.push((
                out,
                wrapped,
                listener.accept().unwrap(),
                listener.accept().unwrap(),
            ));
        }
        // Outgoing connections have no incoming CPU when placed; a wrapped
        // std stream may (the handshake's reply), and at most that lets
        // one shard lead 12 to 4.
        assert!(
            per_shard.iter().all(|&n| n >= 4),
            "16 streams spread {per_shard:?}"
        );
    });
}

//! A server spread over the runtime's shards: one `SO_REUSEPORT` socket
//! and driver per shard, one accept queue, datagrams routed to drivers by
//! connection id (`src/native/route.rs`).

mod common;
mod support;

use spargio::RuntimeHandle;
use spargio_quic::{QuicEndpoint, QuicEndpointOptions};

use common::*;
use support::*;

#[spargio::test(shards = 2)]
async fn sixteen_clients_land_on_both_shards_and_all_complete(handle: RuntimeHandle) {
    let certs = TestCerts::generate();
    let server = server(&handle, &certs, None, QuicEndpointOptions::default());
    let drivers = server.drivers();
    assert_eq!(drivers.len(), 2, "default: one driver per runtime shard");
    assert_eq!(drivers[0].owner_shard(), 0);
    assert_eq!(drivers[1].owner_shard(), 1);
    assert_eq!(drivers[0].local_addr(), drivers[1].local_addr());

    // The server answers each bi stream with its checksum.
    let acceptor = checksum_server(&handle, &server, 16);

    // 16 client endpoints (16 source ports), spread over both shards.
    let addr = server.local_addr().unwrap();
    let options = QuicEndpointOptions::default();
    uploads_from_both_shards(&handle, &certs, addr, options, 16, 256 * 1024, |_| {}).await;
    hang("acceptor", acceptor).await.unwrap();
    let per_driver: Vec<u64> = drivers.iter().map(|d| d.stats().registrations).collect();
    assert_eq!(per_driver.iter().sum::<u64>(), 16);
    assert!(
        per_driver.iter().all(|&n| n > 0),
        "the kernel put every connection on one socket: {per_driver:?}"
    );
}

/// `n` client endpoints with `options` (`n` source ports), made in turn
/// on shards 0 and 1, each passed to `check` and then uploading `len`
/// bytes with [`checked_upload`]; every checksum must match.
async fn uploads_from_both_shards(
    handle: &RuntimeHandle,
    certs: &TestCerts,
    addr: std::net::SocketAddr,
    options: QuicEndpointOptions,
    n: u64,
    len: usize,
    check: fn(&QuicEndpoint),
) {
    let mut tasks = Vec::new();
    for i in 0..n {
        let (certs, h, options) = (certs.clone(), handle.clone(), options.clone());
        tasks.push(
            handle
                .spawn_pinned((i % 2) as usize, async move {
                    let ep = client(&h, &certs, None, options);
                    check(&ep);
                    checked_upload(&ep, addr, len, i).await
                })
                .unwrap(),
        );
    }
    for t in tasks {
        assert!(hang("client", t).await.unwrap(), "checksum mismatch");
    }
}

/// Connects, uploads `len` pattern bytes (seed `seed`) on a bi stream to a
/// [`checksum_server`] and closes; whether its answer matched.
async fn checked_upload(
    ep: &QuicEndpoint,
    addr: std::net::SocketAddr,
    len: usize,
    seed: u64,
) -> bool {
    let conn = ep.connect(addr, SERVER_NAME).await.unwrap();
    let (mut send, mut recv) = conn.open_bi().await.unwrap();
    let sent = send_pattern(&mut send, len, seed).await;
    let answer = recv.read_to_end(8).await.unwrap();
    conn.close(0, b"");
    answer == sent.to_le_bytes()
}

/// Serves `n` connections: each bi stream is answered with its checksum.
fn checksum_server(
    handle: &RuntimeHandle,
    server: &QuicEndpoint,
    n: usize,
) -> spargio::JoinHandle<()> {
    let server = server.clone();
    let h = handle.clone();
    handle
        .spawn_stealable(async move {
            for _ in 0..n {
                let conn = server.accept().await.unwrap();
                h.spawn_stealable(async move {
                    while let Ok((mut send, mut recv)) = conn.accept_bi().await {
                        let (_, sum) = recv_checksum(&mut recv).await;
                        send.write_all(&sum.to_le_bytes()).await.unwrap();
                        send.finish().unwrap();
                    }
                })
                .unwrap();
            }
        })
        .unwrap()
}

/// One client port: the kernel's 4-tuple hash alone would put all of its
/// connections on one driver. Routed by connection id, they spread.
#[spargio::test(shards = 2)]
async fn one_client_port_spreads_its_connections_over_the_drivers(handle: RuntimeHandle) {
    const CONNS: usize = 32;
    let certs = TestCerts::generate();
    let server = server(&handle, &certs, None, QuicEndpointOptions::default());
    let drivers = server.drivers();
    assert!(
        drivers.iter().all(|d| d.probe().cid_routed),
        "routing program attached"
    );
    let acceptor = checksum_server(&handle, &server, CONNS);

    let ep = client(&handle, &certs, None, QuicEndpointOptions::default());
    let addr = server.local_addr().unwrap();
    let mut tasks = Vec::new();
    for i in 0..CONNS as u64 {
        let ep = ep.clone();
        tasks.push(
            handle
                .spawn_stealable(async move { checked_upload(&ep, addr, 64 * 1024, i).await })
                .unwrap(),
        );
    }
    for t in tasks {
        assert!(hang("client", t).await.unwrap(), "checksum mismatch");
    }
    hang("acceptor", acceptor).await.unwrap();
    let per_driver: Vec<u64> = drivers.iter().map(|d| d.stats().registrations).collect();
    assert_eq!(per_driver.iter().sum::<u64>(), CONNS as u64);
    // Each connection picks a driver by a random byte: all 32 on one
    // driver happens once in 2^31 runs.
    assert!(
        per_driver.iter().all(|&n| n > 0),
        "one client port's connections all on one driver: {per_driver:?}"
    );
}

/// A client that moves to a new port mid-connection (NAT rebinding) keeps
/// its connection: its datagrams still reach the driver that holds it,
/// whichever socket the new 4-tuple would hash to.
#[spargio::test(shards = 2)]
async fn a_client_that_changes_port_keeps_its_connection(handle: RuntimeHandle) {
    const CLIENTS: usize = 8;
    let certs = TestCerts::generate();
    let server = server(&handle, &certs, None, QuicEndpointOptions::default());
    let acceptor = checksum_server(&handle, &server, CLIENTS);
    let addr = server.local_addr().unwrap();
    for i in 0..CLIENTS as u64 {
        // The quinn client's helpers run on its own runtime and give up
        // after `HANG`: a lost connection fails instead of hanging.
        let quinn = QuinnClient::connect(addr, &certs, ALPN).await.unwrap();
        let n = 256 * 1024;
        assert_eq!(quinn.upload(n, i).await.unwrap(), checksum(&pattern(n, i)));
        let before = quinn.local_addr().unwrap();
        let after = quinn.rebind().unwrap();
        assert_ne!(before.port(), after.port());
        match quinn.upload(n, i + 100).await {
            Ok(sum) => assert_eq!(sum, checksum(&pattern(n, i + 100)), "client {i}"),
            Err(e) => panic!("client {i}: connection lost after rebinding: {e}"),
        }
    }
    drop(acceptor);
}

/// A client endpoint has a driver per shard on one port; a connection
/// made on a shard belongs to that shard's driver, and the server's
/// answers find it (all of them share one 4-tuple, which the kernel's
/// hash alone would send to one socket).
#[spargio::test(shards = 2)]
async fn a_clients_connections_use_the_driver_of_the_shard_that_made_them(handle: RuntimeHandle) {
    const PER_SHARD: u64 = 4;
    let certs = TestCerts::generate();
    let server = server(&handle, &certs, None, QuicEndpointOptions::default());
    let acceptor = checksum_server(&handle, &server, 2 * PER_SHARD as usize);
    let ep = client(&handle, &certs, None, QuicEndpointOptions::default());
    let drivers = ep.drivers();
    assert_eq!(drivers.len(), 2, "default: one client driver per shard");
    assert_eq!(drivers[0].local_addr(), drivers[1].local_addr());
    assert!(drivers.iter().all(|d| d.probe().cid_routed));
    let addr = server.local_addr().unwrap();
    let mut tasks = Vec::new();
    for i in 0..2 * PER_SHARD {
        let ep = ep.clone();
        tasks.push(
            handle
                .spawn_pinned((i % 2) as usize, async move {
                    checked_upload(&ep, addr, 64 * 1024, i).await
                })
                .unwrap(),
        );
    }
    for t in tasks {
        assert!(hang("client", t).await.unwrap(), "checksum mismatch");
    }
    hang("acceptor", acceptor).await.unwrap();
    let per_driver: Vec<u64> = drivers.iter().map(|d| d.stats().registrations).collect();
    assert_eq!(per_driver, vec![PER_SHARD, PER_SHARD]);
}

/// A burst of new connections is dealt to the drivers in turn, however
/// the clients' first packets landed (each by a random byte of an id the
/// client made up), so the server's handshake work splits evenly.
#[spargio::test(shards = 2)]
async fn a_burst_of_connections_is_dealt_evenly_over_the_drivers(handle: RuntimeHandle) {
    const CONNS: usize = 16;
    let certs = TestCerts::generate();
    let server = server(&handle, &certs, None, QuicEndpointOptions::default());
    let drivers = server.drivers();
    assert!(drivers.iter().all(|d| d.probe().cid_routed));
    let acceptor = checksum_server(&handle, &server, CONNS);
    let ep = client(&handle, &certs, None, QuicEndpointOptions::default());
    let addr = server.local_addr().unwrap();
    let tasks: Vec<_> = (0..CONNS as u64)
        .map(|i| {
            let ep = ep.clone();
            handle
                .spawn_stealable(async move { checked_upload(&ep, addr, 16 * 1024, i).await })
                .unwrap()
        })
        .collect();
    for t in tasks {
        assert!(hang("client", t).await.unwrap(), "checksum mismatch");
    }
    hang("acceptor", acceptor).await.unwrap();
    let per_driver: Vec<u64> = drivers.iter().map(|d| d.stats().registrations).collect();
    // By the random byte alone, 8:8 comes one run in five.
    assert_eq!(per_driver, [8, 8], "connections per driver");
    let dealt: u64 = drivers.iter().map(|d| d.stats().connections_dealt).sum();
    assert!(dealt > 0, "no connection was dealt to another driver");
}

/// Without connection-id routing (as where the kernel refuses the
/// program), a server's drivers are picked by the kernel's 4-tuple hash and
/// deal nothing, a client keeps one driver, and every connection still
/// completes.
#[spargio::test(shards = 2)]
async fn without_routing_the_kernels_hash_picks_the_driver_and_all_complete(handle: RuntimeHandle) {
    const CONNS: u64 = 16;
    let certs = TestCerts::generate();
    let unrouted = QuicEndpointOptions::default().with_connection_id_routing(false);
    let server = server(&handle, &certs, None, unrouted.clone());
    let drivers = server.drivers();
    assert_eq!(drivers.len(), 2, "still one driver per shard");
    assert!(drivers.iter().all(|d| !d.probe().cid_routed));
    let acceptor = checksum_server(&handle, &server, CONNS as usize);
    let addr = server.local_addr().unwrap();
    let one_driver = |ep: &QuicEndpoint| {
        assert_eq!(ep.drivers().len(), 1, "an unrouted client keeps one driver");
    };
    uploads_from_both_shards(
        &handle,
        &certs,
        addr,
        unrouted,
        CONNS,
        64 * 1024,
        one_driver,
    )
    .await;
    hang("acceptor", acceptor).await.unwrap();
    let stats: Vec<_> = drivers.iter().map(|d| d.stats()).collect();
    assert_eq!(stats.iter().map(|s| s.registrations).sum::<u64>(), CONNS);
    assert_eq!(stats.iter().map(|s| s.connections_dealt).sum::<u64>(), 0);
}

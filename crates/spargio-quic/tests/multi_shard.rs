//! A server spread over the runtime's shards: one `SO_REUSEPORT` socket
//! and driver per shard, one accept queue.

mod common;
mod support;

use spargio::RuntimeHandle;
use spargio_quic::QuicEndpointOptions;

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
    let acceptor = {
        let server = server.clone();
        let handle2 = handle.clone();
        handle
            .spawn_stealable(async move {
                for _ in 0..16 {
                    let conn = server.accept().await.unwrap();
                    handle2
                        .spawn_stealable(async move {
                            let (mut send, mut recv) = conn.accept_bi().await.unwrap();
                            let (_, sum) = recv_checksum(&mut recv).await;
                            send.write_all(&sum.to_le_bytes()).await.unwrap();
                            send.finish().unwrap();
                            conn.closed().await;
                        })
                        .unwrap();
                }
            })
            .unwrap()
    };

    // 16 client endpoints (16 source ports), spread over both shards.
    let addr = server.local_addr().unwrap();
    let mut tasks = Vec::new();
    for i in 0..16u64 {
        let certs = certs.clone();
        let h = handle.clone();
        tasks.push(
            handle
                .spawn_pinned((i % 2) as usize, async move {
                    let ep = client(&h, &certs, None, QuicEndpointOptions::default());
                    let conn = ep.connect(addr, SERVER_NAME).await.unwrap();
                    let (mut send, mut recv) = conn.open_bi().await.unwrap();
                    let sent = send_pattern(&mut send, 256 * 1024, i).await;
                    let answer = recv.read_to_end(8).await.unwrap();
                    conn.close(0, b"");
                    answer == sent.to_le_bytes()
                })
                .unwrap(),
        );
    }
    for t in tasks {
        assert!(hang("client", t).await.unwrap(), "checksum mismatch");
    }
    hang("acceptor", acceptor).await.unwrap();
    let per_driver: Vec<u64> = drivers.iter().map(|d| d.stats().registrations).collect();
    assert_eq!(per_driver.iter().sum::<u64>(), 16);
    assert!(
        per_driver.iter().all(|&n| n > 0),
        "the kernel put every connection on one socket: {per_driver:?}"
    );
}

//! A completion queue that overflows (issue 24): a multishot accept armed
//! on a listener with a hundred connections already queued posts a
//! hundred completions at once into a ring with room for four. The kernel
//! keeps the ones that do not fit (`IORING_FEAT_NODROP`); the runtime
//! counts the overflow and loses no connection.

mod common;

use std::net::TcpStream as StdTcpStream;

use spargio::net::TcpListener;

const CLIENTS: usize = 100;

#[test]
fn an_overflowing_completion_queue_is_counted_and_loses_nothing() {
    common::within_hang_bound(|| {
        let Some(builder) = common::io_uring_builder() else {
            return;
        };
        // Two submission entries, four completion entries.
        let rt = builder.shards(1).ring_entries(2).build().unwrap();
        let h = rt.handle();
        let accepted = spargio::block_on(
            h.spawn_pinned(0, async move {
                let h = spargio::ShardCtx::current().unwrap().handle();
                let listener = TcpListener::bind(&h, "127.0.0.1:0").await.unwrap();
                let addr = listener.local_addr().unwrap();
                // Connected before the accept is armed: all in the backlog.
                let clients: Vec<StdTcpStream> = (0..CLIENTS)
                    .map(|_| StdTcpStream::connect(addr).unwrap())
                    .collect();
                let mut incoming = listener.incoming().unwrap();
                let mut peers = Vec::new();
                for _ in 0..CLIENTS {
                    let stream = incoming.accept().await.unwrap();
                    peers.push(stream.peer_addr().unwrap());
                }
                let mut expected: Vec<_> =
                    clients.iter().map(|c| c.local_addr().unwrap()).collect();
                expected.sort();
                peers.sort();
                assert_eq!(peers, expected, "every connection accepted once");
                peers.len()
            })
            .unwrap(),
        )
        .unwrap();
        assert_eq!(accepted, CLIENTS);
        let stats = h.stats_snapshot();
        assert_eq!(stats.shards[0].ring.cq_entries, 4);
        assert!(stats.cq_overflows > 0, "{stats:?}");
        assert!(stats
            .to_prometheus_text()
            .contains("# TYPE spargio_cq_overflows_total counter"));
    });
}

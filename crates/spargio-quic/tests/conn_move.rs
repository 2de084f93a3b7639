//! A busy connection's task moves once, to even out the connection tasks
//! per shard. Alone in its test binary: placement reads the process-wide
//! count of connection tasks per shard, which other tests would change.

mod common;
mod support;

use spargio::RuntimeHandle;
use spargio_quic::{QuicEndpoint, QuicEndpointOptions};

use common::*;
use support::*;

/// The shard running the task of the one connection on `ep`'s drivers.
fn task_shard(ep: &QuicEndpoint) -> Option<usize> {
    ep.drivers().iter().find_map(|d| {
        let id = *d.connection_ids().first()?;
        d.connection_state(id).ok()?.task_shard
    })
}

fn moves(ep: &QuicEndpoint) -> u64 {
    ep.drivers()
        .iter()
        .map(|d| d.stats().connection_moves)
        .sum()
}

/// Both ends of a loopback connection start on shard 0: the client
/// connects from shard 0 (its driver there), and a fresh server deals its
/// first connection to its first driver. Past the receiver's threshold the
/// server's task moves to the empty shard, so the two ends' crypto splits
/// over both; the sender then has nothing to even out and stays.
#[spargio::test(shards = 2)]
async fn a_busy_pair_on_one_shard_splits_over_both(handle: RuntimeHandle) {
    let certs = TestCerts::generate();
    let server = server(&handle, &certs, None, QuicEndpointOptions::default());
    let addr = server.local_addr().unwrap();
    let h = handle.clone();
    let c = certs.clone();
    let connect = handle
        .spawn_pinned(0, async move {
            let ep = client(&h, &c, None, QuicEndpointOptions::default());
            let conn = ep.connect(addr, SERVER_NAME).await;
            (ep, conn)
        })
        .unwrap();
    let (connected, accepted) = hang("connect+accept", join(connect, server.accept())).await;
    let (client, conn) = connected.unwrap();
    let (conn, accepted) = (conn.expect("connect"), accepted.expect("accept"));
    assert_eq!(task_shard(&client), Some(0), "client task");
    assert_eq!(task_shard(&server), Some(0), "server task");

    let sink = handle
        .spawn_stealable(async move {
            let (_send, mut recv) = accepted.accept_bi().await.unwrap();
            recv_checksum(&mut recv).await
        })
        .unwrap();
    let (mut send, _recv) = conn.open_bi().await.unwrap();
    let sent = send_pattern(&mut send, 4 * MIB, 7).await;
    let (len, sum) = hang("sink", sink).await.unwrap();
    assert_eq!((len, sum), ((4 * MIB) as u64, sent));

    assert_eq!(moves(&server), 1, "the receiving end moved once");
    assert_eq!(moves(&client), 0, "the sending end stayed");
    assert_eq!(task_shard(&server), Some(1));
    assert_eq!(task_shard(&client), Some(0));
}

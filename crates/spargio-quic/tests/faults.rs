//! Fault injection, vanished peers and garbage input.

mod common;
mod support;

use std::io;
use std::time::Duration;

use spargio::RuntimeHandle;
use spargio_quic::{ConnectionError, NativeProtoFaultSpec, QuicEndpointOptions};

use common::*;
use support::*;

fn opts() -> QuicEndpointOptions {
    QuicEndpointOptions::default()
}

#[spargio::test(shards = 2)]
async fn ten_mib_completes_through_loss_and_reordering(handle: RuntimeHandle) {
    let certs = TestCerts::generate();
    let server = server(&handle, &certs, None, opts());
    let client = client(&handle, &certs, None, opts());
    let (c, s) = pair(&client, &server).await;
    for (i, d) in client.drivers().iter().chain(server.drivers()).enumerate() {
        d.set_fault_spec(NativeProtoFaultSpec {
            drop_inbound: 0.05,
            drop_egress: 0.05,
            reorder_egress: 0.05,
            seed: 1000 + i as u64,
        })
        .unwrap();
    }
    let sink = handle
        .spawn_stealable(async move {
            let (mut send, mut recv) = s.accept_bi().await.unwrap();
            let (len, sum) = recv_checksum(&mut recv).await;
            send.write_all(&sum.to_le_bytes()).await.unwrap();
            send.finish().unwrap();
            // Hand the connection back instead of waiting for the close:
            // without an idle timeout, a CONNECTION_CLOSE lost to the
            // injected faults would leave this side waiting for ever.
            (len, s)
        })
        .unwrap();
    let (mut send, mut recv) = c.open_bi().await.unwrap();
    let sent = hang("lossy upload", send_pattern(&mut send, 10 * MIB, 99)).await;
    let answer = hang("checksum", recv.read_to_end(8)).await.unwrap();
    assert_eq!(answer, sent.to_le_bytes());
    let (len, _s) = hang("sink", sink).await.unwrap();
    assert_eq!(len, (10 * MIB) as u64);
    c.close(0, b"");

    let faults = client.drivers()[0].fault_stats();
    let server_faults = server.drivers().iter().map(|d| d.fault_stats());
    let (mut inbound, mut egress, mut reordered) = (
        faults.inbound_dropped,
        faults.egress_dropped,
        faults.egress_reordered,
    );
    for f in server_faults {
        inbound += f.inbound_dropped;
        egress += f.egress_dropped;
        reordered += f.egress_reordered;
    }
    // ~7,500 datagrams each way at 5%: hundreds of each fault.
    assert!(
        inbound > 50 && egress > 50 && reordered > 50,
        "{inbound} {egress} {reordered}"
    );
}

#[spargio::test(shards = 2)]
async fn a_vanished_quinn_server_gives_timed_out_not_a_hang(handle: RuntimeHandle) {
    let certs = TestCerts::generate();
    let peer = QuinnServer::with(&certs, Behaviour::Sink);
    let ep = client(&handle, &certs, Some(Duration::from_millis(1000)), opts());
    let conn = hang("connect", ep.connect(peer.addr, SERVER_NAME))
        .await
        .unwrap();
    let (mut send, _recv) = conn.open_bi().await.unwrap();
    send.write_all(&pattern(100_000, 1)).await.unwrap();
    // The server host vanishes: no close, no packets, nothing read.
    peer.mute();
    let err = hang("writes into the void", async {
        let chunk = pattern(64 * 1024, 2);
        loop {
            if let Err(e) = send.write_all(&chunk).await {
                break e;
            }
        }
    })
    .await;
    assert_eq!(err.kind(), io::ErrorKind::TimedOut);
    assert_eq!(conn.closed().await, ConnectionError::TimedOut);
}

#[spargio::test(shards = 2)]
async fn a_blackholed_socket_gives_timed_out_on_our_side(handle: RuntimeHandle) {
    let certs = TestCerts::generate();
    let idle = Some(Duration::from_millis(1000));
    let server = server(&handle, &certs, idle, opts());
    let client = client(&handle, &certs, idle, opts());
    let (c, _s) = pair(&client, &server).await;
    client.drivers()[0]
        .set_fault_spec(NativeProtoFaultSpec {
            drop_inbound: 1.0,
            ..NativeProtoFaultSpec::none()
        })
        .unwrap();
    let (_send, mut recv) = c.open_bi().await.unwrap();
    let err = hang("read", recv.read_chunk(16)).await.unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::TimedOut);
    assert_eq!(c.closed().await, ConnectionError::TimedOut);
    assert!(client.drivers()[0].fault_stats().inbound_dropped > 0);
}

#[spargio::test(shards = 2)]
async fn garbage_datagrams_are_counted_and_dropped(handle: RuntimeHandle) {
    let certs = TestCerts::generate();
    let server = server(&handle, &certs, None, opts().with_shards(1));
    let driver = server.drivers()[0].clone();
    let before = driver.stats();

    let junk = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let target = server.local_addr().unwrap();
    let mut rng = 0x1234_5678_9abc_def0u64;
    for i in 0..1000usize {
        let len = 1 + i % 100;
        let data: Vec<u8> = (0..len)
            .map(|_| {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                rng as u8
            })
            .collect();
        junk.send_to(&data, target).unwrap();
    }
    // Wait (bounded) until the driver has seen all of them.
    hang("driver reads the junk", async {
        while driver.stats().datagrams_received - before.datagrams_received < 1000 {
            spargio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    let after = driver.stats();
    let malformed = after.datagrams_malformed - before.datagrams_malformed;
    let responses = after.stateless_responses - before.stateless_responses;
    assert_eq!(malformed + responses, 1000, "{malformed} {responses}");
    assert!(malformed >= 900, "{malformed}");
    assert_eq!(after.registrations, before.registrations);

    // The endpoint still serves a connection.
    let client = client(&handle, &certs, None, opts());
    let (c, s) = pair(&client, &server).await;
    let (mut send, mut recv) = c.open_bi().await.unwrap();
    send.write_all(b"still alive").await.unwrap();
    send.finish().unwrap();
    let (mut s_send, mut s_recv) = s.accept_bi().await.unwrap();
    let got = s_recv.read_to_end(64).await.unwrap();
    s_send.write_all(&got).await.unwrap();
    s_send.finish().unwrap();
    assert_eq!(recv.read_to_end(64).await.unwrap(), b"still alive");
}

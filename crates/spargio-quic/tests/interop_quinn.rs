//! Interop with quinn 0.11 on tokio, both ways: a quinn client against
//! our server, and our client against a quinn server.

mod common;
mod support;

use std::io;
use std::time::Duration;

use bytes::Bytes;
use spargio::RuntimeHandle;
use spargio_quic::{
    stream_error_code, ConnectionError, NativeProtoFaultSpec, QuicConnection, QuicEndpoint,
    QuicEndpointOptions,
};

use common::*;
use support::*;

fn opts() -> QuicEndpointOptions {
    QuicEndpointOptions::default()
}

// ===== quinn client -> our server =====

/// Our server: echo bi streams, answer uni streams with their checksum on
/// a uni stream, echo datagrams; until the connection ends.
fn serve(handle: &RuntimeHandle, conn: QuicConnection) {
    let c = conn.clone();
    handle
        .spawn_stealable(async move {
            while let Ok((mut send, mut recv)) = c.accept_bi().await {
                let data = match recv.read_to_end(32 * MIB).await {
                    Ok(d) => d,
                    Err(_) => continue,
                };
                let _ = send.write_all(&data).await;
                let _ = send.finish();
            }
        })
        .unwrap();
    let c = conn.clone();
    handle
        .spawn_stealable(async move {
            while let Ok(mut recv) = c.accept_uni().await {
                let Ok(data) = recv.read_to_end(32 * MIB).await else {
                    continue;
                };
                if let Ok(mut back) = c.open_uni().await {
                    let _ = back.write_all(&data).await;
                    let _ = back.finish();
                }
            }
        })
        .unwrap();
    handle
        .spawn_stealable(async move {
            while let Ok(d) = conn.read_datagram().await {
                let _ = conn.send_datagram(d);
            }
        })
        .unwrap();
}

async fn quinn_to_ours(
    handle: &RuntimeHandle,
    certs: &TestCerts,
    idle: Option<Duration>,
) -> (QuicEndpoint, QuinnClient, QuicConnection) {
    let server = server(handle, certs, idle, opts());
    let copts = ClientOptions::new(certs).idle_timeout(idle.or(Some(Duration::from_secs(30))));
    let (client, conn) = join(
        QuinnClient::connect_with(server.local_addr().unwrap(), copts),
        server.accept(),
    )
    .await;
    (
        server,
        client.expect("quinn connects"),
        conn.expect("accept"),
    )
}

#[spargio::test(shards = 2)]
async fn quinn_client_bi_uni_and_datagrams(handle: RuntimeHandle) {
    let certs = TestCerts::generate();
    let (_server, client, conn) = quinn_to_ours(&handle, &certs, None).await;
    assert_eq!(client.alpn().as_deref(), Some(ALPN));
    serve(&handle, conn.clone());

    let msg = pattern(200_000, 3);
    assert_eq!(client.bi_roundtrip(msg.clone()).await.unwrap(), msg);

    // Uni: the client sends one, our server answers on a uni stream.
    client.send_uni(50_000, 4).await.unwrap();
    let back = client.accept_uni().await.unwrap();
    assert_eq!(checksum(&back), checksum(&pattern(50_000, 4)));

    let payload = Bytes::from_static(b"datagram from quinn");
    assert_eq!(
        client.datagram_roundtrip(payload.clone()).await.unwrap(),
        payload
    );
}

#[spargio::test(shards = 2)]
async fn quinn_client_uploads_ten_mib(handle: RuntimeHandle) {
    let certs = TestCerts::generate();
    let (_server, client, conn) = quinn_to_ours(&handle, &certs, None).await;
    // Our server as a `Sink`: checksum of the stream, 8 bytes LE, FIN.
    let sink = handle
        .spawn_stealable(async move {
            let (mut send, mut recv) = conn.accept_bi().await.unwrap();
            let (len, sum) = recv_checksum(&mut recv).await;
            send.write_all(&sum.to_le_bytes()).await.unwrap();
            send.finish().unwrap();
            conn.closed().await;
            len
        })
        .unwrap();
    let sum = client.upload(10 * MIB, 11).await.unwrap();
    assert_eq!(sum, checksum(&pattern(10 * MIB, 11)));
    client.close(0, "done").await;
    assert_eq!(hang("sink", sink).await.unwrap(), (10 * MIB) as u64);
}

#[spargio::test(shards = 2)]
async fn quinn_client_and_our_server_close_with_reasons(handle: RuntimeHandle) {
    let certs = TestCerts::generate();
    // Our server closes: the quinn client sees code and reason.
    let (_server, client, conn) = quinn_to_ours(&handle, &certs, None).await;
    conn.close(5, b"server bye");
    assert_eq!(
        client.closed_reason().await,
        Closed::Application {
            code: 5,
            reason: "server bye".into()
        }
    );
    // The quinn client closes: our server sees code and reason.
    let (_server, client, conn) = quinn_to_ours(&handle, &certs, None).await;
    client.close(6, "client bye").await;
    match hang("closed()", conn.closed()).await {
        ConnectionError::ApplicationClosed(c) => {
            assert_eq!(c.error_code.into_inner(), 6);
            assert_eq!(&c.reason[..], b"client bye");
        }
        other => panic!("unexpected close {other:?}"),
    }
}

/// A local close goes out from the task that closes: the peer sees it
/// even while the shard running the connection's task is stuck. Here that
/// shard is blocked until the quinn client has seen the close (or, if the
/// close never leaves without it, until the hang guard gives up).
#[spargio::test(shards = 2)]
async fn our_close_reaches_quinn_while_the_connections_shard_is_blocked(handle: RuntimeHandle) {
    let certs = TestCerts::generate();
    let (server, client, conn) = quinn_to_ours(&handle, &certs, None).await;
    // A routed server's connection task runs on the shard of the driver
    // that registered it.
    let busy = server
        .drivers()
        .iter()
        .find(|d| d.stats().registrations == 1)
        .expect("one driver registered the connection")
        .owner_shard();
    let (started_tx, started) = tokio::sync::oneshot::channel::<()>();
    let (seen_tx, seen) = std::sync::mpsc::channel::<Closed>();
    let blocker = handle
        .spawn_pinned(busy, async move {
            let _ = started_tx.send(());
            // Blocks the shard's thread: nothing else runs there.
            seen.recv_timeout(HANG)
        })
        .unwrap();
    let closer = handle
        .spawn_pinned(1 - busy, async move {
            started.await.unwrap();
            conn.close(9, b"stuck shard");
            let _ = seen_tx.send(client.closed_reason().await);
        })
        .unwrap();
    let closed = hang("blocked shard", blocker).await.unwrap();
    hang("closer", closer).await.unwrap();
    assert_eq!(
        closed,
        Ok(Closed::Application {
            code: 9,
            reason: "stuck shard".into()
        }),
        "the close did not reach the peer while the connection's shard was blocked"
    );
}

#[spargio::test(shards = 2)]
async fn quinn_client_stream_resets_both_ways(handle: RuntimeHandle) {
    let certs = TestCerts::generate();
    let (_server, client, conn) = quinn_to_ours(&handle, &certs, None).await;
    // The quinn client resets: our reader sees its code.
    let reader = {
        let conn = conn.clone();
        handle
            .spawn_stealable(async move {
                let (_send, mut recv) = conn.accept_bi().await.unwrap();
                loop {
                    match recv.read_chunk(usize::MAX).await {
                        Ok(Some(_)) => continue,
                        Ok(None) => panic!("FIN instead of reset"),
                        Err(e) => break (e.kind(), stream_error_code(&e)),
                    }
                }
            })
            .unwrap()
    };
    client.send_then_reset(10_000, 1, 9).await.unwrap();
    assert_eq!(
        hang("reader", reader).await.unwrap(),
        (io::ErrorKind::ConnectionReset, Some(9))
    );
    // Our server resets its half: the quinn client reads the code.
    let resetter = handle
        .spawn_stealable(async move {
            let (mut send, mut recv) = conn.accept_bi().await.unwrap();
            let _ = recv.read_to_end(1 << 20).await;
            send.reset(13).unwrap();
            conn.closed().await
        })
        .unwrap();
    assert_eq!(client.expect_reset(b"reset me".to_vec()).await.unwrap(), 13);
    client.close(0, "").await;
    hang("resetter", resetter).await.unwrap();
}

#[spargio::test(shards = 2)]
async fn quinn_client_idle_timeout_when_our_server_goes_silent(handle: RuntimeHandle) {
    let certs = TestCerts::generate();
    let idle = Some(Duration::from_millis(1000));
    let (server, client, conn) = quinn_to_ours(&handle, &certs, idle).await;
    let silent = NativeProtoFaultSpec {
        drop_inbound: 1.0,
        drop_egress: 1.0,
        ..NativeProtoFaultSpec::none()
    };
    for d in server.drivers() {
        d.set_fault_spec(silent).unwrap();
    }
    assert_eq!(client.closed_reason().await, Closed::TimedOut);
    assert_eq!(
        hang("our side", conn.closed()).await,
        ConnectionError::TimedOut
    );
}

// ===== our client -> quinn server =====

async fn ours_to_quinn(
    handle: &RuntimeHandle,
    certs: &TestCerts,
    behaviour: Behaviour,
    idle: Option<Duration>,
) -> (QuinnServer, QuicEndpoint, QuicConnection) {
    let peer = QuinnServer::with(certs, behaviour);
    let ep = client(handle, certs, idle, opts());
    let conn = hang("connect", ep.connect(peer.addr, SERVER_NAME))
        .await
        .expect("connect to quinn");
    (peer, ep, conn)
}

#[spargio::test(shards = 2)]
async fn our_client_bi_and_uni_against_quinn_echo(handle: RuntimeHandle) {
    let certs = TestCerts::generate();
    let (peer, _ep, conn) = ours_to_quinn(&handle, &certs, Behaviour::Echo, None).await;
    let (mut send, mut recv) = conn.open_bi().await.unwrap();
    let msg = pattern(150_000, 5);
    let writer = handle
        .spawn_stealable(async move {
            send.write_all(&msg).await.unwrap();
            send.finish().unwrap();
            checksum(&msg)
        })
        .unwrap();
    let back = hang("echo", recv.read_to_end(1 << 20)).await.unwrap();
    assert_eq!(checksum(&back), writer.await.unwrap());

    let mut uni = conn.open_uni().await.unwrap();
    uni.write_all(&pattern(20_000, 6)).await.unwrap();
    uni.finish().unwrap();
    let mut back = hang("uni echo", conn.accept_uni()).await.unwrap();
    let back = back.read_to_end(1 << 20).await.unwrap();
    assert_eq!(checksum(&back), checksum(&pattern(20_000, 6)));
    let seen = peer
        .wait_until(|o| o.streams.iter().any(|s| s.kind == StreamKind::Uni))
        .await
        .unwrap();
    assert_eq!(seen.alpn, vec![Some(ALPN.to_vec())]);
}

#[spargio::test(shards = 2)]
async fn our_client_uploads_and_downloads_ten_mib(handle: RuntimeHandle) {
    let certs = TestCerts::generate();
    let (_peer, _ep, conn) = ours_to_quinn(&handle, &certs, Behaviour::Sink, None).await;
    let (mut send, mut recv) = conn.open_bi().await.unwrap();
    let sent = hang("upload", send_pattern(&mut send, 10 * MIB, 21)).await;
    let answer = hang("checksum", recv.read_to_end(8)).await.unwrap();
    assert_eq!(answer, sent.to_le_bytes());

    let (_peer, _ep, conn) =
        ours_to_quinn(&handle, &certs, Behaviour::Source(10 * MIB), None).await;
    let (mut send, mut recv) = conn.open_bi().await.unwrap();
    send.write_all(&22u64.to_le_bytes()).await.unwrap();
    send.finish().unwrap();
    let (len, sum) = hang("download", recv_checksum(&mut recv)).await;
    assert_eq!(len, (10 * MIB) as u64);
    assert_eq!(sum, checksum(&pattern(10 * MIB, 22)));
}

#[spargio::test(shards = 2)]
async fn our_client_datagrams_against_quinn(handle: RuntimeHandle) {
    let certs = TestCerts::generate();
    let (peer, _ep, conn) = ours_to_quinn(&handle, &certs, Behaviour::DatagramEcho, None).await;
    for i in 0..3u8 {
        let payload = Bytes::from(vec![i; 800]);
        conn.send_datagram(payload.clone()).unwrap();
        assert_eq!(
            hang("datagram", conn.read_datagram()).await.unwrap(),
            payload
        );
    }
    assert!(peer.observed().datagrams >= 3);
}

#[spargio::test(shards = 2)]
async fn our_client_and_quinn_server_close_with_reasons(handle: RuntimeHandle) {
    let certs = TestCerts::generate();
    let behaviour = Behaviour::CloseWith(77, "quinn says bye".into());
    let (_peer, _ep, conn) = ours_to_quinn(&handle, &certs, behaviour, None).await;
    match hang("closed()", conn.closed()).await {
        ConnectionError::ApplicationClosed(c) => {
            assert_eq!(c.error_code.into_inner(), 77);
            assert_eq!(&c.reason[..], b"quinn says bye");
        }
        other => panic!("unexpected close {other:?}"),
    }

    let (peer, _ep, conn) = ours_to_quinn(&handle, &certs, Behaviour::Echo, None).await;
    conn.close(88, b"spargio says bye");
    let seen = peer.wait_until(|o| !o.closes.is_empty()).await.unwrap();
    assert_eq!(
        seen.closes,
        vec![Closed::Application {
            code: 88,
            reason: "spargio says bye".into()
        }]
    );
}

#[spargio::test(shards = 2)]
async fn our_client_stream_resets_both_ways(handle: RuntimeHandle) {
    let certs = TestCerts::generate();
    let (peer, _ep, conn) = ours_to_quinn(&handle, &certs, Behaviour::ResetStream(31), None).await;
    // The quinn server resets the first stream: we read its code.
    let (mut send, mut recv) = conn.open_bi().await.unwrap();
    send.write_all(b"first").await.unwrap();
    let err = hang("reset", async {
        loop {
            match recv.read_chunk(1024).await {
                Ok(Some(_)) => continue,
                Ok(None) => panic!("FIN instead of reset"),
                Err(e) => break e,
            }
        }
    })
    .await;
    assert_eq!(err.kind(), io::ErrorKind::ConnectionReset);
    assert_eq!(stream_error_code(&err), Some(31));
    // We reset a later stream: the quinn server records our code.
    let (mut send, _recv) = conn.open_bi().await.unwrap();
    send.write_all(&pattern(10_000, 1)).await.unwrap();
    send.reset(44).unwrap();
    let seen = peer
        .wait_until(|o| o.resets_received.contains(&44))
        .await
        .unwrap();
    assert!(seen.streams.iter().any(|s| s.end == StreamEnd::Reset(44)));
}

#[spargio::test(shards = 2)]
async fn our_client_idle_timeout_against_a_vanished_quinn_server(handle: RuntimeHandle) {
    let certs = TestCerts::generate();
    let idle = Some(Duration::from_millis(1000));
    let (_peer, _ep, conn) = ours_to_quinn(&handle, &certs, Behaviour::Silent, idle).await;
    let (mut send, mut recv) = conn.open_bi().await.unwrap();
    send.write_all(b"hello?").await.unwrap();
    assert_eq!(
        hang("closed()", conn.closed()).await,
        ConnectionError::TimedOut
    );
    assert_eq!(
        recv.read_chunk(8).await.unwrap_err().kind(),
        io::ErrorKind::TimedOut
    );
}

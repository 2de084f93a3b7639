//! Our client against our server (native backend on both sides).

mod common;
mod support;

use std::future::Future;
use std::io;
use std::pin::pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use spargio::RuntimeHandle;
use spargio_quic::{stream_error_code, ConnectionError, NativeProtoFaultSpec, QuicEndpointOptions};

use common::{checksum, pattern, TestCerts};
use support::*;

fn options() -> QuicEndpointOptions {
    QuicEndpointOptions::default()
}

#[spargio::test(shards = 2)]
async fn bi_and_uni_streams_round_trip(handle: RuntimeHandle) {
    let certs = TestCerts::generate();
    let server = server(&handle, &certs, None, options());
    let client = client(&handle, &certs, None, options());
    let (c, s) = pair(&client, &server).await;

    // The server echoes one bi stream and answers one uni stream with a
    // uni stream carrying its checksum.
    let echo = handle
        .spawn_stealable(async move {
            let (mut send, mut recv) = s.accept_bi().await?;
            let data = recv.read_to_end(1 << 20).await?;
            send.write_all(&data).await?;
            send.finish()?;
            let mut uni = s.accept_uni().await?;
            let data = uni.read_to_end(1 << 20).await?;
            let mut back = s.open_uni().await?;
            back.write_all(&checksum(&data).to_le_bytes()).await?;
            back.finish()?;
            s.closed().await;
            io::Result::Ok(())
        })
        .unwrap();

    let (mut send, mut recv) = c.open_bi().await.unwrap();
    let msg = pattern(100_000, 1);
    send.write_all(&msg).await.unwrap();
    send.finish().unwrap();
    let back = hang("bi echo", recv.read_to_end(1 << 20)).await.unwrap();
    assert_eq!(back, msg);

    let mut uni = c.open_uni().await.unwrap();
    let msg = pattern(5_000, 2);
    uni.write_all(&msg).await.unwrap();
    uni.finish().unwrap();
    let mut answer = hang("uni answer", c.accept_uni()).await.unwrap();
    let sum = answer.read_to_end(8).await.unwrap();
    assert_eq!(sum, checksum(&msg).to_le_bytes());

    c.close(0, b"done");
    hang("server task", echo).await.unwrap().unwrap();
}

#[spargio::test(shards = 2)]
async fn ten_mib_with_checksum(handle: RuntimeHandle) {
    let certs = TestCerts::generate();
    let server = server(&handle, &certs, None, options());
    let client = client(&handle, &certs, None, options());
    let (c, s) = pair(&client, &server).await;

    let sink = handle
        .spawn_stealable(async move {
            let (mut send, mut recv) = s.accept_bi().await.unwrap();
            let (len, sum) = recv_checksum(&mut recv).await;
            send.write_all(&sum.to_le_bytes()).await.unwrap();
            send.finish().unwrap();
            s.closed().await;
            len
        })
        .unwrap();

    let (mut send, mut recv) = c.open_bi().await.unwrap();
    let sent = hang("10 MiB upload", send_pattern(&mut send, 10 * MIB, 7)).await;
    let answer = hang("checksum", recv.read_to_end(8)).await.unwrap();
    assert_eq!(answer, sent.to_le_bytes());
    c.close(0, b"");
    assert_eq!(hang("sink", sink).await.unwrap(), (10 * MIB) as u64);

    // Where the kernel has GSO, bulk data leaves in segmented sends.
    let driver = &client.drivers()[0];
    let stats = driver.stats();
    if driver.probe().max_gso_segments > 1 {
        assert!(
            stats.send_ops * 4 < stats.datagrams_sent,
            "GSO available but unused: {stats:?}"
        );
    } else {
        eprintln!("no UDP GSO on this kernel: segmented sends not checked");
    }
    assert_eq!(stats.send_errors, 0);
}

#[spargio::test(shards = 2)]
async fn datagrams_round_trip(handle: RuntimeHandle) {
    let certs = TestCerts::generate();
    let server = server(&handle, &certs, None, options());
    let client = client(&handle, &certs, None, options());
    let (c, s) = pair(&client, &server).await;
    assert!(c.max_datagram_size().unwrap() >= 1000);

    let echo = handle
        .spawn_stealable(async move {
            for _ in 0..3 {
                let d = s.read_datagram().await.unwrap();
                s.send_datagram(d).unwrap();
            }
            // Keep the connection open until the client is done (a close
            // discards datagrams still queued).
            s.closed().await
        })
        .unwrap();
    // Datagrams are unreliable; on loopback without loss each arrives.
    // Send one at a time and wait for its echo.
    for i in 0..3u8 {
        let payload = Bytes::from(vec![i; 500]);
        c.send_datagram(payload.clone()).unwrap();
        let back = hang("datagram echo", c.read_datagram()).await.unwrap();
        assert_eq!(back, payload);
    }
    // Oversize datagrams are refused, not truncated.
    let too_big = Bytes::from(vec![0u8; 70_000]);
    assert_eq!(
        c.send_datagram(too_big).unwrap_err().kind(),
        io::ErrorKind::InvalidInput
    );
    c.close(3, b"done");
    let closed = hang("echo task", echo).await.unwrap();
    assert!(
        matches!(closed, ConnectionError::ApplicationClosed(ref a) if a.error_code.into_inner() == 3)
    );
}

#[spargio::test(shards = 2)]
async fn close_code_and_reason_reach_the_peer(handle: RuntimeHandle) {
    let certs = TestCerts::generate();
    let server = server(&handle, &certs, None, options());
    let client = client(&handle, &certs, None, options());
    let (c, s) = pair(&client, &server).await;

    s.close(42, b"bye now");
    match hang("client closed()", c.closed()).await {
        ConnectionError::ApplicationClosed(close) => {
            assert_eq!(close.error_code.into_inner(), 42);
            assert_eq!(&close.reason[..], b"bye now");
        }
        other => panic!("unexpected close: {other:?}"),
    }
    assert_eq!(s.closed().await, ConnectionError::LocallyClosed);
    // Later operations fail with the matching kinds.
    let err = c.open_bi().await.unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::ConnectionReset);
    let err = s.open_bi().await.unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::ConnectionAborted);
}

#[spargio::test(shards = 2)]
async fn a_stream_reset_is_seen_by_the_reader(handle: RuntimeHandle) {
    let certs = TestCerts::generate();
    let server = server(&handle, &certs, None, options());
    let client = client(&handle, &certs, None, options());
    let (c, s) = pair(&client, &server).await;

    let mut send = c.open_uni().await.unwrap();
    send.write_all(b"partial").await.unwrap();
    let mut recv = hang("accept_uni", s.accept_uni()).await.unwrap();
    send.reset(7).unwrap();
    let err = hang("read after reset", async {
        loop {
            match recv.read_chunk(1024).await {
                Ok(Some(_)) => continue,
                Ok(None) => panic!("stream ended with FIN instead of a reset"),
                Err(e) => break e,
            }
        }
    })
    .await;
    assert_eq!(err.kind(), io::ErrorKind::ConnectionReset);
    assert_eq!(stream_error_code(&err), Some(7));
    // Reading again repeats the reset; it does not turn into an end.
    let again = recv.read_chunk(1024).await.unwrap_err();
    assert_eq!(stream_error_code(&again), Some(7));
}

#[spargio::test(shards = 2)]
async fn idle_timeout_gives_timed_out(handle: RuntimeHandle) {
    let certs = TestCerts::generate();
    let idle = Some(Duration::from_millis(1000));
    let server = server(&handle, &certs, idle, options());
    let client = client(&handle, &certs, idle, options());
    let (c, _s) = pair(&client, &server).await;
    // The server goes silent: everything to and from it is dropped.
    let blackhole = NativeProtoFaultSpec {
        drop_inbound: 1.0,
        drop_egress: 1.0,
        ..NativeProtoFaultSpec::none()
    };
    for d in server.drivers() {
        d.set_fault_spec(blackhole).unwrap();
    }
    let (mut send, mut recv) = c.open_bi().await.unwrap();
    send.write_all(b"anyone there?").await.unwrap();
    assert_eq!(
        hang("closed()", c.closed()).await,
        ConnectionError::TimedOut
    );
    let err = recv.read_chunk(16).await.unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::TimedOut);
}

#[spargio::test(shards = 2)]
async fn waiting_past_max_inflight_ops_is_would_block(handle: RuntimeHandle) {
    let certs = TestCerts::generate();
    let server = server(&handle, &certs, None, options().with_max_inflight_ops(2));
    let client = client(&handle, &certs, None, options());
    let (_c, s) = pair(&client, &server).await;

    let mut cx = Context::from_waker(std::task::Waker::noop());
    let mut a = pin!(s.accept_bi());
    let mut b = pin!(s.read_datagram());
    let mut extra = pin!(s.accept_uni());
    assert!(a.as_mut().poll(&mut cx).is_pending());
    assert!(b.as_mut().poll(&mut cx).is_pending());
    match extra.as_mut().poll(&mut cx) {
        Poll::Ready(Err(e)) => assert_eq!(e.kind(), io::ErrorKind::WouldBlock),
        other => panic!(
            "expected WouldBlock, got {:?}",
            other.map(|r| r.map(|_| ()))
        ),
    }
    // Polling an already-registered operation again does not count twice.
    assert!(a.as_mut().poll(&mut cx).is_pending());
    assert!(server.metrics().snapshot().backpressure_hits >= 1);
    let refused: u64 = server
        .drivers()
        .iter()
        .map(|d| d.stats().backpressure)
        .sum();
    assert!(refused >= 1);
}

#[spargio::test(shards = 2)]
async fn a_dropped_read_loses_no_data(handle: RuntimeHandle) {
    let certs = TestCerts::generate();
    let server = server(&handle, &certs, None, options());
    let client = client(&handle, &certs, None, options());
    let (c, s) = pair(&client, &server).await;

    let (mut send, mut recv) = c.open_bi().await.unwrap();
    send.write_all(b"hello").await.unwrap();
    let (mut s_send, mut s_recv) = hang("accept_bi", s.accept_bi()).await.unwrap();
    assert_eq!(
        &hang("first", s_recv.read_chunk(5)).await.unwrap().unwrap()[..],
        b"hello"
    );

    // A read that is waiting when it is dropped takes nothing with it.
    {
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let mut read = pin!(recv.read_chunk(1024));
        assert!(read.as_mut().poll(&mut cx).is_pending());
    }
    let msg = pattern(300_000, 9);
    s_send.write_all(&msg).await.unwrap();
    s_send.finish().unwrap();
    let got = hang("read after drop", recv.read_to_end(1 << 20))
        .await
        .unwrap();
    assert_eq!(checksum(&got), checksum(&msg));
}

#[spargio::test(shards = 2)]
async fn a_dropped_accept_leaves_the_connection_queued(handle: RuntimeHandle) {
    let certs = TestCerts::generate();
    let server = server(&handle, &certs, None, options());
    let client = client(&handle, &certs, None, options());
    {
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let mut accept = pin!(server.accept());
        assert!(accept.as_mut().poll(&mut cx).is_pending());
    }
    let c = hang(
        "connect",
        client.connect(server.local_addr().unwrap(), common::SERVER_NAME),
    )
    .await
    .unwrap();
    let s = hang("accept", server.accept()).await.unwrap();
    assert_eq!(s.remote_address(), client.local_addr().unwrap());
    c.send_datagram(Bytes::from_static(b"x")).unwrap();
    assert_eq!(
        &hang("datagram", s.read_datagram()).await.unwrap()[..],
        b"x"
    );
}

#[spargio::test(shards = 2)]
async fn peer_certificate_chain_is_reported(handle: RuntimeHandle) {
    let certs = TestCerts::generate();
    let server = server(&handle, &certs, None, options());
    let client = client(&handle, &certs, None, options());
    let (c, s) = pair(&client, &server).await;
    let chain = c.peer_cert_chain_der().unwrap();
    assert_eq!(chain[0], certs.cert_chain_der()[0].as_ref());
    // No client auth: the server has no chain for the client.
    assert_eq!(
        s.peer_cert_chain_der().unwrap_err().kind(),
        io::ErrorKind::NotConnected
    );
    let local = c.to_local();
    assert_eq!(local.stable_id(), c.stable_id());
    assert_eq!(local.to_send_handle().stable_id(), c.stable_id());
}

#[spargio::test(shards = 2)]
async fn the_native_path_never_touches_the_bridge_runtime(handle: RuntimeHandle) {
    // Nothing in this test binary uses the bridge backend.
    let certs = TestCerts::generate();
    let server = server(&handle, &certs, None, options());
    let client = client(&handle, &certs, None, options());
    let (c, s) = pair(&client, &server).await;
    let (mut send, _recv) = c.open_bi().await.unwrap();
    send.write_all(b"native only").await.unwrap();
    send.finish().unwrap();
    let (_s_send, mut s_recv) = s.accept_bi().await.unwrap();
    assert_eq!(s_recv.read_to_end(64).await.unwrap(), b"native only");
    assert_eq!(spargio_quic::bridge_runtime_spawn_count(), 0);
    assert_eq!(spargio_quic::bridge_runtime_context_enter_count(), 0);
    let m = client.metrics().snapshot();
    assert!(m.native_ops_dispatched > 0);
    assert_eq!(m.bridge_ops_dispatched, 0);
}

#[test]
fn handles_and_timeouts_work_from_a_thread_outside_the_runtime() {
    let rt = spargio::Runtime::builder().shards(2).build().unwrap();
    let handle = rt.handle();
    let certs = TestCerts::generate();
    let opts = options().with_operation_timeout(Some(Duration::from_millis(200)));
    let server = server(&handle, &certs, None, opts.clone());
    let client = client(&handle, &certs, None, opts);
    // This thread is not a shard: everything below is driven by a plain
    // block_on, and the timeouts are armed on the runtime's shards.
    spargio::block_on(async {
        let addr = server.local_addr().unwrap();
        let (c, s) = join(client.connect(addr, common::SERVER_NAME), server.accept()).await;
        let (c, s) = (c.unwrap(), s.unwrap());
        let (mut send, mut recv) = c.open_bi().await.unwrap();
        send.write_all(b"from outside").await.unwrap();
        send.finish().unwrap();
        let (mut s_send, mut s_recv) = s.accept_bi().await.unwrap();
        assert_eq!(s_recv.read_to_end(64).await.unwrap(), b"from outside");
        s_send.write_all(b"ok").await.unwrap();
        s_send.finish().unwrap();
        assert_eq!(recv.read_to_end(64).await.unwrap(), b"ok");
        // Nothing arrives: the operation timeout ends the wait.
        let err = s.accept_uni().await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert_eq!(server.metrics().snapshot().operation_timeouts, 1);
    });
}

struct PanickingWaker;

impl std::task::Wake for PanickingWaker {
    fn wake(self: std::sync::Arc<Self>) {
        panic!("a user waker that panics");
    }
}

#[spargio::test(shards = 2)]
async fn a_panicking_waker_does_not_stop_the_driver(handle: RuntimeHandle) {
    let certs = TestCerts::generate();
    let server = server(&handle, &certs, None, options().with_shards(1));
    let client = client(&handle, &certs, None, options());
    let (c, s) = pair(&client, &server).await;
    let waker = std::task::Waker::from(std::sync::Arc::new(PanickingWaker));
    let mut cx = Context::from_waker(&waker);
    {
        let mut read = pin!(s.read_datagram());
        assert!(read.as_mut().poll(&mut cx).is_pending());
        c.send_datagram(Bytes::from_static(b"wake it")).unwrap();
        let driver = &server.drivers()[0];
        hang("the driver wakes the waker", async {
            while driver.stats().waker_panics == 0 {
                spargio::time::sleep(Duration::from_millis(2)).await;
            }
        })
        .await;
    }
    // The driver still runs: the queued datagram and a stream get through.
    assert_eq!(
        &hang("datagram", s.read_datagram()).await.unwrap()[..],
        b"wake it"
    );
    let (mut send, _recv) = c.open_bi().await.unwrap();
    send.write_all(b"still here").await.unwrap();
    send.finish().unwrap();
    let (_s_send, mut s_recv) = hang("accept_bi", s.accept_bi()).await.unwrap();
    assert_eq!(s_recv.read_to_end(64).await.unwrap(), b"still here");
    assert_eq!(server.drivers()[0].stats().waker_panics, 1);
}

#[test]
fn runtime_shutdown_fails_a_waiting_accept_instead_of_hanging() {
    let rt = spargio::Runtime::builder().shards(1).build().unwrap();
    let handle = rt.handle();
    let certs = TestCerts::generate();
    let server = server(&handle, &certs, None, options());
    let (tx, rx) = std::sync::mpsc::channel();
    let waiter = server.clone();
    std::thread::spawn(move || {
        let res = spargio::block_on(waiter.accept());
        tx.send(res.map(|_| ()).map_err(|e| e.kind())).unwrap();
    });
    // Whether the accept registered before the shutdown or polls after
    // it, it must end with BrokenPipe.
    spargio::block_on(rt.shutdown());
    let res = rx.recv_timeout(common::HANG).expect("accept still waiting");
    assert_eq!(res, Err(io::ErrorKind::BrokenPipe));
    assert!(server.drivers()[0].is_closed());
}

#[spargio::test(shards = 2)]
async fn an_endpoint_over_a_hand_started_driver(handle: RuntimeHandle) {
    use spargio_quic::{NativeProtoDriver, NativeProtoDriverOptions, QuicEndpoint};
    let certs = TestCerts::generate();
    let driver = NativeProtoDriver::start(
        &handle,
        NativeProtoDriverOptions::new(1, localhost())
            .with_server_config(certs.quinn_server_config(&[common::ALPN], None)),
    )
    .unwrap();
    assert_eq!(driver.owner_shard(), 1);
    let server = QuicEndpoint::from_driver(&handle, driver.clone(), options());
    let client = client(&handle, &certs, None, options());
    let (c, s) = pair(&client, &server).await;
    c.send_datagram(Bytes::from_static(b"hi")).unwrap();
    assert_eq!(
        &hang("datagram", s.read_datagram()).await.unwrap()[..],
        b"hi"
    );
    assert_eq!(driver.connection_ids(), vec![s.stable_id()]);
    let state = driver.connection_state(s.stable_id()).unwrap();
    assert!(state.established && !state.closed);
    assert_eq!(state.datagrams_received, 1);
    let events = driver.drain_events(16);
    assert!(
        events.contains(&spargio_quic::NativeProtoEvent::ConnectionEstablished {
            connection_id: s.stable_id()
        })
    );
    assert!(driver.timer_state().deadline.is_some());
    drop((c, s, server));
    hang("driver shutdown", async {
        while !driver.is_closed() {
            spargio::time::sleep(Duration::from_millis(2)).await;
        }
    })
    .await;
    // After shutdown every request fails with BrokenPipe.
    let err = driver
        .set_fault_spec(NativeProtoFaultSpec::none())
        .unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::BrokenPipe);
    assert!(driver.connection_ids().is_empty());
}

#[spargio::test(shards = 2)]
async fn transport_tuning_bounds_datagrams_and_rejects_zero(handle: RuntimeHandle) {
    use spargio_quic::{NativeProtoEvent, NativeProtoTransportTuning};
    let certs = TestCerts::generate();
    let server = server(&handle, &certs, None, options());
    let client = client(&handle, &certs, None, options());
    let (c, _s) = pair(&client, &server).await;
    let driver = &client.drivers()[0];
    let zero = NativeProtoTransportTuning::default().with_max_datagram_size(0);
    assert_eq!(
        driver.set_transport_tuning(zero).unwrap_err().kind(),
        io::ErrorKind::InvalidInput
    );
    let small = NativeProtoTransportTuning::default().with_max_datagram_size(100);
    driver.set_transport_tuning(small).unwrap();
    assert_eq!(driver.transport_tuning(), small);
    c.send_datagram(Bytes::from(vec![1u8; 100])).unwrap();
    let err = c.send_datagram(Bytes::from(vec![1u8; 101])).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    assert_eq!(driver.stats().oversize_rejections, 1);
    assert!(driver
        .drain_events(64)
        .contains(&NativeProtoEvent::OversizeRejected {
            connection_id: c.stable_id(),
            size: 101
        }));
}

#[spargio::test(shards = 2)]
async fn closed_still_reports_the_reason_past_max_inflight_ops(handle: RuntimeHandle) {
    let certs = TestCerts::generate();
    let server = server(&handle, &certs, None, options().with_max_inflight_ops(1));
    let client = client(&handle, &certs, None, options());
    let (c, s) = pair(&client, &server).await;
    let mut cx = Context::from_waker(std::task::Waker::noop());
    let mut waiting = pin!(s.accept_bi());
    assert!(waiting.as_mut().poll(&mut cx).is_pending());
    let refused = || -> u64 {
        server
            .drivers()
            .iter()
            .map(|d| d.stats().backpressure)
            .sum()
    };
    let before = refused();
    // `closed()` waiters are exempt from the bound: it registers (no
    // WouldBlock, so no backpressure counted) and the close wakes it.
    let mut closed = pin!(s.closed());
    assert!(closed.as_mut().poll(&mut cx).is_pending());
    assert_eq!(refused(), before);
    c.close(9, b"over the bound");
    match hang("closed()", closed).await {
        ConnectionError::ApplicationClosed(a) => assert_eq!(a.error_code.into_inner(), 9),
        other => panic!("unexpected close {other:?}"),
    }
    assert_eq!(refused(), before);
    assert_eq!(server.metrics().snapshot().backpressure_hits, 0);
}

#[spargio::test(shards = 2)]
async fn a_closed_connection_is_drained_and_removed_once(handle: RuntimeHandle) {
    use spargio_quic::NativeProtoEvent;
    let certs = TestCerts::generate();
    let server = server(&handle, &certs, None, options().with_shards(1));
    let client = client(&handle, &certs, None, options());
    let (c, s) = pair(&client, &server).await;
    let id = s.stable_id();
    c.close(0, b"bye");
    // Both sides drain (3 PTOs) and forget the connection.
    hang("server idle", server.wait_idle()).await.unwrap();
    hang("client idle", client.wait_idle()).await.unwrap();
    let driver = &server.drivers()[0];
    assert!(driver.connection_ids().is_empty());
    assert_eq!(driver.stats().connections_closed, 1);
    let closed: Vec<_> = driver
        .drain_events(1024)
        .into_iter()
        .filter(|e| matches!(e, NativeProtoEvent::ConnectionClosed { .. }))
        .collect();
    assert_eq!(
        closed,
        vec![NativeProtoEvent::ConnectionClosed { connection_id: id }]
    );
    assert_eq!(
        driver.connection_state(id).unwrap_err().kind(),
        io::ErrorKind::NotFound
    );
    // The handles still answer, with the reason.
    assert!(matches!(
        s.closed().await,
        ConnectionError::ApplicationClosed(_)
    ));
}

#[spargio::test(shards = 2)]
async fn past_the_accept_backlog_new_clients_are_refused(handle: RuntimeHandle) {
    let certs = TestCerts::generate();
    let server = server(&handle, &certs, None, options().with_accept_backlog(1));
    let client = client(&handle, &certs, None, options());
    let addr = server.local_addr().unwrap();
    // The first connection fills the backlog (nobody accepts it yet).
    let first = hang("first connect", client.connect(addr, common::SERVER_NAME))
        .await
        .unwrap();
    let err = hang("second connect", client.connect(addr, common::SERVER_NAME))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::ConnectionRefused);
    let refused: u64 = server
        .drivers()
        .iter()
        .map(|d| d.stats().incoming_refused)
        .sum();
    assert_eq!(refused, 1);
    // Taking the queued connection makes room again.
    let s = hang("accept", server.accept()).await.unwrap();
    assert_eq!(s.remote_address(), client.local_addr().unwrap());
    let third = hang("third connect", client.connect(addr, common::SERVER_NAME)).await;
    assert!(third.is_ok());
    drop(first);
}

/// A socket keeps more receives waiting while datagrams queue up (a bulk
/// upload) and one while they come one at a time (request/response):
/// each datagram wakes every waiting receive, and all but one then fail.
#[spargio::test(shards = 2)]
async fn receives_kept_waiting_follow_the_traffic(handle: RuntimeHandle) {
    let certs = TestCerts::generate();
    let server = server(&handle, &certs, None, options());
    let client = client(&handle, &certs, None, options());
    let (c, s) = pair(&client, &server).await;
    let echo = handle
        .spawn_stealable(async move {
            let (mut send, mut recv) = s.accept_bi().await?;
            while let Some(chunk) = recv.read_chunk(usize::MAX).await? {
                send.write_bytes(chunk).await?;
            }
            send.finish()?;
            io::Result::Ok(())
        })
        .unwrap();
    let (mut send, mut recv) = c.open_bi().await.unwrap();
    let mut exchange = async |msg: Bytes| {
        let (_, got) = join(send.write_bytes(msg.clone()), async {
            let mut got = Vec::new();
            while got.len() < msg.len() {
                let chunk = recv.read_chunk(msg.len() - got.len()).await.unwrap();
                got.extend_from_slice(&chunk.expect("echo ended early"));
            }
            got
        })
        .await;
        assert_eq!(got, msg);
    };
    // Bulk: 8 MiB each way; the kernel coalesces what queues up.
    hang("bulk", exchange(Bytes::from(pattern(8 << 20, 1)))).await;
    let drivers: Vec<_> = server
        .drivers()
        .iter()
        .chain(client.drivers())
        .cloned()
        .collect();
    let grows: u64 = drivers.iter().map(|d| d.stats().receive_window_grows).sum();
    assert!(
        grows > 0,
        "no driver kept more receives waiting during a bulk transfer"
    );
    // Then one small message at a time.
    for i in 0..100 {
        hang("ping", exchange(Bytes::from(pattern(64, i)))).await;
    }
    let armed: Vec<usize> = drivers.iter().map(|d| d.probe().receives_armed).collect();
    assert!(
        armed.iter().all(|&n| n == 1),
        "receives kept waiting after request/response: {armed:?}"
    );
    send.finish().unwrap();
    hang("echo task", echo).await.unwrap().unwrap();
}

/// A handshake flight (several datagrams of different sizes, sent back to
/// back) is taken off the socket in one pass once its first datagram
/// completes a ring receive, rather than one ring receive per datagram;
/// so are the datagrams of a connection still in its first events (what
/// follows a handshake comes in flights too). Request/response traffic
/// on an established connection with nothing queued pays for a drain that
/// finds nothing only while the server's probe backs off (then one per 64
/// datagrams at most; a server whose socket does hold a queue takes it
/// whole, see `driver_task/mod.rs`).
#[spargio::test(shards = 2)]
async fn handshake_flights_are_drained_and_short_headers_are_not(handle: RuntimeHandle) {
    let certs = TestCerts::generate();
    let server = server(&handle, &certs, None, options());
    let client = client(&handle, &certs, None, options());
    let drained = |ep: &spargio_quic::QuicEndpoint| -> u64 {
        ep.drivers()
            .iter()
            .map(|d| d.stats().receives_drained)
            .sum()
    };
    let drains = |ep: &spargio_quic::QuicEndpoint| -> u64 {
        ep.drivers().iter().map(|d| d.stats().drains).sum()
    };
    let mut pairs = Vec::new();
    for _ in 0..16 {
        pairs.push(pair(&client, &server).await);
    }
    let after_handshakes = drained(&client) + drained(&server);
    assert!(
        after_handshakes > 0,
        "16 handshakes and no datagram was taken behind a completed receive"
    );
    // Every connection still carries data both ways.
    let (c, s) = pairs.pop().unwrap();
    let echo = handle
        .spawn_stealable(async move {
            let (mut send, mut recv) = s.accept_bi().await?;
            while let Some(chunk) = recv.read_chunk(usize::MAX).await? {
                send.write_bytes(chunk).await?;
            }
            send.finish()?;
            io::Result::Ok(())
        })
        .unwrap();
    let (mut send, mut recv) = c.open_bi().await.unwrap();
    // The connection is young: its first exchange looks for more.
    let young = drains(&client) + drains(&server);
    ping(&mut send, &mut recv, 0).await;
    assert!(
        drains(&client) + drains(&server) > young,
        "a young connection's datagrams (short headers) did not look for the rest of their flight"
    );
    // Past its first events (and the handshake's last packets).
    for i in 1..=32 {
        ping(&mut send, &mut recv, i).await;
    }
    let before = drains(&client) + drains(&server);
    let took_before = drained(&client) + drained(&server);
    for i in 100..200 {
        ping(&mut send, &mut recv, i).await;
    }
    // A drain that found datagrams (a loaded machine can queue a ping
    // behind an acknowledgement) starts the back-off over: at most 7 empty
    // probes (gaps 1, 2, .., 64) follow each.
    let found = drained(&client) + drained(&server) - took_before;
    // 100 more pings (a request and an acknowledgement each, up to 200 lone
    // datagrams on the server): one back-off's probes at most (7, from a
    // gap of 1 up to 64; then one per 64), the client none.
    let probes = drains(&client) + drains(&server) - before;
    assert!(
        probes <= 8 + 8 * found,
        "request/response datagrams on an established connection were drained {probes} times ({found} datagrams found)"
    );
    send.finish().unwrap();
    hang("echo task", echo).await.unwrap().unwrap();
    for (c, s) in pairs {
        assert!(c.close_reason().is_none() && s.close_reason().is_none());
    }
}

/// Writes 64 pattern bytes and reads the echo.
async fn ping(
    send: &mut spargio_quic::QuicSendStream,
    recv: &mut spargio_quic::QuicRecvStream,
    i: u64,
) {
    let msg = Bytes::from(pattern(64, i));
    send.write_bytes(msg.clone()).await.unwrap();
    let mut got = Vec::new();
    while got.len() < msg.len() {
        let chunk = hang("pong", recv.read_chunk(msg.len() - got.len()))
            .await
            .unwrap();
        got.extend_from_slice(&chunk.expect("echo ended early"));
    }
    assert_eq!(got, msg);
}

/// Every public `Duration` saturates: a keep-alive interval of
/// `Duration::MAX` never pings (quinn-proto adds it to `Instant::now()`
/// unchecked, which panicked once the connection was established).
#[spargio::test(shards = 2)]
async fn a_keep_alive_interval_of_duration_max_never_pings(handle: RuntimeHandle) {
    use spargio_quic::NativeProtoTransportTuning;
    let certs = TestCerts::generate();
    let server = server(&handle, &certs, None, options());
    let client = client(&handle, &certs, None, options());
    let forever =
        NativeProtoTransportTuning::default().with_keep_alive_interval(Some(Duration::MAX));
    for driver in client.drivers().iter().chain(server.drivers()) {
        driver.set_transport_tuning(forever).unwrap();
    }
    let (c, s) = hang("connect", pair(&client, &server)).await;
    let echo = handle
        .spawn_stealable(async move {
            let (mut send, mut recv) = s.accept_bi().await?;
            let data = recv.read_to_end(1 << 16).await?;
            send.write_all(&data).await?;
            send.finish()?;
            s.closed().await;
            io::Result::Ok(())
        })
        .unwrap();
    let (mut send, mut recv) = c.open_bi().await.unwrap();
    send.write_all(b"still here").await.unwrap();
    send.finish().unwrap();
    let back = hang("echo", recv.read_to_end(1 << 16)).await.unwrap();
    assert_eq!(back, b"still here");
    c.close(0, b"done");
    hang("server task", echo).await.unwrap().unwrap();
}

//! `serve_h3`'s drain at its edges: a grace period of `Duration::MAX`, a
//! client that vanished with a request in flight (frozen behind a UDP
//! relay that stops forwarding, as a `SIGSTOP`ped process would), and the
//! endpoint shut down under the server (`accept` reports `BrokenPipe`).
//! `h3` + quinn on tokio as the clients. Both backends.

mod common;
mod h3_support;

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes};

use common::{pattern, HANG, LOAD_GET_BYTES};

use h3_support::*;

type SendRequest = h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>;

/// A 2-worker tokio runtime for the clients.
fn tokio_rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// An h3 connection from `ep` to `addr`, its driver spawned.
async fn h3_connect(ep: &quinn::Endpoint, addr: SocketAddr) -> SendRequest {
    let conn = ep.connect(addr, "localhost").unwrap().await.unwrap();
    let (mut driver, send) = h3::client::new(h3_quinn::Connection::new(conn))
        .await
        .unwrap();
    tokio::spawn(async move { std::future::poll_fn(|cx| driver.poll_close(cx)).await });
    send
}

/// `GET path`: the status and the whole body, or what broke it.
async fn h3_get(send: &mut SendRequest, path: &str) -> Result<(u16, Vec<u8>), String> {
    let req = http::Request::get(format!("https://localhost{path}"))
        .body(())
        .unwrap();
    let mut stream = send
        .send_request(req)
        .await
        .map_err(|e| format!("send_request: {e:?}"))?;
    stream
        .finish()
        .await
        .map_err(|e| format!("finish: {e:?}"))?;
    let resp = stream
        .recv_response()
        .await
        .map_err(|e| format!("recv_response: {e:?}"))?;
    let mut body = Vec::new();
    while let Some(mut chunk) = stream
        .recv_data()
        .await
        .map_err(|e| format!("recv_data after {} bytes: {e:?}", body.len()))?
    {
        body.extend_from_slice(&chunk.copy_to_bytes(chunk.remaining()));
    }
    Ok((resp.status().as_u16(), body))
}

/// Waits (bounded by `HANG`) until `ready`.
fn wait_for(what: &str, ready: impl Fn() -> bool) {
    let start = Instant::now();
    while !ready() {
        assert!(start.elapsed() < HANG, "{what} never happened");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The rule for every public `Duration`: it saturates. A grace period of
/// `Duration::MAX` (no deadline) must not overflow `Instant::now() + grace`
/// at shutdown; the server drains its (idle) connection and returns `Ok`.
#[test]
fn graceful_shutdown_with_grace_period_max_returns_ok() {
    let (cert, key) = common::self_signed();
    for backend in backends() {
        let server = H3Server::start_with(backend, &cert, &key, Duration::MAX, false);
        let addr = server.addr;
        let rt = tokio_rt();
        let got = rt.block_on(async {
            let ep = quinn_client(&cert);
            let mut send = h3_connect(&ep, addr).await;
            h3_get(&mut send, "/").await
        });
        assert_eq!(
            got.map(|(status, body)| (status, String::from_utf8(body).unwrap())),
            Ok((200, "hello from spargio-http".to_owned())),
            "{backend:?}"
        );
        server.stop.cancel();
        let served = server
            .done
            .recv_timeout(HANG)
            .unwrap_or_else(|_| panic!("{backend:?}: serve_h3 did not return (panicked?)"));
        assert!(served.is_ok(), "{backend:?}: {served:?}");
        rt.shutdown_background();
    }
}

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

/// A UDP relay between one client and `server`: forwards both ways until
/// `frozen` is set, then drops everything (the client is gone, as a
/// `SIGSTOP`ped process is: nothing it is sent is acknowledged).
struct Relay {
    addr: SocketAddr,
    frozen: Arc<AtomicBool>,
    quit: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Relay {
    fn start(server: SocketAddr) -> Relay {
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        sock.set_read_timeout(Some(Duration::from_millis(20)))
            .unwrap();
        let addr = sock.local_addr().unwrap();
        let frozen = Arc::new(AtomicBool::new(false));
        let quit = Arc::new(AtomicBool::new(false));
        let (f, q) = (frozen.clone(), quit.clone());
        let thread = std::thread::spawn(move || {
            let mut client = None;
            let mut buf = vec![0u8; 65536];
            while !q.load(SeqCst) {
                let Ok((n, from)) = sock.recv_from(&mut buf) else {
                    continue;
                };
                let to = if from == server {
                    client
                } else {
                    client = Some(from);
                    Some(server)
                };
                if let (Some(to), false) = (to, f.load(SeqCst)) {
                    let _ = sock.send_to(&buf[..n], to);
                }
            }
        });
        Relay {
            addr,
            frozen,
            quit,
            thread: Some(thread),
        }
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.quit.store(true, SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A client that vanishes with a request in flight (behind a relay that
/// stops forwarding) must not hold the drain for the grace period: it
/// never acknowledges its response, and a peer that acknowledges nothing
/// for a few probe timeouts is gone. A live client's request, in flight
/// at the same time, still gets its whole response. The bound is half
/// the grace period: no tight timing.
#[test]
fn graceful_shutdown_does_not_wait_for_a_vanished_client() {
    let (cert, key) = common::self_signed();
    let grace = Duration::from_secs(20);
    for backend in backends() {
        let server = H3Server::start_with(backend, &cert, &key, grace, false);
        let load = server.state.load.clone();
        load.hold.store(true, SeqCst);
        let relay = Relay::start(server.addr);
        let rt = tokio_rt();
        let ep = rt.block_on(async { quinn_client(&cert) });
        let (vanishing_ep, live_ep) = (ep.clone(), ep);
        let relay_addr = relay.addr;
        let vanishing = rt.spawn(async move {
            let mut send = h3_connect(&vanishing_ep, relay_addr).await;
            h3_get(&mut send, "/load/0").await
        });
        let addr = server.addr;
        let live = rt.spawn(async move {
            let mut send = h3_connect(&live_ep, addr).await;
            h3_get(&mut send, "/load/0").await
        });
        // Both requests are in their handlers; then the one client
        // vanishes, the server stops, and the handlers answer.
        wait_for("two held requests", || load.held.load(SeqCst) >= 2);
        relay.frozen.store(true, SeqCst);
        let stopped_at = Instant::now();
        server.stop.cancel();
        load.release.cancel();
        let served = server
            .done
            .recv_timeout(HANG)
            .unwrap_or_else(|_| panic!("{backend:?}: serve_h3 did not return"));
        let took = stopped_at.elapsed();
        assert!(served.is_ok(), "{backend:?}: {served:?}");
        assert!(
            took < grace / 2,
            "{backend:?}: the drain waited {took:?} (grace {grace:?}) for a client that was gone"
        );
        let got = rt.block_on(async {
            tokio::time::timeout(HANG, live)
                .await
                .expect("the live client hung")
                .unwrap()
        });
        match got {
            Ok((status, body)) => {
                assert_eq!(status, 200, "{backend:?}");
                assert!(
                    body == pattern(LOAD_GET_BYTES),
                    "{backend:?}: the live client's body: {} bytes, {LOAD_GET_BYTES} expected",
                    body.len()
                );
            }
            Err(e) => panic!("{backend:?}: the live client's request failed: {e}"),
        }
        vanishing.abort();
        rt.shutdown_background();
        drop(relay);
    }
}

/// `accept` reports `BrokenPipe` once the endpoint's drivers have shut
/// down (which closes every connection with them). `serve_h3` must then
/// end as a drain does: not return while a handler of one of its
/// connections still runs (a request task left behind, past the server
/// it belonged to).
#[test]
fn endpoint_shut_down_under_the_server_ends_it_after_its_handlers() {
    let (cert, key) = common::self_signed();
    for backend in backends() {
        let server = H3Server::start_with(backend, &cert, &key, Duration::from_secs(20), true);
        let load = server.state.load.clone();
        load.hold.store(true, SeqCst);
        let rt = tokio_rt();
        let addr = server.addr;
        let ep = rt.block_on(async { quinn_client(&cert) });
        let client = rt.spawn(async move {
            let mut send = h3_connect(&ep, addr).await;
            h3_get(&mut send, "/load/0").await
        });
        wait_for("a held request", || load.held.load(SeqCst) >= 1);
        let endpoint = server.endpoint.clone().unwrap();
        assert!(
            !endpoint.drivers().is_empty(),
            "{backend:?}: a native endpoint"
        );
        for driver in endpoint.drivers() {
            driver.shutdown();
        }
        // The shutdown closed the connection: the client sees it end.
        let got = rt.block_on(async {
            tokio::time::timeout(HANG, client)
                .await
                .expect("the client hung")
                .unwrap()
        });
        assert!(got.is_err(), "{backend:?}: {got:?}");
        // The server must not return while the handler is held; give it a
        // chance to (a correct server never does), then let it go.
        let early = server.done.recv_timeout(Duration::from_secs(1)).ok();
        load.release.cancel();
        let served = early.unwrap_or_else(|| {
            server
                .done
                .recv_timeout(HANG)
                .unwrap_or_else(|_| panic!("{backend:?}: serve_h3 did not return"))
        });
        assert!(served.is_ok(), "{backend:?}: {served:?}");
        let running = server.running_at_return.recv_timeout(HANG).unwrap();
        assert_eq!(
            running, 0,
            "{backend:?}: serve_h3 returned with {running} handler(s) still running"
        );
        drop(endpoint);
        rt.shutdown_background();
    }
}

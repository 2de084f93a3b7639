//! A peer's STOP_SENDING reaches a writer blocked on connection flow
//! control (issue 26).
//!
//! The quinn peer here grants a connection receive window equal to its
//! stream receive window (quinn's defaults hide the case with a large
//! connection window), so one stream's first write uses up both. The
//! peer then stops the stream; our next write must fail with the stop
//! code, not wait until the connection idles out (quinn-proto reports the
//! exhausted connection credit as `Blocked` before it looks at the
//! stream's stop, and the credit the stop returns brings no `Writable`
//! event for a stream whose own credit is used up).

mod common;
mod support;

use std::io;
use std::sync::Arc;
use std::time::Duration;

use quinn::crypto::rustls::QuicServerConfig;
use quinn::VarInt;
use spargio::RuntimeHandle;
use spargio_quic::{stream_error_code, QuicBackend, QuicEndpointOptions, QuicSendStream};

use common::certs::transport;
use common::*;
use support::*;

/// The peer's connection and stream receive windows.
const WINDOW: usize = 64 * 1024;
/// The code the peer stops with.
const STOP: u32 = 77;
/// "Promptly": well under the 30 s idle timeout the old code waited for.
/// A hang bound, not a performance assertion.
const PROMPT: Duration = Duration::from_secs(20);

fn peer_transport() -> Arc<quinn::TransportConfig> {
    let mut t = transport(Some(Duration::from_secs(30)));
    t.receive_window(VarInt::from_u32(WINDOW as u32));
    t.stream_receive_window(VarInt::from_u32(WINDOW as u32));
    Arc::new(t)
}

fn native() -> QuicEndpointOptions {
    QuicEndpointOptions::default()
}

fn bridge() -> QuicEndpointOptions {
    QuicEndpointOptions::default().with_backend(QuicBackend::Bridge)
}

/// A quinn server with [`peer_transport`]; `serve` runs on each
/// connection (on the server's runtime, bounded by [`HANG`]).
struct StopServer {
    addr: std::net::SocketAddr,
    endpoint: quinn::Endpoint,
    rt: Option<tokio::runtime::Runtime>,
}

impl StopServer {
    fn start(certs: &TestCerts) -> StopServer {
        let rt = peer_runtime("quinn-stop-server");
        let crypto = QuicServerConfig::try_from(certs.rustls_server_config(&[ALPN])).unwrap();
        let mut config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
        config.transport_config(peer_transport());
        let endpoint = {
            let _enter = rt.enter();
            quinn::Endpoint::server(config, "127.0.0.1:0".parse().unwrap()).unwrap()
        };
        StopServer {
            addr: endpoint.local_addr().unwrap(),
            endpoint,
            rt: Some(rt),
        }
    }

    fn handle(&self) -> &tokio::runtime::Handle {
        self.rt.as_ref().unwrap().handle()
    }

    /// The next connection, on the server's runtime.
    fn accept(&self) -> impl std::future::Future<Output = io::Result<quinn::Connection>> + '_ {
        let ep = self.endpoint.clone();
        spawn_bounded(self.handle(), async move {
            let incoming = ep
                .accept()
                .await
                .ok_or_else(|| io::Error::other("closed"))?;
            incoming.await.map_err(conn_err)
        })
    }
}

impl Drop for StopServer {
    fn drop(&mut self) {
        self.endpoint.close(VarInt::from_u32(0), b"done");
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

/// Peer side (the caller keeps a handle of `conn`, so the connection
/// outlives this): accepts `n` uni streams; stops the `stop`-th (0-based) at
/// once with [`STOP`], reads the others to the end. Returns the lengths
/// read (`None` for the stopped one). With `withhold`, the peer first
/// shrinks its connection window to 0, so the stop returns no connection
/// credit (as a peer does that returns credit only later, or never: quinn
/// itself returns it in the same packet as the STOP_SENDING, which hides
/// the bug).
async fn peer_streams(
    rt: &tokio::runtime::Handle,
    conn: quinn::Connection,
    n: usize,
    stop: usize,
    withhold: bool,
) -> io::Result<Vec<Option<usize>>> {
    spawn_bounded(rt, async move {
        let mut readers = Vec::new();
        for i in 0..n {
            let mut recv = conn.accept_uni().await.map_err(conn_err)?;
            if i == stop {
                if withhold {
                    // The credit the stop frees pays this debt: no MAX_DATA.
                    conn.set_receive_window(VarInt::from_u32(0));
                }
                recv.stop(VarInt::from_u32(STOP))
                    .map_err(io::Error::other)?;
                readers.push(None);
            } else {
                readers.push(Some(tokio::spawn(async move {
                    recv.read_to_end(usize::MAX).await.map(|d| d.len())
                })));
            }
        }
        let mut out = Vec::new();
        for r in readers {
            out.push(match r {
                None => None,
                Some(task) => Some(
                    task.await
                        .map_err(io::Error::other)?
                        .map_err(io::Error::other)?,
                ),
            });
        }
        Ok(out)
    })
    .await
}

/// Our side: one write that uses up the connection and stream credit,
/// then a write that must fail with the peer's stop code.
/// `via_trait`: the second write goes through `futures_io::AsyncWrite`.
async fn write_until_stopped(mut send: QuicSendStream, via_trait: bool) {
    send.write_all(&pattern(WINDOW, 1)).await.unwrap();
    let more = pattern(WINDOW, 2);
    let write = async {
        if via_trait {
            futures_util::AsyncWriteExt::write_all(&mut send, &more).await
        } else {
            send.write_all(&more).await
        }
    };
    let err = match spargio::time::timeout(PROMPT, write).await {
        Ok(res) => res.expect_err("the write after STOP_SENDING must fail"),
        Err(_) => panic!("a writer blocked on connection credit missed the peer's stop"),
    };
    assert_eq!(err.kind(), io::ErrorKind::ConnectionReset, "{err}");
    assert_eq!(stream_error_code(&err), Some(STOP as u64), "{err}");
}

async fn our_client_to_quinn_server(
    handle: &RuntimeHandle,
    options: QuicEndpointOptions,
    via_trait: bool,
) {
    let certs = TestCerts::generate();
    let peer = StopServer::start(&certs);
    let client = client(handle, &certs, None, options);
    let (conn, peer_conn) = hang(
        "connect",
        join(client.connect(peer.addr, SERVER_NAME), peer.accept()),
    )
    .await;
    let (conn, peer_conn) = (conn.unwrap(), peer_conn.unwrap());
    let send = conn.open_uni().await.unwrap();
    let peer_side = peer_streams(peer.handle(), peer_conn.clone(), 1, 0, true);
    let ((), seen) = join(write_until_stopped(send, via_trait), peer_side).await;
    assert_eq!(seen.unwrap(), vec![None]);
    conn.close(0, b"done");
}

#[spargio::test(shards = 2)]
async fn our_client_sees_stop_while_blocked_on_connection_credit(handle: RuntimeHandle) {
    our_client_to_quinn_server(&handle, native(), false).await;
}

#[spargio::test(shards = 2)]
async fn our_client_sees_stop_through_async_write(handle: RuntimeHandle) {
    our_client_to_quinn_server(&handle, native(), true).await;
}

#[spargio::test(shards = 2)]
async fn bridge_client_sees_stop_through_async_write(handle: RuntimeHandle) {
    our_client_to_quinn_server(&handle, bridge(), true).await;
}

#[spargio::test(shards = 2)]
async fn bridge_client_sees_stop_while_blocked_on_connection_credit(handle: RuntimeHandle) {
    our_client_to_quinn_server(&handle, bridge(), false).await;
}

#[spargio::test(shards = 2)]
async fn our_server_sees_stop_while_blocked_on_connection_credit(handle: RuntimeHandle) {
    let certs = TestCerts::generate();
    let server = server(&handle, &certs, None, native());
    let addr = server.local_addr().unwrap();
    let rt = peer_runtime("quinn-stop-client");
    let mut config = certs.quinn_client_config(&[ALPN], Some(Duration::from_secs(30)));
    config.transport_config(peer_transport());
    let peer = spawn_bounded(rt.handle(), async move {
        let mut ep = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap())?;
        ep.set_default_client_config(config);
        let conn = ep
            .connect(addr, SERVER_NAME)
            .map_err(io::Error::other)?
            .await
            .map_err(conn_err)?;
        Ok((ep, conn))
    });
    let (peer, conn) = hang("connect", join(peer, server.accept())).await;
    let ((_peer_ep, peer_conn), conn) = (peer.unwrap(), conn.unwrap());
    let send = conn.open_uni().await.unwrap();
    let peer_side = peer_streams(rt.handle(), peer_conn.clone(), 1, 0, true);
    let ((), seen) = join(write_until_stopped(send, false), peer_side).await;
    assert_eq!(seen.unwrap(), vec![None]);
    conn.close(0, b"done");
    rt.shutdown_background();
}

/// Three streams share the connection credit; the peer stops the middle
/// one and reads the others: the stopped one's writer gets the code, the
/// others finish once the peer's reads return credit.
#[spargio::test(shards = 2)]
async fn shared_connection_credit_one_stream_stopped(handle: RuntimeHandle) {
    let certs = TestCerts::generate();
    let peer = StopServer::start(&certs);
    let client = client(&handle, &certs, None, native());
    let (conn, peer_conn) = hang(
        "connect",
        join(client.connect(peer.addr, SERVER_NAME), peer.accept()),
    )
    .await;
    let (conn, peer_conn) = (conn.unwrap(), peer_conn.unwrap());
    // A one-byte header on each, so the peer sees all three at once.
    let mut sends = Vec::new();
    for _ in 0..3 {
        let mut s = conn.open_uni().await.unwrap();
        s.write_all(&[0]).await.unwrap();
        sends.push(s);
    }
    let writers: Vec<_> = sends
        .into_iter()
        .map(|mut s| {
            handle
                .spawn_stealable(async move {
                    let body = pattern(2 * WINDOW, 3);
                    let res = spargio::time::timeout(PROMPT, s.write_all(&body)).await;
                    let res = res.expect("a writer hung");
                    res.and_then(|()| s.finish())
                })
                .unwrap()
        })
        .collect();
    let seen = peer_streams(peer.handle(), peer_conn.clone(), 3, 1, false)
        .await
        .unwrap();
    let mut results = Vec::new();
    for w in writers {
        results.push(hang("writer", w).await.unwrap());
    }
    assert!(results[0].is_ok(), "{:?}", results[0]);
    assert!(results[2].is_ok(), "{:?}", results[2]);
    let err = results[1].as_ref().unwrap_err();
    assert_eq!(stream_error_code(err), Some(STOP as u64), "{err}");
    assert_eq!(seen, vec![Some(1 + 2 * WINDOW), None, Some(1 + 2 * WINDOW)]);
    conn.close(0, b"done");
}

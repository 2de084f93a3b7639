//! `serve` on a listener of the user's own (issue 50, item 1):
//! `spargio_http::Connections` over a stream of accepted connections.
//!
//! - A spargio listener's accept stream filtered by the user: curl from
//!   an allowed local port gets the app's answer and its own address as
//!   `ConnectInfo<SocketAddr>`; curl from a refused one gets no reply.
//! - A transport of the user's own in a `Connection`: curl's request and
//!   the response cross the user's wrapper (bytes counted both ways).
//! - The stream ending ends serving: the serve future returns `Ok`, and
//!   the listener is closed (a new connection is refused).

mod common;

use std::io;
use std::mem::MaybeUninit;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::extract::ConnectInfo;
use axum::routing::get;
use axum::Router;
use common::*;
use futures_util::{StreamExt, TryStreamExt};
use spargio::io::Compat;
use spargio::net::{TcpListener, TcpStream};
use spargio_http::rt::Transport;
use spargio_http::{Connection, Connections};
use spargio_test_peers::{require_peer, Peer};

/// curl's local ports: the refused range, and the allowed one.
const REFUSED: (u16, u16) = (47100, 47199);
const ALLOWED: (u16, u16) = (47200, 47299);

fn app() -> Router {
    Router::new()
        .route("/", get(|| async { "served\n" }))
        .route(
            "/peer",
            get(|ConnectInfo(peer): ConnectInfo<SocketAddr>| async move { format!("{peer}") }),
        )
}

/// A fresh loopback listener's accept stream (sessions in rotation) and
/// its address. The stream keeps the listening socket open: dropping it
/// is what closes the socket.
async fn accepting(h: &spargio::RuntimeHandle) -> (spargio::net::Incoming, SocketAddr) {
    let listener = TcpListener::bind(h, "127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    (listener.incoming_round_robin().unwrap(), addr)
}

/// `app()` served on `incoming` with connect info, in a task of its own.
fn serve_with_connect_info<S, T>(
    h: &spargio::RuntimeHandle,
    incoming: S,
) -> spargio::JoinHandle<io::Result<()>>
where
    S: futures_util::Stream<Item = io::Result<T>> + Send + 'static,
    T: spargio_http::server::Accepted,
{
    let serve = spargio_http::serve(Connections::new(h, incoming), app()).with_connect_info();
    h.spawn_stealable(std::future::IntoFuture::into_future(serve))
        .unwrap()
}

#[test]
fn a_filtered_accept_stream_serves_curl_and_refuses_the_rest() {
    require_peer!(Peer::Curl);
    let refused = Arc::new(AtomicUsize::new(0));
    let seen = refused.clone();
    run(move |h| async move {
        let (accepted, addr) = accepting(&h).await;
        let incoming = accepted.filter(move |conn| {
            let keep = match conn {
                Ok(stream) => stream
                    .peer_addr()
                    .is_ok_and(|a| !(REFUSED.0..=REFUSED.1).contains(&a.port())),
                Err(_) => true,
            };
            if !keep {
                seen.fetch_add(1, Ordering::Relaxed);
            }
            std::future::ready(keep)
        });
        let server = serve_with_connect_info(&h, incoming);
        let checks = h
            .spawn_blocking(move || {
                let ports = format!("{}-{}", ALLOWED.0, ALLOWED.1);
                let url = format!("http://{addr}/");
                assert_eq!(curl_ok(&["--local-port", &ports, &url]), "served\n");
                let peer = curl_ok(&["--local-port", &ports, &format!("http://{addr}/peer")]);
                let peer: SocketAddr = peer.parse().expect("an address");
                assert_eq!(peer.ip(), addr.ip());
                assert!(
                    (ALLOWED.0..=ALLOWED.1).contains(&peer.port()),
                    "curl's own port as connect info: {peer}"
                );
                let ports = format!("{}-{}", REFUSED.0, REFUSED.1);
                let out = curl(&["--local-port", &ports, &url]);
                assert!(!out.status.success(), "a refused client got an answer");
                assert!(out.stdout.is_empty());
            })
            .unwrap();
        checks.await.unwrap();
        server.abort();
    });
    assert_eq!(refused.load(Ordering::Relaxed), 1);
}

/// A transport of the user's own: spargio's stream, counting the bytes
/// that cross it.
struct Counting {
    inner: Compat<TcpStream>,
    read: Arc<AtomicUsize>,
    written: Arc<AtomicUsize>,
}

impl Transport for Counting {
    fn poll_read_uninit(
        &mut self,
        cx: &mut Context<'_>,
        out: &mut [MaybeUninit<u8>],
    ) -> Poll<io::Result<usize>> {
        let polled = self.inner.poll_read_uninit(cx, out);
        if let Poll::Ready(Ok(n)) = polled {
            self.read.fetch_add(n, Ordering::Relaxed);
        }
        polled
    }

    fn poll_write(&mut self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let polled = self.inner.poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = polled {
            self.written.fetch_add(n, Ordering::Relaxed);
        }
        polled
    }

    fn poll_flush(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Transport::poll_flush(&mut self.inner, cx)
    }

    fn poll_shutdown(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Transport::poll_shutdown(&mut self.inner, cx)
    }

    fn peer_addr(&self) -> Option<SocketAddr> {
        self.inner.peer_addr()
    }
}

#[test]
fn a_transport_of_your_own_in_a_connection() {
    require_peer!(Peer::Curl);
    let read = Arc::new(AtomicUsize::new(0));
    let written = Arc::new(AtomicUsize::new(0));
    let (r, w) = (read.clone(), written.clone());
    run(move |h| async move {
        let (accepted, addr) = accepting(&h).await;
        let incoming = accepted.map_ok(move |stream| {
            Connection::new(Counting {
                inner: Compat::new(stream),
                read: r.clone(),
                written: w.clone(),
            })
        });
        let server = serve_with_connect_info(&h, incoming);
        let checks = h
            .spawn_blocking(move || {
                assert_eq!(curl_ok(&[&format!("http://{addr}/")]), "served\n");
                // The peer address comes from the transport's own.
                let peer = curl_ok(&[&format!("http://{addr}/peer")]);
                let peer: SocketAddr = peer.parse().expect("an address");
                assert_eq!(peer.ip(), addr.ip());
                assert_ne!(peer.port(), addr.port());
            })
            .unwrap();
        checks.await.unwrap();
        server.abort();
    });
    // Two requests in (a request line and headers each), two responses out.
    let (read, written) = (
        read.load(Ordering::Relaxed),
        written.load(Ordering::Relaxed),
    );
    assert!(read >= 2 * "GET / HTTP/1.1\r\n\r\n".len(), "read {read}");
    assert!(
        written >= 2 * "HTTP/1.1 200 OK\r\n\r\n".len(),
        "wrote {written}"
    );
}

#[test]
fn serving_ends_when_the_stream_ends() {
    require_peer!(Peer::Curl);
    run(|h| async move {
        let (accepted, addr) = accepting(&h).await;
        let (done, finished) = tokio::sync::oneshot::channel::<()>();
        // One connection, then the end once the test says so.
        let incoming = accepted.take(1).chain(
            futures_util::stream::once(async move {
                let _ = finished.await;
            })
            .filter_map(|()| std::future::ready(None::<io::Result<TcpStream>>)),
        );
        let server = h
            .spawn_stealable(std::future::IntoFuture::into_future(spargio_http::serve(
                Connections::new(&h, incoming),
                app(),
            )))
            .unwrap();
        let first = h
            .spawn_blocking(move || curl_ok(&[&format!("http://{addr}/")]))
            .unwrap();
        assert_eq!(first.await.unwrap(), "served\n");
        done.send(()).unwrap();
        // Serving ends: the future returns Ok, the listener is closed.
        server
            .await
            .unwrap()
            .expect("serve returns Ok when its stream ends");
        let refused = h
            .spawn_blocking(move || std::net::TcpStream::connect(addr).map(drop))
            .unwrap()
            .await
            .unwrap();
        assert_eq!(
            refused.map_err(|e| e.kind()),
            Err(io::ErrorKind::ConnectionRefused)
        );
    });
}

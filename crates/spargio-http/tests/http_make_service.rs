//! axum's make-service forms (issue 50, item 2): `serve` accepts
//! `into_make_service()` and `into_make_service_with_connect_info::<C>()`
//! as `axum::serve` does. With connect info, each request carries the
//! connection's `ConnectInfo<C>`: the peer address for `SocketAddr`, or
//! what a user's own `Connected<IncomingStream>` impl reads from the
//! stream; checked against the client's own socket.

mod common;

use std::future::{Future, IntoFuture};
use std::io::{Read, Write};
use std::net::SocketAddr;

use axum::extract::connect_info::Connected;
use axum::extract::ConnectInfo;
use axum::routing::get;
use axum::Router;
use spargio::net::TcpListener;
use spargio_http::IncomingStream;

/// What a user's `Connected` impl records: both ends of the connection.
#[derive(Clone, Debug)]
struct Ends {
    local: SocketAddr,
    remote: SocketAddr,
}

impl Connected<IncomingStream<'_>> for Ends {
    fn connect_info(target: IncomingStream<'_>) -> Ends {
        Ends {
            local: target.local_addr().expect("the accepted socket's address"),
            remote: target.remote_addr(),
        }
    }
}

fn app() -> Router {
    Router::new()
        .route("/", get(|| async { "plain" }))
        .route(
            "/peer",
            get(|ConnectInfo(peer): ConnectInfo<SocketAddr>| async move { peer.to_string() }),
        )
        .route(
            "/ends",
            get(|ConnectInfo(ends): ConnectInfo<Ends>| async move {
                format!("{} {}", ends.local, ends.remote)
            }),
        )
}

/// One HTTP/1.1 request from a std socket: (the client's own address,
/// the response body).
fn get_from(addr: SocketAddr, path: &str) -> (SocketAddr, String) {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(common::HANG)).unwrap();
    let me = s.local_addr().unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    let body = out.split("\r\n\r\n").nth(1).unwrap_or_default().to_owned();
    (me, body)
}

/// Runs `server` (a `serve` of one of the three forms) on a fresh
/// runtime, `client` against it on the blocking pool, then stops.
fn served<F, Fut, C>(server: F, client: C)
where
    F: FnOnce(TcpListener) -> Fut + Send + 'static,
    Fut: Future<Output = std::io::Result<()>> + Send + 'static,
    C: FnOnce(SocketAddr) + Send + 'static,
{
    common::run(move |h| async move {
        let listener = TcpListener::bind(&h, "127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = h.spawn_stealable(server(listener)).unwrap();
        h.spawn_blocking(move || client(addr))
            .unwrap()
            .await
            .unwrap();
        server.abort();
    });
}

#[test]
fn into_make_service_is_served() {
    served(
        |l| spargio_http::serve(l, app().into_make_service()).into_future(),
        |addr| assert_eq!(get_from(addr, "/").1, "plain"),
    );
}

#[test]
fn into_make_service_with_connect_info_gives_each_request_its_peer() {
    served(
        |l| {
            let make = app().into_make_service_with_connect_info::<SocketAddr>();
            spargio_http::serve(l, make).into_future()
        },
        |addr| {
            for _ in 0..3 {
                let (me, body) = get_from(addr, "/peer");
                assert_eq!(body, me.to_string(), "the peer is this client's socket");
            }
        },
    );
}

#[test]
fn a_users_connected_impl_reads_the_incoming_stream() {
    served(
        |l| {
            let make = app().into_make_service_with_connect_info::<Ends>();
            spargio_http::serve(l, make).into_future()
        },
        |addr| {
            let (me, body) = get_from(addr, "/ends");
            assert_eq!(body, format!("{addr} {me}"));
        },
    );
}

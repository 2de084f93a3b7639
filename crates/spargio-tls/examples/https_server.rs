//! An HTTPS server: hyper 1.x over spargio-tls.
//!
//! hyper drives a connection through tokio's I/O traits; with the
//! `tokio-io` feature a [`ServerTlsStream`] has them, and hyper-util's
//! `TokioIo` adapts them to hyper's. Each connection runs as a task pinned
//! to its session shard: the TLS handshake (under a timeout), then hyper.
//!
//! ```text
//! cargo run --release -p spargio-tls --features tokio-io --example https_server -- cert.pem key.pem 8443
//! curl --cacert ca.pem https://localhost:8443/hello
//! ```
//!
//! Answers every request with `hello <path>\n`. Prints `listening on
//! <port>` once bound (port 0 picks a free one) and serves until killed.

// The test `tls_https.rs` includes this file as a module and calls `serve`.
#![allow(dead_code)]

use std::convert::Infallible;
use std::io;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use spargio::net::TcpListener;
use spargio::RuntimeHandle;
use spargio_tls::{HandshakeOptions, TlsAcceptor};

// ANCHOR: handler
async fn hello(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let body = format!("hello {}\n", req.uri().path());
    Ok(Response::new(Full::new(Bytes::from(body))))
}
// ANCHOR_END: handler

// ANCHOR: acceptor
/// The acceptor: a certificate chain and key from PEM files, HTTP/1.1 by ALPN.
pub fn acceptor(cert_chain: &str, key: &str) -> io::Result<TlsAcceptor> {
    Ok(TlsAcceptor::from_pem_files(cert_chain, key)?.with_alpn_protocols(&[b"http/1.1"]))
}
// ANCHOR_END: acceptor

// ANCHOR: serve
/// Accepts connections until an accept fails; each one gets its own task.
pub async fn serve(
    handle: RuntimeHandle,
    listener: TcpListener,
    acceptor: TlsAcceptor,
) -> io::Result<()> {
    // A client that stalls mid-handshake is dropped after 10 s.
    let options = HandshakeOptions::default().with_timeout(Duration::from_secs(10));
    loop {
        let (tcp, _peer) = listener.accept_round_robin().await?;
        tcp.set_nodelay(true)?;
        let session = tcp.clone();
        let acceptor = acceptor.clone();
        session
            .spawn_on_session(&handle, async move {
                let tls = match acceptor.accept_with_options(tcp, options).await {
                    Ok(tls) => tls,
                    Err(e) => return eprintln!("handshake failed: {e}"),
                };
                let served = http1::Builder::new()
                    .serve_connection(TokioIo::new(tls), service_fn(hello))
                    .await;
                if let Err(e) = served {
                    eprintln!("connection error: {e}");
                }
            })
            .map_err(io::Error::other)?;
    }
}
// ANCHOR_END: serve

fn main() -> io::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [cert, key, port] = &args[..] else {
        eprintln!("usage: https_server <cert-chain.pem> <key.pem> <port>");
        std::process::exit(2);
    };
    let acceptor = acceptor(cert, key)?;
    let port: u16 = port.parse().map_err(io::Error::other)?;
    spargio::block_on(spargio::run(move |handle| async move {
        let listener = TcpListener::bind(&handle, ("127.0.0.1", port)).await?;
        println!("listening on {}", listener.local_addr()?.port());
        serve(handle, listener, acceptor).await
    }))
    .map_err(io::Error::other)?
}

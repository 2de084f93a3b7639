//! A hyper 1.x HTTPS/1.1 server on spargio (spargio-tls) or on tokio
//! (tokio-rustls), for a real client (`wrk`) to drive.
//! `scripts/https_bench.sh` runs it.
//!
//! ```text
//! https_server <spargio|tokio> <port> [workers=2]
//! ```
//!
//! The HTTPS twin of `http_server.rs`: the same 13-byte body,
//! `Hello, world!`, over HTTP/1.1 keep-alive, hyper's default connection
//! settings and `TCP_NODELAY` on every accepted socket; the TLS handshake
//! runs in the connection's task. Both sides use one rustls `ServerConfig`
//! (ring provider, TLS 1.2 and 1.3, ALPN `http/1.1`) with a self-signed
//! P-256 certificate for `localhost` made at startup (rcgen).
//!
//! - tokio: `new_multi_thread().worker_threads(workers).enable_all()`; the
//!   accept loop is a spawned task, one `tokio::spawn` per connection:
//!   `tokio_rustls::TlsAcceptor::accept`, then
//!   `http1::Builder::serve_connection(TokioIo::new(tls), ..)`.
//! - spargio: `.shards(workers)`; `accept_round_robin`, one task per
//!   connection pinned on its session shard (`spawn_on_session`):
//!   `spargio_tls::TlsAcceptor::accept`, then hyper over
//!   `TokioIo::new(tls)`.
//!
//! Prints `ready <pid>` once listening and serves until killed. Connection
//! and handshake errors (wrk resets its connections at the end of a run)
//! are ignored.

use std::convert::Infallible;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::process::ExitCode;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use spargio_tls::rustls::ServerConfig;

const BODY: &[u8] = b"Hello, world!";

async fn hello(_req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    Ok(Response::new(Full::new(Bytes::from_static(BODY))))
}

fn ready() {
    // `println!` flushes at the newline: the script reads this line.
    println!("ready {}", std::process::id());
}

/// One server config for both sides: a fresh self-signed P-256
/// certificate for `localhost`, ALPN `http/1.1`.
fn server_config() -> io::Result<Arc<ServerConfig>> {
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_string()])
        .map_err(io::Error::other)?;
    let acceptor = spargio_tls::TlsAcceptor::from_pem(
        cert.cert.pem().as_bytes(),
        cert.signing_key.serialize_pem().as_bytes(),
    )?
    .with_alpn_protocols(&[b"http/1.1"]);
    Ok(acceptor.config().clone())
}

// ===== tokio =====

fn serve_tokio(addr: SocketAddr, workers: usize, config: Arc<ServerConfig>) -> io::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()?;
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        ready();
        tokio::spawn(async move {
            loop {
                let stream = match listener.accept().await {
                    Ok((stream, _peer)) => stream,
                    Err(_) => continue,
                };
                let _ = stream.set_nodelay(true);
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(stream).await else {
                        return;
                    };
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(tls), service_fn(hello))
                        .await;
                });
            }
        })
        .await
        .map_err(io::Error::other)
    })
}

// ===== spargio =====

fn serve_spargio(addr: SocketAddr, workers: usize, config: Arc<ServerConfig>) -> io::Result<()> {
    let builder = spargio::Runtime::builder().shards(workers);
    let acceptor = spargio_tls::TlsAcceptor::new(config);
    spargio::block_on(spargio::run_with(builder, move |handle| async move {
        let listener = spargio::net::TcpListener::bind(&handle, addr).await?;
        ready();
        accept_spargio(handle, listener, acceptor).await
    }))
    .map_err(io::Error::other)?
}

async fn accept_spargio(
    handle: spargio::RuntimeHandle,
    listener: spargio::net::TcpListener,
    acceptor: spargio_tls::TlsAcceptor,
) -> io::Result<()> {
    loop {
        let stream = match listener.accept_round_robin().await {
            Ok((stream, _peer)) => stream,
            Err(_) => continue,
        };
        let _ = stream.set_nodelay(true);
        let conn = stream.clone();
        let acceptor = acceptor.clone();
        conn.spawn_on_session(&handle, async move {
            let Ok(tls) = acceptor.accept(stream).await else {
                return;
            };
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(tls), service_fn(hello))
                .await;
        })
        .map_err(io::Error::other)?;
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: https_server <spargio|tokio> <port> [workers=2]";
    let (Some(runtime), Some(port)) = (args.first(), args.get(1).and_then(|p| p.parse().ok()))
    else {
        eprintln!("{usage}");
        return ExitCode::from(2);
    };
    let workers = match args.get(2).map(|w| w.parse::<usize>()) {
        None => 2,
        Some(Ok(w)) if w > 0 => w,
        Some(_) => {
            eprintln!("{usage}");
            return ExitCode::from(2);
        }
    };
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let config = match server_config() {
        Ok(config) => config,
        Err(e) => {
            eprintln!("https_server: certificate: {e}");
            return ExitCode::FAILURE;
        }
    };
    let served = match runtime.as_str() {
        "spargio" => serve_spargio(addr, workers, config),
        "tokio" => serve_tokio(addr, workers, config),
        _ => {
            eprintln!("{usage}");
            return ExitCode::from(2);
        }
    };
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("https_server ({runtime}): {e}");
            ExitCode::FAILURE
        }
    }
}

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

use std::io;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use spargio_bench::server::{hello, ready, ServerArgs};
use spargio_tls::rustls::ServerConfig;

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
    let Some(args) = ServerArgs::parse("https_server") else {
        return ExitCode::from(2);
    };
    let config = match server_config() {
        Ok(config) => config,
        Err(e) => {
            eprintln!("https_server: certificate: {e}");
            return ExitCode::FAILURE;
        }
    };
    let served = match args.runtime.as_str() {
        "spargio" => serve_spargio(args.addr, args.workers, config),
        _ => serve_tokio(args.addr, args.workers, config),
    };
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("https_server ({}): {e}", args.runtime);
            ExitCode::FAILURE
        }
    }
}

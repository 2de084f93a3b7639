//! One axum `Router` served over HTTP/3 by spargio-http on spargio or by
//! `h3` + `h3-quinn` on tokio, for the `h3_load` client to drive.
//! `scripts/h3_bench.sh` runs it.
//!
//! ```text
//! h3_server <spargio|tokio> [--workers N] [--port P]
//! ```
//!
//! `--workers` (default 2): shards or worker threads. `--port` (default 0:
//! any free port) on 127.0.0.1 (UDP). Prints `LISTENING <port>` once
//! listening and serves until killed.
//!
//! The router (the same on both sides): `GET /json` answers
//! `{"message":"Hello, World!"}` (`axum::Json`, serialized on every
//! request), `GET /bytes/{n}` the first `n` bytes (at most 1 MiB) of one
//! static buffer (`application/octet-stream`, a `Bytes` slice of static
//! memory: no per-request copy or allocation of the payload).
//!
//! Both sides present the same certificate (self-signed for `localhost`
//! and 127.0.0.1, made by rcgen at startup) with the same TLS settings
//! (rustls with ring, TLS 1.3, ALPN `h3`) and quinn's default transport
//! config (neither side is tuned).
//!
//! - spargio: `RuntimeBuilder::new().shards(N)` with default settings, a
//!   `QuicEndpoint::server` (one UDP socket per shard, `SO_REUSEPORT`;
//!   config from `spargio_quic::server_config_from_pem`) and
//!   `spargio_http::serve_h3(endpoint, app)` with its defaults.
//! - tokio: `new_multi_thread().worker_threads(N).enable_all()`,
//!   `quinn::Endpoint::server` (config built from the same PEM with rustls
//!   directly, as `server_config_from_pem` builds it), a task per
//!   connection running `h3::server::Connection` over
//!   `h3_quinn::Connection`, a task per request: the request head mapped to
//!   `Request<axum::body::Body>` with an empty body (the benchmark sends
//!   GETs), the router called with `tower::ServiceExt::oneshot`, the
//!   response head sent with `send_response` and the body's frames with
//!   `send_data` (trailers with `send_trailers`), then `finish`. The accept
//!   loop is itself a spawned task, so only the N workers serve.

use std::io::{self, Write};
use std::net::{Ipv4Addr, SocketAddr};
use std::process::ExitCode;
use std::sync::{Arc, LazyLock};

use axum::body::Body;
use axum::extract::Path;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use bytes::Bytes;
use http_body_util::BodyExt;
use serde::Serialize;
use tower::ServiceExt;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

// ===== the router =====

#[derive(Serialize)]
struct Message {
    message: &'static str,
}

/// The largest `/bytes/{n}`.
const MAX_BYTES: usize = 1 << 20;

/// What `/bytes/{n}` slices: static memory, so a slice is a `Bytes`
/// without a reference count to touch.
static PAYLOAD: LazyLock<Bytes> =
    LazyLock::new(|| Bytes::from_static(Vec::leak(vec![b'x'; MAX_BYTES])));

async fn bytes(Path(n): Path<usize>) -> Response {
    if n > MAX_BYTES {
        return (StatusCode::BAD_REQUEST, "at most 1048576 bytes").into_response();
    }
    (
        [(header::CONTENT_TYPE, "application/octet-stream")],
        PAYLOAD.slice(..n),
    )
        .into_response()
}

fn app() -> Router {
    Router::new()
        .route(
            "/json",
            get(|| async {
                Json(Message {
                    message: "Hello, World!",
                })
            }),
        )
        .route("/bytes/{n}", get(bytes))
}

// ===== certificate and readiness =====

/// A self-signed certificate for `localhost` and 127.0.0.1: (cert PEM,
/// key PEM).
fn self_signed() -> io::Result<(String, String)> {
    let names = vec!["localhost".to_string(), "127.0.0.1".to_string()];
    let cert = rcgen::generate_simple_self_signed(names).map_err(io::Error::other)?;
    Ok((cert.cert.pem(), cert.signing_key.serialize_pem()))
}

/// Prints `LISTENING <port>`, which `scripts/h3_bench.sh` waits for.
fn listening(port: u16) {
    let mut out = io::stdout().lock();
    let _ = writeln!(out, "LISTENING {port}");
    let _ = out.flush();
}

// ===== tokio: h3 + h3-quinn =====

/// The quinn server config of the tokio side: what
/// `spargio_quic::server_config_from_pem` builds, written out with rustls
/// (ring, TLS 1.3, ALPN `h3`, quinn's default transport).
fn quinn_server_config(cert_pem: &str, key_pem: &str) -> Result<quinn::ServerConfig, BoxError> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let certs = CertificateDer::pem_slice_iter(cert_pem.as_bytes()).collect::<Result<_, _>>()?;
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes())?;
    let mut tls = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_protocol_versions(&[&rustls::version::TLS13])?
    .with_no_client_auth()
    .with_single_cert(certs, key)?;
    tls.alpn_protocols = vec![b"h3".to_vec()];
    let crypto = quinn::crypto::rustls::QuicServerConfig::try_from(tls)?;
    Ok(quinn::ServerConfig::with_crypto(Arc::new(crypto)))
}

/// One request: the router's response, head then body frames.
async fn serve_request(
    resolver: h3::server::RequestResolver<h3_quinn::Connection, Bytes>,
    app: Router,
) -> Result<(), BoxError> {
    let (req, mut stream) = resolver.resolve_request().await?;
    let (parts, ()) = req.into_parts();
    let response = app
        .oneshot(axum::http::Request::from_parts(parts, Body::empty()))
        .await?;
    let (parts, mut body) = response.into_parts();
    stream
        .send_response(axum::http::Response::from_parts(parts, ()))
        .await?;
    while let Some(frame) = body.frame().await {
        match frame?.into_data() {
            Ok(data) => stream.send_data(data).await?,
            Err(frame) => {
                if let Ok(trailers) = frame.into_trailers() {
                    stream.send_trailers(trailers).await?;
                }
            }
        }
    }
    stream.finish().await?;
    Ok(())
}

/// One connection: its requests, each a task, until the client closes.
async fn serve_connection(incoming: quinn::Incoming, app: Router) -> Result<(), BoxError> {
    let conn = incoming.await?;
    let mut h3 = h3::server::Connection::<_, Bytes>::new(h3_quinn::Connection::new(conn)).await?;
    loop {
        match h3.accept().await {
            Ok(Some(resolver)) => {
                let app = app.clone();
                tokio::spawn(async move {
                    let _ = serve_request(resolver, app).await;
                });
            }
            Ok(None) => return Ok(()),
            Err(e) if e.is_h3_no_error() => return Ok(()),
            Err(e) => return Err(e.into()),
        }
    }
}

fn serve_tokio(addr: SocketAddr, workers: usize, cert: &str, key: &str) -> Result<(), BoxError> {
    let config = quinn_server_config(cert, key)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let endpoint = quinn::Endpoint::server(config, addr)?;
        listening(endpoint.local_addr()?.port());
        let app = app();
        tokio::spawn(async move {
            while let Some(incoming) = endpoint.accept().await {
                let app = app.clone();
                tokio::spawn(async move {
                    let _ = serve_connection(incoming, app).await;
                });
            }
        })
        .await?;
        Ok(())
    })
}

// ===== spargio: spargio-http's serve_h3 =====

fn serve_spargio(addr: SocketAddr, workers: usize, cert: &str, key: &str) -> Result<(), BoxError> {
    let config = spargio_quic::server_config_from_pem(
        cert.as_bytes(),
        key.as_bytes(),
        &[spargio_quic::H3_ALPN],
    )?;
    let builder = spargio::RuntimeBuilder::new().shards(workers);
    spargio::block_on(spargio::run_with(builder, move |handle| async move {
        let endpoint = spargio_quic::QuicEndpoint::server(&handle, addr, config)?;
        listening(endpoint.local_addr()?.port());
        spargio_http::serve_h3(endpoint, app()).await
    }))??;
    Ok(())
}

// ===== command line =====

struct Args {
    runtime: String,
    workers: usize,
    port: u16,
}

fn parse_args() -> Option<Args> {
    let mut args = std::env::args().skip(1);
    let runtime = args.next()?;
    if runtime != "spargio" && runtime != "tokio" {
        return None;
    }
    let mut parsed = Args {
        runtime,
        workers: 2,
        port: 0,
    };
    while let Some(flag) = args.next() {
        let value = args.next()?;
        match flag.as_str() {
            "--workers" => parsed.workers = value.parse().ok().filter(|&w| w > 0)?,
            "--port" => parsed.port = value.parse().ok()?,
            _ => return None,
        }
    }
    Some(parsed)
}

fn main() -> ExitCode {
    let Some(args) = parse_args() else {
        eprintln!("usage: h3_server <spargio|tokio> [--workers N] [--port P]");
        return ExitCode::from(2);
    };
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, args.port));
    let served = self_signed()
        .map_err(BoxError::from)
        .and_then(|(cert, key)| match args.runtime.as_str() {
            "spargio" => serve_spargio(addr, args.workers, &cert, &key),
            _ => serve_tokio(addr, args.workers, &cert, &key),
        });
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("h3_server ({}): {e}", args.runtime);
            ExitCode::FAILURE
        }
    }
}

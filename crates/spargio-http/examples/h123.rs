//! One axum app over HTTP/1.1, HTTP/2 and HTTP/3 on one port number: TLS
//! over TCP (ALPN `h2` or `http/1.1`, answered by `serve`) and QUIC over
//! UDP (ALPN `h3`, answered by `serve_h3`), on every shard. The TCP side
//! advertises the UDP one with `Alt-Svc`.
//!
//! ```text
//! cargo run --release -p spargio-http --features http3 --example h123              # serves, calls itself over all three, exits
//! cargo run --release -p spargio-http --features http3 --example h123 -- serve 8443 # serves until SIGTERM or ctrl-c
//! curl -k --http2 https://localhost:8443/   # (a curl built with HTTP/3: --http3)
//! ```
//!
//! The certificate is a fresh self-signed one for `localhost` (its PEM is
//! written next to the temp dir's `spargio-h123-cert.pem` for clients to
//! trust); set `CERT` and `KEY` to PEM files to use your own.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::ConnectInfo;
use axum::routing::get;
use axum::Router;
use spargio::sync::CancellationToken;
use spargio_http::client::body_bytes;
use spargio_http::layer::AltSvcLayer;
use spargio_http::Client;
use spargio_quic::{QuicEndpoint, H3_ALPN};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

fn app(port: u16) -> Router {
    Router::new()
        .route(
            "/",
            get(
                |version: http::Version, ConnectInfo(peer): ConnectInfo<std::net::SocketAddr>| async move {
                    format!("hello over {version:?} from {peer}\n")
                },
            ),
        )
        .layer(AltSvcLayer::h3(port))
}

/// The certificate and key, PEM: `CERT`/`KEY`, or a fresh self-signed one.
fn certificate() -> Result<(String, String), BoxError> {
    if let (Ok(cert), Ok(key)) = (std::env::var("CERT"), std::env::var("KEY")) {
        return Ok((
            std::fs::read_to_string(cert)?,
            std::fs::read_to_string(key)?,
        ));
    }
    let names = vec!["localhost".to_owned(), "127.0.0.1".to_owned()];
    let cert = rcgen::generate_simple_self_signed(names)?;
    Ok((cert.cert.pem(), cert.signing_key.serialize_pem()))
}

async fn shutdown_signal(handle: spargio::RuntimeHandle) {
    match spargio_signal::signal(&handle, &[libc::SIGTERM, libc::SIGINT]) {
        Ok(mut signals) => {
            let _ = signals.recv().await;
        }
        Err(e) => {
            eprintln!("no signal handling ({e}); serving until killed");
            std::future::pending::<()>().await
        }
    }
}

/// Calls the server over each protocol with spargio-http's clients.
async fn self_test(handle: spargio::RuntimeHandle, port: u16, cert: &str) -> Result<(), BoxError> {
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls::pki_types::CertificateDer::pem_slice_iter(cert.as_bytes()) {
        roots.add(c?)?;
    }
    let url = format!("https://localhost:{port}/");
    for (name, alpn) in [("HTTP/1.1", &b"http/1.1"[..]), ("HTTP/2", &b"h2"[..])] {
        let mut tls = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots.clone())
        .with_no_client_auth();
        tls.alpn_protocols = vec![alpn.to_vec()];
        let client: Client = Client::builder(&handle)
            .tls(spargio_tls::TlsConnector::new(Arc::new(tls)))
            .build();
        let resp = client.get(url.as_str()).await?;
        let alt_svc = resp.headers()["alt-svc"].to_str()?.to_owned();
        print!(
            "{name}: {}",
            String::from_utf8_lossy(&body_bytes(resp).await?)
        );
        println!("  alt-svc: {alt_svc}");
    }
    let h3 = Client::builder(&handle)
        .http3_client_config(spargio_quic::client_config_with_root_ca_pem(
            cert.as_bytes(),
            &[H3_ALPN],
        )?)
        .http3_prior_knowledge()
        .build()?;
    let resp = h3.get(url.as_str()).await?;
    print!(
        "HTTP/3: {}",
        String::from_utf8_lossy(&body_bytes(resp).await?)
    );
    Ok(())
}

use rustls::pki_types::pem::PemObject;

fn main() -> Result<(), BoxError> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let serve_forever = args.first().map(String::as_str) == Some("serve");
    let port: u16 = args.get(1).and_then(|p| p.parse().ok()).unwrap_or(0);
    let (cert, key) = certificate()?;
    spargio::block_on(spargio::run(move |handle| async move {
        // TCP first: with port 0 the kernel picks one, and UDP takes the
        // same number.
        let listener = spargio::net::TcpListener::bind(&handle, ("127.0.0.1", port)).await?;
        let port = listener.local_addr()?.port();
        let quic =
            spargio_quic::server_config_from_pem(cert.as_bytes(), key.as_bytes(), &[H3_ALPN])?;
        let endpoint = QuicEndpoint::server(&handle, ([127, 0, 0, 1], port).into(), quic)?;
        let tls = spargio_tls::TlsAcceptor::from_pem(cert.as_bytes(), key.as_bytes())?;

        let stop = CancellationToken::new();
        let tcp = spargio_http::serve(listener, app(port))
            .tls(tls)
            .with_connect_info()
            .with_graceful_shutdown({
                let stop = stop.clone();
                async move { stop.cancelled().await }
            })
            .grace_period(Duration::from_secs(5));
        let udp = spargio_http::serve_h3(endpoint, app(port))
            .with_connect_info()
            .with_graceful_shutdown({
                let stop = stop.clone();
                async move { stop.cancelled().await }
            })
            .grace_period(Duration::from_secs(5));
        let tcp = handle.spawn_stealable(std::future::IntoFuture::into_future(tcp))?;
        let udp = handle.spawn_stealable(std::future::IntoFuture::into_future(udp))?;

        if serve_forever {
            std::fs::write(std::env::temp_dir().join("spargio-h123-cert.pem"), &cert)?;
            println!("HTTP/1.1 and HTTP/2 on tcp/{port}, HTTP/3 on udp/{port} (https://localhost:{port}/)");
            shutdown_signal(handle.clone()).await;
        } else {
            self_test(handle.clone(), port, &cert).await?;
        }
        stop.cancel();
        tcp.await??;
        udp.await??;
        Ok::<_, BoxError>(())
    }))??;
    Ok(())
}

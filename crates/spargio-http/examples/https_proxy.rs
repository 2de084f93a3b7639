//! An HTTPS reverse proxy on spargio: a TLS server (HTTP/2 or HTTP/1.1
//! by ALPN) that forwards every request to an upstream with the pooled
//! client, streaming bodies both ways. Server and client in one process.
//!
//! ```text
//! cargo run --release -p spargio-http --example https_proxy                   # proxies to its own upstream, checks, exits
//! cargo run --release -p spargio-http --example https_proxy -- serve 8443 http://127.0.0.1:3000
//! ```
//!
//! The certificate is self-signed for `localhost`, made at start (rcgen);
//! `serve` mode writes it to `proxy-ca.pem` for `curl --cacert`.

use std::future::IntoFuture;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use axum::Router;
use spargio_http::client::body_bytes;
use spargio_http::Client;

#[derive(Clone)]
struct Proxy {
    client: Client<Body>,
    upstream: Uri,
}

/// Forwards `req` to the upstream: same method, path, query, headers
/// and (streamed) body; the upstream's response streams back.
async fn forward(State(proxy): State<Proxy>, mut req: Request) -> Response {
    let path = req.uri().path_and_query().map_or("/", |p| p.as_str());
    let mut parts = proxy.upstream.clone().into_parts();
    parts.path_and_query = path.parse().ok();
    let Ok(uri) = Uri::from_parts(parts) else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    *req.uri_mut() = uri;
    // The upstream may speak HTTP/1.1 whatever the client spoke to us.
    *req.version_mut() = axum::http::Version::HTTP_11;
    req.headers_mut().remove(axum::http::header::HOST);
    match proxy.client.request(req).await {
        Ok(resp) => resp.map(Body::new).into_response(),
        Err(e) if e.is_timeout() => StatusCode::GATEWAY_TIMEOUT.into_response(),
        Err(_) => StatusCode::BAD_GATEWAY.into_response(),
    }
}

fn proxy_app(handle: &spargio::RuntimeHandle, upstream: Uri) -> Router {
    let client = Client::builder(handle)
        .request_timeout(Some(std::time::Duration::from_secs(30)))
        .build();
    Router::new()
        .fallback(any(forward))
        .with_state(Proxy { client, upstream })
}

fn upstream_app() -> Router {
    Router::new()
        .route("/", get(|| async { "hello from the upstream" }))
        .route("/big", get(|| async { vec![b'x'; 1 << 20] }))
        .route(
            "/echo",
            axum::routing::post(|body: axum::body::Bytes| async move { body }),
        )
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

fn main() -> Result<(), BoxError> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()])?;
    let (cert_pem, key_pem) = (cert.cert.pem(), cert.signing_key.serialize_pem());
    let acceptor = spargio_tls::TlsAcceptor::from_pem(cert_pem.as_bytes(), key_pem.as_bytes())?;
    spargio::block_on(spargio::run(move |handle| async move {
        if args.first().map(String::as_str) == Some("serve") {
            let port: u16 = args.get(1).and_then(|p| p.parse().ok()).unwrap_or(8443);
            let upstream: Uri = args
                .get(2)
                .map_or("http://127.0.0.1:3000", String::as_str)
                .parse()?;
            std::fs::write("proxy-ca.pem", &cert_pem)?;
            let listener = spargio::net::TcpListener::bind(&handle, ("127.0.0.1", port)).await?;
            println!("proxying https://localhost:{port} -> {upstream} (CA in proxy-ca.pem)");
            spargio_http::serve(listener, proxy_app(&handle, upstream))
                .tls(acceptor)
                .await?;
            return Ok(());
        }
        // The upstream: plain HTTP on a free port.
        let up = spargio::net::TcpListener::bind(&handle, "127.0.0.1:0").await?;
        let upstream: Uri = format!("http://{}", up.local_addr()?).parse()?;
        let _upstream =
            handle.spawn_stealable(spargio_http::serve(up, upstream_app()).into_future())?;
        // The proxy: HTTPS on a free port.
        let listener = spargio::net::TcpListener::bind(&handle, "127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let _proxy = handle.spawn_stealable(
            spargio_http::serve(listener, proxy_app(&handle, upstream))
                .tls(acceptor)
                .into_future(),
        )?;
        // A client that trusts the proxy's certificate, over HTTP/2.
        let tls = spargio_tls::TlsConnector::with_root_ca_pem(cert_pem.as_bytes())?;
        let client: Client = Client::builder(&handle).tls(tls).build();
        let resp = client.get(format!("https://localhost:{port}/")).await?;
        println!("{:?} {}", resp.version(), resp.status());
        assert_eq!(body_bytes(resp).await?, "hello from the upstream");
        let big = body_bytes(client.get(format!("https://localhost:{port}/big")).await?).await?;
        assert_eq!(big.len(), 1 << 20);
        let echoed = client
            .post(
                format!("https://localhost:{port}/echo"),
                bytes::Bytes::from_static(b"through the proxy"),
            )
            .await?;
        assert_eq!(body_bytes(echoed).await?, "through the proxy");
        println!("proxied GET, a 1 MiB body and a POST over HTTPS");
        Ok::<_, BoxError>(())
    }))?
}

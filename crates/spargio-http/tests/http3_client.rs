//! The HTTP/3 client (`Client::builder(..).http3_prior_knowledge()`)
//! against Python aioquic's HTTP/3 server (`tests/py/h3_server.py`), `h3`
//! + quinn on tokio, and our own `serve_h3`. Both backends.

mod common;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;

use bytes::{Buf, Bytes};
use spargio::{BackendKind, RuntimeBuilder};
use spargio_http::client::{body_bytes, H3Client};
use spargio_quic::H3_ALPN;
use spargio_test_peers::{require_peer, Peer};

use common::HANG;

fn backends() -> Vec<BackendKind> {
    let mut out = vec![BackendKind::Epoll];
    if spargio::probe_io_uring().is_ok() {
        out.push(BackendKind::IoUring);
    }
    out
}

/// Runs `body` with a client trusting `ca_pem` on a 2-shard runtime of
/// each backend.
fn with_client<F, Fut>(ca_pem: &str, body: F)
where
    F: Fn(H3Client) -> Fut + Send + Clone + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    for backend in backends() {
        let ca = ca_pem.to_owned();
        let body = body.clone();
        common::bounded(&format!("{backend:?}"), move || {
            let builder = RuntimeBuilder::new().shards(2).backend(backend);
            spargio::block_on(spargio::run_with(builder, move |handle| async move {
                let config =
                    spargio_quic::client_config_with_root_ca_pem(ca.as_bytes(), &[H3_ALPN])
                        .unwrap();
                let client = spargio_http::Client::builder(&handle)
                    .http3_client_config(config)
                    .http3_prior_knowledge()
                    .build()
                    .unwrap();
                body(client).await
            }))
            .unwrap()
        });
    }
}

/// `h3_server.py` on a free port, killed on drop.
struct AioquicServer {
    child: Child,
    port: u16,
}

impl AioquicServer {
    fn start(cert: &std::path::Path, key: &std::path::Path) -> AioquicServer {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/py/h3_server.py");
        let mut child = Command::new("python3")
            .arg(script)
            .arg("--cert")
            .arg(cert)
            .arg("--key")
            .arg(key)
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line
            .strip_prefix("LISTENING ")
            .and_then(|p| p.trim().parse().ok())
            .unwrap_or_else(|| panic!("h3_server.py said {line:?}"));
        AioquicServer { child, port }
    }
}

impl Drop for AioquicServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn py_pattern(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i % 251) as u8).collect()
}

fn sha256_hex(data: &[u8]) -> String {
    use std::io::Write;
    let mut child = Command::new("sha256sum")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(data).unwrap();
    String::from_utf8(child.wait_with_output().unwrap().stdout).unwrap()[..64].to_owned()
}

#[test]
fn our_client_against_aioquic_server() {
    require_peer!(Peer::PythonAioquic);
    let (cert, key) = common::self_signed();
    let cert_file = common::temp_file("h3c-cert.pem", cert.as_bytes());
    let key_file = common::temp_file("h3c-key.pem", key.as_bytes());
    let server = AioquicServer::start(&cert_file, &key_file);
    let base = format!("https://localhost:{}", server.port);
    with_client(&cert, move |client| {
        let base = base.clone();
        async move {
            let resp = client.get(format!("{base}/hello")).await.unwrap();
            assert_eq!(resp.status(), 200);
            assert_eq!(body_bytes(resp).await.unwrap(), "hello over h3");

            // A 16 MiB streamed response.
            let n = 16 << 20;
            let resp = client.get(format!("{base}/bytes?n={n}")).await.unwrap();
            let body = body_bytes(resp).await.unwrap();
            assert_eq!(body.len(), n);
            assert!(body == py_pattern(n), "the 16 MiB body differs");

            // POST bodies of 0 B, 1 MiB and 16 MiB: the server's sha256.
            for n in [0usize, 1 << 20, 16 << 20] {
                let up = Bytes::from(py_pattern(n));
                let resp = client
                    .post(format!("{base}/sha256"), up.clone())
                    .await
                    .unwrap();
                assert_eq!(resp.status(), 200);
                let sum = body_bytes(resp).await.unwrap();
                assert_eq!(sum, sha256_hex(&up), "POST {n}");
            }

            // Trailers arrive as the body's last frame.
            let resp = client.get(format!("{base}/trailers")).await.unwrap();
            let collected = http_body_util::BodyExt::collect(resp.into_body())
                .await
                .unwrap();
            let trailers = collected.trailers().cloned().expect("trailers");
            assert_eq!(trailers["x-trailer"], "yes");
            assert_eq!(collected.to_bytes(), "with trailers");

            // 100 requests at once share the one pooled connection.
            let mut jobs = Vec::new();
            for _ in 0..100 {
                let client = client.clone();
                let url = format!("{base}/hello");
                jobs.push(
                    spargio::ShardCtx::current()
                        .unwrap()
                        .handle()
                        .spawn_stealable(async move {
                            let resp = client.get(url).await.unwrap();
                            body_bytes(resp).await.unwrap()
                        })
                        .unwrap(),
                );
            }
            for job in jobs {
                assert_eq!(job.await.unwrap(), "hello over h3");
            }

            // GOAWAY: the next request goes out on a new connection.
            let resp = client.get(format!("{base}/goaway")).await.unwrap();
            assert_eq!(body_bytes(resp).await.unwrap(), "bye");
            for _ in 0..3 {
                let resp = client.get(format!("{base}/hello")).await.unwrap();
                assert_eq!(body_bytes(resp).await.unwrap(), "hello over h3");
            }

            // Not https: refused before any connection.
            let err = client.get("http://localhost/").await.unwrap_err();
            assert!(err.is_invalid(), "{err}");
        }
    });
}

/// An `h3` + `h3-quinn` server on tokio: `/n/<N>` answers N pattern
/// bytes, `/echo` the request body.
fn quinn_h3_server(cert: &str, key: &str) -> (SocketAddr, tokio::runtime::Runtime) {
    use rustls::pki_types::pem::PemObject;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let certs: Vec<_> = rustls::pki_types::CertificateDer::pem_slice_iter(cert.as_bytes())
        .map(|c| c.unwrap())
        .collect();
    let key = rustls::pki_types::PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap();
    let mut tls = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_protocol_versions(&[&rustls::version::TLS13])
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(certs, key)
    .unwrap();
    tls.alpn_protocols = vec![H3_ALPN.to_vec()];
    let quic = quinn::crypto::rustls::QuicServerConfig::try_from(tls).unwrap();
    let config = quinn::ServerConfig::with_crypto(Arc::new(quic));
    let ep = rt.block_on(async {
        quinn::Endpoint::server(config, "127.0.0.1:0".parse().unwrap()).unwrap()
    });
    let addr = ep.local_addr().unwrap();
    rt.spawn(async move {
        while let Some(incoming) = ep.accept().await {
            tokio::spawn(async move {
                let Ok(conn) = incoming.await else { return };
                let Ok(mut h3conn) =
                    h3::server::Connection::<_, Bytes>::new(h3_quinn::Connection::new(conn)).await
                else {
                    return;
                };
                while let Ok(Some(resolver)) = h3conn.accept().await {
                    tokio::spawn(async move {
                        let (req, mut stream) = resolver.resolve_request().await.unwrap();
                        let path = req.uri().path().to_owned();
                        let mut body = Vec::new();
                        while let Some(mut chunk) = stream.recv_data().await.unwrap() {
                            body.extend_from_slice(&chunk.copy_to_bytes(chunk.remaining()));
                        }
                        let out = match path.strip_prefix("/n/") {
                            Some(n) => common::pattern(n.parse().unwrap()),
                            None => body,
                        };
                        stream.send_response(http::Response::new(())).await.unwrap();
                        stream.send_data(Bytes::from(out)).await.unwrap();
                        stream.finish().await.unwrap();
                    });
                }
            });
        }
    });
    (addr, rt)
}

#[test]
fn our_client_against_h3_quinn_server_on_tokio() {
    let (cert, key) = common::self_signed();
    let (addr, _rt) = quinn_h3_server(&cert, &key);
    let base = format!("https://localhost:{}", addr.port());
    with_client(&cert, move |client| {
        let base = base.clone();
        async move {
            let resp = client.get(format!("{base}/n/300000")).await.unwrap();
            assert_eq!(resp.status(), 200);
            assert!(body_bytes(resp).await.unwrap() == common::pattern(300_000));
            let up = Bytes::from(common::pattern(3 << 20));
            let resp = client
                .post(format!("{base}/echo"), up.clone())
                .await
                .unwrap();
            assert!(body_bytes(resp).await.unwrap() == up, "the echo differs");
        }
    });
    let _ = HANG;
}

/// A request body that ends with trailers.
struct WithTrailers(Option<Bytes>, Option<http::HeaderMap>);

impl http_body::Body for WithTrailers {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        if let Some(data) = self.0.take() {
            return std::task::Poll::Ready(Some(Ok(http_body::Frame::data(data))));
        }
        std::task::Poll::Ready(self.1.take().map(|t| Ok(http_body::Frame::trailers(t))))
    }
}

/// Our client against our `serve_h3`: request trailers reach the handler
/// (as the `H3Body`'s last frame), and the app's answers come back.
#[test]
fn our_client_sends_request_trailers_to_our_server() {
    use axum::routing::post;
    use http_body_util::BodyExt;
    let (cert, key) = common::self_signed();
    for backend in backends() {
        let cert = cert.clone();
        let key = key.clone();
        common::bounded(&format!("{backend:?}"), move || {
            let builder = RuntimeBuilder::new().shards(2).backend(backend);
            spargio::block_on(spargio::run_with(builder, move |handle| async move {
                let app = axum::Router::new().route(
                    "/trailers",
                    post(|req: http::Request<axum::body::Body>| async move {
                        let all = req.into_body().collect().await.unwrap();
                        let t = all.trailers().cloned().unwrap_or_default();
                        let n = all.to_bytes().len();
                        format!(
                            "{n} {}",
                            t.get("x-sum").map_or("none", |v| v.to_str().unwrap())
                        )
                    }),
                );
                let config = spargio_quic::server_config_from_pem(
                    cert.as_bytes(),
                    key.as_bytes(),
                    &[H3_ALPN],
                )
                .unwrap();
                let ep = spargio_quic::QuicEndpoint::server(
                    &handle,
                    "127.0.0.1:0".parse().unwrap(),
                    config,
                )
                .unwrap();
                let port = ep.local_addr().unwrap().port();
                let stop = spargio::sync::CancellationToken::new();
                let server = handle
                    .spawn_stealable(std::future::IntoFuture::into_future(
                        spargio_http::serve_h3(ep, app).with_graceful_shutdown({
                            let stop = stop.clone();
                            async move { stop.cancelled().await }
                        }),
                    ))
                    .unwrap();
                let client = spargio_http::Client::builder(&handle)
                    .http3_client_config(
                        spargio_quic::client_config_with_root_ca_pem(cert.as_bytes(), &[H3_ALPN])
                            .unwrap(),
                    )
                    .http3_prior_knowledge()
                    .build()
                    .unwrap();
                let mut trailers = http::HeaderMap::new();
                trailers.insert("x-sum", "1234".parse().unwrap());
                let req = http::Request::post(format!("https://localhost:{port}/trailers"))
                    .body(WithTrailers(
                        Some(Bytes::from(common::pattern(70_000))),
                        Some(trailers),
                    ))
                    .unwrap();
                let resp = client.request(req).await.unwrap();
                assert_eq!(body_bytes(resp).await.unwrap(), "70000 1234");
                stop.cancel();
                server.await.unwrap().unwrap();
            }))
            .unwrap()
        });
    }
}

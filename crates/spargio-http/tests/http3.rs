//! HTTP/3: the test app (`common::app`) served by `serve_h3` on a
//! spargio-quic endpoint, called by Python aioquic's HTTP/3 client
//! (`tests/py/h3_client.py`) and by `h3` + quinn on tokio. Both backends.

mod common;

use std::net::SocketAddr;
use std::process::Command;
use std::sync::mpsc;
use std::time::Duration;

use bytes::{Buf, Bytes};
use spargio::sync::CancellationToken;
use spargio::{BackendKind, Runtime};
use spargio_quic::{QuicEndpoint, H3_ALPN};
use spargio_test_peers::{require_peer, Peer};

use common::{app, pattern, AppState, HANG};

/// The app over HTTP/3 on a 2-shard runtime of its own.
struct H3Server {
    addr: SocketAddr,
    state: AppState,
    stop: CancellationToken,
    done: mpsc::Receiver<std::io::Result<()>>,
    _rt: Runtime,
}

impl H3Server {
    fn start(backend: BackendKind, cert: &str, key: &str) -> H3Server {
        let rt = Runtime::builder()
            .shards(2)
            .backend(backend)
            .build()
            .expect("runtime");
        let config =
            spargio_quic::server_config_from_pem(cert.as_bytes(), key.as_bytes(), &[H3_ALPN])
                .unwrap();
        let stop = CancellationToken::new();
        let stop2 = stop.clone();
        let state = AppState::default();
        let app_state = state.clone();
        let (addr_tx, addr_rx) = mpsc::channel();
        let (done_tx, done) = mpsc::channel();
        rt.handle()
            .spawn_stealable(async move {
                let h = spargio::ShardCtx::current().unwrap().handle();
                let ep = QuicEndpoint::server(&h, "127.0.0.1:0".parse().unwrap(), config)
                    .expect("endpoint");
                addr_tx.send(ep.local_addr().unwrap()).unwrap();
                // 16 MiB uploads: above axum's 2 MiB default body limit.
                let app = app(app_state).layer(axum::extract::DefaultBodyLimit::max(32 << 20));
                let served = spargio_http::serve_h3(ep, app)
                    .with_connect_info()
                    .with_graceful_shutdown(async move { stop2.cancelled().await })
                    .grace_period(Duration::from_secs(10))
                    .await;
                let _ = done_tx.send(served);
            })
            .unwrap();
        let addr = addr_rx.recv_timeout(HANG).expect("server did not start");
        H3Server {
            addr,
            state,
            stop,
            done,
            _rt: rt,
        }
    }

    fn stop(self) {
        self.stop.cancel();
        self.done
            .recv_timeout(HANG)
            .expect("server did not stop")
            .expect("serve_h3 failed");
    }
}

fn backends() -> Vec<BackendKind> {
    let mut out = vec![BackendKind::Epoll];
    if spargio::probe_io_uring().is_ok() {
        out.push(BackendKind::IoUring);
    }
    out
}

fn sha256_hex(data: &[u8]) -> String {
    let out = Command::new("sha256sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child.stdin.take().unwrap().write_all(data)?;
            child.wait_with_output()
        })
        .expect("sha256sum");
    String::from_utf8(out.stdout).unwrap()[..64].to_owned()
}

/// The aioquic client's body pattern (`--body-bytes`): byte i = i % 251.
fn py_pattern(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i % 251) as u8).collect()
}

/// Runs `h3_client.py` against `url` with `args`; its JSON lines.
fn aioquic(url: &str, ca: &std::path::Path, args: &[&str]) -> Vec<serde_json::Value> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/py/h3_client.py");
    let out = Command::new("python3")
        .arg(script)
        .arg("--url")
        .arg(url)
        .arg("--ca")
        .arg(ca)
        .args(args)
        .output()
        .expect("python3");
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert!(
        out.status.success(),
        "h3_client.py {args:?}: {}\n{lines:?}",
        String::from_utf8_lossy(&out.stderr)
    );
    lines
}

fn done_line(lines: &[serde_json::Value]) -> &serde_json::Value {
    lines
        .last()
        .filter(|l| l["done"] == true)
        .expect("a done line")
}

#[test]
fn aioquic_client_gets_posts_and_runs_concurrent_requests() {
    require_peer!(Peer::PythonAioquic);
    let (cert, key) = common::self_signed();
    let ca = common::temp_file("h3-ca.pem", cert.as_bytes());
    for backend in backends() {
        let server = H3Server::start(backend, &cert, &key);
        let base = format!("https://127.0.0.1:{}", server.addr.port());

        let lines = aioquic(&format!("{base}/"), &ca, &[]);
        assert_eq!(lines[0]["status"], 200, "{backend:?}");
        assert_eq!(lines[0]["len"], "hello from spargio-http".len());

        // A streamed 1 MiB response, checked against the app's pattern.
        let lines = aioquic(&format!("{base}/big/1048576"), &ca, &[]);
        assert_eq!(
            lines[0]["sha256"],
            sha256_hex(&pattern(1 << 20)),
            "{backend:?}"
        );

        // POST bodies of 0 B, 1 MiB and 16 MiB, echoed back.
        for n in [0usize, 1 << 20, 16 << 20] {
            let n_arg = n.to_string();
            let lines = aioquic(
                &format!("{base}/echo"),
                &ca,
                &["--method", "POST", "--body-bytes", &n_arg],
            );
            assert_eq!(lines[0]["status"], 200, "{backend:?} POST {n}");
            assert_eq!(lines[0]["len"], n, "{backend:?} POST {n}");
            assert_eq!(
                lines[0]["sha256"],
                sha256_hex(&py_pattern(n)),
                "{backend:?}"
            );
        }

        // 100 requests at once on one connection; then 50 connections.
        let lines = aioquic(
            &format!("{base}/"),
            &ca,
            &["--requests", "100", "--concurrency", "100"],
        );
        assert_eq!(done_line(&lines)["ok"], 100, "{backend:?}");
        let lines = aioquic(
            &format!("{base}/"),
            &ca,
            &["--requests", "2", "--connections", "50"],
        );
        assert_eq!(done_line(&lines)["ok"], 100, "{backend:?}");

        // The peer address reaches the handler (ConnectInfo).
        let lines = aioquic(&format!("{base}/peer"), &ca, &[]);
        assert_eq!(lines[0]["status"], 200);

        // Requests cancelled mid-body leave the server serving.
        let lines = aioquic(
            &format!("{base}/echo"),
            &ca,
            &[
                "--method",
                "POST",
                "--cancel-after-bytes",
                "100000",
                "--requests",
                "5",
            ],
        );
        assert_eq!(done_line(&lines)["cancelled"], 5, "{backend:?}");
        let lines = aioquic(&format!("{base}/"), &ca, &[]);
        assert_eq!(
            lines[0]["status"], 200,
            "{backend:?}: served after the cancels"
        );

        server.stop();
    }
}

#[test]
fn graceful_shutdown_sends_goaway_and_finishes_requests_in_flight() {
    require_peer!(Peer::PythonAioquic);
    let (cert, key) = common::self_signed();
    let ca = common::temp_file("h3-ca-goaway.pem", cert.as_bytes());
    for backend in backends() {
        let server = H3Server::start(backend, &cert, &key);
        let url = format!("https://127.0.0.1:{}/slow/1500", server.addr.port());
        let client = {
            let ca = ca.clone();
            std::thread::spawn(move || {
                aioquic(&url, &ca, &["--requests", "4", "--concurrency", "4"])
            })
        };
        // The requests are in (they sleep 1.5 s in the handler). Bounded,
        // never a timing assertion: the client may take long to start.
        let start = std::time::Instant::now();
        while server
            .state
            .in_slow
            .load(std::sync::atomic::Ordering::SeqCst)
            < 4
        {
            assert!(
                start.elapsed() < HANG,
                "{backend:?}: the requests never arrived"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        let stopping = std::thread::spawn(move || server.stop());
        let lines = client.join().unwrap();
        stopping.join().unwrap();
        let done = done_line(&lines);
        assert_eq!(done["ok"], 4, "{backend:?}: in-flight requests finished");
        assert_eq!(done["goaway"], 1, "{backend:?}: the client saw GOAWAY");
        // The server's close, unless the client, done first, closed first.
        let code = &done["conns"][0]["peer_close_code"];
        assert!(
            code.is_null() || *code == 0x100,
            "{backend:?}: closed with H3_NO_ERROR, not {code}"
        );
    }
}

/// `h3` + `h3-quinn` on a tokio runtime: GET and POST against our server.
#[test]
fn h3_quinn_client_on_tokio_round_trips() {
    let (cert, key) = common::self_signed();
    for backend in backends() {
        let server = H3Server::start(backend, &cert, &key);
        let addr = server.addr;
        let cert = cert.clone();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let mut roots = rustls::RootCertStore::empty();
            for c in rustls_pemfile_certs(&cert) {
                roots.add(c).unwrap();
            }
            let mut tls = rustls::ClientConfig::builder_with_provider(Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .with_protocol_versions(&[&rustls::version::TLS13])
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
            tls.alpn_protocols = vec![H3_ALPN.to_vec()];
            let quic = quinn::crypto::rustls::QuicClientConfig::try_from(tls).unwrap();
            let mut ep = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
            ep.set_default_client_config(quinn::ClientConfig::new(Arc::new(quic)));
            let conn = ep.connect(addr, "localhost").unwrap().await.unwrap();
            let (mut driver, mut send) = h3::client::new(h3_quinn::Connection::new(conn))
                .await
                .unwrap();
            let drive =
                tokio::spawn(async move { std::future::poll_fn(|cx| driver.poll_close(cx)).await });

            let mut req = send
                .send_request(
                    http::Request::get("https://localhost/big/300000")
                        .body(())
                        .unwrap(),
                )
                .await
                .unwrap();
            req.finish().await.unwrap();
            let resp = req.recv_response().await.unwrap();
            assert_eq!(resp.status(), 200);
            let mut body = Vec::new();
            while let Some(mut chunk) = req.recv_data().await.unwrap() {
                body.extend_from_slice(&chunk.copy_to_bytes(chunk.remaining()));
            }
            assert_eq!(body, pattern(300_000), "{backend:?}");

            let up = pattern(2 << 20);
            let mut req = send
                .send_request(
                    http::Request::post("https://localhost/echo")
                        .body(())
                        .unwrap(),
                )
                .await
                .unwrap();
            for chunk in up.chunks(50_000) {
                req.send_data(Bytes::copy_from_slice(chunk)).await.unwrap();
            }
            req.finish().await.unwrap();
            assert_eq!(req.recv_response().await.unwrap().status(), 200);
            let mut back = Vec::new();
            while let Some(mut chunk) = req.recv_data().await.unwrap() {
                back.extend_from_slice(&chunk.copy_to_bytes(chunk.remaining()));
            }
            assert_eq!(back, up, "{backend:?}");
            drop(send);
            let end = tokio::time::timeout(HANG, drive).await.unwrap().unwrap();
            assert!(end.is_h3_no_error(), "{backend:?}: {end:?}");
        });
        server.stop();
    }
}

use std::sync::Arc;

fn rustls_pemfile_certs(pem: &str) -> Vec<rustls::pki_types::CertificateDer<'static>> {
    use rustls::pki_types::pem::PemObject;
    rustls::pki_types::CertificateDer::pem_slice_iter(pem.as_bytes())
        .map(|c| c.unwrap())
        .collect()
}

/// The TCP server advertises HTTP/3 with `AltSvcLayer`; a handler's own
/// `Alt-Svc` is kept.
#[test]
fn alt_svc_layer_advertises_h3_on_the_tcp_server() {
    use axum::routing::get;
    use spargio_http::layer::AltSvcLayer;
    let app = axum::Router::new()
        .route("/", get(|| async { "hi" }))
        .route(
            "/own",
            get(|| async { ([(http::header::ALT_SVC, "clear")], "own") }),
        )
        .layer(AltSvcLayer::h3(8443));
    let server = common::TestServer::start_with(|_| app, |s| s, Duration::from_secs(5));
    let url = server.url("/");
    let own = server.url("/own");
    common::bounded("alt-svc", move || {
        spargio::block_on(spargio::run(move |handle| async move {
            let client = spargio_http::Client::new(&handle);
            let resp = client.get(url).await.unwrap();
            assert_eq!(resp.headers()["alt-svc"], "h3=\":8443\"; ma=86400");
            let resp = client.get(own).await.unwrap();
            assert_eq!(resp.headers()["alt-svc"], "clear");
        }))
        .unwrap()
    });
    server.stop().unwrap();
}

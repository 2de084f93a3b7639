//! tokio-based HTTP middleware and clients inside spargio (feature
//! `tokio-compat`): tower-http's `TimeoutLayer` answering 408, a handler
//! that joins a `tokio::spawn`ed task, and reqwest (rustls) calling a
//! spargio-http server over HTTP/1.1 and HTTPS from a spargio task.

mod common;

use std::time::Duration;

use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::Router;
use common::{run, self_signed, AppState, TestServer};

fn tokio_app(_: AppState) -> Router {
    Router::new()
        .route("/fast", get(|| async { "fast" }))
        .route(
            "/slow",
            get(|| async {
                tokio::time::sleep(Duration::from_secs(30)).await;
                "slow"
            }),
        )
        .route(
            "/spawned",
            get(|| async {
                let shard = spargio::ShardCtx::current().map(|c| c.shard_id());
                let joined = tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    (6 * 7, spargio::ShardCtx::current().map(|c| c.shard_id()))
                });
                let (answer, ran_on) = joined.await.unwrap();
                assert_eq!(ran_on, shard, "the tokio task ran on the handler's shard");
                answer.to_string()
            }),
        )
        .route("/echo", post(|body: axum::body::Bytes| async move { body }))
        .layer(tower_http::timeout::TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            Duration::from_millis(200),
        ))
}

#[test]
fn tower_http_timeout_layer_answers_408_and_lets_fast_requests_through() {
    let server = TestServer::start_with(tokio_app, |s| s, Duration::from_secs(5));
    let base = server.url("");
    let (fast, slow, spawned) = run(move |_| async move {
        let client = reqwest::Client::new();
        let get = |path: &str| client.get(format!("{base}{path}")).send();
        let fast = get("/fast").await.unwrap();
        let fast = (fast.status(), fast.text().await.unwrap());
        let slow = get("/slow").await.unwrap().status();
        let spawned = get("/spawned").await.unwrap().text().await.unwrap();
        (fast, slow, spawned)
    });
    assert_eq!(fast, (reqwest::StatusCode::OK, "fast".to_string()));
    assert_eq!(slow, reqwest::StatusCode::REQUEST_TIMEOUT);
    assert_eq!(spawned, "42");
    server.stop().unwrap();
}

#[test]
fn reqwest_gets_and_posts_over_http1_and_https_from_a_spargio_task() {
    let (cert, key) = self_signed();
    let plain = TestServer::start_with(tokio_app, |s| s.http1_only(), Duration::from_secs(5));
    let acceptor = spargio_tls::TlsAcceptor::from_pem(cert.as_bytes(), key.as_bytes()).unwrap();
    let tls = TestServer::start_with(tokio_app, move |s| s.tls(acceptor), Duration::from_secs(5));
    let urls = [
        plain.url(""),
        format!("https://localhost:{}", tls.addr.port()),
    ];
    let root = reqwest::Certificate::from_pem(cert.as_bytes()).unwrap();
    let body: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    let expected = body.clone();
    let answers = run(move |h| async move {
        let client = reqwest::Client::builder()
            .add_root_certificate(root)
            .resolve("localhost", std::net::SocketAddr::from(([127, 0, 0, 1], 0)))
            .build()
            .unwrap();
        let mut out = Vec::new();
        for url in urls {
            // From tasks on both shards, the client shared.
            for shard in 0..h.shard_count() {
                let (client, u, body) = (client.clone(), url.clone(), body.clone());
                let job = h.spawn_pinned(shard, async move {
                    let url = u;
                    let got = client.get(format!("{url}/fast")).send().await.unwrap();
                    let got = got.text().await.unwrap();
                    let echoed = client
                        .post(format!("{url}/echo"))
                        .body(body)
                        .send()
                        .await
                        .unwrap();
                    assert!(echoed.status().is_success(), "{url}: {}", echoed.status());
                    (got, echoed.bytes().await.unwrap().to_vec())
                });
                out.push((url.clone(), job.unwrap().await.unwrap()));
            }
        }
        out
    });
    assert_eq!(answers.len(), 4);
    for (url, (got, echoed)) in answers {
        assert_eq!(got, "fast", "{url}");
        assert!(
            echoed == expected,
            "{url}: echo differs ({} bytes)",
            echoed.len()
        );
    }
    plain.stop().unwrap();
    tls.stop().unwrap();
}

/// The feature is on by default (issue 50, item 4): a service moved from
/// tokio keeps its tower-http layers, sqlx and reqwest without a feature
/// line, as most of them need tokio's runtime. Read from the manifest
/// (`cargo metadata`): this test binary itself is built with the feature
/// whatever the default, by the dev-dependency on the crate.
#[test]
fn tokio_compat_is_a_default_feature() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = std::process::Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run cargo metadata");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("metadata JSON");
    let ours = meta["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .find(|p| p["name"] == "spargio-http")
        .expect("spargio-http in the workspace");
    let default = ours["features"]["default"]
        .as_array()
        .expect("a default feature list");
    assert!(
        default.iter().any(|f| f == "tokio-compat"),
        "default features: {default:?}"
    );
}

//! HTTP/3: the test app (`common::app`) served by `serve_h3` on a
//! spargio-quic endpoint, called by Python aioquic's HTTP/3 client
//! (`tests/py/h3_client.py`) and by `h3` + quinn on tokio. Both backends.

mod common;
mod h3_support;

use std::time::Duration;

use bytes::{Buf, Bytes};
use spargio_test_peers::{require_peer, Peer};

use common::{pattern, HANG};

use h3_support::*;

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
            let ep = quinn_client(&cert);
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

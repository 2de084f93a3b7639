//! The server against curl: HTTP/1.1, HTTP/2 by prior knowledge, HTTPS
//! with ALPN (h2 and http/1.1), ConnectInfo, and fds after shutdown.

mod common;

use common::*;
use spargio_test_peers::{require_peer, Peer};

#[test]
fn http1_get_and_post_json() {
    require_peer!(Peer::Curl);
    let _serial = serial();
    let fds = fd_count();
    let server = TestServer::start(|s| s);
    let out = curl_ok(&["-w", "\n%{http_version}", &server.url("/")]);
    assert_eq!(out, "hello from spargio-http\n1.1");
    let out = curl_ok(&[
        "-X",
        "POST",
        "-H",
        "content-type: application/json",
        "-d",
        r#"{"name":"spargio","n":41}"#,
        &server.url("/json"),
    ]);
    let item: Item = serde_json::from_str(&out).unwrap();
    assert_eq!(
        item,
        Item {
            name: "spargio".into(),
            n: 42
        }
    );
    // Keep-alive: curl sends both requests over one connection.
    let out = curl_ok(&[
        &server.url("/"),
        &server.url("/big/100000"),
        "-o",
        "/dev/null",
        "-o",
        "/dev/null",
        "-w",
        "%{num_connects}\n",
    ]);
    assert_eq!(out, "1\n0\n");
    server.stop().unwrap();
    assert_fds_back_to(fds);
}

#[test]
fn http2_prior_knowledge_on_the_same_port() {
    require_peer!(Peer::Curl);
    let _serial = serial();
    let server = TestServer::start(|s| s);
    let out = curl_ok(&[
        "--http2-prior-knowledge",
        "-w",
        "\n%{http_version}",
        &server.url("/"),
    ]);
    assert_eq!(out, "hello from spargio-http\n2");
    // A large body over HTTP/2 (flow control windows refill).
    let out = curl(&["--http2-prior-knowledge", &server.url("/big/3000000")]);
    assert!(out.status.success());
    assert_eq!(out.stdout, pattern(3_000_000));
    server.stop().unwrap();
}

#[test]
fn https_negotiates_h2_and_http1_by_alpn() {
    require_peer!(Peer::Curl);
    let _serial = serial();
    let (cert, key) = self_signed();
    let ca = temp_file("ca.pem", cert.as_bytes());
    let acceptor = spargio_tls::TlsAcceptor::from_pem(cert.as_bytes(), key.as_bytes()).unwrap();
    let server = TestServer::start(move |s| s.tls(acceptor));
    let port = server.addr.port();
    let resolve = format!("localhost:{port}:127.0.0.1");
    let url = format!("https://localhost:{port}/");
    let ca = ca.to_str().unwrap();
    let out = curl_ok(&[
        "--cacert",
        ca,
        "--resolve",
        &resolve,
        "--http2",
        "-w",
        "\n%{http_version}",
        &url,
    ]);
    assert_eq!(out, "hello from spargio-http\n2");
    let out = curl_ok(&[
        "--cacert",
        ca,
        "--resolve",
        &resolve,
        "--http1.1",
        "-w",
        "\n%{http_version}",
        &url,
    ]);
    assert_eq!(out, "hello from spargio-http\n1.1");
    let big = format!("https://localhost:{port}/big/2000000");
    let out = curl(&["--cacert", ca, "--resolve", &resolve, "--http2", &big]);
    assert!(out.status.success());
    assert_eq!(out.stdout, pattern(2_000_000));
    server.stop().unwrap();
}

#[test]
fn connect_info_gives_handlers_the_peer_address() {
    require_peer!(Peer::Curl);
    let _serial = serial();
    let server = TestServer::start(|s| s.with_connect_info());
    let out = curl_ok(&["-w", " %{local_port}", &server.url("/peer")]);
    let (peer, local_port) = out.split_once(' ').unwrap();
    assert_eq!(peer, format!("127.0.0.1:{local_port}"));
    server.stop().unwrap();
}

#[test]
fn post_body_round_trips() {
    require_peer!(Peer::Curl);
    let _serial = serial();
    let server = TestServer::start(|s| s);
    let body = temp_file("body.bin", &pattern(1_500_000));
    let data = format!("@{}", body.display());
    for proto in ["--http1.1", "--http2-prior-knowledge"] {
        let out = curl(&[
            proto,
            "-X",
            "POST",
            "--data-binary",
            &data,
            &server.url("/echo"),
        ]);
        assert!(out.status.success(), "{proto}");
        assert_eq!(out.stdout, pattern(1_500_000), "{proto}");
    }
    server.stop().unwrap();
}

#[test]
fn h2load_many_streams_on_few_connections() {
    require_peer!(Peer::H2load);
    let _serial = serial();
    let server = TestServer::start(|s| s);
    // 4 connections x 32 concurrent streams, 4,000 requests: every one
    // must succeed (h2load: "N succeeded, 0 failed, 0 errored").
    let url = server.url("/");
    let out = bounded("h2load", move || {
        std::process::Command::new("h2load")
            .args(["-n", "4000", "-c", "4", "-m", "32", &url])
            .output()
            .expect("h2load runs")
    });
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("4000 total, 4000 started, 4000 done, 4000 succeeded, 0 failed, 0 errored"),
        "{text}"
    );
    assert!(text.contains("status codes: 4000 2xx"), "{text}");
    server.stop().unwrap();
}

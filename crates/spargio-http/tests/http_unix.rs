//! `serve` on a Unix socket (issue 50, item 1): curl over
//! `--unix-socket` gets the axum app's answers, over HTTP/1.1 and HTTP/2
//! by prior knowledge; with connect info a handler reads the client's
//! credentials (`ConnectInfo<UnixPeerCred>`): curl's own pid and our uid.

mod common;

use axum::extract::ConnectInfo;
use axum::routing::get;
use axum::Router;
use common::*;
use spargio::net::UnixListener;
use spargio_http::UnixPeerCred;
use spargio_test_peers::{require_peer, Peer};

fn app() -> Router {
    Router::new()
        .route("/", get(|| async { "over a unix socket\n" }))
        .route(
            "/who",
            get(|ConnectInfo(cred): ConnectInfo<UnixPeerCred>| async move {
                format!("{} {}", cred.pid, cred.uid)
            }),
        )
}

/// curl's stdout and its pid.
fn curl_unix(path: &std::path::Path, args: &[&str]) -> (String, u32) {
    let child = std::process::Command::new("curl")
        .args(["-s", "--max-time", "30", "--unix-socket"])
        .arg(path)
        .args(args)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("run curl");
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "curl failed: {:?}", out.status);
    (String::from_utf8(out.stdout).unwrap(), pid)
}

#[test]
fn curl_over_a_unix_socket_with_its_credentials_as_connect_info() {
    require_peer!(Peer::Curl);
    let dir = std::env::temp_dir().join(format!("spargio-http-unix-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("app.sock");
    let _ = std::fs::remove_file(&path);
    let sock = path.clone();
    run(move |h| async move {
        let listener = UnixListener::bind(&h, &sock).unwrap();
        let server = h
            .spawn_stealable(std::future::IntoFuture::into_future(
                spargio_http::serve(listener, app()).with_connect_info(),
            ))
            .unwrap();
        let sock2 = sock.clone();
        let checks = h
            .spawn_blocking(move || {
                let (plain, _) = curl_unix(&sock2, &["http://localhost/"]);
                assert_eq!(plain, "over a unix socket\n");
                let (h2, _) = curl_unix(&sock2, &["--http2-prior-knowledge", "http://localhost/"]);
                assert_eq!(h2, "over a unix socket\n");
                let (who, pid) = curl_unix(&sock2, &["http://localhost/who"]);
                // SAFETY: getuid has no preconditions.
                let uid = unsafe { libc::getuid() };
                assert_eq!(who, format!("{pid} {uid}"), "curl's pid and our uid");
            })
            .unwrap();
        checks.await.unwrap();
        server.abort();
    });
    let _ = std::fs::remove_dir_all(&dir);
}

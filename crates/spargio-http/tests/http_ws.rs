//! WebSocket upgrades in axum handlers (`spargio_http::ws`) against
//! Python's `websockets` client (the client script of spargio-ws's
//! tests), refusals of requests that are not upgrades against curl, and
//! nothing left behind after the server stops.

mod common;

use std::process::{Command, Stdio};

use axum::response::Response;
use axum::routing::get;
use axum::Router;
use common::*;
use spargio_http::ws::WebSocketUpgrade;
use spargio_test_peers::{require_peer, Peer};
use spargio_ws::{WsOptions, WsStreamExt};

/// Echoes text and binary messages until the client closes.
async fn echo(ws: WebSocketUpgrade) -> Response {
    ws.protocols(["chat.v2", "chat"])
        .on_upgrade(|mut socket| async move {
            while let Ok(Some(msg)) = socket.recv().await {
                if (msg.is_text() || msg.is_binary()) && socket.send_message(msg).await.is_err() {
                    break;
                }
            }
        })
}

/// The same, with messages limited to 1000 bytes.
async fn small(ws: WebSocketUpgrade) -> Response {
    ws.options(WsOptions::default().with_max_message_size(Some(1000)))
        .on_upgrade(|mut socket| async move { while let Ok(Some(_)) = socket.recv().await {} })
}

fn ws_app(_: AppState) -> Router {
    Router::new()
        .route("/ws", get(echo))
        .route("/small", get(small))
}

/// `python3 <spargio-ws>/tests/py/client.py args...`, bounded.
fn py_client(args: &[&str]) -> String {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../spargio-ws/tests/py/client.py"
    );
    let out = bounded("python websockets client", {
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        move || {
            Command::new("python3")
                .arg(script)
                .args(&args)
                .stdin(Stdio::null())
                .output()
                .expect("python3")
        }
    });
    assert!(
        out.status.success(),
        "client failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn python_client_echoes_through_an_axum_handler_every_size_every_byte() {
    require_peer!(Peer::PythonWebsockets);
    let _serial = serial();
    let fds = fd_count();
    let server = TestServer::start_with(ws_app, |s| s, HANG);
    let url = format!("ws://{}/ws", server.addr);
    let out = py_client(&[&url, "echo"]);
    // Every size of the script's list, text and binary, byte for byte.
    assert_eq!(out.trim(), "OK 18");
    server.stop().unwrap();
    assert_fds_back_to(fds);
}

#[test]
fn an_oversize_message_is_refused_with_1009() {
    require_peer!(Peer::PythonWebsockets);
    let _serial = serial();
    let server = TestServer::start_with(ws_app, |s| s, HANG);
    let url = format!("ws://{}/small", server.addr);
    let out = py_client(&[&url, "oversize", "5000"]);
    assert!(out.starts_with("CLOSED 1009"), "{out}");
    server.stop().unwrap();
}

#[test]
fn requests_that_are_not_upgrades_are_refused_before_the_handler() {
    require_peer!(Peer::Curl);
    let _serial = serial();
    let server = TestServer::start_with(ws_app, |s| s, HANG);
    let url = server.url("/ws");
    let status = |args: &[&str]| {
        let mut all = vec!["-s", "-o", "/dev/null", "-w", "%{http_code}"];
        all.extend_from_slice(args);
        all.push(&url);
        curl_ok(&all)
    };
    let upgrade = [
        "-H",
        "Connection: Upgrade",
        "-H",
        "Upgrade: websocket",
        "-H",
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
    ];
    // A plain GET: no upgrade headers.
    assert_eq!(status(&[]), "400");
    // No version header.
    assert_eq!(status(&upgrade), "400");
    let mut versioned = upgrade.to_vec();
    versioned.extend(["-H", "Sec-WebSocket-Version: 13"]);
    // Another method.
    let mut post = versioned.clone();
    post.extend(["-X", "POST"]);
    assert_eq!(status(&post), "405");
    // HTTP/2 (prior knowledge): not upgradable here.
    let mut h2 = vec!["--http2-prior-knowledge", "-H", "Sec-WebSocket-Version: 13"];
    h2.extend(["-H", "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ=="]);
    assert_eq!(status(&h2), "426");
    // A well-formed upgrade: 101, the RFC 6455 example's accept key, and
    // the subprotocol the server prefers among those offered.
    let mut full = versioned.clone();
    full.extend([
        "-H",
        "Sec-WebSocket-Protocol: chat, chat.v2",
        "-i",
        "-m",
        "2",
    ]);
    let out = curl(&[&full[..], &[&url[..]]].concat());
    let head = String::from_utf8_lossy(&out.stdout).to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 101"), "{head}");
    assert!(
        head.contains("sec-websocket-accept: s3pplmbitxaq9kygzzhzrbk+xoo="),
        "{head}"
    );
    assert!(head.contains("sec-websocket-protocol: chat.v2"), "{head}");
    server.stop().unwrap();
}

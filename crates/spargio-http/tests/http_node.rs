//! The server against Node's own `http` and `http2` clients (keep-alive
//! agent over HTTP/1.1, one HTTP/2 session with concurrent streams).

mod common;

use common::*;
use spargio_test_peers::{require_peer, Peer};

#[test]
fn node_http1_and_http2_clients() {
    require_peer!(Peer::Node);
    let _serial = serial();
    let server = TestServer::start(|s| s);
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/js/client.js");
    let port = server.addr.port().to_string();
    let out = bounded("node", move || {
        std::process::Command::new("node")
            .arg(script)
            .args([&port, "40"])
            .output()
            .expect("node runs")
    });
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // 40 bodies of 1000..1040 bytes each way.
    let bytes: usize = (1000..1040).sum();
    assert!(text.contains(&format!("http1 40/40 {bytes}")), "{text}");
    assert!(text.contains(&format!("http2 40/40 {bytes}")), "{text}");
    server.stop().unwrap();
}

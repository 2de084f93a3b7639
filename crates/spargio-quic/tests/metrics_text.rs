//! QUIC counters in the Prometheus text format (issue 24's per-companion
//! counters): after a stream round trip between two endpoints, the text
//! carries each endpoint's counters under its label and each native
//! driver's under its index, and Python's `prometheus_client` parses it.

mod common;
mod support;

use spargio::RuntimeHandle;
use spargio_quic::{prometheus_text, QuicEndpointOptions};
use spargio_test_peers::{require_peer, Peer};

use common::{pattern, TestCerts};
use support::*;

#[spargio::test(shards = 2)]
async fn endpoint_and_driver_counters_are_exported(handle: RuntimeHandle) {
    let certs = TestCerts::generate();
    let server = server(&handle, &certs, None, QuicEndpointOptions::default());
    let client = client(&handle, &certs, None, QuicEndpointOptions::default());
    let (c, s) = pair(&client, &server).await;
    let echo = handle
        .spawn_stealable(async move {
            let (mut send, mut recv) = s.accept_bi().await.unwrap();
            let data = recv.read_to_end(1 << 20).await.unwrap();
            send.write_all(&data).await.unwrap();
            send.finish().unwrap();
            s.closed().await;
        })
        .unwrap();
    let (mut send, mut recv) = c.open_bi().await.unwrap();
    let msg = pattern(10_000, 3);
    send.write_all(&msg).await.unwrap();
    send.finish().unwrap();
    assert_eq!(hang("echo", recv.read_to_end(1 << 20)).await.unwrap(), msg);

    let text = prometheus_text(&[("client", &client), ("server \"b\"", &server)]);
    assert!(text.contains("spargio_quic_streams_opened_total{endpoint=\"client\"} 1\n"));
    assert!(text.contains("spargio_quic_streams_accepted_total{endpoint=\"server \\\"b\\\"\"} 1\n"));
    assert!(text.contains("spargio_quic_bytes_written_total{endpoint=\"client\"} 10000\n"));
    // One TYPE line per family, however many endpoints and drivers.
    let types = text
        .lines()
        .filter(|l| l.starts_with("# TYPE spargio_quic_driver_bytes_sent_total "))
        .count();
    assert_eq!(types, 1, "{text}");
    let sent: u64 = text
        .lines()
        .filter(|l| l.starts_with("spargio_quic_driver_bytes_sent_total{endpoint=\"client\""))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum();
    assert!(sent >= 10_000, "{text}");
    c.close(0, b"done");
    hang("server task", echo).await.unwrap();
    parse_with_prometheus_client(&text);
}

/// Python's `prometheus_client` parses `text` (a malformed exposition
/// fails the test).
fn parse_with_prometheus_client(text: &str) {
    require_peer!(Peer::PythonPrometheusClient);
    let parsed = spargio_test_peers::parse_prometheus_text(text);
    assert!(
        parsed.contains("\"spargio_quic_driver_bytes_sent\""),
        "{parsed}"
    );
}

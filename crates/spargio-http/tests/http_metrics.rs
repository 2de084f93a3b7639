//! `RuntimeStats::to_prometheus_text` served on `/metrics` by an axum
//! handler, fetched with curl and parsed by Python's `prometheus_client`
//! (the reference parser): every family typed, one sample per shard, the
//! values the runtime counted.

mod common;

use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use common::*;
use spargio_test_peers::{require_peer, Peer};

async fn metrics() -> impl IntoResponse {
    let ctx = spargio::ShardCtx::current().expect("handlers run on a shard");
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        ctx.handle().stats_snapshot().to_prometheus_text(),
    )
}

fn metrics_app(_: AppState) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/", get(|| async { "hello" }))
}

/// The families `prometheus_client` parsed from `text`.
fn parse(text: &str) -> serde_json::Value {
    serde_json::from_str(&spargio_test_peers::parse_prometheus_text(text)).unwrap()
}

#[test]
fn the_exposition_parses_with_prometheus_client() {
    require_peer!(Peer::Curl);
    require_peer!(Peer::PythonPrometheusClient);
    let _serial = serial();
    let server = TestServer::start_with(metrics_app, |s| s, HANG);
    for _ in 0..5 {
        assert_eq!(curl_ok(&[&server.url("/")]), "hello");
    }
    let out = curl(&["-sS", "-D", "-", &server.url("/metrics")]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: text/plain; version=0.0.4"),
        "{head}"
    );
    let families = parse(body);

    // A counter per shard counter, one sample per shard (the test server
    // runs two), named with `_total`; the runtime polled tasks to serve.
    let polled = &families["spargio_tasks_polled"];
    assert_eq!(polled["type"], "counter");
    let samples = polled["samples"].as_array().unwrap();
    assert_eq!(samples.len(), 2, "{samples:?}");
    let mut shards: Vec<&str> = samples
        .iter()
        .map(|s| s[1]["shard"].as_str().unwrap())
        .collect();
    shards.sort();
    assert_eq!(shards, ["0", "1"]);
    assert!(samples.iter().all(|s| s[0] == "spargio_tasks_polled_total"));
    let total: f64 = samples.iter().map(|s| s[2].as_f64().unwrap()).sum();
    assert!(total >= 6.0, "{total}");
    assert!(!polled["help"].as_str().unwrap().is_empty());

    // Gauges, the backend and the stall detector's totals.
    assert_eq!(families["spargio_live_tasks"]["type"], "gauge");
    assert_eq!(families["spargio_steal_failed_streak_max"]["type"], "gauge");
    let info = &families["spargio_info"]["samples"][0];
    assert_eq!(info[2].as_f64(), Some(2.0));
    assert!(matches!(
        info[1]["backend"].as_str(),
        Some("io_uring" | "epoll")
    ));
    assert_eq!(families["spargio_stalls"]["type"], "counter");
    // The sampled poll-time histogram: cumulative buckets per shard, the
    // parser checked `+Inf` against `_count`.
    let hist = &families["spargio_poll_time_seconds"];
    assert_eq!(hist["type"], "histogram");
    let buckets = hist["samples"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s[0] == "spargio_poll_time_seconds_bucket")
        .count();
    assert_eq!(buckets, 2 * spargio::POLL_TIME_BUCKETS);
    assert_eq!(families["spargio_blocking_stalls"]["samples"][0][2], 0.0);
    server.stop().unwrap();
}

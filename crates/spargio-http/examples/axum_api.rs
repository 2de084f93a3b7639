//! An axum JSON API on spargio: shared state, path/query/JSON extractors,
//! tower-http layers, the peer address, graceful shutdown, and the
//! runtime's metrics on `/metrics` for Prometheus.
//!
//! ```text
//! cargo run --release -p spargio-http --example axum_api               # serves, calls itself over HTTP/1.1 and HTTP/2, exits
//! cargo run --release -p spargio-http --example axum_api -- serve 3000 # serves until SIGTERM or ctrl-c
//! curl -s localhost:3000/items -H 'content-type: application/json' -d '{"name":"tea","price_cents":350}'
//! curl -s 'localhost:3000/items?max_price_cents=500'
//! curl -s localhost:3000/metrics
//! ```

use std::collections::BTreeMap;
use std::future::IntoFuture;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{ConnectInfo, Path, Query, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{Json, Router};
use bytes::Bytes;
use http_body_util::Full;
use serde::{Deserialize, Serialize};
use spargio_http::client::body_bytes;
use spargio_http::Client;
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::set_header::SetResponseHeaderLayer;

#[derive(Clone, Debug, Serialize, Deserialize)]
struct NewItem {
    name: String,
    price_cents: u64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct Item {
    id: u64,
    name: String,
    price_cents: u64,
    added_by: String,
}

#[derive(Deserialize)]
struct Filter {
    max_price_cents: Option<u64>,
}

#[derive(Clone, Default)]
struct Store {
    items: Arc<Mutex<BTreeMap<u64, Item>>>,
}

async fn create(
    State(store): State<Store>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    Json(new): Json<NewItem>,
) -> Result<(StatusCode, Json<Item>), (StatusCode, &'static str)> {
    if new.name.is_empty() {
        return Err((StatusCode::UNPROCESSABLE_ENTITY, "name must not be empty"));
    }
    let mut items = store.items.lock().unwrap();
    let id = items.keys().next_back().map_or(1, |k| k + 1);
    let item = Item {
        id,
        name: new.name,
        price_cents: new.price_cents,
        added_by: peer.ip().to_string(),
    };
    items.insert(id, item.clone());
    Ok((StatusCode::CREATED, Json(item)))
}

async fn list(State(store): State<Store>, Query(filter): Query<Filter>) -> Json<Vec<Item>> {
    let items = store.items.lock().unwrap();
    let max = filter.max_price_cents.unwrap_or(u64::MAX);
    Json(
        items
            .values()
            .filter(|i| i.price_cents <= max)
            .cloned()
            .collect(),
    )
}

async fn fetch(State(store): State<Store>, Path(id): Path<u64>) -> Result<Json<Item>, StatusCode> {
    let items = store.items.lock().unwrap();
    items
        .get(&id)
        .cloned()
        .map(Json)
        .ok_or(StatusCode::NOT_FOUND)
}

/// The runtime's counters in Prometheus's text format.
async fn metrics() -> impl IntoResponse {
    let ctx = spargio::ShardCtx::current().expect("handlers run on a shard");
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        ctx.handle().stats_snapshot().to_prometheus_text(),
    )
}

fn app() -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/items", get(list).post(create))
        .route("/items/{id}", get(fetch))
        .with_state(Store::default())
        .layer(RequestBodyLimitLayer::new(64 * 1024))
        .layer(SetResponseHeaderLayer::overriding(
            header::SERVER,
            HeaderValue::from_static("spargio-http"),
        ))
}

/// Resolves on SIGTERM or SIGINT (ctrl-c).
async fn shutdown_signal(handle: spargio::RuntimeHandle) {
    match spargio_signal::signal(&handle, &[libc::SIGTERM, libc::SIGINT]) {
        Ok(mut signals) => {
            let _ = signals.recv().await;
        }
        Err(e) => {
            eprintln!("no signal handling ({e}); serving until killed");
            std::future::pending::<()>().await
        }
    }
}

async fn self_test(
    handle: spargio::RuntimeHandle,
    addr: SocketAddr,
) -> Result<(), spargio_http::client::Error> {
    for (name, client) in [
        ("HTTP/1.1", Client::new(&handle)),
        (
            "HTTP/2",
            Client::builder(&handle).http2_prior_knowledge().build(),
        ),
    ] {
        let created = client
            .request(
                http::Request::post(format!("http://{addr}/items"))
                    .header("content-type", "application/json")
                    .body(Full::new(Bytes::from(format!(
                        r#"{{"name":"tea over {name}","price_cents":350}}"#
                    ))))
                    .unwrap(),
            )
            .await?;
        assert_eq!(created.status(), StatusCode::CREATED);
        assert_eq!(created.headers()["server"], "spargio-http");
        let item: Item = serde_json::from_slice(&body_bytes(created).await?).unwrap();
        let fetched = client
            .get(format!("http://{addr}/items/{}", item.id))
            .await?;
        let version = fetched.version();
        let fetched: Item = serde_json::from_slice(&body_bytes(fetched).await?).unwrap();
        println!("{version:?}: created and fetched {fetched:?}");
    }
    let cheap = Client::new(&handle)
        .get(format!("http://{addr}/items?max_price_cents=500"))
        .await?;
    println!(
        "listed: {}",
        String::from_utf8_lossy(&body_bytes(cheap).await?)
    );
    let missing = Client::new(&handle)
        .get(format!("http://{addr}/items/999"))
        .await?;
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);
    let scraped = Client::new(&handle)
        .get(format!("http://{addr}/metrics"))
        .await?;
    let text = String::from_utf8(body_bytes(scraped).await?.to_vec()).unwrap();
    let polled: u64 = text
        .lines()
        .filter(|l| l.starts_with("spargio_tasks_polled_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum();
    println!(
        "/metrics: {} metric families; {polled} task polls so far",
        text.lines().filter(|l| l.starts_with("# TYPE")).count()
    );
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let serve_forever = args.first().map(String::as_str) == Some("serve");
    let port: u16 = args.get(1).and_then(|p| p.parse().ok()).unwrap_or(0);
    spargio::block_on(spargio::run(move |handle| async move {
        let listener = spargio::net::TcpListener::bind(&handle, ("127.0.0.1", port)).await?;
        let addr = listener.local_addr()?;
        if serve_forever {
            println!(
                "listening on http://{addr} (backend: {:?})",
                handle.backend()
            );
            spargio_http::serve(listener, app())
                .with_connect_info()
                .with_graceful_shutdown(shutdown_signal(handle.clone()))
                .grace_period(Duration::from_secs(10))
                .await?;
            println!("drained; bye");
            return Ok(());
        }
        let stop = spargio::CancellationToken::new();
        let stopped = stop.clone();
        let server = handle.spawn_stealable(
            spargio_http::serve(listener, app())
                .with_connect_info()
                .with_graceful_shutdown(async move { stopped.cancelled().await })
                .into_future(),
        )?;
        self_test(handle, addr).await?;
        stop.cancel();
        server.await??;
        println!("served and shut down gracefully");
        Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
    }))?
}

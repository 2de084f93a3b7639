//! An axum service written for tokio, moved to spargio by changing `main`
//! alone (the book's "Migrating from tokio" shows the diff). Everything
//! above `main` is the tokio original, unchanged: tower-http's
//! `TimeoutLayer`, `tokio::time::sleep` and `tokio::spawn` in handlers,
//! the peer address through `ConnectInfo`, graceful shutdown on ctrl-c
//! with `tokio::signal`.
//!
//! ```text
//! cargo run -p spargio-http --example ported_from_tokio               # serves, calls itself, exits
//! cargo run -p spargio-http --example ported_from_tokio -- --serve    # serves on 127.0.0.1:3000 until ctrl-c
//! ```

use std::net::SocketAddr;
use std::sync::OnceLock;
use std::time::Duration;

use axum::extract::ConnectInfo;
use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;
use tower_http::timeout::TimeoutLayer;

fn app() -> Router {
    Router::new()
        .route(
            "/hello",
            get(|ConnectInfo(peer): ConnectInfo<SocketAddr>| async move {
                format!("hello, {}\n", peer.ip())
            }),
        )
        .route(
            "/work",
            get(|| async {
                // Work on a task of its own, as a tokio service writes it.
                let answer = tokio::spawn(async {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    42
                });
                format!("{}\n", answer.await.unwrap())
            }),
        )
        .route(
            "/slow",
            get(|| async {
                tokio::time::sleep(Duration::from_secs(10)).await;
                "too late\n"
            }),
        )
        .layer(TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            Duration::from_millis(200),
        ))
}

/// Completes on ctrl-c, or when the self-test is done.
async fn shutdown() {
    let done = SELF_TEST.get_or_init(tokio::sync::Notify::new);
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = done.notified() => {}
    }
}

/// Woken by the self-test once it has checked every route.
static SELF_TEST: OnceLock<tokio::sync::Notify> = OnceLock::new();

/// The service's `main` on tokio was:
///
/// ```ignore
/// #[tokio::main]
/// async fn main() -> Result<(), Box<dyn std::error::Error>> {
///     let listener = tokio::net::TcpListener::bind(addr()).await?;
///     axum::serve(listener, app().into_make_service_with_connect_info::<SocketAddr>())
///         .with_graceful_shutdown(shutdown())
///         .await?;
///     Ok(())
/// }
/// ```
#[spargio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let listener = spargio::net::TcpListener::bind_here(addr()).await?;
    self_test_against(listener.local_addr()?);
    spargio_http::serve(
        listener,
        app().into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(shutdown())
    .await?;
    Ok(())
}

// ----- the example's own check, not part of the service -----

fn serving_only() -> bool {
    std::env::args().any(|a| a == "--serve")
}

fn addr() -> &'static str {
    if serving_only() {
        "127.0.0.1:3000"
    } else {
        "127.0.0.1:0"
    }
}

/// Unless `--serve`: calls every route from a thread of its own, checks
/// the answers, then ends the server.
fn self_test_against(addr: SocketAddr) {
    if serving_only() {
        println!("serving on http://{addr}");
        return;
    }
    std::thread::spawn(move || {
        let get = |path: &str| {
            use std::io::{Read, Write};
            let mut s = std::net::TcpStream::connect(addr).expect("connect");
            write!(
                s,
                "GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n"
            )
            .unwrap();
            let mut out = String::new();
            s.read_to_string(&mut out).unwrap();
            out
        };
        let hello = get("/hello");
        assert!(hello.ends_with("hello, 127.0.0.1\n"), "{hello}");
        let work = get("/work");
        assert!(work.ends_with("\r\n\r\n42\n"), "{work}");
        let slow = get("/slow");
        assert!(slow.starts_with("HTTP/1.1 408"), "{slow}");
        println!("ported_from_tokio: /hello, /work and /slow (408) answered as on tokio");
        SELF_TEST.get_or_init(tokio::sync::Notify::new).notify_one();
    });
}

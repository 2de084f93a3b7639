//! One axum `Router` served by spargio-http on spargio or by `axum::serve`
//! on tokio, for real clients (`wrk`, `h2load`) to drive.
//! `scripts/axum_bench.sh` runs it.
//!
//! ```text
//! axum_server <spargio|tokio> <port> [workers=2]
//! ```
//!
//! The router (the same on both sides): `GET /` answers `Hello, world!`,
//! `GET /json` a 1 KiB JSON document (a fixed `Order`, serialized by
//! `axum::Json` on every request). HTTP/1.1 and HTTP/2 (h2c by prior
//! knowledge) on the one port, `TCP_NODELAY` on every accepted socket.
//!
//! - tokio: `new_multi_thread().worker_threads(workers).enable_all()`,
//!   `axum::serve` with its defaults over a `tokio::net::TcpListener`.
//!   `axum::serve` leaves Nagle on, so the listener is wrapped with axum's
//!   own `ListenerExt::tap_io(|tcp| tcp.set_nodelay(true))`, as axum's
//!   docs show; the server future is itself a spawned task, so only the
//!   `workers` threads serve.
//! - spargio: `Runtime::builder().shards(workers)` with default settings,
//!   `spargio_http::serve(listener, app)` with its defaults (which set
//!   `TCP_NODELAY`).
//!
//! Prints `ready <pid>` once listening and serves until killed.

use std::io;
use std::net::SocketAddr;
use std::process::ExitCode;

use axum::routing::get;
use axum::serve::ListenerExt;
use axum::{Json, Router};
use serde::Serialize;
use spargio_bench::server::{ready, ServerArgs};

// ===== the router =====

#[derive(Serialize)]
struct Order {
    id: u64,
    customer: &'static str,
    email: &'static str,
    currency: &'static str,
    total_cents: u64,
    paid: bool,
    lines: [Line; 10],
}

#[derive(Serialize)]
struct Line {
    sku: &'static str,
    name: &'static str,
    quantity: u32,
    unit_cents: u64,
}

const fn line(sku: &'static str, name: &'static str, quantity: u32, unit_cents: u64) -> Line {
    Line {
        sku,
        name,
        quantity,
        unit_cents,
    }
}

/// What `/json` serializes on every request: 1,024 bytes of JSON.
static ORDER: Order = Order {
    id: 47_110_042,
    customer: "Augusta Ada King, Countess of Lovelace",
    email: "lovelace@example.com",
    currency: "EUR",
    total_cents: 48_217,
    paid: true,
    lines: [
        line("SKU-100001", "Stainless steel water bottle", 2, 1_999),
        line("SKU-100002", "Cotton tote bag, natural", 1, 1_250),
        line("SKU-100003", "Notebook, dotted, A5", 3, 899),
        line("SKU-100004", "Fountain pen, medium nib", 1, 12_900),
        line("SKU-100005", "Ink bottle, blue-black, 50 ml", 2, 1_450),
        line("SKU-100006", "Desk lamp, warm white LED", 1, 8_990),
        line("SKU-100007", "Mechanical pencil, 0.5 mm", 4, 650),
        line("SKU-100008", "Ceramic mug, 350 ml", 2, 1_490),
        line("SKU-100009", "Linen napkins, set of four", 1, 2_490),
        line("SKU-100010", "Beeswax candles, pack of six", 1, 1_790),
    ],
};

/// What `/` answers (`text/plain`), the body of `http_server` too.
const HELLO: &str = "Hello, world!";

fn app() -> Router {
    Router::new()
        .route("/", get(|| async { HELLO }))
        .route("/json", get(|| async { Json(&ORDER) }))
}

// ===== tokio =====

fn serve_tokio(addr: SocketAddr, workers: usize) -> io::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(addr).await?.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        ready();
        tokio::spawn(async move { axum::serve(listener, app()).await })
            .await
            .map_err(io::Error::other)?
    })
}

// ===== spargio =====

fn serve_spargio(addr: SocketAddr, workers: usize) -> io::Result<()> {
    let builder = spargio::Runtime::builder().shards(workers);
    spargio::block_on(spargio::run_with(builder, move |handle| async move {
        let listener = spargio::net::TcpListener::bind(&handle, addr).await?;
        ready();
        spargio_http::serve(listener, app()).await
    }))
    .map_err(io::Error::other)?
}

fn main() -> ExitCode {
    let Some(args) = ServerArgs::parse("axum_server") else {
        return ExitCode::from(2);
    };
    let served = match args.runtime.as_str() {
        "spargio" => serve_spargio(args.addr, args.workers),
        _ => serve_tokio(args.addr, args.workers),
    };
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("axum_server ({}): {e}", args.runtime);
            ExitCode::FAILURE
        }
    }
}

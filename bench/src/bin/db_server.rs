//! The TechEmpower test types on one axum `Router` with PostgreSQL, served
//! on spargio or on tokio, for `scripts/db_bench.sh` to drive with `wrk`.
//!
//! ```text
//! DATABASE_URL=postgres://... db_server --runtime <spargio|spargio-pg|tokio> \
//!     [--port 18084] [--workers 2] [--pool 16]
//! ```
//!
//! Routes (`bench/src/db/mod.rs`): `/plaintext`, `/json`, `/db`,
//! `/queries?q=N`, `/fortunes`, `/updates?q=N`, against the TechEmpower
//! tables `world` and `fortune` (`spargio-peer-db` makes them).
//!
//! Runtimes, each with `workers` shards or worker threads and a pool of
//! `pool` database connections, all opened before `ready` is printed:
//!
//! - `spargio`: `Runtime::builder().shards(workers)` (tokio-compat on, as
//!   by default with the feature), `spargio_http::serve`; sqlx's `PgPool`
//!   on each shard's tokio runtime. The connections are opened from tasks
//!   pinned to each shard in turn, so their sockets are spread over the
//!   shards' tokio reactors.
//! - `spargio-pg`: the same server; tokio-postgres over spargio's own TCP
//!   sockets (`spargio::io::Compat`, `connect_raw`), connection `i` on
//!   shard `i % workers`, statements prepared once per connection, queries
//!   of a request pipelined on one connection of its shard.
//! - `tokio`: `new_multi_thread().worker_threads(workers).enable_all()`,
//!   `axum::serve` over a listener with `TCP_NODELAY` on every accepted
//!   socket (as in `axum_server`), the server future spawned so only the
//!   workers serve; the same sqlx `PgPool`, connections opened from
//!   spawned tasks.
//!
//! Prints `ready <pid>` once listening and serves until killed.

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::process::ExitCode;
use std::sync::Arc;

use axum::serve::ListenerExt;
use spargio_bench::server::ready;

#[path = "../db/mod.rs"]
mod db;

use db::store::{self, Db};

const USAGE: &str =
    "usage: DATABASE_URL=postgres://... db_server --runtime <spargio|spargio-pg|tokio> \
                     [--port 18084] [--workers 2] [--pool 16]";

struct Args {
    runtime: String,
    addr: SocketAddr,
    workers: usize,
    pool: usize,
    url: String,
}

impl Args {
    fn parse() -> Result<Args, String> {
        let mut runtime = None;
        let mut port: u16 = 18084;
        let mut workers = 2;
        let mut pool = 16;
        let mut args = std::env::args().skip(1);
        while let Some(flag) = args.next() {
            let value = args.next().ok_or(format!("{flag} needs a value"))?;
            let bad = |_| format!("bad value for {flag}: {value}");
            match flag.as_str() {
                "--runtime" => runtime = Some(value.clone()),
                "--port" => port = value.parse().map_err(bad)?,
                "--workers" => workers = value.parse().map_err(bad)?,
                "--pool" => pool = value.parse().map_err(bad)?,
                _ => return Err(format!("unknown argument {flag}")),
            }
        }
        let runtime = runtime.ok_or("--runtime is required")?;
        if !matches!(runtime.as_str(), "spargio" | "spargio-pg" | "tokio") {
            return Err(format!("unknown runtime {runtime}"));
        }
        if workers == 0 || pool == 0 {
            return Err("--workers and --pool must be at least 1".into());
        }
        let url = std::env::var("DATABASE_URL").map_err(|_| "DATABASE_URL is not set")?;
        Ok(Args {
            runtime,
            addr: SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
            workers,
            pool,
            url,
        })
    }
}

// ===== tokio =====

fn serve_tokio(args: Args) -> io::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.workers)
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let pool = store::sqlx_pool(&args.url, args.pool).map_err(io::Error::other)?;
        // Open every connection: `pool` acquires held at once.
        let acquires: Vec<_> = (0..args.pool)
            .map(|_| {
                let pool = pool.clone();
                tokio::spawn(async move { pool.acquire().await })
            })
            .collect();
        let mut held = Vec::with_capacity(args.pool);
        for acquire in acquires {
            held.push(
                acquire
                    .await
                    .map_err(io::Error::other)?
                    .map_err(io::Error::other)?,
            );
        }
        drop(held);
        let app = db::app(Arc::new(Db::Sqlx(pool)));
        let listener = tokio::net::TcpListener::bind(args.addr)
            .await?
            .tap_io(|tcp| {
                let _ = tcp.set_nodelay(true);
            });
        ready();
        tokio::spawn(async move { axum::serve(listener, app).await })
            .await
            .map_err(io::Error::other)?
    })
}

// ===== spargio =====

fn serve_spargio(args: Args) -> io::Result<()> {
    let builder = spargio::Runtime::builder().shards(args.workers);
    spargio::block_on(spargio::run_with(builder, move |handle| async move {
        let db = if args.runtime == "spargio-pg" {
            Db::Pg(
                store::pg_pool(&handle, &args.url, args.pool)
                    .await
                    .map_err(io::Error::other)?,
            )
        } else {
            let pool = store::sqlx_pool(&args.url, args.pool).map_err(io::Error::other)?;
            // Open every connection from tasks pinned to each shard in
            // turn: a connection's socket lives on the tokio reactor of
            // the shard that opened it.
            let mut acquires = Vec::with_capacity(args.pool);
            for i in 0..args.pool {
                let pool = pool.clone();
                acquires.push(
                    handle
                        .spawn_pinned(
                            i % handle.shard_count(),
                            async move { pool.acquire().await },
                        )
                        .map_err(io::Error::other)?,
                );
            }
            let mut held = Vec::with_capacity(args.pool);
            for acquire in acquires {
                held.push(
                    acquire
                        .await
                        .map_err(io::Error::other)?
                        .map_err(io::Error::other)?,
                );
            }
            drop(held);
            Db::Sqlx(pool)
        };
        let listener = spargio::net::TcpListener::bind(&handle, args.addr).await?;
        ready();
        // The runtime's counters, for looking into a run (not a test type).
        let stats = handle.clone();
        let app = db::app(Arc::new(db)).route(
            "/stats",
            axum::routing::get(move || {
                let text = stats.stats_snapshot().to_prometheus_text();
                async move { text }
            }),
        );
        spargio_http::serve(listener, app).await
    }))
    .map_err(io::Error::other)?
}

fn main() -> ExitCode {
    let args = match Args::parse() {
        Ok(args) => args,
        Err(e) => {
            eprintln!("db_server: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let runtime = args.runtime.clone();
    let served = match runtime.as_str() {
        "tokio" => serve_tokio(args),
        _ => serve_spargio(args),
    };
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("db_server ({runtime}): {e}");
            ExitCode::FAILURE
        }
    }
}

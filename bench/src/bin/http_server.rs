//! A hyper 1.x HTTP/1.1 server on spargio or on tokio, for a real client
//! (`wrk`) to drive. `scripts/http_bench.sh` runs it.
//!
//! ```text
//! http_server <spargio|tokio> <port> [workers=2]
//! ```
//!
//! Both sides answer every request with the same 13-byte body,
//! `Hello, world!`, over HTTP/1.1 keep-alive, with hyper's default
//! connection settings and `TCP_NODELAY` on every accepted socket.
//!
//! - tokio: `new_multi_thread().worker_threads(workers).enable_all()`; the
//!   accept loop is itself a spawned task (so only the `workers` threads
//!   serve), one `tokio::spawn` per connection running
//!   `http1::Builder::serve_connection(TokioIo::new(stream), ..)`.
//! - spargio: the default runtime with `.shards(workers)`; the serve loop
//!   the book's I/O chapter gives servers: one multishot accept
//!   (`incoming_round_robin`), one task per connection pinned on its
//!   session shard (`spawn_on_session`), hyper over
//!   `TokioIo::new(Compat::new(stream))`.
//!
//! For measuring settings other than the defaults only (never in the
//! default comparison): `SPARGIO_ACCEPT=incoming-cpu` accepts with
//! `StreamSessionPolicy::IncomingCpu` instead of round robin,
//! `SPARGIO_PIN=1` builds with `thread_affinity(true)`, and
//! `SPARGIO_DEFER_TASKRUN=0` builds with `io_uring_defer_taskrun(false)`,
//! and `SPARGIO_SPIN_US=<µs>` with `spin_before_park` of that many
//! microseconds (0: park at once).
//!
//! Prints `ready <pid>` once listening and serves until killed. Connection
//! errors (wrk resets its connections at the end of a run) are ignored.

use std::io;
use std::net::SocketAddr;
use std::process::ExitCode;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use spargio::net::StreamSessionPolicy;
use spargio_bench::server::{hello, ready, ServerArgs};

// ===== tokio =====

fn serve_tokio(addr: SocketAddr, workers: usize) -> io::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        ready();
        tokio::spawn(async move {
            loop {
                let stream = match listener.accept().await {
                    Ok((stream, _peer)) => stream,
                    Err(_) => continue,
                };
                let _ = stream.set_nodelay(true);
                tokio::spawn(async move {
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service_fn(hello))
                        .await;
                });
            }
        })
        .await
        .map_err(io::Error::other)
    })
}

// ===== spargio =====

fn serve_spargio(addr: SocketAddr, workers: usize) -> io::Result<()> {
    let pin = std::env::var_os("SPARGIO_PIN").is_some_and(|v| v == "1");
    let builder = spargio::Runtime::builder()
        .shards(workers)
        .thread_affinity(pin)
        .io_uring_defer_taskrun(std::env::var_os("SPARGIO_DEFER_TASKRUN").is_none_or(|v| v != "0"));
    let builder = match std::env::var("SPARGIO_SPIN_US")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        Some(us) => builder.spin_before_park(std::time::Duration::from_micros(us)),
        None => builder,
    };
    spargio::block_on(spargio::run_with(builder, move |handle| async move {
        let listener = spargio::net::TcpListener::bind(&handle, addr).await?;
        ready();
        accept_spargio(handle, listener).await
    }))
    .map_err(io::Error::other)?
}

async fn accept_spargio(
    handle: spargio::RuntimeHandle,
    listener: spargio::net::TcpListener,
) -> io::Result<()> {
    let policy = match std::env::var("SPARGIO_ACCEPT").as_deref() {
        Ok("incoming-cpu") => StreamSessionPolicy::IncomingCpu,
        _ => StreamSessionPolicy::RoundRobin,
    };
    // One multishot accept for every connection, as the book's I/O chapter
    // advises for servers (a single-shot accept per connection costs ~1 µs
    // of server CPU more per connection under Connection: close churn).
    let mut incoming = listener.incoming_with_session_policy(policy)?;
    loop {
        let stream = match incoming.accept().await {
            Ok(stream) => stream,
            Err(_) => continue,
        };
        let _ = stream.set_nodelay(true);
        let conn = stream.clone();
        conn.spawn_on_session(&handle, async move {
            let io = TokioIo::new(spargio::io::Compat::new(stream));
            let _ = http1::Builder::new()
                .serve_connection(io, service_fn(hello))
                .await;
        })
        .map_err(io::Error::other)?;
    }
}

fn main() -> ExitCode {
    let Some(args) = ServerArgs::parse("http_server") else {
        return ExitCode::from(2);
    };
    let served = match args.runtime.as_str() {
        "spargio" => serve_spargio(args.addr, args.workers),
        _ => serve_tokio(args.addr, args.workers),
    };
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("http_server ({}): {e}", args.runtime);
            ExitCode::FAILURE
        }
    }
}

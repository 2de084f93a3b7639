//! An HTTP client load: `concurrency` tasks each GET one URL in a loop
//! and read every body to its end, on spargio-http's `Client` or on
//! hyper-util's pooled client on tokio. `scripts/http_client_bench.sh`
//! runs it against a local nginx.
//!
//! ```text
//! http_client <spargio|tokio> <url> <concurrency> <seconds> [workers=2]
//! http_client cert <dir>
//! ```
//!
//! For `https://` URLs the environment variable `HTTP_CLIENT_CA` names the
//! PEM file of the certificate to trust (both sides trust only it).
//! `http_client cert <dir>` writes a self-signed P-256 certificate for
//! `localhost` and `127.0.0.1` (rcgen) to `<dir>/cert.pem` and its key to
//! `<dir>/key.pem`, for the server.
//!
//! Both sides: `workers` worker threads (shards), one task per
//! connection-to-be spawned on the runtime (`tokio::spawn`,
//! `spawn_stealable`), each looping `GET url` then collecting the body
//! (`http_body_util::BodyExt::collect`) until `seconds` have passed; a
//! request in flight at the deadline finishes and counts. Request bodies
//! are `Full<Bytes>` (empty) on both sides.
//!
//! - tokio: `new_multi_thread().worker_threads(workers).enable_all()`,
//!   `hyper_util::client::legacy::Client::builder(TokioExecutor::new())`
//!   with `TokioTimer` as its timer and pool timer (as reqwest, which wraps
//!   this client, sets them) over `HttpConnector` with `TCP_NODELAY` (as
//!   reqwest sets it) for `http://`, wrapped by `hyper-rustls`'s
//!   `HttpsConnector` (ALPN `h2`, `http/1.1`) for `https://`.
//! - spargio: `Runtime::builder().shards(workers)`,
//!   `spargio_http::Client::builder(&handle)` with default settings, and
//!   `.tls(TlsConnector::with_root_ca_pem(..))` for `https://`.
//!
//! Both use one rustls `ClientConfig` (ring provider, TLS 1.2 and 1.3):
//! spargio-tls's `with_root_ca_pem`, which the tokio side clones.
//!
//! Prints one line of `key=value` fields: `requests`, `elapsed_s`,
//! `req_s`, `cpu_us_per_req` (this process's utime + stime from
//! `/proc/self/stat`, from before the tasks are spawned to after the last
//! one ends, over the requests), `body_bytes_per_req`, `version` (the HTTP
//! version of the responses) and `errors` (failed requests and non-2xx
//! responses). Exits non-zero when any request failed.

use std::fmt;
use std::io;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Uri, Version};
use spargio_tls::rustls::ClientConfig;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// What one task (and then the whole run) did.
#[derive(Debug, Default)]
struct Tally {
    requests: u64,
    body_bytes: u64,
    errors: u64,
    first_error: Option<String>,
    version: Option<Version>,
}

impl Tally {
    fn response(&mut self, version: Version, body: Result<Bytes, BoxError>) {
        self.version.get_or_insert(version);
        match body {
            Ok(body) => {
                self.requests += 1;
                self.body_bytes += body.len() as u64;
            }
            Err(e) => self.error(e),
        }
    }

    fn error(&mut self, e: impl fmt::Display) {
        self.errors += 1;
        self.first_error.get_or_insert_with(|| e.to_string());
    }

    fn merge(&mut self, other: Tally) {
        self.requests += other.requests;
        self.body_bytes += other.body_bytes;
        self.errors += other.errors;
        if self.first_error.is_none() {
            self.first_error = other.first_error;
        }
        if self.version.is_none() {
            self.version = other.version;
        }
    }
}

/// The whole run: the tasks' tally, wall time and CPU time.
struct Outcome {
    tally: Tally,
    elapsed: Duration,
    cpu: Duration,
}

/// This process's user + system CPU time (fields 14 and 15 of
/// `/proc/self/stat`, counted after the `(comm)` field, which may hold
/// spaces).
fn cpu_time() -> io::Result<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat")?;
    let after_comm = stat
        .rsplit_once(") ")
        .map(|(_, rest)| rest)
        .ok_or_else(|| io::Error::other("unexpected /proc/self/stat"))?;
    let fields: Vec<&str> = after_comm.split_whitespace().collect();
    let ticks = |i: usize| -> io::Result<u64> {
        fields
            .get(i)
            .and_then(|f| f.parse().ok())
            .ok_or_else(|| io::Error::other("unexpected /proc/self/stat"))
    };
    let total = ticks(11)? + ticks(12)?;
    // SAFETY: sysconf only reads a configuration value.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let hz = u64::try_from(hz).ok().filter(|&h| h > 0).unwrap_or(100);
    Ok(Duration::from_micros(total * 1_000_000 / hz))
}

/// The rustls config both sides use: trusts only the PEM in
/// `HTTP_CLIENT_CA`.
fn tls_config() -> io::Result<Option<spargio_tls::TlsConnector>> {
    match std::env::var_os("HTTP_CLIENT_CA") {
        None => Ok(None),
        Some(path) => spargio_tls::TlsConnector::with_root_ca_pem_file(path).map(Some),
    }
}

// ===== tokio =====

async fn tokio_task<C>(
    client: hyper_util::client::legacy::Client<C, Full<Bytes>>,
    uri: Uri,
    deadline: Instant,
) -> Tally
where
    C: hyper_util::client::legacy::connect::Connect + Clone + Send + Sync + 'static,
{
    let mut tally = Tally::default();
    while Instant::now() < deadline {
        match client.get(uri.clone()).await {
            Ok(response) if response.status().is_success() => {
                let version = response.version();
                let body = response.into_body().collect().await;
                tally.response(version, body.map(|b| b.to_bytes()).map_err(Into::into));
            }
            Ok(response) => tally.error(format_args!("status {}", response.status())),
            Err(e) => tally.error(format_args!("{e:?}")),
        }
    }
    tally
}

async fn tokio_load<C>(connector: C, uri: Uri, concurrency: usize, run_for: Duration) -> Outcome
where
    C: hyper_util::client::legacy::connect::Connect + Clone + Send + Sync + 'static,
{
    use hyper_util::rt::{TokioExecutor, TokioTimer};
    let client = hyper_util::client::legacy::Client::builder(TokioExecutor::new())
        .timer(TokioTimer::new())
        .pool_timer(TokioTimer::new())
        .build(connector);
    let cpu_before = cpu_time().unwrap_or_default();
    let start = Instant::now();
    let deadline = start + run_for;
    let tasks: Vec<_> = (0..concurrency)
        .map(|_| tokio::spawn(tokio_task(client.clone(), uri.clone(), deadline)))
        .collect();
    let mut tally = Tally::default();
    for task in tasks {
        match task.await {
            Ok(t) => tally.merge(t),
            Err(e) => tally.error(e),
        }
    }
    Outcome {
        tally,
        elapsed: start.elapsed(),
        cpu: cpu_time().unwrap_or_default().saturating_sub(cpu_before),
    }
}

fn run_tokio(args: &Args, tls: Option<Arc<ClientConfig>>) -> io::Result<Outcome> {
    use hyper_util::client::legacy::connect::HttpConnector;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.workers)
        .enable_all()
        .build()?;
    let mut http = HttpConnector::new();
    http.set_nodelay(true);
    let (uri, concurrency, run_for) = (args.uri.clone(), args.concurrency, args.run_for);
    match tls {
        None => Ok(rt.block_on(tokio_load(http, uri, concurrency, run_for))),
        Some(config) => {
            http.enforce_http(false);
            let https = hyper_rustls::HttpsConnectorBuilder::new()
                .with_tls_config((*config).clone())
                .https_or_http()
                .enable_http1()
                .enable_http2()
                .wrap_connector(http);
            Ok(rt.block_on(tokio_load(https, uri, concurrency, run_for)))
        }
    }
}

// ===== spargio =====

async fn spargio_task(client: spargio_http::Client, uri: Uri, deadline: Instant) -> Tally {
    let mut tally = Tally::default();
    while Instant::now() < deadline {
        match client.get(uri.clone()).await {
            Ok(response) if response.status().is_success() => {
                let version = response.version();
                let body = spargio_http::client::body_bytes(response).await;
                tally.response(version, body.map_err(Into::into));
            }
            Ok(response) => tally.error(format_args!("status {}", response.status())),
            Err(e) => tally.error(e),
        }
    }
    tally
}

fn run_spargio(args: &Args, tls: Option<spargio_tls::TlsConnector>) -> io::Result<Outcome> {
    let builder = spargio::Runtime::builder().shards(args.workers);
    let (uri, concurrency, run_for) = (args.uri.clone(), args.concurrency, args.run_for);
    spargio::block_on(spargio::run_with(builder, move |handle| async move {
        let mut builder = spargio_http::Client::builder(&handle);
        if let Some(tls) = tls {
            builder = builder.tls(tls);
        }
        let client: spargio_http::Client = builder.build();
        let cpu_before = cpu_time().unwrap_or_default();
        let start = Instant::now();
        let deadline = start + run_for;
        let mut tally = Tally::default();
        let mut tasks = Vec::with_capacity(concurrency);
        for _ in 0..concurrency {
            match handle.spawn_stealable(spargio_task(client.clone(), uri.clone(), deadline)) {
                Ok(task) => tasks.push(task),
                Err(e) => tally.error(e),
            }
        }
        for task in tasks {
            match task.await {
                Ok(t) => tally.merge(t),
                Err(e) => tally.error(e),
            }
        }
        Outcome {
            tally,
            elapsed: start.elapsed(),
            cpu: cpu_time().unwrap_or_default().saturating_sub(cpu_before),
        }
    }))
    .map_err(io::Error::other)
}

// ===== command line =====

struct Args {
    runtime: String,
    uri: Uri,
    concurrency: usize,
    run_for: Duration,
    workers: usize,
}

impl Args {
    fn parse(args: &[String]) -> Option<Args> {
        let runtime = args.first()?.clone();
        if runtime != "spargio" && runtime != "tokio" {
            return None;
        }
        let uri: Uri = args.get(1)?.parse().ok()?;
        let concurrency = args.get(2)?.parse().ok().filter(|&c: &usize| c > 0)?;
        let seconds: f64 = args.get(3)?.parse().ok().filter(|&s: &f64| s > 0.0)?;
        let workers = match args.get(4) {
            None => 2,
            Some(w) => w.parse().ok().filter(|&w: &usize| w > 0)?,
        };
        Some(Args {
            runtime,
            uri,
            concurrency,
            run_for: Duration::from_secs_f64(seconds),
            workers,
        })
    }
}

/// Writes `<dir>/cert.pem` and `<dir>/key.pem`.
fn write_cert(dir: &str) -> io::Result<()> {
    let cert =
        rcgen::generate_simple_self_signed(vec!["localhost".to_string(), "127.0.0.1".to_string()])
            .map_err(io::Error::other)?;
    let dir = std::path::Path::new(dir);
    std::fs::write(dir.join("cert.pem"), cert.cert.pem())?;
    std::fs::write(dir.join("key.pem"), cert.signing_key.serialize_pem())
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    if argv.first().map(String::as_str) == Some("cert") && argv.len() == 2 {
        return match write_cert(&argv[1]) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("http_client cert: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let Some(args) = Args::parse(&argv) else {
        eprintln!(
            "usage: http_client <spargio|tokio> <url> <concurrency> <seconds> [workers=2]\n       \
             http_client cert <dir>"
        );
        return ExitCode::from(2);
    };
    let outcome = tls_config().and_then(|tls| {
        if args.uri.scheme_str() == Some("https") && tls.is_none() {
            return Err(io::Error::other("https needs HTTP_CLIENT_CA"));
        }
        match args.runtime.as_str() {
            "spargio" => run_spargio(&args, tls),
            _ => run_tokio(&args, tls.map(|t| t.config().clone())),
        }
    });
    let Outcome {
        tally,
        elapsed,
        cpu,
    } = match outcome {
        Ok(outcome) => outcome,
        Err(e) => {
            eprintln!("http_client ({}): {e}", args.runtime);
            return ExitCode::FAILURE;
        }
    };
    let per_req = |total: f64| {
        if tally.requests > 0 {
            total / tally.requests as f64
        } else {
            f64::NAN
        }
    };
    println!(
        "runtime={} requests={} elapsed_s={:.3} req_s={:.0} cpu_us_per_req={:.2} \
         body_bytes_per_req={:.0} version={:?} errors={}",
        args.runtime,
        tally.requests,
        elapsed.as_secs_f64(),
        tally.requests as f64 / elapsed.as_secs_f64(),
        per_req(cpu.as_secs_f64() * 1e6),
        per_req(tally.body_bytes as f64),
        tally.version.unwrap_or_default(),
        tally.errors,
    );
    if tally.errors > 0 {
        eprintln!(
            "http_client ({}): {} requests failed; first: {}",
            args.runtime,
            tally.errors,
            tally.first_error.as_deref().unwrap_or("?")
        );
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

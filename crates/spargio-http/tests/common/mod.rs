//! Helpers shared by the integration tests: a server on its own runtime,
//! the axum app they serve, a self-signed certificate, bounded waits,
//! and fd counting.
#![allow(dead_code)]

use std::collections::HashSet;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::extract::{ConnectInfo, Json, Path, State};
use axum::routing::{get, post};
use axum::Router;
use serde::{Deserialize, Serialize};
use spargio::{CancellationToken, Runtime};
use spargio_http::Serve;

/// Generous bound for "this must not hang". Never a performance assertion.
pub const HANG: Duration = Duration::from_secs(60);

/// The tests of one binary share the process's fd table: those that
/// count fds run one at a time.
pub fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

/// Open fds of this process (a baseline: process-wide fds made once are
/// made first, see [`tokio_globals_made`]).
pub fn fd_count() -> usize {
    tokio_globals_made();
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// The first Tokio runtime with I/O in a build where Tokio's `signal`
/// feature is on (a `cargo test --workspace` build: another crate's
/// dependency turns it on) opens a socket pair that lives as long as the
/// process (Tokio's signal globals); with `tokio-compat` every spargio
/// runtime makes Tokio runtimes. Made before any fd baseline, so it is not
/// counted as a test's leak.
pub fn tokio_globals_made() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        drop(
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("tokio runtime"),
        );
    });
}

/// What each open fd of this process is (for a failure message).
pub fn fd_list() -> String {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc/self/fd").unwrap().flatten() {
        let target =
            std::fs::read_link(entry.path()).map_or("?".into(), |t| t.display().to_string());
        out.push(format!("{}={target}", entry.file_name().to_string_lossy()));
    }
    out.join(" ")
}

/// Fails unless the fd count comes back to `baseline` (or below: a
/// runtime dropped by an earlier test may still be closing its rings when
/// the baseline was taken).
pub fn assert_fds_back_to(baseline: usize) {
    let deadline = std::time::Instant::now() + HANG;
    while fd_count() > baseline {
        assert!(
            std::time::Instant::now() < deadline,
            "fds: {} open, {baseline} before: {}",
            fd_count(),
            fd_list()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Runs `f` on a thread and fails the test if it takes longer than `HANG`.
pub fn bounded<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(HANG)
        .unwrap_or_else(|_| panic!("{what}: hung (or panicked)"))
}

#[derive(Clone, Default)]
pub struct AppState {
    /// Requests inside `/slow` right now.
    pub in_slow: Arc<AtomicUsize>,
    /// What `/load/{ms}` handled.
    pub load: Arc<LoadCounts>,
}

/// Requests `/load/{ms}` handled: a test that stops the server under load
/// compares them with what its clients received.
#[derive(Default)]
pub struct LoadCounts {
    /// Handlers that began (the request was accepted and its body read).
    pub began: AtomicUsize,
    /// Handlers that returned their response.
    pub answered: AtomicUsize,
    /// POSTs among `answered`.
    pub answered_posts: AtomicUsize,
    /// Handlers that returned after `stopping` was set.
    pub answered_after_stop: AtomicUsize,
    /// Set by the test just before it stops the server.
    pub stopping: AtomicBool,
    /// While set, handlers that begin wait for `release` (so the test can
    /// stop the server with requests surely in flight).
    pub hold: AtomicBool,
    /// Handlers that waited for `release`.
    pub held: AtomicUsize,
    /// Lets the held handlers go on.
    pub release: CancellationToken,
    /// The `x-load-id` header of each request whose handler began.
    pub ids: Mutex<HashSet<String>>,
    /// The peer address of each connection a handler began a request of
    /// (needs `ConnectInfo`).
    pub peers: Mutex<HashSet<SocketAddr>>,
}

/// The body of `GET /load/{ms}`: `pattern(LOAD_GET_BYTES)`.
pub const LOAD_GET_BYTES: usize = 16 * 1024;

#[derive(Debug, Serialize, Deserialize, PartialEq)]
pub struct Item {
    pub name: String,
    pub n: u64,
}

/// `len` bytes of a pattern a shifted or dropped chunk would break.
pub fn pattern(len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i % 251) as u8 ^ (i >> 12) as u8)
        .collect()
}

/// The app every test serves:
/// `GET /` hello; `POST /json` echoes an `Item` with `n + 1`;
/// `GET /peer` the peer address (ConnectInfo); `GET /slow/{ms}` answers
/// after `ms`; `GET /big/{len}` `len` pattern bytes; `POST /echo` the body;
/// `GET /load/{ms}` `LOAD_GET_BYTES` pattern bytes and `POST /load/{ms}`
/// the body, both after `ms`, counted in `AppState::load`.
pub fn app(state: AppState) -> Router {
    Router::new()
        .route("/", get(|| async { "hello from spargio-http" }))
        .route(
            "/json",
            post(|Json(item): Json<Item>| async move {
                Json(Item {
                    name: item.name,
                    n: item.n + 1,
                })
            }),
        )
        .route(
            "/peer",
            get(|ConnectInfo(peer): ConnectInfo<SocketAddr>| async move { peer.to_string() }),
        )
        .route(
            "/slow/{ms}",
            get(
                |State(st): State<AppState>, Path(ms): Path<u64>| async move {
                    st.in_slow.fetch_add(1, Ordering::SeqCst);
                    spargio::time::sleep(Duration::from_millis(ms)).await;
                    st.in_slow.fetch_sub(1, Ordering::SeqCst);
                    format!("slept {ms}")
                },
            ),
        )
        .route(
            "/big/{len}",
            get(|Path(len): Path<usize>| async move { pattern(len) }),
        )
        .route("/echo", post(|body: axum::body::Bytes| async move { body }))
        .route("/load/{ms}", get(load).post(load))
        .route(
            "/shard",
            get(|| async { spargio::ShardCtx::current().unwrap().shard_id().to_string() }),
        )
        .with_state(state)
}

async fn load(
    State(st): State<AppState>,
    Path(ms): Path<u64>,
    req: axum::extract::Request,
) -> Result<axum::body::Bytes, http::StatusCode> {
    let (parts, body) = req.into_parts();
    let body = axum::body::to_bytes(body, 1 << 20)
        .await
        .map_err(|_| http::StatusCode::BAD_REQUEST)?;
    let load = &st.load;
    load.began.fetch_add(1, Ordering::SeqCst);
    if let Some(id) = parts.headers.get("x-load-id").and_then(|v| v.to_str().ok()) {
        load.ids.lock().unwrap().insert(id.to_owned());
    }
    if let Some(ConnectInfo(peer)) = parts.extensions.get::<ConnectInfo<SocketAddr>>() {
        load.peers.lock().unwrap().insert(*peer);
    }
    if load.hold.load(Ordering::SeqCst) {
        load.held.fetch_add(1, Ordering::SeqCst);
        load.release.cancelled().await;
    }
    spargio::time::sleep(Duration::from_millis(ms)).await;
    let resp = if parts.method == http::Method::POST {
        load.answered_posts.fetch_add(1, Ordering::SeqCst);
        body
    } else {
        pattern(LOAD_GET_BYTES).into()
    };
    if load.stopping.load(Ordering::SeqCst) {
        load.answered_after_stop.fetch_add(1, Ordering::SeqCst);
    }
    load.answered.fetch_add(1, Ordering::SeqCst);
    Ok(resp)
}

/// A server on a runtime of its own (2 shards), stopped gracefully by
/// [`TestServer::stop`] (or on drop).
pub struct TestServer {
    pub addr: SocketAddr,
    pub state: AppState,
    stop: CancellationToken,
    done: Option<mpsc::Receiver<std::io::Result<()>>>,
    rt: Option<Runtime>,
}

impl TestServer {
    pub fn start(
        configure: impl FnOnce(Serve<Router>) -> Serve<Router> + Send + 'static,
    ) -> TestServer {
        TestServer::start_with(app, configure, Duration::from_secs(30))
    }

    pub fn start_with(
        make_app: impl FnOnce(AppState) -> Router,
        configure: impl FnOnce(Serve<Router>) -> Serve<Router> + Send + 'static,
        grace: Duration,
    ) -> TestServer {
        TestServer::start_on(Runtime::builder().shards(2), make_app, configure, grace)
    }

    /// [`TestServer::start_with`] on a runtime `builder` makes.
    pub fn start_on(
        builder: spargio::RuntimeBuilder,
        make_app: impl FnOnce(AppState) -> Router,
        configure: impl FnOnce(Serve<Router>) -> Serve<Router> + Send + 'static,
        grace: Duration,
    ) -> TestServer {
        let rt = builder.build().expect("runtime");
        let handle = rt.handle();
        let state = AppState::default();
        let app = make_app(state.clone());
        let stop = CancellationToken::new();
        let stop2 = stop.clone();
        let (addr_tx, addr_rx) = mpsc::channel();
        let (done_tx, done_rx) = mpsc::channel();
        handle
            .spawn_stealable(async move {
                let h = spargio::ShardCtx::current().unwrap().handle();
                let listener = spargio::net::TcpListener::bind(&h, "127.0.0.1:0")
                    .await
                    .expect("bind");
                addr_tx.send(listener.local_addr().unwrap()).unwrap();
                let served = configure(spargio_http::serve(listener, app))
                    .with_graceful_shutdown(async move { stop2.cancelled().await })
                    .grace_period(grace)
                    .await;
                let _ = done_tx.send(served);
            })
            .expect("spawn");
        let addr = addr_rx.recv_timeout(HANG).expect("server did not start");
        TestServer {
            addr,
            state,
            stop,
            done: Some(done_rx),
            rt: Some(rt),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// Starts the graceful shutdown without waiting for it.
    pub fn trigger_stop(&self) {
        self.stop.cancel();
    }

    /// Shuts down gracefully and waits for the serve future's result.
    pub fn stop(mut self) -> std::io::Result<()> {
        self.stop.cancel();
        let res = self
            .done
            .take()
            .unwrap()
            .recv_timeout(HANG)
            .expect("server did not stop");
        // Every task the server spawned (connections, HTTP/2 streams,
        // the serve task itself) has ended.
        let handle = self.rt.as_ref().unwrap().handle();
        let deadline = std::time::Instant::now() + HANG;
        while handle.stats_snapshot().live_tasks() > 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "tasks left after the server stopped: {}",
                handle.stats_snapshot().live_tasks()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        drop(self.rt.take());
        res
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.stop.cancel();
        if let Some(done) = self.done.take() {
            let _ = done.recv_timeout(HANG);
        }
    }
}

/// Runs `curl` with `args`.
pub fn curl(args: &[&str]) -> Output {
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    bounded("curl", move || {
        Command::new("curl")
            .args(["-sS", "--max-time", "30"])
            .args(&args)
            .output()
            .expect("curl runs")
    })
}

/// `curl` that must succeed; its stdout.
pub fn curl_ok(args: &[&str]) -> String {
    let out = curl(args);
    assert!(
        out.status.success(),
        "curl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A raw HTTP/1.1 exchange: writes `request`, reads until the server
/// closes or `HANG` passes; the bytes read.
pub fn raw_exchange(addr: SocketAddr, request: &[u8]) -> Vec<u8> {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(HANG)).unwrap();
    let _ = s.write_all(request);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    out
}

/// A self-signed certificate for `localhost` and `127.0.0.1`: (cert PEM,
/// key PEM).
pub fn self_signed() -> (String, String) {
    let names = vec!["localhost".into(), "127.0.0.1".into()];
    let cert = rcgen::generate_simple_self_signed(names).unwrap();
    (cert.cert.pem(), cert.signing_key.serialize_pem())
}

/// Writes `contents` to a fresh file under the temp dir; its path.
pub fn temp_file(name: &str, contents: &[u8]) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("spargio-http-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, contents).unwrap();
    path
}

/// Runs `f(handle)` as a stealable task on a fresh 2-shard runtime and
/// returns its output; fails the test if it does not finish in `HANG`.
pub fn run<F, Fut>(f: F) -> Fut::Output
where
    F: FnOnce(spargio::RuntimeHandle) -> Fut + Send + 'static,
    Fut: std::future::Future + Send + 'static,
    Fut::Output: Send + 'static,
{
    bounded("client task", move || {
        let rt = Runtime::builder().shards(2).build().expect("runtime");
        let handle = rt.handle();
        let task = handle.spawn_stealable(f(handle.clone())).expect("spawn");
        let out = spargio::block_on(task).expect("client task failed");
        drop(rt);
        out
    })
}

/// A blocking read that goes on when interrupted: a socket with a read
/// timeout returns `EINTR` even under `SA_RESTART`, and after the process
/// was stopped and continued (signal(7)).
#[allow(dead_code)] // not every test binary reads raw sockets
pub fn read_some(s: &mut std::net::TcpStream, buf: &mut [u8]) -> std::io::Result<usize> {
    use std::io::Read;
    loop {
        match s.read(buf) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}

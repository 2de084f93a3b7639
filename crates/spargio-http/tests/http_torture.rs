//! HTTP bodies under the torture (issue 49's harness, `spargio/tests/
//! torture.rs`, for the HTTP layer): a seed draws a run of sessions
//! against one server, some at once, each through a different client:
//!
//! * our `Client` (HTTP/1.1, or HTTP/2 with prior knowledge) downloading a
//!   streamed body of random length, sent in random chunks with pauses,
//!   or uploading one that the server echoes as it arrives (both
//!   directions at once); each wrapped at random in a timeout, or dropped
//!   after a few frames;
//! * a raw std socket speaking HTTP/1.0 that reads the whole response, or
//!   reads part of it and then resets or closes the connection; or sends
//!   part of an upload and then resets.
//!
//! Invariants: every body read to its end is the exact keyed byte stream
//! (no byte lost, repeated or reordered, at any chunking); a session cut
//! short loses nothing for the others; the server then still answers; it
//! stops with no task left, and the process's fds come back to their
//! count.
//!
//! `TORTURE_SEED=n` replays one run; `TORTURE_SECONDS=s` runs for `s`
//! seconds (by default about 10). A failure prints the seed, the session
//! trace and the replay command.

mod common;
#[allow(dead_code)] // shared with the core harness; not all of it is used here
#[path = "../../../spargio/tests/torture/rng.rs"]
mod rng;

use std::future::Future;
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{Path, Request};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use bytes::Bytes;
use common::*;
use http_body::Frame;
use http_body_util::BodyExt;
use rng::{stream_bytes, Rng};
use spargio_http::Client;

/// Largest body of one session.
const MAX_BODY: usize = 768 * 1024;

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok()?.trim().parse().ok()
}

#[test]
fn http_torture() {
    let _serial = serial();
    if let Some(seed) = env_u64("TORTURE_SEED") {
        run_or_panic(seed);
        return;
    }
    let base = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64);
    let seconds = env_u64("TORTURE_SECONDS").unwrap_or(10);
    eprintln!("http torture: base seed {base}");
    let start = Instant::now();
    let mut runs = 0u64;
    let mut sessions = 0usize;
    while runs == 0 || start.elapsed() < Duration::from_secs(seconds) {
        sessions += run_or_panic(Rng::new(base.wrapping_add(runs)).next_u64());
        runs += 1;
    }
    eprintln!(
        "http torture: {runs} runs, {sessions} sessions in {:.1?}, all passed",
        start.elapsed()
    );
}

/// Runs `seed`; panics with the trace if it fails. The session count.
fn run_or_panic(seed: u64) -> usize {
    let trace = Trace::default();
    let t = trace.clone();
    let out = std::thread::spawn(move || run_seed(seed, &t))
        .join()
        .unwrap_or_else(|_| Err("the run panicked (its message is above)".into()));
    match out {
        Ok(n) => n,
        Err(e) => panic!(
            "\n==== HTTP TORTURE FAILURE seed {seed} ====\n{e}\n---- trace ----\n{}---- replay ----\nTORTURE_SEED={seed} cargo test -p spargio-http --test http_torture\n",
            trace.dump()
        ),
    }
}

#[derive(Clone, Default)]
struct Trace(Arc<Mutex<Vec<String>>>);

impl Trace {
    fn push(&self, line: String) {
        self.0.lock().unwrap().push(line);
    }

    fn dump(&self) -> String {
        self.0
            .lock()
            .unwrap()
            .iter()
            .map(|l| format!("  {l}\n"))
            .collect()
    }
}

/// What one session does (drawn from the run's seed).
#[derive(Clone, Copy, Debug)]
enum Session {
    /// Our client downloads `/gen`: `h2` or HTTP/1.1, then `how`.
    Download { h2: bool, how: Cut },
    /// Our client uploads to `/echo` and reads the echo.
    Upload { h2: bool, how: Cut },
    /// A raw HTTP/1.0 GET: the whole response, or `Some(n)` bytes of it
    /// and then a reset (`true`) or a close.
    RawGet { stop: Option<(usize, bool)> },
    /// A raw upload of `sent` bytes of the announced length, then a reset.
    RawPartialUpload { sent: usize },
}

/// How a client session ends.
#[derive(Clone, Copy, Debug)]
enum Cut {
    /// Reads the body to its end.
    Whole,
    /// Within a timeout of this many ms (either outcome is fine; an
    /// answer that came is checked).
    Timeout(u64),
    /// Drops the response after this many frames.
    DropAfter(usize),
}

fn draw(rng: &mut Rng) -> (Session, usize, u64) {
    let len = rng.size(MAX_BODY) - 1;
    let key = rng.next_u64() >> 1;
    let cut = |rng: &mut Rng| match rng.weighted(&[6, 2, 2]) {
        0 => Cut::Whole,
        1 => Cut::Timeout(1 + rng.below(40)),
        _ => Cut::DropAfter(rng.below(4) as usize),
    };
    let s = match rng.weighted(&[4, 4, 3, 1]) {
        0 => Session::Download {
            h2: rng.pct(40),
            how: cut(rng),
        },
        1 => Session::Upload {
            h2: rng.pct(40),
            how: cut(rng),
        },
        2 => Session::RawGet {
            stop: rng
                .pct(40)
                .then(|| (rng.below(len as u64 + 300) as usize, rng.pct(50))),
        },
        _ => Session::RawPartialUpload {
            sent: rng.below(len as u64 + 1) as usize,
        },
    };
    (s, len, key)
}

fn run_seed(seed: u64, trace: &Trace) -> Result<usize, String> {
    let fds = fd_count();
    let mut rng = Rng::new(seed);
    let server = TestServer::start_with(torture_app, |s| s, Duration::from_secs(10));
    let addr = server.addr;
    let count = 4 + rng.below(12) as usize;
    let sessions: Vec<(Session, usize, u64)> = (0..count).map(|_| draw(&mut rng)).collect();
    for (i, (s, len, key)) in sessions.iter().enumerate() {
        trace.push(format!("#{i} {s:?} len {len} key {key}"));
    }
    let (raw, ours): (Vec<_>, Vec<_>) =
        sessions
            .into_iter()
            .enumerate()
            .partition(|(_, (s, _, _))| {
                matches!(s, Session::RawGet { .. } | Session::RawPartialUpload { .. })
            });
    // Raw sessions on threads, ours as tasks of a client runtime, all at
    // once.
    let raw_threads: Vec<_> = raw
        .into_iter()
        .map(|(i, (s, len, key))| std::thread::spawn(move || (i, raw_session(addr, s, len, key).1)))
        .collect();
    let client_seed = rng.next_u64();
    let ours_out = bounded("our client's sessions", move || {
        run(move |handle| async move {
            let h1 = Client::builder(&handle).build::<Body>();
            let h2 = Client::builder(&handle)
                .http2_prior_knowledge()
                .build::<Body>();
            let mut tasks = Vec::new();
            for (i, (s, len, key)) in ours {
                let client = match s {
                    Session::Download { h2: true, .. } | Session::Upload { h2: true, .. } => {
                        h2.clone()
                    }
                    _ => h1.clone(),
                };
                let mut rng = Rng::new(client_seed ^ i as u64);
                let handle2 = handle.clone();
                tasks.push(
                    handle
                        .spawn_stealable(async move {
                            (
                                i,
                                our_session(&handle2, client, addr, s, len, key, &mut rng).await,
                            )
                        })
                        .expect("spawn a session"),
                );
            }
            let mut out = Vec::new();
            for t in tasks {
                out.push(t.await.expect("a session panicked"));
            }
            out
        })
    });
    let mut failures = Vec::new();
    for t in raw_threads {
        let (i, r) = t.join().map_err(|_| "a raw session panicked".to_string())?;
        trace.push(format!("#{i} -> {r:?}"));
        if let Err(e) = r {
            failures.push(format!("#{i}: {e}"));
        }
    }
    for (i, r) in ours_out {
        trace.push(format!("#{i} -> {r:?}"));
        if let Err(e) = r {
            failures.push(format!("#{i}: {e}"));
        }
    }
    if !failures.is_empty() {
        return Err(failures.join("\n"));
    }
    // The server still answers after whatever came before.
    let (s, r) = raw_session(addr, Session::RawGet { stop: None }, 1000, 7);
    let _ = s;
    r.map_err(|e| format!("the server no longer serves: {e}"))?;
    server
        .stop()
        .map_err(|e| format!("the server's stop failed: {e}"))?;
    assert_fds_back_to(fds);
    Ok(count)
}

/// `GET /gen/{len}/{key}`: the keyed stream of `len` bytes, streamed in
/// random chunks with pauses; `POST /echo`: the request body streamed back
/// as it arrives.
fn torture_app(_: AppState) -> Router {
    Router::new()
        .route(
            "/gen/{len}/{key}",
            get(|Path((len, key)): Path<(usize, u64)>| async move {
                Body::new(KeyedBody::new(key, len, key ^ len as u64)).into_response()
            }),
        )
        .route(
            "/echo",
            post(|req: Request| async move { Response::new(req.into_body()) }),
        )
}

/// A body of the keyed stream `key` of `len` bytes, in chunks and pauses
/// drawn from `seed`.
struct KeyedBody {
    key: u64,
    at: usize,
    len: usize,
    rng: Rng,
    pause: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
}

impl KeyedBody {
    fn new(key: u64, len: usize, seed: u64) -> KeyedBody {
        KeyedBody {
            key,
            at: 0,
            len,
            rng: Rng::new(seed),
            pause: None,
        }
    }
}

impl http_body::Body for KeyedBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if let Some(p) = self.pause.as_mut() {
            if p.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            self.pause = None;
        }
        if self.at >= self.len {
            return Poll::Ready(None);
        }
        if self.rng.pct(8) {
            let ms = self.rng.below(3);
            self.pause = Some(Box::pin(spargio::time::sleep(Duration::from_millis(ms))));
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        let n = self.rng.size(64 * 1024).min(self.len - self.at);
        let chunk = stream_bytes(self.key, self.at as u64, n);
        self.at += n;
        Poll::Ready(Some(Ok(Frame::data(Bytes::from(chunk)))))
    }

    fn is_end_stream(&self) -> bool {
        self.at >= self.len && self.pause.is_none()
    }
}

async fn our_session(
    handle: &spargio::RuntimeHandle,
    client: Client<Body>,
    addr: SocketAddr,
    s: Session,
    len: usize,
    key: u64,
    rng: &mut Rng,
) -> Result<String, String> {
    let (req, how) = match s {
        Session::Download { how, .. } => (
            http::Request::get(format!("http://{addr}/gen/{len}/{key}"))
                .body(Body::empty())
                .unwrap(),
            how,
        ),
        Session::Upload { how, .. } => (
            http::Request::post(format!("http://{addr}/echo"))
                .body(Body::new(KeyedBody::new(key, len, rng.next_u64())))
                .unwrap(),
            how,
        ),
        _ => unreachable!("raw sessions run on threads"),
    };
    let exchange = async {
        let resp = client
            .request(req)
            .await
            .map_err(|e| format!("request: {e} ({e:?})"))?;
        if resp.status() != http::StatusCode::OK {
            return Err(format!("status {}", resp.status()));
        }
        let mut body = resp.into_body();
        let mut got = Vec::new();
        let mut frames = 0;
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| format!("body after {} bytes: {e}", got.len()))?;
            if let Ok(data) = frame.into_data() {
                got.extend_from_slice(&data);
            }
            frames += 1;
            if matches!(how, Cut::DropAfter(n) if frames >= n) {
                check_prefix(&got, key)?;
                return Ok(format!(
                    "dropped after {frames} frames, {} bytes",
                    got.len()
                ));
            }
        }
        if got.len() != len {
            return Err(format!("{} bytes of {len}", got.len()));
        }
        check_prefix(&got, key)?;
        Ok(format!("{len} bytes whole"))
    };
    match how {
        Cut::Timeout(ms) => {
            match spargio::time::timeout(Duration::from_millis(ms), exchange).await {
                Ok(r) => r,
                Err(_) => Ok(format!("timed out at {ms} ms")),
            }
        }
        _ => {
            let _ = handle;
            exchange.await
        }
    }
}

/// `got` is the start of the keyed stream `key`.
fn check_prefix(got: &[u8], key: u64) -> Result<(), String> {
    let want = stream_bytes(key, 0, got.len());
    match got.iter().zip(&want).position(|(a, b)| a != b) {
        None => Ok(()),
        Some(i) => Err(format!(
            "byte {i} of {} differs: got {:02x?}, want {:02x?}",
            got.len(),
            &got[i..(i + 8).min(got.len())],
            &want[i..(i + 8).min(want.len())]
        )),
    }
}

fn raw_session(
    addr: SocketAddr,
    s: Session,
    len: usize,
    key: u64,
) -> (Session, Result<String, String>) {
    let out = (|| -> Result<String, String> {
        let mut sock = std::net::TcpStream::connect(addr).map_err(|e| e.to_string())?;
        sock.set_read_timeout(Some(HANG))
            .map_err(|e| e.to_string())?;
        match s {
            Session::RawGet { stop } => {
                write!(sock, "GET /gen/{len}/{key} HTTP/1.0\r\nHost: t\r\n\r\n")
                    .map_err(|e| e.to_string())?;
                let mut got = Vec::new();
                match stop {
                    None => {
                        sock.read_to_end(&mut got).map_err(|e| e.to_string())?;
                        let body = split_body(&got)?;
                        if body.len() != len {
                            return Err(format!("{} body bytes of {len}", body.len()));
                        }
                        check_prefix(body, key)?;
                        Ok(format!("{len} bytes whole"))
                    }
                    Some((n, reset)) => {
                        let mut buf = vec![0u8; 16 * 1024];
                        while got.len() < n {
                            match sock.read(&mut buf) {
                                Ok(0) => break,
                                Ok(k) => got.extend_from_slice(&buf[..k]),
                                Err(e) => return Err(e.to_string()),
                            }
                        }
                        if reset {
                            reset_on_close(&sock);
                        }
                        Ok(format!("left after {} bytes (reset: {reset})", got.len()))
                    }
                }
            }
            Session::RawPartialUpload { sent } => {
                write!(
                    sock,
                    "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: {len}\r\n\r\n"
                )
                .map_err(|e| e.to_string())?;
                let _ = sock.write_all(&stream_bytes(key, 0, sent));
                reset_on_close(&sock);
                Ok(format!("reset after {sent} of {len}"))
            }
            _ => unreachable!("client sessions run as tasks"),
        }
    })();
    (s, out)
}

/// The body of a close-delimited HTTP/1.0 response, after a 200 head.
fn split_body(resp: &[u8]) -> Result<&[u8], String> {
    let end = resp
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| format!("no head in {} bytes", resp.len()))?;
    let head = String::from_utf8_lossy(&resp[..end]);
    if !head.starts_with("HTTP/1.0 200") && !head.starts_with("HTTP/1.1 200") {
        return Err(format!("head: {head}"));
    }
    if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        return Err("a chunked answer to HTTP/1.0".into());
    }
    Ok(&resp[end + 4..])
}

/// `SO_LINGER` 0: the close resets the connection.
fn reset_on_close(sock: &std::net::TcpStream) {
    use std::os::fd::AsRawFd;
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: an open socket; the option value is a local of the length
    // passed.
    unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
}

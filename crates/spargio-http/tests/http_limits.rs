//! Bad input and limits: slowloris, oversize headers and bodies, garbage,
//! the connection bound, HTTP/2 rapid reset. After each, the server keeps
//! serving others.

mod common;

use std::future::IntoFuture;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::*;

const GET: &[u8] = b"GET / HTTP/1.1\r\nHost: t\r\n\r\n";

fn status_line(response: &[u8]) -> String {
    String::from_utf8_lossy(response)
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned()
}

/// A fresh client is served (the server survived whatever came before).
fn still_serves(server: &TestServer) {
    let out = raw_exchange(
        server.addr,
        b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    );
    assert!(status_line(&out).starts_with("HTTP/1.1 200"), "{out:?}");
}

#[test]
fn slowloris_is_closed_at_the_header_read_timeout() {
    let _serial = serial();
    let server = TestServer::start(|s| s.header_read_timeout(Some(Duration::from_millis(500))));
    let mut s = TcpStream::connect(server.addr).unwrap();
    s.write_all(b"GET / HTTP/1.1\r\nHost: t\r\n").unwrap();
    // Dribble a header byte every 50 ms for up to HANG: the server must
    // close the connection (read sees EOF or a reset, or a write fails).
    s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    let start = Instant::now();
    let mut closed = false;
    let mut buf = [0u8; 512];
    while start.elapsed() < HANG {
        if s.write_all(b"X").is_err() {
            closed = true;
            break;
        }
        match s.read(&mut buf) {
            Ok(0) | Err(_) if !is_timeout(&s, &mut buf) => {
                closed = true;
                break;
            }
            Ok(n) if n > 0 => {
                // A 408 is fine too; then EOF follows.
                continue;
            }
            _ => {}
        }
    }
    assert!(closed, "the dribbling client was never cut off");
    still_serves(&server);
    server.stop().unwrap();
}

/// Distinguishes "nothing yet" (read timeout) from EOF/reset.
fn is_timeout(s: &TcpStream, buf: &mut [u8]) -> bool {
    s.set_nonblocking(true).unwrap();
    let r = (&*s).read(buf);
    s.set_nonblocking(false).unwrap();
    matches!(r, Err(ref e) if e.kind() == std::io::ErrorKind::WouldBlock)
}

#[test]
fn idle_keep_alive_connection_is_closed_at_the_header_read_timeout() {
    let _serial = serial();
    let server = TestServer::start(|s| s.header_read_timeout(Some(Duration::from_millis(300))));
    let mut s = TcpStream::connect(server.addr).unwrap();
    s.set_read_timeout(Some(HANG)).unwrap();
    s.write_all(GET).unwrap();
    let mut all = Vec::new();
    // The response, then (idle) EOF from the server.
    let _ = s.read_to_end(&mut all);
    assert!(status_line(&all).starts_with("HTTP/1.1 200"), "{all:?}");
    server.stop().unwrap();
}

#[test]
fn oversize_headers_get_431_and_the_server_keeps_serving() {
    let _serial = serial();
    let server = TestServer::start(|s| s);
    let big = "a".repeat(100 * 1024);
    let req = format!("GET / HTTP/1.1\r\nHost: t\r\nX-Big: {big}\r\n\r\n");
    let out = raw_exchange(server.addr, req.as_bytes());
    assert!(
        status_line(&out).starts_with("HTTP/1.1 431"),
        "{:?}",
        status_line(&out)
    );
    still_serves(&server);
    server.stop().unwrap();
}

#[test]
fn garbage_gets_400_and_the_server_keeps_serving() {
    let _serial = serial();
    let server = TestServer::start(|s| s);
    let out = raw_exchange(server.addr, b"\x16\x03\x01garbage\x00\xff\r\n\r\n");
    assert!(
        out.is_empty() || status_line(&out).starts_with("HTTP/1.1 400"),
        "{out:?}"
    );
    let out = raw_exchange(
        server.addr,
        b"GET / HTTP/1.1\r\nHost: t\r\nContent-Length: nope\r\n\r\n",
    );
    assert!(status_line(&out).starts_with("HTTP/1.1 400"), "{out:?}");
    still_serves(&server);
    server.stop().unwrap();
}

#[test]
fn body_limit_layer_gets_413() {
    let _serial = serial();
    let server = TestServer::start_with(
        |st| app(st).layer(tower_http::limit::RequestBodyLimitLayer::new(1024)),
        |s| s,
        Duration::from_secs(30),
    );
    let body = vec![b'x'; 4096];
    let mut req = format!(
        "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    req.extend_from_slice(&body);
    let out = raw_exchange(server.addr, &req);
    assert!(
        status_line(&out).starts_with("HTTP/1.1 413"),
        "{:?}",
        status_line(&out)
    );
    let small =
        b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello";
    let out = raw_exchange(server.addr, small);
    assert!(status_line(&out).starts_with("HTTP/1.1 200"), "{out:?}");
    assert!(out.ends_with(b"hello"));
    server.stop().unwrap();
}

#[test]
fn max_connections_holds_the_next_client_until_one_closes() {
    let _serial = serial();
    let server = TestServer::start(|s| s.max_connections(2));
    let open = |addr| {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(HANG)).unwrap();
        s.write_all(GET).unwrap();
        let mut buf = [0u8; 1024];
        let n = read_some(&mut s, &mut buf).unwrap();
        assert!(status_line(&buf[..n]).starts_with("HTTP/1.1 200"));
        s
    };
    let first = open(server.addr);
    let _second = open(server.addr);
    // The third connects (the kernel's backlog) but is not served while
    // two are open.
    let mut third = TcpStream::connect(server.addr).unwrap();
    third.write_all(GET).unwrap();
    third
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut buf = [0u8; 1024];
    assert!(
        read_some(&mut third, &mut buf).is_err(),
        "served beyond max_connections"
    );
    drop(first);
    third.set_read_timeout(Some(HANG)).unwrap();
    let n = read_some(&mut third, &mut buf).unwrap();
    assert!(status_line(&buf[..n]).starts_with("HTTP/1.1 200"));
    server.stop().unwrap();
}

/// HTTP/2 rapid reset (CVE-2023-44487's shape): a client opens streams
/// and resets each at once, thousands of times. The server must stay up,
/// keep serving other clients, and not grow without bound.
#[test]
fn http2_rapid_reset_leaves_the_server_serving() {
    let _serial = serial();
    let server = TestServer::start(|s| s);
    let addr = server.addr;
    let rss_before = rss_kib();
    let outcome = bounded("rapid reset client", move || rapid_reset(addr, 20_000));
    // Either the server sent GOAWAY (ENHANCE_YOUR_CALM) or it absorbed the
    // resets; both are fine as long as it keeps serving.
    eprintln!("rapid reset client: {outcome}");
    still_serves(&server);
    let out = raw_h2_get(addr);
    assert!(out, "a well-behaved HTTP/2 client was not served");
    let grown = rss_kib().saturating_sub(rss_before);
    assert!(grown < 64 * 1024, "RSS grew {grown} KiB under rapid reset");
    server.stop().unwrap();
}

fn rss_kib() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// HTTP/2 frames by hand (prior knowledge): enough for HEADERS and
/// RST_STREAM without an HTTP/2 library.
mod h2raw {
    pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

    pub fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let len = payload.len() as u32;
        let mut f = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
        f.extend_from_slice(&stream.to_be_bytes());
        f.extend_from_slice(payload);
        f
    }

    /// A GET / request's header block: HPACK indexed fields only
    /// (:method GET = 2, :scheme http = 6, :path / = 4) plus a literal
    /// :authority (index 1) "t".
    pub fn get_headers() -> Vec<u8> {
        vec![0x82, 0x86, 0x84, 0x41, 0x01, b't']
    }

    pub const SETTINGS: u8 = 4;
    pub const HEADERS: u8 = 1;
    pub const RST_STREAM: u8 = 3;
    pub const GOAWAY: u8 = 7;
    pub const END_STREAM: u8 = 1;
    pub const END_HEADERS: u8 = 4;
    pub const ACK: u8 = 1;
}

fn rapid_reset(addr: std::net::SocketAddr, streams: u32) -> String {
    use h2raw::*;
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(HANG)).unwrap();
    let mut out = PREFACE.to_vec();
    out.extend(frame(SETTINGS, 0, 0, &[]));
    if s.write_all(&out).is_err() {
        return "closed at preface".into();
    }
    let mut sent = 0;
    let mut batch = Vec::new();
    for i in 0..streams {
        let id = 1 + 2 * i;
        batch.extend(frame(HEADERS, END_HEADERS | END_STREAM, id, &get_headers()));
        batch.extend(frame(RST_STREAM, 0, id, &8u32.to_be_bytes())); // CANCEL
        if batch.len() > 16 * 1024 {
            if s.write_all(&batch).is_err() {
                return format!("server closed after {sent} streams");
            }
            batch.clear();
        }
        sent += 1;
    }
    let _ = s.write_all(&batch);
    let _ = s.shutdown(std::net::Shutdown::Write);
    // Read until the server closes; note a GOAWAY.
    let mut all = Vec::new();
    let _ = s.read_to_end(&mut all);
    let goaway = frames(&all).any(|(kind, _)| kind == GOAWAY);
    format!(
        "sent {sent} streams, server GOAWAY: {goaway}, {} bytes back",
        all.len()
    )
}

fn frames(mut data: &[u8]) -> impl Iterator<Item = (u8, Vec<u8>)> + '_ {
    std::iter::from_fn(move || {
        if data.len() < 9 {
            return None;
        }
        let len = (data[0] as usize) << 16 | (data[1] as usize) << 8 | data[2] as usize;
        let kind = data[3];
        if data.len() < 9 + len {
            return None;
        }
        let payload = data[9..9 + len].to_vec();
        data = &data[9 + len..];
        Some((kind, payload))
    })
}

/// One GET over HTTP/2 by hand; true when a HEADERS frame comes back on
/// stream 1.
fn raw_h2_get(addr: std::net::SocketAddr) -> bool {
    use h2raw::*;
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut out = PREFACE.to_vec();
    out.extend(frame(SETTINGS, 0, 0, &[]));
    out.extend(frame(HEADERS, END_HEADERS | END_STREAM, 1, &get_headers()));
    s.write_all(&out).unwrap();
    let mut all = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = Instant::now() + HANG;
    while Instant::now() < deadline {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                all.extend_from_slice(&buf[..n]);
                // Acknowledge the server's SETTINGS so it does not wait.
                if frames(&all).any(|(k, _)| k == SETTINGS) {
                    let _ = s.write_all(&frame(SETTINGS, ACK, 0, &[]));
                }
                if frames(&all).any(|(k, _)| k == HEADERS) {
                    return true;
                }
            }
            Err(_) => {}
        }
    }
    false
}

/// An HTTP/2 connection with no stream open for the header-read timeout
/// gets GOAWAY, then is closed.
#[test]
fn idle_http2_connection_gets_goaway_and_is_closed() {
    use h2raw::*;
    let _serial = serial();
    let server = TestServer::start(|s| s.header_read_timeout(Some(Duration::from_millis(300))));
    let mut s = TcpStream::connect(server.addr).unwrap();
    s.set_read_timeout(Some(HANG)).unwrap();
    let mut out = PREFACE.to_vec();
    out.extend(frame(SETTINGS, 0, 0, &[]));
    out.extend(frame(HEADERS, END_HEADERS | END_STREAM, 1, &get_headers()));
    s.write_all(&out).unwrap();
    let mut all = Vec::new();
    let mut buf = [0u8; 4096];
    let mut acked = false;
    loop {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => all.extend_from_slice(&buf[..n]),
        }
        if !acked && frames(&all).any(|(k, _)| k == SETTINGS) {
            acked = true;
            let _ = s.write_all(&frame(SETTINGS, ACK, 0, &[]));
        }
    }
    let kinds: Vec<u8> = frames(&all).map(|(k, _)| k).collect();
    assert!(kinds.contains(&HEADERS), "no response: {kinds:?}");
    assert!(kinds.contains(&GOAWAY), "closed without GOAWAY: {kinds:?}");
    still_serves(&server);
    server.stop().unwrap();
}

/// The header-read timeout does not cut a request being served longer
/// than the timeout, nor the response streaming afterwards.
#[test]
fn a_slow_response_outlives_the_header_read_timeout() {
    let _serial = serial();
    let server = TestServer::start(|s| s.header_read_timeout(Some(Duration::from_millis(200))));
    let out = raw_exchange(
        server.addr,
        b"GET /slow/900 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    );
    assert!(status_line(&out).starts_with("HTTP/1.1 200"), "{out:?}");
    assert!(out.ends_with(b"slept 900"));
    server.stop().unwrap();
}

#[test]
fn the_timeout_layer_answers_408_and_drops_the_slow_handler() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    use axum::routing::get;
    use spargio_http::layer::TimeoutLayer;

    /// Counts a handler future dropped before it finished.
    struct Dropped(Arc<AtomicUsize>);
    impl Drop for Dropped {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    let _serial = serial();
    let dropped = Arc::new(AtomicUsize::new(0));
    let d = dropped.clone();
    let server = TestServer::start_with(
        move |_| {
            axum::Router::new()
                .route("/", get(|| async { "quick" }))
                .route(
                    "/slow",
                    get(move || {
                        let guard = Dropped(d.clone());
                        async move {
                            spargio::time::sleep(Duration::from_secs(30)).await;
                            std::mem::forget(guard);
                            "slow"
                        }
                    }),
                )
                .layer(TimeoutLayer::new(Duration::from_millis(100)))
        },
        |s| s,
        Duration::from_secs(5),
    );
    let slow = raw_exchange(
        server.addr,
        b"GET /slow HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    );
    assert!(status_line(&slow).starts_with("HTTP/1.1 408"), "{slow:?}");
    assert_eq!(
        dropped.load(Ordering::SeqCst),
        1,
        "the handler's future was dropped"
    );
    still_serves(&server);
    server.stop().unwrap();
}

/// The server defers accepting a connection until its client speaks
/// (`TCP_DEFER_ACCEPT`, one second), unless told not to; either way a
/// client that talks is served while one that connected before it stays
/// silent. (Which of the two is accepted first is `net_tcp`'s test.)
#[test]
fn the_listener_defers_accepts_unless_told_not_to() {
    let _serial = serial();
    for defer in [true, false] {
        let rt = spargio::Runtime::builder().shards(2).build().unwrap();
        let h = rt.handle();
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = std_listener.local_addr().unwrap();
        let probe = spargio::net::TcpListener::from_std(&h, std_listener.try_clone().unwrap());
        let listener = spargio::net::TcpListener::from_std(&h, std_listener);
        let serving = spargio_http::serve(listener, app(AppState::default()))
            .defer_accept(defer)
            .into_future();
        h.spawn_stealable(serving).unwrap();
        let _silent = TcpStream::connect(addr).unwrap();
        let out = raw_exchange(
            addr,
            b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
        );
        assert!(status_line(&out).starts_with("HTTP/1.1 200"), "{out:?}");
        let expected = if defer {
            Duration::from_secs(1)
        } else {
            Duration::ZERO
        };
        assert_eq!(probe.defer_accept().unwrap(), expected);
        drop(rt);
    }
}

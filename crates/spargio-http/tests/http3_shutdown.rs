//! HTTP/3 graceful shutdown: `serve_h3`'s GOAWAY, the requests in flight
//! finishing, the close after the client has everything, with requests in
//! flight and under load, against Python aioquic (`tests/py/h3_client.py`)
//! and `h3` + quinn on tokio. Both backends.

mod common;
mod h3_support;

use std::sync::atomic::Ordering::SeqCst;
use std::time::Duration;

use bytes::{Buf, Bytes};
use spargio_test_peers::{require_peer, Peer};

use common::{pattern, LoadCounts, HANG, LOAD_GET_BYTES};

use h3_support::*;

#[test]
fn graceful_shutdown_sends_goaway_and_finishes_requests_in_flight() {
    require_peer!(Peer::PythonAioquic);
    let (cert, key) = common::self_signed();
    let ca = common::temp_file("h3-ca-goaway.pem", cert.as_bytes());
    for backend in backends() {
        let server = H3Server::start(backend, &cert, &key);
        let url = format!("https://127.0.0.1:{}/slow/1500", server.addr.port());
        let client = {
            let ca = ca.clone();
            std::thread::spawn(move || {
                aioquic(&url, &ca, &["--requests", "4", "--concurrency", "4"])
            })
        };
        // The requests are in (they sleep 1.5 s in the handler). Bounded,
        // never a timing assertion: the client may take long to start.
        let start = std::time::Instant::now();
        while server
            .state
            .in_slow
            .load(std::sync::atomic::Ordering::SeqCst)
            < 4
        {
            assert!(
                start.elapsed() < HANG,
                "{backend:?}: the requests never arrived"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        let stopping = std::thread::spawn(move || server.stop());
        let lines = client.join().unwrap();
        stopping.join().unwrap();
        let done = done_line(&lines);
        assert_eq!(done["ok"], 4, "{backend:?}: in-flight requests finished");
        assert_eq!(done["goaway"], 1, "{backend:?}: the client saw GOAWAY");
        // The server's close, unless the client, done first, closed first.
        let code = &done["conns"][0]["peer_close_code"];
        assert!(
            code.is_null() || *code == 0x100,
            "{backend:?}: closed with H3_NO_ERROR, not {code}"
        );
    }
}

/// Graceful shutdown with large responses in flight: 4 POSTs of 1 MiB on
/// one aioquic connection, each held in its handler (body read) until the
/// stop, then echoed. All four were accepted before the GOAWAY, so all
/// four responses must reach the client whole.
#[test]
fn graceful_shutdown_delivers_large_responses_in_flight() {
    require_peer!(Peer::PythonAioquic);
    const N: usize = 4;
    const BYTES: usize = 1 << 20;
    let (cert, key) = common::self_signed();
    let ca = common::temp_file("h3-ca-large.pem", cert.as_bytes());
    let sha = sha256_hex(&py_pattern(BYTES));
    for backend in backends() {
        let server = H3Server::start(backend, &cert, &key);
        let load = server.state.load.clone();
        load.hold.store(true, SeqCst);
        let url = format!("https://127.0.0.1:{}/load/0", server.addr.port());
        let client = {
            let ca = ca.clone();
            std::thread::spawn(move || {
                let (n, bytes) = (N.to_string(), BYTES.to_string());
                aioquic_run(
                    &url,
                    &ca,
                    &[
                        "--method",
                        "POST",
                        "--body-bytes",
                        &bytes,
                        "--requests",
                        &n,
                        "--concurrency",
                        &n,
                        "--timeout",
                        "50",
                    ],
                )
            })
        };
        let start = std::time::Instant::now();
        while load.held.load(SeqCst) < N {
            assert!(
                start.elapsed() < HANG,
                "{backend:?}: the requests never arrived"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        load.stopping.store(true, SeqCst);
        server.stop.cancel();
        load.release.cancel();
        server.stop();
        let run = client.join().unwrap();
        assert_eq!(load.answered.load(SeqCst), N, "{backend:?}");
        let done = done_line(&run.lines);
        assert!(
            run.success && done["ok"] == N,
            "{backend:?}: {} of {N} responses the server sent (all accepted before GOAWAY) \
             reached the client: {done}\n{}",
            done["ok"],
            run.stderr
        );
        for r in &run.lines[..N] {
            assert_eq!(r["len"], BYTES, "{backend:?}: {r}");
            assert_eq!(r["sha256"], sha, "{backend:?}: {r}");
        }
    }
}

/// RFC 9114, 5.2: the stream ID in a server's GOAWAY is the first request
/// it did not (and will not) process; a client may retry requests at or
/// above it elsewhere. So every request served has a lower stream ID.
/// Four GETs on one aioquic connection are held in their handlers until
/// the stop, then answered: GOAWAY must be at least 16.
#[test]
fn goaway_stream_id_is_above_every_request_served() {
    require_peer!(Peer::PythonAioquic);
    const N: usize = 4;
    let (cert, key) = common::self_signed();
    let ca = common::temp_file("h3-ca-goaway-id.pem", cert.as_bytes());
    for backend in backends() {
        let server = H3Server::start(backend, &cert, &key);
        let load = server.state.load.clone();
        load.hold.store(true, SeqCst);
        let url = format!("https://127.0.0.1:{}/load/0", server.addr.port());
        let client = {
            let ca = ca.clone();
            std::thread::spawn(move || {
                let n = N.to_string();
                aioquic_run(&url, &ca, &["--requests", &n, "--concurrency", &n])
            })
        };
        let start = std::time::Instant::now();
        while load.held.load(SeqCst) < N {
            assert!(
                start.elapsed() < HANG,
                "{backend:?}: the requests never arrived"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        server.stop.cancel();
        load.release.cancel();
        server.stop();
        let run = client.join().unwrap();
        let done = done_line(&run.lines);
        let goaway_id = done["conns"][0]["goaway_id"]
            .as_u64()
            .unwrap_or_else(|| panic!("{backend:?}: no GOAWAY: {done}"));
        let served: Vec<u64> = run.lines[..run.lines.len() - 1]
            .iter()
            .map(|r| r["stream"].as_u64().unwrap())
            .collect();
        assert!(!served.is_empty(), "{backend:?}: nothing served: {done}");
        for stream in served {
            assert!(
                stream < goaway_id,
                "{backend:?}: GOAWAY({goaway_id}), yet the request on stream {stream} was served: {done}"
            );
        }
    }
}

/// How long each `/load/{ms}` request sleeps in its handler.
const LOAD_MS: u64 = 5;
/// The body of each POST of the load tests.
const LOAD_POST_BYTES: usize = 64 * 1024;

/// Stops `server` under load: waits (bounded by `HANG`, never a timing
/// assertion) until it has answered at least `answered` `/load`
/// requests, `posts` of them POSTs, from `conns` distinct peer addresses
/// (so every connection is up: the stop refuses new handshakes); then
/// holds the handlers that begin next until one is held, stops the server
/// and lets them go (so requests are surely in flight when the stop
/// happens); returns once the server has drained (bounded by `HANG`).
fn stop_under_load(server: H3Server, answered: usize, posts: usize, conns: usize, what: &str) {
    let load = server.state.load.clone();
    let start = std::time::Instant::now();
    let peers = || load.peers.lock().unwrap().len();
    let wait = |ready: &dyn Fn() -> bool, for_what: &str| {
        while !ready() {
            assert!(
                start.elapsed() < HANG,
                "{what}: {for_what} never happened ({} answered, {} POSTs, {} peers, {} held)",
                load.answered.load(SeqCst),
                load.answered_posts.load(SeqCst),
                peers(),
                load.held.load(SeqCst)
            );
            std::thread::sleep(Duration::from_millis(2));
        }
    };
    wait(
        &|| {
            load.answered.load(SeqCst) >= answered
                && load.answered_posts.load(SeqCst) >= posts
                && peers() >= conns
        },
        "the load",
    );
    load.hold.store(true, SeqCst);
    wait(&|| load.held.load(SeqCst) >= 1, "a held request");
    load.stopping.store(true, SeqCst);
    server.stop.cancel();
    load.release.cancel();
    server.stop();
}

/// What the server's `/load` handlers saw, once it has stopped: every
/// handler that began returned (none was cut off by the drain), some
/// after the stop began (the held ones, at least). Returns how many were
/// answered.
fn check_server_drained(load: &LoadCounts, what: &str) -> usize {
    let began = load.began.load(SeqCst);
    let answered = load.answered.load(SeqCst);
    assert_eq!(
        began, answered,
        "{what}: {began} handlers began, {answered} returned"
    );
    assert!(
        load.answered_after_stop.load(SeqCst) >= 1,
        "{what}: no request was in flight when the stop began"
    );
    answered
}

/// Checks one `h3_client.py` run of the GOAWAY-under-load test: no request
/// failed once sent (only rejected or not started ones did not complete),
/// each response whole (`len` bytes, sha256 `sha`), the load cut short by
/// the stop, and every connection saw GOAWAY or the server's H3_NO_ERROR
/// close (no other close). Returns the completed requests.
fn check_aioquic_load(run: &AioquicRun, what: &str, total: u64, len: usize, sha: &str) -> u64 {
    let done = done_line(&run.lines);
    let failures: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| !l.starts_with("NOT STARTED ") && !l.starts_with("REJECTED "))
        .collect();
    assert_eq!(
        done["errors"], 0,
        "{what}: requests failed after they were sent: {failures:?}\n{done}"
    );
    let results = &run.lines[..run.lines.len() - 1];
    for r in results {
        assert_eq!(r["status"], 200, "{what}: {r}");
        assert_eq!(r["len"], len, "{what}: a response cut short: {r}");
        assert_eq!(r["sha256"], sha, "{what}: a wrong body: {r}");
    }
    let n = |k: &str| {
        done[k]
            .as_u64()
            .unwrap_or_else(|| panic!("{what}: {k} in {done}"))
    };
    let (ok, rejected, not_started) = (n("ok"), n("rejected"), n("not_started"));
    assert_eq!(ok, results.len() as u64, "{what}: {done}");
    assert_eq!(
        ok + rejected + not_started,
        total,
        "{what}: requests neither completed, rejected nor not started: {done}"
    );
    assert!(
        rejected + not_started > 0,
        "{what}: the load ended before the stop: {done}"
    );
    for conn in done["conns"].as_array().unwrap() {
        let code = &conn["peer_close_code"];
        assert!(
            code.is_null() || *code == 0x100,
            "{what}: a connection closed with {code}, not H3_NO_ERROR: {conn}"
        );
        assert!(
            conn["goaway"] == true || *code == 0x100,
            "{what}: a connection saw neither GOAWAY nor H3_NO_ERROR: {conn}"
        );
    }
    ok
}

/// `RcvbufErrors` of /proc/net/snmp: UDP datagrams this host dropped
/// because a socket's receive buffer was full (for failure messages).
fn udp_rcvbuf_errors() -> Option<u64> {
    let snmp = std::fs::read_to_string("/proc/net/snmp").ok()?;
    let mut udp = snmp.lines().filter(|l| l.starts_with("Udp:"));
    let (names, values) = (udp.next()?, udp.next()?);
    let i = names.split_whitespace().position(|n| n == "RcvbufErrors")?;
    values.split_whitespace().nth(i)?.parse().ok()
}

/// Graceful shutdown under load against aioquic: 4 connections with 8
/// GETs in flight each and 2 with 4 POSTs of 64 KiB each, thousands more
/// queued; the server stops once it has answered some. Every request the
/// server began reaches its client whole; the others are refused
/// unprocessed (rejected, or not sent after GOAWAY), none fails; every
/// connection gets GOAWAY or a graceful close; the server drains.
#[test]
fn graceful_shutdown_under_load_aioquic_client() {
    require_peer!(Peer::PythonAioquic);
    let (cert, key) = common::self_signed();
    let ca = common::temp_file("h3-ca-load.pem", cert.as_bytes());
    let get_sha = sha256_hex(&pattern(LOAD_GET_BYTES));
    let post_sha = sha256_hex(&py_pattern(LOAD_POST_BYTES));
    const GET_CONNS: u64 = 4;
    const GETS: u64 = 1000;
    const POST_CONNS: u64 = 2;
    const POSTS: u64 = 300;
    for backend in backends() {
        let server = H3Server::start(backend, &cert, &key);
        let load = server.state.load.clone();
        let url = format!("https://127.0.0.1:{}/load/{LOAD_MS}", server.addr.port());
        let client = |args: Vec<String>| {
            let (url, ca) = (url.clone(), ca.clone());
            std::thread::spawn(move || {
                let args: Vec<&str> = args.iter().map(|a| a.as_str()).collect();
                aioquic_run(&url, &ca, &args)
            })
        };
        let gets = client(
            format!("--connections {GET_CONNS} --concurrency 8 --requests {GETS} --timeout 50")
                .split(' ')
                .map(String::from)
                .collect(),
        );
        let posts = client(
            format!(
                "--method POST --body-bytes {LOAD_POST_BYTES} --connections {POST_CONNS} \
                 --concurrency 4 --requests {POSTS} --timeout 50"
            )
            .split(' ')
            .map(String::from)
            .collect(),
        );
        let what = format!("{backend:?}");
        let drops_before = udp_rcvbuf_errors();
        stop_under_load(server, 40, 4, (GET_CONNS + POST_CONNS) as usize, &what);
        let gets = gets.join().unwrap();
        let posts = posts.join().unwrap();
        // For a failure's message.
        let what = format!(
            "{what} (server: {} began, {} answered, {} POSTs; UDP receive-buffer drops on this host meanwhile: {:?}; GETs: {}; POSTs: {})",
            load.began.load(SeqCst),
            load.answered.load(SeqCst),
            load.answered_posts.load(SeqCst),
            udp_rcvbuf_errors().zip(drops_before).map(|(a, b)| a - b),
            gets.lines.last().map_or(String::new(), |l| l.to_string()),
            posts.lines.last().map_or(String::new(), |l| l.to_string()),
        );
        let ok_gets = check_aioquic_load(
            &gets,
            &format!("{what} GETs"),
            GET_CONNS * GETS,
            LOAD_GET_BYTES,
            &get_sha,
        );
        let ok_posts = check_aioquic_load(
            &posts,
            &format!("{what} POSTs"),
            POST_CONNS * POSTS,
            LOAD_POST_BYTES,
            &post_sha,
        );
        let answered = check_server_drained(&load, &what);
        // Every request the server processed reached its client whole, so
        // none counted as rejected was processed.
        assert_eq!(
            ok_gets + ok_posts,
            answered as u64,
            "{what}: the server answered {answered} requests, the clients got {ok_gets} + {ok_posts}"
        );
    }
}

/// `h3` + `h3-quinn` on a tokio runtime: GET and POST against our server.
/// How one request of the h3-quinn load ended.
enum LoadOutcome {
    /// Its response came whole and right.
    Completed,
    /// Never sent: `send_request` refused it after a GOAWAY (or the
    /// connection had closed gracefully).
    NotSent { goaway: bool },
    /// Sent, and ended before any response with H3_REQUEST_REJECTED or
    /// the connection's graceful close: refused unprocessed, if the server
    /// never began it (checked by the test).
    Unanswered(String),
    /// Anything else.
    Failed(String),
}

/// Whether `e` ends a request the server may have refused unprocessed:
/// H3_REQUEST_REJECTED (RFC 9114, 4.1.1), or the connection closed with
/// H3_NO_ERROR (a stream above the GOAWAY's ID).
fn refused_unprocessed(e: &h3::error::StreamError) -> bool {
    use h3::error::{Code, StreamError};
    match e {
        StreamError::RemoteTerminate { code, .. } => *code == Code::H3_REQUEST_REJECTED,
        // A connection error (h3's tuple variants cannot be matched
        // outside the crate).
        e => e.is_h3_no_error(),
    }
}

/// Whether `e` is h3's `StreamError::RemoteClosing`: the server sent
/// GOAWAY (a unit variant h3 does not let other crates match).
fn is_remote_closing(e: &h3::error::StreamError) -> bool {
    format!("{e:?}") == "RemoteClosing"
}

/// One `/load` request (a GET, or a POST of `LOAD_POST_BYTES`) tagged
/// `x-load-id: id`, its response checked.
async fn h3_load_request(
    send: &mut h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>,
    id: &str,
    post: bool,
) -> LoadOutcome {
    use h3::error::StreamError;
    let method = if post {
        http::Method::POST
    } else {
        http::Method::GET
    };
    let req = http::Request::builder()
        .method(method)
        .uri(format!("https://localhost/load/{LOAD_MS}"))
        .header("x-load-id", id)
        .body(())
        .unwrap();
    let mut stream = match send.send_request(req).await {
        Ok(stream) => stream,
        Err(e) if is_remote_closing(&e) => return LoadOutcome::NotSent { goaway: true },
        Err(e) if e.is_h3_no_error() => return LoadOutcome::NotSent { goaway: false },
        Err(e) => return LoadOutcome::Failed(format!("{id}: send_request: {e:?}")),
    };
    let stream_id = stream.id();
    let unanswered = |step: &str, e: StreamError| {
        let msg = format!("{id} (stream {stream_id:?}): {step}: {e:?}");
        if refused_unprocessed(&e) {
            LoadOutcome::Unanswered(msg)
        } else {
            LoadOutcome::Failed(msg)
        }
    };
    let body = if post {
        pattern(LOAD_POST_BYTES)
    } else {
        pattern(LOAD_GET_BYTES)
    };
    if post {
        if let Err(e) = stream.send_data(Bytes::from(body.clone())).await {
            return unanswered("send_data", e);
        }
    }
    if let Err(e) = stream.finish().await {
        return unanswered("finish", e);
    }
    let resp = match stream.recv_response().await {
        Ok(resp) => resp,
        Err(e) => return unanswered("recv_response", e),
    };
    if resp.status() != 200 {
        return LoadOutcome::Failed(format!("{id}: status {}", resp.status()));
    }
    let mut got = Vec::new();
    loop {
        match stream.recv_data().await {
            Ok(Some(mut chunk)) => got.extend_from_slice(&chunk.copy_to_bytes(chunk.remaining())),
            Ok(None) => break,
            Err(e) => {
                return LoadOutcome::Failed(format!(
                    "{id} (stream {stream_id:?}): the response broke off after {} bytes: {e:?}",
                    got.len()
                ))
            }
        }
    }
    if got != body {
        return LoadOutcome::Failed(format!(
            "{id}: a wrong body ({} bytes, {} expected)",
            got.len(),
            body.len()
        ));
    }
    LoadOutcome::Completed
}

/// What one connection of the h3-quinn load saw.
#[derive(Default)]
struct LoadConn {
    completed: Vec<String>,
    unanswered: Vec<String>,
    failed: Vec<String>,
    /// Loops whose next request `send_request` refused after GOAWAY.
    goaway: usize,
    /// Loops whose next request found the connection closed gracefully.
    closed: usize,
    /// The connection's end, as its driver saw it.
    end: String,
    /// It ended with H3_NO_ERROR (closed by either side).
    end_no_error: bool,
    /// The server closed it with H3_NO_ERROR.
    server_closed_gracefully: bool,
}

/// Graceful shutdown under load against `h3` + `h3-quinn` on tokio: 4
/// connections with 8 request loops each (GETs and 64 KiB POSTs in
/// turn); the server stops once it has answered some. Every request the
/// server began completes whole at the client, the others were refused
/// unprocessed (not sent after GOAWAY, H3_REQUEST_REJECTED, or left
/// unanswered by the graceful close) and no other failure; every
/// connection gets GOAWAY or the server's H3_NO_ERROR close; the server
/// drains.
#[test]
fn graceful_shutdown_under_load_h3_quinn_client() {
    const CONNS: usize = 4;
    const LOOPS: usize = 8;
    let (cert, key) = common::self_signed();
    for backend in backends() {
        let what = format!("{backend:?}");
        let server = H3Server::start(backend, &cert, &key);
        let load = server.state.load.clone();
        let addr = server.addr;
        let cert = cert.clone();
        let client = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let ep = quinn_client(&cert);
                // Every connection is up before the load starts (the stop
                // refuses new handshakes).
                let mut up = Vec::new();
                for _ in 0..CONNS {
                    let conn = ep.connect(addr, "localhost").unwrap().await.unwrap();
                    let (mut driver, send) = h3::client::new(h3_quinn::Connection::new(conn))
                        .await
                        .unwrap();
                    let drive = tokio::spawn(async move {
                        std::future::poll_fn(|cx| driver.poll_close(cx)).await
                    });
                    up.push((drive, send));
                }
                let mut conns = Vec::new();
                for (c, (drive, send)) in up.into_iter().enumerate() {
                    let loops: Vec<_> = (0..LOOPS)
                        .map(|l| {
                            let mut send = send.clone();
                            tokio::spawn(async move {
                                let mut out = Vec::new();
                                for i in 0..100_000 {
                                    let id = format!("{c}.{l}.{i}");
                                    let outcome =
                                        h3_load_request(&mut send, &id, (l + i) % 2 == 1).await;
                                    let last = !matches!(outcome, LoadOutcome::Completed);
                                    out.push((id, outcome));
                                    if last {
                                        break;
                                    }
                                }
                                out
                            })
                        })
                        .collect();
                    drop(send);
                    conns.push((drive, loops));
                }
                let mut seen = Vec::new();
                for (drive, loops) in conns {
                    let mut conn = LoadConn::default();
                    for l in loops {
                        for (id, outcome) in l.await.unwrap() {
                            match outcome {
                                LoadOutcome::Completed => conn.completed.push(id),
                                LoadOutcome::NotSent { goaway: true } => conn.goaway += 1,
                                LoadOutcome::NotSent { goaway: false } => conn.closed += 1,
                                LoadOutcome::Unanswered(msg) => conn.unanswered.push(msg),
                                LoadOutcome::Failed(msg) => conn.failed.push(msg),
                            }
                        }
                    }
                    let end = drive.await.unwrap();
                    // `Remote(ApplicationClose(H3_NO_ERROR))`: h3's tuple
                    // variants cannot be matched outside the crate.
                    conn.server_closed_gracefully =
                        format!("{end:?}") == "Remote(ApplicationClose(H3_NO_ERROR))";
                    conn.end_no_error = end.is_h3_no_error();
                    conn.end = format!("{end:?}");
                    seen.push(conn);
                }
                seen
            })
        });
        // One peer address: quinn's connections share its socket (and are
        // all up before the load starts).
        stop_under_load(server, 40, 4, 1, &what);
        let conns = common::bounded("h3-quinn client", move || client.join().unwrap());
        let answered = check_server_drained(&load, &what);
        let began = load.ids.lock().unwrap().clone();
        let mut completed = std::collections::HashSet::new();
        for (c, conn) in conns.iter().enumerate() {
            assert!(
                conn.failed.is_empty(),
                "{what}: conn {c}: requests failed: {:?}",
                conn.failed
            );
            // Left unanswered: allowed only if the server never began it.
            for msg in &conn.unanswered {
                let id = msg.split(' ').next().unwrap();
                assert!(
                    !began.contains(id),
                    "{what}: conn {c}: the server began {id}, which failed: {msg}"
                );
            }
            assert!(
                conn.end_no_error,
                "{what}: conn {c} ended with {}",
                conn.end
            );
            assert!(
                conn.goaway > 0 || conn.server_closed_gracefully,
                "{what}: conn {c} saw neither GOAWAY nor the server's H3_NO_ERROR close: {}",
                conn.end
            );
            assert!(
                conn.goaway + conn.closed + conn.unanswered.len() == LOOPS,
                "{what}: conn {c}: every loop ends refused ({} after GOAWAY, {} closed, {} unanswered)",
                conn.goaway,
                conn.closed,
                conn.unanswered.len()
            );
            completed.extend(conn.completed.iter().cloned());
        }
        // Exactly the requests the server began completed at the client.
        assert_eq!(completed.len(), answered, "{what}");
        assert!(
            completed == began,
            "{what}: completed and begun requests differ"
        );
    }
}

//! An HTTP/3 load generator: quinn + `h3` + `h3-quinn` on a tokio
//! runtime, independent of both servers `h3_server` runs.
//! `scripts/h3_bench.sh` runs it.
//!
//! ```text
//! h3_load --url https://127.0.0.1:PORT/json --connections C --concurrency M
//!         --duration SECS [--threads T] --insecure
//! ```
//!
//! Defaults: 1 connection, 1 request in flight, 10 s, 1 thread.
//!
//! Opens C connections (each from its own quinn endpoint, so its own UDP
//! socket and port, as C separate clients would), then keeps M GET
//! requests in flight on each: a request is sent, its stream finished,
//! the response head and the whole body read, then the next one starts.
//! After a 1 s warm-up, the requests completed in the next SECS seconds
//! are counted. The tokio runtime has T worker threads (default 1).
//!
//! `--insecure` is required: the server's certificate is not verified
//! (any chain is accepted; the handshake signature still is checked), a
//! loopback benchmark against a self-signed server has no trust store.
//!
//! Prints one JSON line:
//!
//! - `requests`, `seconds`, `rps`, `bytes` (body bytes), `p99_us` (latency
//!   from sending the request to the end of the body): the requests
//!   completed in the measured window;
//! - `errors`: requests that failed (any stream or connection error, a
//!   status other than 200, a body shorter or longer than its
//!   `content-length`) during the whole run, warm-up included;
//! - `all_requests`: every request completed, warm-up and the requests in
//!   flight at the end of the window included (what the server's CPU over
//!   the loader's whole run paid for);
//! - `cpu_busy`: this process's CPU time (user + system, all threads) in
//!   the window over the window's length (1.0 = one core busy).
//!
//! Exits 1, without the JSON line, when a connection cannot be made; 0
//! otherwise (the caller checks `errors`).

use std::net::{SocketAddr, ToSocketAddrs};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

const WARM_UP: Duration = Duration::from_secs(1);

// ===== TLS: accept any certificate =====

/// Accepts any certificate chain; checks the handshake signatures with
/// the provider's algorithms.
#[derive(Debug)]
struct AcceptAnyCert(Arc<CryptoProvider>);

impl ServerCertVerifier for AcceptAnyCert {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// rustls with ring, TLS 1.3, ALPN `h3`, any certificate; quinn's default
/// transport.
fn client_config() -> Result<quinn::ClientConfig, BoxError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut tls = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AcceptAnyCert(provider)))
        .with_no_client_auth();
    tls.alpn_protocols = vec![b"h3".to_vec()];
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(tls)?;
    Ok(quinn::ClientConfig::new(Arc::new(crypto)))
}

// ===== connections and requests =====

struct Conn {
    endpoint: quinn::Endpoint,
    conn: quinn::Connection,
    send: h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>,
    driver: tokio::task::JoinHandle<h3::error::ConnectionError>,
}

async fn connect(
    addr: SocketAddr,
    server_name: String,
    config: quinn::ClientConfig,
) -> Result<Conn, BoxError> {
    let bind: SocketAddr = if addr.is_ipv4() {
        "0.0.0.0:0".parse()?
    } else {
        "[::]:0".parse()?
    };
    let mut endpoint = quinn::Endpoint::client(bind)?;
    endpoint.set_default_client_config(config);
    let conn = endpoint.connect(addr, &server_name)?.await?;
    let (mut driver, send) = h3::client::new(h3_quinn::Connection::new(conn.clone())).await?;
    let driver =
        tokio::spawn(async move { std::future::poll_fn(|cx| driver.poll_close(cx)).await });
    Ok(Conn {
        endpoint,
        conn,
        send,
        driver,
    })
}

/// One GET: sends it, finishes the stream, reads the head and the whole
/// body; the body's length.
async fn request(
    send: &mut h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>,
    uri: &http::Uri,
) -> Result<u64, BoxError> {
    let req = http::Request::get(uri.clone()).body(())?;
    let mut stream = send.send_request(req).await?;
    stream.finish().await?;
    let resp = stream.recv_response().await?;
    if resp.status() != http::StatusCode::OK {
        return Err(format!("status {}", resp.status()).into());
    }
    let expected: Option<u64> = resp
        .headers()
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse().ok());
    let mut n = 0u64;
    while let Some(chunk) = stream.recv_data().await? {
        n += chunk.remaining() as u64;
    }
    if expected.is_some_and(|len| len != n) {
        return Err(format!("body of {n} bytes, content-length {expected:?}").into());
    }
    Ok(n)
}

#[derive(Default)]
struct Stats {
    requests: u64,
    all_requests: u64,
    bytes: u64,
    errors: u64,
    first_error: Option<String>,
    latencies_us: Vec<u32>,
}

impl Stats {
    fn merge(&mut self, other: Stats) {
        self.requests += other.requests;
        self.all_requests += other.all_requests;
        self.bytes += other.bytes;
        self.errors += other.errors;
        if self.first_error.is_none() {
            self.first_error = other.first_error;
        }
        self.latencies_us.extend(other.latencies_us);
    }
}

/// Requests one after the other on one connection until `until`; counts
/// those that complete in `[from, until)`.
async fn request_loop(
    mut send: h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>,
    conn: quinn::Connection,
    uri: http::Uri,
    from: Instant,
    until: Instant,
) -> Stats {
    let mut stats = Stats::default();
    loop {
        let begun = Instant::now();
        if begun >= until {
            return stats;
        }
        match request(&mut send, &uri).await {
            Ok(n) => {
                stats.all_requests += 1;
                let done = Instant::now();
                if done >= from && done < until {
                    stats.requests += 1;
                    stats.bytes += n;
                    let us = done.duration_since(begun).as_micros();
                    stats.latencies_us.push(us.min(u32::MAX as u128) as u32);
                }
            }
            Err(e) => {
                stats.errors += 1;
                stats.first_error.get_or_insert_with(|| e.to_string());
                if conn.close_reason().is_some() {
                    return stats;
                }
            }
        }
    }
}

/// User + system CPU time of this process (all threads).
fn process_cpu() -> Duration {
    // SAFETY: rusage is plain data (all zeroes is a valid value), and
    // getrusage only writes the struct it is given.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

struct Args {
    uri: http::Uri,
    addr: SocketAddr,
    server_name: String,
    connections: usize,
    concurrency: usize,
    duration: Duration,
    threads: usize,
}

async fn run(args: &Args) -> Result<(Stats, f64), BoxError> {
    let config = client_config()?;
    let connecting: Vec<_> = (0..args.connections)
        .map(|_| tokio::spawn(connect(args.addr, args.server_name.clone(), config.clone())))
        .collect();
    let mut conns = Vec::with_capacity(connecting.len());
    for c in connecting {
        conns.push(c.await??);
    }

    let from = Instant::now() + WARM_UP;
    let until = from + args.duration;
    let cpu = tokio::spawn(async move {
        tokio::time::sleep_until(from.into()).await;
        let start = process_cpu();
        tokio::time::sleep_until(until.into()).await;
        process_cpu() - start
    });
    let loops: Vec<_> = conns
        .iter()
        .flat_map(|c| {
            (0..args.concurrency).map(|_| {
                let (send, conn, uri) = (c.send.clone(), c.conn.clone(), args.uri.clone());
                tokio::spawn(request_loop(send, conn, uri, from, until))
            })
        })
        .collect();
    let mut stats = Stats::default();
    for l in loops {
        stats.merge(l.await?);
    }
    let cpu_busy = cpu.await?.as_secs_f64() / args.duration.as_secs_f64();
    if std::env::var_os("H3_LOAD_PACKETS").is_some() {
        // The loader's view of the wire, per completed request: datagrams
        // each way and the frames in them (ACK-only packets show here).
        let (mut rx, mut tx, mut rx_acks, mut tx_acks, mut rx_stream) = (0, 0, 0, 0, 0);
        for c in &conns {
            let st = c.conn.stats();
            rx += st.udp_rx.datagrams;
            tx += st.udp_tx.datagrams;
            rx_acks += st.frame_rx.acks;
            tx_acks += st.frame_tx.acks;
            rx_stream += st.frame_rx.stream;
        }
        let n = stats.all_requests.max(1) as f64;
        eprintln!(
            "per request: rx {:.3} datagrams ({:.3} ACK frames, {:.3} STREAM frames), tx {:.3} datagrams ({:.3} ACK frames)",
            rx as f64 / n,
            rx_acks as f64 / n,
            rx_stream as f64 / n,
            tx as f64 / n,
            tx_acks as f64 / n
        );
    }

    // Close, all connections at once: with its request senders gone, h3
    // closes a connection with H3_NO_ERROR; then each endpoint gets a
    // moment to send the close.
    let closing: Vec<_> = conns
        .into_iter()
        .map(|c| {
            tokio::spawn(async move {
                let Conn {
                    endpoint,
                    conn,
                    send,
                    driver,
                } = c;
                drop(send);
                let _ = tokio::time::timeout(Duration::from_millis(500), driver).await;
                conn.close(0u32.into(), b"done");
                let _ =
                    tokio::time::timeout(Duration::from_millis(500), endpoint.wait_idle()).await;
            })
        })
        .collect();
    for c in closing {
        c.await?;
    }
    Ok((stats, cpu_busy))
}

fn parse_args() -> Result<Args, String> {
    let mut url = None;
    let (mut connections, mut concurrency, mut threads) = (1, 1, 1);
    let mut duration = 10.0f64;
    let mut insecure = false;
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        if flag == "--insecure" {
            insecure = true;
            continue;
        }
        let value = args.next().ok_or(format!("{flag} needs a value"))?;
        let count = |v: &str| -> Result<usize, String> {
            v.parse::<usize>()
                .ok()
                .filter(|&n| n > 0)
                .ok_or(format!("{flag}: not a positive number: {v}"))
        };
        match flag.as_str() {
            "--url" => url = Some(value),
            "--connections" => connections = count(&value)?,
            "--concurrency" => concurrency = count(&value)?,
            "--threads" => threads = count(&value)?,
            "--duration" => {
                duration = value
                    .parse::<f64>()
                    .ok()
                    .filter(|d| *d > 0.0)
                    .ok_or(format!("--duration: not a positive number: {value}"))?
            }
            _ => return Err(format!("unknown option {flag}")),
        }
    }
    if !insecure {
        return Err("--insecure is required (h3_load verifies no certificate)".into());
    }
    let url = url.ok_or("--url is required")?;
    let uri: http::Uri = url.parse().map_err(|e| format!("--url {url}: {e}"))?;
    if uri.scheme_str() != Some("https") {
        return Err(format!("--url {url}: not https://"));
    }
    let host = uri.host().ok_or(format!("--url {url}: no host"))?;
    let host = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let port = uri.port_u16().unwrap_or(443);
    let addr = (host.as_str(), port)
        .to_socket_addrs()
        .map_err(|e| format!("--url {url}: {e}"))?
        .next()
        .ok_or(format!("--url {url}: no address"))?;
    Ok(Args {
        uri,
        addr,
        server_name: host,
        connections,
        concurrency,
        duration: Duration::from_secs_f64(duration),
        threads,
    })
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        Err(e) => {
            eprintln!("h3_load: {e}");
            eprintln!(
                "usage: h3_load --url https://HOST:PORT/PATH [--connections C] [--concurrency M] \
                 [--duration SECS] [--threads T] --insecure"
            );
            return ExitCode::from(2);
        }
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.threads)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("h3_load: tokio runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let (mut stats, cpu_busy) = match rt.block_on(run(&args)) {
        Ok(done) => done,
        Err(e) => {
            eprintln!("h3_load: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let Some(e) = &stats.first_error {
        eprintln!("h3_load: {} errors, the first: {e}", stats.errors);
    }
    stats.latencies_us.sort_unstable();
    let p99 = match stats.latencies_us.len() {
        0 => 0,
        n => stats.latencies_us[(n * 99 / 100).min(n - 1)],
    };
    let seconds = args.duration.as_secs_f64();
    // The fields in a fixed order (serde_json's map would sort them).
    println!(
        "{{\"requests\": {}, \"seconds\": {}, \"rps\": {:.1}, \"bytes\": {}, \"errors\": {}, \
         \"p99_us\": {}, \"all_requests\": {}, \"cpu_busy\": {:.3}}}",
        stats.requests,
        seconds,
        stats.requests as f64 / seconds,
        stats.bytes,
        stats.errors,
        p99,
        stats.all_requests,
        cpu_busy,
    );
    ExitCode::SUCCESS
}

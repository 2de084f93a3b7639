//! Randomized, seed-reproducible torture of spargio-tls's streams on real
//! sockets: spargio's byte-stream torture (`spargio/tests/torture.rs`)
//! one layer up, on plaintext.
//!
//! # Design
//!
//! Each run draws a `u64` seed. From it (`spargio/tests/torture/rng.rs`) a
//! script of operations is drawn one at a time (`tls_torture/script.rs`)
//! and run on one TLS connection over TCP loopback (small socket buffers in
//! half the runs): our side is a spargio-tls stream, client or server at
//! random, TLS 1.3 or 1.2, in a stealable task of a 2-shard runtime; the
//! peer is rustls on a blocking std socket, on threads of its own
//! (`tls_torture/peer.rs`). The peer records every plaintext byte it
//! receives, sends a known plaintext stream on demand (byte `i` is a
//! function of the seed and `i`), updates its keys, stops reading for a
//! while (so our socket buffer fills), and at the end sends
//! `close_notify` and shuts down, or resets.
//!
//! Operations: writes through every path the crate has
//! (`tls_torture/paths.rs`: `futures_io` `write`, `write_all`,
//! `write_vectored`; spargio's owned-buffer `write`, `write_all`; tokio's
//! `write`, `write_all` with the `tokio-io` feature; the write half of
//! `split`) of 1 byte to 300 KiB, skewed small; reads likewise (`read`,
//! `read_exact` of each trait, the read half); flushes.
//! Each runs plainly, in a `timeout` of a random short duration, in a race
//! it loses, polled a few times then dropped, or with the stream moved into
//! a stealable task or one on the other shard (`spargio/tests/torture/ops.rs`).
//! The run ends with a graceful close (ours before or after reading the
//! peer's stream to its `close_notify`), with our stream dropped (flushed
//! first or not), or with the peer's reset.
//!
//! # Invariants
//!
//! * Every byte a write reported accepted arrives at the peer exactly
//!   once, in order (`spargio/tests/torture/model.rs`). A write dropped
//!   before it reported may deliver a prefix of its bytes. Dropping the
//!   stream unclosed sends no `close_notify` (crate docs, "Caveats") and
//!   loses only what was accepted after the last completed flush: the
//!   stream "buffers writes like a `BufWriter`" (the same caveat), and
//!   nothing documents a loss beyond it (what Compat holds is sent:
//!   `spargio::io::Compat`'s drop). The peer must then see the end of the
//!   stream without `close_notify`, or a reset.
//! * Every byte the peer sent is read exactly once, in order, except what a
//!   dropped `read_exact` had placed (not cancel safe); every other read is
//!   a `poll_read`, which takes nothing when it returns `Pending`.
//! * Every operation ends within 10 s; a graceful end reads every byte up to
//!   `close_notify` on both sides; the runtime drops, and the process's fds
//!   come back to their count before the run.
//!
//! A failure prints the seed, the op trace, the first mismatching byte
//! position, and the replay command.
//!
//! # Running
//!
//! * `cargo test -p spargio-tls --test tls_torture` (add `--features
//!   tokio-io` for tokio's paths): 16 seeds or about 12 s, from a base
//!   that varies per run and is printed.
//! * `TORTURE_SEED=n`: exactly that seed. `TORTURE_BASE=n`: that base.
//! * `TORTURE_SECONDS=n`: random seeds until n seconds pass.
//! * `scripts/torture.sh SECONDS`: on io_uring and epoll, each with and
//!   without injected faults.
//!
//! A seed fixes the script; the outcomes depend on timing too, so a replay
//! reproduces the script exactly and a timing-dependent failure usually.

#[path = "tls_torture/driver.rs"]
mod driver;
#[allow(dead_code)] // the helpers the core torture uses too
#[path = "../../../spargio/tests/torture/fds.rs"]
mod fds;
#[path = "../../../spargio/tests/torture/model.rs"]
mod model;
// Only the wrappers (`Wrap`, `wrap`, `spawned`); its `Sock` is for TCP
// and Unix streams.
#[allow(dead_code)]
#[path = "../../../spargio/tests/torture/ops.rs"]
mod ops;
#[path = "tls_torture/paths.rs"]
mod paths;
#[path = "tls_torture/peer.rs"]
mod peer;
#[path = "../../../spargio/tests/torture/rng.rs"]
mod rng;
#[path = "tls_torture/script.rs"]
mod script;

use std::sync::{Arc, OnceLock};

use spargio_tls::rustls::{self, pki_types};
use spargio_tls::{ClientTlsStream, ServerTlsStream};

use driver::{bounded, HANG};
use fds::Fds;
use model::{Inbound, Outbound, Trace};
use paths::Side;
use peer::Peer;
use rng::Rng;
use script::{Ctx, End};

/// The replay command's cargo part.
const REPLAY: &str = if cfg!(feature = "tokio-io") {
    "cargo test -p spargio-tls --features tokio-io --test tls_torture"
} else {
    "cargo test -p spargio-tls --test tls_torture"
};

/// A self-signed certificate for `localhost`, for every run.
pub struct Pki {
    pub cert_pem: String,
    pub key_pem: String,
    cert_der: Vec<u8>,
    key_der: Vec<u8>,
}

fn pki() -> &'static Pki {
    static PKI: OnceLock<Pki> = OnceLock::new();
    PKI.get_or_init(|| {
        let c = rcgen::generate_simple_self_signed(vec!["localhost".into()]).expect("rcgen");
        Pki {
            cert_pem: c.cert.pem(),
            key_pem: c.signing_key.serialize_pem(),
            cert_der: c.cert.der().to_vec(),
            key_der: c.signing_key.serialize_der(),
        }
    })
}

#[test]
fn tls_torture() {
    driver::main("tls_torture", REPLAY, run);
}

/// The peer's rustls connection: the other role than ours.
fn peer_conn(ours_client: bool, tls12: bool) -> Result<rustls::Connection, String> {
    let pki = pki();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let versions: &[&rustls::SupportedProtocolVersion] = if tls12 {
        &[&rustls::version::TLS12]
    } else {
        &[&rustls::version::TLS13]
    };
    let cert = pki_types::CertificateDer::from(pki.cert_der.clone());
    if ours_client {
        let key = pki_types::PrivatePkcs8KeyDer::from(pki.key_der.clone());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_protocol_versions(versions)
            .map_err(|e| e.to_string())?
            .with_no_client_auth()
            .with_single_cert(vec![cert], key.into())
            .map_err(|e| e.to_string())?;
        let conn = rustls::ServerConnection::new(Arc::new(config)).map_err(|e| e.to_string())?;
        Ok(conn.into())
    } else {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(cert).map_err(|e| e.to_string())?;
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(versions)
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots)
            .with_no_client_auth();
        let name = pki_types::ServerName::try_from("localhost").expect("a name");
        let conn =
            rustls::ClientConnection::new(Arc::new(config), name).map_err(|e| e.to_string())?;
        Ok(conn.into())
    }
}

/// One run: the op count, or what failed.
fn run(seed: u64, trace: Trace) -> Result<u64, String> {
    let fds = Fds::now();
    let mut rng = Rng::new(seed);
    let ours_client = rng.pct(50);
    let tls12 = rng.pct(30);
    trace.push(format!(
        "run seed {seed}: ours the TLS {}, TLS {}",
        if ours_client { "client" } else { "server" },
        if tls12 { "1.2" } else { "1.3" }
    ));
    let (ours, theirs) = driver::tcp_pair(&mut rng, &trace)?;
    let rt = spargio::RuntimeBuilder::new()
        .shards(2)
        .build()
        .map_err(|e| format!("runtime: {e}"))?;
    let h = rt.handle();
    let tcp = spargio::net::TcpStream::from_std(&h, ours).map_err(|e| e.to_string())?;
    let peer = Peer::start(theirs, peer_conn(ours_client, tls12)?, rng::peer_key(seed));
    let (res, peer, out, ops) = if ours_client {
        drive::<ClientTlsStream>(&h, tcp, peer, rng, trace.clone(), seed)
    } else {
        drive::<ServerTlsStream>(&h, tcp, peer, rng, trace.clone(), seed)
    };
    let end = res?;
    let report = peer.finish(HANG);
    trace.push(format!(
        "peer: received {} bytes, reader ended with {}, writer error {:?}",
        report.received.len(),
        report.end,
        report.write_error
    ));
    match end {
        End::Graceful => {
            if report.end != "eof after close_notify" {
                return Err(format!(
                    "peer: expected close_notify and end of stream, the reader ended with {}",
                    report.end
                ));
            }
            if let Some(e) = report.write_error {
                return Err(format!("peer: a send failed: {e}"));
            }
            out.check(&report.received, true)?;
        }
        End::Dropped { certain_to } => match report.end.as_str() {
            "eof after close_notify" => {
                return Err("peer: close_notify from a stream dropped unclosed".into())
            }
            // A clean end of the stream; unless the writer met a reset
            // first (our socket closed with bytes unread: the kernel drops
            // what it had not sent), after which the reader sees the end
            // of the stream too.
            "eof without close_notify" if report.write_error.is_none() => {
                out.check_to(&report.received, certain_to)?
            }
            _ => out.check(&report.received, false)?,
        },
        End::Reset => out.check(&report.received, false)?,
    }
    drop(h);
    drop(rt);
    fds.back()?;
    Ok(ops)
}

/// Runs the handshake and the script in a stealable task; the stream is
/// dropped in it. The end, the peer, what was written, the op count.
fn drive<S: Side>(
    h: &spargio::RuntimeHandle,
    tcp: spargio::net::TcpStream,
    peer: Peer,
    rng: Rng,
    trace: Trace,
    seed: u64,
) -> (Result<End, String>, Peer, Outbound, u64) {
    let mut ctx = Ctx::<S> {
        h: h.clone(),
        s: None,
        peer,
        inb: Inbound::new(rng::peer_key(seed)),
        out: Outbound::new(Rng::new(seed ^ 0x4f55_5442).next_u64()),
        unflushed: None,
        rng,
        trace,
        ops: 0,
    };
    let join = h
        .spawn_stealable(async move {
            let what = format!("handshake (ours the {})", S::ROLE);
            let res = match bounded(&what, S::handshake(tcp, pki())).await {
                Ok(Ok(s)) => {
                    ctx.s = Some(s);
                    ctx.run().await
                }
                Ok(Err(e)) => Err(format!("{what} failed: {e}")),
                Err(e) => Err(e),
            };
            ctx.s = None;
            (res, ctx.peer, ctx.out, ctx.ops)
        })
        .expect("spawn the script");
    spargio::block_on(join).expect("the script panicked")
}

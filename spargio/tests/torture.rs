//! Randomized, seed-reproducible torture of spargio's byte-stream APIs on
//! real sockets.
//!
//! # Design
//!
//! Each run draws a `u64` seed. From it (`torture/rng.rs`, splitmix64) a
//! script of operations is drawn one at a time (`torture/script.rs`) and
//! run on one connection pair, TCP loopback or a Unix stream pair: the
//! spargio side in a stealable task of a 2-shard runtime, against a peer
//! that is a plain blocking std socket on threads of its own
//! (`torture/peer.rs`). The peer records every byte it receives, sends a
//! known byte sequence on demand (byte `i` is a function of the seed and
//! `i`, so a loss, duplicate or reorder shows at its position), stops
//! reading for a while (so spargio's socket buffer fills: Compat's
//! write-behind), and at the end shuts its side down or resets.
//!
//! Operations: writes (`send_owned`, `write_all`, `write_all_owned`, the
//! io trait's `write_all`, `Compat` `write`/`write_all`/`flush`/`close`,
//! framed `write_frame`, a split write half, `BufReader`'s pass-through)
//! of 1 byte to 300 KiB, skewed small; reads (`recv_owned`, the io
//! trait's `read`, `read_exact`, `read_exact_owned`, `Compat`
//! `read`/`read_exact`, `recv_multishot_segments` with `next_segment` then
//! `stop` or a drop, `BufReader` `fill_buf`/`read_exact`, a split read
//! half). Each runs plainly, in a `timeout` of a random short duration, in
//! a race it loses, polled a few times then dropped, as a stealable task,
//! or on the other shard (`torture/ops.rs`). Adaptors come and go:
//! `Compat` dropped or unwrapped, with or without a flush first. A
//! `Compat` read is also polled once, dropped while its receive waits,
//! and followed by a smaller one, as a codec polls again with less
//! room: the adaptor then holds more than it hands out (a planted bug
//! that skipped one such held byte went unseen for 50 s of runs before
//! this op, and is caught within seconds with it).
//!
//! # Invariants (`torture/model.rs`)
//!
//! * Every byte a write reported accepted arrives at the peer exactly
//!   once, in order. A write dropped before it reported may deliver a
//!   prefix of its bytes. Dropping or unwrapping a `Compat` drops nothing
//!   written: its send in flight finishes, and later writes wait for it
//!   (`Compat::into_inner`'s rustdoc).
//! * Every byte the peer sent is read exactly once, in order. The
//!   exceptions are the documented ones: a dropped `read_exact`
//!   (net/mod.rs) and a dropped `BufReader` refill. After one of those the
//!   next read may start up to that many bytes later, never earlier.
//!   Every other receive is cancel safe (net/mod.rs): a dropped
//!   `RecvSegments`, and a `Compat` dropped or unwrapped with bytes it
//!   received, hand them to the next receive.
//! * Every operation ends within 10 s; a graceful end reads every byte to
//!   end of stream on both sides; the runtime drops, and the process's
//!   fds come back to their count before the run; tasks, operations in
//!   flight and shared-pool buffers held come back to zero.
//!
//! A failure prints the seed, the transport, the op trace, the first
//! mismatching byte position, and the replay command.
//!
//! # Running
//!
//! * `cargo test -p spargio --test torture`: a few seeds (≲ 20 s), drawn
//!   from a base that varies per run and is printed.
//! * `TORTURE_SEED=n`: exactly that seed. `TORTURE_BASE=n`: that base.
//! * `TORTURE_SECONDS=n`: random seeds until n seconds pass.
//! * `TORTURE_SKIP=segments,compat-unflushed`: leave those parts out of
//!   the generator (to look past a known failure; `torture/script.rs`).
//! * `scripts/torture.sh SECONDS`: io_uring, then epoll, then epoll with
//!   `SPARGIO_EPOLL_FAULTS`.
//!
//! A seed fixes the script (what is drawn never depends on timing); the
//! outcomes depend on timing too, so a replay reproduces the script
//! exactly and a timing-dependent failure usually, not always.

#[allow(dead_code)] // `Fds` serves the TLS and WebSocket tortures
#[path = "torture/fds.rs"]
mod fds;
#[path = "torture/model.rs"]
mod model;
#[path = "torture/ops.rs"]
mod ops;
#[path = "torture/peer.rs"]
mod peer;
#[path = "torture/rng.rs"]
mod rng;
#[path = "torture/script.rs"]
mod script;

use std::sync::{mpsc, Mutex};
use std::time::{Duration, Instant};

use fds::{fd_kinds, open_fds, process_globals_made};
use model::{Inbound, Outbound, Trace};
use ops::Sock;
use peer::{Peer, PeerSock};
use rng::Rng;
use script::{Ctx, End, Skip, HANG};

/// Runs count `/proc/self/fd`: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// A whole run must end within this (the watchdog behind the per-op bound).
const RUN_BOUND: Duration = Duration::from_secs(120);

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok()?.trim().parse().ok()
}

/// The seed of run `i` from `base`.
fn seed_of(base: u64, i: u64) -> u64 {
    Rng::new(base.wrapping_add(i)).next_u64()
}

fn replay(seed: u64) -> String {
    let mut env = String::new();
    for var in [
        "SPARGIO_BACKEND",
        "SPARGIO_EPOLL_FAULTS",
        "SPARGIO_URING_FAULTS",
        "TORTURE_SKIP",
    ] {
        if let Ok(v) = std::env::var(var) {
            env += &format!("{var}={v} ");
        }
    }
    format!("TORTURE_SEED={seed} {env}cargo test -p spargio --test torture")
}

#[test]
fn torture() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(seed) = env_u64("TORTURE_SEED") {
        let ops = run_or_panic(seed, 0);
        eprintln!("torture: seed {seed} passed ({ops} ops)");
        return;
    }
    let base = env_u64("TORTURE_BASE").unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    });
    let seconds = env_u64("TORTURE_SECONDS");
    let backend = std::env::var("SPARGIO_BACKEND").unwrap_or_else(|_| "default".into());
    eprintln!(
        "torture: backend {backend}, base seed {base} (TORTURE_BASE={base} replays the sequence)"
    );
    let start = Instant::now();
    let (mut runs, mut ops) = (0u64, 0u64);
    loop {
        let seed = seed_of(base, runs);
        ops += run_or_panic(seed, runs);
        runs += 1;
        let done = match seconds {
            Some(s) => start.elapsed() >= Duration::from_secs(s),
            None => runs >= 16 || start.elapsed() >= Duration::from_secs(12),
        };
        if done {
            break;
        }
    }
    eprintln!(
        "torture: {runs} runs, {ops} ops in {:.1?}; seeds {}..={} (from TORTURE_BASE={base}), all passed",
        start.elapsed(),
        seed_of(base, 0),
        seed_of(base, runs - 1)
    );
}

/// Runs `seed`; panics with the report if it fails. The op count.
fn run_or_panic(seed: u64, index: u64) -> u64 {
    let trace = Trace::default();
    let (tx, rx) = mpsc::channel();
    let run_trace = trace.clone();
    std::thread::Builder::new()
        .name(format!("torture-{seed}"))
        .spawn(move || {
            let _ = tx.send(run(seed, run_trace));
        })
        .expect("spawn a run");
    let failure = match rx.recv_timeout(RUN_BOUND) {
        Ok(Ok(ops)) => return ops,
        Ok(Err(msg)) => msg,
        Err(_) => format!("hang: the run did not end within {RUN_BOUND:?} (watchdog)"),
    };
    panic!(
        "\n==== TORTURE FAILURE (run {index}) seed {seed} ====\n{failure}\n---- op trace ({} lines) ----\n{}---- replay ----\n{}\n",
        trace.len(),
        trace.dump(150),
        replay(seed)
    );
}

/// One run: the op count, or what failed.
fn run(seed: u64, trace: Trace) -> Result<u64, String> {
    process_globals_made();
    let base_fds = open_fds();
    let base_kinds = fd_kinds();
    let mut rng = Rng::new(seed);
    let tcp = rng.pct(60);
    let small = rng.pct(50);
    let rt = spargio::RuntimeBuilder::new()
        .shards(2)
        .build()
        .map_err(|e| format!("runtime: {e}"))?;
    let h = rt.handle();
    let key = rng::peer_key(seed);
    trace.push(format!(
        "run seed {seed}: {}, {} socket buffers",
        if tcp {
            "TCP loopback"
        } else {
            "Unix stream pair"
        },
        if small { "small" } else { "default" }
    ));
    let (res, peer, out, ops) = if tcp {
        let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
        let a = std::net::TcpStream::connect(l.local_addr().unwrap()).map_err(|e| e.to_string())?;
        let (b, _) = l.accept().map_err(|e| e.to_string())?;
        let _ = a.set_nodelay(true);
        if small {
            shrink(
                socket2::SockRef::from(&a),
                socket2::SockRef::from(&b),
                &mut rng,
            );
        }
        let s = spargio::net::TcpStream::from_std(&h, a).map_err(|e| e.to_string())?;
        drive(
            &h,
            s,
            Peer::start(PeerSock::Tcp(b), key),
            rng,
            trace.clone(),
            true,
            seed,
        )
    } else {
        let (a, b) = std::os::unix::net::UnixStream::pair().map_err(|e| e.to_string())?;
        if small {
            shrink(
                socket2::SockRef::from(&a),
                socket2::SockRef::from(&b),
                &mut rng,
            );
        }
        let s = spargio::net::UnixStream::from_std(&h, a).map_err(|e| e.to_string())?;
        drive(
            &h,
            s,
            Peer::start(PeerSock::Unix(b), key),
            rng,
            trace.clone(),
            false,
            seed,
        )
    };
    let end = match res {
        Ok(end) => end,
        Err(e) => {
            drop(peer);
            return Err(e);
        }
    };
    let report = peer.finish(HANG);
    trace.push(format!(
        "peer: received {} bytes, reader ended with {}, writer error {:?}",
        report.received.len(),
        report.end,
        report.write_error
    ));
    if end == End::Graceful {
        if report.end != "eof" {
            return Err(format!(
                "peer: expected end of stream, reader ended with {}",
                report.end
            ));
        }
        if let Some(e) = report.write_error {
            return Err(format!("peer: a send failed: {e}"));
        }
    }
    out.check(&report.received, end == End::Graceful)?;
    settled(&h)?;
    drop(h);
    drop(rt);
    let deadline = Instant::now() + HANG;
    while open_fds() > base_fds {
        if Instant::now() > deadline {
            let now = fd_kinds();
            let new: Vec<&String> = now.iter().filter(|k| !base_kinds.contains(k)).collect();
            return Err(format!(
                "fds: {} open after the run, {base_fds} before; new: {new:?}",
                open_fds()
            ));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Ok(ops)
}

/// Tasks, operations and pool buffers back to baseline once the script
/// and its peer are done: nothing a dropped operation or adaptor left
/// behind (a lingering send's timer, an abandoned receive, a pool buffer
/// a segment held) outlives what it served.
fn settled(h: &spargio::RuntimeHandle) -> Result<(), String> {
    let deadline = Instant::now() + HANG;
    loop {
        let stats = h.stats_snapshot();
        let busy: Vec<String> = stats
            .shards
            .iter()
            .enumerate()
            .filter(|(_, s)| s.live_tasks + s.pending_native_ops + s.recv_pool_held > 0)
            .map(|(i, s)| {
                format!(
                    "shard {i}: {} tasks, {} ops {:?}, {} pool buffers held",
                    s.live_tasks, s.pending_native_ops, s.ops_in_flight, s.recv_pool_held
                )
            })
            .collect();
        if busy.is_empty() {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!(
                "not back to baseline after the run: {}",
                busy.join("; ")
            ));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Small socket buffers: writes of 64 KiB and more then find them full.
fn shrink(a: socket2::SockRef<'_>, b: socket2::SockRef<'_>, rng: &mut Rng) {
    let _ = a.set_send_buffer_size(4096 << rng.below(4));
    let _ = b.set_recv_buffer_size(4096 << rng.below(4));
}

/// Runs the script in a stealable task; its stream is dropped with it.
fn drive<S: Sock>(
    h: &spargio::RuntimeHandle,
    s: S,
    peer: Peer,
    rng: Rng,
    trace: Trace,
    tcp: bool,
    seed: u64,
) -> (Result<End, String>, Peer, Outbound, u64) {
    let ctx = Ctx {
        h: h.clone(),
        s,
        peer,
        inb: Inbound::new(rng::peer_key(seed)),
        out: Outbound::new(Rng::new(seed ^ 0x4f55_5442).next_u64()),
        rng,
        trace,
        ops: 0,
        tcp,
        skip: Skip::from_env(),
    };
    let join = h
        .spawn_stealable(async move {
            let mut ctx = ctx;
            let res = ctx.run().await;
            (res, ctx.peer, ctx.out, ctx.ops)
        })
        .expect("spawn the script");
    spargio::block_on(join).expect("the script panicked")
}

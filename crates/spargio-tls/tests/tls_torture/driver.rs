//! The part of a torture binary that is not its script: the seed loop and
//! its environment variables, the watchdog, the failure report, the fd
//! count, the loopback pair. Shared by `tls_torture.rs` and spargio-ws's
//! `ws_torture.rs` (which includes this file by path), with the same
//! variables and report as spargio's byte-stream torture
//! (`spargio/tests/torture.rs`).

use std::future::Future;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::model::Trace;
use super::rng::Rng;

/// Every operation must end within this (a hang is a failure).
pub const HANG: Duration = Duration::from_secs(10);

/// A whole run must end within this (the watchdog behind the per-op bound).
const RUN_BOUND: Duration = Duration::from_secs(120);

/// One run of a torture: the op count, or what failed. The trace is the
/// report's op trace (the watchdog prints it if the run hangs).
pub type RunFn = fn(u64, Trace) -> Result<u64, String>;

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok()?.trim().parse().ok()
}

/// The seed of run `i` from `base`.
fn seed_of(base: u64, i: u64) -> u64 {
    Rng::new(base.wrapping_add(i)).next_u64()
}

/// Runs `run` as the environment asks: `TORTURE_SEED=n` that seed alone,
/// `TORTURE_SECONDS=n` random seeds for n seconds, else 16 runs or until
/// 9 s have passed (about 12 s with the run under way then); seeds drawn
/// from `TORTURE_BASE` or the clock.
/// `replay` is the cargo command that runs this binary.
pub fn main(name: &str, replay: &str, run: RunFn) {
    if let Some(seed) = env_u64("TORTURE_SEED") {
        let ops = run_or_panic(replay, run, seed, 0);
        eprintln!("{name}: seed {seed} passed ({ops} ops)");
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
        "{name}: backend {backend}, base seed {base} (TORTURE_BASE={base} replays the sequence)"
    );
    let start = Instant::now();
    let (mut runs, mut ops) = (0u64, 0u64);
    loop {
        ops += run_or_panic(replay, run, seed_of(base, runs), runs);
        runs += 1;
        let done = match seconds {
            Some(s) => start.elapsed() >= Duration::from_secs(s),
            None => runs >= 16 || start.elapsed() >= Duration::from_secs(9),
        };
        if done {
            break;
        }
    }
    eprintln!(
        "{name}: {runs} runs, {ops} ops in {:.1?}; seeds {}..={} (from TORTURE_BASE={base}), all passed",
        start.elapsed(),
        seed_of(base, 0),
        seed_of(base, runs - 1)
    );
}

fn replay_line(replay: &str, seed: u64) -> String {
    let mut env = String::new();
    for var in [
        "SPARGIO_BACKEND",
        "SPARGIO_EPOLL_FAULTS",
        "SPARGIO_URING_FAULTS",
    ] {
        if let Ok(v) = std::env::var(var) {
            env += &format!("{var}={v} ");
        }
    }
    format!("TORTURE_SEED={seed} {env}{replay}")
}

/// Runs `seed` on a thread of its own; panics with the report if it fails
/// or outlives [`RUN_BOUND`]. The op count.
fn run_or_panic(replay: &str, run: RunFn, seed: u64, index: u64) -> u64 {
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
        replay_line(replay, seed)
    );
}

/// Awaits `f`, failing the run if it does not end within [`HANG`].
pub async fn bounded<F: Future>(what: &str, f: F) -> Result<F::Output, String> {
    spargio::time::timeout(HANG, f)
        .await
        .map_err(|_| format!("hang: {what} did not end within {HANG:?}"))
}

/// A connected loopback pair: ours (`TCP_NODELAY`), the peer's. Half the
/// runs shrink the buffers from ours to the peer, so large writes find the
/// socket full: our send buffer to 4 to 32 KiB (as the byte-stream torture
/// does), the peer's receive buffer to 32 or 64 KiB. Not below: there
/// loopback TCP trickles (about 50 KB/s, the kernel's: a plain blocking
/// sender and receiver see the same), and a 300 KiB message, or a few
/// writes left unflushed, outlasts the 10 s an op may take.
pub fn tcp_pair(
    rng: &mut Rng,
    trace: &Trace,
) -> Result<(std::net::TcpStream, std::net::TcpStream), String> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    let ours = std::net::TcpStream::connect(l.local_addr().unwrap()).map_err(|e| e.to_string())?;
    let (theirs, _) = l.accept().map_err(|e| e.to_string())?;
    let _ = ours.set_nodelay(true);
    if rng.pct(50) {
        let snd = 4096 << rng.below(4);
        let rcv = 32768 << rng.below(2);
        let _ = socket2::SockRef::from(&ours).set_send_buffer_size(snd);
        let _ = socket2::SockRef::from(&theirs).set_recv_buffer_size(rcv);
        trace.push(format!(
            "TCP loopback, small socket buffers (send {snd}, peer receive {rcv})"
        ));
    } else {
        trace.push("TCP loopback, default socket buffers".into());
    }
    Ok((ours, theirs))
}

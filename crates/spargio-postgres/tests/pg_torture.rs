//! A seed-driven torture of the pool against the real PostgreSQL: the
//! wire protocol over spargio's sockets (`io::Compat` under
//! tokio-postgres's codec), with queries pipelined, abandoned mid-flight,
//! and answers from one byte to a mebibyte, on both backends.
//!
//! Each run draws from its seed a pool (1–2 shared connections and 1–2
//! exclusive ones per shard) and, for 8 tasks on both shards, 20 ops each:
//!
//! * **echo**: a shared client sends a text of 1 B to 1 MiB (made from the
//!   seed) and must get exactly it back;
//! * **pipelined**: 2–16 echoes issued together on one client;
//! * **abandoned**: an echo raced against a timer of 0–300 µs and dropped
//!   if the timer wins, then an echo on the same client, which must be
//!   exact (an abandoned query must not shift the answers after it);
//! * **transaction**: an exclusive connection, a transaction with two
//!   echoes, committed, rolled back, or dropped mid-way; the next holder
//!   of any exclusive connection must not find itself inside it;
//! * **terminate** (rare): PostgreSQL ends one shared connection's
//!   backend. Queries may fail after that (with an error), never answer
//!   wrongly, and the pool reopens the connection.
//!
//! Any wrong answer, any error in a run without a terminate, a hang (the
//! run is bounded) or an fd left open after the pool is dropped fails the
//! run, which prints its seed. `TORTURE_SEED=n` replays one run,
//! `TORTURE_BASE=n` a sequence, `TORTURE_SECONDS=n` runs seeds for n
//! seconds per backend (default: 4 runs or 3 s; at most 40, so that a
//! last run's own 15 s bound ends inside the harness's 60 s),
//! `SPARGIO_BACKEND` picks one backend. A run that does not end in 15 s
//! fails as a hang, with its seed.

#[path = "../../spargio-tokio-ecosystem/tests/common/mod.rs"]
mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{assert_fds_back_to, on_each_backend, open_fds, tag};
use futures_util::future::join_all;
use spargio_postgres::tokio_postgres::{Client, GenericClient};
use spargio_postgres::{Config, Pool};
use spargio_test_peers::{postgres, require_peer, Peer};

const TASKS: usize = 8;
const OPS: usize = 20;
const MAX_TEXT: usize = 1 << 20;
/// One run's bound.
const RUN_BOUND: Duration = Duration::from_secs(15);

/// splitmix64.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// 1..=max, skewed small (a random power-of-two scale, then uniform).
    fn size(&mut self, max: usize) -> usize {
        let bits = 64 - (max as u64).leading_zeros() as u64;
        let scale = 1u64 << self.below(bits + 1);
        (1 + self.below(scale) as usize).min(max)
    }

    /// A text of `len` letters drawn from this generator.
    fn text(&mut self, len: usize) -> String {
        let mut s = String::with_capacity(len);
        let mut word = 0u64;
        for i in 0..len {
            if i % 8 == 0 {
                word = self.next();
            }
            s.push(char::from(b'a' + ((word >> ((i % 8) * 8)) as u8) % 26));
        }
        s
    }
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok()?.parse().ok()
}

/// Whether a task of the run terminated a backend: from then on, errors
/// are lawful (any task's connection may have been the one).
type Terminated = Arc<AtomicBool>;

/// An echo through `db`: `Ok` when the text came back exactly.
async fn echo(db: &impl GenericClient, text: &str) -> Result<(), String> {
    let row = db
        .query_one("SELECT $1::text", &[&text])
        .await
        .map_err(|e| format!("echo of {} B: {e}", text.len()))?;
    let back: &str = row.get(0);
    if back != text {
        return Err(format!(
            "WRONG ANSWER: sent {} B, got {} B back (first difference at byte {})",
            text.len(),
            back.len(),
            back.bytes()
                .zip(text.bytes())
                .position(|(a, b)| a != b)
                .unwrap_or(back.len().min(text.len()))
        ));
    }
    Ok(())
}

/// Whether `db` is inside a transaction block (`SAVEPOINT` is refused
/// outside one).
async fn in_transaction(db: &Client) -> Result<bool, String> {
    let inside = db.batch_execute("SAVEPOINT probe").await.is_ok();
    if inside {
        db.batch_execute("RELEASE SAVEPOINT probe")
            .await
            .map_err(|e| format!("release: {e}"))?;
    }
    Ok(inside)
}

/// One op drawn from `rng`. Wrong answers are errors that start with
/// `WRONG`.
async fn op(pool: &Pool, rng: &mut Rng, terminated: &Terminated) -> Result<(), String> {
    match rng.below(100) {
        0..=34 => {
            let db = pool.client().await.map_err(|e| e.to_string())?;
            let len = rng.size(MAX_TEXT);
            let text = rng.text(len);
            echo(&*db, &text).await
        }
        35..=54 => {
            let db = pool.client().await.map_err(|e| e.to_string())?;
            let n = 2 + rng.below(15) as usize;
            let texts: Vec<String> = (0..n)
                .map(|_| {
                    let len = rng.size(MAX_TEXT / 16);
                    rng.text(len)
                })
                .collect();
            join_all(texts.iter().map(|t| echo(&*db, t)))
                .await
                .into_iter()
                .collect()
        }
        55..=79 => {
            let db = pool.client().await.map_err(|e| e.to_string())?;
            let len = rng.size(MAX_TEXT);
            let first = rng.text(len);
            let limit = Duration::from_micros(rng.below(300));
            // The timer may win: the echo is then dropped mid-flight.
            if let Ok(answered) = spargio::time::timeout(limit, echo(&*db, &first)).await {
                answered?;
            }
            let len = rng.size(4096);
            echo(&*db, &rng.text(len)).await
        }
        80..=97 => {
            let mut conn = pool.get().await.map_err(|e| e.to_string())?;
            if in_transaction(&conn).await? {
                return Err(
                    "WRONG STATE: an exclusive connection was handed out inside \
                                another holder's transaction"
                        .into(),
                );
            }
            let tx = conn.transaction().await.map_err(|e| e.to_string())?;
            let len = rng.size(MAX_TEXT / 4);
            echo(&tx, &rng.text(len)).await?;
            match rng.below(3) {
                0 => tx.commit().await.map_err(|e| e.to_string()),
                1 => tx.rollback().await.map_err(|e| e.to_string()),
                _ => {
                    // Dropped mid-way, a query in flight or not.
                    let len = rng.size(MAX_TEXT / 4);
                    let text = rng.text(len);
                    let limit = Duration::from_micros(rng.below(300));
                    let _ = spargio::time::timeout(limit, echo(&tx, &text)).await;
                    drop(tx);
                    Ok(())
                }
            }
        }
        _ => {
            let db = pool.client().await.map_err(|e| e.to_string())?;
            let pid: i32 = db
                .query_one("SELECT pg_backend_pid()", &[])
                .await
                .map_err(|e| e.to_string())?
                .get(0);
            terminated.store(true, Ordering::SeqCst);
            let admin = pool.get().await.map_err(|e| e.to_string())?;
            admin
                .query_one("SELECT pg_terminate_backend($1)", &[&pid])
                .await
                .map(drop)
                .map_err(|e| e.to_string())
        }
    }
}

/// One task's ops: any wrong answer, or an error before any task of the
/// run terminated a backend, ends it with that error.
async fn task(pool: Pool, mut rng: Rng, terminated: Terminated) -> Result<(), String> {
    for _ in 0..OPS {
        let done = op(&pool, &mut rng, &terminated).await;
        match done {
            Ok(()) => {}
            Err(e) if e.starts_with("WRONG") => return Err(e),
            Err(e) if terminated.load(Ordering::SeqCst) => {
                // Lawful after a terminate: the error says so; go on.
                let _ = e;
            }
            Err(e) => return Err(format!("an error with no terminate in the run: {e}")),
        }
    }
    Ok(())
}

/// One run on `h`; `Err` with what went wrong.
async fn run(h: spargio::RuntimeHandle, seed: u64) -> Result<u64, String> {
    let mut rng = Rng(seed);
    let config: Config = postgres().url().parse().expect("the URL parses");
    let fds = open_fds();
    let pool = Pool::builder(config)
        .per_shard(1 + rng.below(2) as usize)
        .exclusive_per_shard(1 + rng.below(2) as usize)
        .wait_timeout(Some(Duration::from_secs(20)))
        .open(&h)
        .await
        .map_err(|e| format!("open: {e}"))?;
    let mut tasks = Vec::new();
    let terminated = Terminated::default();
    for i in 0..TASKS {
        let (pool, task_rng, terminated) = (pool.clone(), Rng(rng.next()), terminated.clone());
        let shard = i % h.shard_count();
        tasks.push(
            h.spawn_local_on(shard, move |_| task(pool, task_rng, terminated))
                .map_err(|e| e.to_string())?,
        );
    }
    let mut ops = 0;
    for t in tasks {
        t.await.map_err(|e| format!("a task panicked: {e}"))??;
        ops += OPS as u64;
    }
    drop(pool);
    // The pool's connections close on their shards, moments after the drop.
    let deadline = Instant::now() + Duration::from_secs(5);
    while open_fds() > fds && Instant::now() < deadline {
        spargio::time::sleep(Duration::from_millis(5)).await;
    }
    if open_fds() > fds {
        return Err(format!(
            "fds: {} open after the run, {fds} before",
            open_fds()
        ));
    }
    Ok(ops)
}

#[test]
fn pg_torture() {
    require_peer!(Peer::Postgres);
    let fds_before = open_fds();
    on_each_backend(false, |h, backend| async move {
        let who = tag(backend);
        let name = if who == "epoll" { "epoll" } else { "io_uring" };
        // `scripts/torture.sh` runs one backend per leg.
        if std::env::var("SPARGIO_BACKEND").is_ok_and(|want| want != name) {
            return;
        }
        let (base, one) = match env_u64("TORTURE_SEED") {
            Some(seed) => (seed, true),
            None => (
                env_u64("TORTURE_BASE").unwrap_or_else(|| {
                    std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(1, |d| d.as_nanos() as u64)
                }),
                false,
            ),
        };
        eprintln!("pg_torture {who}: base seed {base} (TORTURE_BASE={base} replays the sequence)");
        let seconds = env_u64("TORTURE_SECONDS").map(|s| s.min(40));
        let start = Instant::now();
        let (mut runs, mut ops) = (0u64, 0u64);
        loop {
            let seed = if one { base } else { Rng(base ^ runs).next() };
            // A run takes well under a second: one that does not end is a
            // hang, reported with its seed (the harness's own bound would
            // not name it).
            let ran = spargio::time::timeout(RUN_BOUND, run(h.clone(), seed))
                .await
                .unwrap_or_else(|_| Err(format!("hang: no end within {RUN_BOUND:?}")));
            match ran {
                Ok(n) => ops += n,
                Err(e) => panic!(
                    "pg_torture {who}: seed {seed} failed: {e}\n  replay: TORTURE_SEED={seed} \
                     SPARGIO_BACKEND={name} cargo test -p spargio-postgres --test pg_torture"
                ),
            }
            runs += 1;
            let done = one
                || match seconds {
                    Some(s) => start.elapsed() >= Duration::from_secs(s),
                    None => runs >= 4 || start.elapsed() >= Duration::from_secs(3),
                };
            if done {
                break;
            }
        }
        eprintln!(
            "pg_torture {who}: {runs} runs, {ops} ops in {:.1?}, all passed",
            start.elapsed()
        );
    });
    assert_fds_back_to(fds_before);
}

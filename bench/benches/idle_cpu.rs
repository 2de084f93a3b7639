//! Idle CPU cost: not a criterion benchmark.
//!
//! For spargio (`Runtime::new()`, one shard per CPU) and, for comparison,
//! tokio's multi-thread runtime (default worker count): build the runtime,
//! run one trivial task to completion, then measure the process's CPU time
//! (user + sys, `getrusage(RUSAGE_SELF)`) over 2 s of idle.
//!
//! Prints a markdown table, writes `<target>/criterion/idle_cpu/result.json`
//! for the report, and exits non-zero when spargio burns 1 % or more of a
//! core per shard while idle.
//!
//! Under `cargo bench` (which passes `--bench`) the idle window is 2 s;
//! under `cargo test --benches` it is 200 ms and nothing is written.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use serde_json::json;
use spargio_bench::target_dir;

/// spargio's per-shard idle budget, in percent of one core.
const THRESHOLD_PCT: f64 = 1.0;

/// User + system CPU time of the whole process.
fn process_cpu_time() -> Duration {
    // SAFETY: `usage` is plain data, fully written by getrusage on success.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        assert_eq!(libc::getrusage(libc::RUSAGE_SELF, &mut usage), 0);
        usage
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1_000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

struct Row {
    runtime: &'static str,
    shards: usize,
    wall_secs: f64,
    cpu_secs: f64,
}

impl Row {
    /// CPU time as a percentage of one core per shard over the window.
    fn pct_per_shard(&self) -> f64 {
        self.cpu_secs / self.wall_secs / self.shards as f64 * 100.0
    }
}

/// CPU burnt by the process while the calling thread sleeps for `idle`.
fn measure_idle(idle: Duration) -> (f64, f64) {
    let (cpu0, t0) = (process_cpu_time(), Instant::now());
    std::thread::sleep(idle);
    let (cpu1, wall) = (process_cpu_time(), t0.elapsed());
    ((cpu1 - cpu0).as_secs_f64(), wall.as_secs_f64())
}

fn spargio_row(idle: Duration) -> Row {
    let rt = spargio::Runtime::new().expect("spargio runtime");
    let handle = rt.handle();
    let task = handle.spawn_stealable(async { 1 + 1 }).expect("spawn");
    assert_eq!(spargio::block_on(task).expect("task"), 2);
    let (cpu_secs, wall_secs) = measure_idle(idle);
    let shards = handle.shard_count();
    drop(rt);
    Row {
        runtime: "spargio",
        shards,
        wall_secs,
        cpu_secs,
    }
}

fn tokio_row(idle: Duration) -> Row {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .build()
        .expect("tokio runtime");
    let out = rt.block_on(async { tokio::spawn(async { 1 + 1 }).await.expect("task") });
    assert_eq!(out, 2);
    let (cpu_secs, wall_secs) = measure_idle(idle);
    let shards = rt.metrics().num_workers();
    drop(rt);
    Row {
        runtime: "tokio_mt",
        shards,
        wall_secs,
        cpu_secs,
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--list") {
        println!("idle_cpu: bench");
        return ExitCode::SUCCESS;
    }
    let full = args.iter().any(|a| a == "--bench");
    let idle = if full {
        Duration::from_secs(2)
    } else {
        Duration::from_millis(200)
    };

    // One after the other: getrusage covers the whole process.
    let rows = [spargio_row(idle), tokio_row(idle)];

    println!();
    println!(
        "### idle_cpu ({:.1} s idle after one trivial task)",
        idle.as_secs_f64()
    );
    println!();
    println!(
        "| runtime | shards | CPU s over {:.1} s | % of one core per shard |",
        idle.as_secs_f64()
    );
    println!("|---|---:|---:|---:|");
    for r in &rows {
        println!(
            "| {} | {} | {:.4} | {:.3} % |",
            r.runtime,
            r.shards,
            r.cpu_secs,
            r.pct_per_shard()
        );
    }
    println!();

    let spargio_pct = rows[0].pct_per_shard();
    let pass = spargio_pct < THRESHOLD_PCT;

    if full {
        let result = json!({
            "idle_secs": idle.as_secs_f64(),
            "threshold_pct_per_shard": THRESHOLD_PCT,
            "pass": pass,
            "rows": rows.iter().map(|r| json!({
                "runtime": r.runtime,
                "shards": r.shards,
                "wall_secs": r.wall_secs,
                "cpu_secs": r.cpu_secs,
                "pct_per_shard": r.pct_per_shard(),
            })).collect::<Vec<_>>(),
        });
        let dir = target_dir().join("criterion").join("idle_cpu");
        let path = dir.join("result.json");
        let written = std::fs::create_dir_all(&dir).and_then(|()| {
            std::fs::write(&path, serde_json::to_string_pretty(&result).expect("json"))
        });
        match written {
            Ok(()) => println!("wrote {}", path.display()),
            Err(err) => eprintln!("could not write {}: {err}", path.display()),
        }
    }

    if pass {
        ExitCode::SUCCESS
    } else {
        eprintln!(
            "FAIL: idle spargio uses {spargio_pct:.3} % of a core per shard (limit {THRESHOLD_PCT} %)"
        );
        ExitCode::FAILURE
    }
}

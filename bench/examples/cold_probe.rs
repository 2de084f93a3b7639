//! Cold start, phase by phase, as `cold_start_ping_pong` does it: `build`
//! (2 shards; tokio's multi-thread runtime with 2 workers), the work (two
//! tasks, 64 round trips over tokio's `mpsc`, the caller waiting for the
//! result) and the drop. Prints the median and 90th percentile of each
//! phase, in microseconds, three rounds of each runtime in turn.
//!
//! `cargo run --release -p spargio-bench --example cold_probe [cycles]`

use std::future::Future;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

/// The two tasks: the peer echoes, the driver counts 64 answers.
fn tasks() -> (impl Future<Output = ()>, impl Future<Output = u32>) {
    let (tx, mut rx) = mpsc::channel::<u32>(1);
    let (atx, mut arx) = mpsc::channel::<u32>(1);
    let peer = async move {
        while let Some(v) = rx.recv().await {
            if atx.send(v).await.is_err() {
                break;
            }
        }
    };
    let driver = async move {
        let mut n = 0;
        for i in 0..64 {
            tx.send(i).await.expect("the peer is alive");
            n += u32::from(arx.recv().await == Some(i));
        }
        n
    };
    (peer, driver)
}

fn spargio_cycle() -> [Instant; 4] {
    let t0 = Instant::now();
    let rt = spargio::Runtime::builder()
        .shards(2)
        .build()
        .expect("runtime");
    let t1 = Instant::now();
    let h = rt.handle();
    let (peer, driver) = tasks();
    drop(h.spawn_stealable(peer));
    let driver = h.spawn_stealable(driver).expect("spawn");
    assert_eq!(spargio::block_on(driver).expect("driver"), 64);
    let t2 = Instant::now();
    drop(rt);
    [t0, t1, t2, Instant::now()]
}

fn tokio_cycle() -> [Instant; 4] {
    let t0 = Instant::now();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .expect("runtime");
    let t1 = Instant::now();
    let (peer, driver) = tasks();
    rt.spawn(peer);
    let n = rt.block_on(async move { tokio::spawn(driver).await.expect("driver") });
    assert_eq!(n, 64);
    let t2 = Instant::now();
    drop(rt);
    [t0, t1, t2, Instant::now()]
}

fn run(name: &str, cycles: usize, cycle: fn() -> [Instant; 4]) {
    let mut phases: [Vec<Duration>; 4] = Default::default();
    for _ in 0..cycles {
        let t = cycle();
        for (i, phase) in phases.iter_mut().take(3).enumerate() {
            phase.push(t[i + 1] - t[i]);
        }
        phases[3].push(t[3] - t[0]);
    }
    let mut line = format!("{name:8}");
    for (label, v) in ["build", "work", "drop", "all"].iter().zip(&mut phases) {
        v.sort();
        let at = |p: f64| v[((v.len() - 1) as f64 * p) as usize].as_secs_f64() * 1e6;
        line += &format!("  {label} p50 {:6.1} p90 {:6.1}", at(0.5), at(0.9));
    }
    println!("{line}");
}

fn main() {
    let cycles = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(2000);
    for _ in 0..3 {
        run("spargio", cycles, spargio_cycle);
        run("tokio", cycles, tokio_cycle);
    }
}

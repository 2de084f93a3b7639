//! A tokio front end hands requests to spargio over a boundary channel.
//!
//! The tokio side plays 40 concurrent clients sending 2,000 requests; one
//! in ten carries a deadline too tight to meet. The spargio side receives
//! each request and fans it out into 8 stealable branches of CPU work that
//! spread over the shards, then answers with the combined result. The run
//! ends with a summary of outcomes, latency and where the work ran.
//!
//! Run: `cargo run --release -p spargio --example mixed_mode_service`

use std::time::{Duration, Instant};

use spargio::boundary::{self, BoundaryError};
use spargio::{Runtime, ShardCtx};

#[derive(Debug, Clone, Copy)]
struct Request {
    id: u64,
    work: u64,
}

#[derive(Debug)]
struct Response {
    id: u64,
    checksum: u64,
}

fn compute(seed: u64, iters: u64) -> u64 {
    let mut x = seed.wrapping_mul(2).wrapping_add(1);
    for _ in 0..iters {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    x
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let rt = Runtime::builder().build()?;
    let handle = rt.handle();
    let shards = handle.shard_count();
    let (client, server) = boundary::channel::<Request, Response>(256);

    // spargio: receive, fan out as stealable work, aggregate, answer.
    let h = handle.clone();
    let server_task = handle.spawn_stealable(async move {
        while let Ok(req) = server.recv().await {
            let h2 = h.clone();
            h.spawn_stealable(async move {
                let Request { id, work } = *req.request();
                let branches: Vec<_> = (0..8u64)
                    .map(|b| {
                        h2.spawn_stealable(async move { compute(id * 8 + b, work) })
                            .unwrap()
                    })
                    .collect();
                let mut checksum = 0u64;
                for b in branches {
                    checksum = checksum.wrapping_add(b.await.unwrap());
                }
                // A caller that already timed out gets nothing; that is fine.
                let _ = req.respond(Response { id, checksum });
            })
            .unwrap();
        }
    })?;

    // tokio: 40 concurrent clients, 50 requests each.
    let front = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()?;
    let started = Instant::now();
    let (ok, timed_out, latencies) = front.block_on(async move {
        let clients: Vec<_> = (0..40u64)
            .map(|c| {
                let client = client.clone();
                tokio::spawn(async move {
                    let (mut ok, mut timed_out, mut lat) = (0u64, 0u64, Vec::new());
                    for i in 0..50u64 {
                        let id = c * 50 + i;
                        let req = Request { id, work: 2_000 };
                        let tight = id % 10 == 0;
                        let timeout = if tight {
                            Duration::from_micros(20)
                        } else {
                            Duration::from_secs(5)
                        };
                        let t = Instant::now();
                        // Both stages (accepted, then answered) in one future.
                        match client.request_with_timeout(req, timeout).await {
                            Ok(resp) => {
                                assert_eq!(resp.id, id);
                                assert_ne!(resp.checksum, 0);
                                ok += 1;
                                lat.push(t.elapsed());
                            }
                            Err(BoundaryError::Timeout) => timed_out += 1,
                            Err(e) => panic!("request {id}: {e}"),
                        }
                    }
                    (ok, timed_out, lat)
                })
            })
            .collect();
        drop(client);
        let (mut ok, mut timed_out, mut lat) = (0, 0, Vec::new());
        for c in clients {
            let (o, t, l) = c.await.unwrap();
            ok += o;
            timed_out += t;
            lat.extend(l);
        }
        (ok, timed_out, lat)
    });
    let elapsed = started.elapsed();
    // Every client is gone, so the server loop ends.
    spargio::block_on(server_task)?;

    let mut sorted = latencies.clone();
    sorted.sort();
    let pct = |p: f64| sorted[((sorted.len() as f64 * p) as usize).min(sorted.len() - 1)];
    let stats = handle.stats_snapshot();
    let bstats = boundary::stats_snapshot();
    println!(
        "mixed-mode service: tokio front end (2 workers) -> boundary -> spargio ({shards} shards)"
    );
    println!("  requests: 2000 in {elapsed:?}: {ok} answered, {timed_out} timed out (tight 20 µs deadlines)");
    println!(
        "  latency of answered calls: p50 {:?}, p99 {:?}",
        pct(0.5),
        pct(0.99)
    );
    let polls: Vec<u64> = stats
        .shards
        .iter()
        .map(|s| s.counters.stealable_executed)
        .collect();
    println!(
        "  stealable polls per shard: {polls:?}; tasks stolen: {}",
        stats.totals.stealable_stolen
    );
    println!(
        "  boundary outcomes: {} timed out, {} canceled, {} overloaded, {} closed",
        bstats.timed_out, bstats.canceled, bstats.overloaded, bstats.closed
    );
    assert_eq!(ok + timed_out, 2000);
    assert!(ShardCtx::current().is_none());
    spargio::block_on(rt.shutdown());
    println!("  shut down cleanly");
    Ok(())
}

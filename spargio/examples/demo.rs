//! A tour of what makes spargio different, printed as it happens:
//! submission-time steering, stealing away from a blocked shard, pinned
//! tasks that stay put, cross-shard messages, and parking when idle.
//!
//! Run: `cargo run --release -p spargio --example demo`

use std::sync::mpsc;
use std::time::{Duration, Instant};

use spargio::{block_on, Event, Runtime, ShardCtx};

fn work(iters: u64) -> u64 {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    for i in 0..iters {
        x ^= x << 13;
        x ^= x >> 7;
        x = x.wrapping_mul(0x2545_F491_4F6C_DD1D).wrapping_add(i);
    }
    std::hint::black_box(x)
}

fn shard() -> usize {
    ShardCtx::current().expect("on a shard").shard_id()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let rt = Runtime::builder().shards(2.max(num_cpus())).build()?;
    let h = rt.handle();
    let n = h.shard_count();
    match h.io_uring_refusal() {
        None if h.backend() == spargio::BackendKind::Epoll => {
            println!("spargio demo: {n} shards, one epoll instance each (epoll was asked for)\n")
        }
        None => println!("spargio demo: {n} shards, one io_uring ring each\n"),
        Some(why) => {
            println!("spargio demo: {n} shards on epoll (io_uring refused: {why})\n")
        }
    }

    // 1. Fan-out from one shard: branches are steered and stolen.
    let h2 = h.clone();
    let per_shard = block_on(h.spawn_pinned(0, async move {
        let branches: Vec<_> = (0..64)
            .map(|_| {
                h2.spawn_stealable(async {
                    work(200_000);
                    shard()
                })
                .unwrap()
            })
            .collect();
        let mut per_shard = vec![0usize; h2.shard_count()];
        for b in branches {
            per_shard[b.await.unwrap()] += 1;
        }
        per_shard
    })?)?;
    println!("1. fan-out of 64 stealable branches spawned on shard 0 ran on: {per_shard:?}");

    // 2. A blocked shard: its stealable work is taken by the others.
    let h2 = h.clone();
    let ran_on = block_on(h.spawn_pinned(0, async move {
        let (tx, rx) = mpsc::channel();
        for _ in 0..16 {
            let tx = tx.clone();
            h2.spawn_stealable_on(0, async move { tx.send(shard()).unwrap() })
                .unwrap();
        }
        // This task hogs shard 0's thread until all 16 have run elsewhere.
        (0..16).map(|_| rx.recv().unwrap()).collect::<Vec<_>>()
    })?)?;
    println!("2. while shard 0 was blocked, its 16 stealable tasks ran on shards {ran_on:?}");

    // 3. Pinned tasks stay where they are put.
    let pinned: Vec<usize> = (0..n)
        .map(|s| block_on(h.spawn_pinned(s, async { shard() }).unwrap()).unwrap())
        .collect();
    println!("3. one pinned task per shard ran on: {pinned:?}");

    // 4. Messages between shards (mailbox + MSG_RING doorbell when parked).
    let last = n - 1;
    let rounds = 100_000u32;
    h.spawn_pinned(last, async move {
        let ctx = ShardCtx::current().unwrap();
        for _ in 0..rounds {
            let Event::RingMsg { from, tag, val } = ctx.next_event().await;
            ctx.send_raw_nowait(from, tag, val + 1).unwrap();
        }
    })?;
    let start = Instant::now();
    let last_val = block_on(h.spawn_pinned(0, async move {
        let ctx = ShardCtx::current().unwrap();
        let mut v = 0;
        for _ in 0..rounds {
            ctx.send_raw_nowait(last, 1, v).unwrap();
            v = ctx.next_event().await.payload().1;
        }
        v
    })?)?;
    let rtt = start.elapsed() / rounds;
    println!("4. {rounds} ping-pong round trips shard 0 <-> shard {last}: {last_val} replies, {rtt:?} per round trip");

    // 5. Idle: shards spin briefly, then block in the kernel (io_uring_enter or epoll_wait).
    let parks_before = h.stats_snapshot().totals.parks;
    let cpu_before = cpu_time();
    std::thread::sleep(Duration::from_millis(500));
    let idle_cpu = cpu_time() - cpu_before;
    let parks = h.stats_snapshot().totals.parks - parks_before;
    println!(
        "5. 500 ms idle: {parks} parks, process CPU {:.2} ms ({:.3}% of one core per shard)",
        idle_cpu.as_secs_f64() * 1e3,
        idle_cpu.as_secs_f64() / 0.5 / n as f64 * 100.0
    );

    let stats = h.stats_snapshot();
    let t = &stats.totals;
    println!(
        "\nstats: {} polls, {} stolen in {} successful steals, {} doorbells sent ({} coalesced), {} messages",
        t.tasks_polled, t.stealable_stolen, t.steal_success, t.doorbells_sent, t.doorbells_coalesced,
        t.ring_msgs_completed
    );
    let ring = stats.shards[0].ring;
    if stats.backend == spargio::BackendKind::IoUring {
        println!(
            "ring features: msg_ring={} defer_taskrun={} single_issuer={} coop_taskrun={}",
            ring.msg_ring, ring.defer_taskrun, ring.single_issuer, ring.coop_taskrun
        );
    }
    block_on(rt.shutdown());
    println!("shut down cleanly");
    Ok(())
}

fn num_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

fn cpu_time() -> Duration {
    // SAFETY: getrusage writes into the zeroed struct we own.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

//! Message passing between two workers on different threads.
//!
//! * `steady_ping_pong_rtt`: 256 request→ack round trips per iteration
//!   between two persistent workers.
//! * `steady_one_way_send_drain`: 2048 one-way messages, then a flush
//!   barrier that the receiver acks.
//! * `cold_start_ping_pong`: build the runtime(s) and both workers, 64
//!   round trips, shut everything down.
//!
//! Variants: `spargio_io_uring` (2 shards, `ShardCtx` messages between a
//! task pinned to each), `spargio_stealable` (2 shards, two stealable
//! tasks joined by `tokio::sync::mpsc`, as `tokio_mt_2` has them),
//! `tokio_two_worker` (two current-thread runtimes, each on its own thread,
//! joined by `tokio::sync::mpsc`) and `tokio_mt_2` (one multi-thread runtime
//! with 2 workers, two tasks joined by `tokio::sync::mpsc`).
//!
//! Every variant's iteration starts on the benchmark thread, hands the work
//! to a runtime worker and waits for it to finish: the handoff is measured
//! on every side.

#[path = "common/cpu.rs"]
mod cpu;

use std::hint::black_box;
use std::sync::mpsc as std_mpsc;
use std::thread;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use spargio::{Event, JoinHandle, Runtime, RuntimeHandle, SendError, ShardCtx};
use spargio_bench::yield_now;
use tokio::sync::mpsc;

/// Round trips per iteration of `steady_ping_pong_rtt`.
const RTT_ROUNDS: u32 = 256;
/// Messages per iteration of `steady_one_way_send_drain`.
const ONE_WAY_MSGS: u32 = 2048;
/// Round trips per iteration of `cold_start_ping_pong`.
const COLD_ROUNDS: u32 = 64;

// ---------------------------------------------------------------- spargio

const TAG_PING: u16 = 1;
const TAG_DATA: u16 = 2;
const TAG_FLUSH: u16 = 3;
const TAG_ACK: u16 = 4;
const TAG_STOP: u16 = 5;

/// The sender and receiver shards.
const SHARD_A: usize = 0;
const SHARD_B: usize = 1;

/// Sends one message, never dropping it: on backpressure, yield to the
/// shard (which lets the doorbell go out) and retry.
async fn send_retry(ctx: &ShardCtx, target: usize, tag: u16, val: u32) {
    loop {
        match ctx.send_raw_nowait(target, tag, val) {
            Ok(()) => return,
            Err(SendError::Backpressure) => yield_now().await,
            Err(err) => panic!("spargio send to shard {target} failed: {err}"),
        }
    }
}

/// Waits for the next message and checks its tag.
async fn expect(ctx: &ShardCtx, want: u16) -> u32 {
    let Event::RingMsg { tag, val, .. } = ctx.next_event().await;
    assert_eq!(tag, want, "unexpected tag (val {val})");
    val
}

/// The persistent worker on shard B: echoes pings (`val + 1`), counts data
/// messages (checking their order) and acks a flush with the count, stops
/// on `TAG_STOP`.
async fn spargio_peer() {
    let ctx = ShardCtx::current().expect("peer runs on a shard");
    let mut count = 0u32;
    loop {
        let Event::RingMsg { from, tag, val } = ctx.next_event().await;
        match tag {
            TAG_PING => send_retry(&ctx, from, TAG_PING, val + 1).await,
            TAG_DATA => {
                // Messages from one sender arrive in order.
                assert_eq!(val, count, "one-way message out of order");
                count += 1;
            }
            TAG_FLUSH => {
                send_retry(&ctx, from, TAG_ACK, count).await;
                count = 0;
            }
            TAG_STOP => break,
            _ => {}
        }
    }
}

/// `rounds` round trips from the current shard to shard B; returns the
/// last echoed value (== `rounds`).
async fn spargio_rtt(rounds: u32) -> u32 {
    let ctx = ShardCtx::current().expect("driver runs on a shard");
    let mut v = 0;
    for _ in 0..rounds {
        send_retry(&ctx, SHARD_B, TAG_PING, v).await;
        v = expect(&ctx, TAG_PING).await;
    }
    v
}

/// `msgs` one-way messages to shard B, then a flush it acks; returns the
/// count B saw (== `msgs`).
async fn spargio_one_way(msgs: u32) -> u32 {
    let ctx = ShardCtx::current().expect("driver runs on a shard");
    for i in 0..msgs {
        send_retry(&ctx, SHARD_B, TAG_DATA, i).await;
    }
    send_retry(&ctx, SHARD_B, TAG_FLUSH, 0).await;
    expect(&ctx, TAG_ACK).await
}

async fn spargio_stop_peer() {
    let ctx = ShardCtx::current().expect("runs on a shard");
    send_retry(&ctx, SHARD_B, TAG_STOP, 0).await;
}

/// A 2-shard runtime with the persistent peer on shard B.
struct SpargioPair {
    /// Kept for its `Drop` (shuts down and joins the shard threads), which
    /// runs after `SpargioPair::drop` has stopped the peer.
    _rt: Runtime,
    handle: RuntimeHandle,
    peer: Option<JoinHandle<()>>,
}

impl SpargioPair {
    fn new(msg_queue_capacity: usize) -> SpargioPair {
        let rt = Runtime::builder()
            .shards(2)
            .msg_ring_queue_capacity(msg_queue_capacity)
            .build()
            .expect("spargio runtime");
        let handle = rt.handle();
        let peer = handle
            .spawn_pinned(SHARD_B, spargio_peer())
            .expect("spawn peer");
        SpargioPair {
            _rt: rt,
            handle,
            peer: Some(peer),
        }
    }

    /// Runs `fut` on shard A and blocks until it is done.
    fn run<F>(&self, fut: F) -> u32
    where
        F: std::future::Future<Output = u32> + Send + 'static,
    {
        let task = self.handle.spawn_pinned(SHARD_A, fut).expect("spawn");
        spargio::block_on(task).expect("driver task")
    }
}

impl Drop for SpargioPair {
    fn drop(&mut self) {
        if let Some(peer) = self.peer.take() {
            let stop = self.handle.spawn_pinned(SHARD_A, spargio_stop_peer());
            if let Ok(stop) = stop {
                let _ = spargio::block_on(stop);
                let _ = spargio::block_on(peer);
            }
        }
    }
}

// ------------------------------------------------------------------ tokio

/// Messages from worker A to worker B.
#[derive(Debug)]
enum Msg {
    Ping(u32),
    Data(u32),
    Flush,
}

/// What worker A runs for one iteration.
#[derive(Clone, Copy, Debug)]
enum Job {
    Rtt(u32),
    OneWay(u32),
}

/// Worker B: echoes pings, counts data, acks flushes with the count; ends
/// when A's sender is dropped.
async fn tokio_peer(mut rx: mpsc::UnboundedReceiver<Msg>, tx: mpsc::UnboundedSender<u32>) {
    let mut count = 0u32;
    while let Some(msg) = rx.recv().await {
        match msg {
            Msg::Ping(v) => {
                if tx.send(v + 1).is_err() {
                    break;
                }
            }
            Msg::Data(v) => {
                assert_eq!(v, count, "one-way message out of order");
                count += 1;
            }
            Msg::Flush => {
                if tx.send(count).is_err() {
                    break;
                }
                count = 0;
            }
        }
    }
}

/// Worker A's ends of the two channels.
struct TokioEnds {
    to_peer: mpsc::UnboundedSender<Msg>,
    from_peer: mpsc::UnboundedReceiver<u32>,
}

/// Worker B's ends.
type PeerEnds = (mpsc::UnboundedReceiver<Msg>, mpsc::UnboundedSender<u32>);

fn tokio_channels() -> (TokioEnds, PeerEnds) {
    let (to_peer, peer_rx) = mpsc::unbounded_channel();
    let (peer_tx, from_peer) = mpsc::unbounded_channel();
    (TokioEnds { to_peer, from_peer }, (peer_rx, peer_tx))
}

impl TokioEnds {
    async fn run(&mut self, job: Job) -> u32 {
        match job {
            Job::Rtt(rounds) => {
                let mut v = 0;
                for _ in 0..rounds {
                    self.to_peer.send(Msg::Ping(v)).expect("peer alive");
                    v = self.from_peer.recv().await.expect("peer alive");
                }
                v
            }
            Job::OneWay(msgs) => {
                for i in 0..msgs {
                    self.to_peer.send(Msg::Data(i)).expect("peer alive");
                }
                self.to_peer.send(Msg::Flush).expect("peer alive");
                self.from_peer.recv().await.expect("peer alive")
            }
        }
    }
}

fn current_thread_rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("tokio current-thread runtime")
}

fn multi_thread_rt(workers: usize) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .build()
        .expect("tokio multi-thread runtime")
}

/// Two current-thread runtimes, each on its own thread: A takes jobs from
/// the benchmark thread and reports completion over a std channel; B runs
/// the persistent peer.
struct TokioTwoWorker {
    jobs: Option<mpsc::UnboundedSender<Job>>,
    done: std_mpsc::Receiver<u32>,
    threads: Vec<thread::JoinHandle<()>>,
}

impl TokioTwoWorker {
    fn new() -> TokioTwoWorker {
        let (mut ends, (peer_rx, peer_tx)) = tokio_channels();
        let worker_b =
            thread::spawn(move || current_thread_rt().block_on(tokio_peer(peer_rx, peer_tx)));
        let (jobs, mut job_rx) = mpsc::unbounded_channel::<Job>();
        let (done_tx, done) = std_mpsc::channel();
        let worker_a = thread::spawn(move || {
            current_thread_rt().block_on(async move {
                while let Some(job) = job_rx.recv().await {
                    let out = ends.run(job).await;
                    if done_tx.send(out).is_err() {
                        break;
                    }
                }
            })
        });
        TokioTwoWorker {
            jobs: Some(jobs),
            done,
            threads: vec![worker_a, worker_b],
        }
    }

    fn run(&self, job: Job) -> u32 {
        self.jobs
            .as_ref()
            .expect("running")
            .send(job)
            .expect("worker A alive");
        self.done.recv().expect("worker A alive")
    }
}

impl Drop for TokioTwoWorker {
    fn drop(&mut self) {
        // Closing the job channel ends A, which drops its channel ends and
        // so ends B.
        self.jobs.take();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// One multi-thread runtime with 2 workers: the peer is a persistent task;
/// each iteration spawns the driver task and `block_on`s its handle.
struct TokioMt2 {
    rt: tokio::runtime::Runtime,
    ends: Option<TokioEnds>,
}

impl TokioMt2 {
    fn new() -> TokioMt2 {
        let rt = multi_thread_rt(2);
        let (ends, (peer_rx, peer_tx)) = tokio_channels();
        rt.spawn(tokio_peer(peer_rx, peer_tx));
        TokioMt2 {
            rt,
            ends: Some(ends),
        }
    }

    fn run(&mut self, job: Job) -> u32 {
        let mut ends = self.ends.take().expect("ends are home between iterations");
        let (ends, out) = self.rt.block_on(async move {
            tokio::spawn(async move {
                let out = ends.run(job).await;
                (ends, out)
            })
            .await
            .expect("driver task")
        });
        self.ends = Some(ends);
        out
    }
}

/// The stealable form on spargio, as `TokioMt2` is on tokio: a 2-shard
/// runtime with default settings, the peer a persistent stealable task,
/// each iteration's driver a stealable task, the two joined by the same
/// `tokio::sync::mpsc` channels (runtime-agnostic). Where the scheduler
/// puts the two tasks is its own business.
struct SpargioStealable {
    _rt: Runtime,
    handle: RuntimeHandle,
    ends: Option<TokioEnds>,
}

impl SpargioStealable {
    fn new() -> SpargioStealable {
        let rt = Runtime::builder()
            .shards(2)
            .build()
            .expect("spargio runtime");
        let handle = rt.handle();
        let (ends, (peer_rx, peer_tx)) = tokio_channels();
        // Ends when the driver's sender is dropped with `ends`.
        drop(
            handle
                .spawn_stealable(tokio_peer(peer_rx, peer_tx))
                .expect("spawn peer"),
        );
        SpargioStealable {
            _rt: rt,
            handle,
            ends: Some(ends),
        }
    }

    fn run(&mut self, job: Job) -> u32 {
        let mut ends = self.ends.take().expect("ends are home between iterations");
        let task = self
            .handle
            .spawn_stealable(async move {
                let out = ends.run(job).await;
                (ends, out)
            })
            .expect("spawn driver");
        let (ends, out) = spargio::block_on(task).expect("driver task");
        self.ends = Some(ends);
        out
    }
}

// ------------------------------------------------------------- benchmarks

fn steady_ping_pong_rtt(c: &mut Criterion) {
    let mut group = cpu::Group::new(c, "steady_ping_pong_rtt");
    group.throughput(Throughput::Elements(RTT_ROUNDS.into()));
    {
        let pair = SpargioPair::new(4096);
        group.bench("spargio_io_uring", || {
            let v = pair.run(spargio_rtt(RTT_ROUNDS));
            assert_eq!(v, RTT_ROUNDS);
            black_box(v)
        });
    }
    {
        let mut sp = SpargioStealable::new();
        group.bench("spargio_stealable", || {
            let v = sp.run(Job::Rtt(RTT_ROUNDS));
            assert_eq!(v, RTT_ROUNDS);
            black_box(v)
        });
    }
    {
        let tk = TokioTwoWorker::new();
        group.bench("tokio_two_worker", || {
            let v = tk.run(Job::Rtt(RTT_ROUNDS));
            assert_eq!(v, RTT_ROUNDS);
            black_box(v)
        });
    }
    {
        let mut tk = TokioMt2::new();
        group.bench("tokio_mt_2", || {
            let v = tk.run(Job::Rtt(RTT_ROUNDS));
            assert_eq!(v, RTT_ROUNDS);
            black_box(v)
        });
    }
    group.finish();
}

fn steady_one_way_send_drain(c: &mut Criterion) {
    let mut group = cpu::Group::new(c, "steady_one_way_send_drain");
    group.throughput(Throughput::Elements(ONE_WAY_MSGS.into()));
    {
        let pair = SpargioPair::new(4096);
        group.bench("spargio_io_uring", || {
            let n = pair.run(spargio_one_way(ONE_WAY_MSGS));
            assert_eq!(n, ONE_WAY_MSGS);
            black_box(n)
        });
    }
    {
        let mut sp = SpargioStealable::new();
        group.bench("spargio_stealable", || {
            let n = sp.run(Job::OneWay(ONE_WAY_MSGS));
            assert_eq!(n, ONE_WAY_MSGS);
            black_box(n)
        });
    }
    {
        let tk = TokioTwoWorker::new();
        group.bench("tokio_two_worker", || {
            let n = tk.run(Job::OneWay(ONE_WAY_MSGS));
            assert_eq!(n, ONE_WAY_MSGS);
            black_box(n)
        });
    }
    {
        let mut tk = TokioMt2::new();
        group.bench("tokio_mt_2", || {
            let n = tk.run(Job::OneWay(ONE_WAY_MSGS));
            assert_eq!(n, ONE_WAY_MSGS);
            black_box(n)
        });
    }
    group.finish();
}

fn cold_start_ping_pong(c: &mut Criterion) {
    let mut group = cpu::Group::new(c, "cold_start_ping_pong");
    group.bench("spargio_io_uring", || {
        let rt = Runtime::builder()
            .shards(2)
            .build()
            .expect("spargio runtime");
        let handle = rt.handle();
        let peer = handle
            .spawn_pinned(SHARD_B, spargio_peer())
            .expect("spawn peer");
        let driver = handle
            .spawn_pinned(SHARD_A, async {
                let v = spargio_rtt(COLD_ROUNDS).await;
                spargio_stop_peer().await;
                v
            })
            .expect("spawn driver");
        let v = spargio::block_on(driver).expect("driver task");
        spargio::block_on(peer).expect("peer task");
        drop(rt);
        assert_eq!(v, COLD_ROUNDS);
        black_box(v)
    });
    group.bench("spargio_stealable", || {
        let mut sp = SpargioStealable::new();
        let v = sp.run(Job::Rtt(COLD_ROUNDS));
        drop(sp);
        assert_eq!(v, COLD_ROUNDS);
        black_box(v)
    });
    group.bench("tokio_two_worker", || {
        let (mut ends, (peer_rx, peer_tx)) = tokio_channels();
        let worker_b =
            thread::spawn(move || current_thread_rt().block_on(tokio_peer(peer_rx, peer_tx)));
        // A's channel ends drop when its thread finishes, which ends B.
        let worker_a = thread::spawn(move || {
            current_thread_rt().block_on(async move { ends.run(Job::Rtt(COLD_ROUNDS)).await })
        });
        let v = worker_a.join().expect("worker A");
        worker_b.join().expect("worker B");
        assert_eq!(v, COLD_ROUNDS);
        black_box(v)
    });
    group.bench("tokio_mt_2", || {
        let rt = multi_thread_rt(2);
        let (mut ends, (peer_rx, peer_tx)) = tokio_channels();
        rt.spawn(tokio_peer(peer_rx, peer_tx));
        let v = rt.block_on(async move {
            tokio::spawn(async move { ends.run(Job::Rtt(COLD_ROUNDS)).await })
                .await
                .expect("driver task")
        });
        // Dropping the runtime shuts it down and joins its workers.
        drop(rt);
        assert_eq!(v, COLD_ROUNDS);
        black_box(v)
    });
    group.finish();
}

criterion_group!(
    benches,
    steady_ping_pong_rtt,
    steady_one_way_send_drain,
    cold_start_ping_pong
);
criterion_main!(benches);

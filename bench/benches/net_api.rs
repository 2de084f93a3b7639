//! TCP echo over loopback: latency, stream throughput, and streams whose
//! load is skewed or moves.
//!
//! * `net_echo_rtt_256b`: 512 echoes of 256 B on one stream, one in flight.
//! * `net_stream_throughput_4k_window32`: 2048 frames of 4 KiB on one
//!   stream, at most 32 sent and not yet echoed back.
//! * `net_stream_imbalanced_4k_hot1_light7`: 8 streams at once, window 32,
//!   4 KiB frames: stream 0 echoes 2048 frames, streams 1-7 128 each.
//! * `net_stream_hotspot_rotation_4k`: 8 streams, window 32, 64 steps; in
//!   step `s` stream `s % 8` echoes 32 frames and the others 2 each; a step
//!   ends when every stream has its frames back (the hot stream moves to
//!   the other thread's stream at every step).
//! * `net_pipeline_hotspot_rotation_4k_window32`: 8 streams x 1024 frames,
//!   window 32, all at once; every echoed frame gets a CPU stage
//!   (`spin_work`) before the stream sends more: 4,000 iterations when the
//!   stream is the hot one for that frame (stream `(frame / 64) % 8`), 150
//!   otherwise.
//! * `net_keyed_hotspot_rotation_4k`: the I/O of
//!   `net_stream_hotspot_rotation_4k`, plus 16 keyed dispatches per echoed
//!   frame: each 256 B chunk of the frame has a key, and the key goes to the
//!   owner task of its partition (`key % 2`), one owner per worker thread
//!   (spargio: cross-shard messages to a task pinned on the owner shard;
//!   tokio and compio: channels to the owner tasks).
//!
//! The echo servers run in the same process, on the same runtime (the same
//! two worker threads) as the clients. Every stream's bytes come from a
//! fixed pseudo-random pattern, and every echoed byte is compared with what
//! was sent; the per-frame results (frame counts, CPU stage results, owner
//! key sums and counts) are summed and checked every iteration.
//!
//! A client stream sends up to its window, then loops: read whatever has
//! come back (at most what is outstanding), check it, run the stage of every
//! frame it completes, and send as many new frames as the window allows, in
//! one write. The echo servers write back each buffer they receive.
//! spargio and compio receive on multishot `RECV` into provided buffers
//! (4 × 64 KiB per socket); tokio reads up to 64 KiB. With
//! `SPARGIO_BENCH_NET_RECV=single` and `COMPIO_BENCH_NET_RECV=single`,
//! spargio and compio use single-shot reads of up to 64 KiB instead.
//!
//! Variants, each with 2 worker threads and its runtime(s) and connections
//! built once, outside the measurement (`TCP_NODELAY` on every socket):
//! * tokio (`tokio_*`): multi-thread runtime with 2 workers; one task per
//!   server connection; per iteration a driver task spawns one task per
//!   stream (per step) and joins them; keyed owners are two tasks fed by
//!   unbounded mpsc channels. tokio places every task itself.
//! * spargio (`spargio_*`): `shards(2)`; stream `i` has its session shard
//!   (client end and server end, see "Placement") fixed at `i % 2`
//!   (`StreamSessionPolicy::Fixed`, the same spread as round-robin); every
//!   client and server loop is pinned to its stream's session shard
//!   (`spawn_on_session`), so its operations go straight into its own
//!   ring; the driver is a stealable task; keyed owners are tasks pinned on
//!   shards 0 and 1 reading `ShardCtx::next_event`, fed with
//!   `send_many_raw_nowait` (one call per owner per frame, yield and retry
//!   on backpressure).
//! * compio (`compio_*`): two compio runtimes, one per thread
//!   (thread-per-core), each with its own listener; stream `i` lives on
//!   thread `i % 2`; thread 0 runs the driver and asks thread 1 (over a
//!   flume channel) to run its streams' share of each step; keyed owners
//!   are one task per thread fed by flume channels.
//!
//! Placement: by default both ends of a connection live on the same thread
//! (a connection belongs to one thread, as in thread-per-core servers).
//! `SPARGIO_BENCH_NET_PEER=cross` puts the server end of stream `i` on the
//! other thread instead (spargio and compio; tokio places tasks itself):
//! then every echo crosses threads, and a runtime whose idle thread blocks
//! at once pays a thread wake-up per hop.
//!
//! `SPARGIO_BENCH_NET_STATS=1` prints every variant's iteration count and
//! spargio's per-shard counters per iteration (operations, polls, parks,
//! doorbells, messages). `SPARGIO_BENCH_SPIN_BEFORE_PARK_US=n` sets the
//! spargio runtime's `spin_before_park` (default: the runtime's, 50 µs), for
//! A/B runs; `SPARGIO_BENCH_BUSY_POLL=1` builds it with `busy_poll(true)`
//! (the latency mode).
//!
//! As in the other benches, every variant's iteration starts on the
//! benchmark thread, hands the work to a runtime worker and waits for it.

#[path = "common/cpu.rs"]
mod cpu;

use std::hint::black_box;
use std::net::{Ipv4Addr, SocketAddr};
use std::ops::Range;
use std::sync::{Arc, OnceLock};

use criterion::{Criterion, Throughput};
use spargio_bench::{spin_work, yield_now};

/// Worker threads (tokio workers, spargio shards, compio runtimes).
const WORKERS: usize = 2;
/// Frame size of the stream groups.
const FRAME: usize = 4096;
/// Frames in flight per stream in the stream groups.
const WINDOW: usize = 32;
/// Message size of `net_echo_rtt_256b`.
const RTT_MSG: usize = 256;
/// Echoes per iteration of `net_echo_rtt_256b`.
const RTT_ECHOES: usize = 512;
/// Frames per iteration of `net_stream_throughput_4k_window32`.
const THROUGHPUT_FRAMES: usize = 2048;
/// Streams of the multi-stream groups.
const STREAMS: usize = 8;
/// Frames of the hot stream (stream 0) in the imbalanced group.
const IMBALANCED_HOT_FRAMES: usize = 2048;
/// Frames of each light stream in the imbalanced group.
const IMBALANCED_LIGHT_FRAMES: usize = 128;
/// Steps of the rotating-hotspot groups.
const ROTATION_STEPS: usize = 64;
/// Frames of the hot stream in one rotation step.
const ROTATION_HOT_FRAMES: usize = 32;
/// Frames of every other stream in one rotation step.
const ROTATION_COLD_FRAMES: usize = 2;
/// Frames per stream in the pipeline group.
const PIPELINE_FRAMES: usize = 1024;
/// The pipeline's hot stream changes every this many frames.
const PIPELINE_ROTATE_EVERY: u64 = 64;
/// CPU stage of a frame of the hot stream.
const PIPELINE_HOT_ITERS: u64 = 4_000;
/// CPU stage of a frame of any other stream.
const PIPELINE_COLD_ITERS: u64 = 150;
/// Keyed dispatches per frame (one per 256 B chunk).
const KEYS_PER_FRAME: usize = 16;
/// Owner tasks (partitions) of the keyed group, one per worker thread.
const OWNERS: usize = WORKERS;
/// Message tag of a keyed dispatch (spargio).
const KEY_TAG: u16 = 0x4B;
/// Read buffer of every echo server connection.
const ECHO_BUF: usize = 64 * 1024;
/// The most a client ever has outstanding (and so reads or writes at once).
const MAX_CHUNK: usize = WINDOW * FRAME;
/// Period of the byte pattern (prime, so no frame size divides it).
const PATTERN_PERIOD: usize = 65_521;

// ---------------------------------------------------------------- pattern

/// The bytes every stream sends: a pseudo-random sequence of period
/// `PATTERN_PERIOD`, extended by `MAX_CHUNK` so any chunk a client sends or
/// checks is one contiguous `'static` slice.
fn pattern() -> &'static [u8] {
    static PATTERN: OnceLock<&'static [u8]> = OnceLock::new();
    PATTERN.get_or_init(|| {
        let bytes: Vec<u8> = (0..PATTERN_PERIOD + MAX_CHUNK)
            .map(|i| {
                ((i % PATTERN_PERIOD) as u32)
                    .wrapping_mul(0x9E37_79B1)
                    .to_le_bytes()[3]
            })
            .collect();
        Box::leak(bytes.into_boxed_slice())
    })
}

/// `len` pattern bytes starting at stream offset `offset`.
fn pattern_at(offset: usize, len: usize) -> &'static [u8] {
    let start = offset % PATTERN_PERIOD;
    &pattern()[start..start + len]
}

// ------------------------------------------------------------- workloads

/// What a stream does with each echoed frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum StageKind {
    /// Nothing (I/O only).
    Echo,
    /// The pipeline's CPU stage.
    Cpu,
    /// 16 keyed dispatches to the owner tasks.
    Keyed,
}

/// One iteration of a group: which stream echoes how many frames in each
/// step (a step ends when all its frames are back).
#[derive(Debug)]
struct Plan {
    streams: usize,
    frame: usize,
    window: usize,
    /// `frames[step][stream]`.
    frames: Vec<Vec<usize>>,
    stage: StageKind,
}

/// One stream's share of one step.
#[derive(Clone, Copy, Debug)]
struct StreamJob {
    stream: usize,
    /// Index of the job's first frame among all the stream's frames of the
    /// iteration (it picks the pattern bytes, the CPU stage and the keys).
    first_frame: u64,
    frames: usize,
}

impl Plan {
    fn rtt() -> Plan {
        Plan {
            streams: 1,
            frame: RTT_MSG,
            window: 1,
            frames: vec![vec![RTT_ECHOES]],
            stage: StageKind::Echo,
        }
    }

    fn throughput() -> Plan {
        Plan {
            streams: 1,
            frame: FRAME,
            window: WINDOW,
            frames: vec![vec![THROUGHPUT_FRAMES]],
            stage: StageKind::Echo,
        }
    }

    fn imbalanced() -> Plan {
        let frames = (0..STREAMS)
            .map(|s| {
                if s == 0 {
                    IMBALANCED_HOT_FRAMES
                } else {
                    IMBALANCED_LIGHT_FRAMES
                }
            })
            .collect();
        Plan {
            streams: STREAMS,
            frame: FRAME,
            window: WINDOW,
            frames: vec![frames],
            stage: StageKind::Echo,
        }
    }

    fn rotation(stage: StageKind) -> Plan {
        let frames = (0..ROTATION_STEPS)
            .map(|step| {
                (0..STREAMS)
                    .map(|s| {
                        if s == step % STREAMS {
                            ROTATION_HOT_FRAMES
                        } else {
                            ROTATION_COLD_FRAMES
                        }
                    })
                    .collect()
            })
            .collect();
        Plan {
            streams: STREAMS,
            frame: FRAME,
            window: WINDOW,
            frames,
            stage,
        }
    }

    fn pipeline() -> Plan {
        Plan {
            streams: STREAMS,
            frame: FRAME,
            window: WINDOW,
            frames: vec![vec![PIPELINE_FRAMES; STREAMS]],
            stage: StageKind::Cpu,
        }
    }

    fn steps(&self) -> usize {
        self.frames.len()
    }

    /// The streams with frames in `step`.
    fn jobs(&self, step: usize) -> impl Iterator<Item = StreamJob> + '_ {
        (0..self.streams).filter_map(move |stream| {
            let frames = self.frames[step][stream];
            (frames > 0).then(|| StreamJob {
                stream,
                first_frame: self.frames[..step].iter().map(|f| f[stream] as u64).sum(),
                frames,
            })
        })
    }

    fn all_jobs(&self) -> impl Iterator<Item = StreamJob> + '_ {
        (0..self.steps()).flat_map(|step| self.jobs(step))
    }

    /// Bytes echoed per iteration (one direction).
    fn bytes(&self) -> u64 {
        self.all_jobs()
            .map(|j| (j.frames * self.frame) as u64)
            .sum()
    }

    /// Keys each owner receives per iteration.
    fn owner_counts(&self) -> [u64; OWNERS] {
        let mut counts = [0; OWNERS];
        if self.stage == StageKind::Keyed {
            for job in self.all_jobs() {
                for frame in job.first_frame..job.first_frame + job.frames as u64 {
                    for chunk in 0..KEYS_PER_FRAME {
                        counts[owner_of(key_of(job.stream, frame, chunk))] += 1;
                    }
                }
            }
        }
        counts
    }

    /// The checksum an iteration must produce: the stage value of every
    /// frame, plus every owner's key count and key sum.
    fn expected(&self) -> u64 {
        let mut sum = 0u64;
        for job in self.all_jobs() {
            for frame in job.first_frame..job.first_frame + job.frames as u64 {
                sum = sum.wrapping_add(stage_value(self.stage, job.stream, frame));
                if self.stage == StageKind::Keyed {
                    for chunk in 0..KEYS_PER_FRAME {
                        sum = sum
                            .wrapping_add(1)
                            .wrapping_add(u64::from(key_of(job.stream, frame, chunk)));
                    }
                }
            }
        }
        sum
    }
}

/// CPU-stage iterations of `frame` of `stream` in the pipeline group.
fn pipeline_iters(stream: usize, frame: u64) -> u64 {
    if (frame / PIPELINE_ROTATE_EVERY) % STREAMS as u64 == stream as u64 {
        PIPELINE_HOT_ITERS
    } else {
        PIPELINE_COLD_ITERS
    }
}

/// What a frame's stage adds to the stream's checksum (keyed dispatches
/// count in the owners' sums).
fn stage_value(stage: StageKind, stream: usize, frame: u64) -> u64 {
    match stage {
        StageKind::Echo | StageKind::Keyed => 1,
        StageKind::Cpu => 1u64.wrapping_add(spin_work(pipeline_iters(stream, frame))),
    }
}

/// The key of chunk `chunk` of `frame` of `stream` (splitmix64 of the
/// three, truncated).
fn key_of(stream: usize, frame: u64, chunk: usize) -> u32 {
    let mut z =
        ((stream as u64) << 48 | frame << 8 | chunk as u64).wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)) as u32
}

fn owner_of(key: u32) -> usize {
    key as usize % OWNERS
}

/// Hands keys to their owner task.
trait Dispatch: Send {
    /// Sends `keys` (all for `owner`); false when the owner's queue is full
    /// and the caller must yield and retry.
    fn dispatch(&mut self, owner: usize, keys: &[u32]) -> bool;
}

/// For the stages that dispatch nothing.
struct NoDispatch;

impl Dispatch for NoDispatch {
    fn dispatch(&mut self, _: usize, _: &[u32]) -> bool {
        unreachable!("only the keyed stage dispatches")
    }
}

/// A stream's per-frame stage, with the runtime's way to reach the owners.
struct Stage<D> {
    kind: StageKind,
    dispatch: D,
}

impl<D: Dispatch> Stage<D> {
    /// Runs the stage of `frame` of `stream`; returns its checksum value.
    async fn frame(&mut self, stream: usize, frame: u64) -> u64 {
        if self.kind == StageKind::Keyed {
            let mut keys = [[0u32; KEYS_PER_FRAME]; OWNERS];
            let mut lens = [0usize; OWNERS];
            for chunk in 0..KEYS_PER_FRAME {
                let key = key_of(stream, frame, chunk);
                let owner = owner_of(key);
                keys[owner][lens[owner]] = key;
                lens[owner] += 1;
            }
            for owner in 0..OWNERS {
                let keys = &keys[owner][..lens[owner]];
                while !keys.is_empty() && !self.dispatch.dispatch(owner, keys) {
                    yield_now().await;
                }
            }
        }
        stage_value(self.kind, stream, frame)
    }
}

/// One client stream's progress through a job: what to send next, how much
/// to read, and the check of every byte that comes back.
struct Echo {
    frame: usize,
    window: usize,
    first_frame: u64,
    /// Pattern offset of the job's first byte.
    base: usize,
    total: usize,
    sent: usize,
    received: usize,
}

impl Echo {
    fn new(plan: &Plan, job: StreamJob) -> Echo {
        assert!(plan.frame * plan.window <= MAX_CHUNK, "window too large");
        Echo {
            frame: plan.frame,
            window: plan.window,
            first_frame: job.first_frame,
            base: job.stream * 7919 + job.first_frame as usize * plan.frame,
            total: job.frames * plan.frame,
            sent: 0,
            received: 0,
        }
    }

    fn done(&self) -> bool {
        self.received == self.total
    }

    /// The bytes to send now: every frame the window admits and that is not
    /// sent yet (`None` when the window is full).
    fn next_send(&mut self) -> Option<&'static [u8]> {
        let limit = self
            .total
            .min((self.received / self.frame + self.window) * self.frame);
        if limit <= self.sent {
            return None;
        }
        let out = pattern_at(self.base + self.sent, limit - self.sent);
        self.sent = limit;
        Some(out)
    }

    /// How many bytes the next read may take: what is outstanding.
    fn want(&self) -> usize {
        self.sent - self.received
    }

    /// Checks `data`, the next bytes echoed back; returns the frames (by
    /// index in the stream) it completed.
    fn received(&mut self, data: &[u8]) -> Range<u64> {
        assert!(!data.is_empty(), "the echo server closed the stream");
        assert!(
            data.len() <= self.want(),
            "echo returned more than was sent"
        );
        assert!(
            data == pattern_at(self.base + self.received, data.len()),
            "echoed bytes differ from the bytes sent"
        );
        let before = (self.received / self.frame) as u64;
        self.received += data.len();
        let after = (self.received / self.frame) as u64;
        self.first_frame + before..self.first_frame + after
    }
}

/// Where the two ends of each connection run.
#[derive(Clone, Copy, Debug)]
struct Placement {
    /// 0: the server end on the client's thread; 1: on the other thread.
    peer_offset: usize,
}

impl Placement {
    /// `SPARGIO_BENCH_NET_PEER`: `same` (default) or `cross`.
    fn from_env() -> Placement {
        let peer = std::env::var("SPARGIO_BENCH_NET_PEER").unwrap_or_default();
        let peer_offset = match peer.as_str() {
            "" | "same" => 0,
            "cross" => 1,
            other => panic!("SPARGIO_BENCH_NET_PEER must be `cross` or `same`, not {other:?}"),
        };
        Placement { peer_offset }
    }

    /// Thread (shard, runtime) of the client end of stream `i`.
    fn client(self, i: usize) -> usize {
        i % WORKERS
    }

    /// Thread of the server end of stream `i`.
    fn server(self, i: usize) -> usize {
        (i + self.peer_offset) % WORKERS
    }
}

/// A numeric environment override, if set.
fn env_u64(name: &str) -> Option<u64> {
    let value = std::env::var(name).ok()?;
    Some(
        value
            .parse()
            .unwrap_or_else(|_| panic!("{name} must be a number, not {value:?}")),
    )
}

fn loopback() -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, 0))
}

// ------------------------------------------------------------------ tokio

#[path = "net_api/tokio_side.rs"]
mod tokio_side;

// ---------------------------------------------------------------- spargio

#[path = "net_api/spargio_side.rs"]
mod spargio_side;

// ----------------------------------------------------------------- compio

#[path = "net_api/compio_side.rs"]
mod compio_side;

// ------------------------------------------------------------- benchmarks

struct Group {
    name: &'static str,
    plan: Plan,
    /// Variant names after `tokio_` / `spargio_` / `compio_`.
    suffix: &'static str,
}

/// Prints spargio's per-shard counters per iteration (the deltas over the
/// variant's run, warm-up included, divided by its iterations), for
/// `SPARGIO_BENCH_NET_STATS`.
fn print_stats(
    group: &str,
    before: &spargio::RuntimeStats,
    after: &spargio::RuntimeStats,
    iterations: u64,
) {
    let per = |a: u64, b: u64| (a - b) as f64 / iterations as f64;
    eprintln!("{group}: spargio counters per iteration");
    for (shard, (a, b)) in after.shards.iter().zip(&before.shards).enumerate() {
        let (a, b) = (&a.counters, &b.counters);
        eprintln!(
            "  shard {shard}: ops {:.0} (completed {:.0}), polls {:.0}, parks {:.1}, \
             doorbells {:.1} (+{:.1} coalesced), msgs sent {:.0} / consumed {:.0} \
             (backpressure {:.1}), pinned spawns {:.1}, stealable {:.1} (stolen {:.1})",
            per(a.native_ops_submitted, b.native_ops_submitted),
            per(a.native_ops_completed, b.native_ops_completed),
            per(a.tasks_polled, b.tasks_polled),
            per(a.parks, b.parks),
            per(a.doorbells_sent, b.doorbells_sent),
            per(a.doorbells_coalesced, b.doorbells_coalesced),
            per(a.ring_msgs_submitted, b.ring_msgs_submitted),
            per(a.ring_msgs_completed, b.ring_msgs_completed),
            per(a.ring_msgs_backpressure, b.ring_msgs_backpressure),
            per(a.spawn_pinned, b.spawn_pinned),
            per(a.spawn_stealable, b.spawn_stealable),
            per(a.stealable_stolen, b.stealable_stolen),
        );
    }
}

fn run_group(c: &mut Criterion, group: Group, placement: Placement, stats: bool) {
    let plan = Arc::new(group.plan);
    let want = plan.expected();
    let mut g = cpu::Group::new(c, group.name);
    g.throughput(Throughput::Bytes(plan.bytes()));
    let report = |variant: &str, iterations: u64| {
        if stats && iterations > 0 {
            eprintln!("{}/{variant}: {iterations} iterations", group.name);
        }
    };
    {
        let mut side = tokio_side::Side::new(plan.streams);
        let mut iterations = 0;
        let name = format!("tokio_{}", group.suffix);
        g.bench(&name, || {
            iterations += 1;
            assert_eq!(black_box(side.run(&plan)), want)
        });
        report(&name, iterations);
    }
    {
        let mut side = spargio_side::Side::new(plan.streams, placement);
        let before = side.stats();
        let name = format!("spargio_{}", group.suffix);
        g.bench(&name, || assert_eq!(black_box(side.run(&plan)), want));
        report(&name, side.iterations());
        if stats && side.iterations() > 0 {
            print_stats(group.name, &before, &side.stats(), side.iterations());
        }
    }
    {
        let side = compio_side::Side::new(plan.streams, placement);
        let mut iterations = 0;
        let name = format!("compio_{}", group.suffix);
        g.bench(&name, || {
            iterations += 1;
            assert_eq!(black_box(side.run(&plan)), want)
        });
        report(&name, iterations);
    }
    g.finish();
}

fn main() {
    // Not `criterion_main!`: the placement is read once, and the groups
    // share the helpers above.
    let placement = Placement::from_env();
    let stats = std::env::var_os("SPARGIO_BENCH_NET_STATS").is_some();
    let mut c = Criterion::default().configure_from_args();
    let groups = [
        Group {
            name: "net_echo_rtt_256b",
            plan: Plan::rtt(),
            suffix: "tcp_echo_qd1",
        },
        Group {
            name: "net_stream_throughput_4k_window32",
            plan: Plan::throughput(),
            suffix: "tcp_echo_window32",
        },
        Group {
            name: "net_stream_imbalanced_4k_hot1_light7",
            plan: Plan::imbalanced(),
            suffix: "tcp_8streams_hotcold",
        },
        Group {
            name: "net_stream_hotspot_rotation_4k",
            plan: Plan::rotation(StageKind::Echo),
            suffix: "tcp_8streams_rotating_hotspot",
        },
        Group {
            name: "net_pipeline_hotspot_rotation_4k_window32",
            plan: Plan::pipeline(),
            suffix: "tcp_pipeline_hotspot",
        },
        Group {
            name: "net_keyed_hotspot_rotation_4k",
            plan: Plan::rotation(StageKind::Keyed),
            suffix: "tcp_keyed_router_hotspot",
        },
    ];
    for group in groups {
        run_group(&mut c, group, placement, stats);
    }
    c.final_summary();
}

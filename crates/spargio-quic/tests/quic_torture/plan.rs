//! What a run does, drawn from its seed before anything runs, and the
//! state both sides share while it runs.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use spargio_quic::{NativeProtoFaultSpec, QuicBackend};

use crate::check::Record;
use crate::rng::Rng;

/// Largest stream the peer sends (keyed data).
const MAX_PEER_SEND: usize = 768 << 10;

/// One run: the two endpoints, the transport, the streams, the end.
#[derive(Debug)]
pub struct Plan {
    pub seed: u64,
    /// Our side is the client (else the server).
    pub ours_client: bool,
    pub backend: QuicBackend,
    /// Both sides' stream receive window (and 4x for the connection), if
    /// small; else quinn's defaults.
    pub window: Option<u32>,
    /// Both sides' limit on concurrent incoming streams of each kind, if
    /// small (opens then wait for credit); else quinn's 100.
    pub stream_limit: Option<u32>,
    /// Our endpoint's `operation_timeout`.
    pub op_timeout: Option<Duration>,
    /// Datagram faults on our native drivers.
    pub faults: Option<NativeProtoFaultSpec>,
    pub streams: Vec<StreamPlan>,
    pub end: RunEnd,
}

/// How the connection ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunEnd {
    /// After every stream is done, our side closes it.
    CloseOurs,
    /// After every stream is done, the peer closes it.
    ClosePeer,
    /// After every stream is done, our side drops its connection handle,
    /// or first its endpoint: either closes the connection with code 0
    /// (their rustdoc).
    DropOurs { endpoint_first: bool },
    /// Mid-flight, this many ms after the handshake, by the peer or by us:
    /// every operation must still end; only prefixes are checked.
    Abort { by_peer: bool, after_ms: u64 },
}

/// One stream.
#[derive(Clone, Debug)]
pub struct StreamPlan {
    /// Opened by our side (else by the peer).
    pub ours_open: bool,
    pub bi: bool,
    /// The opener waits this long first.
    pub delay_ms: u64,
    /// Ours -> peer, with what the peer does with it.
    pub up: Option<PeerRecv>,
    /// Peer -> ours: what the peer sends.
    pub down: Option<PeerSend>,
    /// Seeds the halves' scripts (ours and the peer's).
    pub seed: u64,
}

/// The peer's receiving half.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PeerRecv {
    /// Reads to the end.
    ReadAll,
    /// Stops the stream (code [`codes::peer_stop`]) once it has this many
    /// bytes (or at the end, whichever comes first).
    StopAfter(u64),
}

/// The peer's sending half.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PeerSend {
    /// The keyed stream `key` for `len` bytes, then finish.
    Keyed { key: u64, len: usize },
    /// The keyed stream for `len` bytes, then a reset
    /// ([`codes::peer_reset`]).
    ResetAfter { key: u64, len: usize },
    /// What arrives on the stream's other direction, as it arrives; a
    /// reset of that direction resets this one ([`codes::echo_reset`]).
    Echo,
    /// Finish at once.
    Empty,
}

/// The application codes, one range per use, so a code says who sent it
/// for which stream.
pub mod codes {
    pub fn peer_stop(i: usize) -> u64 {
        100 + i as u64
    }
    pub fn peer_reset(i: usize) -> u64 {
        200 + i as u64
    }
    pub fn our_reset(i: usize) -> u64 {
        300 + i as u64
    }
    pub fn our_stop(i: usize) -> u64 {
        400 + i as u64
    }
    pub fn echo_reset(i: usize) -> u64 {
        500 + i as u64
    }
    /// Closes: ours, the peer's, and the mid-flight aborts.
    pub const CLOSE_OURS: u32 = 0x42;
    pub const CLOSE_PEER: u32 = 0x43;
    pub const ABORT: u32 = 0x44;
}

impl Plan {
    pub fn draw(seed: u64) -> Plan {
        let mut rng = Rng::new(seed);
        let ours_client = rng.pct(50);
        let backend = if rng.pct(15) {
            QuicBackend::Bridge
        } else {
            QuicBackend::Native
        };
        let window = rng.pct(30).then(|| 4096 << rng.below(6));
        let stream_limit = rng.pct(25).then(|| 1 + rng.below(4) as u32);
        let op_timeout = rng
            .pct(15)
            .then(|| Duration::from_millis(1 + rng.below(40)));
        let faults =
            (backend == QuicBackend::Native && rng.pct(20)).then(|| NativeProtoFaultSpec {
                drop_inbound: rng.below(4) as f64 / 100.0,
                drop_egress: rng.below(4) as f64 / 100.0,
                reorder_egress: rng.below(10) as f64 / 100.0,
                seed: rng.next_u64(),
            });
        let count = 1 + rng.below(10) as usize;
        let streams = (0..count).map(|_| StreamPlan::draw(&mut rng)).collect();
        let end = match rng.weighted(&[35, 30, 20, 15]) {
            0 => RunEnd::CloseOurs,
            1 => RunEnd::ClosePeer,
            2 => RunEnd::DropOurs {
                endpoint_first: rng.pct(50),
            },
            _ => RunEnd::Abort {
                by_peer: rng.pct(50),
                after_ms: rng.below(150),
            },
        };
        Plan {
            seed,
            ours_client,
            backend,
            window,
            stream_limit,
            op_timeout,
            faults,
            streams,
            end,
        }
    }

    pub fn aborts(&self) -> bool {
        matches!(self.end, RunEnd::Abort { .. })
    }

    /// Streams the peer opens, of one kind.
    pub fn peer_opened(&self, bi: bool) -> usize {
        self.streams
            .iter()
            .filter(|s| !s.ours_open && s.bi == bi)
            .count()
    }

    /// Streams we open, of one kind.
    pub fn ours_opened(&self, bi: bool) -> usize {
        self.streams
            .iter()
            .filter(|s| s.ours_open && s.bi == bi)
            .count()
    }
}

impl StreamPlan {
    fn draw(rng: &mut Rng) -> StreamPlan {
        let ours_open = rng.pct(60);
        let bi = rng.pct(60);
        let delay_ms = rng.below(40);
        let up = (ours_open || bi).then(|| match rng.weighted(&[75, 25]) {
            0 => PeerRecv::ReadAll,
            _ => PeerRecv::StopAfter(rng.size(256 << 10) as u64 - 1),
        });
        let down = (!ours_open || bi).then(|| {
            let echo = if ours_open && bi { 30 } else { 0 };
            let len = rng.size(MAX_PEER_SEND) - 1;
            match rng.weighted(&[55, 15, echo, 8]) {
                0 => PeerSend::Keyed {
                    key: rng.next_u64(),
                    len,
                },
                1 => PeerSend::ResetAfter {
                    key: rng.next_u64(),
                    len,
                },
                2 => PeerSend::Echo,
                _ => PeerSend::Empty,
            }
        });
        // An echo needs everything: the peer never stops its source.
        let up = match (down, up) {
            (Some(PeerSend::Echo), Some(_)) => Some(PeerRecv::ReadAll),
            (_, up) => up,
        };
        StreamPlan {
            ours_open,
            bi,
            delay_ms,
            up,
            down,
            seed: rng.next_u64(),
        }
    }

    /// The seed of one half's script: ours up, ours down, the peer's.
    pub fn half_seed(&self, which: u64) -> u64 {
        Rng::new(self.seed ^ which.wrapping_mul(0x9e37_79b9)).next_u64()
    }

    /// The keyed stream our side writes up.
    pub fn up_key(&self) -> u64 {
        self.half_seed(7)
    }
}

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "  ours: {} on {:?}; window {:?}, stream limit {:?}, op timeout {:?}, faults {:?}; \
             end {:?}",
            if self.ours_client { "client" } else { "server" },
            self.backend,
            self.window,
            self.stream_limit,
            self.op_timeout,
            self.faults,
            self.end
        )?;
        for (i, sp) in self.streams.iter().enumerate() {
            writeln!(f, "  s{i}: {sp}")?;
        }
        Ok(())
    }
}

impl fmt::Display for StreamPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} after {} ms",
            if self.ours_open {
                "ours-opened"
            } else {
                "peer-opened"
            },
            if self.bi { "bi" } else { "uni" },
            self.delay_ms
        )?;
        if let Some(up) = self.up {
            write!(f, "; up: peer {up:?}")?;
        }
        if let Some(down) = self.down {
            write!(f, "; down: peer {down:?}")?;
        }
        Ok(())
    }
}

/// What both sides share during a run.
pub struct Shared {
    pub plan: Plan,
    pub trace: Trace,
    /// Stream id -> index in the plan, written by the opener before the
    /// stream can reach the other side (before its first write).
    pub ids: Mutex<HashMap<u64, usize>>,
    /// Per stream, what each side saw (checked after the run).
    pub records: Mutex<Vec<Record>>,
    /// The peer's tasks have all ended.
    pub peer_done: AtomicBool,
    /// The peer's connection, for a close by the peer.
    pub peer_conn: Mutex<Option<quinn::Connection>>,
    /// What went wrong on the peer's side of the harness.
    pub peer_errors: Mutex<Vec<String>>,
}

impl Shared {
    pub fn new(plan: Plan, trace: Trace) -> Arc<Shared> {
        let records = (0..plan.streams.len()).map(|_| Record::default()).collect();
        Arc::new(Shared {
            plan,
            trace,
            ids: Mutex::new(HashMap::new()),
            records: Mutex::new(records),
            peer_done: AtomicBool::new(false),
            peer_conn: Mutex::new(None),
            peer_errors: Mutex::new(Vec::new()),
        })
    }

    pub fn log(&self, line: String) {
        self.trace.push(line);
    }

    pub fn register(&self, id: u64, index: usize) {
        lock(&self.ids).insert(id, index);
    }

    /// The plan index of stream `id`, once its opener has registered it.
    pub fn lookup(&self, id: u64) -> Option<usize> {
        lock(&self.ids).get(&id).copied()
    }

    pub fn record<T>(&self, index: usize, f: impl FnOnce(&mut Record) -> T) -> T {
        f(&mut lock(&self.records)[index])
    }
}

pub fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The run's trace: what each operation did, in the order they ended,
/// shared with the watchdog so a hang can print it.
#[derive(Clone, Default)]
pub struct Trace(Arc<Mutex<Vec<String>>>);

impl Trace {
    pub fn push(&self, line: String) {
        lock(&self.0).push(line);
    }

    pub fn len(&self) -> usize {
        lock(&self.0).len()
    }

    /// The last `max` lines.
    pub fn dump(&self, max: usize) -> String {
        let lines = lock(&self.0);
        let skip = lines.len().saturating_sub(max);
        let mut out = match skip {
            0 => String::new(),
            n => format!("  ... {n} earlier lines\n"),
        };
        for l in &lines[skip..] {
            out += &format!("  {l}\n");
        }
        out
    }
}

//! A connection task: one per connection, separate from the endpoint
//! task, as quinn's `ConnectionDriver` is. It is a local task pinned on a
//! shard (it sends from that shard's ring): at spawn its endpoint's shard,
//! where every datagram it gets arrives (a wake on the same shard costs
//! far less than one across shards, and connection-id routing already
//! spreads the connections over the per-shard endpoints; a lone driver's
//! go to the shard with the fewest instead; see [`spawn`]). Once
//! busy it decides, once, where to run ([`ConnTask::placement`]): it
//! hands the connection to a new task on the shard with the fewest live
//! connection tasks only when that evens the count out (the two ends of
//! a loopback connection whose endpoints share a shard would otherwise do
//! all their crypto there). (Stealable tasks would not do: they follow
//! their waker, and every wake of a connection task comes from its
//! endpoint task, so they would all gather on the endpoint's shard.)
//!
//! It owns the connection's protocol work: it feeds the datagrams the
//! endpoint task delivered to `Connection::handle_event` (decryption),
//! fires the connection's timer (`handle_timeout`, its own
//! `spargio::time::Sleep`), and produces: endpoint events and finished
//! (GSO) transmits (encryption) go to the endpoint task's outbox, at most
//! the connection's outbox share at a time (backpressure: it stops
//! calling `poll_endpoint_events`/`poll_transmit` at the share and the
//! endpoint task wakes it when an item is done); application events
//! (`poll()`) select the waiters to wake, which are called after the
//! connection lock is released, each inside `catch_unwind`.

use std::collections::VecDeque;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use std::rc::Rc;

use quinn_proto::{ConnectionEvent, Event, StreamEvent, Transmit};
use spargio::time::Sleep;

use super::conn::{wake_counted, ConnInner, ConnState};
use super::shared::{lock, Outgoing};
use super::types::NativeProtoEvent;
use super::udp::{shard_socket, SendDone, SendOp, UdpIo};
use super::waiters::WaitKind;

/// Passes per poll before yielding to the shard's other tasks.
const MAX_ROUNDS: usize = 16;

/// The most bytes one GSO send may carry (an IPv4 UDP payload is at most
/// 65,507 bytes; `EMSGSIZE` past it).
const MAX_GSO_BYTES: usize = 65_000;

/// UDP bytes (both directions) after which a connection that mostly
/// receives decides where to run (a short connection, e.g. a handshake,
/// never pays for a move).
const RECEIVER_DECIDES_AT: u64 = 512 * 1024;
/// The same for a connection that mostly sends: later, so that of a
/// loopback pair sharing a shard the receiver moves (its endpoint's
/// shard keeps the sender, whose acknowledgements arrive there: measured,
/// 22.8 ms per 16 MiB against 25.2 ms with the sender moved instead).
const SENDER_DECIDES_AT: u64 = 2 * 1024 * 1024;

/// Live connection tasks per shard (index modulo the array length), for
/// placement only.
static LIVE: [AtomicUsize; 64] = [const { AtomicUsize::new(0) }; 64];

/// Starts `inner`'s task: on its endpoint's shard when the endpoint is
/// one of a per-shard group routed by connection id (the routing spreads
/// the connections already), else on the shard with the fewest live
/// connection tasks (ties: the endpoint's shard first; a lone driver's
/// connections would otherwise all run on its shard). `src` is the
/// driver's socket, which the task `dup`s to send with (from that shard's
/// ring) only if the shard has no socket of this driver yet. The task may
/// move once, when busy (see [`ConnTask::placement`]).
pub(crate) fn spawn(
    handle: &spargio::RuntimeHandle,
    inner: Arc<ConnInner>,
    src: Option<Arc<std::net::UdpSocket>>,
    offload: bool,
) -> io::Result<()> {
    let owner = inner.driver.owner_shard;
    // Relaxed: set once when the group is made, before any connection.
    let shard = if inner.driver.cid_routed.load(Ordering::Relaxed) {
        owner
    } else {
        let n = handle.shard_count().max(1);
        (0..n)
            .map(|i| (owner + i) % n)
            // Relaxed: a placement heuristic.
            .min_by_key(|&s| LIVE[s % LIVE.len()].load(Ordering::Relaxed))
            .unwrap_or(owner)
    };
    spawn_on(handle, shard, inner, src, offload, false)
}

fn spawn_on(
    handle: &spargio::RuntimeHandle,
    shard: usize,
    inner: Arc<ConnInner>,
    src: Option<Arc<std::net::UdpSocket>>,
    offload: bool,
    settled: bool,
) -> io::Result<()> {
    let count = LiveCount::new(shard);
    let inner_for_report = inner.clone();
    let h = handle.clone();
    let spawned = handle.spawn_local_on(shard, move |_ctx| async move {
        // Built here, on its shard: the socket's ring is this shard's.
        let udp = src
            .as_deref()
            .and_then(|s| shard_socket(&h, inner.driver.id, s, offload).ok());
        ConnTask::new(inner, udp, src, count, h, offload, settled).await
    });
    match spawned {
        Ok(join) => {
            drop(join); // detached: it ends when stopped
            inner_for_report.set_task_shard(shard);
            Ok(())
        }
        // The closure (and its count) was dropped.
        Err(e) => Err(io::Error::other(e)),
    }
}

/// One live connection task on a shard (for placement).
struct LiveCount(usize);

impl LiveCount {
    fn new(shard: usize) -> LiveCount {
        LIVE[shard % LIVE.len()].fetch_add(1, Ordering::Relaxed);
        LiveCount(shard)
    }
}

impl Drop for LiveCount {
    fn drop(&mut self) {
        LIVE[self.0 % LIVE.len()].fetch_sub(1, Ordering::Relaxed);
    }
}

pub(crate) struct ConnTask {
    inner: Arc<ConnInner>,
    handle: spargio::RuntimeHandle,
    offload: bool,
    /// Decided where to run (it moves at most once).
    settled: bool,
    /// A successor task on another shard drives the connection; this one
    /// only finishes its sends in flight.
    moved: bool,
    /// This shard's socket of the driver: transmits are sent from here
    /// (none: they go through the endpoint task).
    udp: Option<Rc<UdpIo>>,
    /// The driver's socket, for a successor task to `dup` on its shard.
    src: Option<Arc<std::net::UdpSocket>>,
    /// Sends in flight on this shard's ring (they count against the
    /// outbox share too).
    sends: Vec<SendOp>,
    _count: LiveCount,
    timer: Option<Sleep>,
    events: VecDeque<ConnectionEvent>,
    bufs: Vec<Vec<u8>>,
    out: Vec<Outgoing>,
    wakers: Vec<Waker>,
    /// The handshake completed (reported once).
    established: bool,
}

/// What one pass changed beyond the connection itself.
#[derive(Default)]
struct PassOutcome {
    /// UDP bytes received and sent so far (until placement is settled).
    bytes: Option<(u64, u64)>,
    established_now: bool,
    lost: bool,
    deadline: Option<Instant>,
}

impl ConnTask {
    fn new(
        inner: Arc<ConnInner>,
        udp: Option<Rc<UdpIo>>,
        src: Option<Arc<std::net::UdpSocket>>,
        count: LiveCount,
        handle: spargio::RuntimeHandle,
        offload: bool,
        settled: bool,
    ) -> ConnTask {
        ConnTask {
            inner,
            handle,
            offload,
            settled,
            moved: false,
            udp,
            src,
            sends: Vec::new(),
            _count: count,
            timer: None,
            events: VecDeque::new(),
            bufs: Vec::new(),
            out: Vec::new(),
            wakers: Vec::new(),
            established: false,
        }
    }

    /// Room left in this connection's outbox share (its own sends in
    /// flight included).
    fn room(&self) -> bool {
        // Acquire: pairs with the endpoint's `outbox_done`.
        self.inner.outbox.load(Ordering::Acquire) + self.sends.len() < self.inner.outbox_share()
    }

    /// Sends `buf` from this shard, or hands it to the endpoint task
    /// (under fault injection, which the endpoint applies, or without a
    /// socket here).
    fn transmit(&mut self, direct: bool, mut buf: Vec<u8>, t: Transmit) {
        let Some(udp) = self.udp.as_ref().filter(|_| direct) else {
            self.push(Outgoing::Transmit(buf, t));
            return;
        };
        buf.truncate(t.size);
        self.inner
            .driver
            .counters
            .count_send(buf.len(), t.segment_size);
        let ecn = t.ecn.map(|e| e as u8);
        self.sends
            .push(udp.send(buf, t.destination, t.segment_size, ecn));
    }

    /// Polls this task's sends; returns whether any completed.
    fn poll_sends(&mut self, cx: &mut Context<'_>) -> bool {
        let mut done = false;
        let mut i = 0;
        while i < self.sends.len() {
            match self.sends[i].as_mut().poll(cx) {
                Poll::Ready(SendDone { res, mut buf }) => {
                    if res.is_err() {
                        // Relaxed: statistics.
                        self.inner
                            .driver
                            .counters
                            .send_errors
                            .fetch_add(1, Ordering::Relaxed);
                    }
                    drop(self.sends.swap_remove(i));
                    if self.bufs.len() < self.inner.outbox_share() {
                        buf.clear();
                        self.bufs.push(buf);
                    }
                    done = true;
                }
                Poll::Pending => i += 1,
            }
        }
        done
    }

    fn push(&mut self, item: Outgoing) {
        self.inner.outbox.fetch_add(1, Ordering::AcqRel);
        self.out.push(item);
    }

    fn endpoint_events(&mut self, st: &mut ConnState) {
        while self.room() {
            match st.conn.poll_endpoint_events() {
                Some(ev) => self.push(Outgoing::Event(ev)),
                None => break,
            }
        }
    }

    /// One pass over the connection; returns its next deadline.
    fn pass(&mut self, timer_due: bool) -> PassOutcome {
        let inner = self.inner.clone();
        let shared = &inner.driver;
        let now = Instant::now();
        let faults = shared.faults_active.load(Ordering::Relaxed);
        let direct = !faults && self.udp.is_some();
        let max_segments = match &self.udp {
            _ if faults => 1,
            Some(udp) => udp.max_segments(),
            None => shared.max_gso_segments.load(Ordering::Relaxed).max(1),
        };
        let mut out = PassOutcome::default();
        let mut st = inner.lock();
        inner.take_events(&mut st, &mut self.events);
        for ev in self.events.drain(..) {
            st.conn.handle_event(ev);
        }
        if timer_due {
            st.conn.handle_timeout(now);
        }
        // A GSO send's datagrams must fit one UDP payload (64 KiB).
        let max_segments =
            max_segments.min((MAX_GSO_BYTES / st.conn.current_mtu() as usize).max(1));
        for _ in 0..2 {
            self.endpoint_events(&mut st);
            while self.room() {
                let mut buf = self.bufs.pop().unwrap_or_default();
                buf.clear();
                match st.conn.poll_transmit(now, max_segments, &mut buf) {
                    Some(t) => self.transmit(direct, buf, t),
                    None => {
                        self.bufs.push(buf);
                        break;
                    }
                }
            }
            let mut events = false;
            while let Some(ev) = st.conn.poll() {
                events = true;
                self.on_event(&mut st, ev, &mut out);
            }
            if !events {
                break;
            }
        }
        // Application events can queue endpoint events (the `Drained` one
        // included): forward them.
        self.endpoint_events(&mut st);
        if st.error.is_some() {
            // Locally closed connections have no ConnectionLost event:
            // wake whatever registered since.
            st.waiters.take_all(&mut self.wakers);
        }
        out.deadline = st.conn.poll_timeout();
        if !self.settled {
            let stats = st.conn.stats();
            out.bytes = Some((stats.udp_rx.bytes, stats.udp_tx.bytes));
        }
        drop(st);
        if !self.out.is_empty() {
            shared.push_outgoing(&inner, &mut self.out);
        }
        wake_counted(shared, &mut self.wakers);
        out
    }

    fn on_event(&mut self, st: &mut ConnState, ev: Event, out: &mut PassOutcome) {
        match ev {
            Event::Connected => {
                st.established = true;
                out.established_now = true;
                st.peer_certs = peer_certs(&st.conn);
                st.waiters.take(WaitKind::Connected, &mut self.wakers);
            }
            Event::ConnectionLost { reason } => {
                if st.error.is_none() {
                    st.error = Some(reason);
                }
                out.lost = true;
                st.waiters.take_all(&mut self.wakers);
            }
            Event::Stream(se) => {
                if let StreamEvent::Finished { id } | StreamEvent::Stopped { id, .. } = se {
                    st.settled(id, &mut self.wakers);
                }
                let kind = match se {
                    StreamEvent::Opened { dir } => WaitKind::Accept(dir),
                    StreamEvent::Readable { id } => WaitKind::Read(id),
                    StreamEvent::Writable { id }
                    | StreamEvent::Finished { id }
                    | StreamEvent::Stopped { id, .. } => WaitKind::Write(id),
                    StreamEvent::Available { dir } => WaitKind::Open(dir),
                };
                st.waiters.take(kind, &mut self.wakers);
            }
            Event::DatagramReceived => st.waiters.take(WaitKind::Datagram, &mut self.wakers),
            Event::DatagramsUnblocked | Event::HandshakeDataReady => {}
        }
    }

    /// Accept-queue and statistics bookkeeping after a pass.
    fn after_pass(&mut self, out: &PassOutcome) {
        let inner = &self.inner;
        let shared = &inner.driver;
        if out.established_now && !self.established {
            self.established = true;
            // Relaxed: statistics.
            shared
                .counters
                .connections_established
                .fetch_add(1, Ordering::Relaxed);
            shared.event(NativeProtoEvent::ConnectionEstablished {
                connection_id: inner.id,
            });
            if inner.accept_reserved.swap(false, Ordering::AcqRel) {
                let panics = shared.accept.push_ready(inner.clone());
                shared
                    .counters
                    .waker_panics
                    .fetch_add(panics as u64, Ordering::Relaxed);
            }
        }
        if out.lost && inner.accept_reserved.swap(false, Ordering::AcqRel) {
            shared.accept.release();
        }
    }

    /// Where a busy connection should run, decided once from its UDP
    /// bytes (`rx`, `tx`); `Some` if it should move: to the shard with the
    /// fewest live connection tasks, when moving there evens the counts
    /// out (at least two fewer than here, this task included). A receiver
    /// decides first (see [`SENDER_DECIDES_AT`]). So a loopback pair
    /// whose endpoints share a shard splits its two ends' crypto over two
    /// shards, and connections spread evenly by their endpoints stay next
    /// to them.
    fn placement(&mut self, rx: u64, tx: u64) -> Option<usize> {
        let n = self.handle.shard_count().max(1);
        // Relaxed: a placement heuristic.
        let loads: Vec<usize> = (0..n)
            .map(|s| LIVE[s % LIVE.len()].load(Ordering::Relaxed))
            .collect();
        let (settled, to) = choose_shard(self._count.0, rx, tx, &loads);
        self.settled = settled;
        to
    }

    /// Hands the connection to a new task on `shard`; this one then only
    /// finishes its sends. Returns `false` (and stays) if that fails.
    fn move_to(&mut self, shard: usize) -> bool {
        let moved = spawn_on(
            &self.handle,
            shard,
            self.inner.clone(),
            self.src.clone(),
            self.offload,
            self.settled,
        )
        .is_ok();
        self.moved = moved;
        if moved {
            // Relaxed: statistics.
            self.inner
                .driver
                .counters
                .connection_moves
                .fetch_add(1, Ordering::Relaxed);
        }
        moved
    }

    /// Arms the timer for `deadline`; returns whether it is already due.
    fn poll_timer(&mut self, deadline: Option<Instant>, cx: &mut Context<'_>) -> bool {
        let Some(at) = deadline else {
            self.timer = None;
            return false;
        };
        let timer = self.timer.get_or_insert_with(|| Sleep::until(at));
        if timer.deadline() != at {
            timer.reset(at);
        }
        Pin::new(timer).poll(cx).is_ready()
    }

    fn count_fire(&self) {
        let shared = &self.inner.driver;
        // Relaxed: statistics.
        shared.counters.timer_fires.fetch_add(1, Ordering::Relaxed);
        lock(&shared.timer).fires += 1;
        shared.event(NativeProtoEvent::TimeoutFired { connections: 1 });
    }
}

impl Future for ConnTask {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        if this.moved {
            this.poll_sends(cx);
            return if this.sends.is_empty() {
                Poll::Ready(())
            } else {
                Poll::Pending
            };
        }
        let mut timer_due = this
            .timer
            .as_mut()
            .is_some_and(|t| Pin::new(t).poll(cx).is_ready());
        for _ in 0..MAX_ROUNDS {
            let inner = this.inner.clone();
            if !inner.begin_pass(cx.waker(), &mut this.bufs) || inner.driver.is_closed() {
                return Poll::Ready(());
            }
            this.poll_sends(cx);
            if timer_due {
                this.count_fire();
            }
            let out = this.pass(timer_due);
            this.after_pass(&out);
            if let Some((rx, tx)) = out.bytes {
                if let Some(shard) = this.placement(rx, tx) {
                    if this.move_to(shard) {
                        this.timer = None;
                        this.poll_sends(cx);
                        return if this.sends.is_empty() {
                            Poll::Ready(())
                        } else {
                            Poll::Pending
                        };
                    }
                }
            }
            timer_due = this.poll_timer(out.deadline, cx);
            // A send that completed frees room for more transmits.
            let freed = this.poll_sends(cx);
            if !timer_due && !freed {
                return Poll::Pending;
            }
        }
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

/// [`ConnTask::placement`]'s rule: whether the decision is made now, and
/// the shard to move to. `loads` are the live connection tasks per shard
/// (this one counted on `here`).
fn choose_shard(here: usize, rx: u64, tx: u64, loads: &[usize]) -> (bool, Option<usize>) {
    let total = rx.saturating_add(tx);
    let decides_at = if rx >= tx {
        RECEIVER_DECIDES_AT
    } else {
        SENDER_DECIDES_AT
    };
    if total < decides_at {
        return (false, None);
    }
    let n = loads.len().max(1);
    let load = |s: usize| loads.get(s).copied().unwrap_or(0);
    let best = (0..n).map(|i| (here + i) % n).min_by_key(|&s| load(s));
    (true, best.filter(|&b| load(b) + 1 < load(here)))
}

fn peer_certs(conn: &quinn_proto::Connection) -> Option<Vec<Vec<u8>>> {
    let any = conn.crypto_session().peer_identity()?;
    let certs = any
        .downcast::<Vec<rustls_pki_types::CertificateDer<'static>>>()
        .ok()?;
    Some(certs.iter().map(|c| c.as_ref().to_vec()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1024 * 1024;

    #[test]
    fn a_short_connection_never_decides() {
        assert_eq!(choose_shard(1, 1000, 1000, &[0, 2]), (false, None));
        assert_eq!(choose_shard(1, 1000, MIB, &[0, 2]), (false, None));
    }

    #[test]
    fn a_receiver_decides_before_a_sender() {
        assert_eq!(choose_shard(0, MIB, 1000, &[2, 0]), (true, Some(1)));
        assert_eq!(choose_shard(0, 1000, MIB, &[2, 0]), (false, None));
        assert_eq!(choose_shard(0, 1000, 4 * MIB, &[2, 0]), (true, Some(1)));
    }

    #[test]
    fn a_move_must_even_the_counts_out() {
        // A loopback pair on one shard: one of them moves.
        assert_eq!(choose_shard(0, MIB, 1000, &[2, 0]), (true, Some(1)));
        // One apart: moving would only swap the imbalance.
        assert_eq!(choose_shard(0, MIB, 1000, &[1, 0]), (true, None));
        assert_eq!(choose_shard(1, MIB, 1000, &[4, 5]), (true, None));
        // Balanced: stays by its endpoint.
        assert_eq!(choose_shard(1, 0, 4 * MIB, &[1, 1]), (true, None));
        // The least-loaded of several.
        assert_eq!(choose_shard(2, MIB, 0, &[3, 1, 5, 2]), (true, Some(1)));
    }
}

//! What a driver shares with the handles and connection tasks on other
//! shards: the command queue, the connection tasks' outbox, the driver
//! task's waker, counters, and the endpoint's accept queue.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::task::{Context, Poll, Waker};

use bytes::Bytes;

use super::conn::ConnInner;
use super::deal::{Datagram, DealGroup, FORWARD_QUEUE_CAP};
use super::faults::{FaultCounters, NativeProtoFaultSpec};
use super::types::{
    DriverCounters, EventLog, NativeProtoEvent, NativeProtoTimerState, NativeProtoTransportTuning,
};
use super::waiters::{wake_all, WaitKind, Waiters};
use crate::error::driver_closed;

/// Locks `m`, ignoring poisoning: every critical section here leaves the
/// data consistent before anything that can panic runs (wakers are called
/// outside locks).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A one-value reply slot from the driver to a waiting future.
#[derive(Debug)]
pub(crate) struct Oneshot<T> {
    slot: Mutex<(Option<T>, Option<Waker>)>,
}

impl<T> Oneshot<T> {
    pub(crate) fn new() -> Arc<Oneshot<T>> {
        Arc::new(Oneshot {
            slot: Mutex::new((None, None)),
        })
    }

    /// Stores the value and wakes the receiver (outside the lock).
    pub(crate) fn send(&self, value: T) {
        let waker = {
            let mut s = lock(&self.slot);
            s.0 = Some(value);
            s.1.take()
        };
        wake_all(&mut waker.into_iter().collect());
    }

    pub(crate) fn poll_recv(&self, cx: &mut Context<'_>) -> Poll<T> {
        let mut s = lock(&self.slot);
        match s.0.take() {
            Some(v) => Poll::Ready(v),
            None => {
                s.1 = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

/// A request from a handle to the driver task.
pub(crate) enum Command {
    Connect {
        config: quinn_proto::ClientConfig,
        addr: SocketAddr,
        server_name: String,
        reply: Arc<Oneshot<io::Result<Arc<ConnInner>>>>,
    },
    SetServerConfig(Option<Arc<quinn_proto::ServerConfig>>),
    SetFaults(NativeProtoFaultSpec),
    SetTuning(NativeProtoTransportTuning),
    CloseAll {
        code: quinn_proto::VarInt,
        reason: Bytes,
    },
    Shutdown,
}

/// What a connection task hands the endpoint task, in order.
pub(crate) enum Outgoing {
    /// A finished (GSO) batch to send.
    Transmit(Vec<u8>, quinn_proto::Transmit),
    /// An event for `Endpoint::handle_event`.
    Event(quinn_proto::EndpointEvent),
}

/// Queued requests. Only connects queue up (bounded by
/// `max_inflight_ops`); every other request replaces the pending one of
/// its kind (the driver applies the latest), so they need no bound. The
/// outbox is bounded by the connection count times each connection's
/// share ([`ConnInner::outbox`]).
#[derive(Default)]
struct Signal {
    waker: Option<Waker>,
    outbox: Vec<(Arc<ConnInner>, Outgoing)>,
    connects: VecDeque<Command>,
    server_config: Option<Command>,
    faults: Option<Command>,
    tuning: Option<Command>,
    close: Option<Command>,
    shutdown: Option<Command>,
    /// Connection attempts other drivers of the group dealt to this one
    /// (at most `FORWARD_QUEUE_CAP`).
    forwarded: VecDeque<Datagram>,
}

/// The state one driver shares with every handle.
pub(crate) struct DriverShared {
    pub(crate) id: u64,
    pub(crate) owner_shard: usize,
    pub(crate) local_addr: SocketAddr,
    pub(crate) max_inflight: usize,
    /// Ring sends in flight at most (`max_pending_transmits`); also each
    /// connection's outbox share.
    pub(crate) max_sends: usize,
    /// Fault injection is on: connection tasks send one datagram per
    /// transmit (no GSO), so faults hit single datagrams.
    pub(crate) faults_active: AtomicBool,
    signal: Mutex<Signal>,
    /// Set by `notify`, cleared by the driver before it drains `signal`:
    /// repeated notifications between two driver passes wake it once.
    notified: AtomicBool,
    pub(crate) closed: AtomicBool,
    pub(crate) connections: AtomicUsize,
    pub(crate) max_gso_segments: AtomicUsize,
    pub(crate) gro: AtomicBool,
    /// The group's routing program is attached (see `route.rs`).
    pub(crate) cid_routed: AtomicBool,
    /// The server group this driver deals new connections over (see
    /// `deal.rs`); unset for a lone driver and a client's.
    pub(crate) deal: OnceLock<Arc<DealGroup>>,
    /// Receives the driver keeps waiting now (see `driver_task/io.rs`).
    pub(crate) receives_armed: AtomicUsize,
    /// A `dup` of the driver's socket while it runs (made at its first
    /// connection): connection tasks `dup` it again for their shard (see
    /// `udp::shard_socket`), and a local close sends its packet on it,
    /// the one send made outside the rings (see `ConnInner::close`).
    /// Dropped when the driver ends, so a handle kept after that holds no
    /// descriptor.
    pub(crate) socket_dup: Mutex<Option<Arc<std::net::UdpSocket>>>,
    pub(crate) counters: DriverCounters,
    pub(crate) fault_counters: FaultCounters,
    pub(crate) events: EventLog,
    pub(crate) registry: Mutex<HashMap<u64, Weak<ConnInner>>>,
    pub(crate) tuning: Mutex<NativeProtoTransportTuning>,
    pub(crate) timer: Mutex<NativeProtoTimerState>,
    pub(crate) accept: Arc<AcceptQueue>,
    /// `wait_idle()` futures waiting for the connection count to reach 0.
    idle_waiters: Mutex<Vec<Waker>>,
}

impl std::fmt::Debug for DriverShared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DriverShared")
            .field("id", &self.id)
            .field("owner_shard", &self.owner_shard)
            .field("local_addr", &self.local_addr)
            .finish_non_exhaustive()
    }
}

static NEXT_DRIVER_ID: AtomicU64 = AtomicU64::new(1);

impl DriverShared {
    pub(crate) fn new(
        owner_shard: usize,
        local_addr: SocketAddr,
        max_inflight: usize,
        max_sends: usize,
        accept: Arc<AcceptQueue>,
    ) -> DriverShared {
        DriverShared {
            // Relaxed: a unique id, nothing published through it.
            id: NEXT_DRIVER_ID.fetch_add(1, Ordering::Relaxed),
            owner_shard,
            local_addr,
            max_inflight: max_inflight.max(1),
            max_sends: max_sends.max(1),
            faults_active: AtomicBool::new(false),
            signal: Mutex::new(Signal::default()),
            notified: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            connections: AtomicUsize::new(0),
            max_gso_segments: AtomicUsize::new(1),
            gro: AtomicBool::new(false),
            cid_routed: AtomicBool::new(false),
            deal: OnceLock::new(),
            receives_armed: AtomicUsize::new(1),
            socket_dup: Mutex::new(None),
            counters: DriverCounters::default(),
            fault_counters: FaultCounters::default(),
            events: EventLog::default(),
            registry: Mutex::new(HashMap::new()),
            tuning: Mutex::new(NativeProtoTransportTuning::default()),
            timer: Mutex::new(NativeProtoTimerState::default()),
            accept,
            idle_waiters: Mutex::new(Vec::new()),
        }
    }

    /// Wakes the `wait_idle()` futures (no connections left, or shut down).
    pub(crate) fn wake_idle(&self) {
        let mut wakers = std::mem::take(&mut *lock(&self.idle_waiters));
        wake_all(&mut wakers);
    }

    /// Ready once the driver holds no connection (or has shut down).
    pub(crate) fn poll_idle(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut w = lock(&self.idle_waiters);
        // Relaxed: the count is re-checked under the lock the driver takes
        // (via `wake_idle`) after changing it.
        if self.connections.load(Ordering::Relaxed) == 0 || self.is_closed() {
            return Poll::Ready(Ok(()));
        }
        if !w.iter().any(|x| x.will_wake(cx.waker())) {
            if w.len() >= self.max_inflight {
                return Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::WouldBlock,
                    "spargio-quic: too many wait_idle() calls (max_inflight_ops)",
                )));
            }
            w.push(cx.waker().clone());
        }
        Poll::Pending
    }

    pub(crate) fn is_closed(&self) -> bool {
        // Acquire: pairs with the driver's Release store at shutdown.
        self.closed.load(Ordering::Acquire)
    }

    /// Queues `cmd`: a connect over `max_inflight` queued ones gives
    /// `WouldBlock`; any other request replaces the pending one of its
    /// kind.
    pub(crate) fn command(&self, cmd: Command) -> io::Result<()> {
        if self.is_closed() {
            return Err(driver_closed());
        }
        {
            let mut s = lock(&self.signal);
            let slot = match cmd {
                Command::Connect { .. } => {
                    if s.connects.len() >= self.max_inflight {
                        drop(s);
                        self.backpressure(0);
                        return Err(io::Error::new(
                            io::ErrorKind::WouldBlock,
                            "spargio-quic: driver command queue full (max_inflight_ops)",
                        ));
                    }
                    s.connects.push_back(cmd);
                    drop(s);
                    self.notify();
                    return Ok(());
                }
                Command::SetServerConfig(_) => &mut s.server_config,
                Command::SetFaults(_) => &mut s.faults,
                Command::SetTuning(_) => &mut s.tuning,
                Command::CloseAll { .. } => &mut s.close,
                Command::Shutdown => &mut s.shutdown,
            };
            *slot = Some(cmd);
        }
        self.notify();
        Ok(())
    }

    /// Another driver of the group: hands this one a connection attempt
    /// (see `deal.rs`). Gives it back if this driver is closed or already
    /// holds `FORWARD_QUEUE_CAP` of them.
    pub(crate) fn forward(&self, f: Datagram) -> Result<(), Datagram> {
        if self.is_closed() {
            return Err(f);
        }
        {
            let mut s = lock(&self.signal);
            if s.forwarded.len() >= FORWARD_QUEUE_CAP {
                return Err(f);
            }
            s.forwarded.push_back(f);
        }
        self.notify();
        Ok(())
    }

    /// Connection task: hands its transmits and endpoint events to the
    /// endpoint task (each already counted in `conn.outbox`).
    pub(crate) fn push_outgoing(&self, conn: &Arc<ConnInner>, items: &mut Vec<Outgoing>) {
        {
            let mut s = lock(&self.signal);
            s.outbox
                .extend(items.drain(..).map(|item| (conn.clone(), item)));
        }
        self.notify();
    }

    /// Wakes the driver task unless a wake is already pending.
    pub(crate) fn notify(&self) {
        // AcqRel: pairs with the driver's swap(false) before it drains the
        // signal, so a push after that drain always wakes it again.
        if self.notified.swap(true, Ordering::AcqRel) {
            return;
        }
        let waker = lock(&self.signal).waker.clone();
        if let Some(w) = waker {
            // The driver's own task waker (spargio's), not user code.
            w.wake();
        }
    }

    /// Driver side: registers its waker and takes what is queued.
    pub(crate) fn take_signal(
        &self,
        waker: &Waker,
        outbox: &mut Vec<(Arc<ConnInner>, Outgoing)>,
        commands: &mut VecDeque<Command>,
        forwarded: &mut VecDeque<Datagram>,
    ) {
        // Cleared before draining: a `notify` after this point sees
        // false and wakes the driver again. The lock below orders the
        // store before the drain.
        self.notified.store(false, Ordering::Release);
        let mut s = lock(&self.signal);
        match &s.waker {
            Some(w) if w.will_wake(waker) => {}
            _ => s.waker = Some(waker.clone()),
        }
        outbox.append(&mut s.outbox);
        // Configuration first, so connects made in the same pass use it;
        // shutdown last.
        let s = &mut *s;
        for slot in [
            &mut s.server_config,
            &mut s.faults,
            &mut s.tuning,
            &mut s.close,
        ] {
            commands.extend(slot.take());
        }
        commands.append(&mut s.connects);
        commands.extend(s.shutdown.take());
        forwarded.append(&mut s.forwarded);
    }

    pub(crate) fn backpressure(&self, connection_id: u64) {
        // Relaxed: statistics.
        self.counters.backpressure.fetch_add(1, Ordering::Relaxed);
        self.event(NativeProtoEvent::Backpressure { connection_id });
    }

    pub(crate) fn event(&self, event: NativeProtoEvent) {
        self.events.push(event, &self.counters);
    }

    pub(crate) fn tuning(&self) -> NativeProtoTransportTuning {
        *lock(&self.tuning)
    }

    /// The connection with stable id `id`, if the driver still holds it.
    pub(crate) fn connection(&self, id: u64) -> io::Result<Arc<ConnInner>> {
        lock(&self.registry)
            .get(&id)
            .and_then(Weak::upgrade)
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("spargio-quic: no connection {id} on this driver"),
                )
            })
    }
}

/// Established server connections not yet taken by `accept()`, shared by
/// all drivers of one endpoint. Bounded: `pending` (handshaking) plus
/// `ready` never exceeds `cap`; the driver refuses an incoming connection
/// (`Incoming::refuse`) instead of exceeding it.
#[derive(Debug)]
pub(crate) struct AcceptQueue {
    inner: Mutex<AcceptInner>,
    cap: usize,
}

#[derive(Debug)]
struct AcceptInner {
    ready: VecDeque<Arc<ConnInner>>,
    pending: usize,
    waiters: Waiters,
    /// Drivers still running; at zero `accept()` gives `BrokenPipe`.
    live_drivers: usize,
}

impl AcceptQueue {
    pub(crate) fn new(cap: usize, max_waiters: usize) -> Arc<AcceptQueue> {
        Arc::new(AcceptQueue {
            inner: Mutex::new(AcceptInner {
                ready: VecDeque::new(),
                pending: 0,
                waiters: Waiters::new(max_waiters),
                live_drivers: 0,
            }),
            cap: cap.max(1),
        })
    }

    pub(crate) fn driver_started(&self) {
        lock(&self.inner).live_drivers += 1;
    }

    /// A driver stopped; the last one wakes every waiting `accept()`.
    pub(crate) fn driver_stopped(&self) {
        let mut wakers = Vec::new();
        {
            let mut q = lock(&self.inner);
            q.live_drivers -= 1;
            if q.live_drivers == 0 {
                q.waiters.take_all(&mut wakers);
            }
        }
        wake_all(&mut wakers);
    }

    /// Reserves room for one handshaking connection; `false` when full.
    pub(crate) fn try_reserve(&self) -> bool {
        let mut q = lock(&self.inner);
        if q.pending + q.ready.len() >= self.cap {
            return false;
        }
        q.pending += 1;
        true
    }

    /// A reserved connection's handshake failed.
    pub(crate) fn release(&self) {
        let mut q = lock(&self.inner);
        q.pending = q.pending.saturating_sub(1);
    }

    /// A reserved connection is established: queue it, wake the waiters.
    pub(crate) fn push_ready(&self, conn: Arc<ConnInner>) -> usize {
        let mut wakers = Vec::new();
        {
            let mut q = lock(&self.inner);
            q.pending = q.pending.saturating_sub(1);
            q.ready.push_back(conn);
            q.waiters
                .take(WaitKind::Accept(quinn_proto::Dir::Bi), &mut wakers);
        }
        wake_all(&mut wakers)
    }

    /// Takes a ready connection, or registers the waiter `key`.
    pub(crate) fn poll_take(
        &self,
        key: &mut u64,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<Arc<ConnInner>>> {
        let mut q = lock(&self.inner);
        if let Some(conn) = q.ready.pop_front() {
            q.waiters.remove(*key);
            return Poll::Ready(Ok(conn));
        }
        if q.live_drivers == 0 {
            q.waiters.remove(*key);
            return Poll::Ready(Err(driver_closed()));
        }
        if *key == 0 {
            *key = super::waiters::next_wait_key();
        }
        match q
            .waiters
            .register(*key, WaitKind::Accept(quinn_proto::Dir::Bi), cx.waker())
        {
            Ok(()) => Poll::Pending,
            Err(e) => Poll::Ready(Err(e)),
        }
    }

    /// Forgets the waiter `key` (its `accept()` future was dropped).
    pub(crate) fn cancel(&self, key: u64) {
        if key != 0 {
            lock(&self.inner).waiters.remove(key);
        }
    }

    /// Ready connections not yet taken.
    pub(crate) fn ready_len(&self) -> usize {
        lock(&self.inner).ready.len()
    }
}

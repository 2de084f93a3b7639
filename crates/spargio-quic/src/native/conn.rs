//! One connection's shared state and the operations handles perform on
//! it from any shard.
//!
//! A handle locks [`ConnState`], calls quinn-proto directly (a stream
//! write lands in quinn-proto's send buffer; a read takes a `Bytes` chunk
//! out of its receive buffer), registers its waker if it must wait, and
//! if it changed anything marks the connection dirty, which wakes the
//! connection's own task once (`notified` flag). That task
//! (`conn_task.rs`) then produces the packets.
//!
//! The endpoint task reaches the connection task through the
//! [`Mailbox`]: received datagrams (`ConnectionEvent`s, bounded by
//! [`EVENT_QUEUE_CAP`]; past it the endpoint task feeds the event to
//! quinn-proto itself, so nothing is dropped), send buffers coming back
//! after their send completed, and the stop request.

use std::collections::{HashSet, VecDeque};
use std::future::poll_fn;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use bytes::Bytes;
use quinn_proto::{ConnectionError, ConnectionEvent, ConnectionHandle, Dir, StreamId, VarInt};

use super::shared::{lock, DriverShared};
use super::waiters::{next_wait_key, wake_all, WaitKind, Waiters};
use crate::error::{from_connection_error, from_datagram_error};

/// Received datagrams a connection's mailbox holds at most; past it the
/// endpoint task hands the event to quinn-proto itself (under the
/// connection lock) instead of queueing it.
pub(crate) const EVENT_QUEUE_CAP: usize = 512;

/// A connection as shared by the endpoint task, its connection task and
/// the handles.
pub(crate) struct ConnInner {
    /// Stable id (unique in the process).
    pub(crate) id: u64,
    pub(crate) ch: ConnectionHandle,
    pub(crate) state: Mutex<ConnState>,
    /// What the endpoint task hands the connection task (a short lock,
    /// never held while taking `state`).
    mailbox: Mutex<Mailbox>,
    /// Set while a wake of the connection task is pending.
    notified: AtomicBool,
    /// Items (transmits, endpoint events) this connection handed to the
    /// endpoint task that it has not finished with; the connection task
    /// stops producing at [`outbox_share`](Self::outbox_share) and is
    /// woken when the count drops below it.
    pub(crate) outbox: AtomicUsize,
    /// Holds a slot in the accept queue until established or failed.
    pub(crate) accept_reserved: AtomicBool,
    /// The shard the connection's task was last spawned on (`usize::MAX`:
    /// none yet); for `NativeProtoConnectionState::task_shard`.
    task_shard: AtomicUsize,
    pub(crate) driver: Arc<DriverShared>,
}

/// The endpoint task's side of a connection task.
#[derive(Default)]
pub(crate) struct Mailbox {
    pub(crate) events: VecDeque<ConnectionEvent>,
    /// Send buffers back from the endpoint (at most the outbox share).
    pub(crate) bufs: Vec<Vec<u8>>,
    pub(crate) waker: Option<Waker>,
    /// The endpoint removed the connection or shut down: the task ends.
    pub(crate) stopped: bool,
    /// Events queued so far (saturating), for [`Queued::Young`].
    queued: u32,
}

/// Events a connection gets before it is no longer young: a handshake
/// and what follows it (the server's `HANDSHAKE_DONE`, new connection
/// ids, the first path MTU probes and their acknowledgements, a prompt
/// close) take about ten.
const YOUNG_EVENTS: u32 = 16;

/// What [`ConnInner::queue_event`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Queued {
    /// The task has stopped: nothing to wake.
    Stopped,
    /// Queued for a connection within its first [`YOUNG_EVENTS`]: its
    /// datagrams come in flights, back to back.
    Young,
    /// Queued.
    Old,
}

impl std::fmt::Debug for ConnInner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnInner")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

/// The quinn-proto connection and what waits on it.
pub(crate) struct ConnState {
    pub(crate) conn: quinn_proto::Connection,
    /// Why the connection ended (set once).
    pub(crate) error: Option<ConnectionError>,
    pub(crate) established: bool,
    pub(crate) waiters: Waiters,
    /// Live user handles (connections and streams); the last one to go
    /// closes the connection with code 0.
    pub(crate) refs: usize,
    pub(crate) peer_certs: Option<Vec<Vec<u8>>>,
    pub(crate) datagrams_sent: u64,
    pub(crate) datagrams_received: u64,
    /// Send streams finished here whose data the peer has not yet
    /// acknowledged in full: added at `finish`, removed at quinn-proto's
    /// `Finished` (all acknowledged) or `Stopped` event, or a reset. At most
    /// the streams with data in flight.
    pub(crate) unacked: HashSet<StreamId>,
}

impl ConnState {
    /// `id` was finished: its data counts as unacknowledged until its
    /// `Finished` event.
    pub(crate) fn finished(&mut self, id: StreamId) {
        self.unacked.insert(id);
    }

    /// `id` needs no acknowledgement any more (all acknowledged, stopped
    /// by the peer, or reset here); wakes the `Acked` waiters once none is
    /// left.
    pub(crate) fn settled(&mut self, id: StreamId, wakers: &mut Vec<Waker>) {
        if self.unacked.remove(&id) && self.unacked.is_empty() {
            self.waiters.take(WaitKind::Acked, wakers);
        }
    }
}

/// What one attempt of an operation decided.
pub(crate) enum Step<T> {
    Done(io::Result<T>),
    Wait(WaitKind),
}

impl ConnInner {
    pub(crate) fn new(
        id: u64,
        ch: ConnectionHandle,
        conn: quinn_proto::Connection,
        driver: Arc<DriverShared>,
    ) -> Arc<ConnInner> {
        let max = driver.max_inflight;
        Arc::new(ConnInner {
            id,
            ch,
            state: Mutex::new(ConnState {
                conn,
                error: None,
                established: false,
                waiters: Waiters::new(max),
                refs: 0,
                peer_certs: None,
                datagrams_sent: 0,
                datagrams_received: 0,
                unacked: HashSet::new(),
            }),
            mailbox: Mutex::new(Mailbox::default()),
            notified: AtomicBool::new(false),
            outbox: AtomicUsize::new(0),
            accept_reserved: AtomicBool::new(false),
            task_shard: AtomicUsize::new(usize::MAX),
            driver,
        })
    }

    /// The connection task now runs on `shard`.
    pub(crate) fn set_task_shard(&self, shard: usize) {
        // Relaxed: a report, not a synchronisation.
        self.task_shard.store(shard, Ordering::Relaxed);
    }

    /// The shard running the connection's task, once spawned.
    pub(crate) fn task_shard(&self) -> Option<usize> {
        // Relaxed: see `set_task_shard`.
        Some(self.task_shard.load(Ordering::Relaxed)).filter(|&s| s != usize::MAX)
    }

    /// How many outbox items one connection may have with the endpoint.
    pub(crate) fn outbox_share(&self) -> usize {
        self.driver.max_sends
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, ConnState> {
        lock(&self.state)
    }

    /// Wakes the connection task (once until it runs again).
    pub(crate) fn mark_dirty(self: &Arc<Self>) {
        // AcqRel: pairs with the task's `begin_pass` store; whoever flips
        // it to true wakes the task.
        if !self.notified.swap(true, Ordering::AcqRel) {
            let waker = lock(&self.mailbox).waker.clone();
            if let Some(w) = waker {
                // The connection task's own (spargio) waker, not user code.
                w.wake();
            }
        }
    }

    /// Connection task: clears the wake flag, registers its waker and
    /// takes the send buffers that came back. Returns `false` once
    /// stopped.
    pub(crate) fn begin_pass(&self, waker: &Waker, bufs: &mut Vec<Vec<u8>>) -> bool {
        // Cleared before draining: a `mark_dirty` after this point wakes
        // the task again. The lock below orders the store before it.
        self.notified.store(false, Ordering::Release);
        let mut mb = lock(&self.mailbox);
        if mb.stopped {
            return false;
        }
        match &mb.waker {
            Some(w) if w.will_wake(waker) => {}
            _ => mb.waker = Some(waker.clone()),
        }
        bufs.append(&mut mb.bufs);
        true
    }

    /// Connection task, under the connection lock: takes the delivered
    /// datagrams (the endpoint's overflow path takes them under the same
    /// lock, so they are handled in arrival order).
    pub(crate) fn take_events(
        &self,
        _locked: &mut ConnState,
        events: &mut VecDeque<ConnectionEvent>,
    ) {
        events.append(&mut lock(&self.mailbox).events);
    }

    /// Endpoint task: hands a received datagram's event to the connection
    /// task (past [`EVENT_QUEUE_CAP`] queued ones it is handled here) and
    /// wakes it.
    pub(crate) fn deliver(self: &Arc<Self>, event: ConnectionEvent) {
        if self.queue_event(event) != Queued::Stopped {
            self.mark_dirty();
        }
    }

    /// Endpoint task: [`deliver`](Self::deliver) without the wake, for a
    /// batch of datagrams whose connections are woken once at its end (a
    /// task woken at the first datagram of a flight would answer each
    /// datagram with its own acknowledgement). The task needs waking
    /// unless it has stopped.
    pub(crate) fn queue_event(self: &Arc<Self>, event: ConnectionEvent) -> Queued {
        let (overflow, queued) = {
            let mut mb = lock(&self.mailbox);
            if mb.stopped {
                return Queued::Stopped;
            }
            let queued = if mb.queued < YOUNG_EVENTS {
                Queued::Young
            } else {
                Queued::Old
            };
            mb.queued = mb.queued.saturating_add(1);
            let overflow = if mb.events.len() < EVENT_QUEUE_CAP {
                mb.events.push_back(event);
                None
            } else {
                Some(event)
            };
            (overflow, queued)
        };
        if let Some(event) = overflow {
            // Under the connection lock, after the queued events (the
            // task also takes them under it), so datagrams stay in order:
            // quinn-proto takes reordering for loss.
            let mut st = self.lock();
            let held = std::mem::take(&mut lock(&self.mailbox).events);
            for ev in held {
                st.conn.handle_event(ev);
            }
            st.conn.handle_event(event);
        }
        queued
    }

    /// Endpoint task: one outbox item is done (a transmit sent or
    /// dropped, an endpoint event handled); `buf` goes back to the task.
    pub(crate) fn outbox_done(self: &Arc<Self>, buf: Option<Vec<u8>>) {
        let share = self.outbox_share();
        if let Some(mut buf) = buf {
            let mut mb = lock(&self.mailbox);
            if mb.bufs.len() < share {
                buf.clear();
                mb.bufs.push(buf);
            }
        }
        // AcqRel: the task reads the count before producing more.
        if self.outbox.fetch_sub(1, Ordering::AcqRel) == share {
            self.mark_dirty();
        }
    }

    /// Endpoint task: the connection is gone (drained, or the driver
    /// stopped); its task ends at its next poll.
    pub(crate) fn stop(self: &Arc<Self>) {
        let waker = {
            let mut mb = lock(&self.mailbox);
            mb.stopped = true;
            mb.events.clear();
            mb.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }

    /// One attempt of an operation: `f` runs under the lock; if it waits,
    /// the future's waker is registered under `key` (over the bound:
    /// `WouldBlock`). Marks the connection dirty if `f` asked to.
    pub(crate) fn poll_step<T>(
        self: &Arc<Self>,
        key: &mut u64,
        cx: &mut Context<'_>,
        f: impl FnOnce(&mut ConnState, &mut bool) -> Step<T>,
    ) -> Poll<io::Result<T>> {
        let mut dirty = false;
        let out = {
            let mut st = self.lock();
            match f(&mut st, &mut dirty) {
                Step::Done(r) => {
                    if *key != 0 {
                        st.waiters.remove(*key);
                    }
                    Poll::Ready(r)
                }
                Step::Wait(kind) => {
                    if *key == 0 {
                        *key = next_wait_key();
                    }
                    match st.waiters.register(*key, kind, cx.waker()) {
                        Ok(()) => Poll::Pending,
                        Err(e) => Poll::Ready(Err(e)),
                    }
                }
            }
        };
        if let Poll::Ready(Err(e)) = &out {
            if e.kind() == io::ErrorKind::WouldBlock {
                self.driver.backpressure(self.id);
            }
        }
        if dirty {
            self.mark_dirty();
        }
        out
    }

    /// Runs `f` until it is done, waiting as it asks.
    pub(crate) async fn run<T>(
        self: &Arc<Self>,
        mut f: impl FnMut(&mut ConnState, &mut bool) -> Step<T>,
    ) -> io::Result<T> {
        let mut guard = WaitGuard {
            conn: self.clone(),
            key: 0,
        };
        poll_fn(|cx| {
            let conn = guard.conn.clone();
            conn.poll_step(&mut guard.key, cx, &mut f)
        })
        .await
    }

    /// Closes the connection locally (idempotent) and wakes everything
    /// waiting on it.
    ///
    /// On an established server connection the caller sends the close
    /// packet itself, with one non-blocking `sendto` on the driver's
    /// socket, rather than leaving it to the connection task: that task
    /// is pinned on its shard, and a wake from another shard waits there
    /// behind whatever that shard is running (under a burst of
    /// handshakes, other connections' crypto), while the peer goes on
    /// sending (a client keeps probing the path MTU until it sees the
    /// close). The close may then overtake packets the connection task
    /// produced but had not yet handed to the kernel; the peer drops
    /// those, as QUIC lets it drop anything that arrives after a close.
    /// If that send cannot be made (fault injection on, the driver gone,
    /// a full socket buffer), the connection answers the peer's next
    /// packet with the close, as it does after any lost close packet.
    pub(crate) fn close(self: &Arc<Self>, code: VarInt, reason: Bytes) {
        let mut wakers = Vec::new();
        let mut packet = Vec::new();
        let mut to = None;
        {
            let mut st = self.lock();
            if st.error.is_none() {
                let now = Instant::now();
                st.conn.close(now, code, reason);
                st.error = Some(ConnectionError::LocallyClosed);
                st.waiters.take_all(&mut wakers);
                // Only a server whose handshake completed: its peer can
                // read a 1-RTT close whatever it overtakes. (A client's
                // close could overtake its own handshake-completing
                // packets, still queued by the connection task, and the
                // server could not decrypt it.)
                // Relaxed: a flag read once per close.
                let inline = st.established
                    && st.conn.side().is_server()
                    && !self.driver.faults_active.load(Ordering::Relaxed);
                if inline {
                    to = st
                        .conn
                        .poll_transmit(now, 1, &mut packet)
                        .map(|t| (t.destination, t.size));
                }
            }
        }
        if let Some((dest, size)) = to {
            let sock = lock(&self.driver.socket_dup).clone();
            let sent =
                sock.is_some_and(|s| s.send_to(&packet[..size.min(packet.len())], dest).is_ok());
            let c = &self.driver.counters;
            if sent {
                c.count_send(size, None);
            } else {
                // Relaxed: statistics.
                c.send_errors.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.mark_dirty();
        wake_all(&mut wakers);
    }

    /// Opens a stream (waits for stream credit).
    pub(crate) async fn open(self: &Arc<Self>, dir: Dir) -> io::Result<StreamId> {
        self.run(|st, dirty| open_step(st, dirty, dir)).await
    }

    /// One attempt of [`ConnInner::open`]; a wait registers under `key`
    /// (the caller removes it if it gives up, see `poll_step`).
    pub(crate) fn poll_open(
        self: &Arc<Self>,
        dir: Dir,
        key: &mut u64,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<StreamId>> {
        let res = self.poll_step(key, cx, |st, dirty| open_step(st, dirty, dir));
        if res.is_ready() {
            *key = 0;
        }
        res
    }

    /// Accepts a peer-opened stream.
    pub(crate) async fn accept(self: &Arc<Self>, dir: Dir) -> io::Result<StreamId> {
        self.run(|st, dirty| accept_step(st, dirty, dir)).await
    }

    /// One attempt of [`ConnInner::accept`], as [`ConnInner::poll_open`].
    pub(crate) fn poll_accept(
        self: &Arc<Self>,
        dir: Dir,
        key: &mut u64,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<StreamId>> {
        let res = self.poll_step(key, cx, |st, dirty| accept_step(st, dirty, dir));
        if res.is_ready() {
            *key = 0;
        }
        res
    }

    /// Removes the waiter registered under `key`, if any.
    pub(crate) fn release_waiter(&self, key: &mut u64) {
        if *key != 0 {
            self.lock().waiters.remove(*key);
            *key = 0;
        }
    }

    /// Queues an unreliable datagram (dropping the oldest queued one if
    /// quinn-proto's send buffer is full, as quinn does).
    pub(crate) fn send_datagram(self: &Arc<Self>, data: Bytes) -> io::Result<()> {
        let max = self.driver.tuning().max_datagram_size;
        if data.len() > max {
            // Relaxed: statistics.
            self.driver
                .counters
                .oversize_rejections
                .fetch_add(1, Ordering::Relaxed);
            self.driver
                .event(super::types::NativeProtoEvent::OversizeRejected {
                    connection_id: self.id,
                    size: data.len(),
                });
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "spargio-quic: datagram of {} bytes exceeds max_datagram_size {max}",
                    data.len()
                ),
            ));
        }
        {
            let mut st = self.lock();
            if let Some(e) = &st.error {
                return Err(from_connection_error(e.clone()));
            }
            st.conn
                .datagrams()
                .send(data, true)
                .map_err(from_datagram_error)?;
            st.datagrams_sent += 1;
        }
        self.driver
            .counters
            .datagrams_queued
            .fetch_add(1, Ordering::Relaxed);
        self.mark_dirty();
        Ok(())
    }

    /// Takes the next received datagram, waiting for one.
    pub(crate) async fn read_datagram(self: &Arc<Self>) -> io::Result<Bytes> {
        self.run(|st, _| {
            if let Some(d) = st.conn.datagrams().recv() {
                st.datagrams_received += 1;
                return Step::Done(Ok(d));
            }
            if let Some(e) = &st.error {
                return Step::Done(Err(from_connection_error(e.clone())));
            }
            Step::Wait(WaitKind::Datagram)
        })
        .await
    }

    /// Waits for the connection to end; gives the reason. Never
    /// `WouldBlock`: `Closed` waiters are exempt from `max_inflight_ops`
    /// (see [`Waiters`]).
    pub(crate) async fn closed(self: &Arc<Self>) -> ConnectionError {
        let r = self
            .run(|st, _| match &st.error {
                Some(e) => Step::Done(Ok(e.clone())),
                None => Step::Wait(WaitKind::Closed),
            })
            .await;
        // `run` fails only when registering fails, which `Closed` never does.
        r.unwrap_or(ConnectionError::LocallyClosed)
    }

    /// Waits until no send stream finished here has data the peer has not
    /// acknowledged (or the connection ended).
    pub(crate) async fn acknowledged(self: &Arc<Self>) -> io::Result<()> {
        self.run(|st, _| {
            if st.unacked.is_empty() || st.error.is_some() {
                Step::Done(Ok(()))
            } else {
                Step::Wait(WaitKind::Acked)
            }
        })
        .await
    }

    /// Waits for the handshake (client side).
    pub(crate) async fn established(self: &Arc<Self>) -> io::Result<()> {
        self.run(|st, _| {
            if let Some(e) = &st.error {
                return Step::Done(Err(from_connection_error(e.clone())));
            }
            if st.established {
                Step::Done(Ok(()))
            } else {
                Step::Wait(WaitKind::Connected)
            }
        })
        .await
    }

    /// A user handle appeared.
    pub(crate) fn acquire(self: &Arc<Self>) -> ConnRef {
        self.lock().refs += 1;
        ConnRef(self.clone())
    }
}

/// Removes a dropped future's waker registration.
struct WaitGuard {
    conn: Arc<ConnInner>,
    key: u64,
}

impl Drop for WaitGuard {
    fn drop(&mut self) {
        if self.key != 0 {
            self.conn.lock().waiters.remove(self.key);
        }
    }
}

/// A counted user reference: the last one dropped closes the connection
/// with code 0 (as quinn does).
#[derive(Debug)]
pub(crate) struct ConnRef(pub(crate) Arc<ConnInner>);

impl Clone for ConnRef {
    fn clone(&self) -> Self {
        self.0.acquire()
    }
}

impl std::ops::Deref for ConnRef {
    type Target = Arc<ConnInner>;
    fn deref(&self) -> &Arc<ConnInner> {
        &self.0
    }
}

impl Drop for ConnRef {
    fn drop(&mut self) {
        let last = {
            let mut st = self.0.lock();
            st.refs -= 1;
            st.refs == 0
        };
        if last {
            self.0.close(VarInt::from_u32(0), Bytes::new());
        }
    }
}

/// Wakes `wakers` and counts panics on the driver's stats.
pub(crate) fn wake_counted(driver: &DriverShared, wakers: &mut Vec<Waker>) {
    let panics = wake_all(wakers);
    if panics > 0 {
        // Relaxed: statistics.
        driver
            .counters
            .waker_panics
            .fetch_add(panics as u64, Ordering::Relaxed);
    }
}

fn open_step(st: &mut ConnState, _dirty: &mut bool, dir: Dir) -> Step<StreamId> {
    if let Some(e) = &st.error {
        return Step::Done(Err(from_connection_error(e.clone())));
    }
    match st.conn.streams().open(dir) {
        Some(id) => Step::Done(Ok(id)),
        None => Step::Wait(WaitKind::Open(dir)),
    }
}

fn accept_step(st: &mut ConnState, dirty: &mut bool, dir: Dir) -> Step<StreamId> {
    if let Some(id) = st.conn.streams().accept(dir) {
        // Accepting may raise the peer's stream credit.
        *dirty = true;
        return Step::Done(Ok(id));
    }
    if let Some(e) = &st.error {
        return Step::Done(Err(from_connection_error(e.clone())));
    }
    Step::Wait(WaitKind::Accept(dir))
}

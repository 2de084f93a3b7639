//! The driver task: one `quinn_proto::Endpoint` and its connections on
//! the owner shard. See the module header in `native/mod.rs` for the
//! loop's steps.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use quinn_proto::{
    ConnectionHandle, DatagramEvent, Event, Incoming, ServerConfig, StreamEvent, Transmit, VarInt,
};
use spargio::time::Sleep;

use super::conn::{wake_counted, ConnInner};
use super::faults::{Egress, Faults, NativeProtoFaultSpec};
use super::shared::{lock, Command, DriverShared};
use super::types::{NativeProtoEvent, NativeProtoTransportTuning};
use super::udp::{RecvDone, RecvOp, SendDone, SendOp, UdpIo};
use super::waiters::WaitKind;
use crate::error::{driver_closed, from_connect_error};

/// Loop rounds per poll before yielding to the shard's other tasks.
const MAX_ROUNDS: usize = 32;
/// Receive arena: receives are carved out of it, so a fresh allocation
/// is needed only once per arena (quinn-proto keeps slices of received
/// packets until the application reads the stream data in them).
const RECV_ARENA: usize = 1024 * 1024;

/// The most bytes one GSO send may carry (an IPv4 UDP payload is at most
/// 65,507 bytes; `EMSGSIZE` past it).
const MAX_GSO_BYTES: usize = 65_000;

static NEXT_CONNECTION_ID: AtomicU64 = AtomicU64::new(1);

struct ConnMeta {
    inner: Arc<ConnInner>,
    deadline: Option<Instant>,
    /// Holds a slot in the accept queue until established or failed.
    accept_reserved: bool,
    /// Sits in `to_drive`.
    queued: bool,
}

pub(crate) struct DriverTask {
    shared: Arc<DriverShared>,
    endpoint: quinn_proto::Endpoint,
    server_config: Option<Arc<ServerConfig>>,
    conns: HashMap<usize, ConnMeta>,
    udp: UdpIo,
    recvs: Vec<Option<RecvOp>>,
    spare_recv: Vec<BytesMut>,
    sends: Vec<SendOp>,
    max_sends: usize,
    send_pool: Vec<Vec<u8>>,
    timer: Option<Sleep>,
    deadlines: BinaryHeap<Reverse<(Instant, usize)>>,
    to_drive: VecDeque<usize>,
    dirty_buf: Vec<Arc<ConnInner>>,
    cmd_buf: VecDeque<Command>,
    wakers: Vec<Waker>,
    faults: Faults,
    held: Option<(Vec<u8>, SocketAddr)>,
    tuning: NativeProtoTransportTuning,
    shutting_down: bool,
}

impl DriverTask {
    pub(crate) fn new(
        shared: Arc<DriverShared>,
        udp: UdpIo,
        server_config: Option<Arc<ServerConfig>>,
        receives: usize,
        max_sends: usize,
    ) -> DriverTask {
        let endpoint = quinn_proto::Endpoint::new(
            Arc::new(quinn_proto::EndpointConfig::default()),
            server_config.clone(),
            true,
            None,
        );
        shared
            .max_gso_segments
            .store(udp.max_segments(), Ordering::Relaxed);
        shared.gro.store(udp.gro(), Ordering::Relaxed);
        let tuning = shared.tuning();
        DriverTask {
            shared,
            endpoint,
            server_config,
            conns: HashMap::new(),
            udp,
            recvs: (0..receives.max(1)).map(|_| None).collect(),
            spare_recv: Vec::new(),
            sends: Vec::with_capacity(max_sends),
            max_sends: max_sends.max(1),
            send_pool: Vec::new(),
            timer: None,
            deadlines: BinaryHeap::new(),
            to_drive: VecDeque::new(),
            dirty_buf: Vec::new(),
            cmd_buf: VecDeque::new(),
            wakers: Vec::new(),
            faults: Faults::new(NativeProtoFaultSpec::none()),
            held: None,
            tuning,
            shutting_down: false,
        }
    }

    // ===== commands =====

    fn on_command(&mut self, cmd: Command) {
        match cmd {
            Command::Connect {
                config,
                addr,
                server_name,
                reply,
            } => {
                if self.shutting_down {
                    reply.send(Err(driver_closed()));
                    return;
                }
                let config = match tuned_transport(&self.tuning) {
                    Some(t) => {
                        let mut c = config;
                        c.transport_config(t);
                        c
                    }
                    None => config,
                };
                match self
                    .endpoint
                    .connect(Instant::now(), config, addr, &server_name)
                {
                    Ok((ch, conn)) => {
                        let inner = self.register(ch, conn, false);
                        // The requester may be gone already (its future was
                        // dropped): nobody will ever hold this connection.
                        let orphan = Arc::strong_count(&reply) == 1;
                        reply.send(Ok(inner.clone()));
                        if orphan {
                            inner.close(VarInt::from_u32(0), Bytes::new());
                        }
                    }
                    Err(e) => reply.send(Err(from_connect_error(e))),
                }
            }
            Command::SetServerConfig(config) => {
                self.endpoint.set_server_config(config.clone());
                self.server_config = config;
            }
            Command::SetFaults(spec) => self.faults = Faults::new(spec),
            Command::SetTuning(tuning) => {
                self.tuning = tuning;
                for meta in self.conns.values() {
                    apply_windows(&meta.inner, &tuning);
                    meta.inner.mark_dirty();
                }
            }
            Command::CloseAll { code, reason } => {
                self.endpoint.set_server_config(None);
                self.server_config = None;
                self.close_all(VarInt::from_u32(code), reason);
            }
            Command::Shutdown => {
                if !self.shutting_down {
                    self.shutting_down = true;
                    self.endpoint.set_server_config(None);
                    self.close_all(VarInt::from_u32(0), Bytes::new());
                    // Dropping the receive ops cancels them on the ring;
                    // their buffers stay owned by the op until it ends.
                    self.recvs.clear();
                }
            }
        }
    }

    fn close_all(&mut self, code: VarInt, reason: Bytes) {
        let inners: Vec<_> = self.conns.values().map(|m| m.inner.clone()).collect();
        for inner in inners {
            inner.close(code, reason.clone());
        }
    }

    fn register(
        &mut self,
        ch: ConnectionHandle,
        conn: quinn_proto::Connection,
        accept_reserved: bool,
    ) -> Arc<ConnInner> {
        // Relaxed: a unique id.
        let id = NEXT_CONNECTION_ID.fetch_add(1, Ordering::Relaxed);
        let inner = ConnInner::new(id, ch, conn, self.shared.clone());
        apply_windows(&inner, &self.tuning);
        lock(&self.shared.registry).insert(id, Arc::downgrade(&inner));
        self.conns.insert(
            ch.0,
            ConnMeta {
                inner: inner.clone(),
                deadline: None,
                accept_reserved,
                queued: false,
            },
        );
        self.shared
            .connections
            .store(self.conns.len(), Ordering::Relaxed);
        let c = &self.shared.counters;
        c.registrations.fetch_add(1, Ordering::Relaxed);
        self.shared
            .event(NativeProtoEvent::ConnectionRegistered { connection_id: id });
        self.queue(ch.0);
        inner
    }

    fn queue(&mut self, ch: usize) {
        if let Some(meta) = self.conns.get_mut(&ch) {
            if !meta.queued {
                meta.queued = true;
                self.to_drive.push_back(ch);
            }
        }
    }

    // ===== receive path =====

    fn on_recv(&mut self, slot: usize, done: RecvDone) {
        let RecvDone { res, mut buf } = done;
        match res {
            Ok(meta) => {
                let mut data = buf.split_to(meta.len.min(buf.len()));
                let c = &self.shared.counters;
                c.bytes_received
                    .fetch_add(meta.len as u64, Ordering::Relaxed);
                let seg = meta.segment_size.unwrap_or(meta.len).max(1);
                if seg < meta.len {
                    c.gro_batches.fetch_add(1, Ordering::Relaxed);
                }
                let ecn = meta.ecn.and_then(quinn_proto::EcnCodepoint::from_bits);
                let now = Instant::now();
                while !data.is_empty() {
                    let one = data.split_to(seg.min(data.len()));
                    self.shared
                        .counters
                        .datagrams_received
                        .fetch_add(1, Ordering::Relaxed);
                    if self.faults.is_active()
                        && self.faults.drop_inbound(&self.shared.fault_counters)
                    {
                        continue;
                    }
                    self.handle_datagram(now, meta.addr, meta.dst_ip, ecn, one);
                }
            }
            Err(_) => {
                self.shared
                    .counters
                    .recv_errors
                    .fetch_add(1, Ordering::Relaxed);
            }
        }
        self.rearm(slot, buf);
    }

    fn rearm(&mut self, slot: usize, mut buf: BytesMut) {
        if self.shutting_down {
            return;
        }
        buf.clear();
        let need = self.udp.recv_size();
        if buf.capacity() < need {
            // `reserve` reclaims the arena when quinn-proto has released
            // every slice of it, and allocates a fresh one otherwise.
            buf.reserve(RECV_ARENA.max(need));
        }
        self.recvs[slot] = Some(self.udp.recv(buf));
    }

    fn handle_datagram(
        &mut self,
        now: Instant,
        addr: SocketAddr,
        dst_ip: Option<std::net::IpAddr>,
        ecn: Option<quinn_proto::EcnCodepoint>,
        data: BytesMut,
    ) {
        let mut response = self.send_pool.pop().unwrap_or_default();
        response.clear();
        match self
            .endpoint
            .handle(now, addr, dst_ip, ecn, data, &mut response)
        {
            Some(DatagramEvent::ConnectionEvent(ch, event)) => {
                self.send_pool.push(response);
                if let Some(meta) = self.conns.get(&ch.0) {
                    meta.inner.lock().conn.handle_event(event);
                    self.queue(ch.0);
                }
            }
            Some(DatagramEvent::NewConnection(incoming)) => {
                self.send_pool.push(response);
                self.on_incoming(incoming, now);
            }
            Some(DatagramEvent::Response(t)) => {
                self.shared
                    .counters
                    .stateless_responses
                    .fetch_add(1, Ordering::Relaxed);
                self.send_transmit(response, t, false)
            }
            None => {
                self.send_pool.push(response);
                self.shared
                    .counters
                    .datagrams_malformed
                    .fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    fn on_incoming(&mut self, incoming: Incoming, now: Instant) {
        let mut buf = self.send_pool.pop().unwrap_or_default();
        buf.clear();
        if self.shutting_down || self.server_config.is_none() {
            self.endpoint.ignore(incoming);
            self.send_pool.push(buf);
            return;
        }
        if !self.shared.accept.try_reserve() {
            let remote = incoming.remote_address();
            let t = self.endpoint.refuse(incoming, &mut buf);
            self.shared
                .counters
                .incoming_refused
                .fetch_add(1, Ordering::Relaxed);
            self.shared
                .event(NativeProtoEvent::IncomingRefused { remote });
            self.send_transmit(buf, t, false);
            return;
        }
        let config = tuned_transport(&self.tuning).and_then(|t| {
            let mut c = (**self.server_config.as_ref()?).clone();
            c.transport = t;
            Some(Arc::new(c))
        });
        match self.endpoint.accept(incoming, now, &mut buf, config) {
            Ok((ch, conn)) => {
                self.send_pool.push(buf);
                self.register(ch, conn, true);
            }
            Err(e) => {
                self.shared.accept.release();
                match e.response {
                    Some(t) => self.send_transmit(buf, t, false),
                    None => self.send_pool.push(buf),
                }
            }
        }
    }

    // ===== send path =====

    /// Sends (or, under fault injection, drops or holds) one transmit.
    fn send_transmit(&mut self, mut buf: Vec<u8>, t: Transmit, from_conn: bool) {
        buf.truncate(t.size);
        if from_conn && self.faults.is_active() {
            match self.faults.egress(&self.shared.fault_counters) {
                Egress::Drop => {
                    self.recycle(buf);
                    return;
                }
                Egress::Hold => {
                    if let Some((prev, dst)) = self.held.replace((buf, t.destination)) {
                        self.start_send(prev, dst, None);
                    }
                    return;
                }
                Egress::Send => {}
            }
        }
        let ecn = t.ecn.map(|e| e as u8);
        self.start_send_ecn(buf, t.destination, t.segment_size, ecn);
        if from_conn {
            if let Some((prev, dst)) = self.held.take() {
                self.start_send(prev, dst, None);
            }
        }
    }

    fn start_send(&mut self, buf: Vec<u8>, dst: SocketAddr, segment_size: Option<usize>) {
        self.start_send_ecn(buf, dst, segment_size, None);
    }

    fn start_send_ecn(
        &mut self,
        buf: Vec<u8>,
        dst: SocketAddr,
        segment_size: Option<usize>,
        ecn: Option<u8>,
    ) {
        let c = &self.shared.counters;
        let segments = match segment_size {
            Some(s) if s > 0 => buf.len().div_ceil(s),
            _ => 1,
        };
        c.datagrams_sent
            .fetch_add(segments as u64, Ordering::Relaxed);
        c.bytes_sent.fetch_add(buf.len() as u64, Ordering::Relaxed);
        c.send_ops.fetch_add(1, Ordering::Relaxed);
        self.sends.push(self.udp.send(buf, dst, segment_size, ecn));
    }

    fn recycle(&mut self, mut buf: Vec<u8>) {
        if self.send_pool.len() < self.max_sends + 8 {
            buf.clear();
            self.send_pool.push(buf);
        }
    }

    fn poll_sends(&mut self, cx: &mut Context<'_>) -> bool {
        let mut progress = false;
        let mut i = 0;
        while i < self.sends.len() {
            match self.sends[i].as_mut().poll(cx) {
                Poll::Ready(SendDone { res, buf }) => {
                    if res.is_err() {
                        self.shared
                            .counters
                            .send_errors
                            .fetch_add(1, Ordering::Relaxed);
                    }
                    drop(self.sends.swap_remove(i));
                    self.recycle(buf);
                    progress = true;
                }
                Poll::Pending => i += 1,
            }
        }
        progress
    }

    // ===== connections =====

    /// Drives queued connections while send capacity lasts.
    fn drive_queued(&mut self) -> bool {
        let mut any = false;
        while self.sends.len() < self.max_sends {
            let Some(ch) = self.to_drive.pop_front() else {
                break;
            };
            let Some(meta) = self.conns.get_mut(&ch) else {
                continue;
            };
            meta.queued = false;
            self.drive(ch);
            any = true;
        }
        if let Some((buf, dst)) = self.held.take() {
            self.start_send(buf, dst, None);
        }
        any
    }

    /// One connection: endpoint events, transmits, application events,
    /// then its next timeout. Wakers are collected and called after the
    /// connection's lock is released.
    fn drive(&mut self, ch: usize) {
        let Some(meta) = self.conns.get(&ch) else {
            return;
        };
        let inner = meta.inner.clone();
        let now = Instant::now();
        let max_segments = if self.faults.is_active() {
            1
        } else {
            self.udp.max_segments()
        };
        let mut established_now = false;
        let mut lost = false;
        let mut drained = false;
        let mut send_blocked = false;
        let deadline;
        {
            let mut st = inner.lock();
            // A GSO send's datagrams must fit one UDP payload (64 KiB).
            let max_segments =
                max_segments.min((MAX_GSO_BYTES / st.conn.current_mtu() as usize).max(1));
            for _ in 0..2 {
                while let Some(ev) = st.conn.poll_endpoint_events() {
                    drained |= ev.is_drained();
                    if let Some(back) = self.endpoint.handle_event(inner.ch, ev) {
                        st.conn.handle_event(back);
                    }
                }
                loop {
                    if self.sends.len() >= self.max_sends {
                        send_blocked = true;
                        break;
                    }
                    let mut buf = self.send_pool.pop().unwrap_or_default();
                    buf.clear();
                    match st.conn.poll_transmit(now, max_segments, &mut buf) {
                        Some(t) => self.send_transmit(buf, t, true),
                        None => {
                            self.send_pool.push(buf);
                            break;
                        }
                    }
                }
                let mut events = false;
                while let Some(ev) = st.conn.poll() {
                    events = true;
                    match ev {
                        Event::Connected => {
                            st.established = true;
                            established_now = true;
                            st.peer_certs = peer_certs(&st.conn);
                            st.waiters.take(WaitKind::Connected, &mut self.wakers);
                        }
                        Event::ConnectionLost { reason } => {
                            if st.error.is_none() {
                                st.error = Some(reason);
                            }
                            lost = true;
                            st.waiters.take_all(&mut self.wakers);
                        }
                        Event::Stream(se) => {
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
                        Event::DatagramReceived => {
                            st.waiters.take(WaitKind::Datagram, &mut self.wakers)
                        }
                        Event::DatagramsUnblocked | Event::HandshakeDataReady => {}
                    }
                }
                if !events {
                    break;
                }
            }
            if st.error.is_some() {
                // Locally closed connections have no ConnectionLost event:
                // wake whatever registered since.
                st.waiters.take_all(&mut self.wakers);
            }
            deadline = st.conn.poll_timeout();
            drained |= st.conn.is_drained();
        }
        wake_counted(&self.shared, &mut self.wakers);
        let id = inner.id;
        let Some(meta) = self.conns.get_mut(&ch) else {
            return;
        };
        if established_now {
            self.shared
                .counters
                .connections_established
                .fetch_add(1, Ordering::Relaxed);
            self.shared
                .event(NativeProtoEvent::ConnectionEstablished { connection_id: id });
            if meta.accept_reserved {
                meta.accept_reserved = false;
                let panics = self.shared.accept.push_ready(inner.clone());
                self.shared
                    .counters
                    .waker_panics
                    .fetch_add(panics as u64, Ordering::Relaxed);
            }
        }
        if (lost || drained) && meta.accept_reserved {
            meta.accept_reserved = false;
            self.shared.accept.release();
        }
        if drained {
            self.remove(ch);
            return;
        }
        if meta.deadline != deadline {
            meta.deadline = deadline;
            if let Some(d) = deadline {
                self.deadlines.push(Reverse((d, ch)));
            }
        }
        if send_blocked {
            self.queue(ch);
        }
    }

    fn remove(&mut self, ch: usize) {
        let Some(meta) = self.conns.remove(&ch) else {
            return;
        };
        let id = meta.inner.id;
        lock(&self.shared.registry).remove(&id);
        self.shared
            .connections
            .store(self.conns.len(), Ordering::Relaxed);
        self.shared
            .counters
            .connections_closed
            .fetch_add(1, Ordering::Relaxed);
        self.shared
            .event(NativeProtoEvent::ConnectionClosed { connection_id: id });
        if self.conns.is_empty() {
            self.shared.wake_idle();
        }
    }

    // ===== timers =====

    /// Fires due connection timers; returns whether any fired.
    fn fire_timers(&mut self) -> bool {
        let now = Instant::now();
        let mut fired = 0;
        while let Some(&Reverse((at, ch))) = self.deadlines.peek() {
            if at > now {
                break;
            }
            self.deadlines.pop();
            let Some(meta) = self.conns.get_mut(&ch) else {
                continue;
            };
            if meta.deadline != Some(at) {
                continue; // stale entry: the deadline moved since
            }
            meta.deadline = None;
            meta.inner.lock().conn.handle_timeout(now);
            fired += 1;
            self.queue(ch);
        }
        if fired > 0 {
            self.shared
                .counters
                .timer_fires
                .fetch_add(1, Ordering::Relaxed);
            lock(&self.shared.timer).fires += 1;
            self.shared
                .event(NativeProtoEvent::TimeoutFired { connections: fired });
        }
        // Stale entries pile up when deadlines move; rebuild when they
        // outnumber live ones.
        if self.deadlines.len() > 4 * self.conns.len() + 64 {
            let live: Vec<_> = self
                .conns
                .iter()
                .filter_map(|(&ch, m)| m.deadline.map(|d| Reverse((d, ch))))
                .collect();
            self.deadlines = live.into();
        }
        fired > 0
    }

    /// Arms the single timer for the earliest live deadline; returns
    /// whether it is already due.
    fn poll_timer(&mut self, cx: &mut Context<'_>) -> bool {
        let next = loop {
            match self.deadlines.peek() {
                Some(&Reverse((at, ch)))
                    if self.conns.get(&ch).and_then(|m| m.deadline) != Some(at) =>
                {
                    self.deadlines.pop();
                }
                Some(&Reverse((at, _))) => break Some(at),
                None => break None,
            }
        };
        lock(&self.shared.timer).deadline = next;
        let Some(at) = next else {
            self.timer = None;
            return false;
        };
        let timer = self.timer.get_or_insert_with(|| Sleep::until(at));
        if timer.deadline() != at {
            timer.reset(at);
        }
        Pin::new(timer).poll(cx).is_ready()
    }

    fn finish(&mut self) {
        // Release: pairs with `is_closed`'s Acquire.
        self.shared.closed.store(true, Ordering::Release);
        let inners: Vec<_> = self.conns.drain().map(|(_, m)| m.inner).collect();
        for inner in inners {
            {
                let mut st = inner.lock();
                if st.error.is_none() {
                    st.error = Some(quinn_proto::ConnectionError::LocallyClosed);
                }
                st.waiters.take_all(&mut self.wakers);
            }
            wake_counted(&self.shared, &mut self.wakers);
        }
        lock(&self.shared.registry).clear();
        self.shared.connections.store(0, Ordering::Relaxed);
        self.shared.wake_idle();
        self.shared.accept.driver_stopped();
    }
}

impl Future for DriverTask {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        for _ in 0..MAX_ROUNDS {
            let mut progress = false;
            let shared = this.shared.clone();
            shared.take_signal(cx.waker(), &mut this.dirty_buf, &mut this.cmd_buf);
            while let Some(cmd) = this.cmd_buf.pop_front() {
                this.on_command(cmd);
                progress = true;
            }
            for conn in std::mem::take(&mut this.dirty_buf) {
                conn.clear_dirty();
                let current = this
                    .conns
                    .get(&conn.ch.0)
                    .is_some_and(|m| Arc::ptr_eq(&m.inner, &conn));
                if current {
                    this.queue(conn.ch.0);
                    progress = true;
                }
            }
            for slot in 0..this.recvs.len() {
                if this.recvs[slot].is_none() {
                    let buf = this.spare_recv.pop().unwrap_or_default();
                    this.rearm(slot, buf);
                }
                let Some(op) = this.recvs.get_mut(slot).and_then(Option::as_mut) else {
                    continue;
                };
                if let Poll::Ready(done) = op.as_mut().poll(cx) {
                    this.recvs[slot] = None;
                    this.on_recv(slot, done);
                    progress = true;
                }
            }
            progress |= this.poll_sends(cx);
            progress |= this.fire_timers();
            progress |= this.drive_queued();
            if this.shutting_down && this.sends.is_empty() && this.to_drive.is_empty() {
                this.finish();
                return Poll::Ready(());
            }
            progress |= this.poll_timer(cx);
            if !progress {
                return Poll::Pending;
            }
        }
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

/// The transport config the tuning asks for, if it differs from the
/// defaults (then it replaces the configured one for new connections).
fn tuned_transport(
    tuning: &NativeProtoTransportTuning,
) -> Option<Arc<quinn_proto::TransportConfig>> {
    let default = NativeProtoTransportTuning::default();
    if tuning.keep_alive_interval == default.keep_alive_interval
        && tuning.mtu_discovery_enabled == default.mtu_discovery_enabled
    {
        return None;
    }
    let mut t = quinn_proto::TransportConfig::default();
    t.keep_alive_interval(tuning.keep_alive_interval);
    if !tuning.mtu_discovery_enabled {
        t.mtu_discovery_config(None);
    }
    Some(Arc::new(t))
}

fn apply_windows(inner: &ConnInner, tuning: &NativeProtoTransportTuning) {
    let default = NativeProtoTransportTuning::default();
    if tuning.send_window == default.send_window && tuning.receive_window == default.receive_window
    {
        return;
    }
    let mut st = inner.lock();
    st.conn.set_send_window(tuning.send_window);
    if let Ok(v) = VarInt::from_u64(tuning.receive_window) {
        st.conn.set_receive_window(v);
    }
}

fn peer_certs(conn: &quinn_proto::Connection) -> Option<Vec<Vec<u8>>> {
    let any = conn.crypto_session().peer_identity()?;
    let certs = any
        .downcast::<Vec<rustls_pki_types::CertificateDer<'static>>>()
        .ok()?;
    Some(certs.iter().map(|c| c.as_ref().to_vec()).collect())
}

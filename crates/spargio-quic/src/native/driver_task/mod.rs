//! The driver task: one `quinn_proto::Endpoint` and its connections on
//! the owner shard. See the module header in `native/mod.rs` for the
//! loop's steps. This file holds the task's state, its commands and its
//! poll loop; `io.rs` the receive and send paths, `conns.rs` connection
//! driving and timers.

mod conns;
mod io;

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
use quinn_proto::{ConnectionHandle, ServerConfig, VarInt};
use spargio::time::Sleep;

use crate::error::{driver_closed, from_connect_error};
use crate::native::conn::ConnInner;
use crate::native::faults::{Faults, NativeProtoFaultSpec};
use crate::native::shared::{lock, Command, DriverShared};
use crate::native::types::{NativeProtoEvent, NativeProtoTransportTuning};
use crate::native::udp::{RecvOp, SendOp, UdpIo};

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
    /// `finish` ran (at shutdown, or from `Drop` if the runtime dropped
    /// the task first).
    finished: bool,
}

impl Drop for DriverTask {
    fn drop(&mut self) {
        // The runtime shutting down drops the task without a shutdown
        // command: still fail the waiting operations and release the
        // accept queue, so nothing waits forever.
        self.finish();
    }
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
            finished: false,
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
                    let buf = BytesMut::new();
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

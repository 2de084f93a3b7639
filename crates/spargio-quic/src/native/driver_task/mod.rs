//! The driver (endpoint) task: one `quinn_proto::Endpoint` and the UDP
//! socket on the owner shard. See the module header in `native/mod.rs`
//! for the loop's steps. This file holds the task's state, its commands
//! and its poll loop; `io.rs` the receive and send paths, `conns.rs`
//! registration, what connection tasks hand back, removal and the end.

mod conns;
mod io;

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use quinn_proto::{ServerConfig, Transmit, VarInt};
use spargio::RuntimeHandle;

use crate::error::{driver_closed, from_connect_error};
use crate::native::conn::ConnInner;
use crate::native::deal::{Datagram, Dealt};
use crate::native::faults::{Faults, NativeProtoFaultSpec};
use crate::native::route::RoutedCids;
use crate::native::shared::{Command, DriverShared, Outgoing};
use crate::native::types::NativeProtoTransportTuning;
use crate::native::udp::{OrderedRecv, RecvDone, SendOp, UdpIo};

/// Loop rounds per poll before yielding to the shard's other tasks.
const MAX_ROUNDS: usize = 32;
/// Receive arena: receives are carved out of it, so a fresh allocation
/// is needed only once per arena (quinn-proto keeps slices of received
/// packets until the application reads the stream data in them).
const RECV_ARENA: usize = 1024 * 1024;

/// Receives one drain may take without the ring (see `io.rs`,
/// `drain_queued`) before the pass moves on.
const DRAIN_LIMIT: usize = 16;

/// Below this many bytes a datagram is a request or an acknowledgement,
/// not a full packet of a bulk transfer (see `DriverTask::poll`).
const SHORT_DATAGRAM: usize = 600;

/// At most this many lone short passes between two drains that find
/// nothing (see `DriverTask::probe_queued`).
const PROBE_GAP_MAX: u32 = 64;

static NEXT_CONNECTION_ID: AtomicU64 = AtomicU64::new(1);

/// A transmit waiting for a send slot, with the connection it counts
/// against (none: the endpoint's own responses and close packets).
type PendingSend = (Option<Arc<ConnInner>>, Vec<u8>, Transmit);

pub(crate) struct DriverTask {
    handle: RuntimeHandle,
    shared: Arc<DriverShared>,
    endpoint: quinn_proto::Endpoint,
    server_config: Option<Arc<ServerConfig>>,
    conns: HashMap<usize, Arc<ConnInner>>,
    udp: UdpIo,
    /// Receives in flight, in submission order.
    recvs: VecDeque<OrderedRecv>,
    /// The most receives to keep in flight.
    receives: usize,
    /// How many to keep in flight now, from 1 up to `receives` (see
    /// `io.rs`, `adapt_armed`): one while datagrams come one at a time,
    /// more while they queue up.
    armed: usize,
    /// This pass's receives found datagrams queued up (GRO coalesced).
    queued: bool,
    /// This pass's receives carried a handshake packet or a datagram for
    /// a young connection (see `io.rs`, `drain_queued`).
    flight_seen: bool,
    /// A datagram shorter than `SHORT_DATAGRAM` (not a GRO batch) arrived
    /// in this pass.
    short_seen: bool,
    /// Lone short passes to let go by before the next drain, and the gap
    /// after a drain that found nothing (doubling up to `PROBE_GAP_MAX`).
    probe_skip: u32,
    probe_gap: u32,
    recv_done: Vec<(u64, RecvDone)>,
    /// The rest of the receive arena, kept between receives.
    spare: BytesMut,
    /// Connections given datagrams this pass, woken once at its end.
    to_wake: Vec<Arc<ConnInner>>,
    sends: Vec<(SendOp, Option<Arc<ConnInner>>)>,
    max_sends: usize,
    pending: VecDeque<PendingSend>,
    send_pool: Vec<Vec<u8>>,
    out_buf: Vec<(Arc<ConnInner>, Outgoing)>,
    cmd_buf: VecDeque<Command>,
    /// Connection attempts other drivers dealt to this one.
    fwd_buf: VecDeque<Datagram>,
    /// The client-chosen ids this driver dealt away (see `deal.rs`).
    dealt: Dealt,
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
    /// After a pass whose one armed receive brought one short datagram:
    /// drains what is queued behind it, unless recent drains found
    /// nothing, in which case only every `probe_gap`-th such pass does.
    fn probe_queued(&mut self) {
        if self.probe_skip > 0 {
            self.probe_skip -= 1;
            return;
        }
        let took = self.drain_queued();
        self.probe_gap = if took > 0 {
            1
        } else {
            (self.probe_gap * 2).min(PROBE_GAP_MAX)
        };
        self.probe_skip = self.probe_gap - 1;
    }

    pub(crate) fn new(
        handle: RuntimeHandle,
        shared: Arc<DriverShared>,
        udp: UdpIo,
        server_config: Option<Arc<ServerConfig>>,
        receives: usize,
        max_sends: usize,
        cid_route: Option<(u8, u8)>,
    ) -> DriverTask {
        let mut config = quinn_proto::EndpointConfig::default();
        if let Some((index, count)) = cid_route {
            config.cid_generator(move || Box::new(RoutedCids::new(index, count)));
        }
        let endpoint =
            quinn_proto::Endpoint::new(Arc::new(config), server_config.clone(), true, None);
        shared
            .max_gso_segments
            .store(udp.max_segments(), Ordering::Relaxed);
        shared.gro.store(udp.gro(), Ordering::Relaxed);
        let tuning = shared.tuning();
        DriverTask {
            handle,
            shared,
            endpoint,
            server_config,
            conns: HashMap::new(),
            udp,
            recvs: VecDeque::new(),
            receives: receives.max(1),
            armed: 1,
            queued: false,
            flight_seen: false,
            short_seen: false,
            probe_skip: 0,
            probe_gap: 1,
            recv_done: Vec::new(),
            spare: BytesMut::new(),
            to_wake: Vec::new(),
            sends: Vec::with_capacity(max_sends),
            max_sends: max_sends.max(1),
            pending: VecDeque::new(),
            send_pool: Vec::new(),
            out_buf: Vec::new(),
            cmd_buf: VecDeque::new(),
            fwd_buf: VecDeque::new(),
            dealt: Dealt::default(),
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
            Command::SetFaults(spec) => {
                self.faults = Faults::new(spec);
                self.shared
                    .faults_active
                    .store(self.faults.is_active(), Ordering::Relaxed);
            }
            Command::SetTuning(tuning) => {
                self.tuning = tuning;
                for inner in self.conns.values() {
                    apply_windows(inner, &tuning);
                    inner.mark_dirty();
                }
            }
            Command::CloseAll { code, reason } => {
                self.endpoint.set_server_config(None);
                self.server_config = None;
                self.close_all(code, reason);
            }
            Command::Shutdown => {
                if !self.shutting_down {
                    self.shutting_down = true;
                    self.endpoint.set_server_config(None);
                    self.close_all(VarInt::from_u32(0), Bytes::new());
                    self.flush_closing();
                    // Dropping the receive ops cancels them on the ring;
                    // their buffers stay owned by the op until it ends.
                    self.recvs.clear();
                }
            }
        }
    }

    fn close_all(&mut self, code: VarInt, reason: Bytes) {
        let inners: Vec<_> = self.conns.values().cloned().collect();
        for inner in inners {
            inner.close(code, reason.clone());
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
            shared.take_signal(
                cx.waker(),
                &mut this.out_buf,
                &mut this.cmd_buf,
                &mut this.fwd_buf,
            );
            while let Some(cmd) = this.cmd_buf.pop_front() {
                this.on_command(cmd);
                progress = true;
            }
            if !this.fwd_buf.is_empty() {
                let now = Instant::now();
                while let Some(f) = this.fwd_buf.pop_front() {
                    this.handle_datagram(now, f, true);
                }
                progress = true;
            }
            progress |= this.take_outgoing();
            while !this.shutting_down && this.recvs.len() < this.armed {
                let buf = std::mem::take(&mut this.spare);
                this.rearm(buf);
            }
            // Relaxed: a diagnostic (`NativeProtoDriverProbe::receives_armed`).
            shared
                .receives_armed
                .store(this.recvs.len(), Ordering::Relaxed);
            // Completed receives are handled in completion order (see
            // `OrderedRecv`).
            let mut i = 0;
            while i < this.recvs.len() {
                match this.recvs[i].poll(cx) {
                    Poll::Ready(done) => {
                        let order = this.recvs[i].order();
                        drop(this.recvs.remove(i));
                        this.recv_done.push((order, done));
                    }
                    Poll::Pending => i += 1,
                }
            }
            this.recv_done.sort_by_key(|d| d.0);
            let mut done = std::mem::take(&mut this.recv_done);
            let mut ready = 0;
            for (_, d) in done.drain(..) {
                ready += usize::from(this.on_recv(d));
                progress = true;
            }
            this.recv_done = done;
            // Short datagrams arriving one per receive: with one receive
            // armed, a loaded server whose peers wait for its answers
            // before sending more (HTTP/3 requests) took one datagram per
            // loop turn from a queue of dozens and answered each in a
            // datagram of its own (measured: 1.07 datagrams and 1.0 ACK per
            // small response at 55k req/s). Take what is queued behind
            // with direct receives (one `EAGAIN` when nothing is). Not for
            // full-size packets: a bulk receiver's GRO batches do better
            // through the ring. Only on a server's driver, whose peers are
            // many and wait for answers (a client's short datagrams are a
            // bulk upload's acknowledgements: draining those measured up
            // to 45% off a 16 MiB upload), and backed off while the drains
            // find nothing.
            let short = std::mem::take(&mut this.short_seen) && ready == 1 && this.armed == 1;
            if std::mem::take(&mut this.flight_seen) && !this.queued && !this.shutting_down {
                this.drain_queued();
            } else if short && this.server_config.is_some() && !this.queued && !this.shutting_down {
                this.probe_queued();
            }
            // Every datagram of the pass is in its mailbox before any
            // connection task runs (see `ConnInner::queue_event`).
            for inner in this.to_wake.drain(..) {
                inner.mark_dirty();
            }
            this.adapt_armed(ready);
            progress |= this.poll_sends(cx);
            progress |= this.flush_pending();
            if this.shutting_down && this.sends.is_empty() && this.pending.is_empty() {
                this.finish();
                return Poll::Ready(());
            }
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
    // quinn-proto adds the interval to `Instant::now()` unchecked: capped
    // at 30 years (never, as `spargio::time` saturates), so
    // `Duration::MAX` cannot panic there.
    const FOREVER: std::time::Duration = std::time::Duration::from_secs(60 * 60 * 24 * 365 * 30);
    t.keep_alive_interval(tuning.keep_alive_interval.map(|d| d.min(FOREVER)));
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

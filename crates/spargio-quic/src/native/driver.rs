//! [`NativeProtoDriver`]: the public handle of one driver.

use std::future::poll_fn;
use std::io;
use std::net::SocketAddr;
use std::ops::Deref;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use spargio::RuntimeHandle;

use super::conn::ConnInner;
use super::driver_task::DriverTask;
use super::faults::{NativeProtoFaultSpec, NativeProtoFaultStats};
use super::route;
use super::shared::{lock, AcceptQueue, Command, DriverShared, Oneshot};
use super::types::{
    NativeProtoConnectionState, NativeProtoDriverOptions, NativeProtoDriverProbe, NativeProtoEvent,
    NativeProtoStats, NativeProtoTimerState, NativeProtoTransportTuning,
};
use super::udp::{bind_socket, UdpIo};

/// One native QUIC driver: a `quinn_proto::Endpoint`, its UDP socket and
/// its connections, run by a task pinned on [`owner_shard`](Self::owner_shard).
/// `Clone + Send + Sync`; every method works from any thread.
///
/// Endpoints start drivers for you ([`QuicEndpoint::drivers`](crate::QuicEndpoint::drivers)
/// gives access to them for statistics, events, tuning and fault
/// injection). The driver keeps running until [`shutdown`](Self::shutdown)
/// or until the endpoint that owns it is dropped.
#[derive(Clone, Debug)]
pub struct NativeProtoDriver {
    pub(crate) shared: Arc<DriverShared>,
}

impl NativeProtoDriver {
    /// Binds a UDP socket per `options` and starts a driver on
    /// `options.owner_shard` (with its own accept queue).
    pub fn start(
        handle: &RuntimeHandle,
        options: NativeProtoDriverOptions,
    ) -> io::Result<NativeProtoDriver> {
        let accept = AcceptQueue::new(options.accept_backlog, options.max_inflight_ops);
        NativeProtoDriver::start_with(handle, options, accept)
    }

    pub(crate) fn start_with(
        handle: &RuntimeHandle,
        options: NativeProtoDriverOptions,
        accept: Arc<AcceptQueue>,
    ) -> io::Result<NativeProtoDriver> {
        if options.owner_shard >= handle.shard_count() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "spargio-quic: owner shard {} out of range ({} shards)",
                    options.owner_shard,
                    handle.shard_count()
                ),
            ));
        }
        if let Some((index, count)) = options.cid_route {
            if index >= count {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("spargio-quic: cid_route index {index} not below count {count}"),
                ));
            }
        }
        let socket = bind_socket(options.bind_addr, options.reuse_port)?;
        let local_addr = socket.local_addr()?;
        // The first of the group attaches the routing program (it covers
        // the sockets that join later); without it, the kernel's hash.
        let routed = match options.cid_route {
            Some((0, count)) if count > 1 && options.reuse_port => {
                route::attach_reuseport_program(&socket, count).is_ok()
            }
            _ => false,
        };
        let shared = Arc::new(DriverShared::new(
            options.owner_shard,
            local_addr,
            options.max_inflight_ops,
            options.max_pending_transmits,
            accept.clone(),
        ));
        shared.cid_routed.store(routed, Ordering::Relaxed);
        accept.driver_started();
        let server_config = options.server_config.map(Arc::new);
        let task_shared = shared.clone();
        let task_handle = handle.clone();
        let guard = StartGuard {
            shared: Some(task_shared.clone()),
        };
        let spawned = handle.spawn_local_on(options.owner_shard, move |_ctx| async move {
            let mut guard = guard;
            // Created here, on the owner shard, so the socket's ring
            // operations use this shard's ring.
            if let Ok(udp) = UdpIo::new(&task_handle, socket, options.segmentation_offload) {
                // From here the task's own `finish` (or its Drop) ends
                // the driver.
                guard.shared = None;
                DriverTask::new(
                    task_handle.clone(),
                    task_shared,
                    udp,
                    server_config,
                    options.receives_in_flight,
                    options.max_pending_transmits,
                    options.cid_route,
                )
                .await
            }
        });
        match spawned {
            Ok(join) => drop(join), // detached: the task ends at shutdown
            // The closure (and its guard) was dropped: the guard already
            // marked the driver closed.
            Err(e) => return Err(io::Error::other(e)),
        }
        Ok(NativeProtoDriver { shared })
    }

    /// A snapshot of the driver's identity and state.
    pub fn probe(&self) -> NativeProtoDriverProbe {
        let s = &self.shared;
        // Relaxed: a diagnostic snapshot.
        NativeProtoDriverProbe {
            endpoint_id: s.id,
            owner_shard: s.owner_shard,
            local_addr: s.local_addr,
            connections: s.connections.load(Ordering::Relaxed),
            max_gso_segments: s.max_gso_segments.load(Ordering::Relaxed),
            gro: s.gro.load(Ordering::Relaxed),
            cid_routed: s.cid_routed.load(Ordering::Relaxed),
            receives_armed: s.receives_armed.load(Ordering::Relaxed),
            closed: s.is_closed(),
        }
    }

    /// The driver's id (unique in the process).
    pub fn endpoint_id(&self) -> u64 {
        self.shared.id
    }

    /// The shard the driver runs on.
    pub fn owner_shard(&self) -> usize {
        self.shared.owner_shard
    }

    /// The UDP socket's address.
    pub fn local_addr(&self) -> SocketAddr {
        self.shared.local_addr
    }

    /// Closes every connection (code 0), stops the driver and closes its
    /// socket. Later operations fail with `BrokenPipe`.
    pub fn shutdown(&self) {
        let _ = self.shared.command(Command::Shutdown);
    }

    /// Whether the driver has shut down.
    pub fn is_closed(&self) -> bool {
        self.shared.is_closed()
    }

    /// The driver's counters.
    pub fn stats(&self) -> NativeProtoStats {
        self.shared.counters.snapshot()
    }

    /// Takes up to `max` events, oldest first, from the bounded FIFO.
    pub fn drain_events(&self, max: usize) -> Vec<NativeProtoEvent> {
        self.shared.events.drain(max)
    }

    /// Sets the fault injection of the driver's UDP paths (replacing the
    /// previous spec; `NativeProtoFaultSpec::none()` turns it off).
    pub fn set_fault_spec(&self, spec: NativeProtoFaultSpec) -> io::Result<()> {
        self.shared.command(Command::SetFaults(spec))
    }

    /// The faults injected so far.
    pub fn fault_stats(&self) -> NativeProtoFaultStats {
        self.shared.fault_counters.snapshot()
    }

    /// Sets the transport tuning. Windows apply to live connections at
    /// once; keep-alive and MTU discovery to connections created after
    /// (when either differs from the default, a fresh transport config
    /// with them replaces the configured one for new connections).
    /// `InvalidInput` for `max_datagram_size == 0`.
    pub fn set_transport_tuning(&self, tuning: NativeProtoTransportTuning) -> io::Result<()> {
        if tuning.max_datagram_size == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "spargio-quic: max_datagram_size must be > 0",
            ));
        }
        *lock(&self.shared.tuning) = tuning;
        self.shared.command(Command::SetTuning(tuning))
    }

    /// The current transport tuning.
    pub fn transport_tuning(&self) -> NativeProtoTransportTuning {
        self.shared.tuning()
    }

    /// The stable ids of the connections the driver holds.
    pub fn connection_ids(&self) -> Vec<u64> {
        let mut ids: Vec<u64> = lock(&self.shared.registry).keys().copied().collect();
        ids.sort_unstable();
        ids
    }

    /// One connection's state (`NotFound` if the driver no longer holds
    /// it).
    pub fn connection_state(&self, connection_id: u64) -> io::Result<NativeProtoConnectionState> {
        let conn = self.shared.connection(connection_id)?;
        Ok(connection_state(&conn))
    }

    /// The peer's DER certificate chain on one connection (`NotConnected`
    /// when the peer presented none, e.g. a client without client auth).
    pub fn connection_peer_cert_chain_der(&self, connection_id: u64) -> io::Result<Vec<Vec<u8>>> {
        let conn = self.shared.connection(connection_id)?;
        peer_chain(&conn)
    }

    /// The driver's connection timers: the earliest deadline among its
    /// connections (each connection task arms its own) and how many fired.
    pub fn timer_state(&self) -> NativeProtoTimerState {
        let conns: Vec<_> = lock(&self.shared.registry)
            .values()
            .filter_map(std::sync::Weak::upgrade)
            .collect();
        let deadline = conns
            .iter()
            .filter_map(|c| c.lock().conn.poll_timeout())
            .min();
        NativeProtoTimerState {
            deadline,
            fires: lock(&self.shared.timer).fires,
        }
    }

    /// Waits until the driver holds no connections (or has shut down).
    pub async fn wait_idle(&self) -> io::Result<()> {
        poll_fn(|cx| self.shared.poll_idle(cx)).await
    }

    /// An `Rc` handle for one shard's code (identity preserved).
    pub fn to_local(&self) -> NativeProtoDriverLocal {
        NativeProtoDriverLocal {
            inner: Rc::new(self.clone()),
        }
    }

    /// A `Send` handle (identity preserved).
    pub fn to_send_handle(&self) -> NativeProtoDriverSend {
        NativeProtoDriverSend {
            inner: self.clone(),
        }
    }

    pub(crate) async fn connect(
        &self,
        config: quinn_proto::ClientConfig,
        addr: SocketAddr,
        server_name: &str,
    ) -> io::Result<Arc<ConnInner>> {
        let reply = Oneshot::new();
        self.shared.command(Command::Connect {
            config,
            addr,
            server_name: server_name.to_owned(),
            reply: reply.clone(),
        })?;
        poll_fn(|cx| reply.poll_recv(cx)).await
    }

    pub(crate) fn set_server_config(&self, config: Option<quinn_proto::ServerConfig>) {
        let _ = self
            .shared
            .command(Command::SetServerConfig(config.map(Arc::new)));
    }

    pub(crate) fn close_all(&self, code: quinn_proto::VarInt, reason: Bytes) {
        let _ = self.shared.command(Command::CloseAll { code, reason });
    }
}

pub(crate) fn connection_state(conn: &ConnInner) -> NativeProtoConnectionState {
    let st = conn.lock();
    NativeProtoConnectionState {
        closed: st.error.is_some() || st.conn.is_closed(),
        established: st.established,
        datagrams_sent: st.datagrams_sent,
        datagrams_received: st.datagrams_received,
        waiting_ops: st.waiters.len(),
        rtt: st.conn.rtt(),
        task_shard: conn.task_shard(),
    }
}

pub(crate) fn peer_chain(conn: &ConnInner) -> io::Result<Vec<Vec<u8>>> {
    conn.lock().peer_certs.clone().ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::NotConnected,
            "spargio-quic: the peer presented no certificate chain",
        )
    })
}

/// Ends a driver whose task never built its `DriverTask` (the socket could
/// not be registered, or the runtime shut down before the task first
/// ran): marks it closed and releases its place in the accept queue, so
/// nothing waits on it forever.
struct StartGuard {
    shared: Option<Arc<DriverShared>>,
}

impl Drop for StartGuard {
    fn drop(&mut self) {
        if let Some(shared) = self.shared.take() {
            // Release: pairs with `is_closed`'s Acquire.
            shared.closed.store(true, Ordering::Release);
            shared.wake_idle();
            shared.accept.driver_stopped();
        }
    }
}

/// An `Rc`-based (`!Send`) handle to a driver; see
/// [`NativeProtoDriver::to_local`]. Derefs to [`NativeProtoDriver`].
#[derive(Clone, Debug)]
pub struct NativeProtoDriverLocal {
    inner: Rc<NativeProtoDriver>,
}

impl NativeProtoDriverLocal {
    /// A `Send` handle to the same driver.
    pub fn to_send_handle(&self) -> NativeProtoDriverSend {
        self.inner.to_send_handle()
    }
}

impl Deref for NativeProtoDriverLocal {
    type Target = NativeProtoDriver;
    fn deref(&self) -> &NativeProtoDriver {
        &self.inner
    }
}

/// A `Send` handle to a driver; see [`NativeProtoDriver::to_send_handle`].
/// Derefs to [`NativeProtoDriver`].
#[derive(Clone, Debug)]
pub struct NativeProtoDriverSend {
    inner: NativeProtoDriver,
}

impl Deref for NativeProtoDriverSend {
    type Target = NativeProtoDriver;
    fn deref(&self) -> &NativeProtoDriver {
        &self.inner
    }
}

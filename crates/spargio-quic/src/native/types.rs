//! The public value types of [`NativeProtoDriver`](crate::NativeProtoDriver):
//! options, transport tuning, statistics, events and probes.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How many events [`NativeProtoDriver::drain_events`](crate::NativeProtoDriver::drain_events)
/// keeps. Past it the oldest event is dropped and counted in
/// [`NativeProtoStats::events_dropped`].
pub const NATIVE_EVENT_CAPACITY: usize = 1024;

/// Options of one [`NativeProtoDriver`](crate::NativeProtoDriver).
#[derive(Clone, Debug)]
pub struct NativeProtoDriverOptions {
    /// The shard the driver task (and its UDP socket's ring operations)
    /// runs on.
    pub owner_shard: usize,
    /// Accept incoming connections with this configuration (a server);
    /// `None` refuses them (a client).
    pub server_config: Option<quinn_proto::ServerConfig>,
    /// The address to bind.
    pub bind_addr: SocketAddr,
    /// Set `SO_REUSEPORT` before binding (several drivers on one address).
    pub reuse_port: bool,
    /// Bound on waiting operations per connection and on queued commands
    /// (see [`QuicEndpointOptions::max_inflight_ops`](crate::QuicEndpointOptions)).
    pub max_inflight_ops: usize,
    /// Bound on UDP sends in flight on the ring at once.
    pub max_pending_transmits: usize,
    /// The most receives kept in flight on the ring at once (default 4).
    /// The driver keeps one while datagrams arrive one at a time (each
    /// datagram wakes every waiting receive, and the losers take a detour
    /// through an io-wq thread), and more, up to this, while the kernel
    /// coalesces queued datagrams (GRO), i.e. while they arrive faster
    /// than one receive takes them.
    pub receives_in_flight: usize,
    /// Bound on accepted connections not yet taken by `accept()`
    /// (including those still handshaking); more are refused.
    pub accept_backlog: usize,
    /// Use GSO/GRO where the kernel has them.
    pub segmentation_offload: bool,
    /// Connection-id routing for a driver sharing its port with others
    /// (`SO_REUSEPORT`): `(index, count)`, this driver's place among the
    /// `count` drivers, which must bind in index order. The driver issues
    /// connection ids that lead to it, and the driver with index 0
    /// attaches the kernel program that delivers by them (see
    /// [`NativeProtoDriverProbe::cid_routed`]). `None` (the default):
    /// quinn's own ids, and the kernel's 4-tuple hash picks the socket.
    pub cid_route: Option<(u8, u8)>,
}

impl NativeProtoDriverOptions {
    /// Options for a driver bound to `bind_addr` on shard `owner_shard`.
    pub fn new(owner_shard: usize, bind_addr: SocketAddr) -> NativeProtoDriverOptions {
        NativeProtoDriverOptions {
            owner_shard,
            server_config: None,
            bind_addr,
            reuse_port: false,
            max_inflight_ops: 4096,
            max_pending_transmits: 16,
            receives_in_flight: 4,
            accept_backlog: 1024,
            segmentation_offload: true,
            cid_route: None,
        }
    }

    /// Accept connections with `config`.
    pub fn with_server_config(mut self, config: quinn_proto::ServerConfig) -> Self {
        self.server_config = Some(config);
        self
    }

    /// Bound the UDP sends in flight (at least 1).
    pub fn with_max_pending_transmits(mut self, n: usize) -> Self {
        self.max_pending_transmits = n.max(1);
        self
    }
}

/// Transport settings a driver applies to its connections (see
/// [`NativeProtoDriver::set_transport_tuning`](crate::NativeProtoDriver::set_transport_tuning)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NativeProtoTransportTuning {
    /// Largest datagram `send_datagram` accepts (bytes, > 0); larger ones
    /// are rejected with `InvalidInput` and counted.
    pub max_datagram_size: usize,
    /// Connection send window (bytes), applied live.
    pub send_window: u64,
    /// Connection receive window (bytes), applied live.
    pub receive_window: u64,
    /// Keep-alive interval for connections created after the change.
    pub keep_alive_interval: Option<Duration>,
    /// Path MTU discovery for connections created after the change.
    pub mtu_discovery_enabled: bool,
}

impl Default for NativeProtoTransportTuning {
    fn default() -> Self {
        NativeProtoTransportTuning {
            max_datagram_size: 65_527,
            send_window: 8 * 1024 * 1024,
            receive_window: 8 * 1024 * 1024,
            keep_alive_interval: None,
            mtu_discovery_enabled: true,
        }
    }
}

impl NativeProtoTransportTuning {
    /// Sets [`max_datagram_size`](Self::max_datagram_size).
    pub fn with_max_datagram_size(mut self, v: usize) -> Self {
        self.max_datagram_size = v;
        self
    }
    /// Sets [`send_window`](Self::send_window).
    pub fn with_send_window(mut self, v: u64) -> Self {
        self.send_window = v;
        self
    }
    /// Sets [`receive_window`](Self::receive_window).
    pub fn with_receive_window(mut self, v: u64) -> Self {
        self.receive_window = v;
        self
    }
    /// Sets [`keep_alive_interval`](Self::keep_alive_interval).
    pub fn with_keep_alive_interval(mut self, v: Option<Duration>) -> Self {
        self.keep_alive_interval = v;
        self
    }
    /// Sets [`mtu_discovery_enabled`](Self::mtu_discovery_enabled).
    pub fn with_mtu_discovery_enabled(mut self, v: bool) -> Self {
        self.mtu_discovery_enabled = v;
        self
    }
}

impl DriverCounters {
    /// Counts one UDP send of `len` bytes (`segment_size`: GSO segments).
    pub(crate) fn count_send(&self, len: usize, segment_size: Option<usize>) {
        let segments = match segment_size {
            Some(s) if s > 0 => len.div_ceil(s),
            _ => 1,
        };
        // Relaxed: statistics.
        self.datagrams_sent
            .fetch_add(segments as u64, Ordering::Relaxed);
        self.bytes_sent.fetch_add(len as u64, Ordering::Relaxed);
        self.send_ops.fetch_add(1, Ordering::Relaxed);
    }
}

macro_rules! counters {
    ($($(#[doc = $doc:literal])* $name:ident),* $(,)?) => {
        /// A snapshot of one driver's counters.
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        pub struct NativeProtoStats {
            $($(#[doc = $doc])* pub $name: u64,)*
        }

        impl NativeProtoStats {
            /// Every counter as (name, help, value), for exporters.
            pub(crate) fn each(&self, mut f: impl FnMut(&'static str, &'static str, u64)) {
                $(f(stringify!($name), concat!($($doc),*), self.$name);)*
            }
        }

        #[derive(Debug, Default)]
        pub(crate) struct DriverCounters {
            $(pub(crate) $name: AtomicU64,)*
        }

        impl DriverCounters {
            pub(crate) fn snapshot(&self) -> NativeProtoStats {
                // Relaxed: independent statistics counters.
                NativeProtoStats { $($name: self.$name.load(Ordering::Relaxed),)* }
            }
        }
    };
}

counters! {
    /// UDP datagrams received (after GRO splitting).
    datagrams_received,
    /// UDP payload bytes received.
    bytes_received,
    /// UDP datagrams sent (each GSO segment counts).
    datagrams_sent,
    /// UDP payload bytes sent.
    bytes_sent,
    /// Ring send operations (one per GSO batch).
    send_ops,
    /// Receives that carried several GRO segments.
    gro_batches,
    /// Datagrams quinn-proto's `Endpoint::handle` discarded without any
    /// event: undecodable headers, unknown versions to a client, packets
    /// for no connection too short for a stateless reset.
    datagrams_malformed,
    /// Stateless responses the endpoint sent to unroutable datagrams
    /// (version negotiation, stateless reset, refusals).
    stateless_responses,
    /// Failed UDP sends (the datagram is lost; QUIC recovers).
    send_errors,
    /// Failed UDP receives.
    recv_errors,
    /// Times the driver added a waiting receive because datagrams were
    /// queueing up (see [`NativeProtoDriverProbe::receives_armed`]).
    receive_window_grows,
    /// Receives that found no datagram (`EAGAIN`): a datagram wakes every
    /// receive waiting on the socket, and a loser the kernel retried on an
    /// io-wq worker ends empty. Not an error.
    recv_would_block,
    /// Receives taken without the ring after a ring receive completed
    /// (the datagrams that arrived with it; see `driver_task/io.rs`).
    receives_drained,
    /// Times the driver looked for datagrams queued behind a completed
    /// ring receive (after a handshake packet, or a datagram for a
    /// connection still in its first few events); each costs at least one
    /// `recvmsg`, the last of which finds the socket empty.
    drains,
    /// New connection attempts this driver dealt to another driver of
    /// its server group (see `QuicEndpoint::server`).
    connections_dealt,
    /// Datagrams this driver handed to another driver of its group: the
    /// dealt attempts, and the client's packets that followed them here.
    datagrams_dealt,
    /// Busy connections whose task moved to another shard (once at most
    /// each: to even out the connection tasks per shard, so that the two
    /// ends of a loopback connection sharing a shard split their crypto).
    connection_moves,
    /// Connections registered (accepted or connected).
    registrations,
    /// Incoming connections refused because the accept backlog was full.
    incoming_refused,
    /// Connections whose handshake completed.
    connections_established,
    /// Connections fully drained and removed.
    connections_closed,
    /// Streams opened locally, unidirectional.
    uni_opens,
    /// Streams opened locally, bidirectional.
    bi_opens,
    /// Datagrams accepted by `send_datagram`.
    datagrams_queued,
    /// `send_datagram` calls rejected for exceeding the tuning's
    /// `max_datagram_size`.
    oversize_rejections,
    /// Operations refused with `WouldBlock` (a bound was reached).
    backpressure,
    /// Connection timers that fired.
    timer_fires,
    /// Events dropped from the full event FIFO (oldest first).
    events_dropped,
    /// Wakers that panicked (caught; the driver kept running).
    waker_panics,
}

/// A driver event (see
/// [`NativeProtoDriver::drain_events`](crate::NativeProtoDriver::drain_events)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NativeProtoEvent {
    /// A connection was registered with the driver.
    ConnectionRegistered {
        /// The connection's stable id.
        connection_id: u64,
    },
    /// A connection's handshake completed.
    ConnectionEstablished {
        /// The connection's stable id.
        connection_id: u64,
    },
    /// A connection was drained and removed (emitted exactly once).
    ConnectionClosed {
        /// The connection's stable id.
        connection_id: u64,
    },
    /// A connection's timer fired.
    TimeoutFired {
        /// How many connections' timers were due (1: each connection
        /// task reports its own).
        connections: usize,
    },
    /// A datagram over the tuning's `max_datagram_size` was rejected.
    OversizeRejected {
        /// The connection's stable id.
        connection_id: u64,
        /// The rejected size.
        size: usize,
    },
    /// An operation was refused with `WouldBlock`.
    Backpressure {
        /// The connection's stable id (0: the endpoint's queues).
        connection_id: u64,
    },
    /// An incoming connection was refused (accept backlog full).
    IncomingRefused {
        /// The client's address.
        remote: SocketAddr,
    },
}

/// The bounded event FIFO shared by a driver and its handles.
#[derive(Debug, Default)]
pub(crate) struct EventLog {
    events: Mutex<VecDeque<NativeProtoEvent>>,
}

impl EventLog {
    pub(crate) fn push(&self, event: NativeProtoEvent, counters: &DriverCounters) {
        let mut q = self.events.lock().unwrap_or_else(|e| e.into_inner());
        if q.len() >= NATIVE_EVENT_CAPACITY {
            q.pop_front();
            // Relaxed: statistics.
            counters.events_dropped.fetch_add(1, Ordering::Relaxed);
        }
        q.push_back(event);
    }

    pub(crate) fn drain(&self, max: usize) -> Vec<NativeProtoEvent> {
        let mut q = self.events.lock().unwrap_or_else(|e| e.into_inner());
        let n = max.min(q.len());
        q.drain(..n).collect()
    }
}

/// One connection's state as the driver sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NativeProtoConnectionState {
    /// The connection is closed (locally, by the peer, or timed out).
    pub closed: bool,
    /// The handshake completed.
    pub established: bool,
    /// Datagrams (QUIC DATAGRAM frames) sent.
    pub datagrams_sent: u64,
    /// Datagrams (QUIC DATAGRAM frames) received.
    pub datagrams_received: u64,
    /// Operations currently waiting on the connection.
    pub waiting_ops: usize,
    /// The current round-trip estimate.
    pub rtt: Duration,
    /// The shard running the connection's task (`None` before it
    /// starts). It starts on its endpoint's shard and may move once (see
    /// [`NativeProtoStats::connection_moves`]).
    pub task_shard: Option<usize>,
}

/// The driver's connection timers (each connection task arms its own).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NativeProtoTimerState {
    /// The earliest connection timeout, if any.
    pub deadline: Option<Instant>,
    /// How many connection timers fired.
    pub fires: u64,
}

/// What [`NativeProtoDriver::probe`](crate::NativeProtoDriver::probe) reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NativeProtoDriverProbe {
    /// The driver's id (unique in the process).
    pub endpoint_id: u64,
    /// The shard it runs on.
    pub owner_shard: usize,
    /// Its UDP socket's address.
    pub local_addr: SocketAddr,
    /// Connections it currently holds.
    pub connections: usize,
    /// UDP segmentation offload: the most segments per send (1: none).
    pub max_gso_segments: usize,
    /// Whether the socket coalesces receives (GRO).
    pub gro: bool,
    /// Whether it has shut down.
    pub closed: bool,
    /// Whether datagrams reach this driver by destination connection id
    /// (its group's kernel routing program is attached; see
    /// [`NativeProtoDriverOptions::cid_route`]). `false` for a lone
    /// driver, and where the kernel has no reuseport programs: then its
    /// 4-tuple hash picks the driver.
    pub cid_routed: bool,
    /// Receives the driver keeps waiting on its socket now: one while
    /// datagrams come one at a time, up to
    /// [`NativeProtoDriverOptions::receives_in_flight`] while they queue up.
    pub receives_armed: usize,
}

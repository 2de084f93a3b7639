//! Endpoint options and the backend choice.

use std::time::Duration;

/// Which implementation runs an endpoint.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum QuicBackend {
    /// quinn-proto driven on spargio shards: UDP on the ring, timers on
    /// the shard's timer wheel (the default).
    #[default]
    Native,
    /// quinn on one shared, persistent Tokio runtime (two workers, created
    /// on first use); each operation is spawned there and awaited from
    /// spargio. For compatibility.
    Bridge,
}

/// Options of a [`QuicEndpoint`](crate::QuicEndpoint).
///
/// ```
/// use std::time::Duration;
/// use spargio_quic::{QuicBackend, QuicEndpointOptions};
///
/// let options = QuicEndpointOptions::default()
///     .with_connect_timeout(Duration::from_secs(5))
///     .with_max_inflight_ops(256)
///     .with_shards(2)
///     .with_backend(QuicBackend::Native);
/// assert_eq!(options.max_inflight_ops, 256);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuicEndpointOptions {
    /// How long `connect` waits for the handshake (`TimedOut` after;
    /// default 10 s).
    pub connect_timeout: Duration,
    /// How long `accept` waits for a connection (`TimedOut` after;
    /// default: forever).
    pub accept_timeout: Option<Duration>,
    /// A bound on each waiting stream/datagram operation (`TimedOut`
    /// after; default: none; flow control and the idle timeout still
    /// apply).
    pub operation_timeout: Option<Duration>,
    /// How many operations may wait at once on one connection (stream
    /// reads and writes, accepts, datagram reads, `closed`), on one
    /// endpoint's accept queue, and in one driver's command queue. One
    /// more gives `io::ErrorKind::WouldBlock` (default 4096).
    pub max_inflight_ops: usize,
    /// The implementation (default [`QuicBackend::Native`]).
    pub backend: QuicBackend,
    /// Native drivers (one UDP socket each, on consecutive shards). An
    /// endpoint with more than one binds every socket to the same address
    /// with `SO_REUSEPORT`, and a kernel program delivers each datagram
    /// to the driver its destination connection id names: a server's new
    /// connections spread over the drivers (even from one client port),
    /// a client's go to the driver on the shard that connects, and a peer
    /// that changes address keeps reaching its connection. Where the
    /// kernel refuses the program, a server's drivers are picked by its
    /// 4-tuple hash instead (a client that changes address may then be
    /// lost) and a client keeps one driver
    /// ([`NativeProtoDriverProbe::cid_routed`](crate::NativeProtoDriverProbe::cid_routed)
    /// tells). `None` (the default): one per runtime shard, the first on
    /// the calling shard for a client (shards in turn for clients made
    /// outside the runtime).
    pub shards: Option<usize>,
    /// Established (or handshaking) connections a server keeps for
    /// `accept` before refusing new ones (default 1024).
    pub accept_backlog: usize,
    /// Use UDP segmentation offload where the kernel has it: GSO (one
    /// send carries a burst of datagrams of one connection) and GRO (one
    /// receive may carry several). Default on.
    pub segmentation_offload: bool,
    /// Route datagrams to a multi-driver endpoint's drivers by connection
    /// id (the kernel program described under [`shards`](Self::shards)).
    /// Default on; off, the endpoint behaves as where the kernel refuses
    /// the program: a server's drivers are picked by the kernel's 4-tuple
    /// hash (no dealing of new connections, and a client that changes
    /// address may be lost) and a client keeps one driver. For hosts whose
    /// policy forbids attaching socket programs.
    pub connection_id_routing: bool,
}

impl Default for QuicEndpointOptions {
    fn default() -> Self {
        QuicEndpointOptions {
            connect_timeout: Duration::from_secs(10),
            accept_timeout: None,
            operation_timeout: None,
            max_inflight_ops: 4096,
            backend: QuicBackend::Native,
            shards: None,
            accept_backlog: 1024,
            segmentation_offload: true,
            connection_id_routing: true,
        }
    }
}

impl QuicEndpointOptions {
    /// Sets [`connect_timeout`](Self::connect_timeout).
    pub fn with_connect_timeout(mut self, t: Duration) -> Self {
        self.connect_timeout = t;
        self
    }
    /// Sets [`accept_timeout`](Self::accept_timeout).
    pub fn with_accept_timeout(mut self, t: Option<Duration>) -> Self {
        self.accept_timeout = t;
        self
    }
    /// Sets [`operation_timeout`](Self::operation_timeout).
    pub fn with_operation_timeout(mut self, t: Option<Duration>) -> Self {
        self.operation_timeout = t;
        self
    }
    /// Sets [`max_inflight_ops`](Self::max_inflight_ops) (at least 1).
    pub fn with_max_inflight_ops(mut self, n: usize) -> Self {
        self.max_inflight_ops = n.max(1);
        self
    }
    /// Sets [`backend`](Self::backend).
    pub fn with_backend(mut self, backend: QuicBackend) -> Self {
        self.backend = backend;
        self
    }
    /// Sets [`shards`](Self::shards) (at least 1).
    pub fn with_shards(mut self, n: usize) -> Self {
        self.shards = Some(n.max(1));
        self
    }
    /// Sets [`segmentation_offload`](Self::segmentation_offload).
    pub fn with_segmentation_offload(mut self, on: bool) -> Self {
        self.segmentation_offload = on;
        self
    }
    /// Sets [`accept_backlog`](Self::accept_backlog) (at least 1).
    pub fn with_accept_backlog(mut self, n: usize) -> Self {
        self.accept_backlog = n.max(1);
        self
    }

    /// Sets [`connection_id_routing`](Self::connection_id_routing).
    pub fn with_connection_id_routing(mut self, on: bool) -> Self {
        self.connection_id_routing = on;
        self
    }
}

//! [`QuicEndpoint`]: constructors, connect and accept.

use std::future::poll_fn;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use quinn_proto::{ClientConfig, ServerConfig};
use spargio::RuntimeHandle;

use crate::bridge::BridgeEndpoint;
use crate::connection::{ConnKind, QuicConnection};
use crate::metrics::QuicMetrics;
use crate::native::deal::DealGroup;
use crate::native::shared::{lock, AcceptQueue};
use crate::native::{NativeProtoDriver, NativeProtoDriverOptions};
use crate::options::{QuicBackend, QuicEndpointOptions};
use crate::util::{deadline, OpCtx};

pub(crate) enum EndpointKind {
    Native {
        drivers: Vec<NativeProtoDriver>,
        accept: Arc<AcceptQueue>,
    },
    Bridge(BridgeEndpoint),
}

struct EndpointInner {
    kind: EndpointKind,
    options: QuicEndpointOptions,
    metrics: QuicMetrics,
    ctx: Arc<OpCtx>,
    rt: Option<RuntimeHandle>,
    client_config: Mutex<Option<ClientConfig>>,
    next_driver: std::sync::atomic::AtomicUsize,
}

impl Drop for EndpointInner {
    fn drop(&mut self) {
        match &self.kind {
            EndpointKind::Native { drivers, .. } => drivers.iter().for_each(|d| d.shutdown()),
            EndpointKind::Bridge(b) => b.shutdown(),
        }
    }
}

/// A QUIC endpoint: a server, a client, or both. `Clone + Send + Sync`.
///
/// When the last clone is dropped, every connection is closed (code 0),
/// the drivers stop and the UDP sockets are closed.
///
/// ```no_run
/// use spargio_quic::QuicEndpoint;
/// # async fn demo(handle: spargio::RuntimeHandle,
/// #     server_config: spargio_quic::quinn::ServerConfig,
/// #     client_config: spargio_quic::quinn::ClientConfig) -> std::io::Result<()> {
/// let server = QuicEndpoint::server(&handle, "127.0.0.1:0".parse().unwrap(), server_config)?;
/// let client = QuicEndpoint::client(&handle, "127.0.0.1:0".parse().unwrap())?;
/// client.set_default_client_config(client_config);
/// let conn = client.connect(server.local_addr()?, "localhost").await?;
/// let (mut send, mut recv) = conn.open_bi().await?;
/// send.write_all(b"ping").await?;
/// send.finish()?;
/// let reply = recv.read_to_end(1024).await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct QuicEndpoint {
    inner: Arc<EndpointInner>,
}

impl std::fmt::Debug for QuicEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QuicEndpoint")
            .field("backend", &self.inner.options.backend)
            .field("local_addr", &self.local_addr().ok())
            .finish_non_exhaustive()
    }
}

impl QuicEndpoint {
    /// A server bound to `addr` with default options (native, one driver
    /// per runtime shard).
    pub fn server(
        handle: impl AsRef<RuntimeHandle>,
        addr: SocketAddr,
        config: ServerConfig,
    ) -> io::Result<QuicEndpoint> {
        QuicEndpoint::server_with_options(handle, addr, config, QuicEndpointOptions::default())
    }

    /// A server bound to `addr`. With the native backend and more than one
    /// driver ([`QuicEndpointOptions::shards`]), every driver's socket is
    /// bound to the same address with `SO_REUSEPORT` (port 0 picks one
    /// port for all).
    pub fn server_with_options(
        handle: impl AsRef<RuntimeHandle>,
        addr: SocketAddr,
        config: ServerConfig,
        options: QuicEndpointOptions,
    ) -> io::Result<QuicEndpoint> {
        let handle = handle.as_ref();
        let n = options.shards.unwrap_or(handle.shard_count()).max(1);
        QuicEndpoint::build(handle, addr, Some(config), options, n, 0)
    }

    /// A client bound to `addr` (usually port 0) with default options
    /// (native, one driver per runtime shard, all on one port; see
    /// [`client_with_options`](Self::client_with_options)).
    pub fn client(handle: impl AsRef<RuntimeHandle>, addr: SocketAddr) -> io::Result<QuicEndpoint> {
        QuicEndpoint::client_with_options(handle, addr, QuicEndpointOptions::default())
    }

    /// A client bound to `addr`. With the native backend it gets
    /// [`QuicEndpointOptions::shards`] drivers (default: one per runtime
    /// shard, the first on the calling shard), all bound to one port and
    /// routed by connection id like a server's; `connect` uses the
    /// calling shard's driver (from outside the runtime, the drivers in
    /// turn), so a client's connections spread over the shards with the
    /// tasks that make them. Where the kernel refuses the routing program,
    /// the client keeps one driver (answers could not find the others).
    pub fn client_with_options(
        handle: impl AsRef<RuntimeHandle>,
        addr: SocketAddr,
        options: QuicEndpointOptions,
    ) -> io::Result<QuicEndpoint> {
        let handle = handle.as_ref();
        let n = options.shards.unwrap_or(handle.shard_count()).max(1);
        // The calling shard; from outside the runtime, shards in turn.
        static NEXT_OUTSIDE: std::sync::atomic::AtomicUsize =
            std::sync::atomic::AtomicUsize::new(0);
        let first = spargio::ShardCtx::current().map_or_else(
            || {
                NEXT_OUTSIDE.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
                    % handle.shard_count()
            },
            |c| c.shard_id(),
        );
        QuicEndpoint::build(handle, addr, None, options, n, first)
    }

    /// Wraps an existing quinn endpoint as a [`QuicBackend::Bridge`]
    /// endpoint (its operations run on the endpoint's own runtime if it
    /// was created elsewhere, else on the bridge runtime).
    pub fn from_endpoint(endpoint: quinn::Endpoint, options: QuicEndpointOptions) -> QuicEndpoint {
        QuicEndpoint::wrap(
            EndpointKind::Bridge(BridgeEndpoint::from_quinn(endpoint)),
            options.with_backend(QuicBackend::Bridge),
            None,
        )
    }

    /// Wraps a driver started with [`NativeProtoDriver::start`] (for a
    /// socket or shard chosen by hand). Dropping the last endpoint handle
    /// shuts the driver down.
    pub fn from_driver(
        handle: impl AsRef<RuntimeHandle>,
        driver: NativeProtoDriver,
        options: QuicEndpointOptions,
    ) -> QuicEndpoint {
        let accept = driver.shared.accept.clone();
        QuicEndpoint::wrap(
            EndpointKind::Native {
                drivers: vec![driver],
                accept,
            },
            options.with_backend(QuicBackend::Native),
            Some(handle.as_ref().clone()),
        )
    }

    fn build(
        handle: &RuntimeHandle,
        addr: SocketAddr,
        server: Option<ServerConfig>,
        options: QuicEndpointOptions,
        n: usize,
        first_shard: usize,
    ) -> io::Result<QuicEndpoint> {
        let kind = match options.backend {
            QuicBackend::Bridge => EndpointKind::Bridge(BridgeEndpoint::bind(addr, server)?),
            QuicBackend::Native => {
                let accept = AcceptQueue::new(options.accept_backlog, options.max_inflight_ops);
                let mut drivers: Vec<NativeProtoDriver> = Vec::with_capacity(n);
                let mut bind = addr;
                for i in 0..n {
                    let mut o = NativeProtoDriverOptions::new(
                        (first_shard + i) % handle.shard_count(),
                        bind,
                    );
                    o.server_config = server.clone();
                    o.reuse_port = n > 1;
                    o.max_inflight_ops = options.max_inflight_ops;
                    o.accept_backlog = options.accept_backlog;
                    o.segmentation_offload = options.segmentation_offload;
                    if o.reuse_port && options.connection_id_routing {
                        // At most 255 drivers share a port (one byte of
                        // the connection id routes).
                        o.cid_route = u8::try_from(n).ok().map(|count| (i as u8, count));
                    }
                    let started = NativeProtoDriver::start_with(handle, o, accept.clone());
                    let driver = match started {
                        Ok(d) => d,
                        Err(e) => {
                            drivers.iter().for_each(|d| d.shutdown());
                            return Err(e);
                        }
                    };
                    if i > 0 {
                        // Driver 0 attached the group's routing program.
                        let routed = drivers[0].shared.cid_routed.load(Ordering::Relaxed);
                        driver.shared.cid_routed.store(routed, Ordering::Relaxed);
                    }
                    if i == 0 {
                        // The others share the first socket's (maybe
                        // kernel-picked) port.
                        bind = driver.local_addr();
                    }
                    drivers.push(driver);
                }
                if server.is_some() && drivers.len() > 1 && drivers[0].probe().cid_routed {
                    // New connections are dealt to the drivers in turn
                    // (see `native/deal.rs`); only where datagrams are
                    // routed by connection id, which is what brings a
                    // dealt connection's later datagrams to its driver.
                    let group = Arc::new(DealGroup::default());
                    group.set_drivers(drivers.iter().map(|d| Arc::downgrade(&d.shared)).collect());
                    for d in &drivers {
                        let _ = d.shared.deal.set(group.clone());
                    }
                }
                if server.is_none() && drivers.len() > 1 && !drivers[0].probe().cid_routed {
                    // A client picks the driver of a connection before
                    // the first answer: without the routing program, the
                    // kernel's hash would send every answer from one
                    // server to one socket. Keep one driver.
                    drivers.drain(1..).for_each(|d| d.shutdown());
                }
                EndpointKind::Native { drivers, accept }
            }
        };
        Ok(QuicEndpoint::wrap(kind, options, Some(handle.clone())))
    }

    fn wrap(
        kind: EndpointKind,
        options: QuicEndpointOptions,
        rt: Option<RuntimeHandle>,
    ) -> QuicEndpoint {
        let metrics = QuicMetrics::default();
        let ctx = Arc::new(OpCtx {
            metrics: metrics.clone(),
            op_timeout: options.operation_timeout,
            rt: rt.clone(),
        });
        QuicEndpoint {
            inner: Arc::new(EndpointInner {
                kind,
                options,
                metrics,
                ctx,
                rt,
                client_config: Mutex::new(None),
                next_driver: Default::default(),
            }),
        }
    }

    /// The bound address (of the first driver's socket; all of a
    /// multi-driver server's sockets share it).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        match &self.inner.kind {
            EndpointKind::Native { drivers, .. } => Ok(drivers[0].local_addr()),
            EndpointKind::Bridge(b) => b.local_addr(),
        }
    }

    /// The backend running this endpoint.
    pub fn backend(&self) -> QuicBackend {
        self.inner.options.backend
    }

    /// The endpoint's options.
    pub fn options(&self) -> &QuicEndpointOptions {
        &self.inner.options
    }

    /// The native drivers, one per shard the endpoint runs on. Empty for
    /// the bridge backend (quinn's own driver runs on the bridge's Tokio
    /// runtime): check [`backend`](Self::backend) before indexing.
    pub fn drivers(&self) -> &[NativeProtoDriver] {
        match &self.inner.kind {
            EndpointKind::Native { drivers, .. } => drivers,
            EndpointKind::Bridge(_) => &[],
        }
    }

    /// The endpoint's counters.
    pub fn metrics(&self) -> QuicMetrics {
        self.inner.metrics.clone()
    }

    /// The configuration [`connect`](Self::connect) uses.
    pub fn set_default_client_config(&self, config: ClientConfig) {
        *lock(&self.inner.client_config) = Some(config);
    }

    /// Replaces the server configuration for new connections (`None`
    /// stops accepting).
    pub fn set_server_config(&self, config: Option<ServerConfig>) {
        match &self.inner.kind {
            EndpointKind::Native { drivers, .. } => drivers
                .iter()
                .for_each(|d| d.set_server_config(config.clone())),
            EndpointKind::Bridge(b) => b.set_server_config(config),
        }
    }

    /// Closes every connection with `code` and `reason` and stops
    /// accepting; the drivers keep running until the endpoint is dropped
    /// (so [`wait_idle`](Self::wait_idle) can wait for the close to be
    /// delivered).
    ///
    /// # Panics
    ///
    /// If `code` is 2^62 or more (QUIC codes are 62-bit varints).
    #[track_caller]
    pub fn close(&self, code: u64, reason: &[u8]) {
        let code = crate::error::close_code(code);
        let reason = Bytes::copy_from_slice(reason);
        match &self.inner.kind {
            EndpointKind::Native { drivers, .. } => drivers
                .iter()
                .for_each(|d| d.close_all(code, reason.clone())),
            EndpointKind::Bridge(b) => b.close(code, &reason),
        }
    }

    /// Waits until every connection has been drained (after
    /// [`close`](Self::close), the peers were told).
    pub async fn wait_idle(&self) -> io::Result<()> {
        match &self.inner.kind {
            EndpointKind::Native { drivers, .. } => {
                for d in drivers {
                    d.wait_idle().await?;
                }
                Ok(())
            }
            EndpointKind::Bridge(b) => b.wait_idle().await,
        }
    }

    /// Connects to `addr` with the default client configuration and waits
    /// for the handshake (at most `connect_timeout`).
    pub async fn connect(&self, addr: SocketAddr, server_name: &str) -> io::Result<QuicConnection> {
        let config = lock(&self.inner.client_config).clone().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "spargio-quic: no default client config (set_default_client_config)",
            )
        })?;
        self.connect_with(config, addr, server_name).await
    }

    /// Connects to `addr` with `config`.
    pub async fn connect_with(
        &self,
        config: ClientConfig,
        addr: SocketAddr,
        server_name: &str,
    ) -> io::Result<QuicConnection> {
        let m = &self.inner.metrics;
        m.add(|m| &m.connects_started, 1);
        let limit = self.inner.options.connect_timeout;
        let attempt = async {
            match &self.inner.kind {
                EndpointKind::Native { drivers, .. } => {
                    // The calling shard's driver (the connection's work
                    // stays beside the task that made it); else in turn.
                    let here = spargio::ShardCtx::current()
                        .and_then(|c| drivers.iter().position(|d| d.owner_shard() == c.shard_id()));
                    // Relaxed: round-robin position only.
                    let i = here.unwrap_or_else(|| {
                        self.inner.next_driver.fetch_add(1, Ordering::Relaxed) % drivers.len()
                    });
                    let inner = drivers[i].connect(config, addr, server_name).await?;
                    let conn = inner.acquire();
                    inner.established().await?;
                    m.add(|m| &m.native_ops_dispatched, 1);
                    Ok(ConnKind::Native(conn))
                }
                EndpointKind::Bridge(b) => {
                    m.add(|m| &m.bridge_ops_dispatched, 1);
                    Ok(ConnKind::Bridge(
                        b.connect(config, addr, server_name).await?,
                    ))
                }
            }
        };
        match deadline(self.inner.rt.as_ref(), limit, attempt).await {
            Ok(Ok(kind)) => {
                m.add(|m| &m.connects_succeeded, 1);
                Ok(self.connection(kind))
            }
            Ok(Err(e)) => {
                m.add(|m| &m.connects_failed, 1);
                Err(e)
            }
            Err(_) => {
                m.add(|m| &m.connect_timeouts, 1);
                Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "spargio-quic: connect_timeout elapsed before the handshake completed",
                ))
            }
        }
    }

    fn connection(&self, kind: ConnKind) -> QuicConnection {
        QuicConnection::new(kind, self.inner.ctx.clone())
    }

    /// The next established incoming connection (from any of the
    /// endpoint's drivers). Cancel-safe on the native backend: a dropped
    /// `accept` leaves the connection queued. On the bridge backend a
    /// dropped `accept` drops the connection whose handshake it was
    /// awaiting (quinn hands an incoming connection to one accepter). `BrokenPipe` once the
    /// endpoint has shut down; `WouldBlock` past `max_inflight_ops`
    /// concurrent accepts.
    pub async fn accept(&self) -> io::Result<QuicConnection> {
        let m = &self.inner.metrics;
        m.add(|m| &m.accepts_started, 1);
        let attempt = async {
            let kind: io::Result<ConnKind> = match &self.inner.kind {
                EndpointKind::Native { accept, .. } => {
                    let mut waiter = AcceptWaiter {
                        queue: accept,
                        key: 0,
                    };
                    let inner = poll_fn(|cx| waiter.queue.poll_take(&mut waiter.key, cx)).await?;
                    m.add(|m| &m.native_ops_dispatched, 1);
                    Ok(ConnKind::Native(inner.acquire()))
                }
                EndpointKind::Bridge(b) => {
                    m.add(|m| &m.bridge_ops_dispatched, 1);
                    Ok(ConnKind::Bridge(b.accept().await?))
                }
            };
            kind
        };
        let res = match self.inner.options.accept_timeout {
            None => attempt.await,
            Some(t) => match deadline(self.inner.rt.as_ref(), t, attempt).await {
                Ok(r) => r,
                Err(_) => {
                    m.add(|m| &m.accept_timeouts, 1);
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "spargio-quic: accept_timeout elapsed",
                    ));
                }
            },
        };
        match res {
            Ok(kind) => {
                m.add(|m| &m.accepts_succeeded, 1);
                Ok(self.connection(kind))
            }
            Err(e) => {
                m.add(|m| &m.accepts_failed, 1);
                if e.kind() == io::ErrorKind::WouldBlock {
                    m.add(|m| &m.backpressure_hits, 1);
                }
                Err(e)
            }
        }
    }

    /// Established connections waiting in the accept queue.
    pub fn pending_accepts(&self) -> usize {
        match &self.inner.kind {
            EndpointKind::Native { accept, .. } => accept.ready_len(),
            EndpointKind::Bridge(_) => 0,
        }
    }
}

/// Unregisters a dropped `accept()` future's waker.
struct AcceptWaiter<'a> {
    queue: &'a AcceptQueue,
    key: u64,
}

impl Drop for AcceptWaiter<'_> {
    fn drop(&mut self) {
        self.queue.cancel(self.key);
    }
}

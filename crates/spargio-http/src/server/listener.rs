//! What [`serve`](crate::serve) accepts connections on: spargio's
//! `TcpListener` (plain, or TLS with [`Serve::tls`](crate::Serve::tls)),
//! `UnixListener` (a service behind nginx or a sidecar on a Unix socket),
//! or a listener of the user's own ([`Connections`]: any stream of accepted
//! connections, spargio's streams or any [`Transport`] in a
//! [`Connection`]). Each accepted connection's peer, with
//! [`with_connect_info`](crate::Serve::with_connect_info): the address for
//! TCP ([`PeerAddr`](crate::PeerAddr), `ConnectInfo<SocketAddr>`), the
//! credentials for a Unix socket ([`UnixPeerCred`],
//! `ConnectInfo<UnixPeerCred>`).

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::time::Duration;

use futures_core::Stream;
use spargio::io::Compat;
use spargio::net::{StreamSessionPolicy, TcpListener, TcpStream, UnixListener, UnixStream};
use spargio::{RuntimeHandle, ShardId};
use spargio_tls::{HandshakeOptions, ServerTlsStream, TlsAcceptor};

use crate::rt::Transport;

mod sealed {
    pub trait Sealed {}
    impl Sealed for spargio::net::TcpListener {}
    impl Sealed for spargio::net::UnixListener {}
    impl<S> Sealed for super::Connections<S> {}
    impl Sealed for spargio::net::TcpStream {}
    impl Sealed for spargio::net::UnixStream {}
    impl<Io> Sealed for super::Connection<Io> {}
}

/// Accepted connections, one after another.
pub(crate) type Accepting<S> = Pin<Box<dyn Stream<Item = io::Result<S>> + Send>>;

/// A TLS handshake in progress.
pub(crate) type Handshake = Pin<Box<dyn Future<Output = io::Result<ServerTlsStream>> + Send>>;

/// A listener [`serve`](crate::serve) takes: spargio's `TcpListener` or
/// `UnixListener`, or [`Connections`] for a listener of your own.
pub trait Listener: sealed::Sealed + Send + 'static {
    /// The connections it accepts.
    type Stream: Accepted;

    #[doc(hidden)]
    fn runtime(&self) -> &RuntimeHandle;

    /// `TCP_DEFER_ACCEPT` where there is such a thing.
    #[doc(hidden)]
    fn defer_accept(&self, wait: Duration);

    /// Accepts for good, each stream with the next shard in rotation as
    /// its session shard.
    #[doc(hidden)]
    fn accepting(&self) -> io::Result<Accepting<Self::Stream>>;
}

/// A connection a [`Listener`] accepted: spargio's `TcpStream` or
/// `UnixStream`, or a [`Connection`] of your own.
pub trait Accepted: sealed::Sealed + Send + 'static {
    /// What hyper reads and writes.
    #[doc(hidden)]
    type Io: Transport;

    #[doc(hidden)]
    fn session(&self) -> ShardId;

    /// Socket options for serving (`TCP_NODELAY`).
    #[doc(hidden)]
    fn prepare(&self);

    /// The peer, for connect info.
    #[doc(hidden)]
    fn peer(&self) -> Option<Peer>;

    #[doc(hidden)]
    fn into_io(self) -> Self::Io;

    /// A TLS handshake on this stream; `Err(self)` where TLS is not
    /// served (never asked: `Serve::tls` exists for TCP only).
    #[doc(hidden)]
    fn tls(self, acceptor: &TlsAcceptor, options: HandshakeOptions) -> Result<Handshake, Self>
    where
        Self: Sized;
}

/// Who is at the other end of a connection.
#[derive(Clone, Copy, Debug)]
#[doc(hidden)]
pub enum Peer {
    Tcp(SocketAddr),
    Unix(UnixPeerCred),
}

/// The credentials of the process at the other end of a Unix-socket
/// connection (`SO_PEERCRED`, as the kernel recorded them at `connect`),
/// in each request's extensions with
/// [`with_connect_info`](crate::Serve::with_connect_info), and as
/// `axum::extract::ConnectInfo<UnixPeerCred>` with the `axum` feature.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UnixPeerCred {
    /// The peer's process id.
    pub pid: i32,
    /// Its effective user id.
    pub uid: u32,
    /// Its effective group id.
    pub gid: u32,
}

impl UnixPeerCred {
    fn of(stream: &UnixStream) -> io::Result<UnixPeerCred> {
        let mut cred = libc::ucred {
            pid: 0,
            uid: 0,
            gid: 0,
        };
        let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
        // SAFETY: `cred` and `len` are valid for writes of `len` bytes and
        // live across the call; the fd is the stream's, open while it is
        // borrowed.
        let rc = unsafe {
            libc::getsockopt(
                stream.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_PEERCRED,
                (&mut cred as *mut libc::ucred).cast(),
                &mut len,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(UnixPeerCred {
            pid: cred.pid,
            uid: cred.uid,
            gid: cred.gid,
        })
    }
}

impl Listener for TcpListener {
    type Stream = TcpStream;

    fn runtime(&self) -> &RuntimeHandle {
        self.handle()
    }

    fn defer_accept(&self, wait: Duration) {
        // A listener that refuses the option is served undeferred.
        let _ = self.set_defer_accept(wait);
    }

    fn accepting(&self) -> io::Result<Accepting<TcpStream>> {
        Ok(Box::pin(self.incoming_round_robin()?))
    }
}

impl Accepted for TcpStream {
    type Io = Compat<TcpStream>;

    fn session(&self) -> ShardId {
        self.session_shard()
    }

    fn prepare(&self) {
        let _ = self.set_nodelay(true);
    }

    fn peer(&self) -> Option<Peer> {
        self.peer_addr().ok().map(Peer::Tcp)
    }

    fn into_io(self) -> Compat<TcpStream> {
        Compat::new(self)
    }

    fn tls(self, acceptor: &TlsAcceptor, options: HandshakeOptions) -> Result<Handshake, Self> {
        let acceptor = acceptor.clone();
        Ok(Box::pin(async move {
            acceptor.accept_with_options(self, options).await
        }))
    }
}

impl Listener for UnixListener {
    type Stream = UnixStream;

    fn runtime(&self) -> &RuntimeHandle {
        self.handle()
    }

    fn defer_accept(&self, _: Duration) {}

    fn accepting(&self) -> io::Result<Accepting<UnixStream>> {
        Ok(Box::pin(self.incoming_with_session_policy(
            StreamSessionPolicy::RoundRobin,
        )?))
    }
}

impl Accepted for UnixStream {
    type Io = Compat<UnixStream>;

    fn session(&self) -> ShardId {
        self.session_shard()
    }

    fn prepare(&self) {}

    fn peer(&self) -> Option<Peer> {
        UnixPeerCred::of(self).ok().map(Peer::Unix)
    }

    fn into_io(self) -> Compat<UnixStream> {
        Compat::new(self)
    }

    fn tls(self, _: &TlsAcceptor, _: HandshakeOptions) -> Result<Handshake, Self> {
        Err(self)
    }
}

/// A listener of your own: [`serve`](crate::serve) serves the connections
/// `incoming` yields, as axum's `Listener` trait lets `axum::serve` do.
///
/// Each item is an accepted connection: spargio's `TcpStream` (served on
/// its session shard, with `TCP_NODELAY`, its peer address as connect
/// info, and axum's `into_make_service_with_connect_info::<SocketAddr>()`)
/// or `UnixStream` (its peer's credentials as connect info), or any
/// [`Transport`] of your own in a [`Connection`]. So the source can be a
/// spargio listener's stream filtered, tapped or limited with
/// `futures`' combinators, a listener handed over by systemd, or
/// connections that are not sockets at all. An `Err` item is skipped
/// (after 50 ms, unless it is one of accept's per-connection errors such
/// as `ECONNABORTED`), as for spargio's listeners. When the stream ends,
/// serving ends as at a graceful shutdown: no more connections, the open
/// ones finish within the grace period, and the serve future returns
/// `Ok`.
///
/// TLS is [`Serve::tls`](crate::Serve::tls)'s for a `TcpListener`; over a
/// listener of your own, accept TLS yourself and yield the
/// `spargio_tls::ServerTlsStream` in a [`Connection`].
///
/// ```no_run
/// use futures_util::StreamExt;
/// use spargio_http::Connections;
///
/// # async fn demo(app: axum::Router) -> std::io::Result<()> {
/// let handle = spargio::RuntimeHandle::current();
/// let listener = spargio::net::TcpListener::bind(&handle, "127.0.0.1:3000").await?;
/// // Serve only clients on loopback; everyone else is closed at once.
/// let loopback = listener.incoming_round_robin()?.filter(|conn| {
///     let keep = match conn {
///         Ok(stream) => stream.peer_addr().is_ok_and(|a| a.ip().is_loopback()),
///         Err(_) => true,
///     };
///     std::future::ready(keep)
/// });
/// spargio_http::serve(Connections::new(&handle, loopback), app).await
/// # }
/// ```
pub struct Connections<S> {
    handle: RuntimeHandle,
    /// Taken when serving starts.
    incoming: std::sync::Mutex<Option<S>>,
}

impl<S> Connections<S> {
    /// Connections from `incoming`, served on `handle`'s runtime.
    pub fn new(handle: &RuntimeHandle, incoming: S) -> Connections<S> {
        Connections {
            handle: handle.clone(),
            incoming: std::sync::Mutex::new(Some(incoming)),
        }
    }
}

impl<S> std::fmt::Debug for Connections<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connections").finish_non_exhaustive()
    }
}

impl<S, T> Listener for Connections<S>
where
    S: Stream<Item = io::Result<T>> + Send + 'static,
    T: Accepted,
{
    type Stream = T;

    fn runtime(&self) -> &RuntimeHandle {
        &self.handle
    }

    fn defer_accept(&self, _: Duration) {}

    fn accepting(&self) -> io::Result<Accepting<T>> {
        let taken = self
            .incoming
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        match taken {
            Some(incoming) => Ok(Box::pin(incoming)),
            None => Err(io::Error::other("these Connections are served already")),
        }
    }
}

/// A connection of your own for [`Connections`]: any [`Transport`] (what
/// hyper reads and writes: spargio's streams through
/// [`Compat`](spargio::io::Compat), `spargio-tls`'s streams, or a type of
/// yours), with the peer's address for connect info.
///
/// Its connection task is pinned to the shard that made the `Connection`
/// (shard 0 when made outside the runtime), or to
/// [`on_shard`](Connection::on_shard)'s.
///
/// ```no_run
/// use spargio::io::Compat;
/// use spargio_http::Connection;
///
/// # async fn demo(stream: spargio::net::TcpStream) -> std::io::Result<()> {
/// let peer = stream.peer_addr()?;
/// let conn = Connection::new(Compat::new(stream)).with_peer_addr(peer);
/// # let _ = conn; Ok(()) }
/// ```
#[derive(Debug)]
pub struct Connection<Io> {
    io: Io,
    peer: Option<SocketAddr>,
    session: ShardId,
}

impl<Io: Transport> Connection<Io> {
    /// `io`, served on the calling task's shard; its peer address is the
    /// transport's own ([`Transport::peer_addr`]) unless
    /// [`with_peer_addr`](Connection::with_peer_addr) gives one.
    pub fn new(io: Io) -> Connection<Io> {
        let session = spargio::ShardCtx::current().map_or(0, |ctx| ctx.shard_id());
        Connection {
            io,
            peer: None,
            session,
        }
    }

    /// The peer's address: [`PeerAddr`](crate::PeerAddr) and axum's
    /// `ConnectInfo<SocketAddr>` with
    /// [`with_connect_info`](crate::Serve::with_connect_info). Without
    /// one (here or from the transport) those extensions are absent from
    /// its requests.
    pub fn with_peer_addr(mut self, peer: SocketAddr) -> Connection<Io> {
        self.peer = Some(peer);
        self
    }

    /// Serves it on shard `shard` (taken modulo the runtime's shards).
    pub fn on_shard(mut self, shard: ShardId) -> Connection<Io> {
        self.session = shard;
        self
    }
}

impl<Io: Transport> Accepted for Connection<Io> {
    type Io = Io;

    fn session(&self) -> ShardId {
        self.session
    }

    fn prepare(&self) {}

    fn peer(&self) -> Option<Peer> {
        self.peer.or_else(|| self.io.peer_addr()).map(Peer::Tcp)
    }

    fn into_io(self) -> Io {
        self.io
    }

    fn tls(self, _: &TlsAcceptor, _: HandshakeOptions) -> Result<Handshake, Self> {
        Err(self)
    }
}

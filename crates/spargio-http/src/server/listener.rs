//! What [`serve`](crate::serve) accepts connections on: spargio's
//! `TcpListener` (plain, or TLS with [`Serve::tls`](crate::Serve::tls))
//! or `UnixListener` (a service behind nginx or a sidecar on a Unix
//! socket). Each accepted connection's peer, with
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
    impl Sealed for spargio::net::TcpStream {}
    impl Sealed for spargio::net::UnixStream {}
}

/// Accepted connections, one after another.
pub(crate) type Accepting<S> = Pin<Box<dyn Stream<Item = io::Result<S>> + Send>>;

/// A TLS handshake in progress.
pub(crate) type Handshake = Pin<Box<dyn Future<Output = io::Result<ServerTlsStream>> + Send>>;

/// A listener [`serve`](crate::serve) takes: spargio's `TcpListener` or
/// `UnixListener`.
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

/// A connection a [`Listener`] accepted.
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

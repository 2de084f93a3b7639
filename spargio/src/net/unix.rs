//! Unix domain sockets: `UnixStream`, `UnixListener`, `UnixDatagram`.

use std::io;
use std::mem::ManuallyDrop;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::SocketAddr;
use std::path::Path;

use socket2::{Domain, Type};

use super::addr::{connect, socket};
use super::datagram::DatagramCore;
use super::incoming::incoming_stream;
use super::stream::{stream_methods, StreamCore};
use super::StreamSessionPolicy;
use crate::buf::{BufResult, IoBuf, IoBufMut};
use crate::op::accept::Accept;
use crate::op::{Lane, Op, SharedFd};
use crate::RuntimeHandle;

/// Runs `f` on a std view of `fd` without taking ownership.
fn with_std<T, R>(fd: RawFd, f: impl FnOnce(&T) -> R) -> R
where
    T: FromRawFd,
{
    // SAFETY: `fd` is open (the caller holds a reference to it); the
    // `ManuallyDrop` keeps the view from closing it.
    let view = ManuallyDrop::new(unsafe { T::from_raw_fd(fd) });
    f(&view)
}

/// A std `SocketAddr` from a kernel one: a path, or (abstract and unnamed
/// addresses) an unnamed address.
fn unix_addr(addr: &socket2::SockAddr) -> io::Result<SocketAddr> {
    match addr.as_pathname() {
        Some(path) => SocketAddr::from_pathname(path),
        None => std::os::unix::net::UnixDatagram::unbound()?.local_addr(),
    }
}

/// A connected Unix stream socket; the same I/O as
/// [`TcpStream`](super::TcpStream). Clones share the socket.
#[derive(Clone, Debug)]
pub struct UnixStream {
    core: StreamCore,
}

impl UnixStream {
    /// Connects to the socket at `path`, session on the calling shard.
    pub async fn connect(
        handle: impl AsRef<RuntimeHandle>,
        path: impl AsRef<Path>,
    ) -> io::Result<UnixStream> {
        let handle = handle.as_ref();
        UnixStream::connect_with_session_policy(handle, path, StreamSessionPolicy::default()).await
    }

    /// [`connect`](UnixStream::connect) with an explicit session policy.
    pub async fn connect_with_session_policy(
        handle: impl AsRef<RuntimeHandle>,
        path: impl AsRef<Path>,
        policy: StreamSessionPolicy,
    ) -> io::Result<UnixStream> {
        let handle = handle.as_ref();
        let addr = socket2::SockAddr::unix(path)?;
        let session = policy.pick(handle)?;
        let fd = SharedFd::new(socket(handle, session, Domain::UNIX, Type::STREAM).await?);
        connect(handle, session, &fd, addr).await?;
        Ok(UnixStream {
            core: StreamCore {
                fd,
                session,
                handle: handle.clone(),
            },
        })
    }

    /// Wraps a connected std stream (session on the calling shard).
    pub fn from_std(
        handle: impl AsRef<RuntimeHandle>,
        stream: std::os::unix::net::UnixStream,
    ) -> io::Result<UnixStream> {
        let handle = handle.as_ref();
        Ok(UnixStream {
            core: StreamCore {
                fd: SharedFd::new(OwnedFd::from(stream)),
                session: StreamSessionPolicy::default().pick(handle)?,
                handle: handle.clone(),
            },
        })
    }

    /// A connected pair (`socketpair(2)`).
    pub fn pair(handle: impl AsRef<RuntimeHandle>) -> io::Result<(UnixStream, UnixStream)> {
        let handle = handle.as_ref();
        let (a, b) = std::os::unix::net::UnixStream::pair()?;
        Ok((
            UnixStream::from_std(handle, a)?,
            UnixStream::from_std(handle, b)?,
        ))
    }

    /// The local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        with_std(
            self.core.fd.raw(),
            std::os::unix::net::UnixStream::local_addr,
        )
    }

    /// The peer's address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        with_std(
            self.core.fd.raw(),
            std::os::unix::net::UnixStream::peer_addr,
        )
    }

    stream_methods!();
}

impl AsRawFd for UnixStream {
    fn as_raw_fd(&self) -> RawFd {
        self.core.fd.raw()
    }
}

/// A listening Unix stream socket.
#[derive(Debug)]
pub struct UnixListener {
    fd: SharedFd,
    handle: RuntimeHandle,
}

impl UnixListener {
    /// The runtime this listener belongs to.
    pub fn handle(&self) -> &RuntimeHandle {
        &self.handle
    }

    /// Binds to `path` and listens (`AddrInUse` if the path exists).
    pub fn bind(
        handle: impl AsRef<RuntimeHandle>,
        path: impl AsRef<Path>,
    ) -> io::Result<UnixListener> {
        let handle = handle.as_ref();
        let listener = std::os::unix::net::UnixListener::bind(path)?;
        Ok(UnixListener::from_std(handle, listener))
    }

    /// Wraps a bound, listening std listener.
    pub fn from_std(
        handle: impl AsRef<RuntimeHandle>,
        listener: std::os::unix::net::UnixListener,
    ) -> UnixListener {
        let handle = handle.as_ref();
        UnixListener {
            fd: SharedFd::new(OwnedFd::from(listener)),
            handle: handle.clone(),
        }
    }

    /// The bound address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        with_std(self.fd.raw(), std::os::unix::net::UnixListener::local_addr)
    }

    /// Accepts a connection (`IORING_OP_ACCEPT`), session on the calling
    /// shard.
    pub async fn accept(&self) -> io::Result<(UnixStream, SocketAddr)> {
        self.accept_with_session_policy(StreamSessionPolicy::default())
            .await
    }

    /// Accepts a connection with an explicit session policy.
    pub async fn accept_with_session_policy(
        &self,
        policy: StreamSessionPolicy,
    ) -> io::Result<(UnixStream, SocketAddr)> {
        let session = policy.pick(&self.handle)?;
        let op = Accept::new(self.fd.clone());
        let (fd, peer) = Op::submit(&self.handle.shared, Lane::Current, op).await?;
        let stream = UnixStream::from_parts(&self.handle, fd, session);
        Ok((stream, unix_addr(&peer)?))
    }

    /// A stream of incoming connections on one multishot accept; see
    /// [`TcpListener::incoming`](crate::net::TcpListener::incoming).
    pub fn incoming(&self) -> io::Result<UnixIncoming> {
        self.incoming_with_session_policy(StreamSessionPolicy::default())
    }

    /// Like [`incoming`](Self::incoming), with an explicit session policy
    /// for the accepted streams.
    pub fn incoming_with_session_policy(
        &self,
        policy: StreamSessionPolicy,
    ) -> io::Result<UnixIncoming> {
        UnixIncoming::new(&self.handle, &self.fd, policy)
    }
}

incoming_stream!(
    /// Connections accepted by one multishot accept
    /// ([`UnixListener::incoming`]); a `Stream` of `io::Result<UnixStream>`
    /// that never ends.
    UnixIncoming,
    UnixStream,
    UnixStream::from_parts
);

impl UnixStream {
    fn from_parts(handle: &RuntimeHandle, fd: OwnedFd, session: usize) -> UnixStream {
        UnixStream {
            core: StreamCore {
                fd: SharedFd::new(fd),
                session,
                handle: handle.clone(),
            },
        }
    }
}

impl AsRawFd for UnixListener {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.raw()
    }
}

/// A Unix datagram socket.
#[derive(Debug)]
pub struct UnixDatagram {
    core: DatagramCore,
}

impl UnixDatagram {
    /// Binds to `path`.
    pub fn bind(
        handle: impl AsRef<RuntimeHandle>,
        path: impl AsRef<Path>,
    ) -> io::Result<UnixDatagram> {
        let handle = handle.as_ref();
        UnixDatagram::from_std(handle, std::os::unix::net::UnixDatagram::bind(path)?)
    }

    /// A socket bound to no address (it can still send, and receive once
    /// connected).
    pub fn unbound(handle: impl AsRef<RuntimeHandle>) -> io::Result<UnixDatagram> {
        let handle = handle.as_ref();
        UnixDatagram::from_std(handle, std::os::unix::net::UnixDatagram::unbound()?)
    }

    /// Wraps a std socket.
    pub fn from_std(
        handle: impl AsRef<RuntimeHandle>,
        socket: std::os::unix::net::UnixDatagram,
    ) -> io::Result<UnixDatagram> {
        let handle = handle.as_ref();
        Ok(UnixDatagram {
            core: DatagramCore {
                fd: SharedFd::new(OwnedFd::from(socket)),
                session: StreamSessionPolicy::default().pick(handle)?,
                handle: handle.clone(),
            },
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        with_std(
            self.core.fd.raw(),
            std::os::unix::net::UnixDatagram::local_addr,
        )
    }

    /// Sets the default peer (`IORING_OP_CONNECT`).
    pub async fn connect(&self, path: impl AsRef<Path>) -> io::Result<()> {
        self.core.connect(socket2::SockAddr::unix(path)?).await
    }

    /// Sends a copy of `data` to the connected peer.
    pub async fn send(&self, data: &[u8]) -> io::Result<usize> {
        self.core.send_owned(data.to_vec()).await.0
    }

    /// Receives one datagram (up to `len` bytes).
    pub async fn recv(&self, len: usize) -> io::Result<Vec<u8>> {
        let (res, buf) = self.core.recv_owned(Vec::with_capacity(len)).await;
        res.map(|_| buf)
    }

    /// Sends a copy of `data` to the socket at `path`.
    pub async fn send_to(&self, data: &[u8], path: impl AsRef<Path>) -> io::Result<usize> {
        let addr = socket2::SockAddr::unix(path)?;
        self.core.send_to_owned(data.to_vec(), &addr).await.0
    }

    /// Receives one datagram (up to `len` bytes) and its sender.
    pub async fn recv_from(&self, len: usize) -> io::Result<(Vec<u8>, SocketAddr)> {
        let (res, buf) = self.core.recv_from_owned(Vec::with_capacity(len)).await;
        let (_, from) = res?;
        Ok((buf, unix_addr(&from)?))
    }

    /// Sends `buf`'s bytes to the connected peer; returns the count and
    /// the buffer (dropped on error; [`send_buf`](Self::send_buf) keeps
    /// it).
    pub async fn send_owned<B: IoBuf>(&self, buf: B) -> io::Result<(usize, B)> {
        let (res, buf) = self.core.send_owned(buf).await;
        res.map(|n| (n, buf))
    }

    /// Receives one datagram into `buf`; returns the count and the buffer
    /// (dropped on error; [`recv_buf`](Self::recv_buf) keeps it).
    pub async fn recv_owned<B: IoBufMut>(&self, buf: B) -> io::Result<(usize, B)> {
        let (res, buf) = self.core.recv_owned(buf).await;
        res.map(|n| (n, buf))
    }

    /// Sends `buf`'s bytes to the socket at `path`; returns the count and
    /// the buffer (dropped on error; [`send_to_buf`](Self::send_to_buf)
    /// keeps it).
    pub async fn send_to_owned<B: IoBuf>(
        &self,
        buf: B,
        path: impl AsRef<Path>,
    ) -> io::Result<(usize, B)> {
        let (res, buf) = self.send_to_buf(buf, path).await;
        res.map(|n| (n, buf))
    }

    /// Receives one datagram into `buf`; returns the count, the sender and
    /// the buffer (dropped on error; [`recv_from_buf`](Self::recv_from_buf)
    /// keeps it).
    pub async fn recv_from_owned<B: IoBufMut>(&self, buf: B) -> io::Result<(usize, SocketAddr, B)> {
        let (res, buf) = self.recv_from_buf(buf).await;
        res.map(|(n, from)| (n, from, buf))
    }

    /// [`send_owned`](Self::send_owned), handing the buffer back whatever
    /// happens ([`BufResult`]).
    pub async fn send_buf<B: IoBuf>(&self, buf: B) -> BufResult<usize, B> {
        self.core.send_owned(buf).await
    }

    /// [`recv_owned`](Self::recv_owned), handing the buffer back whatever
    /// happens.
    pub async fn recv_buf<B: IoBufMut>(&self, buf: B) -> BufResult<usize, B> {
        self.core.recv_owned(buf).await
    }

    /// [`send_to_owned`](Self::send_to_owned), handing the buffer back
    /// whatever happens. A path that is not a valid socket address fails
    /// with the buffer untouched.
    pub async fn send_to_buf<B: IoBuf>(
        &self,
        buf: B,
        path: impl AsRef<Path>,
    ) -> BufResult<usize, B> {
        match socket2::SockAddr::unix(path) {
            Ok(addr) => self.core.send_to_owned(buf, &addr).await,
            Err(e) => (Err(e), buf),
        }
    }

    /// [`recv_from_owned`](Self::recv_from_owned), handing the buffer back
    /// whatever happens.
    pub async fn recv_from_buf<B: IoBufMut>(&self, buf: B) -> BufResult<(usize, SocketAddr), B> {
        let (res, buf) = self.core.recv_from_owned(buf).await;
        (res.and_then(|(n, from)| Ok((n, unix_addr(&from)?))), buf)
    }
}

impl AsRawFd for UnixDatagram {
    fn as_raw_fd(&self) -> RawFd {
        self.core.fd.raw()
    }
}

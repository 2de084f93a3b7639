//! `UdpSocket`.

use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use socket2::{Domain, SockRef, Type};

use super::addr::{first_ok, resolve};
use super::datagram::DatagramCore;
use super::tcp::sock_addr;
use super::StreamSessionPolicy;
use crate::buf::{BufResult, IoBuf, IoBufMut};
use crate::op::SharedFd;
use crate::RuntimeHandle;

/// A UDP socket. Sends and receives are native io_uring operations on the
/// socket's shard (the binding task's shard; see
/// [`StreamSessionPolicy::ContextPreferred`]).
///
/// ```
/// # spargio::block_on(spargio::run(|handle| async move {
/// use spargio::net::UdpSocket;
///
/// let a = UdpSocket::bind(&handle, "127.0.0.1:0").await.unwrap();
/// let b = UdpSocket::bind(&handle, "127.0.0.1:0").await.unwrap();
/// a.send_to(b"datagram", b.local_addr().unwrap()).await.unwrap();
/// let (data, from) = b.recv_from(64).await.unwrap();
/// assert_eq!(data, b"datagram");
/// assert_eq!(from, a.local_addr().unwrap());
/// # })).unwrap();
/// ```
#[derive(Debug)]
pub struct UdpSocket {
    core: DatagramCore,
}

impl UdpSocket {
    /// Binds to `addr` (resolved on the blocking pool; the first address
    /// that binds wins).
    pub async fn bind<A>(handle: impl AsRef<RuntimeHandle>, addr: A) -> io::Result<UdpSocket>
    where
        A: ToSocketAddrs + Send + 'static,
        A::Iter: Send,
    {
        let handle = handle.as_ref();
        let addrs = resolve(handle, addr).await?;
        first_ok(
            addrs,
            |a| async move { UdpSocket::bind_socket_addr(handle, a) },
        )
        .await
    }

    /// Binds to `addr` without name resolution.
    pub fn bind_socket_addr(
        handle: impl AsRef<RuntimeHandle>,
        addr: SocketAddr,
    ) -> io::Result<UdpSocket> {
        let handle = handle.as_ref();
        let socket = socket2::Socket::new(Domain::for_address(addr), Type::DGRAM.cloexec(), None)?;
        socket.bind(&addr.into())?;
        UdpSocket::from_fd(handle, OwnedFd::from(socket))
    }

    /// Wraps a bound std socket.
    pub fn from_std(
        handle: impl AsRef<RuntimeHandle>,
        socket: std::net::UdpSocket,
    ) -> io::Result<UdpSocket> {
        let handle = handle.as_ref();
        UdpSocket::from_fd(handle, OwnedFd::from(socket))
    }

    fn from_fd(handle: &RuntimeHandle, fd: OwnedFd) -> io::Result<UdpSocket> {
        Ok(UdpSocket {
            core: DatagramCore {
                fd: SharedFd::new(fd),
                session: StreamSessionPolicy::ContextPreferred.pick(handle)?,
                handle: handle.clone(),
            },
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        sock_addr(SockRef::from(self).local_addr()?)
    }

    /// The connected peer's address (`NotConnected` before `connect`).
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        sock_addr(SockRef::from(self).peer_addr()?)
    }

    /// Sets the default peer for [`send`](UdpSocket::send) and filters
    /// [`recv`](UdpSocket::recv) to it (`IORING_OP_CONNECT`).
    pub async fn connect(&self, addr: SocketAddr) -> io::Result<()> {
        self.core.connect(addr.into()).await
    }

    /// Sends a copy of `data` to the connected peer.
    pub async fn send(&self, data: &[u8]) -> io::Result<usize> {
        self.core.send_owned(data.to_vec()).await.0
    }

    /// Receives one datagram (up to `len` bytes; the rest of a longer one
    /// is discarded) from the connected peer.
    pub async fn recv(&self, len: usize) -> io::Result<Vec<u8>> {
        let (res, buf) = self.core.recv_owned(Vec::with_capacity(len)).await;
        res.map(|_| buf)
    }

    /// Sends a copy of `data` to `addr`.
    pub async fn send_to(&self, data: &[u8], addr: SocketAddr) -> io::Result<usize> {
        self.send_to_buf(data.to_vec(), addr).await.0
    }

    /// Receives one datagram (up to `len` bytes) and its sender.
    pub async fn recv_from(&self, len: usize) -> io::Result<(Vec<u8>, SocketAddr)> {
        let (res, buf) = self.recv_from_buf(Vec::with_capacity(len)).await;
        let (_, from) = res?;
        Ok((buf, from))
    }

    /// Sends `buf`'s bytes to the connected peer; returns the count and
    /// the buffer (dropped on error; [`send_buf`](Self::send_buf) keeps
    /// it).
    pub async fn send_owned<B: IoBuf>(&self, buf: B) -> io::Result<(usize, B)> {
        let (res, buf) = self.core.send_owned(buf).await;
        res.map(|n| (n, buf))
    }

    /// Receives one datagram into `buf` from the connected peer; returns
    /// the count and the buffer (dropped on error;
    /// [`recv_buf`](Self::recv_buf) keeps it).
    pub async fn recv_owned<B: IoBufMut>(&self, buf: B) -> io::Result<(usize, B)> {
        let (res, buf) = self.core.recv_owned(buf).await;
        res.map(|n| (n, buf))
    }

    /// Sends `buf`'s bytes to `addr`; returns the count and the buffer
    /// (dropped on error; [`send_to_buf`](Self::send_to_buf) keeps it).
    pub async fn send_to_owned<B: IoBuf>(
        &self,
        buf: B,
        addr: SocketAddr,
    ) -> io::Result<(usize, B)> {
        let (res, buf) = self.send_to_buf(buf, addr).await;
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
    /// whatever happens.
    pub async fn send_to_buf<B: IoBuf>(&self, buf: B, addr: SocketAddr) -> BufResult<usize, B> {
        self.core.send_to_owned(buf, &addr.into()).await
    }

    /// [`recv_from_owned`](Self::recv_from_owned), handing the buffer back
    /// whatever happens.
    pub async fn recv_from_buf<B: IoBufMut>(&self, buf: B) -> BufResult<(usize, SocketAddr), B> {
        let (res, buf) = self.core.recv_from_owned(buf).await;
        (res.and_then(|(n, a)| Ok((n, sock_addr(a)?))), buf)
    }
}

impl AsRawFd for UdpSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.core.fd.raw()
    }
}

impl std::os::fd::AsFd for UdpSocket {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        // SAFETY: the fd is open for as long as `self` (it holds a
        // reference to it).
        unsafe { std::os::fd::BorrowedFd::borrow_raw(self.core.fd.raw()) }
    }
}

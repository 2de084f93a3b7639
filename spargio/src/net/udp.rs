//! `UdpSocket`.

use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use socket2::{Domain, SockRef, Type};

use super::addr::{first_ok, resolve};
use super::datagram::DatagramCore;
use super::tcp::sock_addr;
use super::udp_offload::{self, OffloadState, UdpOffload, UdpRecvMeta};
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
    offload: OffloadState,
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
            offload: OffloadState::probe(fd.as_raw_fd()),
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

// ===== segmentation offload (net/udp_offload.rs) =====

impl UdpSocket {
    /// Turns on GRO, ECN and pktinfo reporting where the kernel has them
    /// (`UDP_GRO`; `IP_RECVTOS`/`IPV6_RECVTCLASS`; `IP_PKTINFO`/
    /// `IPV6_RECVPKTINFO`, and the IPv4 ones too on an IPv6 socket) and
    /// returns what is on. An option the kernel lacks stays off; any other
    /// failure is the error.
    pub fn enable_offload(&self) -> io::Result<UdpOffload> {
        let v6 = SockRef::from(self).local_addr()?.is_ipv6();
        self.offload.enable(self.core.fd.raw(), v6)
    }

    /// The socket's offload capabilities: GSO as probed when the socket
    /// was made (a `UDP_SEGMENT` `getsockopt`), and turned off if the
    /// device failed a GSO send; GRO as [`enable_offload`] set it.
    ///
    /// [`enable_offload`]: Self::enable_offload
    pub fn offload(&self) -> UdpOffload {
        self.offload.get()
    }

    /// Sends `buf`'s bytes to `dst` in one `SENDMSG`; returns the bytes
    /// sent and the buffer (in every case).
    ///
    /// With `segment_size: Some(s)` and `s` less than the buffer's length,
    /// the buffer holds `ceil(len / s)` datagrams of `s` bytes, the last
    /// possibly shorter, and the kernel cuts them apart (GSO, a
    /// `UDP_SEGMENT` control message). `s >= len` is one plain datagram.
    /// `ecn` (0..=3) sets the ECN bits of every datagram (`IP_TOS` for
    /// IPv4 and v4-mapped destinations, else `IPV6_TCLASS`).
    ///
    /// # Errors
    ///
    /// `InvalidInput`, before anything is submitted, for `s == 0`, for a
    /// segmented send on a socket without GSO
    /// ([`offload`](Self::offload)`().max_gso_segments == 1`) or with more
    /// segments than `max_gso_segments`, and for `ecn > 3`.
    ///
    /// When the device fails a segmented send with `EIO` (some do when
    /// checksum offload is off), GSO is turned off for this socket
    /// (`max_gso_segments` becomes 1, for good) and the datagrams are sent
    /// one `SENDMSG` each; the result is their total, or the first error
    /// (datagrams before it are sent). Callers should size later batches
    /// by [`offload`](Self::offload).
    ///
    /// The kernel's own limits are its errors: a send of more than 64 KiB
    /// (`EMSGSIZE`), or a segment that does not fit the route's MTU
    /// (`EINVAL` or `EMSGSIZE`).
    ///
    /// ```no_run
    /// # spargio::block_on(spargio::run(|handle| async move {
    /// use spargio::net::UdpSocket;
    ///
    /// let socket = UdpSocket::bind(&handle, "127.0.0.1:0").await.unwrap();
    /// let peer = "127.0.0.1:4433".parse().unwrap();
    /// let segments = socket.offload().max_gso_segments.min(10);
    /// // `segments` datagrams of 1200 bytes in one system call.
    /// let batch = vec![0u8; segments * 1200];
    /// let (sent, _batch) = socket.send_msg_owned(batch, peer, Some(1200), Some(2)).await;
    /// assert_eq!(sent.unwrap(), segments * 1200);
    /// # })).unwrap();
    /// ```
    pub async fn send_msg_owned<B: IoBuf>(
        &self,
        buf: B,
        dst: SocketAddr,
        segment_size: Option<usize>,
        ecn: Option<u8>,
    ) -> BufResult<usize, B> {
        udp_offload::send_msg(&self.core, &self.offload, buf, dst, segment_size, ecn).await
    }

    /// Receives in one `RECVMSG` into `buf` (from its first byte, up to
    /// its capacity, as every read here does; pass `vec.slice(vec.len()..)`
    /// to append) with room for the GRO, TOS and pktinfo control messages;
    /// returns what arrived ([`UdpRecvMeta`]) and the buffer (in every
    /// case).
    ///
    /// With GRO on, one receive may hold several datagrams
    /// ([`UdpRecvMeta::segment_size`]): give it 64 KiB of room, since
    /// what does not fit is cut off.
    ///
    /// ```no_run
    /// # spargio::block_on(spargio::run(|handle| async move {
    /// use spargio::net::UdpSocket;
    ///
    /// let socket = UdpSocket::bind(&handle, "127.0.0.1:4433").await.unwrap();
    /// socket.enable_offload().unwrap();
    /// let (meta, buf) = socket.recv_msg_owned(Vec::with_capacity(64 * 1024)).await;
    /// let meta = meta.unwrap();
    /// let size = meta.segment_size.unwrap_or(meta.len.max(1));
    /// for datagram in buf[..meta.len].chunks(size) {
    ///     println!("{} bytes from {}, ECN {:?}", datagram.len(), meta.addr, meta.ecn);
    /// }
    /// # })).unwrap();
    /// ```
    pub async fn recv_msg_owned<B: IoBufMut>(&self, buf: B) -> BufResult<UdpRecvMeta, B> {
        udp_offload::recv_msg(&self.core, buf).await
    }

    /// [`recv_msg_owned`](Self::recv_msg_owned) now, if a datagram is
    /// queued: one non-blocking `recvmsg(2)` on the calling thread,
    /// without the ring; `WouldBlock` when nothing is queued.
    ///
    /// For draining a burst: after a ring receive completes, the datagrams
    /// that arrived with it are usually queued already, and taking them
    /// here costs one system call each (and one more that finds the queue
    /// empty) instead of a ring round trip each. Call it from the task
    /// that owns the socket's ring receives, after handling their
    /// completions: a receive still in flight only ever gets datagrams
    /// that arrive after what this took.
    ///
    /// ```no_run
    /// # spargio::block_on(spargio::run(|handle| async move {
    /// use spargio::net::UdpSocket;
    ///
    /// let socket = UdpSocket::bind(&handle, "127.0.0.1:4433").await.unwrap();
    /// let (first, mut buf) = socket.recv_msg_owned(Vec::with_capacity(2048)).await;
    /// println!("{} bytes", first.unwrap().len);
    /// loop {
    ///     let (res, back) = socket.try_recv_msg(buf);
    ///     buf = back;
    ///     match res {
    ///         Ok(meta) => println!("{} more bytes from {}", meta.len, meta.addr),
    ///         Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
    ///         Err(e) => panic!("{e}"),
    ///     }
    /// }
    /// # })).unwrap();
    /// ```
    pub fn try_recv_msg<B: IoBufMut>(&self, buf: B) -> BufResult<UdpRecvMeta, B> {
        udp_offload::try_recv_msg(&self.core, buf)
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

//! TCP: `TcpListener` and `TcpStream`.

use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::time::Duration;

use socket2::{Domain, SockRef, Type};

use super::addr::{connect, first_ok, resolve, socket};
use super::incoming::incoming_stream;
use super::stream::{stream_methods, StreamCore};
use super::StreamSessionPolicy;
use crate::op::accept::Accept;
use crate::op::socket::{getsockopt_int, setsockopt_int};
use crate::op::{Lane, Op, SharedFd};
use crate::RuntimeHandle;

/// A TCP connection. Clones share the socket (and the session shard), so
/// one task can send while another receives.
///
/// Every operation is a native io_uring operation on the stream's session
/// shard (see [`StreamSessionPolicy`]); buffers are owned and come back
/// with the result.
///
/// ```
/// # spargio::block_on(spargio::run(|handle| async move {
/// use spargio::net::{TcpListener, TcpStream};
///
/// let listener = TcpListener::bind(&handle, "127.0.0.1:0").await.unwrap();
/// let addr = listener.local_addr().unwrap();
/// let server = handle.spawn_stealable({
///     async move {
///         let (stream, _peer) = listener.accept().await.unwrap();
///         let mut buf = [0u8; 5];
///         stream.read_exact(&mut buf).await.unwrap();
///         stream.write_all(&buf).await.unwrap();
///     }
/// }).unwrap();
/// let client = TcpStream::connect_socket_addr(&handle, addr).await.unwrap();
/// client.write_all(b"hello").await.unwrap();
/// let mut echo = [0u8; 5];
/// client.read_exact(&mut echo).await.unwrap();
/// assert_eq!(&echo, b"hello");
/// server.await.unwrap();
/// # })).unwrap();
/// ```
#[derive(Clone, Debug)]
pub struct TcpStream {
    core: StreamCore,
}

impl TcpStream {
    fn from_parts(handle: &RuntimeHandle, fd: OwnedFd, session: usize) -> TcpStream {
        TcpStream {
            core: StreamCore {
                fd: SharedFd::new(fd),
                session,
                handle: handle.clone(),
            },
        }
    }

    /// Connects to `addr` (a literal or a host name, resolved on the
    /// blocking pool), session on the calling shard.
    pub async fn connect<A>(handle: impl AsRef<RuntimeHandle>, addr: A) -> io::Result<TcpStream>
    where
        A: ToSocketAddrs + Send + 'static,
        A::Iter: Send,
    {
        let handle = handle.as_ref();
        TcpStream::connect_with_session_policy(handle, addr, StreamSessionPolicy::default()).await
    }

    /// [`connect`](TcpStream::connect) with the next shard in rotation as
    /// the session shard.
    pub async fn connect_round_robin<A>(
        handle: impl AsRef<RuntimeHandle>,
        addr: A,
    ) -> io::Result<TcpStream>
    where
        A: ToSocketAddrs + Send + 'static,
        A::Iter: Send,
    {
        let handle = handle.as_ref();
        TcpStream::connect_with_session_policy(handle, addr, StreamSessionPolicy::RoundRobin).await
    }

    /// [`connect`](TcpStream::connect) with an explicit session policy.
    /// Each resolved address is tried in turn.
    pub async fn connect_with_session_policy<A>(
        handle: impl AsRef<RuntimeHandle>,
        addr: A,
        policy: StreamSessionPolicy,
    ) -> io::Result<TcpStream>
    where
        A: ToSocketAddrs + Send + 'static,
        A::Iter: Send,
    {
        let handle = handle.as_ref();
        let addrs = resolve(handle, addr).await?;
        first_ok(addrs, |a| {
            TcpStream::connect_socket_addr_with_session_policy(handle, a, policy)
        })
        .await
    }

    /// Connects to `addr` (no name resolution), session on the calling
    /// shard: `IORING_OP_SOCKET` then `IORING_OP_CONNECT`.
    pub async fn connect_socket_addr(
        handle: impl AsRef<RuntimeHandle>,
        addr: SocketAddr,
    ) -> io::Result<TcpStream> {
        let handle = handle.as_ref();
        TcpStream::connect_socket_addr_with_session_policy(
            handle,
            addr,
            StreamSessionPolicy::default(),
        )
        .await
    }

    /// [`connect_socket_addr`](TcpStream::connect_socket_addr) with the
    /// next shard in rotation as the session shard.
    pub async fn connect_socket_addr_round_robin(
        handle: impl AsRef<RuntimeHandle>,
        addr: SocketAddr,
    ) -> io::Result<TcpStream> {
        let handle = handle.as_ref();
        TcpStream::connect_socket_addr_with_session_policy(
            handle,
            addr,
            StreamSessionPolicy::RoundRobin,
        )
        .await
    }

    /// [`connect_socket_addr`](TcpStream::connect_socket_addr) with an
    /// explicit session policy.
    pub async fn connect_socket_addr_with_session_policy(
        handle: impl AsRef<RuntimeHandle>,
        addr: SocketAddr,
        policy: StreamSessionPolicy,
    ) -> io::Result<TcpStream> {
        let handle = handle.as_ref();
        let session = policy.pick(handle)?;
        let fd = socket(handle, session, Domain::for_address(addr), Type::STREAM).await?;
        let fd = SharedFd::new(fd);
        connect(handle, session, &fd, addr.into()).await?;
        Ok(TcpStream {
            core: StreamCore {
                fd,
                session,
                handle: handle.clone(),
            },
        })
    }

    /// Opens `n` connections to `addr`, their session shards chosen by
    /// `policy` (round-robin spreads them over every shard).
    pub async fn connect_many_with_session_policy<A>(
        handle: impl AsRef<RuntimeHandle>,
        addr: A,
        n: usize,
        policy: StreamSessionPolicy,
    ) -> io::Result<Vec<TcpStream>>
    where
        A: ToSocketAddrs + Send + 'static,
        A::Iter: Send,
    {
        let handle = handle.as_ref();
        let addrs = resolve(handle, addr).await?;
        let mut out = Vec::with_capacity(n);
        for session in policy.pick_many(handle, n)? {
            let stream = first_ok(addrs.clone(), |a| {
                TcpStream::connect_socket_addr_with_session_policy(
                    handle,
                    a,
                    StreamSessionPolicy::Fixed(session),
                )
            })
            .await?;
            out.push(stream);
        }
        Ok(out)
    }

    /// `n` connections spread round-robin over the shards: consecutive
    /// turns of the rotation, so `n ≥ shards` covers every shard.
    pub async fn connect_many_round_robin<A>(
        handle: impl AsRef<RuntimeHandle>,
        addr: A,
        n: usize,
    ) -> io::Result<Vec<TcpStream>>
    where
        A: ToSocketAddrs + Send + 'static,
        A::Iter: Send,
    {
        let handle = handle.as_ref();
        TcpStream::connect_many_with_session_policy(
            handle,
            addr,
            n,
            StreamSessionPolicy::RoundRobin,
        )
        .await
    }

    /// `n` connections to `addr` (no name resolution), sessions by `policy`.
    pub async fn connect_many_socket_addr_with_session_policy(
        handle: impl AsRef<RuntimeHandle>,
        addr: SocketAddr,
        n: usize,
        policy: StreamSessionPolicy,
    ) -> io::Result<Vec<TcpStream>> {
        let handle = handle.as_ref();
        let mut out = Vec::with_capacity(n);
        for session in policy.pick_many(handle, n)? {
            let fixed = StreamSessionPolicy::Fixed(session);
            out.push(
                TcpStream::connect_socket_addr_with_session_policy(handle, addr, fixed).await?,
            );
        }
        Ok(out)
    }

    /// `n` connections to `addr` (no name resolution), round-robin.
    pub async fn connect_many_socket_addr_round_robin(
        handle: impl AsRef<RuntimeHandle>,
        addr: SocketAddr,
        n: usize,
    ) -> io::Result<Vec<TcpStream>> {
        let handle = handle.as_ref();
        TcpStream::connect_many_socket_addr_with_session_policy(
            handle,
            addr,
            n,
            StreamSessionPolicy::RoundRobin,
        )
        .await
    }

    /// Wraps a connected std stream (session on the calling shard).
    pub fn from_std(
        handle: impl AsRef<RuntimeHandle>,
        stream: std::net::TcpStream,
    ) -> io::Result<TcpStream> {
        let handle = handle.as_ref();
        TcpStream::from_std_with_session_policy(handle, stream, StreamSessionPolicy::default())
    }

    /// Wraps a connected std stream with an explicit session policy.
    pub fn from_std_with_session_policy(
        handle: impl AsRef<RuntimeHandle>,
        stream: std::net::TcpStream,
        policy: StreamSessionPolicy,
    ) -> io::Result<TcpStream> {
        let handle = handle.as_ref();
        let session = policy.pick_for(handle, stream.as_raw_fd())?;
        Ok(TcpStream::from_parts(
            handle,
            OwnedFd::from(stream),
            session,
        ))
    }

    /// The remote address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        sock_addr(SockRef::from(self).peer_addr()?)
    }

    /// The local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        sock_addr(SockRef::from(self).local_addr()?)
    }

    /// Sets `TCP_NODELAY` (disables Nagle's algorithm).
    pub fn set_nodelay(&self, nodelay: bool) -> io::Result<()> {
        SockRef::from(self).set_tcp_nodelay(nodelay)
    }

    /// Whether `TCP_NODELAY` is set.
    pub fn nodelay(&self) -> io::Result<bool> {
        SockRef::from(self).tcp_nodelay()
    }

    stream_methods!();
}

impl AsRawFd for TcpStream {
    fn as_raw_fd(&self) -> RawFd {
        self.core.fd.raw()
    }
}

impl std::os::fd::AsFd for TcpStream {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        // SAFETY: the fd is open for as long as `self` (it holds a
        // reference to it).
        unsafe { std::os::fd::BorrowedFd::borrow_raw(self.core.fd.raw()) }
    }
}

pub(crate) fn sock_addr(addr: socket2::SockAddr) -> io::Result<SocketAddr> {
    addr.as_socket()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "not an IP socket address"))
}

/// A listening TCP socket.
#[derive(Debug)]
pub struct TcpListener {
    fd: SharedFd,
    handle: RuntimeHandle,
}

impl TcpListener {
    /// The runtime this listener belongs to (where its accepted streams
    /// live).
    pub fn handle(&self) -> &RuntimeHandle {
        &self.handle
    }

    /// Binds to `addr` (resolved on the blocking pool; the first address
    /// that binds wins) and listens. `SO_REUSEADDR` is set, as std does.
    pub async fn bind<A>(handle: impl AsRef<RuntimeHandle>, addr: A) -> io::Result<TcpListener>
    where
        A: ToSocketAddrs + Send + 'static,
        A::Iter: Send,
    {
        let handle = handle.as_ref();
        let addrs = resolve(handle, addr).await?;
        first_ok(addrs, |a| async move {
            TcpListener::bind_socket_addr(handle, a)
        })
        .await
    }

    /// Binds to `addr` (no name resolution) and listens. `socket`, `bind`
    /// and `listen` are immediate syscalls (the ring's `BIND`/`LISTEN`
    /// opcodes need Linux 6.11); `AddrInUse` if the port is taken.
    pub fn bind_socket_addr(
        handle: impl AsRef<RuntimeHandle>,
        addr: SocketAddr,
    ) -> io::Result<TcpListener> {
        let handle = handle.as_ref();
        let socket = socket2::Socket::new(Domain::for_address(addr), Type::STREAM.cloexec(), None)?;
        socket.set_reuse_address(true)?;
        socket.bind(&addr.into())?;
        socket.listen(1024)?;
        Ok(TcpListener {
            fd: SharedFd::new(OwnedFd::from(socket)),
            handle: handle.clone(),
        })
    }

    /// Wraps a bound, listening std listener.
    pub fn from_std(
        handle: impl AsRef<RuntimeHandle>,
        listener: std::net::TcpListener,
    ) -> TcpListener {
        let handle = handle.as_ref();
        TcpListener {
            fd: SharedFd::new(OwnedFd::from(listener)),
            handle: handle.clone(),
        }
    }

    /// The bound address (with the actual port when bound to port 0).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        sock_addr(SockRef::from(self).local_addr()?)
    }

    /// Defers accepting each connection until its peer has sent data
    /// (`TCP_DEFER_ACCEPT`), or until `wait` has passed; `Duration::ZERO`
    /// turns the deferral off. For protocols whose client speaks first
    /// (HTTP, TLS): a connection then reaches `accept` with its request
    /// already readable, so the server wakes once per connection instead
    /// of twice (once for the handshake, once for the request), and a
    /// client that connects and says nothing costs the server no task
    /// until `wait` has passed. Measured under HTTP `Connection: close`
    /// churn with the server on one core: 33–45% less server CPU per
    /// connection on spargio, 16–29% on tokio with the same option
    /// (`bench/README.md`, "Deferred accepts"). Do not use it for
    /// protocols whose server speaks first (SMTP, FTP, MySQL): their
    /// clients would wait `wait` out.
    ///
    /// The kernel counts `wait` in retransmissions of its SYN-ACK (after
    /// 1, 3, 7, 15, … s), rounding up; once they are done, the
    /// connection is queued at the client's next ACK, data or not.
    /// [`spargio_http`'s server](https://docs.rs/spargio-http) sets one
    /// second on its listener.
    ///
    /// ```
    /// # spargio::block_on(spargio::run(|handle| async move {
    /// use std::time::Duration;
    /// use spargio::net::TcpListener;
    ///
    /// let listener = TcpListener::bind(&handle, "127.0.0.1:0").await.unwrap();
    /// listener.set_defer_accept(Duration::from_secs(1)).unwrap();
    /// assert_eq!(listener.defer_accept().unwrap(), Duration::from_secs(1));
    /// # })).unwrap();
    /// ```
    pub fn set_defer_accept(&self, wait: Duration) -> io::Result<()> {
        // Whole seconds, rounded up (the option's unit).
        let secs = wait
            .as_secs()
            .saturating_add(u64::from(wait.subsec_nanos() > 0));
        let secs = libc::c_int::try_from(secs).unwrap_or(libc::c_int::MAX);
        setsockopt_int(
            self.fd.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_DEFER_ACCEPT,
            secs,
        )
    }

    /// How long accepting a silent connection is deferred
    /// ([`set_defer_accept`](Self::set_defer_accept)), as the kernel
    /// rounded it; zero when it is not.
    pub fn defer_accept(&self) -> io::Result<Duration> {
        let secs = getsockopt_int(
            self.fd.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_DEFER_ACCEPT,
        )?;
        Ok(Duration::from_secs(secs.max(0) as u64))
    }

    /// Accepts a connection (`IORING_OP_ACCEPT`); its session is the
    /// calling shard.
    pub async fn accept(&self) -> io::Result<(TcpStream, SocketAddr)> {
        self.accept_with_session_policy(StreamSessionPolicy::default())
            .await
    }

    /// Accepts a connection whose session shard is the next in rotation.
    pub async fn accept_round_robin(&self) -> io::Result<(TcpStream, SocketAddr)> {
        self.accept_with_session_policy(StreamSessionPolicy::RoundRobin)
            .await
    }

    /// Accepts a connection with an explicit session policy. The accept
    /// itself runs on the calling shard's ring (a remote ring would cost
    /// two cross-shard hops per connection: the submission and the wake);
    /// the policy picks the shard whose ring serves the stream afterwards.
    pub async fn accept_with_session_policy(
        &self,
        policy: StreamSessionPolicy,
    ) -> io::Result<(TcpStream, SocketAddr)> {
        // Checked up front (a bad `Fixed` shard fails before accepting);
        // `pick_for` decides once the stream exists.
        policy.pick_checked(&self.handle)?;
        let op = Accept::new(self.fd.clone());
        let (fd, peer) = Op::submit(&self.handle.shared, Lane::Current, op).await?;
        let session = policy.pick_for(&self.handle, fd.as_raw_fd())?;
        Ok((
            TcpStream::from_parts(&self.handle, fd, session),
            sock_addr(peer)?,
        ))
    }

    /// A stream of incoming connections on one multishot accept
    /// (`IORING_ACCEPT_MULTISHOT`: one submission for every connection,
    /// not one per accept). Each connection's session is the shard of the
    /// task that takes it from the stream. The peer address is available
    /// from [`TcpStream::peer_addr`].
    ///
    /// ```
    /// # spargio::block_on(spargio::run(|handle| async move {
    /// use spargio::net::{TcpListener, TcpStream};
    ///
    /// let listener = TcpListener::bind(&handle, "127.0.0.1:0").await.unwrap();
    /// let addr = listener.local_addr().unwrap();
    /// let mut incoming = listener.incoming().unwrap();
    /// let clients: Vec<_> = (0..3)
    ///     .map(|_| std::net::TcpStream::connect(addr).unwrap())
    ///     .collect();
    /// for _ in 0..clients.len() {
    ///     let stream = incoming.accept().await.unwrap();
    ///     assert_eq!(stream.local_addr().unwrap(), addr);
    /// }
    /// # })).unwrap();
    /// ```
    pub fn incoming(&self) -> io::Result<Incoming> {
        self.incoming_with_session_policy(StreamSessionPolicy::default())
    }

    /// Like [`incoming`](Self::incoming); sessions are spread over the
    /// shards in rotation.
    pub fn incoming_round_robin(&self) -> io::Result<Incoming> {
        self.incoming_with_session_policy(StreamSessionPolicy::RoundRobin)
    }

    /// Like [`incoming`](Self::incoming), with an explicit session policy
    /// for the accepted streams. The accept itself runs on the calling
    /// shard's ring.
    pub fn incoming_with_session_policy(
        &self,
        policy: StreamSessionPolicy,
    ) -> io::Result<Incoming> {
        Incoming::new(&self.handle, &self.fd, policy)
    }
}

incoming_stream!(
    /// Connections accepted by one multishot accept
    /// ([`TcpListener::incoming`]); a `Stream` of `io::Result<TcpStream>`
    /// that never ends. Dropping it closes connections accepted but not yet
    /// taken.
    Incoming,
    TcpStream,
    TcpStream::from_parts
);

impl AsRawFd for TcpListener {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.raw()
    }
}

impl std::os::fd::AsFd for TcpListener {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        // SAFETY: the fd is open for as long as `self` (it holds a
        // reference to it).
        unsafe { std::os::fd::BorrowedFd::borrow_raw(self.fd.raw()) }
    }
}

//! The I/O shared by TCP and Unix streams.

use std::future::Future;
use std::io;

use crate::buf::{BufResult, IoBuf, IoBufMut};
use crate::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use crate::op::recv::Recv;
use crate::op::send::{send_now, Send as SendOp};
use crate::op::send_vectored::{send_vectored_now, Gather, SendVectored, MAX_IOVECS};
use crate::op::{Lane, Op, OpKind, SharedFd};
use crate::shard_id::ShardId;
use crate::stats::Counters;
use crate::task::JoinHandle;
use crate::{RuntimeError, RuntimeHandle};

/// A connected stream socket and its session shard.
#[derive(Clone, Debug)]
pub(crate) struct StreamCore {
    pub(crate) fd: SharedFd,
    pub(crate) session: ShardId,
    pub(crate) handle: RuntimeHandle,
}

impl StreamCore {
    fn submit<K: OpKind>(&self, op: K) -> Op<K> {
        let shared = &self.handle.shared;
        if crate::scheduler::context::current_shard(shared) == Some(self.session) {
            // Issued on the session shard: it goes straight into the ring.
            let counters = &shared.shards[self.session].counters;
            Counters::bump_shared(&counters.native_any_local_direct_submitted);
        }
        Op::submit(shared, Lane::Shard(self.session), op)
    }

    pub(crate) async fn send_owned<B: IoBuf>(&self, buf: B) -> BufResult<usize, B> {
        // A send an adaptor left to finish goes first (`io/linger.rs`).
        if let Err(e) = std::future::poll_fn(|cx| self.fd.poll_sends_behind(cx)).await {
            return (Err(e), buf);
        }
        // Room in the socket buffer: send now (what io_uring would attempt
        // first anyway, minus the ring round trip).
        if !self.handle.shared.is_closing() && buf.bytes_init() > 0 {
            if let Some(res) = send_now(&self.fd, buf.as_init_slice()) {
                return (res, buf);
            }
        }
        self.submit(SendOp {
            fd: self.fd.clone(),
            buf,
        })
        .await
    }

    /// Cancel safe: dropped mid-flight, what it received goes to the next
    /// receive (`op/carry.rs`).
    pub(crate) async fn recv_owned<B: IoBufMut>(&self, mut buf: B) -> BufResult<usize, B> {
        if let Some(carry) = self.fd.carry() {
            let carried = std::future::poll_fn(|cx| carry.poll_take_buf(cx, &mut buf)).await;
            if let Some(res) = carried {
                return (res, buf);
            }
        }
        self.submit(Recv {
            fd: self.fd.clone(),
            buf,
            carry: true,
            poll_first: false,
        })
        .await
    }

    pub(crate) async fn send(&self, data: &[u8]) -> io::Result<usize> {
        self.send_owned(data.to_vec()).await.0
    }

    pub(crate) async fn recv(&self, len: usize) -> io::Result<Vec<u8>> {
        let (res, buf) = self.recv_owned(Vec::with_capacity(len)).await;
        res.map(|_| buf)
    }

    pub(crate) async fn write_all_owned<B: IoBuf>(&self, buf: B) -> BufResult<(), B> {
        AsyncWriteExt::write_all(&mut &*self, buf).await
    }

    pub(crate) async fn read_exact_owned<B: IoBufMut>(&self, buf: B) -> BufResult<(), B> {
        AsyncReadExt::read_exact(&mut &*self, buf).await
    }

    pub(crate) async fn write_all(&self, data: &[u8]) -> io::Result<()> {
        self.write_all_owned(data.to_vec()).await.0
    }

    pub(crate) async fn read_exact(&self, out: &mut [u8]) -> io::Result<()> {
        let (res, buf) = self
            .read_exact_owned(vec![0u8; out.len()].into_boxed_slice())
            .await;
        res?;
        out.copy_from_slice(&buf);
        Ok(())
    }

    /// Sends every buffer, in order, up to `window` of them per `sendmsg`
    /// (module `op/send_vectored.rs`); resumes after a short send from the
    /// first byte not taken. Returns the total and the buffers.
    pub(crate) async fn send_all_batch<B: IoBuf>(
        &self,
        mut bufs: Vec<B>,
        window: usize,
    ) -> BufResult<usize, Vec<B>> {
        let window = window.clamp(1, MAX_IOVECS);
        if let Err(e) = std::future::poll_fn(|cx| self.fd.poll_sends_behind(cx)).await {
            return (Err(e), bufs);
        }
        let total: usize = bufs.iter().map(IoBuf::bytes_init).sum();
        // The first buffer not fully sent, and how much of it was.
        let (mut first, mut offset) = (0, 0);
        let mut sent = 0;
        loop {
            while first < bufs.len() && offset >= bufs[first].bytes_init() {
                first += 1;
                offset = 0;
            }
            if first == bufs.len() {
                return (Ok(total), bufs);
            }
            let end = (first + window).min(bufs.len());
            let gather = Gather::new(&bufs, first, offset, end);
            let now = if self.handle.shared.is_closing() {
                None
            } else {
                send_vectored_now(&self.fd, &gather)
            };
            let res = match now {
                Some(res) => res,
                None => {
                    let op = SendVectored::new(self.fd.clone(), bufs, gather);
                    let (res, back) = self.submit(op).await;
                    bufs = back;
                    res
                }
            };
            let mut n = match res {
                Ok(0) => {
                    let err = io::Error::new(
                        io::ErrorKind::WriteZero,
                        format!("the socket took 0 of the {} bytes left", total - sent),
                    );
                    return (Err(err), bufs);
                }
                Ok(n) => n,
                Err(e) => return (Err(e), bufs),
            };
            sent += n;
            // Advance over what was taken.
            while n > 0 {
                let left = bufs[first].bytes_init() - offset;
                if n < left {
                    offset += n;
                    n = 0;
                } else {
                    n -= left;
                    first += 1;
                    offset = 0;
                }
            }
        }
    }

    pub(crate) async fn shutdown(&self, how: std::net::Shutdown) -> io::Result<()> {
        if how != std::net::Shutdown::Read {
            // The end of the stream comes after a send an adaptor left to
            // finish (`io/linger.rs`), not in the middle of it.
            std::future::poll_fn(|cx| self.fd.poll_sends_behind(cx)).await?;
        }
        self.shutdown_now(how)
    }

    /// Shuts down one or both directions at once. A direct syscall, not
    /// `IORING_OP_SHUTDOWN`: the kernel cannot issue that op without
    /// blocking and hands every one to an io-wq worker thread (a thread
    /// wakeup per connection close), while `shutdown(2)` on a socket never
    /// blocks.
    pub(crate) fn shutdown_now(&self, how: std::net::Shutdown) -> io::Result<()> {
        let how = match how {
            std::net::Shutdown::Read => libc::SHUT_RD,
            std::net::Shutdown::Write => libc::SHUT_WR,
            std::net::Shutdown::Both => libc::SHUT_RDWR,
        };
        // SAFETY: a plain syscall on an fd that `self.fd` keeps open.
        if unsafe { libc::shutdown(self.fd.raw(), how) } == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    /// `handle` must be this stream's runtime: the session shard is one
    /// of its shards.
    fn check_handle(&self, handle: &RuntimeHandle) -> Result<(), RuntimeError> {
        if std::sync::Arc::ptr_eq(&handle.shared, &self.handle.shared) {
            Ok(())
        } else {
            Err(RuntimeError::ForeignHandle)
        }
    }

    #[track_caller]
    pub(crate) fn spawn_on_session<F>(
        &self,
        handle: &RuntimeHandle,
        fut: F,
    ) -> Result<JoinHandle<F::Output>, RuntimeError>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.check_handle(handle)?;
        handle.spawn_pinned(self.session, fut)
    }

    #[track_caller]
    pub(crate) fn spawn_stealable_on_session<F>(
        &self,
        handle: &RuntimeHandle,
        fut: F,
    ) -> Result<JoinHandle<F::Output>, RuntimeError>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.check_handle(handle)?;
        handle.spawn_stealable_on(self.session, fut)
    }
}

// The io traits' loops (`write_all`, `read_exact`) serve the streams'
// inherent methods too.
impl AsyncRead for &StreamCore {
    fn read<B: IoBufMut>(&mut self, buf: B) -> impl Future<Output = BufResult<usize, B>> + Send {
        StreamCore::recv_owned(self, buf)
    }
}

impl AsyncWrite for &StreamCore {
    fn write<B: IoBuf>(&mut self, buf: B) -> impl Future<Output = BufResult<usize, B>> + Send {
        StreamCore::send_owned(self, buf)
    }
    fn flush(&mut self) -> impl Future<Output = io::Result<()>> + Send {
        std::future::ready(Ok(()))
    }
    fn shutdown(&mut self) -> impl Future<Output = io::Result<()>> + Send {
        StreamCore::shutdown(self, std::net::Shutdown::Write)
    }
}

/// The stream methods, documented once, delegated to [`StreamCore`].
macro_rules! stream_methods {
    () => {
        pub(crate) fn core(&self) -> &crate::net::stream::StreamCore {
            &self.core
        }

        /// The shard whose ring this stream's operations go to.
        pub fn session_shard(&self) -> crate::shard_id::ShardId {
            self.core.session
        }

        /// Sends a copy of `data` (once; the count may be short).
        pub async fn send(&self, data: &[u8]) -> std::io::Result<usize> {
            self.core.send(data).await
        }

        /// Receives up to `len` bytes into a new buffer; empty when the
        /// peer closed its side.
        pub async fn recv(&self, len: usize) -> std::io::Result<Vec<u8>> {
            self.core.recv(len).await
        }

        /// Sends `buf`'s bytes (once; the count may be short); returns the
        /// count and the buffer. A closed peer is `BrokenPipe` (never
        /// `SIGPIPE`). On error the buffer is dropped: to keep it, use
        /// [`send_buf`](Self::send_buf).
        pub async fn send_owned<B: crate::buf::IoBuf>(
            &self,
            buf: B,
        ) -> std::io::Result<(usize, B)> {
            let (res, buf) = self.core.send_owned(buf).await;
            res.map(|n| (n, buf))
        }

        /// Receives into `buf`, from its first byte up to its capacity;
        /// returns the count (0: the peer closed) and the buffer. On error
        /// the buffer is dropped: to keep it, use
        /// [`recv_buf`](Self::recv_buf).
        pub async fn recv_owned<B: crate::buf::IoBufMut>(
            &self,
            buf: B,
        ) -> std::io::Result<(usize, B)> {
            let (res, buf) = self.core.recv_owned(buf).await;
            res.map(|n| (n, buf))
        }

        /// Sends all of `buf`'s bytes, retrying short sends; returns the
        /// buffer. On error the buffer is dropped: to keep it, use
        /// [`write_all_buf`](Self::write_all_buf).
        pub async fn write_all_owned<B: crate::buf::IoBuf>(&self, buf: B) -> std::io::Result<B> {
            let (res, buf) = self.core.write_all_owned(buf).await;
            res.map(|()| buf)
        }

        /// Fills `buf` to its capacity and returns it; `UnexpectedEof` if
        /// the peer closes first. On error the buffer is dropped: to keep
        /// it, use [`read_exact_buf`](Self::read_exact_buf).
        pub async fn read_exact_owned<B: crate::buf::IoBufMut>(
            &self,
            buf: B,
        ) -> std::io::Result<B> {
            let (res, buf) = self.core.read_exact_owned(buf).await;
            res.map(|()| buf)
        }

        /// Sends all of `data`, retrying short sends.
        pub async fn write_all(&self, data: &[u8]) -> std::io::Result<()> {
            self.core.write_all(data).await
        }

        /// Fills `out` completely; `UnexpectedEof` if the peer closes first.
        pub async fn read_exact(&self, out: &mut [u8]) -> std::io::Result<()> {
            self.core.read_exact(out).await
        }

        /// [`send_owned`](Self::send_owned) that hands the buffer back
        /// whatever happens ([`BufResult`](crate::buf::BufResult)).
        ///
        /// The `*_buf` methods are the primitives: use them in loops that
        /// reuse one buffer, or wherever a failed operation must not cost
        /// the buffer (a pooled or registered one). The `*_owned` methods
        /// are the same operations shaped for `?`.
        pub async fn send_buf<B: crate::buf::IoBuf>(
            &self,
            buf: B,
        ) -> crate::buf::BufResult<usize, B> {
            self.core.send_owned(buf).await
        }

        /// [`recv_owned`](Self::recv_owned) that hands the buffer back
        /// whatever happens ([`BufResult`](crate::buf::BufResult)).
        ///
        /// ```
        /// # spargio::block_on(spargio::run(|handle| async move {
        /// let (a, b) = spargio::net::UnixStream::pair(&handle).unwrap();
        /// a.write_all(b"one buffer, many receives").await.unwrap();
        /// drop(a);
        /// let (mut buf, mut got) = (Vec::with_capacity(4), Vec::new());
        /// loop {
        ///     buf.clear();
        ///     let (res, back) = b.recv_buf(buf).await;
        ///     buf = back;
        ///     match res.unwrap() {
        ///         0 => break,
        ///         _ => got.extend_from_slice(&buf),
        ///     }
        /// }
        /// assert_eq!(got, b"one buffer, many receives");
        /// # })).unwrap();
        /// ```
        pub async fn recv_buf<B: crate::buf::IoBufMut>(
            &self,
            buf: B,
        ) -> crate::buf::BufResult<usize, B> {
            self.core.recv_owned(buf).await
        }

        /// [`write_all_owned`](Self::write_all_owned) that hands the
        /// buffer back whatever happens.
        pub async fn write_all_buf<B: crate::buf::IoBuf>(
            &self,
            buf: B,
        ) -> crate::buf::BufResult<(), B> {
            self.core.write_all_owned(buf).await
        }

        /// [`read_exact_owned`](Self::read_exact_owned) that hands the
        /// buffer back whatever happens (on `UnexpectedEof`, with the bytes
        /// that did arrive at its start).
        pub async fn read_exact_buf<B: crate::buf::IoBufMut>(
            &self,
            buf: B,
        ) -> crate::buf::BufResult<(), B> {
            self.core.read_exact_owned(buf).await
        }

        /// Sends every buffer completely, in order; returns the total and
        /// the buffers. Up to `window` buffers (1..=1024) go out in one
        /// gathering `sendmsg` with `MSG_WAITALL`: one operation per
        /// window instead of one per buffer.
        pub async fn send_all_batch<B: crate::buf::IoBuf>(
            &self,
            bufs: Vec<B>,
            window: usize,
        ) -> crate::buf::BufResult<usize, Vec<B>> {
            self.core.send_all_batch(bufs, window).await
        }

        /// Receives with one multishot receive into a pool of provided
        /// buffers registered for this stream (64 × 16 KiB): a stream of
        /// [`RecvSegment`](crate::net::RecvSegment)s, each the bytes of one
        /// completion in the pool buffer the kernel filled (no copy), given
        /// back to the kernel when dropped. Ends at end of stream. See
        /// [`RecvSegments`](crate::net::RecvSegments) for flow control.
        pub async fn recv_multishot_segments(&self) -> std::io::Result<crate::net::RecvSegments> {
            self.recv_multishot_segments_with(crate::net::RecvPoolConfig::default())
                .await
        }

        /// [`recv_multishot_segments`](Self::recv_multishot_segments) with
        /// a pool of this shape.
        pub async fn recv_multishot_segments_with(
            &self,
            config: crate::net::RecvPoolConfig,
        ) -> std::io::Result<crate::net::RecvSegments> {
            crate::net::RecvSegments::new(&self.core, config).await
        }

        /// Shuts down the read side, the write side or both. After
        /// `Shutdown::Write` the peer reads end-of-stream; further sends
        /// fail with `BrokenPipe`.
        pub async fn shutdown(&self, how: std::net::Shutdown) -> std::io::Result<()> {
            self.core.shutdown(how).await
        }

        /// Spawns `fut` pinned to the session shard: the stream's
        /// operations then never leave the shard (best for a hot
        /// per-stream loop). `handle` (by value or by reference) must be
        /// the stream's runtime, else `RuntimeError::ForeignHandle`.
        ///
        /// ```
        /// # spargio::block_on(spargio::run(|handle| async move {
        /// use spargio::net::{TcpListener, TcpStream};
        ///
        /// let listener = TcpListener::bind(&handle, "127.0.0.1:0").await.unwrap();
        /// let client = TcpStream::connect(&handle, listener.local_addr().unwrap()).await.unwrap();
        /// let (conn, _) = listener.accept_round_robin().await.unwrap();
        /// let session = conn.session_shard();
        /// let on = conn.clone().spawn_on_session(&handle, async move {
        ///     let data = conn.recv(16).await.unwrap();
        ///     (spargio::ShardCtx::current().unwrap().shard_id(), data)
        /// }).unwrap();
        /// client.write_all(b"ping").await.unwrap();
        /// assert_eq!(on.await.unwrap(), (session, b"ping".to_vec()));
        /// # })).unwrap();
        /// ```
        #[track_caller]
        pub fn spawn_on_session<F>(
            &self,
            handle: impl AsRef<crate::RuntimeHandle>,
            fut: F,
        ) -> Result<crate::task::JoinHandle<F::Output>, crate::RuntimeError>
        where
            F: std::future::Future + Send + 'static,
            F::Output: Send + 'static,
        {
            self.core.spawn_on_session(handle.as_ref(), fut)
        }

        /// Spawns `fut` stealable, preferring the session shard (for when
        /// CPU work after the I/O dominates): it starts there unless that
        /// shard is clearly busier, and idle shards may steal it. `handle`
        /// must be the stream's runtime, else `RuntimeError::ForeignHandle`.
        #[track_caller]
        pub fn spawn_stealable_on_session<F>(
            &self,
            handle: impl AsRef<crate::RuntimeHandle>,
            fut: F,
        ) -> Result<crate::task::JoinHandle<F::Output>, crate::RuntimeError>
        where
            F: std::future::Future + Send + 'static,
            F::Output: Send + 'static,
        {
            self.core.spawn_stealable_on_session(handle.as_ref(), fut)
        }
    };
}

pub(crate) use stream_methods;

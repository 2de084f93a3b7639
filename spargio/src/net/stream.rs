//! The I/O shared by TCP and Unix streams.

use std::future::Future;
use std::io;

use crate::buf::{BufResult, IoBuf, IoBufMut};
use crate::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use crate::op::recv::Recv;
use crate::op::send::{send_now, Send as SendOp};
use crate::op::shutdown::Shutdown;
use crate::op::{Lane, Op, OpKind, SharedFd};
use crate::task::{JoinHandle, ShardId};
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
        Op::submit(&self.handle.shared, Lane::Shard(self.session), op)
    }

    pub(crate) async fn send_owned<B: IoBuf>(&self, buf: B) -> BufResult<usize, B> {
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

    pub(crate) async fn recv_owned<B: IoBufMut>(&self, buf: B) -> BufResult<usize, B> {
        self.submit(Recv {
            fd: self.fd.clone(),
            buf,
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

    pub(crate) async fn send_all_batch<B: IoBuf>(
        &self,
        bufs: Vec<B>,
        _window: usize,
    ) -> BufResult<usize, Vec<B>> {
        let mut out = Vec::with_capacity(bufs.len());
        let mut total = 0;
        let mut iter = bufs.into_iter();
        while let Some(buf) = iter.next() {
            let len = buf.bytes_init();
            let (res, buf) = self.write_all_owned(buf).await;
            out.push(buf);
            if let Err(e) = res {
                out.extend(iter);
                return (Err(e), out);
            }
            total += len;
        }
        (Ok(total), out)
    }

    pub(crate) async fn shutdown(&self, how: std::net::Shutdown) -> io::Result<()> {
        let how = match how {
            std::net::Shutdown::Read => libc::SHUT_RD,
            std::net::Shutdown::Write => libc::SHUT_WR,
            std::net::Shutdown::Both => libc::SHUT_RDWR,
        };
        self.submit(Shutdown {
            fd: self.fd.clone(),
            how,
        })
        .await
    }

    pub(crate) fn spawn_on_session<F>(&self, fut: F) -> Result<JoinHandle<F::Output>, RuntimeError>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.handle.spawn_pinned(self.session, fut)
    }

    pub(crate) fn spawn_stealable_on_session<F>(
        &self,
        fut: F,
    ) -> Result<JoinHandle<F::Output>, RuntimeError>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.handle.spawn_stealable_on(self.session, fut)
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
        pub fn session_shard(&self) -> crate::task::ShardId {
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

        /// Sends `buf`'s bytes (once; the count may be short) and returns
        /// the buffer. A closed peer is `BrokenPipe` (never `SIGPIPE`).
        pub async fn send_owned<B: crate::buf::IoBuf>(
            &self,
            buf: B,
        ) -> crate::buf::BufResult<usize, B> {
            self.core.send_owned(buf).await
        }

        /// Receives into `buf`, from its first byte up to its capacity;
        /// returns the count (0: the peer closed) and the buffer.
        pub async fn recv_owned<B: crate::buf::IoBufMut>(
            &self,
            buf: B,
        ) -> crate::buf::BufResult<usize, B> {
            self.core.recv_owned(buf).await
        }

        /// Sends all of `data`, retrying short sends.
        pub async fn write_all(&self, data: &[u8]) -> std::io::Result<()> {
            self.core.write_all(data).await
        }

        /// Fills `out` completely; `UnexpectedEof` if the peer closes first.
        pub async fn read_exact(&self, out: &mut [u8]) -> std::io::Result<()> {
            self.core.read_exact(out).await
        }

        /// Sends all of `buf`'s bytes, retrying short sends; returns the
        /// buffer.
        pub async fn write_all_owned<B: crate::buf::IoBuf>(
            &self,
            buf: B,
        ) -> crate::buf::BufResult<(), B> {
            self.core.write_all_owned(buf).await
        }

        /// Fills `buf` to its capacity; `UnexpectedEof` if the peer closes
        /// first. Returns the buffer either way.
        pub async fn read_exact_owned<B: crate::buf::IoBufMut>(
            &self,
            buf: B,
        ) -> crate::buf::BufResult<(), B> {
            self.core.read_exact_owned(buf).await
        }

        /// Sends every buffer completely, in order; returns the total and
        /// the buffers. `window` bounds how many sends are in flight.
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
        /// per-stream loop).
        pub fn spawn_on_session<F>(
            &self,
            fut: F,
        ) -> Result<crate::task::JoinHandle<F::Output>, crate::RuntimeError>
        where
            F: std::future::Future + Send + 'static,
            F::Output: Send + 'static,
        {
            self.core.spawn_on_session(fut)
        }

        /// Spawns `fut` stealable, preferring the session shard (for when
        /// CPU work after the I/O dominates).
        pub fn spawn_stealable_on_session<F>(
            &self,
            fut: F,
        ) -> Result<crate::task::JoinHandle<F::Output>, crate::RuntimeError>
        where
            F: std::future::Future + Send + 'static,
            F::Output: Send + 'static,
        {
            self.core.spawn_stealable_on_session(fut)
        }
    };
}

pub(crate) use stream_methods;

//! Stream operations of [`UringNativeAny`] aimed at an explicit shard
//! (the session-shard variants `net` streams are built from), batch
//! receives, and socket setup (`SOCKET` + `CONNECT`, `ACCEPT`) on a chosen
//! ring.
//!
//! The `*_on_shard` forms skip the lane selector and the fd lease: the
//! caller names the ring, and keeps one ring per fd if it wants the
//! operations on that fd ordered (as `TcpStream` does with its session
//! shard). An invalid shard is `InvalidInput`.

use std::io;
use std::net::SocketAddr;

use super::{NativeFd, UringNativeAny};
use crate::buf::{BufResult, IoBuf, IoBufMut};
use crate::net::stream::StreamCore;
use crate::net::{connect, sock_addr, socket, StreamSessionPolicy};
use crate::op::accept::Accept;
use crate::op::{Lane, Op};
use crate::shard_id::ShardId;

impl UringNativeAny {
    /// The session shard a new stream would get: the next in the
    /// runtime's rotation (as `StreamSessionPolicy::RoundRobin`).
    pub fn select_stream_session_shard(&self) -> ShardId {
        StreamSessionPolicy::RoundRobin
            .pick(&self.handle)
            .unwrap_or(0)
    }

    pub(super) fn on_shard(&self, shard: ShardId, fd: &NativeFd) -> io::Result<StreamCore> {
        StreamSessionPolicy::Fixed(shard).pick(&self.handle)?;
        Ok(StreamCore {
            fd: fd.shared().clone(),
            session: shard,
            handle: self.handle.clone(),
        })
    }

    /// Receives into `buf` on `shard`'s ring; returns the count and the
    /// buffer (dropped on error).
    pub async fn recv_owned_on_shard<B: IoBufMut>(
        &self,
        shard: ShardId,
        fd: &NativeFd,
        buf: B,
    ) -> io::Result<(usize, B)> {
        let (res, buf) = self.on_shard(shard, fd)?.recv_owned(buf).await;
        res.map(|n| (n, buf))
    }

    /// Sends `buf`'s bytes (once; the count may be short) on `shard`'s
    /// ring; returns the count and the buffer (dropped on error).
    pub async fn send_owned_on_shard<B: IoBuf>(
        &self,
        shard: ShardId,
        fd: &NativeFd,
        buf: B,
    ) -> io::Result<(usize, B)> {
        let (res, buf) = self.on_shard(shard, fd)?.send_owned(buf).await;
        res.map(|n| (n, buf))
    }

    /// Receives into `buf` from byte `offset` on (up to its capacity), on
    /// `shard`'s ring: appending to what the buffer already holds without
    /// splitting or copying it. Returns the count and the whole buffer,
    /// whose initialized length is then `offset + count`. `InvalidInput`
    /// if `offset` is past the buffer's capacity.
    ///
    /// ```
    /// # spargio::block_on(spargio::run(|handle| async move {
    /// use spargio::NativeFd;
    /// let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
    /// let (a, b) = (NativeFd::from(a), NativeFd::from(b));
    /// let native = handle.uring_native_unbound();
    /// native.send_owned_on_shard(0, &a, b"world".to_vec()).await.unwrap();
    /// let mut buf = Vec::with_capacity(16);
    /// buf.extend_from_slice(b"hello ");
    /// let (n, buf) = native.recv_owned_at_on_shard(0, &b, buf, 6).await.unwrap();
    /// assert_eq!((n, &buf[..]), (5, &b"hello world"[..]));
    /// # })).unwrap();
    /// ```
    pub async fn recv_owned_at_on_shard<B: IoBufMut>(
        &self,
        shard: ShardId,
        fd: &NativeFd,
        buf: B,
        offset: usize,
    ) -> io::Result<(usize, B)> {
        if offset > buf.bytes_total() {
            return Err(past_the_end(offset, buf.bytes_total()));
        }
        let core = self.on_shard(shard, fd)?;
        let (res, slice) = core.recv_owned(buf.slice(offset..)).await;
        res.map(|n| (n, slice.into_inner()))
    }

    /// Sends `buf`'s initialized bytes from byte `offset` on (once; the
    /// count may be short), on `shard`'s ring: the rest of a partly sent
    /// buffer, without splitting or copying it. `InvalidInput` if `offset`
    /// is past the initialized bytes.
    pub async fn send_owned_at_on_shard<B: IoBuf>(
        &self,
        shard: ShardId,
        fd: &NativeFd,
        buf: B,
        offset: usize,
    ) -> io::Result<(usize, B)> {
        if offset > buf.bytes_init() {
            return Err(past_the_end(offset, buf.bytes_init()));
        }
        let core = self.on_shard(shard, fd)?;
        let (res, slice) = core.send_owned(buf.slice(offset..)).await;
        res.map(|n| (n, slice.into_inner()))
    }

    /// [`send_all_batch`](Self::send_all_batch) on `shard`'s ring.
    pub async fn send_all_batch_on_shard<B: IoBuf>(
        &self,
        shard: ShardId,
        fd: &NativeFd,
        bufs: Vec<B>,
        window: usize,
    ) -> BufResult<usize, Vec<B>> {
        match self.on_shard(shard, fd) {
            Ok(core) => core.send_all_batch(bufs, window).await,
            Err(e) => (Err(e), bufs),
        }
    }

    /// The reference crate's name for [`recv_owned`](Self::recv_owned).
    pub async fn recv_into<B: IoBufMut>(&self, fd: &NativeFd, buf: B) -> io::Result<(usize, B)> {
        self.recv_owned(fd, buf).await
    }

    /// The reference crate's name for
    /// [`send_all_batch`](Self::send_all_batch).
    pub async fn send_batch<B: IoBuf>(
        &self,
        fd: &NativeFd,
        bufs: Vec<B>,
        window: usize,
    ) -> BufResult<usize, Vec<B>> {
        self.send_all_batch(fd, bufs, window).await
    }

    /// Fills each buffer completely (up to its capacity), in order, from
    /// the stream `fd`: a batch of fixed-size frames. Stops early at the
    /// end of the stream; returns the total received and the buffers (the
    /// last one partly filled at the end of the stream, later ones empty).
    /// Receives on one stream run one at a time, whatever `window` says:
    /// two receives in flight on one socket may complete out of order.
    pub async fn recv_batch_into<B: IoBufMut>(
        &self,
        fd: &NativeFd,
        bufs: Vec<B>,
        window: usize,
    ) -> BufResult<usize, Vec<B>> {
        let _ = window;
        let (_lease, stream) = self.leased_stream(fd);
        let mut out = Vec::with_capacity(bufs.len());
        let mut total = 0;
        let mut iter = bufs.into_iter();
        while let Some(buf) = iter.next() {
            let want = buf.bytes_total();
            let (res, buf) = stream.read_exact_owned(buf).await;
            match res {
                Ok(()) => total += want,
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                    total += buf.bytes_init();
                    out.push(buf);
                    out.extend(iter);
                    return (Ok(total), out);
                }
                Err(e) => {
                    out.push(buf);
                    out.extend(iter);
                    return (Err(e), out);
                }
            }
            out.push(buf);
        }
        (Ok(total), out)
    }

    /// A TCP socket connected to `addr`, created and connected on
    /// `shard`'s ring (`IORING_OP_SOCKET`, `IORING_OP_CONNECT`).
    pub async fn connect_on_shard(&self, shard: ShardId, addr: SocketAddr) -> io::Result<NativeFd> {
        StreamSessionPolicy::Fixed(shard).pick(&self.handle)?;
        let fd = socket(
            &self.handle,
            shard,
            socket2::Domain::for_address(addr),
            socket2::Type::STREAM,
        )
        .await?;
        let fd = NativeFd::new(fd);
        connect(&self.handle, shard, fd.shared(), addr.into()).await?;
        Ok(fd)
    }

    /// Accepts a connection on the listening socket `listener` with
    /// `shard`'s ring (`IORING_OP_ACCEPT`); the accepted fd is
    /// close-on-exec and non-blocking.
    pub async fn accept_on_shard(
        &self,
        shard: ShardId,
        listener: &NativeFd,
    ) -> io::Result<(NativeFd, SocketAddr)> {
        StreamSessionPolicy::Fixed(shard).pick(&self.handle)?;
        let op = Accept::new(listener.shared().clone());
        let (fd, peer) = Op::submit(&self.handle.shared, Lane::Shard(shard), op).await?;
        socket2::SockRef::from(&fd).set_nonblocking(true)?;
        Ok((NativeFd::new(fd), sock_addr(peer)?))
    }
}

fn past_the_end(offset: usize, len: usize) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("offset {offset} is past the buffer's {len} bytes"),
    )
}

//! Multishot receive on [`UringNativeAny`], in the flat form: every byte a
//! multishot `RECV` delivered, copied into one buffer, with where each
//! completion's piece sits in it.
//!
//! Underneath is the same machinery as `TcpStream::recv_multishot_segments`
//! (a provided-buffer ring registered on the receiving shard, one multishot
//! `RECV`, `ENOBUFS` flow control). Each segment is copied into the flat
//! buffer and its pool buffer handed straight back, so the pool can be
//! small. Once `bytes_target` bytes have arrived the receive is stopped;
//! what the kernel had already delivered by then is kept too (nothing is
//! lost, so the result may exceed the target), and later bytes stay in the
//! socket. The zero-copy form, for callers who can work on pool buffers
//! directly, is `TcpStream::recv_multishot_segments`.

use std::io;

use super::{NativeFd, UringNativeAny};
use crate::net::stream::StreamCore;
use crate::net::{RecvPoolConfig, RecvSegments};
use crate::shard_id::ShardId;

/// One completion's piece inside [`UringRecvMultishotSegments::buffer`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UringRecvSegment {
    /// Where the piece starts in the buffer.
    pub offset: usize,
    /// Its length in bytes.
    pub len: usize,
}

/// What [`UringNativeAny::recv_multishot_segments`] received: one flat
/// buffer and the pieces it is made of, in arrival order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UringRecvMultishotSegments {
    /// Every received byte, in order.
    pub buffer: Vec<u8>,
    /// One entry per completion; together they cover `buffer` exactly.
    pub segments: Vec<UringRecvSegment>,
}

impl UringRecvMultishotSegments {
    /// The bytes of segment `i`.
    pub fn segment(&self, i: usize) -> &[u8] {
        let s = self.segments[i];
        &self.buffer[s.offset..s.offset + s.len]
    }

    fn push(&mut self, bytes: &[u8]) {
        self.segments.push(UringRecvSegment {
            offset: self.buffer.len(),
            len: bytes.len(),
        });
        self.buffer.extend_from_slice(bytes);
    }
}

impl UringNativeAny {
    /// Receives from the stream `fd` with one multishot `RECV` over a pool
    /// of `buffer_count` buffers of `buffer_len` bytes, until at least
    /// `bytes_target` bytes arrived or the stream ended (see the module
    /// docs). Runs on `fd`'s leased ring.
    ///
    /// ```
    /// # spargio::block_on(spargio::run(|handle| async move {
    /// use std::io::Write;
    /// use spargio::NativeFd;
    ///
    /// let (mut a, b) = std::os::unix::net::UnixStream::pair().unwrap();
    /// a.write_all(b"abcdef").unwrap();
    /// drop(a);
    /// let native = handle.uring_native_unbound();
    /// let got = native
    ///     .recv_multishot_segments(&NativeFd::from(b), 4, 4, 1 << 20)
    ///     .await
    ///     .unwrap();
    /// assert_eq!(got.buffer, b"abcdef");
    /// # })).unwrap();
    /// ```
    pub async fn recv_multishot_segments(
        &self,
        fd: &NativeFd,
        buffer_len: u32,
        buffer_count: u16,
        bytes_target: usize,
    ) -> io::Result<UringRecvMultishotSegments> {
        let (_lease, stream) = self.leased_stream(fd);
        collect(&stream, buffer_len, buffer_count, bytes_target).await
    }

    /// [`recv_multishot_segments`](Self::recv_multishot_segments) on
    /// `shard`'s ring.
    pub async fn recv_multishot_segments_on_shard(
        &self,
        shard: ShardId,
        fd: &NativeFd,
        buffer_len: u32,
        buffer_count: u16,
        bytes_target: usize,
    ) -> io::Result<UringRecvMultishotSegments> {
        let stream = self.on_shard(shard, fd)?;
        collect(&stream, buffer_len, buffer_count, bytes_target).await
    }

    /// The compatibility form of
    /// [`recv_multishot_segments`](Self::recv_multishot_segments): one
    /// `Vec` per completion.
    pub async fn recv_multishot(
        &self,
        fd: &NativeFd,
        buffer_len: u32,
        buffer_count: u16,
        bytes_target: usize,
    ) -> io::Result<Vec<Vec<u8>>> {
        let got = self
            .recv_multishot_segments(fd, buffer_len, buffer_count, bytes_target)
            .await?;
        Ok((0..got.segments.len())
            .map(|i| got.segment(i).to_vec())
            .collect())
    }
}

async fn collect(
    stream: &StreamCore,
    buffer_len: u32,
    buffer_count: u16,
    bytes_target: usize,
) -> io::Result<UringRecvMultishotSegments> {
    let config = RecvPoolConfig::default()
        .buffers(buffer_count)
        .buffer_len(buffer_len);
    let mut segs = RecvSegments::new(stream, config).await?;
    let mut out = UringRecvMultishotSegments::default();
    while out.buffer.len() < bytes_target {
        match segs.next_segment().await {
            Some(Ok(seg)) => out.push(&seg),
            Some(Err(e)) => return Err(e),
            None => return Ok(out),
        }
    }
    for seg in segs.stop().await? {
        out.push(&seg);
    }
    Ok(out)
}

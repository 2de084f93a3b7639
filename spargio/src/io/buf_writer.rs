//! `BufWriter`: a user-space write buffer over an [`AsyncWrite`].

use std::future::Future;
use std::io;

use super::traits::{write_zero, AsyncRead, AsyncWrite};
use crate::buf::{BufResult, IoBuf, IoBufMut};

/// Default buffer size, as in std and tokio.
const DEFAULT_CAPACITY: usize = 8 << 10;

/// Buffers writes to `W`: small writes are copied into one buffer, which
/// goes to `W` in one write when it fills, on [`flush`](AsyncWrite::flush)
/// and on [`shutdown`](AsyncWrite::shutdown). A write at least as large as
/// the buffer skips it (no copy).
///
/// **Flush before dropping.** There is no async drop, so a `BufWriter`
/// dropped (or unwrapped with [`into_inner`](BufWriter::into_inner)) with
/// bytes in its buffer discards them, as tokio's does. Likewise, a flush
/// dropped while its write is in flight takes the buffered bytes with it,
/// and how many reached `W` is unknown. A flush that fails keeps the bytes
/// `W` did not take, so it can be retried.
///
/// Reads pass straight through to `W` when it is also a reader.
///
/// ```
/// # spargio::block_on(async {
/// use spargio::io::{AsyncWrite, AsyncWriteExt, BufWriter};
///
/// let mut out = BufWriter::new(Vec::new());
/// for word in ["one ", "two ", "three"] {
///     out.write_all(word).await.0.unwrap();
/// }
/// assert!(out.get_ref().is_empty(), "still buffered");
/// out.flush().await.unwrap();
/// assert_eq!(out.get_ref(), b"one two three");
/// # });
/// ```
#[derive(Debug)]
pub struct BufWriter<W> {
    inner: W,
    buf: Vec<u8>,
    capacity: usize,
}

impl<W> BufWriter<W> {
    /// A writer with an 8 KiB buffer (allocated at the first buffered write).
    pub fn new(inner: W) -> BufWriter<W> {
        BufWriter::with_capacity(DEFAULT_CAPACITY, inner)
    }

    /// A writer with a buffer of `capacity` bytes (0: every write goes
    /// straight through), allocated at the first buffered write.
    pub fn with_capacity(capacity: usize, inner: W) -> BufWriter<W> {
        BufWriter {
            inner,
            buf: Vec::new(),
            capacity,
        }
    }

    /// The underlying writer.
    pub fn get_ref(&self) -> &W {
        &self.inner
    }

    /// The underlying writer, mutably. Writing to it directly puts bytes
    /// ahead of the ones buffered here.
    pub fn get_mut(&mut self) -> &mut W {
        &mut self.inner
    }

    /// The underlying writer back; buffered bytes are discarded (flush
    /// first).
    pub fn into_inner(self) -> W {
        self.inner
    }

    /// The buffered bytes, not yet written to `W`.
    pub fn buffer(&self) -> &[u8] {
        &self.buf
    }

    /// The buffer size.
    pub fn capacity(&self) -> usize {
        self.capacity
    }
}

impl<W: AsyncWrite> BufWriter<W> {
    /// Writes the buffer out to `W`, retrying short writes. On error the
    /// bytes not yet taken stay buffered.
    async fn flush_buf(&mut self) -> io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let mut buf = std::mem::take(&mut self.buf);
        let len = buf.len();
        let mut written = 0;
        let mut result = Ok(());
        while written < len {
            let (res, slice) = self.inner.write(buf.slice(written..len)).await;
            buf = slice.into_inner();
            match res {
                Ok(0) => {
                    result = Err(write_zero());
                    break;
                }
                Ok(n) => written += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        buf.drain(..written);
        self.buf = buf;
        result
    }
}

impl<W: AsyncWrite> AsyncWrite for BufWriter<W> {
    /// Copies `buf`'s bytes into the buffer (writing the buffer out first
    /// if they do not fit), or writes them straight to `W` if they are at
    /// least a buffer's worth. A buffered write never writes short.
    async fn write<B: IoBuf>(&mut self, buf: B) -> BufResult<usize, B> {
        let len = buf.bytes_init();
        if self.buf.len() + len > self.capacity {
            if let Err(e) = self.flush_buf().await {
                return (Err(e), buf);
            }
        }
        if len >= self.capacity {
            return self.inner.write(buf).await;
        }
        if self.buf.capacity() < self.capacity {
            // First use, or the last flush was dropped mid-write.
            self.buf.reserve_exact(self.capacity - self.buf.len());
        }
        self.buf.extend_from_slice(buf.as_init_slice());
        (Ok(len), buf)
    }

    /// Writes the buffer out, then flushes `W`.
    async fn flush(&mut self) -> io::Result<()> {
        self.flush_buf().await?;
        self.inner.flush().await
    }

    /// Writes the buffer out, then shuts `W` down.
    async fn shutdown(&mut self) -> io::Result<()> {
        self.flush_buf().await?;
        self.inner.shutdown().await
    }
}

impl<W: AsyncWrite + AsyncRead> AsyncRead for BufWriter<W> {
    fn read<B: IoBufMut>(&mut self, buf: B) -> impl Future<Output = BufResult<usize, B>> + Send {
        self.inner.read(buf)
    }
}

//! `BufReader`: a user-space read buffer over an [`AsyncRead`].

use std::future::Future;
use std::io;

use super::impls::put_slice;
use super::traits::{AsyncRead, AsyncWrite};
use crate::buf::{BufResult, IoBuf, IoBufMut};

/// Default buffer size, as in std and tokio.
const DEFAULT_CAPACITY: usize = 8 << 10;

/// Buffers reads from `R`: one large read serves many small ones, and
/// lines or delimited records can be read without reading past them.
///
/// The buffer itself is owned-buffer I/O: it moves into each read of `R`
/// and back. If a refill is dropped while its read is in flight, the
/// buffer goes with it (the runtime frees it after the completion) and the
/// next call allocates a new one; bytes already buffered are never lost,
/// but the ones that read was receiving are.
///
/// Writes pass straight through to `R` when it is also a writer.
///
/// ```
/// # spargio::block_on(spargio::run(|handle| async move {
/// use spargio::io::BufReader;
/// use spargio::net::{TcpListener, TcpStream};
///
/// let listener = TcpListener::bind_socket_addr(&handle, "127.0.0.1:0".parse().unwrap()).unwrap();
/// let addr = listener.local_addr().unwrap();
/// let mut client = TcpStream::connect_socket_addr(&handle, addr).await.unwrap();
/// let (server, _) = listener.accept().await.unwrap();
/// client.write_all(b"first\nsecond\n").await.unwrap();
///
/// let mut reader = BufReader::new(server);
/// let mut line = String::new();
/// reader.read_line(&mut line).await.unwrap();
/// reader.read_line(&mut line).await.unwrap();
/// assert_eq!(line, "first\nsecond\n");
/// # })).unwrap();
/// ```
#[derive(Debug)]
pub struct BufReader<R> {
    inner: R,
    /// Unread bytes are `buf[pos..]`.
    buf: Vec<u8>,
    pos: usize,
    capacity: usize,
}

impl<R> BufReader<R> {
    /// A reader with an 8 KiB buffer (allocated at the first read).
    pub fn new(inner: R) -> BufReader<R> {
        BufReader::with_capacity(DEFAULT_CAPACITY, inner)
    }

    /// A reader with a buffer of `capacity` bytes (at least 1), allocated
    /// at the first read.
    pub fn with_capacity(capacity: usize, inner: R) -> BufReader<R> {
        BufReader {
            inner,
            buf: Vec::new(),
            pos: 0,
            capacity: capacity.max(1),
        }
    }

    /// The underlying reader.
    pub fn get_ref(&self) -> &R {
        &self.inner
    }

    /// The underlying reader, mutably. Reading from it directly skips the
    /// bytes buffered here.
    pub fn get_mut(&mut self) -> &mut R {
        &mut self.inner
    }

    /// The underlying reader back; buffered bytes are dropped (take them
    /// with [`buffer`](BufReader::buffer) first if they matter).
    pub fn into_inner(self) -> R {
        self.inner
    }

    /// The buffered, unread bytes.
    pub fn buffer(&self) -> &[u8] {
        &self.buf[self.pos..]
    }

    /// The buffer size this reader refills to.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Marks `amt` buffered bytes as read (at most all of them), after
    /// [`fill_buf`](BufReader::fill_buf).
    pub fn consume(&mut self, amt: usize) {
        self.pos = (self.pos + amt).min(self.buf.len());
    }
}

impl<R: AsyncRead> BufReader<R> {
    /// The buffered bytes, refilling with one read of `R` when there are
    /// none; empty only at end of stream. Mark what you use with
    /// [`consume`](BufReader::consume).
    pub async fn fill_buf(&mut self) -> io::Result<&[u8]> {
        if self.pos >= self.buf.len() {
            self.refill().await?;
        }
        Ok(self.buffer())
    }

    async fn refill(&mut self) -> io::Result<()> {
        let mut buf = std::mem::take(&mut self.buf);
        self.pos = 0;
        if buf.capacity() == 0 {
            // First use, or the last refill was dropped mid-read.
            buf = Vec::with_capacity(self.capacity);
        }
        loop {
            // A read fills from the first byte: the count becomes the length.
            buf.clear();
            let (res, filled) = self.inner.read(buf).await;
            buf = filled;
            match res {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                res => {
                    self.buf = buf;
                    return res.map(drop);
                }
            }
        }
    }

    /// Reads up to and including `delim` (or to end of stream), appending
    /// to `out`; returns how many bytes were appended (0: end of stream).
    ///
    /// On error, the bytes appended so far stay in `out`.
    pub async fn read_until(&mut self, delim: u8, out: &mut Vec<u8>) -> io::Result<usize> {
        let start = out.len();
        loop {
            let available = self.fill_buf().await?;
            if available.is_empty() {
                return Ok(out.len() - start);
            }
            let (taken, done) = match available.iter().position(|&b| b == delim) {
                Some(i) => (i + 1, true),
                None => (available.len(), false),
            };
            out.extend_from_slice(&available[..taken]);
            self.consume(taken);
            if done {
                return Ok(out.len() - start);
            }
        }
    }

    /// Reads a line, `\n` included, appending it to `out`; returns its
    /// length in bytes (0: end of stream). A last line without `\n` counts.
    ///
    /// A line that is not UTF-8 is `InvalidData`, and `out` is left as it
    /// was. On any error the line's bytes read so far are lost, so the
    /// stream is best abandoned.
    pub async fn read_line(&mut self, out: &mut String) -> io::Result<usize> {
        let mut line = Vec::new();
        let n = self.read_until(b'\n', &mut line).await?;
        let line =
            String::from_utf8(line).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        out.push_str(&line);
        Ok(n)
    }
}

impl<R: AsyncRead> AsyncRead for BufReader<R> {
    /// Serves the read from the buffer, refilling it first if empty. With
    /// nothing buffered, a read at least as large as the buffer goes
    /// straight to `R` (no copy).
    async fn read<B: IoBufMut>(&mut self, mut buf: B) -> BufResult<usize, B> {
        if buf.bytes_total() == 0 {
            return (Ok(0), buf);
        }
        if self.pos >= self.buf.len() && buf.bytes_total() >= self.capacity {
            return self.inner.read(buf).await;
        }
        let n = match self.fill_buf().await {
            Ok(available) => put_slice(&mut buf, available),
            Err(e) => return (Err(e), buf),
        };
        self.consume(n);
        (Ok(n), buf)
    }
}

impl<R: AsyncRead + AsyncWrite> AsyncWrite for BufReader<R> {
    fn write<B: IoBuf>(&mut self, buf: B) -> impl Future<Output = BufResult<usize, B>> + Send {
        self.inner.write(buf)
    }
    fn flush(&mut self) -> impl Future<Output = io::Result<()>> + Send {
        self.inner.flush()
    }
    fn shutdown(&mut self) -> impl Future<Output = io::Result<()>> + Send {
        self.inner.shutdown()
    }
}

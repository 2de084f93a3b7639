//! `AsyncRead`, `AsyncWrite` and their extension traits.

use std::future::Future;
use std::io;

use crate::buf::{BufResult, IoBuf, IoBufMut};

/// Reads bytes into owned buffers.
///
/// A read moves the buffer into the operation and hands it back with the
/// count: it fills the buffer from its first byte, up to its
/// [`bytes_total`](IoBuf::bytes_total) (a `Vec`'s capacity), and records the
/// bytes as initialized. `Ok(0)` means end of stream (or a buffer with no
/// room). To append to a `Vec`, read into `vec.slice(vec.len()..)`.
///
/// The future is `Send`, so implementors are `Send`: see the
/// [module docs](crate::io#send-futures) for why.
///
/// ```
/// # spargio::block_on(spargio::run(|handle| async move {
/// use spargio::io::{AsyncRead, AsyncWrite};
/// use spargio::net::{TcpListener, TcpStream};
///
/// let listener = TcpListener::bind_socket_addr(&handle, "127.0.0.1:0".parse().unwrap()).unwrap();
/// let addr = listener.local_addr().unwrap();
/// let server = handle.spawn_stealable(async move {
///     let (mut stream, _) = listener.accept().await.unwrap();
///     let (n, buf) = stream.read(Vec::with_capacity(64)).await;
///     assert_eq!(&buf[..n.unwrap()], b"ping");
///     stream.write(&b"pong"[..]).await.0.unwrap();
/// }).unwrap();
///
/// let mut client = TcpStream::connect_socket_addr(&handle, addr).await.unwrap();
/// client.write(b"ping".to_vec()).await.0.unwrap();
/// let (n, buf) = client.read(vec![0u8; 4]).await;
/// assert_eq!(n.unwrap(), 4);
/// assert_eq!(buf, b"pong");
/// server.await.unwrap();
/// # })).unwrap();
/// ```
pub trait AsyncRead: Send {
    /// Reads once into `buf`; returns the count (0: end of stream) and the
    /// buffer, which comes back on error too.
    fn read<B: IoBufMut>(&mut self, buf: B) -> impl Future<Output = BufResult<usize, B>> + Send;
}

/// Writes bytes from owned buffers.
///
/// A write moves the buffer into the operation and hands it back with the
/// count of bytes taken from its initialized part, which may be short.
///
/// The futures are `Send`, so implementors are `Send`: see the
/// [module docs](crate::io#send-futures). The example on [`AsyncRead`]
/// shows both traits on a TCP stream; [`AsyncWriteExt::write_all`] loops
/// over short writes.
pub trait AsyncWrite: Send {
    /// Writes `buf`'s initialized bytes once; returns how many were taken
    /// and the buffer, which comes back on error too.
    fn write<B: IoBuf>(&mut self, buf: B) -> impl Future<Output = BufResult<usize, B>> + Send;

    /// Pushes out anything this writer buffers in user space (a no-op for
    /// unbuffered streams: the kernel owns what was written).
    fn flush(&mut self) -> impl Future<Output = io::Result<()>> + Send;

    /// Flushes, then closes the write direction (for a socket, the peer
    /// then reads end of stream). Reads, if any, still work.
    fn shutdown(&mut self) -> impl Future<Output = io::Result<()>> + Send;
}

// ===== impl AsyncRead / AsyncWrite for &mut T and Box<T> =====

impl<T: AsyncRead + ?Sized> AsyncRead for &mut T {
    fn read<B: IoBufMut>(&mut self, buf: B) -> impl Future<Output = BufResult<usize, B>> + Send {
        (**self).read(buf)
    }
}

impl<T: AsyncRead + ?Sized> AsyncRead for Box<T> {
    fn read<B: IoBufMut>(&mut self, buf: B) -> impl Future<Output = BufResult<usize, B>> + Send {
        (**self).read(buf)
    }
}

impl<T: AsyncWrite + ?Sized> AsyncWrite for &mut T {
    fn write<B: IoBuf>(&mut self, buf: B) -> impl Future<Output = BufResult<usize, B>> + Send {
        (**self).write(buf)
    }
    fn flush(&mut self) -> impl Future<Output = io::Result<()>> + Send {
        (**self).flush()
    }
    fn shutdown(&mut self) -> impl Future<Output = io::Result<()>> + Send {
        (**self).shutdown()
    }
}

impl<T: AsyncWrite + ?Sized> AsyncWrite for Box<T> {
    fn write<B: IoBuf>(&mut self, buf: B) -> impl Future<Output = BufResult<usize, B>> + Send {
        (**self).write(buf)
    }
    fn flush(&mut self) -> impl Future<Output = io::Result<()>> + Send {
        (**self).flush()
    }
    fn shutdown(&mut self) -> impl Future<Output = io::Result<()>> + Send {
        (**self).shutdown()
    }
}

// ===== extension traits =====

/// Growth step of [`AsyncReadExt::read_to_end`] when its `Vec` is full.
const READ_TO_END_MIN_GROW: usize = 8 << 10;

/// Read loops over [`AsyncRead`]; implemented for every reader.
pub trait AsyncReadExt: AsyncRead {
    /// Fills `buf` to its [`bytes_total`](IoBuf::bytes_total), retrying
    /// short reads. `UnexpectedEof` if the stream ends first (the bytes
    /// read so far are in the returned buffer).
    ///
    /// A `Vec`'s total is its capacity, which may exceed what was asked
    /// for: to read exactly `n` bytes pass `vec![0; n].into_boxed_slice()`
    /// or `buf.slice(..n)`.
    fn read_exact<B: IoBufMut>(
        &mut self,
        mut buf: B,
    ) -> impl Future<Output = BufResult<(), B>> + Send {
        async move {
            let total = buf.bytes_total();
            let mut done = 0;
            while done < total {
                let (res, slice) = self.read(buf.slice(done..total)).await;
                buf = slice.into_inner();
                match res {
                    Ok(0) => return (Err(unexpected_eof()), buf),
                    Ok(n) => done += n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return (Err(e), buf),
                }
            }
            (Ok(()), buf)
        }
    }

    /// Reads to end of stream, appending to `buf`; returns how many bytes
    /// were appended. The `Vec` grows as bytes arrive (by at least 8 KiB,
    /// at most doubling), so a slow peer cannot make it reserve far ahead
    /// of what it sent.
    fn read_to_end(
        &mut self,
        mut buf: Vec<u8>,
    ) -> impl Future<Output = BufResult<usize, Vec<u8>>> + Send {
        async move {
            let start = buf.len();
            loop {
                if buf.len() == buf.capacity() {
                    buf.reserve(buf.capacity().max(READ_TO_END_MIN_GROW));
                }
                let len = buf.len();
                let (res, slice) = self.read(buf.slice(len..)).await;
                buf = slice.into_inner();
                match res {
                    Ok(0) => return (Ok(buf.len() - start), buf),
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return (Err(e), buf),
                }
            }
        }
    }
}

impl<R: AsyncRead + ?Sized> AsyncReadExt for R {}

/// Write loops over [`AsyncWrite`]; implemented for every writer.
pub trait AsyncWriteExt: AsyncWrite {
    /// Writes all of `buf`'s initialized bytes, retrying short writes; a
    /// write that takes no bytes is `WriteZero`. Returns the buffer.
    fn write_all<B: IoBuf>(&mut self, mut buf: B) -> impl Future<Output = BufResult<(), B>> + Send {
        async move {
            let total = buf.bytes_init();
            let mut done = 0;
            while done < total {
                let (res, slice) = self.write(buf.slice(done..total)).await;
                buf = slice.into_inner();
                match res {
                    Ok(0) => return (Err(write_zero()), buf),
                    Ok(n) => done += n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return (Err(e), buf),
                }
            }
            (Ok(()), buf)
        }
    }
}

impl<W: AsyncWrite + ?Sized> AsyncWriteExt for W {}

pub(super) fn unexpected_eof() -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        "the stream ended before the buffer was filled",
    )
}

pub(super) fn write_zero() -> io::Error {
    io::Error::new(io::ErrorKind::WriteZero, "the writer accepted no bytes")
}

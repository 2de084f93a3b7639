//! `copy` and `copy_to_vec`.

use std::io;

use super::traits::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Size of `copy`'s one buffer: large enough that a bulk transfer costs
/// few operations, small enough to keep per-connection memory modest.
const COPY_BUF_LEN: usize = 64 << 10;

/// Copies everything `reader` yields into `writer` until end of stream,
/// then flushes `writer`; returns the number of bytes copied.
///
/// One 64 KiB buffer moves back and forth between the read and the write
/// (owned-buffer I/O): nothing is allocated per chunk. `writer` is not
/// shut down; call [`AsyncWrite::shutdown`] if the peer should see end of
/// stream.
///
/// ```
/// use spargio::io::copy;
///
/// let mut src: &[u8] = b"hello, ring";
/// let mut out = Vec::new();
/// let n = spargio::block_on(copy(&mut src, &mut out)).unwrap();
/// assert_eq!(n, 11);
/// assert_eq!(out, b"hello, ring");
/// ```
pub async fn copy<R, W>(reader: &mut R, writer: &mut W) -> io::Result<u64>
where
    R: AsyncRead + ?Sized,
    W: AsyncWrite + ?Sized,
{
    let mut buf = Vec::with_capacity(COPY_BUF_LEN);
    let mut total = 0u64;
    loop {
        // A read fills from the first byte; `clear` makes the count the
        // Vec's length afterwards.
        buf.clear();
        let (res, filled) = reader.read(buf).await;
        buf = filled;
        let n = match res {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let (res, written) = writer.write_all(buf).await;
        buf = written;
        res?;
        total += n as u64;
    }
    writer.flush().await?;
    Ok(total)
}

/// Reads `reader` to end of stream into a new `Vec`.
///
/// The `Vec` grows as bytes arrive (see [`AsyncReadExt::read_to_end`]).
///
/// ```
/// use spargio::io::copy_to_vec;
///
/// let mut src: &[u8] = b"all of it";
/// assert_eq!(spargio::block_on(copy_to_vec(&mut src)).unwrap(), b"all of it");
/// ```
pub async fn copy_to_vec<R: AsyncRead + ?Sized>(reader: &mut R) -> io::Result<Vec<u8>> {
    let (res, buf) = reader.read_to_end(Vec::new()).await;
    res.map(|_| buf)
}

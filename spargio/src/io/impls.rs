//! The traits for in-memory buffers (the streams' impls are in
//! `net/io_impls.rs`, next to their types).

use std::future::{ready, Future};
use std::io;

use super::traits::{AsyncRead, AsyncWrite};
use crate::buf::{BufResult, IoBuf, IoBufMut};

// ===== in-memory =====

/// Reading a byte slice copies from its front and advances it; an empty
/// slice reads as end of stream.
impl AsyncRead for &[u8] {
    fn read<B: IoBufMut>(
        &mut self,
        mut buf: B,
    ) -> impl Future<Output = BufResult<usize, B>> + Send {
        let src = *self;
        let n = put_slice(&mut buf, src);
        *self = &src[n..];
        ready((Ok(n), buf))
    }
}

/// Writing to a `Vec` appends; it never writes short.
impl AsyncWrite for Vec<u8> {
    fn write<B: IoBuf>(&mut self, buf: B) -> impl Future<Output = BufResult<usize, B>> + Send {
        let data = buf.as_init_slice();
        self.extend_from_slice(data);
        let n = data.len();
        ready((Ok(n), buf))
    }
    fn flush(&mut self) -> impl Future<Output = io::Result<()>> + Send {
        ready(Ok(()))
    }
    fn shutdown(&mut self) -> impl Future<Output = io::Result<()>> + Send {
        ready(Ok(()))
    }
}

/// Copies the front of `src` into `buf` as a read would (from its first
/// byte, up to its total), and returns how many bytes were copied.
pub(super) fn put_slice<B: IoBufMut>(buf: &mut B, src: &[u8]) -> usize {
    let n = src.len().min(buf.bytes_total());
    let dst = buf.stable_mut_ptr();
    // `dst` is valid for writes of `bytes_total` bytes (the `IoBufMut`
    // contract) and `n` does not exceed that; `src` is a shared borrow
    // while `buf` is borrowed exclusively, so they cannot overlap.
    // SAFETY: see above; once copied, the first `n` bytes are initialized,
    // which is what `set_init(n)` requires.
    unsafe {
        std::ptr::copy_nonoverlapping(src.as_ptr(), dst, n);
        buf.set_init(n);
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn put_slice_fills_up_to_the_total() {
        let mut v = Vec::with_capacity(3);
        assert_eq!(put_slice(&mut v, b"hello"), v.capacity().min(5));
        assert_eq!(&v[..], &b"hello"[..v.len()]);

        let mut boxed = vec![0u8; 8].into_boxed_slice();
        assert_eq!(put_slice(&mut boxed, b"abc"), 3);
        assert_eq!(&boxed[..4], b"abc\0");
    }

    #[test]
    fn slice_reads_and_vec_writes() {
        let mut src: &[u8] = b"abcdef";
        let (n, buf) = crate::block_on(src.read(Vec::with_capacity(4)));
        assert_eq!(&buf[..n.unwrap()], &b"abcdef"[..buf.len()]);
        assert_eq!(src.len(), 6 - buf.len());

        let mut out = Vec::new();
        let (n, _) = crate::block_on(out.write(&b"xy"[..]));
        assert_eq!(n.unwrap(), 2);
        assert_eq!(out, b"xy");
    }
}

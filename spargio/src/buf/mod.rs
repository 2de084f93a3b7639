//! Owned buffers for completion-based I/O.
//!
//! io_uring reads into and writes from memory the kernel holds for the whole
//! life of an operation, which may outlast the future that started it (a
//! future can be dropped mid-flight). So an operation takes its buffer by
//! value and hands it back with the result ([`BufResult`]); if the future is
//! dropped first, the buffer moves into the shard's op table and is freed
//! only after the kernel's final completion (see `driver/lifecycle.rs`).
//!
//! [`IoBuf`] and [`IoBufMut`] are `unsafe` traits because the kernel is
//! handed raw pointers: an implementation promises the memory stays valid and
//! at the same address when the buffer value is moved. Heap-backed types
//! (`Vec<u8>`, `Box<[u8]>`, `bytes::BytesMut`, `bytes::Bytes`) and `'static`
//! slices qualify; an inline array does not.
//!
//! [`Slice`] limits an operation to a range of a buffer without copying it;
//! [`Slice::into_inner`] gets the whole buffer back.

mod impls;
pub(crate) mod ring;
mod slice;

pub use slice::Slice;

use std::io;
use std::ops::RangeBounds;

/// An I/O result paired with the buffer the operation borrowed.
///
/// The buffer comes back on success and on error alike.
pub type BufResult<T, B> = (io::Result<T>, B);

/// A buffer the kernel may read from: its first [`bytes_init`] bytes are
/// written out by write and send operations.
///
/// # Safety
///
/// * [`stable_ptr`] points to at least [`bytes_total`] bytes, of which the
///   first [`bytes_init`] are initialized.
/// * The pointer and the memory behind it stay valid and unchanged in place
///   when the value is moved (the memory lives on the heap or is `'static`),
///   until the value is dropped or handed out mutably.
///
/// [`stable_ptr`]: IoBuf::stable_ptr
/// [`bytes_init`]: IoBuf::bytes_init
/// [`bytes_total`]: IoBuf::bytes_total
pub unsafe trait IoBuf: Send + 'static {
    /// Address of the first byte.
    fn stable_ptr(&self) -> *const u8;

    /// Number of initialized bytes (what a write sends).
    fn bytes_init(&self) -> usize;

    /// Capacity in bytes (what a read may fill).
    fn bytes_total(&self) -> usize;

    /// The initialized bytes.
    fn as_init_slice(&self) -> &[u8] {
        // SAFETY: the trait contract: `stable_ptr` is valid for `bytes_init`
        // initialized bytes while `self` is borrowed.
        unsafe { std::slice::from_raw_parts(self.stable_ptr(), self.bytes_init()) }
    }

    /// Restricts an operation to `range` of this buffer, without copying.
    ///
    /// # Panics
    ///
    /// When the range ends past [`bytes_total`](IoBuf::bytes_total) or
    /// starts after it ends.
    ///
    /// ```
    /// use spargio::buf::IoBuf;
    ///
    /// let slice = vec![1u8, 2, 3, 4].slice(1..3);
    /// assert_eq!(slice.as_init_slice(), &[2, 3]);
    /// assert_eq!(slice.into_inner(), vec![1, 2, 3, 4]);
    /// ```
    fn slice(self, range: impl RangeBounds<usize>) -> Slice<Self>
    where
        Self: Sized,
    {
        Slice::new(self, range)
    }
}

/// A buffer the kernel may write into: a read fills it from its first byte,
/// up to [`bytes_total`](IoBuf::bytes_total) bytes, then calls
/// [`set_init`](IoBufMut::set_init) with the count. To read into the spare
/// capacity of a `Vec` instead, pass `vec.slice(vec.len()..)`.
///
/// # Safety
///
/// As for [`IoBuf`], plus: [`stable_mut_ptr`] is valid for writes of
/// [`bytes_total`](IoBuf::bytes_total) bytes, and [`set_init`] only ever
/// grows the initialized length up to that total.
///
/// [`stable_mut_ptr`]: IoBufMut::stable_mut_ptr
/// [`set_init`]: IoBufMut::set_init
pub unsafe trait IoBufMut: IoBuf {
    /// Address of the first byte, writable.
    fn stable_mut_ptr(&mut self) -> *mut u8;

    /// Records that the first `pos` bytes are initialized (after the kernel
    /// wrote them). Never shrinks the initialized length.
    ///
    /// # Safety
    ///
    /// The first `pos` bytes must be initialized, and `pos` must not exceed
    /// [`bytes_total`](IoBuf::bytes_total).
    unsafe fn set_init(&mut self, pos: usize);
}

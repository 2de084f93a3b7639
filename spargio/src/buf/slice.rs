//! A range of an owned buffer.

use std::ops::{Bound, RangeBounds};

use super::{IoBuf, IoBufMut};

/// A buffer restricted to `begin..end`: operations read from or write to
/// that range only. Built with [`IoBuf::slice`].
///
/// A read into a slice fills from `begin`; the buffer's own initialized
/// length grows to cover what was written.
#[derive(Debug)]
pub struct Slice<B> {
    buf: B,
    begin: usize,
    end: usize,
}

impl<B: IoBuf> Slice<B> {
    pub(super) fn new(buf: B, range: impl RangeBounds<usize>) -> Slice<B> {
        let total = buf.bytes_total();
        let begin = match range.start_bound() {
            Bound::Included(&n) => n,
            Bound::Excluded(&n) => n.checked_add(1).expect("slice start overflows"),
            Bound::Unbounded => 0,
        };
        let end = match range.end_bound() {
            Bound::Included(&n) => n.checked_add(1).expect("slice end overflows"),
            Bound::Excluded(&n) => n,
            Bound::Unbounded => total,
        };
        assert!(
            begin <= end && end <= total,
            "slice {begin}..{end} out of range for a buffer of {total} bytes"
        );
        Slice { buf, begin, end }
    }

    /// Start of the range in the underlying buffer.
    pub fn begin(&self) -> usize {
        self.begin
    }

    /// End of the range in the underlying buffer.
    pub fn end(&self) -> usize {
        self.end
    }

    /// The underlying buffer.
    pub fn get_ref(&self) -> &B {
        &self.buf
    }

    /// The underlying buffer, mutably.
    pub fn get_mut(&mut self) -> &mut B {
        &mut self.buf
    }

    /// The whole underlying buffer back.
    pub fn into_inner(self) -> B {
        self.buf
    }
}

// SAFETY: a sub-range of a buffer whose memory is stable under moves is
// itself stable; the range lies within `bytes_total` (checked in `new`),
// and the initialized prefix of the range is the part of it below the
// underlying buffer's initialized length.
unsafe impl<B: IoBuf> IoBuf for Slice<B> {
    fn stable_ptr(&self) -> *const u8 {
        self.buf.stable_ptr().wrapping_add(self.begin)
    }
    fn bytes_init(&self) -> usize {
        self.buf.bytes_init().clamp(self.begin, self.end) - self.begin
    }
    fn bytes_total(&self) -> usize {
        self.end - self.begin
    }
}

// SAFETY: writes stay within `begin..end`, inside the underlying buffer's
// total; `set_init` translates to the underlying buffer's offsets.
unsafe impl<B: IoBufMut> IoBufMut for Slice<B> {
    fn stable_mut_ptr(&mut self) -> *mut u8 {
        self.buf.stable_mut_ptr().wrapping_add(self.begin)
    }
    unsafe fn set_init(&mut self, pos: usize) {
        // The bytes below `begin` that the underlying buffer does not count
        // as initialized yet were never written: only a slice starting at
        // or below the initialized length may extend it.
        if self.buf.bytes_init() >= self.begin {
            // SAFETY: bytes `..begin` are initialized (checked above) and
            // the caller guarantees `begin..begin + pos` are; the sum is
            // within the underlying total.
            unsafe { self.buf.set_init(self.begin + pos) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slice_of_spare_capacity_extends_the_vec() {
        let mut v = Vec::with_capacity(8);
        v.extend_from_slice(b"ab");
        let mut s = v.slice(2..6);
        assert_eq!(s.bytes_init(), 0);
        assert_eq!(s.bytes_total(), 4);
        let p = s.stable_mut_ptr();
        // SAFETY: writing 3 bytes inside the slice's 4, then recording them.
        unsafe {
            std::ptr::copy_nonoverlapping(b"cde".as_ptr(), p, 3);
            s.set_init(3);
        }
        assert_eq!(s.into_inner(), b"abcde");
    }

    #[test]
    #[should_panic(expected = "out of range")]
    fn slice_past_total_panics() {
        let _ = vec![0u8; 4].slice(2..9);
    }
}

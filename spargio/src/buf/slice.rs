//! A range of an owned buffer.

use std::ops::{Bound, RangeBounds};

use super::{IoBuf, IoBufMut};

/// A buffer restricted to `begin..end`: operations read from or write to
/// that range only. Built with [`IoBuf::slice`].
///
/// A read into a slice fills from `begin`; the buffer's own initialized
/// length grows to cover what was written.
///
/// The range is checked when the slice is made, and again, against the
/// buffer as it is *now*, every time the runtime asks for it: safe code can
/// shrink the buffer through [`get_mut`](Slice::get_mut), and the kernel
/// must never be told a range past the allocation. A range the buffer no
/// longer covers is cut to what it does cover (possibly nothing).
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

impl<B: IoBuf> Slice<B> {
    /// The range as the underlying buffer covers it right now:
    /// `begin..end` cut to its current total (see the type's docs).
    fn live_range(&self) -> (usize, usize) {
        let total = self.buf.bytes_total();
        (self.begin.min(total), self.end.min(total))
    }
}

// SAFETY: a sub-range of a buffer whose memory is stable under moves is
// itself stable; the range is recomputed against the buffer's *current*
// `bytes_total` on every call (`live_range`), so it never extends past the
// allocation even after safe code shrank the buffer through `get_mut`; the
// initialized prefix of the range is the part of it below the underlying
// buffer's initialized length.
unsafe impl<B: IoBuf> IoBuf for Slice<B> {
    fn stable_ptr(&self) -> *const u8 {
        self.buf.stable_ptr().wrapping_add(self.live_range().0)
    }
    fn bytes_init(&self) -> usize {
        let (begin, end) = self.live_range();
        self.buf.bytes_init().clamp(begin, end) - begin
    }
    fn bytes_total(&self) -> usize {
        let (begin, end) = self.live_range();
        end - begin
    }
}

// SAFETY: writes stay within the live range, inside the underlying
// buffer's current total; `set_init` translates to the underlying buffer's
// offsets and never past that total.
unsafe impl<B: IoBufMut> IoBufMut for Slice<B> {
    fn stable_mut_ptr(&mut self) -> *mut u8 {
        let begin = self.live_range().0;
        self.buf.stable_mut_ptr().wrapping_add(begin)
    }
    unsafe fn set_init(&mut self, pos: usize) {
        let (begin, end) = self.live_range();
        // The bytes below `begin` that the underlying buffer does not count
        // as initialized yet were never written: only a slice starting at
        // or below the initialized length may extend it. And never past the
        // range (the caller's `pos` is at most `bytes_total`, but a buffer
        // shrunk since must not be trusted to agree).
        if self.buf.bytes_init() >= begin && begin + pos <= end {
            // SAFETY: bytes `..begin` are initialized (checked above) and
            // the caller guarantees `begin..begin + pos` are; the sum is
            // within the underlying buffer's current total (checked above).
            unsafe { self.buf.set_init(begin + pos) };
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
    fn a_slice_never_reports_more_than_a_shrunk_buffer_holds() {
        let mut s = Vec::<u8>::with_capacity(65_536).slice(..);
        assert_eq!(s.bytes_total(), 65_536);
        s.get_mut().shrink_to(16);
        let cap = s.get_ref().capacity();
        assert!(cap < 65_536);
        assert_eq!(s.bytes_total(), cap, "the range follows the allocation");
        let mut t = vec![1u8; 64].slice(32..64);
        t.get_mut().truncate(8);
        t.get_mut().shrink_to_fit();
        assert_eq!(t.bytes_total(), 0, "nothing of the range is left");
        assert_eq!(t.bytes_init(), 0);
        // SAFETY: zero bytes claimed.
        unsafe { t.set_init(0) };
        assert_eq!(t.get_ref().len(), 8);
    }

    #[test]
    #[should_panic(expected = "out of range")]
    fn slice_past_total_panics() {
        let _ = vec![0u8; 4].slice(2..9);
    }
}

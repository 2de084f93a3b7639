//! `IoBuf`/`IoBufMut` for the standard heap buffers, `bytes`, and `'static`
//! slices.

use super::{IoBuf, IoBufMut};

// SAFETY: a Vec's heap block does not move when the Vec is moved; `len`
// bytes are initialized and `capacity` are allocated.
unsafe impl IoBuf for Vec<u8> {
    fn stable_ptr(&self) -> *const u8 {
        self.as_ptr()
    }
    fn bytes_init(&self) -> usize {
        self.len()
    }
    fn bytes_total(&self) -> usize {
        self.capacity()
    }
}

// SAFETY: as above; `set_len` is only raised to initialized bytes within
// capacity (the caller's contract).
unsafe impl IoBufMut for Vec<u8> {
    fn stable_mut_ptr(&mut self) -> *mut u8 {
        self.as_mut_ptr()
    }
    unsafe fn set_init(&mut self, pos: usize) {
        if self.len() < pos {
            // SAFETY: the caller guarantees `pos <= capacity` and that the
            // first `pos` bytes are initialized.
            unsafe { self.set_len(pos) };
        }
    }
}

/// `IoBuf` for a type whose bytes are all initialized and whose length is
/// its capacity.
macro_rules! fully_initialized {
    ($($ty:ty: $why:literal;)*) => {$(
        #[doc = $why]
        // SAFETY: see the line above: the memory does not move with the
        // value, and every byte of `len` is initialized.
        unsafe impl IoBuf for $ty {
            fn stable_ptr(&self) -> *const u8 {
                self.as_ptr()
            }
            fn bytes_init(&self) -> usize {
                self.len()
            }
            fn bytes_total(&self) -> usize {
                self.len()
            }
        }
    )*};
}

fully_initialized! {
    Box<[u8]>: "A boxed slice is a fixed, fully initialized heap block.";
    &'static [u8]: "`'static` data never moves nor goes away.";
    &'static str: "`'static` data never moves nor goes away.";
    bytes::Bytes: "`Bytes` points to an immutable, reference-counted heap block (or static data) that moving the handle does not move.";
}

// SAFETY: every byte is initialized already; nothing to record.
unsafe impl IoBufMut for Box<[u8]> {
    fn stable_mut_ptr(&mut self) -> *mut u8 {
        self.as_mut_ptr()
    }
    unsafe fn set_init(&mut self, _pos: usize) {}
}

// SAFETY: `BytesMut` owns a heap block that moving the handle does not move;
// `len` bytes are initialized and `capacity` are allocated.
unsafe impl IoBuf for bytes::BytesMut {
    fn stable_ptr(&self) -> *const u8 {
        self.as_ptr()
    }
    fn bytes_init(&self) -> usize {
        self.len()
    }
    fn bytes_total(&self) -> usize {
        self.capacity()
    }
}

// SAFETY: as above; `set_len` is only raised within capacity.
unsafe impl IoBufMut for bytes::BytesMut {
    fn stable_mut_ptr(&mut self) -> *mut u8 {
        self.as_mut_ptr()
    }
    unsafe fn set_init(&mut self, pos: usize) {
        if self.len() < pos {
            // SAFETY: the caller guarantees `pos <= capacity` and that the
            // first `pos` bytes are initialized.
            unsafe { self.set_len(pos) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vec_reports_len_and_capacity() {
        let mut v = Vec::with_capacity(16);
        v.extend_from_slice(b"abc");
        assert_eq!(v.bytes_init(), 3);
        assert!(v.bytes_total() >= 16);
        // SAFETY: the first 3 bytes are initialized; 2 <= capacity.
        unsafe { v.set_init(2) };
        assert_eq!(v.len(), 3, "set_init never shrinks");
    }

    #[test]
    fn bytes_mut_grows_on_set_init() {
        let mut b = bytes::BytesMut::with_capacity(8);
        let p = b.stable_mut_ptr();
        // SAFETY: writing 4 bytes inside the 8-byte capacity, then recording them.
        unsafe {
            std::ptr::copy_nonoverlapping(b"wxyz".as_ptr(), p, 4);
            b.set_init(4);
        }
        assert_eq!(&b[..], b"wxyz");
    }
}

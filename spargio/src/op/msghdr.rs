//! The `msghdr` block shared by `sendmsg`/`recvmsg` operations.

use std::mem::size_of;

/// Control-message space a [`MsgBlock`] carries inline: `()` for none,
/// or a byte buffer aligned for `cmsghdr` (`udp_msg`).
///
/// # Safety
///
/// All-zero bytes must be a valid value of the type, and the type must
/// own no pointers (the block is built with `mem::zeroed` and sent to
/// the kernel's side as plain memory).
pub(crate) unsafe trait ControlSpace: Send + Sized {}

// SAFETY: a zero-sized type; no bytes, no pointers.
unsafe impl ControlSpace for () {}

/// A `msghdr`, its one `iovec`, its address and (for `C` other than
/// `()`) its control buffer, in one heap block so the pointers between
/// them stay valid when the operation moves.
pub(crate) struct MsgBlock<C: ControlSpace = ()> {
    pub(crate) hdr: libc::msghdr,
    iov: libc::iovec,
    addr: libc::sockaddr_storage,
    pub(crate) control: C,
}

// SAFETY: the raw pointers inside point only into this same block (and to
// the operation's buffer, owned alongside it); nothing is shared with
// another thread while the kernel uses it; `C` is `Send`.
unsafe impl<C: ControlSpace> Send for MsgBlock<C> {}

impl<C: ControlSpace> MsgBlock<C> {
    /// A block for `len` bytes at `data`, with `addr` (or room for the
    /// kernel to write the peer's address when `addr` is `None`), and no
    /// control messages.
    pub(crate) fn new(
        data: *mut u8,
        len: usize,
        addr: Option<&socket2::SockAddr>,
    ) -> Box<MsgBlock<C>> {
        // SAFETY: all-zero is a valid `msghdr`, `iovec`,
        // `sockaddr_storage` (null pointers, zero lengths, family 0) and
        // `C` (`ControlSpace`'s contract).
        let mut block: Box<MsgBlock<C>> = Box::new(unsafe { std::mem::zeroed() });
        block.iov = libc::iovec {
            iov_base: data.cast(),
            iov_len: len,
        };
        let storage = size_of::<libc::sockaddr_storage>();
        let addr_len = match addr {
            Some(a) => {
                let n = (a.len() as usize).min(storage);
                // SAFETY: `a` points to at least `n` valid bytes (its own
                // length, clamped); the destination is a whole
                // `sockaddr_storage`, at least `n` bytes.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        a.as_ptr().cast::<u8>(),
                        (&mut block.addr as *mut libc::sockaddr_storage).cast::<u8>(),
                        n,
                    )
                };
                n
            }
            None => storage,
        };
        block.hdr.msg_name = (&mut block.addr as *mut libc::sockaddr_storage).cast();
        block.hdr.msg_namelen = addr_len as libc::socklen_t;
        block.hdr.msg_iov = &mut block.iov;
        block.hdr.msg_iovlen = 1;
        block
    }

    /// The iovec's length: what the kernel may read or write.
    pub(crate) fn iov_len(&self) -> usize {
        self.iov.iov_len
    }

    /// The address the kernel wrote (after a `recvmsg`).
    pub(crate) fn peer(&self) -> socket2::SockAddr {
        let mut storage = socket2::SockAddrStorage::zeroed();
        let len = (self.hdr.msg_namelen as usize).min(size_of::<libc::sockaddr_storage>());
        // SAFETY: copies `len` bytes between two `sockaddr_storage`-sized
        // plain-data blocks (`len` is clamped to that size).
        unsafe {
            std::ptr::copy_nonoverlapping(
                (&self.addr as *const libc::sockaddr_storage).cast::<u8>(),
                (&mut storage as *mut socket2::SockAddrStorage).cast::<u8>(),
                len,
            )
        };
        // SAFETY: the kernel wrote an address of `len` bytes into storage
        // that was zeroed first, so every byte is initialized.
        unsafe { socket2::SockAddr::new(storage, len as libc::socklen_t) }
    }
}

//! The `msghdr` block shared by `sendmsg`/`recvmsg` operations.

/// A `msghdr`, its one `iovec`, and its address, in one heap block so the
/// pointers between them stay valid when the operation moves.
pub(crate) struct MsgBlock {
    pub(crate) hdr: libc::msghdr,
    iov: libc::iovec,
    addr: libc::sockaddr_storage,
}

// SAFETY: the raw pointers inside point only into this same block (and to
// the operation's buffer, owned alongside it); nothing is shared with
// another thread while the kernel uses it.
unsafe impl Send for MsgBlock {}

impl MsgBlock {
    /// A block for `len` bytes at `data`, with `addr` (or room for the
    /// kernel to write the peer's address when `addr` is `None`).
    pub(crate) fn new(
        data: *mut u8,
        len: usize,
        addr: Option<&socket2::SockAddr>,
    ) -> Box<MsgBlock> {
        // SAFETY: all-zero is a valid `msghdr`, `iovec` and
        // `sockaddr_storage` (null pointers, zero lengths, family 0).
        let mut block: Box<MsgBlock> = Box::new(unsafe { std::mem::zeroed() });
        block.iov = libc::iovec {
            iov_base: data.cast(),
            iov_len: len,
        };
        let addr_len = match addr {
            Some(a) => {
                let n = a.len() as usize;
                // SAFETY: `a` points to `n <= sizeof(sockaddr_storage)` valid
                // bytes; the destination is a whole `sockaddr_storage`.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        a.as_ptr().cast::<u8>(),
                        (&mut block.addr as *mut libc::sockaddr_storage).cast::<u8>(),
                        n,
                    )
                };
                n
            }
            None => std::mem::size_of::<libc::sockaddr_storage>(),
        };
        block.hdr.msg_name = (&mut block.addr as *mut libc::sockaddr_storage).cast();
        block.hdr.msg_namelen = addr_len as libc::socklen_t;
        block.hdr.msg_iov = &mut block.iov;
        block.hdr.msg_iovlen = 1;
        block
    }

    /// The address the kernel wrote (after a `recvmsg`).
    pub(crate) fn peer(&self) -> socket2::SockAddr {
        let mut storage = socket2::SockAddrStorage::zeroed();
        let len =
            (self.hdr.msg_namelen as usize).min(std::mem::size_of::<libc::sockaddr_storage>());
        // SAFETY: copies `len` bytes between two `sockaddr_storage`-sized
        // plain-data blocks.
        unsafe {
            std::ptr::copy_nonoverlapping(
                (&self.addr as *const libc::sockaddr_storage).cast::<u8>(),
                (&mut storage as *mut socket2::SockAddrStorage).cast::<u8>(),
                len,
            )
        };
        // SAFETY: the kernel wrote a valid address of `len` bytes.
        unsafe { socket2::SockAddr::new(storage, len as libc::socklen_t) }
    }
}

//! `IORING_OP_SENDMSG` / `IORING_OP_RECVMSG` for UDP with control
//! messages: the GSO segment size (`UDP_SEGMENT`) and the TOS / traffic
//! class byte on a send; the GRO segment size (`UDP_GRO`), the TOS /
//! traffic class byte and the local destination address (`IP_PKTINFO`,
//! `IPV6_PKTINFO`) on a receive.
//!
//! Everything the kernel follows — the `msghdr`, its one `iovec`, the
//! peer's `sockaddr` and the control buffer — lives in one heap block
//! ([`UdpMsgBlock`]) owned by the operation next to the data buffer, so a
//! future dropped mid-flight hands all of it to the op table until the
//! completion. That is the same single allocation per operation as
//! `sendmsg.rs` and `recvmsg.rs` make; the control buffer is inline in it.
//!
//! The lengths the kernel sees never exceed the allocations: the iovec
//! covers the buffer's initialized bytes (send) or its capacity (receive),
//! and `msg_controllen` is at most [`CONTROL_LEN`], the control buffer's
//! size. After a receive, the written-back `msg_controllen` is clamped to
//! that size again before any control message is read, and each message's
//! payload is read only when it lies wholly inside what was written.

use std::mem::size_of;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use io_uring::{opcode, squeue, types};

use super::{Completion, OpKind, SharedFd};
use crate::buf::{BufResult, IoBuf, IoBufMut};

/// `CMSG_SPACE(len)`: a control message's header and payload, padded.
const fn space(len: usize) -> usize {
    // SAFETY: `CMSG_SPACE` is arithmetic on its argument; it reads no
    // memory.
    unsafe { libc::CMSG_SPACE(len as libc::c_uint) as usize }
}

/// `CMSG_LEN(len)`: a control message's header and payload, unpadded.
fn cmsg_len(len: usize) -> usize {
    // SAFETY: `CMSG_LEN` is arithmetic on its argument; it reads no memory.
    unsafe { libc::CMSG_LEN(len as libc::c_uint) as usize }
}

/// What a receive asks for, at most: `UDP_GRO` (an int), `IP_TOS` (a
/// byte, or an int on some kernels) and `IPV6_TCLASS` (an int), and both
/// families' pktinfo (a dual-stack socket can report either).
const RECV_NEEDS: usize = space(size_of::<libc::c_int>())
    + space(size_of::<libc::c_int>())
    + space(size_of::<libc::c_int>())
    + space(size_of::<libc::in_pktinfo>())
    + space(size_of::<libc::in6_pktinfo>());

/// What a send carries, at most: `UDP_SEGMENT` (a u16) and one TOS int.
const SEND_NEEDS: usize = space(size_of::<u16>()) + space(size_of::<libc::c_int>());

/// Size of the control buffer: what we ask for, plus room for a timestamp
/// the caller may have turned on. Anything beyond is cut by the kernel
/// (`MSG_CTRUNC`) and treated as absent.
pub(crate) const CONTROL_LEN: usize = 256;

const _: () = assert!(CONTROL_LEN >= RECV_NEEDS && CONTROL_LEN >= SEND_NEEDS);

/// The control buffer, aligned for `cmsghdr` (the zero-length array gives
/// the alignment without taking space).
#[repr(C)]
struct Control {
    _align: [libc::cmsghdr; 0],
    bytes: [u8; CONTROL_LEN],
}

/// Which IP level carries the TOS byte of a send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Tos {
    /// `IPPROTO_IP` / `IP_TOS` (an IPv4 or v4-mapped destination).
    V4(u8),
    /// `IPPROTO_IPV6` / `IPV6_TCLASS`.
    V6(u8),
}

/// The control messages a send attaches.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct SendCmsgs {
    /// `UDP_SEGMENT`: the kernel splits the buffer into datagrams of this
    /// size (the last may be shorter).
    pub(crate) segment_size: Option<u16>,
    /// The TOS / traffic class byte.
    pub(crate) tos: Option<Tos>,
}

/// The control messages a receive found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct RecvCmsgs {
    /// `UDP_GRO`: the size of the datagrams coalesced into the buffer.
    pub(crate) gro_segment: Option<usize>,
    /// The TOS / traffic class byte.
    pub(crate) tos: Option<u8>,
    /// The local address the datagram was sent to.
    pub(crate) dst_ip: Option<IpAddr>,
    /// The kernel had more control data than fit (`MSG_CTRUNC`).
    pub(crate) truncated: bool,
}

/// What a receive produced.
#[derive(Debug)]
pub(crate) struct RecvMsgOut {
    /// Bytes written into the buffer.
    pub(crate) len: usize,
    /// The sender.
    pub(crate) peer: socket2::SockAddr,
    /// The control messages.
    pub(crate) cmsgs: RecvCmsgs,
}

// ===== impl UdpMsgBlock =====

/// A `msghdr`, its one `iovec`, its address and its control buffer in one
/// heap block, so the pointers between them stay valid when the operation
/// moves.
pub(crate) struct UdpMsgBlock {
    hdr: libc::msghdr,
    iov: libc::iovec,
    addr: libc::sockaddr_storage,
    control: Control,
}

// SAFETY: the raw pointers inside point only into this same block (and to
// the operation's buffer, owned alongside it); nothing is shared with
// another thread while the kernel uses it.
unsafe impl Send for UdpMsgBlock {}

impl UdpMsgBlock {
    /// A block for `len` bytes at `data`, with `addr` (or room for the
    /// kernel to write the peer's address when `addr` is `None`), and no
    /// control messages yet.
    fn new(data: *mut u8, len: usize, addr: Option<&socket2::SockAddr>) -> Box<UdpMsgBlock> {
        // SAFETY: all-zero is a valid `msghdr`, `iovec`, `sockaddr_storage`
        // and byte array (null pointers, zero lengths, family 0).
        let mut block: Box<UdpMsgBlock> = Box::new(unsafe { std::mem::zeroed() });
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

    /// Writes one control message at byte `at` of the control buffer;
    /// returns where the next one starts.
    fn put(&mut self, at: usize, level: libc::c_int, ty: libc::c_int, data: &[u8]) -> usize {
        let end = at + space(data.len());
        // The callers' messages are constants whose total is checked
        // against the buffer at compile time (`SEND_NEEDS`); this keeps
        // the unsafe write below in bounds whatever a caller does.
        assert!(end <= CONTROL_LEN, "control messages overflow the buffer");
        let base = self.control.bytes.as_mut_ptr();
        // SAFETY: `at..end` lies inside the control buffer (checked
        // above); `at` is a sum of `CMSG_SPACE`s, multiples of the
        // `cmsghdr` alignment, from a base aligned for `cmsghdr`
        // (`Control`), so the header write is aligned; `CMSG_DATA` is
        // `CMSG_LEN(0)` bytes in, and the payload ends before `end`.
        unsafe {
            let cmsg = base.add(at).cast::<libc::cmsghdr>();
            (*cmsg).cmsg_len = cmsg_len(data.len()) as _;
            (*cmsg).cmsg_level = level;
            (*cmsg).cmsg_type = ty;
            std::ptr::copy_nonoverlapping(data.as_ptr(), libc::CMSG_DATA(cmsg), data.len());
        }
        end
    }

    /// Attaches a send's control messages (none: no control buffer).
    fn encode(&mut self, cmsgs: SendCmsgs) {
        let mut used = 0;
        if let Some(size) = cmsgs.segment_size {
            used = self.put(used, libc::SOL_UDP, libc::UDP_SEGMENT, &size.to_ne_bytes());
        }
        if let Some(tos) = cmsgs.tos {
            let (level, ty, byte) = match tos {
                Tos::V4(b) => (libc::IPPROTO_IP, libc::IP_TOS, b),
                Tos::V6(b) => (libc::IPPROTO_IPV6, libc::IPV6_TCLASS, b),
            };
            let value = libc::c_int::from(byte);
            used = self.put(used, level, ty, &value.to_ne_bytes());
        }
        if used > 0 {
            self.hdr.msg_control = self.control.bytes.as_mut_ptr().cast();
            self.hdr.msg_controllen = used as _;
        }
    }

    /// Offers the whole control buffer to a receive.
    fn offer_control(&mut self) {
        self.hdr.msg_control = self.control.bytes.as_mut_ptr().cast();
        self.hdr.msg_controllen = CONTROL_LEN as _;
    }

    /// The address the kernel wrote (after a receive).
    fn peer(&self) -> socket2::SockAddr {
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

    /// Reads the control messages a receive left (module docs: bounds).
    fn decode(&mut self) -> RecvCmsgs {
        let mut out = RecvCmsgs {
            truncated: self.hdr.msg_flags & libc::MSG_CTRUNC != 0,
            ..RecvCmsgs::default()
        };
        if self.hdr.msg_control.is_null() {
            return out;
        }
        // The kernel wrote back how much it used; never trust more than
        // the buffer holds.
        #[allow(clippy::unnecessary_cast)] // `socklen_t` on some libcs
        let written = (self.hdr.msg_controllen as usize).min(CONTROL_LEN);
        self.hdr.msg_controllen = written as _;
        let base = self.control.bytes.as_ptr() as usize;
        // SAFETY: `msg_control`/`msg_controllen` describe this block's own
        // control buffer (length clamped above); `CMSG_FIRSTHDR` returns
        // null unless a whole header fits in it.
        let mut cmsg = unsafe { libc::CMSG_FIRSTHDR(&self.hdr) };
        while !cmsg.is_null() {
            let offset = cmsg as usize - base;
            // SAFETY: `CMSG_FIRSTHDR`/`CMSG_NXTHDR` only return headers
            // lying wholly inside the first `written` bytes of the buffer,
            // aligned for `cmsghdr`.
            let (level, ty, len) = unsafe {
                (
                    (*cmsg).cmsg_level,
                    (*cmsg).cmsg_type,
                    (*cmsg).cmsg_len as usize,
                )
            };
            // The payload bytes this message really has: its own length,
            // cut to what was written (a message the kernel truncated
            // says so in its own length).
            let avail = len.min(written - offset).saturating_sub(cmsg_len(0));
            let payload = Payload { cmsg, avail };
            match (level, ty) {
                (libc::SOL_UDP, libc::UDP_GRO) => {
                    out.gro_segment = payload
                        .read::<libc::c_int>()
                        .and_then(|s| usize::try_from(s).ok())
                        .filter(|&s| s > 0);
                }
                (libc::IPPROTO_IP, libc::IP_TOS) => {
                    // A byte on Linux; an int where a kernel sends one.
                    out.tos = if avail >= size_of::<libc::c_int>() {
                        payload.read::<libc::c_int>().map(|t| t as u8)
                    } else {
                        payload.read::<u8>()
                    };
                }
                (libc::IPPROTO_IPV6, libc::IPV6_TCLASS) => {
                    out.tos = payload.read::<libc::c_int>().map(|t| t as u8);
                }
                (libc::IPPROTO_IP, libc::IP_PKTINFO) => {
                    if let Some(info) = payload.read::<libc::in_pktinfo>() {
                        let ip = Ipv4Addr::from(u32::from_be(info.ipi_addr.s_addr));
                        out.dst_ip = Some(IpAddr::V4(ip));
                    }
                }
                (libc::IPPROTO_IPV6, libc::IPV6_PKTINFO) => {
                    if let Some(info) = payload.read::<libc::in6_pktinfo>() {
                        let ip = Ipv6Addr::from(info.ipi6_addr.s6_addr);
                        out.dst_ip = Some(IpAddr::V6(ip));
                    }
                }
                _ => {}
            }
            // SAFETY: `cmsg` is a header inside the buffer `self.hdr`
            // describes; `CMSG_NXTHDR` returns the next one only if it
            // fits in `msg_controllen`, else null.
            cmsg = unsafe { libc::CMSG_NXTHDR(&self.hdr, cmsg) };
        }
        out
    }
}

/// Plain-data types a control message payload may be read as: every bit
/// pattern is a valid value (integers and structs of integers only).
///
/// # Safety
///
/// Implement only for types with no invalid bit patterns and no padding
/// that must be initialized.
unsafe trait Pod: Copy {}
// SAFETY: integers.
unsafe impl Pod for u8 {}
// SAFETY: integers.
unsafe impl Pod for libc::c_int {}
// SAFETY: an int and two `in_addr`s (each a u32).
unsafe impl Pod for libc::in_pktinfo {}
// SAFETY: a 16-byte array and an unsigned int.
unsafe impl Pod for libc::in6_pktinfo {}

/// One control message's payload: `avail` bytes from `CMSG_DATA(cmsg)`,
/// all inside the written part of the control buffer.
struct Payload {
    cmsg: *const libc::cmsghdr,
    avail: usize,
}

impl Payload {
    /// The payload as a `T`, if it has that many bytes.
    fn read<T: Pod>(&self) -> Option<T> {
        if self.avail < size_of::<T>() {
            return None;
        }
        // SAFETY: `CMSG_DATA(cmsg)` starts `avail >= size_of::<T>()` bytes
        // that lie inside the control buffer (`decode` counted them
        // against its written length); `T: Pod` accepts any bytes; the
        // read is unaligned because payloads need not be aligned for `T`.
        Some(unsafe { std::ptr::read_unaligned(libc::CMSG_DATA(self.cmsg).cast::<T>()) })
    }
}

// ===== impl UdpSendMsg =====

/// Sends the buffer's bytes to an address with control messages: one
/// datagram, or (with a segment size) several the kernel cuts apart.
pub(crate) struct UdpSendMsg<B> {
    fd: SharedFd,
    buf: B,
    msg: Box<UdpMsgBlock>,
}

impl<B: IoBuf> UdpSendMsg<B> {
    pub(crate) fn new(
        fd: SharedFd,
        buf: B,
        addr: &socket2::SockAddr,
        cmsgs: SendCmsgs,
    ) -> UdpSendMsg<B> {
        // The kernel only reads through this pointer (a send).
        let mut msg = UdpMsgBlock::new(buf.stable_ptr().cast_mut(), buf.bytes_init(), Some(addr));
        msg.encode(cmsgs);
        UdpSendMsg { fd, buf, msg }
    }
}

// SAFETY: the SQE points at `msg` (heap), whose iovec points into `buf`'s
// heap memory (within its initialized length) and whose name and control
// pointers point into itself; all owned by this value.
unsafe impl<B: IoBuf> OpKind for UdpSendMsg<B> {
    type Output = BufResult<usize, B>;

    fn build(&mut self) -> squeue::Entry {
        opcode::SendMsg::new(types::Fd(self.fd.raw()), &self.msg.hdr)
            .flags(libc::MSG_NOSIGNAL as u32)
            .build()
    }

    fn complete(self, done: Completion) -> BufResult<usize, B> {
        (done.result.map(|n| n as usize), self.buf)
    }
}

// ===== impl UdpRecvMsg =====

/// Receives one datagram (or a GRO-coalesced run of them) into the buffer
/// from its first byte, with the sender's address and control messages.
pub(crate) struct UdpRecvMsg<B> {
    fd: SharedFd,
    buf: B,
    msg: Box<UdpMsgBlock>,
}

impl<B: IoBufMut> UdpRecvMsg<B> {
    pub(crate) fn new(fd: SharedFd, mut buf: B) -> UdpRecvMsg<B> {
        let mut msg = UdpMsgBlock::new(buf.stable_mut_ptr(), buf.bytes_total(), None);
        msg.offer_control();
        UdpRecvMsg { fd, buf, msg }
    }
}

// SAFETY: the SQE points at `msg` (heap), whose iovec points into `buf`'s
// heap memory (within its capacity) and whose name and control pointers
// point into itself; all owned by this value.
unsafe impl<B: IoBufMut> OpKind for UdpRecvMsg<B> {
    type Output = BufResult<RecvMsgOut, B>;

    fn build(&mut self) -> squeue::Entry {
        opcode::RecvMsg::new(types::Fd(self.fd.raw()), &mut self.msg.hdr).build()
    }

    fn complete(mut self, done: Completion) -> BufResult<RecvMsgOut, B> {
        match done.result {
            Ok(n) => {
                // Without `MSG_TRUNC` in the flags the kernel returns at
                // most the iovec's length; the `min` keeps `set_init`'s
                // bound true whatever it returns.
                let len = (n as usize).min(self.msg.iov.iov_len);
                // SAFETY: the kernel initialized the first `len` bytes, at
                // most the length we passed (`bytes_total`).
                unsafe { self.buf.set_init(len) };
                let out = RecvMsgOut {
                    len,
                    peer: self.msg.peer(),
                    cmsgs: self.msg.decode(),
                };
                (Ok(out), self.buf)
            }
            Err(e) => (Err(e), self.buf),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recv_block() -> Box<UdpMsgBlock> {
        let mut block = UdpMsgBlock::new(std::ptr::null_mut(), 0, None);
        block.offer_control();
        block
    }

    /// Lays out messages as the kernel would, then says it wrote `written`
    /// bytes.
    fn kernel_writes(block: &mut UdpMsgBlock, msgs: &[(i32, i32, &[u8])], written: usize) {
        let mut at = 0;
        for (level, ty, data) in msgs {
            at = block.put(at, *level, *ty, data);
        }
        block.hdr.msg_controllen = written as _;
    }

    #[test]
    fn encodes_segment_then_tos() {
        let addr = socket2::SockAddr::from("127.0.0.1:9".parse::<std::net::SocketAddr>().unwrap());
        let mut block = UdpMsgBlock::new(std::ptr::null_mut(), 0, Some(&addr));
        block.encode(SendCmsgs {
            segment_size: Some(1200),
            tos: Some(Tos::V4(2)),
        });
        assert_eq!(block.hdr.msg_controllen, SEND_NEEDS);
        // Read back through the receive-side parser's walk.
        let mut cmsg = first_header(&block.hdr);
        let mut seen = Vec::new();
        while !cmsg.is_null() {
            // SAFETY: as in `decode`.
            let (level, ty) = unsafe { ((*cmsg).cmsg_level, (*cmsg).cmsg_type) };
            seen.push((level, ty));
            // SAFETY: as in `decode`.
            cmsg = unsafe { libc::CMSG_NXTHDR(&block.hdr, cmsg) };
        }
        assert_eq!(
            seen,
            vec![
                (libc::SOL_UDP, libc::UDP_SEGMENT),
                (libc::IPPROTO_IP, libc::IP_TOS)
            ]
        );
    }

    fn first_header(hdr: &libc::msghdr) -> *mut libc::cmsghdr {
        // SAFETY: `hdr` describes a live control buffer.
        unsafe { libc::CMSG_FIRSTHDR(hdr) }
    }

    #[test]
    fn no_control_messages_means_no_control_buffer() {
        let addr = socket2::SockAddr::from("[::1]:9".parse::<std::net::SocketAddr>().unwrap());
        let mut block = UdpMsgBlock::new(std::ptr::null_mut(), 0, Some(&addr));
        block.encode(SendCmsgs::default());
        assert!(block.hdr.msg_control.is_null());
        assert_eq!(block.hdr.msg_controllen, 0);
    }

    #[test]
    fn decodes_gro_tos_and_pktinfo() {
        let mut block = recv_block();
        let pktinfo = libc::in_pktinfo {
            ipi_ifindex: 1,
            ipi_spec_dst: libc::in_addr { s_addr: 0 },
            ipi_addr: libc::in_addr {
                s_addr: u32::from(Ipv4Addr::new(127, 0, 0, 1)).to_be(),
            },
        };
        // SAFETY: reading a plain-data struct as bytes.
        let info: [u8; size_of::<libc::in_pktinfo>()] = unsafe { std::mem::transmute(pktinfo) };
        let msgs: [(i32, i32, &[u8]); 3] = [
            (libc::SOL_UDP, libc::UDP_GRO, &1200i32.to_ne_bytes()),
            (libc::IPPROTO_IP, libc::IP_TOS, &[0xb6]),
            (libc::IPPROTO_IP, libc::IP_PKTINFO, &info),
        ];
        let total = space(4) + space(1) + space(info.len());
        kernel_writes(&mut block, &msgs, total);
        let got = block.decode();
        assert_eq!(got.gro_segment, Some(1200));
        assert_eq!(got.tos, Some(0xb6));
        assert_eq!(got.dst_ip, Some(IpAddr::V4(Ipv4Addr::LOCALHOST)));
        assert!(!got.truncated);
    }

    #[test]
    fn decodes_ipv6_tclass_and_pktinfo() {
        let mut block = recv_block();
        let pktinfo = libc::in6_pktinfo {
            ipi6_addr: libc::in6_addr {
                s6_addr: Ipv6Addr::LOCALHOST.octets(),
            },
            ipi6_ifindex: 1,
        };
        // SAFETY: reading a plain-data struct as bytes.
        let info: [u8; size_of::<libc::in6_pktinfo>()] = unsafe { std::mem::transmute(pktinfo) };
        let msgs: [(i32, i32, &[u8]); 2] = [
            (libc::IPPROTO_IPV6, libc::IPV6_TCLASS, &1i32.to_ne_bytes()),
            (libc::IPPROTO_IPV6, libc::IPV6_PKTINFO, &info),
        ];
        kernel_writes(&mut block, &msgs, space(4) + space(info.len()));
        let got = block.decode();
        assert_eq!(got.gro_segment, None);
        assert_eq!(got.tos, Some(1));
        assert_eq!(got.dst_ip, Some(IpAddr::V6(Ipv6Addr::LOCALHOST)));
    }

    #[test]
    fn a_truncated_message_counts_as_absent_and_the_rest_is_kept() {
        let mut block = recv_block();
        let msgs: [(i32, i32, &[u8]); 2] = [
            (libc::IPPROTO_IP, libc::IP_TOS, &[2]),
            (libc::SOL_UDP, libc::UDP_GRO, &1200i32.to_ne_bytes()),
        ];
        // The kernel ran out of room inside the GRO message: it cuts the
        // message's own length to what fit, and flags the header.
        kernel_writes(&mut block, &msgs, space(1) + cmsg_len(2));
        let at = space(1);
        let cut = block.control.bytes.as_mut_ptr().wrapping_add(at);
        // SAFETY: `at` is inside the buffer and aligned for `cmsghdr`.
        unsafe { (*cut.cast::<libc::cmsghdr>()).cmsg_len = cmsg_len(2) as _ };
        block.hdr.msg_flags = libc::MSG_CTRUNC;
        let got = block.decode();
        assert!(got.truncated);
        assert_eq!(got.tos, Some(2));
        assert_eq!(got.gro_segment, None, "a cut GRO message is not read");
    }

    #[test]
    fn a_written_length_past_the_buffer_is_clamped() {
        let mut block = recv_block();
        let msgs: [(i32, i32, &[u8]); 1] = [(libc::SOL_UDP, libc::UDP_GRO, &1452i32.to_ne_bytes())];
        kernel_writes(&mut block, &msgs, CONTROL_LEN * 4);
        let got = block.decode();
        assert_eq!(got.gro_segment, Some(1452));
        assert_eq!(block.hdr.msg_controllen, CONTROL_LEN);
    }

    #[test]
    fn a_message_claiming_more_than_was_written_is_cut() {
        let mut block = recv_block();
        let msgs: [(i32, i32, &[u8]); 1] = [(libc::SOL_UDP, libc::UDP_GRO, &1452i32.to_ne_bytes())];
        // Says 4 payload bytes, but only 2 of them were written.
        kernel_writes(&mut block, &msgs, cmsg_len(2));
        assert_eq!(block.decode().gro_segment, None);
    }
}

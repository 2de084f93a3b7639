//! The heap block a UDP `sendmsg`/`recvmsg` lends the kernel, and the
//! control messages written into it (send) or read out of it (receive).

use std::mem::size_of;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::op::msghdr::{ControlSpace, MsgBlock};

/// `CMSG_SPACE(len)`: a control message's header and payload, padded.
pub(super) const fn space(len: usize) -> usize {
    // SAFETY: `CMSG_SPACE` is arithmetic on its argument; it reads no
    // memory.
    unsafe { libc::CMSG_SPACE(len as libc::c_uint) as usize }
}

/// `CMSG_LEN(len)`: a control message's header and payload, unpadded.
pub(super) fn cmsg_len(len: usize) -> usize {
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
pub(super) const SEND_NEEDS: usize = space(size_of::<u16>()) + space(size_of::<libc::c_int>());

/// Size of the control buffer: what we ask for, plus room for a timestamp
/// the caller may have turned on. Anything beyond is cut by the kernel
/// (`MSG_CTRUNC`) and treated as absent.
pub(super) const CONTROL_LEN: usize = 256;

const _: () = assert!(CONTROL_LEN >= RECV_NEEDS && CONTROL_LEN >= SEND_NEEDS);

/// The control buffer, aligned for `cmsghdr` (the zero-length array gives
/// the alignment without taking space).
#[repr(C)]
pub(super) struct Control {
    _align: [libc::cmsghdr; 0],
    pub(super) bytes: [u8; CONTROL_LEN],
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

// ===== impl UdpMsgBlock =====

/// The generic `msghdr` block with this control buffer inline.
pub(super) type UdpMsgBlock = MsgBlock<Control>;

// SAFETY: a byte array (plus a zero-length alignment array): all-zero is
// valid, and it holds no pointers.
unsafe impl ControlSpace for Control {}

impl MsgBlock<Control> {
    /// Writes one control message at byte `at` of the control buffer;
    /// returns where the next one starts.
    pub(super) fn put(
        &mut self,
        at: usize,
        level: libc::c_int,
        ty: libc::c_int,
        data: &[u8],
    ) -> usize {
        let end = at + space(data.len());
        // The callers' messages are constants whose total is checked
        // against the buffer at compile time (`SEND_NEEDS`); this keeps
        // the unsafe write below in bounds whatever a caller does.
        assert!(end <= CONTROL_LEN, "control messages overflow the buffer");
        let base = self.control.bytes.as_mut_ptr();
        // `at` is a sum of `CMSG_SPACE`s (multiples of the `cmsghdr`
        // alignment) from a base aligned for `cmsghdr` (`Control`).
        // SAFETY: `at..end` is inside the buffer (asserted); the header
        // write is aligned (above); the payload ends before `end`.
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
    pub(super) fn encode(&mut self, cmsgs: SendCmsgs) {
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
    pub(super) fn offer_control(&mut self) {
        self.hdr.msg_control = self.control.bytes.as_mut_ptr().cast();
        self.hdr.msg_controllen = CONTROL_LEN as _;
    }

    /// Reads the control messages a receive left (module docs: bounds).
    pub(super) fn decode(&mut self) -> RecvCmsgs {
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

//! UDP segmentation offload and per-datagram metadata for [`UdpSocket`].
//!
//! * **GSO** (send): one `sendmsg` carries a buffer of several datagrams of
//!   one size (the last may be shorter) and a `UDP_SEGMENT` control
//!   message; the kernel cuts it apart. Support is probed when the socket
//!   is made (a `UDP_SEGMENT` `getsockopt`) and kept in [`OffloadState`].
//! * **GRO** (receive): with `UDP_GRO` on, the kernel may hand one
//!   `recvmsg` several datagrams from one sender back to back, and says
//!   their size in a `UDP_GRO` control message.
//! * **Metadata**: the ECN bits (`IP_RECVTOS` / `IPV6_RECVTCLASS`) and the
//!   local destination address (`IP_PKTINFO` / `IPV6_RECVPKTINFO`) of each
//!   receive; the ECN bits of each send (`IP_TOS` / `IPV6_TCLASS`).
//!
//! The ring operations and everything the kernel reads or writes (msghdr,
//! iovec, sockaddr, control buffer) are in `op/udp_msg.rs`; this file
//! checks a send's shape before anything is submitted, keeps the socket's
//! capabilities, and falls back when GSO fails.
//!
//! GSO fallback: some devices (loopback or NICs with checksum offload off)
//! fail a segmented send with `EIO`. Then, as quinn-udp does, GSO is
//! turned off for the socket for good ([`UdpOffload::max_gso_segments`]
//! becomes 1) and the same send is redone one datagram per `sendmsg`.
//!
//! [`UdpSocket`]: super::UdpSocket

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::ops::Range;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use super::datagram::DatagramCore;
use super::tcp::sock_addr;
use crate::buf::{BufResult, IoBuf, IoBufMut};
use crate::op::socket::setsockopt_int;
use crate::op::udp_msg::{recv_now, RecvMsgOut, SendCmsgs, Tos, UdpRecvMsg, UdpSendMsg};
use crate::op::{Lane, Op};

/// Segments one GSO send may carry (the kernel's `UDP_MAX_SEGMENTS` on
/// every kernel with `UDP_SEGMENT`; newer ones allow more).
const GSO_MAX_SEGMENTS: usize = 64;

/// What one [`recv_msg_owned`](super::UdpSocket::recv_msg_owned) produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpRecvMeta {
    /// Bytes written into the buffer (from its first byte).
    pub len: usize,
    /// The sender, as [`recv_from_owned`](super::UdpSocket::recv_from_owned)
    /// reports it (an IPv4 sender on a dual-stack IPv6 socket is a
    /// v4-mapped IPv6 address).
    pub addr: SocketAddr,
    /// `Some(s)` when the kernel reported a GRO segment size: the buffer
    /// holds datagrams of `s` bytes back to back, the last possibly
    /// shorter (split `buf[..len]` with `chunks(s)`). `None`: one datagram.
    pub segment_size: Option<usize>,
    /// The ECN bits (0..=3), when ECN reporting is on
    /// ([`enable_offload`](super::UdpSocket::enable_offload)) and the
    /// kernel reported them.
    pub ecn: Option<u8>,
    /// The local address the datagram was sent to, when pktinfo reporting
    /// is on ([`enable_offload`](super::UdpSocket::enable_offload)). An
    /// IPv4 datagram on a dual-stack IPv6 socket reports an IPv4 address
    /// here (while [`addr`](Self::addr) is v4-mapped).
    pub dst_ip: Option<IpAddr>,
}

/// Segmentation-offload capabilities of a socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpOffload {
    /// Datagrams one [`send_msg_owned`](super::UdpSocket::send_msg_owned)
    /// may carry; 1 when GSO is unavailable (or was turned off after the
    /// device failed a GSO send).
    pub max_gso_segments: usize,
    /// Whether receives may be GRO-coalesced
    /// ([`enable_offload`](super::UdpSocket::enable_offload) turned it on).
    pub gro: bool,
}

// ===== impl OffloadState =====

/// A socket's offload capabilities, shared by its concurrent sends.
#[derive(Debug)]
pub(crate) struct OffloadState {
    max_gso_segments: AtomicUsize,
    gro: AtomicBool,
    /// Test hook: this many GSO sends fail with `EIO` without reaching
    /// the kernel (no device here fails them on demand).
    #[cfg(test)]
    eio_faults: std::sync::atomic::AtomicU32,
}

impl OffloadState {
    /// Probes GSO on `fd` (a `UDP_SEGMENT` `getsockopt`: kernels without
    /// GSO refuse it).
    pub(crate) fn probe(fd: RawFd) -> OffloadState {
        let gso = crate::op::socket::getsockopt_int(fd, libc::SOL_UDP, libc::UDP_SEGMENT).is_ok();
        OffloadState {
            max_gso_segments: AtomicUsize::new(if gso { GSO_MAX_SEGMENTS } else { 1 }),
            gro: AtomicBool::new(false),
            #[cfg(test)]
            eio_faults: std::sync::atomic::AtomicU32::new(0),
        }
    }

    /// The capabilities now.
    pub(crate) fn get(&self) -> UdpOffload {
        // Relaxed: independent flags; a send that reads a stale count
        // either succeeds or takes the EIO fallback again.
        UdpOffload {
            max_gso_segments: self.max_gso_segments.load(Ordering::Relaxed),
            gro: self.gro.load(Ordering::Relaxed),
        }
    }

    /// Turns on GRO, ECN and pktinfo reporting where the kernel has them.
    pub(crate) fn enable(&self, fd: RawFd, v6: bool) -> io::Result<UdpOffload> {
        let gro = optional(setsockopt_int(fd, libc::SOL_UDP, libc::UDP_GRO, 1))?;
        // Relaxed: see `get`.
        self.gro.store(gro, Ordering::Relaxed);
        if v6 {
            optional(setsockopt_int(
                fd,
                libc::IPPROTO_IPV6,
                libc::IPV6_RECVTCLASS,
                1,
            ))?;
            optional(setsockopt_int(
                fd,
                libc::IPPROTO_IPV6,
                libc::IPV6_RECVPKTINFO,
                1,
            ))?;
            // IPv4 senders on a dual-stack socket report through the IPv4
            // options; a v6-only socket never needs them, so their errors
            // do not matter.
            let _ = setsockopt_int(fd, libc::IPPROTO_IP, libc::IP_RECVTOS, 1);
            let _ = setsockopt_int(fd, libc::IPPROTO_IP, libc::IP_PKTINFO, 1);
        } else {
            optional(setsockopt_int(fd, libc::IPPROTO_IP, libc::IP_RECVTOS, 1))?;
            optional(setsockopt_int(fd, libc::IPPROTO_IP, libc::IP_PKTINFO, 1))?;
        }
        Ok(self.get())
    }

    fn disable_gso(&self) {
        // Relaxed: see `get`.
        self.max_gso_segments.store(1, Ordering::Relaxed);
    }
}

/// The unit tests' stand-in for a device that fails GSO sends with `EIO`.
#[cfg(test)]
fn injected_eio(state: &OffloadState, segment: Option<u16>) -> Option<io::Error> {
    let take = segment.is_some()
        && state
            .eio_faults
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
    take.then(|| io::Error::from_raw_os_error(libc::EIO))
}

#[cfg(not(test))]
fn injected_eio(_: &OffloadState, _: Option<u16>) -> Option<io::Error> {
    None
}

/// `Ok(true)` when the option took, `Ok(false)` when the kernel does not
/// have it, the error otherwise.
fn optional(res: io::Result<()>) -> io::Result<bool> {
    match res {
        Ok(()) => Ok(true),
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(libc::ENOPROTOOPT | libc::EOPNOTSUPP | libc::EINVAL)
            ) =>
        {
            Ok(false)
        }
        Err(e) => Err(e),
    }
}

// ===== sends =====

fn invalid(msg: &'static str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

/// The `UDP_SEGMENT` size a send of `len` bytes attaches (`None`: a plain
/// datagram), or why the send is refused.
pub(crate) fn plan_segments(
    len: usize,
    segment_size: Option<usize>,
    max_segments: usize,
) -> io::Result<Option<u16>> {
    let Some(size) = segment_size else {
        return Ok(None);
    };
    if size == 0 {
        return Err(invalid("segment_size is 0"));
    }
    if size >= len {
        // One datagram: nothing for the kernel to cut.
        return Ok(None);
    }
    if max_segments <= 1 {
        return Err(invalid("the socket has no UDP GSO (max_gso_segments is 1)"));
    }
    if len.div_ceil(size) > max_segments {
        return Err(invalid("more segments than max_gso_segments"));
    }
    u16::try_from(size)
        .map(Some)
        .map_err(|_| invalid("segment_size exceeds 65535"))
}

/// The datagrams a buffer of `len` bytes cut at `size` holds.
pub(crate) fn segment_ranges(len: usize, size: usize) -> impl Iterator<Item = Range<usize>> {
    (0..len)
        .step_by(size.max(1))
        .map(move |start| start..(start + size).min(len))
}

/// The TOS control message for `ecn` towards `dst`: `IP_TOS` for IPv4 and
/// v4-mapped destinations (the kernel sends those as IPv4), else
/// `IPV6_TCLASS`.
fn tos_for(dst: SocketAddr, ecn: u8) -> Tos {
    match dst.ip() {
        IpAddr::V4(_) => Tos::V4(ecn),
        IpAddr::V6(ip) if ip.to_ipv4_mapped().is_some() => Tos::V4(ecn),
        IpAddr::V6(_) => Tos::V6(ecn),
    }
}

/// [`UdpSocket::send_msg_owned`](super::UdpSocket::send_msg_owned).
pub(crate) async fn send_msg<B: IoBuf>(
    core: &DatagramCore,
    state: &OffloadState,
    buf: B,
    dst: SocketAddr,
    segment_size: Option<usize>,
    ecn: Option<u8>,
) -> BufResult<usize, B> {
    if ecn.is_some_and(|e| e > 3) {
        return (Err(invalid("ecn is more than 2 bits")), buf);
    }
    let len = buf.bytes_init();
    let segment = match plan_segments(len, segment_size, state.get().max_gso_segments) {
        Ok(s) => s,
        Err(e) => return (Err(e), buf),
    };
    let addr = socket2::SockAddr::from(dst);
    let cmsgs = SendCmsgs {
        segment_size: segment,
        tos: ecn.map(|e| tos_for(dst, e)),
    };
    let (res, buf) = match injected_eio(state, segment) {
        Some(err) => (Err(err), buf),
        None => send_one(core, buf, &addr, cmsgs).await,
    };
    match (res, segment) {
        (Err(e), Some(size)) if e.raw_os_error() == Some(libc::EIO) => {
            state.disable_gso();
            send_each(core, buf, &addr, usize::from(size), cmsgs.tos).await
        }
        (res, _) => (res, buf),
    }
}

async fn send_one<B: IoBuf>(
    core: &DatagramCore,
    buf: B,
    addr: &socket2::SockAddr,
    cmsgs: SendCmsgs,
) -> BufResult<usize, B> {
    let op = UdpSendMsg::new(core.fd.clone(), buf, addr, cmsgs);
    Op::submit(&core.handle.shared, Lane::Shard(core.session), op).await
}

/// The GSO fallback: the buffer's datagrams one `sendmsg` each. Stops at
/// the first error (the datagrams before it are gone already).
async fn send_each<B: IoBuf>(
    core: &DatagramCore,
    mut buf: B,
    addr: &socket2::SockAddr,
    size: usize,
    tos: Option<Tos>,
) -> BufResult<usize, B> {
    let cmsgs = SendCmsgs {
        segment_size: None,
        tos,
    };
    let mut sent = 0;
    for range in segment_ranges(buf.bytes_init(), size) {
        let (res, slice) = send_one(core, buf.slice(range), addr, cmsgs).await;
        buf = slice.into_inner();
        match res {
            Ok(n) => sent += n,
            Err(e) => return (Err(e), buf),
        }
    }
    (Ok(sent), buf)
}

// ===== receives =====

/// [`UdpSocket::recv_msg_owned`](super::UdpSocket::recv_msg_owned).
pub(crate) async fn recv_msg<B: IoBufMut>(
    core: &DatagramCore,
    buf: B,
) -> BufResult<UdpRecvMeta, B> {
    let op = UdpRecvMsg::new(core.fd.clone(), buf);
    let (res, buf) = Op::submit(&core.handle.shared, Lane::Shard(core.session), op).await;
    (res.and_then(recv_meta), buf)
}

/// [`UdpSocket::try_recv_msg`](super::UdpSocket::try_recv_msg).
pub(crate) fn try_recv_msg<B: IoBufMut>(core: &DatagramCore, buf: B) -> BufResult<UdpRecvMeta, B> {
    let (res, buf) = recv_now(core.fd.raw(), buf);
    (res.and_then(recv_meta), buf)
}

fn recv_meta(out: RecvMsgOut) -> io::Result<UdpRecvMeta> {
    Ok(UdpRecvMeta {
        len: out.len,
        addr: sock_addr(out.peer)?,
        segment_size: out.cmsgs.gro_segment,
        ecn: out.cmsgs.tos.map(|tos| tos & 0b11),
        dst_ip: out.cmsgs.dst_ip,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::op::SharedFd;
    use std::os::fd::{AsRawFd, OwnedFd};

    fn kind(res: io::Result<Option<u16>>) -> Option<io::ErrorKind> {
        res.err().map(|e| e.kind())
    }

    #[test]
    fn plans() {
        assert_eq!(plan_segments(5000, None, 64).unwrap(), None);
        assert_eq!(plan_segments(5000, Some(1200), 64).unwrap(), Some(1200));
        // A segment as long as the buffer (or longer) is one datagram.
        assert_eq!(plan_segments(1200, Some(1200), 1).unwrap(), None);
        assert_eq!(plan_segments(100, Some(1200), 64).unwrap(), None);
        let bad = Some(io::ErrorKind::InvalidInput);
        assert_eq!(kind(plan_segments(5000, Some(0), 64)), bad);
        assert_eq!(kind(plan_segments(5000, Some(1200), 1)), bad);
        assert_eq!(kind(plan_segments(65 * 100, Some(100), 64)), bad);
        assert_eq!(plan_segments(64 * 100, Some(100), 64).unwrap(), Some(100));
        assert_eq!(kind(plan_segments(200_000, Some(70_000), 64)), bad);
    }

    #[test]
    fn splits_into_segments_with_a_short_last_one() {
        let got: Vec<_> = segment_ranges(2500, 1000).collect();
        assert_eq!(got, vec![0..1000, 1000..2000, 2000..2500]);
        let got: Vec<_> = segment_ranges(2000, 1000).collect();
        assert_eq!(got, vec![0..1000, 1000..2000]);
        assert_eq!(segment_ranges(0, 1000).count(), 0);
    }

    #[test]
    fn tos_level_follows_the_destination() {
        let v4: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let mapped: SocketAddr = "[::ffff:127.0.0.1]:1".parse().unwrap();
        let v6: SocketAddr = "[::1]:1".parse().unwrap();
        assert_eq!(tos_for(v4, 2), Tos::V4(2));
        assert_eq!(tos_for(mapped, 2), Tos::V4(2));
        assert_eq!(tos_for(v6, 1), Tos::V6(1));
    }

    /// A GSO send that fails with `EIO` turns GSO off and goes out one
    /// datagram per `sendmsg`: every datagram arrives, in order, whole.
    #[test]
    fn eio_from_a_gso_send_falls_back_to_one_datagram_per_send() {
        let rt = crate::Runtime::builder().shards(1).build().unwrap();
        let handle = rt.handle();
        let receiver = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        receiver
            .set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .unwrap();
        let dst = receiver.local_addr().unwrap();
        let sender = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let state = OffloadState::probe(sender.as_raw_fd());
        if state.get().max_gso_segments == 1 {
            eprintln!("skipped: this kernel has no UDP GSO");
            return;
        }
        state.eio_faults.store(1, Ordering::SeqCst);
        let core = DatagramCore {
            fd: SharedFd::new(OwnedFd::from(sender)),
            session: 0,
            handle: handle.clone(),
        };
        let data: Vec<u8> = (0..(3 * 1000 + 321)).map(|i| (i % 251) as u8).collect();
        let want = data.clone();
        let join = handle
            .spawn_stealable(async move {
                let (res, back) = send_msg(&core, &state, data, dst, Some(1000), Some(2)).await;
                let sent = res.unwrap();
                let after = state.get();
                // Now GSO-less: a segmented send is refused up front, and
                // the buffer comes back intact.
                let copy = back.clone();
                let (res, again) = send_msg(&core, &state, back, dst, Some(1000), None).await;
                assert_eq!(res.unwrap_err().kind(), io::ErrorKind::InvalidInput);
                assert_eq!(again, copy);
                (sent, again.len(), after)
            })
            .unwrap();
        let (sent, back_len, after) = crate::block_on(join).unwrap();
        assert_eq!(sent, want.len());
        assert_eq!(back_len, want.len(), "the buffer comes back whole");
        assert_eq!(after.max_gso_segments, 1, "GSO is off after EIO");
        let mut got = Vec::new();
        let mut sizes = Vec::new();
        let mut dgram = [0u8; 2048];
        for _ in 0..4 {
            let n = receiver.recv(&mut dgram).unwrap();
            sizes.push(n);
            got.extend_from_slice(&dgram[..n]);
        }
        assert_eq!(sizes, vec![1000, 1000, 1000, 321]);
        assert_eq!(got, want);
    }
}

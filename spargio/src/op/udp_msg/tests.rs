//! Control-message encoding and decoding against hand-laid buffers.

use std::mem::size_of;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::block::{cmsg_len, space, SendCmsgs, Tos, UdpMsgBlock, CONTROL_LEN, SEND_NEEDS};

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

//! Connection-id routing across the drivers of one multi-shard server.
//!
//! A server spread over shards has one `SO_REUSEPORT` socket and driver
//! per shard. Left to itself, the kernel picks the socket by hashing the
//! 4-tuple, so every connection from one client port lands on one shard
//! (all their handshake crypto there), and a client whose address
//! changes (NAT rebinding, migration) is sent to a driver that has never
//! heard of its connection.
//!
//! Instead, the drivers route by destination connection id, as large QUIC
//! deployments do:
//!
//! - Driver `i` of `n` issues only connection ids whose first byte is `i`
//!   modulo `n` ([`RoutedCids`]). The rest of the id is a random nonce
//!   and a keyed hash of it, as quinn's default generator makes them, so
//!   a forged id is recognised and dropped without a stateless reset.
//! - A classic BPF program attached to the port's reuseport group
//!   ([`attach_reuseport_program`]) reads that byte from each datagram
//!   (offset 1 in a short header, 6 in a long one) and returns it modulo
//!   `n`: the index of the socket in the group, which is the driver's
//!   (they join in order). A client's first Initial carries an id the
//!   client chose at random; its first byte picks a driver at random, and
//!   that driver's answers give the client ids that lead back to it.
//!
//! If the program cannot be attached (a kernel without
//! `SO_ATTACH_REUSEPORT_CBPF`), the kernel's hash decides as before and
//! every connection still lives on the driver that accepted it; only the
//! spreading of one client's connections and rebinding across sockets
//! are lost. [`NativeProtoDriverProbe::cid_routed`](crate::NativeProtoDriverProbe)
//! says which it is.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::io;
use std::os::fd::AsRawFd;
use std::time::Duration;

use quinn_proto::{ConnectionId, ConnectionIdGenerator, InvalidCid, RandomConnectionIdGenerator};

/// Bytes of random nonce at the start of an id (the first is the route).
const NONCE_LEN: usize = 3;
/// Bytes of keyed hash after it.
const SIGNATURE_LEN: usize = 5;
/// Length of every id a routed driver issues.
pub(crate) const CID_LEN: usize = NONCE_LEN + SIGNATURE_LEN;

/// Offset of the destination id's first byte in a short-header packet
/// (after the flags byte), and in a long-header one (after the flags,
/// the 4-byte version and the id length).
const SHORT_DCID_AT: u32 = 1;
const LONG_DCID_AT: u32 = 6;

/// The driver a datagram's destination id routes to (what the BPF
/// program computes; `None` for a datagram too short to say).
#[cfg(test)]
pub(crate) fn route_of(datagram: &[u8], count: u8) -> Option<u8> {
    let first = *datagram.first()?;
    let at = if first & 0x80 != 0 {
        LONG_DCID_AT
    } else {
        SHORT_DCID_AT
    };
    datagram.get(at as usize).map(|b| b % count.max(1))
}

/// Issues connection ids that route to driver `index` of `count`.
#[derive(Debug)]
pub(crate) struct RoutedCids {
    index: u8,
    count: u8,
    nonces: RandomConnectionIdGenerator,
    key: RandomState,
}

impl RoutedCids {
    pub(crate) fn new(index: u8, count: u8) -> RoutedCids {
        assert!(count > 0 && index < count, "driver {index} of {count}");
        RoutedCids {
            index,
            count,
            nonces: RandomConnectionIdGenerator::new(NONCE_LEN),
            key: RandomState::new(),
        }
    }

    fn signature(&self, nonce: &[u8]) -> [u8; SIGNATURE_LEN] {
        let h = self.key.hash_one(nonce).to_le_bytes();
        let mut out = [0; SIGNATURE_LEN];
        out.copy_from_slice(&h[..SIGNATURE_LEN]);
        out
    }
}

/// `byte` moved to the nearest value that is `index` modulo `count`
/// (keeps the rest of the byte's randomness).
fn steer(byte: u8, index: u8, count: u8) -> u8 {
    let base = byte - byte % count;
    match base.checked_add(index) {
        Some(b) => b,
        // Only in the last, partial block of 256: step one block down.
        None => base - count + index,
    }
}

impl ConnectionIdGenerator for RoutedCids {
    fn generate_cid(&mut self) -> ConnectionId {
        let mut bytes = [0u8; CID_LEN];
        bytes[..NONCE_LEN].copy_from_slice(&self.nonces.generate_cid());
        bytes[0] = steer(bytes[0], self.index, self.count);
        let sig = self.signature(&bytes[..NONCE_LEN]);
        bytes[NONCE_LEN..].copy_from_slice(&sig);
        ConnectionId::new(&bytes)
    }

    fn validate(&self, cid: &ConnectionId) -> Result<(), InvalidCid> {
        if cid.len() != CID_LEN || cid[0] % self.count != self.index {
            return Err(InvalidCid);
        }
        let (nonce, sig) = cid.split_at(NONCE_LEN);
        if self.signature(nonce)[..] == sig[..] {
            Ok(())
        } else {
            Err(InvalidCid)
        }
    }

    fn cid_len(&self) -> usize {
        CID_LEN
    }

    fn cid_lifetime(&self) -> Option<Duration> {
        None
    }
}

/// Attaches the routing program for `count` drivers to the reuseport
/// group of `socket` (bound, with `SO_REUSEPORT`). Sockets joining the
/// group later are covered too; until all `count` have joined, an index
/// past the last member falls back to the kernel's hash.
pub(crate) fn attach_reuseport_program(socket: &impl AsRawFd, count: u8) -> io::Result<()> {
    if count == 0 {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "no drivers"));
    }
    let stmt = |code: u32, k: u32| libc::sock_filter {
        code: code as u16,
        jt: 0,
        jf: 0,
        k,
    };
    let program = [
        // A = datagram[0] (a load past the end ends the program with 0:
        // driver 0 gets what is too short to route).
        stmt(libc::BPF_LD | libc::BPF_B | libc::BPF_ABS, 0),
        // Long header (0x80 set)? Fall through; else skip two.
        libc::sock_filter {
            code: (libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K) as u16,
            jt: 0,
            jf: 2,
            k: 0x80,
        },
        stmt(libc::BPF_LD | libc::BPF_B | libc::BPF_ABS, LONG_DCID_AT),
        stmt(libc::BPF_JMP | libc::BPF_JA, 1),
        stmt(libc::BPF_LD | libc::BPF_B | libc::BPF_ABS, SHORT_DCID_AT),
        stmt(
            libc::BPF_ALU | libc::BPF_MOD | libc::BPF_K,
            u32::from(count),
        ),
        stmt(libc::BPF_RET | libc::BPF_A, 0),
    ];
    let prog = libc::sock_fprog {
        len: program.len() as u16,
        filter: program.as_ptr().cast_mut(),
    };
    // SAFETY: `socket` is an open fd for the call; `prog` points to
    // `program`, which outlives the call, and its `len` is `program`'s
    // length; the kernel copies the program before returning; the option
    // length is the exact size of `sock_fprog`.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_ATTACH_REUSEPORT_CBPF,
            (&prog as *const libc::sock_fprog).cast(),
            std::mem::size_of::<libc::sock_fprog>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;

    #[test]
    fn steered_bytes_keep_their_route_and_stay_in_range() {
        for count in 1..=8u8 {
            for index in 0..count {
                for byte in 0..=255u8 {
                    let s = steer(byte, index, count);
                    assert_eq!(s % count, index, "byte {byte} index {index}/{count}");
                }
            }
        }
    }

    #[test]
    fn issued_ids_route_to_their_driver_and_validate() {
        for count in 1..=4u8 {
            for index in 0..count {
                let mut g = RoutedCids::new(index, count);
                for _ in 0..64 {
                    let cid = g.generate_cid();
                    assert_eq!(cid.len(), CID_LEN);
                    assert!(g.validate(&cid).is_ok());
                    let mut short = vec![0x40];
                    short.extend_from_slice(&cid);
                    assert_eq!(route_of(&short, count), Some(index));
                    let mut long = vec![0xc0, 0, 0, 0, 1, CID_LEN as u8];
                    long.extend_from_slice(&cid);
                    assert_eq!(route_of(&long, count), Some(index));
                }
            }
        }
    }

    #[test]
    fn forged_and_foreign_ids_do_not_validate() {
        let mut a = RoutedCids::new(0, 2);
        let b = RoutedCids::new(0, 2);
        let cid = a.generate_cid();
        // Another driver's key.
        assert!(b.validate(&cid).is_err());
        // One flipped signature bit.
        let mut bytes = cid.to_vec();
        bytes[CID_LEN - 1] ^= 1;
        assert!(a.validate(&ConnectionId::new(&bytes)).is_err());
        // Wrong length.
        assert!(a.validate(&ConnectionId::new(&bytes[..4])).is_err());
    }

    /// The kernel runs the program: datagrams reach the socket whose index
    /// in the group their destination id names, whatever the sender's
    /// port (one sender port would always hash to one socket).
    #[test]
    fn the_kernel_delivers_by_destination_id() {
        const N: usize = 3;
        let first = crate::native::udp::bind_socket("127.0.0.1:0".parse().unwrap(), true).unwrap();
        let addr = first.local_addr().unwrap();
        attach_reuseport_program(&first, N as u8).unwrap();
        let mut group = vec![first];
        for _ in 1..N {
            group.push(crate::native::udp::bind_socket(addr, true).unwrap());
        }
        let sender = UdpSocket::bind("127.0.0.1:0").unwrap();
        for byte in 0..=255u8 {
            let short = [0x40, byte, 1, 2, 3, 4, 5, 6, 7];
            let long = [0xc0, 0, 0, 0, 1, 8, byte, 9, 9, 9];
            for datagram in [&short[..], &long[..]] {
                sender.send_to(datagram, addr).unwrap();
                let want = route_of(datagram, N as u8).unwrap() as usize;
                let got = receive_on_one(&group, datagram);
                assert_eq!(got, want, "datagram {datagram:?}");
            }
        }
    }

    /// Which socket of `group` received `datagram` (polling: the sockets
    /// are non-blocking).
    fn receive_on_one(group: &[UdpSocket], datagram: &[u8]) -> usize {
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        let mut buf = [0u8; 64];
        loop {
            for (i, s) in group.iter().enumerate() {
                if let Ok(n) = s.recv(&mut buf) {
                    assert_eq!(&buf[..n], datagram);
                    return i;
                }
            }
            assert!(std::time::Instant::now() < deadline, "datagram lost");
            std::thread::yield_now();
        }
    }
}

//! Dealing new connections over a server's per-shard drivers.
//!
//! A routed group (`route.rs`) delivers a client's first Initial by the
//! first byte of the connection id the client made up: a random driver.
//! Over many connections that is even; over a burst it is not (8 at once
//! split 5:3 or worse half the time), and a server's handshake crypto is
//! done by the driver that accepts. So the driver an Initial lands on
//! deals the new connection to the group's drivers in turn: when the turn
//! is another driver's, it hands that driver a copy of the datagram
//! ([`DriverShared::forward`](super::shared::DriverShared::forward)) and
//! tells its own endpoint to forget the attempt (`Endpoint::ignore`). The
//! other driver's endpoint accepts it and issues the connection ids, which
//! route the client's later packets to it. Until the client has those
//! ids, its packets still carry the one it made up and land here: the
//! driver remembers where it dealt that id ([`Dealt`]) and forwards them
//! too. A driver that cannot take it (closed, its queue full) leaves the
//! connection here.

use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use quinn_proto::{ConnectionId, EcnCodepoint};

use super::shared::DriverShared;

/// A received datagram with what the endpoint needs of its receive: what
/// a driver feeds to its endpoint, and hands to another driver of the
/// group when it deals.
pub(crate) struct Datagram {
    pub(crate) data: BytesMut,
    pub(crate) addr: SocketAddr,
    pub(crate) dst_ip: Option<IpAddr>,
    pub(crate) ecn: Option<EcnCodepoint>,
}

/// Datagram datagrams one driver queues at most; past it the sender
/// keeps the connection itself.
pub(crate) const FORWARD_QUEUE_CAP: usize = 256;

/// The drivers of one server group, and whose turn the next connection is.
#[derive(Default)]
pub(crate) struct DealGroup {
    drivers: OnceLock<Vec<Weak<DriverShared>>>,
    next: AtomicUsize,
}

impl DealGroup {
    /// Sets the group's drivers (once, after they all started).
    pub(crate) fn set_drivers(&self, drivers: Vec<Weak<DriverShared>>) {
        let _ = self.drivers.set(drivers);
    }

    /// The driver whose turn the next new connection is (`None`: the
    /// group is not set up yet, or that driver is gone).
    pub(crate) fn next_turn(&self) -> Option<Arc<DriverShared>> {
        let drivers = self.drivers.get()?;
        if drivers.is_empty() {
            return None;
        }
        // Relaxed: a turn counter; any interleaving deals evenly.
        let i = self.next.fetch_add(1, Ordering::Relaxed) % drivers.len();
        drivers[i].upgrade()
    }
}

/// The longest connection id QUIC allows (RFC 9000, 17.2).
const MAX_CID_LEN: usize = 20;

/// How long a driver remembers where it dealt a client's first id: past
/// any handshake's Initial retransmissions.
const DEALT_TTL: Duration = Duration::from_secs(10);
/// Dealt ids remembered at most (the oldest is forgotten first).
const DEALT_CAP: usize = 4096;

/// The client-chosen ids a driver dealt away, and to whom.
#[derive(Default)]
pub(crate) struct Dealt {
    to: HashMap<ConnectionId, (Weak<DriverShared>, Instant)>,
    order: VecDeque<(Instant, ConnectionId)>,
}

impl Dealt {
    /// Remembers that connection attempts to `dcid` go to `driver`.
    pub(crate) fn insert(&mut self, dcid: ConnectionId, driver: &Arc<DriverShared>, now: Instant) {
        self.expire(now);
        while self.order.len() >= DEALT_CAP {
            if let Some((at, old)) = self.order.pop_front() {
                self.forget(old, at);
            }
        }
        self.to.insert(dcid, (Arc::downgrade(driver), now));
        self.order.push_back((now, dcid));
    }

    /// Forgets `dcid` unless it was dealt again after `at`.
    fn forget(&mut self, dcid: ConnectionId, at: Instant) {
        if self.to.get(&dcid).is_some_and(|(_, t)| *t == at) {
            self.to.remove(&dcid);
        }
    }

    /// Where attempts to `dcid` were dealt, if still remembered.
    pub(crate) fn get(&mut self, dcid: &ConnectionId, now: Instant) -> Option<Arc<DriverShared>> {
        if self.to.is_empty() {
            return None;
        }
        self.expire(now);
        self.to.get(dcid)?.0.upgrade()
    }

    fn expire(&mut self, now: Instant) {
        while let Some(&(at, dcid)) = self.order.front() {
            if now.duration_since(at) < DEALT_TTL {
                break;
            }
            self.order.pop_front();
            self.forget(dcid, at);
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.to.len()
    }
}

/// The destination connection id of a long-header packet (Initial,
/// 0-RTT, Handshake, Retry); `None` for a short header or a malformed
/// one.
pub(crate) fn long_header_dcid(datagram: &[u8]) -> Option<ConnectionId> {
    let first = *datagram.first()?;
    if first & 0x80 == 0 {
        return None;
    }
    // Flags (1), version (4), id length (1), id.
    let len = usize::from(*datagram.get(5)?);
    if len > MAX_CID_LEN {
        return None;
    }
    Some(ConnectionId::new(datagram.get(6..6 + len)?))
}

/// Whether `datagram` starts with a QUIC v1 Initial packet.
pub(crate) fn is_initial_v1(datagram: &[u8]) -> bool {
    // Long header and fixed bit set, packet type 0 (Initial), version 1.
    datagram.len() > 6 && datagram[0] & 0xf0 == 0xc0 && datagram[1..5] == [0, 0, 0, 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn initial(dcid: &[u8]) -> Vec<u8> {
        let mut d = vec![0xc3, 0, 0, 0, 1, dcid.len() as u8];
        d.extend_from_slice(dcid);
        d.extend_from_slice(&[0u8; 40]);
        d
    }

    #[test]
    fn parses_long_headers_only() {
        let d = initial(&[1, 2, 3, 4, 5, 6, 7, 8]);
        assert!(is_initial_v1(&d));
        assert_eq!(
            long_header_dcid(&d),
            Some(ConnectionId::new(&[1, 2, 3, 4, 5, 6, 7, 8]))
        );
        // A Handshake packet: a long header, not an Initial.
        let mut h = d.clone();
        h[0] = 0xe3;
        assert!(!is_initial_v1(&h));
        assert!(long_header_dcid(&h).is_some());
        // Another version's Initial is not dealt.
        let mut v2 = d.clone();
        v2[1..5].copy_from_slice(&[0x6b, 0x33, 0x43, 0xcf]);
        assert!(!is_initial_v1(&v2));
        // Short headers, an id longer than QUIC allows, a cut-off header.
        assert_eq!(long_header_dcid(&[0x40, 1, 2, 3, 4, 5, 6, 7, 8]), None);
        assert_eq!(long_header_dcid(&initial(&[9; 21])), None);
        assert_eq!(long_header_dcid(&d[..10]), None);
        assert_eq!(long_header_dcid(&[]), None);
        assert!(!is_initial_v1(&[0xc3, 0, 0, 0]));
    }

    fn driver() -> Arc<DriverShared> {
        let accept = super::super::shared::AcceptQueue::new(8, 8);
        Arc::new(DriverShared::new(
            0,
            "127.0.0.1:1".parse().unwrap(),
            8,
            8,
            accept,
        ))
    }

    #[test]
    fn turns_go_round_the_group() {
        let group = DealGroup::default();
        assert!(group.next_turn().is_none(), "not set up yet");
        let (a, b) = (driver(), driver());
        group.set_drivers(vec![Arc::downgrade(&a), Arc::downgrade(&b)]);
        let ids: Vec<u64> = (0..4).map(|_| group.next_turn().unwrap().id).collect();
        assert_eq!(ids, [a.id, b.id, a.id, b.id]);
        drop(b);
        let turns: Vec<bool> = (0..2).map(|_| group.next_turn().is_some()).collect();
        assert_eq!(turns, [true, false], "a dropped driver takes no turn");
    }

    #[test]
    fn dealt_ids_are_remembered_for_a_while_and_bounded() {
        let d = driver();
        let mut dealt = Dealt::default();
        let t0 = Instant::now();
        let id = ConnectionId::new(&[7; 8]);
        dealt.insert(id, &d, t0);
        assert_eq!(
            dealt.get(&id, t0 + Duration::from_secs(1)).unwrap().id,
            d.id
        );
        assert!(dealt.get(&ConnectionId::new(&[8; 8]), t0).is_none());
        assert!(dealt.get(&id, t0 + DEALT_TTL).is_none(), "expired");
        assert_eq!(dealt.len(), 0);
        for i in 0..DEALT_CAP + 10 {
            let id = ConnectionId::new(&(i as u64).to_le_bytes());
            dealt.insert(id, &d, t0);
        }
        assert_eq!(dealt.len(), DEALT_CAP);
        assert!(
            dealt
                .get(&ConnectionId::new(&0u64.to_le_bytes()), t0)
                .is_none(),
            "the oldest went first"
        );
    }
}

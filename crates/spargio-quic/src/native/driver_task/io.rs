//! The driver's receive path (datagrams into `Endpoint::handle`) and
//! send path (transmits onto the ring, with fault injection).

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::BytesMut;
use quinn_proto::{ConnectionId, DatagramEvent, Incoming, Transmit};

use super::{tuned_transport, DriverTask, DRAIN_LIMIT, RECV_ARENA};
use crate::native::conn::{ConnInner, Queued};
use crate::native::deal::{is_initial_v1, long_header_dcid, Datagram};
use crate::native::faults::Egress;
use crate::native::shared::DriverShared;
use crate::native::types::NativeProtoEvent;
use crate::native::udp::{RecvDone, SendDone};

impl DriverTask {
    // ===== receive path =====

    /// Handles one completed ring receive; returns whether it carried
    /// data. Its buffer goes back to the socket only while fewer receives
    /// wait than `armed` asks for (else it is kept for the drain).
    pub(super) fn on_recv(&mut self, done: RecvDone) -> bool {
        let (carried, rest) = self.take_datagrams(done);
        if self.recvs.len() < self.armed {
            self.rearm(rest);
        } else if rest.capacity() > self.spare.capacity() {
            self.spare = rest;
        }
        carried
    }

    /// After a pass's ring receives carried a handshake packet (a long
    /// header) or a datagram for a young connection (within its first
    /// events, see `conn::Queued::Young`), and no GRO batch: takes the
    /// datagrams queued behind them, without the ring, until the socket
    /// is empty, a GRO batch came, or `DRAIN_LIMIT` receives. A handshake
    /// flight is several datagrams of different sizes (no GRO) sent back
    /// to back, and so is what follows it (`HANDSHAKE_DONE` with new
    /// connection ids, path MTU probes, a prompt close); a ring receive
    /// completes with the first, and handing the rest to later receives
    /// runs the connection once per datagram, an acknowledgement each
    /// where one for the flight does, and a client that has not yet seen
    /// the server's close keeps probing the path MTU (a client sent 8.9
    /// datagrams per handshake, quinn's 5.0; 6.9 with the drain after
    /// young connections' datagrams too). Only then: a drain
    /// that finds nothing costs a failed `recvmsg`, which on every
    /// datagram of a request/response exchange cost 10% of its round
    /// trip, and draining a bulk transfer's queue delays its
    /// acknowledgements and stalls the sender (16 MiB took 31 ms instead
    /// of 23). Ring receives still waiting get only datagrams that arrive
    /// after these (their completions run in the shard loop's
    /// `io_uring_enter`, not during this task's poll), so the order
    /// holds.
    /// Returns how many receives it took.
    pub(super) fn drain_queued(&mut self) -> usize {
        self.shared.counters.drains.fetch_add(1, Ordering::Relaxed);
        let mut took = 0;
        for _ in 0..DRAIN_LIMIT {
            let mut buf = std::mem::take(&mut self.spare);
            self.make_room(&mut buf);
            let done = self.udp.try_recv(buf);
            let failed = match &done.res {
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    self.spare = done.buf;
                    return took;
                }
                Err(_) => true,
                Ok(_) => false,
            };
            self.shared
                .counters
                .receives_drained
                .fetch_add(1, Ordering::Relaxed);
            let (_, rest) = self.take_datagrams(done);
            self.spare = rest;
            took += 1;
            if failed || self.queued {
                return took;
            }
        }
        took
    }

    /// Feeds what one receive carried to the endpoint; returns whether it
    /// carried data, and the rest of its buffer.
    fn take_datagrams(&mut self, done: RecvDone) -> (bool, BytesMut) {
        let RecvDone { res, mut buf } = done;
        let carried = res.is_ok();
        match res {
            Ok(meta) => {
                let mut data = buf.split_to(meta.len.min(buf.len()));
                let c = &self.shared.counters;
                c.bytes_received
                    .fetch_add(meta.len as u64, Ordering::Relaxed);
                let seg = meta.segment_size.unwrap_or(meta.len).max(1);
                // A lone short datagram: a request or an acknowledgement,
                // whose senders may have more queued (`DriverTask::poll`).
                self.short_seen |= meta.segment_size.is_none() && meta.len < super::SHORT_DATAGRAM;
                if seg < meta.len {
                    c.gro_batches.fetch_add(1, Ordering::Relaxed);
                    self.queued = true;
                }
                let ecn = meta.ecn.and_then(quinn_proto::EcnCodepoint::from_bits);
                let now = Instant::now();
                while !data.is_empty() {
                    let one = data.split_to(seg.min(data.len()));
                    // A long header (Initial, Handshake, 0-RTT): a
                    // handshake flight, whose other datagrams follow.
                    self.flight_seen |= one.first().is_some_and(|b| b & 0x80 != 0);
                    self.shared
                        .counters
                        .datagrams_received
                        .fetch_add(1, Ordering::Relaxed);
                    if self.faults.is_active()
                        && self.faults.drop_inbound(&self.shared.fault_counters)
                    {
                        continue;
                    }
                    let d = Datagram {
                        data: one,
                        addr: meta.addr,
                        dst_ip: meta.dst_ip,
                        ecn,
                    };
                    self.handle_datagram(now, d, false);
                }
            }
            // EAGAIN: a receive that lost a datagram to another one in
            // flight and ran on an io-wq worker (see `udp::bind_socket`):
            // not an error.
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                self.shared
                    .counters
                    .recv_would_block
                    .fetch_add(1, Ordering::Relaxed);
            }
            Err(_) => {
                self.shared
                    .counters
                    .recv_errors
                    .fetch_add(1, Ordering::Relaxed);
            }
        }
        (carried, buf)
    }

    /// How many receives to keep waiting, after a pass that handled
    /// `ready` completed ones that carried data. Every waiting receive is woken by each
    /// datagram, and all but one then fail and wait again (kernel work on
    /// this shard, per datagram), so the driver keeps one waiting while
    /// datagrams come one at a time, and one more (up to
    /// `receives_in_flight`) each time they are found queued up: several
    /// receives completed in one pass, or the kernel coalesced several
    /// datagrams into one (GRO). A pass that found one lone datagram
    /// gives one back.
    pub(super) fn adapt_armed(&mut self, ready: usize) {
        if ready == 0 {
            return;
        }
        let before = self.armed;
        if ready > 1 || std::mem::take(&mut self.queued) {
            self.armed = (self.armed + 1).min(self.receives);
        } else {
            self.armed = self.armed.saturating_sub(1).max(1);
        }
        if self.armed > before {
            // Relaxed: statistics.
            self.shared
                .counters
                .receive_window_grows
                .fetch_add(1, Ordering::Relaxed);
        }
    }

    pub(super) fn rearm(&mut self, mut buf: BytesMut) {
        if self.shutting_down {
            return;
        }
        self.make_room(&mut buf);
        self.recvs.push_back(self.udp.recv(buf));
    }

    /// Empties `buf` and gives it room for one receive.
    fn make_room(&self, buf: &mut BytesMut) {
        buf.clear();
        let need = self.udp.recv_size();
        if buf.capacity() < need {
            // `reserve` reclaims the arena when quinn-proto has released
            // every slice of it, and allocates a fresh one otherwise.
            buf.reserve(RECV_ARENA.max(need));
        }
    }

    /// Feeds one datagram to the endpoint; `dealt`: another driver of
    /// the group dealt it here (see `deal.rs`), so it stays.
    pub(super) fn handle_datagram(&mut self, now: Instant, d: Datagram, dealt: bool) {
        let (addr, dst_ip, ecn) = (d.addr, d.dst_ip, d.ecn);
        let Some((data, attempt)) = self.deal_or_keep(d, dealt, now) else {
            return;
        };
        let mut response = self.send_pool.pop().unwrap_or_default();
        response.clear();
        match self
            .endpoint
            .handle(now, addr, dst_ip, ecn, data, &mut response)
        {
            Some(DatagramEvent::ConnectionEvent(ch, event)) => {
                self.send_pool.push(response);
                if let Some(inner) = self.conns.get(&ch.0) {
                    let queued = inner.queue_event(event);
                    // A young connection's datagrams come in flights.
                    self.flight_seen |= queued == Queued::Young;
                    if queued != Queued::Stopped
                        && !self.to_wake.last().is_some_and(|w| Arc::ptr_eq(w, inner))
                    {
                        self.to_wake.push(inner.clone());
                    }
                }
            }
            Some(DatagramEvent::NewConnection(incoming)) => {
                self.send_pool.push(response);
                if let Some((dcid, copy)) = attempt {
                    if let Some(to) = self.deal_new(copy) {
                        // Dealt: the other driver's endpoint answers it.
                        self.endpoint.ignore(incoming);
                        self.dealt.insert(dcid, &to, now);
                        return;
                    }
                }
                self.on_incoming(incoming, now);
            }
            Some(DatagramEvent::Response(t)) => {
                self.shared
                    .counters
                    .stateless_responses
                    .fetch_add(1, Ordering::Relaxed);
                self.send_transmit(None, response, t, false)
            }
            None => {
                self.send_pool.push(response);
                self.shared
                    .counters
                    .datagrams_malformed
                    .fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// A server group's side of `handle_datagram` (see `deal.rs`): a
    /// long-header packet to an id this driver dealt away goes where that
    /// connection went (`None`: forwarded); a v1 Initial keeps a copy, in
    /// case the endpoint takes it for a new connection and the turn is
    /// another driver's. Otherwise the datagram stays.
    fn deal_or_keep(
        &mut self,
        fwd: Datagram,
        dealt: bool,
        now: Instant,
    ) -> Option<(BytesMut, Option<(ConnectionId, Datagram)>)> {
        let grouped = !dealt && self.server_config.is_some() && self.shared.deal.get().is_some();
        let dcid = grouped.then(|| long_header_dcid(&fwd.data)).flatten();
        let Some(dcid) = dcid else {
            return Some((fwd.data, None));
        };
        let fwd = match self.dealt.get(&dcid, now) {
            Some(to) => match to.forward(fwd) {
                Ok(()) => {
                    self.shared
                        .counters
                        .datagrams_dealt
                        .fetch_add(1, Ordering::Relaxed);
                    return None;
                }
                // That driver is closed or full: ours after all.
                Err(back) => back,
            },
            None => fwd,
        };
        let copy = is_initial_v1(&fwd.data).then(|| Datagram {
            data: fwd.data.clone(),
            ..fwd
        });
        Some((fwd.data, copy.map(|c| (dcid, c))))
    }

    /// Deals a new connection attempt: hands `copy` to the driver whose
    /// turn it is, if that is another one and it takes it.
    fn deal_new(&mut self, copy: Datagram) -> Option<Arc<DriverShared>> {
        let to = self.shared.deal.get()?.next_turn()?;
        if Arc::ptr_eq(&to, &self.shared) || to.forward(copy).is_err() {
            return None;
        }
        let c = &self.shared.counters;
        c.connections_dealt.fetch_add(1, Ordering::Relaxed);
        c.datagrams_dealt.fetch_add(1, Ordering::Relaxed);
        Some(to)
    }

    pub(super) fn on_incoming(&mut self, incoming: Incoming, now: Instant) {
        let mut buf = self.send_pool.pop().unwrap_or_default();
        buf.clear();
        if self.shutting_down || self.server_config.is_none() {
            self.endpoint.ignore(incoming);
            self.send_pool.push(buf);
            return;
        }
        if !self.shared.accept.try_reserve() {
            let remote = incoming.remote_address();
            let t = self.endpoint.refuse(incoming, &mut buf);
            self.shared
                .counters
                .incoming_refused
                .fetch_add(1, Ordering::Relaxed);
            self.shared
                .event(NativeProtoEvent::IncomingRefused { remote });
            self.send_transmit(None, buf, t, false);
            return;
        }
        let config = tuned_transport(&self.tuning).and_then(|t| {
            let mut c = (**self.server_config.as_ref()?).clone();
            c.transport = t;
            Some(Arc::new(c))
        });
        match self.endpoint.accept(incoming, now, &mut buf, config) {
            Ok((ch, conn)) => {
                self.send_pool.push(buf);
                self.register(ch, conn, true);
            }
            Err(e) => {
                self.shared.accept.release();
                match e.response {
                    Some(t) => self.send_transmit(None, buf, t, false),
                    None => self.send_pool.push(buf),
                }
            }
        }
    }

    // ===== send path =====

    /// Starts queued transmits while send slots last.
    pub(super) fn flush_pending(&mut self) -> bool {
        let mut any = false;
        while self.sends.len() < self.max_sends {
            let Some((owner, buf, t)) = self.pending.pop_front() else {
                break;
            };
            let from_conn = owner.is_some() || self.shutting_down;
            self.send_transmit(owner, buf, t, from_conn);
            any = true;
        }
        if self.sends.len() < self.max_sends {
            if let Some((buf, dst)) = self.held.take() {
                self.start_send(None, buf, dst, None);
            }
        }
        any
    }

    /// Sends (or, under fault injection, drops or holds) one transmit;
    /// `owner` is the connection it counts against.
    pub(super) fn send_transmit(
        &mut self,
        owner: Option<Arc<ConnInner>>,
        mut buf: Vec<u8>,
        t: Transmit,
        from_conn: bool,
    ) {
        buf.truncate(t.size);
        if from_conn && self.faults.is_active() {
            match self.faults.egress(&self.shared.fault_counters) {
                Egress::Drop => {
                    self.release(owner, buf);
                    return;
                }
                Egress::Hold => {
                    // The held copy is the endpoint's from here on.
                    if let Some(owner) = owner {
                        owner.outbox_done(None);
                    }
                    if let Some((prev, dst)) = self.held.replace((buf, t.destination)) {
                        self.start_send(None, prev, dst, None);
                    }
                    return;
                }
                Egress::Send => {}
            }
        }
        let ecn = t.ecn.map(|e| e as u8);
        self.start_send_ecn(owner, buf, t.destination, t.segment_size, ecn);
        if from_conn {
            if let Some((prev, dst)) = self.held.take() {
                self.start_send(None, prev, dst, None);
            }
        }
    }

    /// A transmit is done: its buffer goes back to its connection (or the
    /// endpoint's pool).
    fn release(&mut self, owner: Option<Arc<ConnInner>>, buf: Vec<u8>) {
        match owner {
            Some(inner) => inner.outbox_done(Some(buf)),
            None => self.recycle(buf),
        }
    }

    pub(super) fn start_send(
        &mut self,
        owner: Option<Arc<ConnInner>>,
        buf: Vec<u8>,
        dst: SocketAddr,
        segment_size: Option<usize>,
    ) {
        self.start_send_ecn(owner, buf, dst, segment_size, None);
    }

    pub(super) fn start_send_ecn(
        &mut self,
        owner: Option<Arc<ConnInner>>,
        buf: Vec<u8>,
        dst: SocketAddr,
        segment_size: Option<usize>,
        ecn: Option<u8>,
    ) {
        self.shared.counters.count_send(buf.len(), segment_size);
        self.sends
            .push((self.udp.send(buf, dst, segment_size, ecn), owner));
    }

    pub(super) fn recycle(&mut self, mut buf: Vec<u8>) {
        if self.send_pool.len() < self.max_sends + 8 {
            buf.clear();
            self.send_pool.push(buf);
        }
    }

    pub(super) fn poll_sends(&mut self, cx: &mut Context<'_>) -> bool {
        let mut progress = false;
        let mut i = 0;
        while i < self.sends.len() {
            match self.sends[i].0.as_mut().poll(cx) {
                Poll::Ready(SendDone { res, buf }) => {
                    if res.is_err() {
                        self.shared
                            .counters
                            .send_errors
                            .fetch_add(1, Ordering::Relaxed);
                        // spargio may have turned GSO off for good.
                        self.shared
                            .max_gso_segments
                            .store(self.udp.max_segments(), Ordering::Relaxed);
                    }
                    let (op, owner) = self.sends.swap_remove(i);
                    drop(op);
                    self.release(owner, buf);
                    progress = true;
                }
                Poll::Pending => i += 1,
            }
        }
        progress
    }
}

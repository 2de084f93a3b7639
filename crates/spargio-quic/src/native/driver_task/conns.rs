//! Driving connections (endpoint events, transmits, application events,
//! wakers) and the driver's single timer.

use std::cmp::Reverse;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::task::Context;
use std::time::Instant;

use quinn_proto::{Event, StreamEvent};
use spargio::time::Sleep;

use super::{peer_certs, DriverTask, MAX_GSO_BYTES};
use crate::native::conn::wake_counted;
use crate::native::shared::lock;
use crate::native::types::NativeProtoEvent;
use crate::native::waiters::WaitKind;

impl DriverTask {
    // ===== connections =====

    /// Drives queued connections while send capacity lasts.
    pub(super) fn drive_queued(&mut self) -> bool {
        let mut any = false;
        while self.sends.len() < self.max_sends {
            let Some(ch) = self.to_drive.pop_front() else {
                break;
            };
            let Some(meta) = self.conns.get_mut(&ch) else {
                continue;
            };
            meta.queued = false;
            self.drive(ch);
            any = true;
        }
        if let Some((buf, dst)) = self.held.take() {
            self.start_send(buf, dst, None);
        }
        any
    }

    /// One connection: endpoint events, transmits, application events,
    /// then its next timeout. Wakers are collected and called after the
    /// connection's lock is released.
    pub(super) fn drive(&mut self, ch: usize) {
        let Some(meta) = self.conns.get(&ch) else {
            return;
        };
        let inner = meta.inner.clone();
        let now = Instant::now();
        let max_segments = if self.faults.is_active() {
            1
        } else {
            self.udp.max_segments()
        };
        let mut established_now = false;
        let mut lost = false;
        let mut drained = false;
        let mut send_blocked = false;
        let deadline;
        {
            let mut st = inner.lock();
            // A GSO send's datagrams must fit one UDP payload (64 KiB).
            let max_segments =
                max_segments.min((MAX_GSO_BYTES / st.conn.current_mtu() as usize).max(1));
            for _ in 0..2 {
                while let Some(ev) = st.conn.poll_endpoint_events() {
                    drained |= ev.is_drained();
                    if let Some(back) = self.endpoint.handle_event(inner.ch, ev) {
                        st.conn.handle_event(back);
                    }
                }
                loop {
                    if self.sends.len() >= self.max_sends {
                        send_blocked = true;
                        break;
                    }
                    let mut buf = self.send_pool.pop().unwrap_or_default();
                    buf.clear();
                    match st.conn.poll_transmit(now, max_segments, &mut buf) {
                        Some(t) => self.send_transmit(buf, t, true),
                        None => {
                            self.send_pool.push(buf);
                            break;
                        }
                    }
                }
                let mut events = false;
                while let Some(ev) = st.conn.poll() {
                    events = true;
                    match ev {
                        Event::Connected => {
                            st.established = true;
                            established_now = true;
                            st.peer_certs = peer_certs(&st.conn);
                            st.waiters.take(WaitKind::Connected, &mut self.wakers);
                        }
                        Event::ConnectionLost { reason } => {
                            if st.error.is_none() {
                                st.error = Some(reason);
                            }
                            lost = true;
                            st.waiters.take_all(&mut self.wakers);
                        }
                        Event::Stream(se) => {
                            let kind = match se {
                                StreamEvent::Opened { dir } => WaitKind::Accept(dir),
                                StreamEvent::Readable { id } => WaitKind::Read(id),
                                StreamEvent::Writable { id }
                                | StreamEvent::Finished { id }
                                | StreamEvent::Stopped { id, .. } => WaitKind::Write(id),
                                StreamEvent::Available { dir } => WaitKind::Open(dir),
                            };
                            st.waiters.take(kind, &mut self.wakers);
                        }
                        Event::DatagramReceived => {
                            st.waiters.take(WaitKind::Datagram, &mut self.wakers)
                        }
                        Event::DatagramsUnblocked | Event::HandshakeDataReady => {}
                    }
                }
                if !events {
                    break;
                }
            }
            // Application events can queue endpoint events (the
            // `Drained` one included): forward them before deciding.
            while let Some(ev) = st.conn.poll_endpoint_events() {
                drained |= ev.is_drained();
                if let Some(back) = self.endpoint.handle_event(inner.ch, ev) {
                    st.conn.handle_event(back);
                }
            }
            if st.error.is_some() {
                // Locally closed connections have no ConnectionLost event:
                // wake whatever registered since.
                st.waiters.take_all(&mut self.wakers);
            }
            deadline = st.conn.poll_timeout();
        }
        wake_counted(&self.shared, &mut self.wakers);
        let id = inner.id;
        let Some(meta) = self.conns.get_mut(&ch) else {
            return;
        };
        if established_now {
            self.shared
                .counters
                .connections_established
                .fetch_add(1, Ordering::Relaxed);
            self.shared
                .event(NativeProtoEvent::ConnectionEstablished { connection_id: id });
            if meta.accept_reserved {
                meta.accept_reserved = false;
                let panics = self.shared.accept.push_ready(inner.clone());
                self.shared
                    .counters
                    .waker_panics
                    .fetch_add(panics as u64, Ordering::Relaxed);
            }
        }
        if (lost || drained) && meta.accept_reserved {
            meta.accept_reserved = false;
            self.shared.accept.release();
        }
        if drained {
            self.remove(ch);
            return;
        }
        if meta.deadline != deadline {
            meta.deadline = deadline;
            if let Some(d) = deadline {
                self.deadlines.push(Reverse((d, ch)));
            }
        }
        if send_blocked {
            self.queue(ch);
        }
    }

    pub(super) fn remove(&mut self, ch: usize) {
        let Some(meta) = self.conns.remove(&ch) else {
            return;
        };
        let id = meta.inner.id;
        lock(&self.shared.registry).remove(&id);
        self.shared
            .connections
            .store(self.conns.len(), Ordering::Relaxed);
        self.shared
            .counters
            .connections_closed
            .fetch_add(1, Ordering::Relaxed);
        self.shared
            .event(NativeProtoEvent::ConnectionClosed { connection_id: id });
        if self.conns.is_empty() {
            self.shared.wake_idle();
        }
    }

    // ===== timers =====

    /// Fires due connection timers; returns whether any fired.
    pub(super) fn fire_timers(&mut self) -> bool {
        let now = Instant::now();
        let mut fired = 0;
        while let Some(&Reverse((at, ch))) = self.deadlines.peek() {
            if at > now {
                break;
            }
            self.deadlines.pop();
            let Some(meta) = self.conns.get_mut(&ch) else {
                continue;
            };
            if meta.deadline != Some(at) {
                continue; // stale entry: the deadline moved since
            }
            meta.deadline = None;
            meta.inner.lock().conn.handle_timeout(now);
            fired += 1;
            self.queue(ch);
        }
        if fired > 0 {
            self.shared
                .counters
                .timer_fires
                .fetch_add(1, Ordering::Relaxed);
            lock(&self.shared.timer).fires += 1;
            self.shared
                .event(NativeProtoEvent::TimeoutFired { connections: fired });
        }
        // Stale entries pile up when deadlines move; rebuild when they
        // outnumber live ones.
        if self.deadlines.len() > 4 * self.conns.len() + 64 {
            let live: Vec<_> = self
                .conns
                .iter()
                .filter_map(|(&ch, m)| m.deadline.map(|d| Reverse((d, ch))))
                .collect();
            self.deadlines = live.into();
        }
        fired > 0
    }

    /// Arms the single timer for the earliest live deadline; returns
    /// whether it is already due.
    pub(super) fn poll_timer(&mut self, cx: &mut Context<'_>) -> bool {
        let next = loop {
            match self.deadlines.peek() {
                Some(&Reverse((at, ch)))
                    if self.conns.get(&ch).and_then(|m| m.deadline) != Some(at) =>
                {
                    self.deadlines.pop();
                }
                Some(&Reverse((at, _))) => break Some(at),
                None => break None,
            }
        };
        lock(&self.shared.timer).deadline = next;
        let Some(at) = next else {
            self.timer = None;
            return false;
        };
        let timer = self.timer.get_or_insert_with(|| Sleep::until(at));
        if timer.deadline() != at {
            timer.reset(at);
        }
        Pin::new(timer).poll(cx).is_ready()
    }

    pub(super) fn finish(&mut self) {
        if self.finished {
            return;
        }
        self.finished = true;
        // Release: pairs with `is_closed`'s Acquire.
        self.shared.closed.store(true, Ordering::Release);
        let inners: Vec<_> = self.conns.drain().map(|(_, m)| m.inner).collect();
        for inner in inners {
            {
                let mut st = inner.lock();
                if st.error.is_none() {
                    st.error = Some(quinn_proto::ConnectionError::LocallyClosed);
                }
                st.waiters.take_all(&mut self.wakers);
            }
            wake_counted(&self.shared, &mut self.wakers);
        }
        lock(&self.shared.registry).clear();
        self.shared.connections.store(0, Ordering::Relaxed);
        self.shared.wake_idle();
        self.shared.accept.driver_stopped();
    }
}

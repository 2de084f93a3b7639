//! The endpoint task's side of its connections: registering them (and
//! spawning their connection tasks), what their tasks hand back (endpoint
//! events, transmits), removal, and the end of the driver.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use quinn_proto::{ConnectionHandle, EndpointEvent};

use super::{apply_windows, DriverTask, NEXT_CONNECTION_ID};
use crate::native::conn::{wake_counted, ConnInner};
use crate::native::conn_task;
use crate::native::shared::{lock, Outgoing};
use crate::native::types::NativeProtoEvent;

impl DriverTask {
    /// Takes a new connection and starts its task.
    pub(super) fn register(
        &mut self,
        ch: ConnectionHandle,
        conn: quinn_proto::Connection,
        accept_reserved: bool,
    ) -> Arc<ConnInner> {
        // Relaxed: a unique id.
        let id = NEXT_CONNECTION_ID.fetch_add(1, Ordering::Relaxed);
        let inner = ConnInner::new(id, ch, conn, self.shared.clone());
        inner
            .accept_reserved
            .store(accept_reserved, Ordering::Relaxed);
        apply_windows(&inner, &self.tuning);
        lock(&self.shared.registry).insert(id, Arc::downgrade(&inner));
        self.conns.insert(ch.0, inner.clone());
        self.shared
            .connections
            .store(self.conns.len(), Ordering::Relaxed);
        let c = &self.shared.counters;
        c.registrations.fetch_add(1, Ordering::Relaxed);
        self.shared
            .event(NativeProtoEvent::ConnectionRegistered { connection_id: id });
        let src = {
            // Made once per driver (not after `finish`, which drops it):
            // connection tasks `dup` it only for a shard that has no
            // socket of this driver yet.
            let mut dup = lock(&self.shared.socket_dup);
            if dup.is_none() && !self.finished {
                *dup = self.udp.dup().ok().map(Arc::new);
            }
            dup.clone()
        };
        let offload = self.udp.offload();
        match conn_task::spawn(&self.handle, inner.clone(), src, offload) {
            Ok(()) => {}
            Err(_) => {
                // The runtime is shutting down: nothing will drive it.
                inner.stop();
                self.fail(&inner);
            }
        }
        inner
    }

    /// Whether `inner` is the connection registered under its handle.
    fn is_current(&self, inner: &Arc<ConnInner>) -> bool {
        self.conns
            .get(&inner.ch.0)
            .is_some_and(|c| Arc::ptr_eq(c, inner))
    }

    /// Takes what connection tasks handed over: endpoint events now,
    /// transmits into the send queue.
    pub(super) fn take_outgoing(&mut self) -> bool {
        let mut progress = false;
        let mut items = std::mem::take(&mut self.out_buf);
        for (inner, item) in items.drain(..) {
            progress = true;
            match item {
                Outgoing::Transmit(buf, t) => self.pending.push_back((Some(inner), buf, t)),
                Outgoing::Event(ev) => {
                    self.on_endpoint_event(&inner, ev);
                    inner.outbox_done(None);
                }
            }
        }
        self.out_buf = items;
        progress
    }

    fn on_endpoint_event(&mut self, inner: &Arc<ConnInner>, ev: EndpointEvent) {
        if !self.is_current(inner) {
            return;
        }
        let drained = ev.is_drained();
        if let Some(back) = self.endpoint.handle_event(inner.ch, ev) {
            inner.deliver(back);
        }
        if drained {
            self.remove(inner.ch.0);
        }
    }

    pub(super) fn remove(&mut self, ch: usize) {
        let Some(inner) = self.conns.remove(&ch) else {
            return;
        };
        inner.stop();
        if inner.accept_reserved.swap(false, Ordering::AcqRel) {
            self.shared.accept.release();
        }
        let id = inner.id;
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

    /// Shutdown: stops every connection task and produces the close
    /// packets here (their tasks are gone), sent before the task ends.
    pub(super) fn flush_closing(&mut self) {
        let now = std::time::Instant::now();
        let inners: Vec<_> = self.conns.values().cloned().collect();
        for inner in inners {
            inner.stop();
            let mut st = inner.lock();
            loop {
                let mut buf = self.send_pool.pop().unwrap_or_default();
                buf.clear();
                match st.conn.poll_transmit(now, 1, &mut buf) {
                    Some(t) => self.pending.push_back((None, buf, t)),
                    None => {
                        self.send_pool.push(buf);
                        break;
                    }
                }
            }
        }
    }

    /// Fails what waits on `inner` (the driver is ending).
    fn fail(&mut self, inner: &Arc<ConnInner>) {
        {
            let mut st = inner.lock();
            if st.error.is_none() {
                st.error = Some(quinn_proto::ConnectionError::LocallyClosed);
            }
            st.waiters.take_all(&mut self.wakers);
        }
        wake_counted(&self.shared, &mut self.wakers);
    }

    pub(super) fn finish(&mut self) {
        if self.finished {
            return;
        }
        self.finished = true;
        // Release: pairs with `is_closed`'s Acquire.
        self.shared.closed.store(true, Ordering::Release);
        let inners: Vec<_> = self.conns.drain().map(|(_, c)| c).collect();
        for inner in inners {
            inner.stop();
            self.fail(&inner);
        }
        lock(&self.shared.registry).clear();
        lock(&self.shared.socket_dup).take();
        self.shared.connections.store(0, Ordering::Relaxed);
        self.shared.wake_idle();
        self.shared.accept.driver_stopped();
    }
}

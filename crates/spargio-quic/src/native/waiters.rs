//! The wakers of operations waiting on one connection, and the bound on
//! how many may wait.

use std::io;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::Waker;

use quinn_proto::{Dir, StreamId};

/// What a waiting operation waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WaitKind {
    /// The handshake to complete (client connect).
    Connected,
    /// Data, FIN or reset on a receive stream.
    Read(StreamId),
    /// Send credit, or a stop, on a send stream.
    Write(StreamId),
    /// A peer-opened stream of this direction.
    Accept(Dir),
    /// Stream credit to open a stream of this direction.
    Open(Dir),
    /// A received datagram.
    Datagram,
    /// The connection to close.
    Closed,
    /// Every finished send stream to be acknowledged in full
    /// (`ConnState::unacked`).
    Acked,
}

/// A unique key per waiting future (so a re-poll replaces its own waker
/// instead of counting twice). Zero means "not registered yet".
pub(crate) fn next_wait_key() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    // Relaxed: only uniqueness matters, nothing is published through it.
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// The registered waiters of one connection (or one accept queue),
/// bounded by `max_inflight_ops`: registering one more gives
/// `WouldBlock`. A linear list: the count is small by construction.
///
/// [`WaitKind::Closed`] waiters are exempt from the bound: only the local
/// user creates them (`closed()`; a peer cannot make more of them), each
/// is removed when its future completes or is dropped, and `closed()`
/// has no error to report (quinn's signature), so it must always be able
/// to register.
#[derive(Debug)]
pub(crate) struct Waiters {
    entries: Vec<(u64, WaitKind, Waker)>,
    cap: usize,
    /// Entries of kind `Closed` (not counted against `cap`).
    closed: usize,
}

impl Waiters {
    pub(crate) fn new(cap: usize) -> Waiters {
        Waiters {
            entries: Vec::new(),
            cap: cap.max(1),
            closed: 0,
        }
    }

    /// Registers (or refreshes) the waker of the future with `key`.
    /// Over the bound it returns `WouldBlock` and registers nothing.
    pub(crate) fn register(&mut self, key: u64, kind: WaitKind, waker: &Waker) -> io::Result<()> {
        if let Some(entry) = self.entries.iter_mut().find(|e| e.0 == key) {
            let was_closed = entry.1 == WaitKind::Closed;
            let is_closed = kind == WaitKind::Closed;
            entry.1 = kind;
            if !entry.2.will_wake(waker) {
                entry.2 = waker.clone();
            }
            match (was_closed, is_closed) {
                (true, false) => self.closed -= 1,
                (false, true) => self.closed += 1,
                _ => {}
            }
            return Ok(());
        }
        if kind == WaitKind::Closed {
            self.closed += 1;
            self.entries.push((key, kind, waker.clone()));
            return Ok(());
        }
        if self.entries.len() - self.closed >= self.cap {
            return Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                format!(
                    "spargio-quic: {} operations already waiting (max_inflight_ops)",
                    self.cap
                ),
            ));
        }
        self.entries.push((key, kind, waker.clone()));
        Ok(())
    }

    /// Forgets the future with `key` (it completed or was dropped).
    pub(crate) fn remove(&mut self, key: u64) {
        if let Some(i) = self.entries.iter().position(|e| e.0 == key) {
            if self.entries.swap_remove(i).1 == WaitKind::Closed {
                self.closed -= 1;
            }
        }
    }

    /// Moves the wakers waiting for `kind` into `out`.
    pub(crate) fn take(&mut self, kind: WaitKind, out: &mut Vec<Waker>) {
        let mut i = 0;
        while i < self.entries.len() {
            if self.entries[i].1 == kind {
                if kind == WaitKind::Closed {
                    self.closed -= 1;
                }
                out.push(self.entries.swap_remove(i).2);
            } else {
                i += 1;
            }
        }
    }

    /// Moves every waker into `out` (the connection closed).
    pub(crate) fn take_all(&mut self, out: &mut Vec<Waker>) {
        self.closed = 0;
        out.extend(self.entries.drain(..).map(|e| e.2));
    }

    /// How many futures are registered.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }
}

/// Wakes each waker, outside any lock (the caller has released it). A
/// waker is user code (a foreign executor's): a panic in it is caught and
/// counted so it cannot unwind through the driver and stop the shard.
pub(crate) fn wake_all(wakers: &mut Vec<Waker>) -> usize {
    let mut panics = 0;
    for waker in wakers.drain(..) {
        if catch_unwind(AssertUnwindSafe(|| waker.wake())).is_err() {
            panics += 1;
        }
    }
    panics
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::Waker;

    #[test]
    fn the_bound_gives_would_block_and_re_registration_does_not_count() {
        let mut w = Waiters::new(2);
        let waker = Waker::noop();
        w.register(1, WaitKind::Datagram, waker).unwrap();
        w.register(1, WaitKind::Datagram, waker).unwrap();
        w.register(2, WaitKind::Connected, waker).unwrap();
        let err = w.register(3, WaitKind::Datagram, waker).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::WouldBlock);
        w.remove(1);
        w.register(3, WaitKind::Connected, waker).unwrap();
        let mut out = Vec::new();
        w.take(WaitKind::Connected, &mut out);
        assert_eq!(out.len(), 2);
        assert_eq!(w.len(), 0);
    }

    #[test]
    fn closed_waiters_are_exempt_from_the_bound() {
        let mut w = Waiters::new(1);
        let waker = Waker::noop();
        w.register(1, WaitKind::Datagram, waker).unwrap();
        for key in 2..10 {
            w.register(key, WaitKind::Closed, waker).unwrap();
        }
        assert_eq!(
            w.register(10, WaitKind::Connected, waker)
                .unwrap_err()
                .kind(),
            io::ErrorKind::WouldBlock
        );
        // Removing Closed waiters frees no bounded room; removing the
        // bounded one does.
        w.remove(2);
        assert!(w.register(10, WaitKind::Connected, waker).is_err());
        w.remove(1);
        w.register(10, WaitKind::Connected, waker).unwrap();
        let mut out = Vec::new();
        w.take(WaitKind::Closed, &mut out);
        assert_eq!(out.len(), 7);
        assert_eq!(w.len(), 1);
        assert!(w.register(11, WaitKind::Datagram, waker).is_err());
    }
}

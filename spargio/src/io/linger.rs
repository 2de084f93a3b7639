//! A write-behind send that outlives its [`Compat`](super::Compat).
//!
//! `Compat`'s write reports bytes accepted once they are copied into the
//! adaptor and a send of them is in flight (`compat.rs`, "Write"). A
//! caller may then drop the adaptor without flushing, as it would drop a
//! socket whose kernel buffer still holds its last bytes: the kernel sends
//! those after the close. So do we:
//!
//! 1. The send is detached (`Op::detach`): not cancelled, nobody waits
//!    for it. It holds its buffer and the fd, so the socket is closed only
//!    after its final completion, and the peer sees the end of stream
//!    after the last byte.
//! 2. It is bounded, as the kernel bounds an orphaned socket's data: a
//!    timer on the session shard cancels it after [`LINGER`] (a peer that
//!    never reads), and at most [`MAX_LINGERING`] sends linger in a
//!    process; past that a dropped adaptor's send is cancelled at once.
//! 3. A short send goes on with the rest, as the adaptor's flush would
//!    have. A send that ends otherwise without every byte taken
//!    (cancelled, the peer gone) has no one left to report to: the connection is
//!    reset (`SO_LINGER` 0 for the close), so the peer sees an error, never
//!    a clean end of stream with bytes missing; and every later send on the
//!    stream (after `into_inner`, or through a clone) fails, so none leaves
//!    a gap in the stream.
//!
//! 4. While it runs, every other send on the stream waits for it (the
//!    fd's send gate, `op/shared_fd.rs`): a write through the stream
//!    after `into_inner`, or through a new adaptor, never overtakes it.
//!
//! A runtime that shuts down cancels a lingering send like any other
//! operation in flight, with the same reset.

use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::buf::{IoBuf, Slice};
use crate::driver::OpKey;
use crate::net::stream::StreamCore;
use crate::op::send::{Send as SendOp, SendAll};
use crate::op::{Lane, Op, SharedFd};
use crate::shard_id::ShardId;

/// How long a dropped adaptor's send may wait for its peer to read.
pub(crate) const LINGER: Duration = Duration::from_secs(60);

/// Sends that may linger at once in a process (64 KiB each at most).
pub(crate) const MAX_LINGERING: usize = 1024;

static LINGERING: AtomicUsize = AtomicUsize::new(0);

/// A detached send's duty at its end (module docs, step 3), and its place
/// under [`MAX_LINGERING`] while it lingers.
struct Lingering {
    counted: bool,
}

impl Lingering {
    /// Takes a place under the bound; `counted: false` when none is left.
    fn new() -> Lingering {
        // AcqRel/Acquire: a count only; nothing else is published by it.
        let counted = LINGERING
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < MAX_LINGERING).then_some(n + 1)
            })
            .is_ok();
        Lingering { counted }
    }

    /// The send ended: `sent` of `total` bytes taken. False when bytes
    /// were left unsent: the connection is then reset at its close.
    fn finish(self, fd: &SharedFd, sent: &io::Result<usize>, total: usize) -> bool {
        if matches!(sent, Ok(n) if *n >= total) {
            return true;
        }
        reset_on_close(fd);
        false
    }
}

impl Drop for Lingering {
    fn drop(&mut self) {
        if self.counted {
            LINGERING.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// Where a lingering send is, for its timer's cancel.
type Place = Arc<Mutex<Option<(ShardId, OpKey)>>>;

/// Lets `op`, the send in flight of an adaptor being dropped, finish
/// (module docs).
pub(super) fn linger(core: &StreamCore, op: Op<SendAll<Slice<Vec<u8>>>>) {
    let lingering = Lingering::new();
    let counted = lingering.counted;
    let place: Place = Arc::default();
    let shared = core.handle.shared.clone();
    // The bound in time (step 2): a task that cancels the send after
    // `LINGER`, aborted when the send ends first. Refused only while the
    // runtime shuts down, which cancels the send itself.
    let timer = counted
        .then(|| {
            let place = place.clone();
            let shared = shared.clone();
            core.handle
                .spawn_pinned(core.session, async move {
                    crate::time::sleep(LINGER).await;
                    // A stale key (the send ended) cancels nothing.
                    if let Some((shard, key)) = lock(&place).take() {
                        shared.cancel_op(shard, key);
                    }
                })
                .ok()
        })
        .flatten();
    let linger = Linger {
        lingering,
        // Later sends on the stream wait for this one (step 4), until
        // `Linger` is dropped (a send refused at submission completes
        // without calling `finish`).
        gate: GateHeld::new(&core.fd),
        core: core.clone(),
        place: place.clone(),
        deadline: Instant::now() + LINGER,
        _timer: Timer(timer),
    };
    linger.detach(op);
    if !counted {
        if let Some((shard, key)) = lock(&place).take() {
            shared.cancel_op(shard, key);
        }
    }
}

/// A lingering send's timer task, aborted when the send's `Linger` goes:
/// no task outlives the send it bounds.
struct Timer(Option<crate::task::JoinHandle<()>>);

impl Drop for Timer {
    fn drop(&mut self) {
        if let Some(timer) = &self.0 {
            timer.abort();
        }
    }
}

fn lock(place: &Place) -> std::sync::MutexGuard<'_, Option<(ShardId, OpKey)>> {
    // Nothing foreign runs under the lock: a poisoned one is whole.
    place.lock().unwrap_or_else(|e| e.into_inner())
}

/// One lingering send and what it holds (module docs).
struct Linger {
    lingering: Lingering,
    gate: GateHeld,
    core: StreamCore,
    place: Place,
    deadline: Instant,
    _timer: Timer,
}

impl Linger {
    fn detach(self, op: Op<SendAll<Slice<Vec<u8>>>>) {
        let place = self.place.clone();
        let at = op.detach(move |out| self.finish(out));
        // Set after the send may have ended already: the timer then
        // cancels a stale key, which cancels nothing.
        *lock(&place) = at;
    }

    /// The send ended: a short one goes on with the rest (as `Compat`'s
    /// flush would have), anything else is the end (step 3).
    fn finish(mut self, (sent, buf): (io::Result<usize>, Slice<Vec<u8>>)) {
        let total = buf.bytes_init();
        if let Ok(n) = sent {
            if n > 0 && n < total && Instant::now() < self.deadline {
                let (begin, end) = (buf.begin(), buf.end());
                let rest = buf.into_inner().slice(begin + n..end);
                let op = Op::submit(
                    &self.core.handle.shared,
                    Lane::Shard(self.core.session),
                    SendAll(SendOp {
                        fd: self.core.fd.clone(),
                        buf: rest,
                    }),
                );
                self.detach(op);
                return;
            }
        }
        let whole = self.lingering.finish(&self.gate.fd, &sent, total);
        // Later sends fail rather than leave a gap (step 3).
        self.gate.broken = !whole;
    }
}

/// A place in the fd's send gate, given back when dropped: broken when
/// the send ended with bytes unsent, or never ran to its end (a send
/// refused at submission, a runtime shutting down).
struct GateHeld {
    fd: SharedFd,
    broken: bool,
}

impl GateHeld {
    fn new(fd: &SharedFd) -> GateHeld {
        fd.send_gate().hold();
        GateHeld {
            fd: fd.clone(),
            broken: true,
        }
    }
}

impl Drop for GateHeld {
    fn drop(&mut self) {
        self.fd.send_gate().release(self.broken);
    }
}

/// Makes the socket's close reset the connection.
fn reset_on_close(fd: &SharedFd) {
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: `fd` is open (the `SharedFd` borrow keeps it so); the option
    // value is a local struct of the length passed.
    unsafe {
        libc::setsockopt(
            fd.raw(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
}

#[cfg(test)]
mod tests {
    use std::io::Read;
    use std::pin::Pin;
    use std::sync::atomic::Ordering;
    use std::task::{Context, Poll, Waker};
    use std::time::Duration;

    use super::{LINGERING, MAX_LINGERING};
    use crate::io::Compat;
    use crate::net::UnixStream;

    #[test]
    fn a_send_that_could_not_linger_fails_every_later_send_on_the_stream() {
        crate::block_on(crate::run(|handle| async move {
            let (a, mut b) = std::os::unix::net::UnixStream::pair().unwrap();
            let mut c = Compat::new(UnixStream::from_std(&handle, a).unwrap());
            // Writes until one is refused: a send is then in flight.
            let chunk = vec![7u8; 64 * 1024];
            let mut accepted = 0;
            loop {
                let mut cx = Context::from_waker(Waker::noop());
                match futures_io::AsyncWrite::poll_write(Pin::new(&mut c), &mut cx, &chunk) {
                    Poll::Ready(Ok(n)) => accepted += n,
                    Poll::Ready(Err(e)) => panic!("write failed: {e}"),
                    Poll::Pending => break,
                }
            }
            // No place left under the bound: the unwrapped adaptor's send
            // is cancelled at once, before the peer read its bytes.
            LINGERING.fetch_add(MAX_LINGERING, Ordering::AcqRel);
            let stream = c.into_inner();
            LINGERING.fetch_sub(MAX_LINGERING, Ordering::AcqRel);
            // (Bounded: were it let through, it would wait for a peer that
            // reads nothing yet.)
            let res = crate::time::timeout(Duration::from_secs(10), stream.write_all(b"tail"))
                .await
                .expect("the send waited instead of failing");
            let err = res.expect_err("a later send would leave a gap before its bytes");
            assert_eq!(err.kind(), std::io::ErrorKind::BrokenPipe);
            drop(stream);
            let got = handle
                .spawn_blocking(move || {
                    let mut got = Vec::new();
                    b.read_to_end(&mut got).map(|_| got.len())
                })
                .unwrap()
                .await
                .unwrap();
            // Whatever arrived is a prefix of what was accepted, or the
            // connection was reset: never the tail after a gap.
            if let Ok(n) = got {
                assert!(
                    n < accepted,
                    "{n} of {accepted}: the cancelled send finished?"
                );
            }
        }))
        .unwrap();
    }
}

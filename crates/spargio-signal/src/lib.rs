//! Unix signals for spargio, read through the ring.
//!
//! ```
//! # spargio::block_on(spargio::run(|handle| async move {
//! let mut term = spargio_signal::signal(&handle, &[libc::SIGTERM, libc::SIGINT]).unwrap();
//! // ... serve; then, in a `select` with the accept loop:
//! # // SAFETY: kill(2) on this process's own pid, for a subscribed signal.
//! # unsafe { libc::kill(libc::getpid(), libc::SIGTERM) };
//! let sig = term.recv().await.unwrap();
//! assert_eq!(sig, libc::SIGTERM);
//! # })).unwrap();
//! ```
//!
//! # Design
//!
//! The process has one `signalfd` whose mask is the union of what is
//! subscribed. Each [`SignalStream::recv`] that has nothing queued puts a
//! `READ` of that descriptor in flight on its runtime's ring, so a waiting
//! subscriber costs one pending operation, no thread and no CPU. Whatever
//! a read takes goes to every subscriber of that signal, even if the `recv`
//! that issued it was dropped meanwhile. Details in `source.rs`.
//!
//! # Signal masks
//!
//! A signalfd sees a signal only where the signal is blocked, and a signal
//! sent to the process (`kill`) goes to any thread that does not block it.
//! spargio-signal keeps every thread's mask right without a helper thread:
//!
//! * the thread that subscribes first blocks the signal, and threads it
//!   starts afterwards inherit that: a runtime it builds later starts its
//!   shards with the signal blocked, and blocking-pool threads started by
//!   a shard that blocks it do too;
//! * every other thread, including the runtime's shards and threads you
//!   started earlier, blocks it the first time the kernel delivers it
//!   there: a forwarding handler installed for the signal adds it to that
//!   thread's mask and raises it again, and the signal ends up at the
//!   signalfd. The first signal after a subscription therefore always
//!   arrives.
//!
//! When the last subscription to a signal (stream or [`SignalHub`]) is
//! dropped, a signal of that kind that arrived but was never read is taken
//! from the signalfd (it was the subscription's; handed to the default
//! action it would usually end the process), the signal's previous
//! disposition comes back, and the dropping thread's mask is as it was
//! before the subscription. Threads that a
//! forward blocked keep the signal blocked: a thread cannot change another
//! thread's mask.
//!
//! # Coalescing
//!
//! The kernel keeps a standard (non-real-time) signal pending at most once:
//! a burst of one kind sent faster than it is read arrives as fewer
//! deliveries, possibly one. Each kind in a burst still arrives at least
//! once after it was sent, and a stream's queue holds each kind at most
//! once, so a stream that is not read never grows.
#![cfg_attr(not(target_os = "linux"), doc = "spargio-signal runs on Linux only.")]
#![warn(
    missing_docs,
    unreachable_pub,
    missing_debug_implementations,
    unsafe_op_in_unsafe_fn,
    clippy::undocumented_unsafe_blocks
)]

#[cfg(not(target_os = "linux"))]
compile_error!("spargio-signal needs Linux (signalfd and io_uring)");

mod hub;
mod mask;
mod source;
mod stream;

pub use hub::SignalHub;
pub use stream::SignalStream;

/// The README's code blocks, run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

use std::io;

use spargio::RuntimeHandle;

/// A stream of `signals` (numbers from `libc`, e.g. `libc::SIGTERM`),
/// read on `handle`'s runtime. `InvalidInput` for a number that is not a
/// signal or cannot be caught.
pub fn signal(handle: impl AsRef<RuntimeHandle>, signals: &[i32]) -> io::Result<SignalStream> {
    SignalStream::new(handle.as_ref(), mask::SignalSet::new(signals)?)
}

/// A stream of `SIGINT` (Ctrl-C at a terminal).
pub fn ctrl_c(handle: impl AsRef<RuntimeHandle>) -> io::Result<SignalStream> {
    signal(handle, &[libc::SIGINT])
}

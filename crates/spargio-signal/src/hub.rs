//! `SignalHub`: one set of signals, any number of subscribers.

use std::io;

use spargio::RuntimeHandle;

use crate::set::SignalSet;
use crate::stream::SignalStream;

/// A broadcast point for a set of signals: every stream it hands out sees
/// every signal of the set raised after that stream was created.
///
/// The hub holds a subscription of its own, so the signals stay routed to
/// the subscriptions (and their previous disposition stays replaced) for
/// as long as the hub or any of its streams lives.
///
/// ```
/// # spargio::block_on(spargio::run(|handle| async move {
/// use spargio_signal::SignalHub;
///
/// let hub = SignalHub::new(&handle, &[libc::SIGUSR1]).unwrap();
/// let mut a = hub.subscribe().unwrap();
/// let mut b = hub.subscribe().unwrap();
/// // SAFETY: kill(2) on this process's own pid, for a subscribed signal.
/// unsafe { libc::kill(libc::getpid(), libc::SIGUSR1) };
/// assert_eq!(a.recv().await.unwrap(), libc::SIGUSR1);
/// assert_eq!(b.recv().await.unwrap(), libc::SIGUSR1);
/// # })).unwrap();
/// ```
#[derive(Debug)]
pub struct SignalHub {
    handle: RuntimeHandle,
    set: SignalSet,
    /// Keeps the set subscribed while the hub lives.
    _own: SignalStream,
}

impl SignalHub {
    /// A hub for `signals` on `handle`'s runtime (where its streams' reads
    /// run). `InvalidInput` for a number that is not a signal or cannot be
    /// caught (`SIGKILL`, `SIGSTOP`, the fault signals).
    pub fn new(handle: impl AsRef<RuntimeHandle>, signals: &[i32]) -> io::Result<SignalHub> {
        let handle = handle.as_ref();
        let set = SignalSet::new(signals)?;
        Ok(SignalHub {
            handle: handle.clone(),
            set,
            _own: SignalStream::new(handle, set)?,
        })
    }

    /// A new stream of the hub's signals.
    pub fn subscribe(&self) -> io::Result<SignalStream> {
        SignalStream::new(&self.handle, self.set)
    }

    /// The hub's signals.
    pub fn signals(&self) -> Vec<i32> {
        self.set.iter().collect()
    }
}

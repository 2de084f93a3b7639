//! `SignalStream`: one subscriber's view of the signals it asked for.

use std::future::{poll_fn, Future};
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use spargio::RuntimeHandle;

use crate::set::SignalSet;
use crate::source::{self, Queue};

/// A subscription: every signal of its set raised from the moment it was
/// created, each kind queued at most once until received.
///
/// Created by [`signal`](crate::signal), [`ctrl_c`](crate::ctrl_c) or
/// [`SignalHub::subscribe`](crate::SignalHub::subscribe). Dropping the last
/// subscription to a signal gives it back its previous disposition (see
/// the [crate docs](crate#design)).
///
/// ```
/// # spargio::block_on(spargio::run(|handle| async move {
/// let mut stream = spargio_signal::signal(&handle, &[libc::SIGUSR2]).unwrap();
/// // SAFETY: kill(2) on this process's own pid, for a subscribed signal.
/// unsafe { libc::kill(libc::getpid(), libc::SIGUSR2) };
/// assert_eq!(stream.recv().await.unwrap(), libc::SIGUSR2);
/// # })).unwrap();
/// ```
#[derive(Debug)]
pub struct SignalStream {
    handle: RuntimeHandle,
    set: SignalSet,
    queue: Arc<Queue>,
}

impl SignalStream {
    pub(crate) fn new(handle: &RuntimeHandle, set: SignalSet) -> io::Result<SignalStream> {
        let queue = source::subscribe(set)?;
        Ok(SignalStream {
            handle: handle.clone(),
            set,
            queue,
        })
    }

    /// The signals this stream receives.
    pub fn signals(&self) -> Vec<i32> {
        self.set.iter().collect()
    }

    /// Waits for the next signal and returns its number.
    ///
    /// While it waits, a read of the handler's eventfd is in flight on
    /// this stream's runtime. Dropping the future cancels that read; a
    /// signal that arrived still reaches every subscriber.
    pub async fn recv(&mut self) -> io::Result<i32> {
        self.recv_matching(|_| true).await
    }

    /// Waits for the next signal that `matches` accepts. Signals it does
    /// not accept stay queued for a later `recv`.
    pub async fn recv_matching(&mut self, mut matches: impl FnMut(i32) -> bool) -> io::Result<i32> {
        let queue = self.queue.clone();
        let handle = self.handle.clone();
        let mut read: Option<Pin<Box<dyn Future<Output = io::Result<()>> + Send>>> = None;
        poll_fn(move |cx| loop {
            if let Some(sig) = queue.take(&mut matches, Some(cx.waker())) {
                return Poll::Ready(Ok(sig));
            }
            let fut = match read.as_mut() {
                Some(fut) => fut,
                None => {
                    // What arrived already, before waiting for more.
                    source::hand_out();
                    if let Some(sig) = queue.take(&mut matches, Some(cx.waker())) {
                        return Poll::Ready(Ok(sig));
                    }
                    match source::wait(&handle) {
                        Ok(fut) => read.insert(Box::pin(fut)),
                        Err(e) => return Poll::Ready(Err(e)),
                    }
                }
            };
            match fut.as_mut().poll(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(res) => {
                    read = None;
                    match res {
                        Ok(()) => {}
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => {}
                        Err(e) => return Poll::Ready(Err(e)),
                    }
                }
            }
        })
        .await
    }

    /// Like [`recv`](Self::recv), giving up after `timeout`: `None` if no
    /// signal came (or the read failed).
    pub async fn recv_timeout(&mut self, timeout: Duration) -> Option<i32> {
        spargio::timeout(timeout, self.recv()).await.ok()?.ok()
    }

    /// A signal that has arrived for this stream, without waiting: one
    /// already queued, or one the handler recorded and no reader has
    /// handed out yet (handed to every subscriber as `recv` would).
    pub fn try_recv(&mut self) -> Option<i32> {
        if let Some(sig) = self.queue.take(|_| true, None) {
            return Some(sig);
        }
        source::hand_out();
        self.queue.take(|_| true, None)
    }
}

impl Drop for SignalStream {
    fn drop(&mut self) {
        source::unsubscribe(self.set, &self.queue);
    }
}

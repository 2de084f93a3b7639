//! `JoinHandle` and `JoinError`.

use std::any::Any;
use std::fmt;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::ptr::NonNull;
use std::sync::Mutex;
use std::task::{Context, Poll};

use async_task::FallibleTask;

use super::harness::Panic;
use super::meta::TaskMeta;

/// An owned permission to await a task's output, or to abort it.
///
/// Awaiting yields `Ok(output)`, or `Err(JoinError)` when the task panicked
/// or was cancelled (aborted, or dropped by runtime shutdown). Dropping the
/// handle detaches the task: it keeps running.
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let rt = spargio::Runtime::builder().shards(2).build()?;
/// let handle = rt.handle();
/// let task = handle.spawn_stealable(async { 6 * 7 })?;
/// assert_eq!(spargio::block_on(task)?, 42);
/// # Ok(()) }
/// ```
pub struct JoinHandle<T> {
    task: Option<FallibleTask<Result<T, Panic>, TaskMeta>>,
    /// Points into the task's header, which `task` keeps alive.
    meta: NonNull<TaskMeta>,
}

// SAFETY: the handle only reads the output (a `T`, moved to the awaiting
// thread, hence `T: Send`) and the metadata, which is `Sync`.
unsafe impl<T: Send> Send for JoinHandle<T> {}
// SAFETY: `&JoinHandle` only allows `abort` and `is_finished`, which touch
// atomics in the metadata and task header.
unsafe impl<T: Send> Sync for JoinHandle<T> {}

impl<T> JoinHandle<T> {
    pub(crate) fn new(task: FallibleTask<Result<T, Panic>, TaskMeta>, meta: &TaskMeta) -> Self {
        JoinHandle {
            task: Some(task),
            meta: NonNull::from(meta),
        }
    }

    /// Cancels the task. It stops at its next scheduling point: its future
    /// is dropped on the shard that would have run it, and awaiting this
    /// handle yields a cancelled [`JoinError`] (unless it had already
    /// finished). Aborting a finished task does nothing.
    pub fn abort(&self) {
        if self.task.is_some() {
            // SAFETY: `task` is still held, so the allocation holding the
            // metadata is alive.
            unsafe { self.meta.as_ref() }.abort();
        }
    }

    /// True once the task has completed, panicked or been cancelled.
    pub fn is_finished(&self) -> bool {
        self.task.as_ref().is_none_or(|t| t.is_finished())
    }
}

impl<T> Future for JoinHandle<T> {
    type Output = Result<T, JoinError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let task = self
            .task
            .as_mut()
            .expect("JoinHandle polled after it returned its result");
        let out = match Pin::new(task).poll(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(Some(Ok(value))) => Ok(value),
            Poll::Ready(Some(Err(payload))) => Err(JoinError::panic(payload)),
            Poll::Ready(None) => Err(JoinError::cancelled()),
        };
        self.task = None;
        Poll::Ready(out)
    }
}

impl<T> Drop for JoinHandle<T> {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.detach();
        }
    }
}

impl<T> fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinHandle")
            .field("finished", &self.is_finished())
            .finish()
    }
}

/// Why a task produced no output.
pub struct JoinError {
    repr: Repr,
}

enum Repr {
    Cancelled,
    // Mutex only to make the error `Sync` (usable with `io::Error`, anyhow).
    Panic(Mutex<Panic>),
}

impl JoinError {
    pub(crate) fn cancelled() -> JoinError {
        JoinError {
            repr: Repr::Cancelled,
        }
    }

    fn panic(payload: Panic) -> JoinError {
        JoinError {
            repr: Repr::Panic(Mutex::new(payload)),
        }
    }

    /// The task was aborted or dropped by shutdown before it finished.
    pub fn is_cancelled(&self) -> bool {
        matches!(self.repr, Repr::Cancelled)
    }

    /// The task panicked.
    pub fn is_panic(&self) -> bool {
        matches!(self.repr, Repr::Panic(_))
    }

    /// The panic payload, for `std::panic::resume_unwind`.
    ///
    /// # Panics
    ///
    /// If the task was cancelled rather than panicking.
    pub fn into_panic(self) -> Box<dyn Any + Send + 'static> {
        self.try_into_panic()
            .unwrap_or_else(|_| panic!("JoinError::into_panic on a cancelled task"))
    }

    /// The panic payload, or the error back when the task was cancelled.
    pub fn try_into_panic(self) -> Result<Box<dyn Any + Send + 'static>, JoinError> {
        match self.repr {
            Repr::Panic(payload) => Ok(payload.into_inner().unwrap_or_else(|p| p.into_inner())),
            Repr::Cancelled => Err(self),
        }
    }

    fn panic_message(&self) -> Option<String> {
        let Repr::Panic(payload) = &self.repr else {
            return None;
        };
        let payload = payload.lock().unwrap_or_else(|p| p.into_inner());
        payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
    }
}

impl fmt::Display for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.repr, self.panic_message()) {
            (Repr::Cancelled, _) => write!(f, "task was cancelled"),
            (Repr::Panic(_), Some(msg)) => write!(f, "task panicked: {msg}"),
            (Repr::Panic(_), None) => write!(f, "task panicked"),
        }
    }
}

impl fmt::Debug for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.repr {
            Repr::Cancelled => write!(f, "JoinError::Cancelled"),
            Repr::Panic(_) => write!(f, "JoinError::Panic({:?})", self.panic_message()),
        }
    }
}

impl std::error::Error for JoinError {}

impl From<JoinError> for io::Error {
    fn from(err: JoinError) -> io::Error {
        io::Error::other(err)
    }
}

//! `CancellationToken`: a cloneable, hierarchical cancel signal.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::task::{Context, Poll, Waker};

use slab::Slab;

/// A cancellation signal shared by clones and inherited by child tokens.
///
/// Cancelling a token cancels its clones (they are the same token) and all
/// its descendants, and wakes every task waiting in
/// [`CancellationToken::cancelled`]; cancelling a child leaves its parent
/// alone. Waiting costs no allocation per waiter beyond a slot that is
/// freed when the wait ends or is dropped.
///
/// ```
/// use spargio::sync::CancellationToken;
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let rt = spargio::Runtime::builder().shards(2).build()?;
/// let token = CancellationToken::new();
/// let child = token.child_token();
/// let worker = rt.handle().spawn_stealable(async move {
///     child.cancelled().await;
///     "stopped"
/// })?;
/// token.cancel();
/// assert_eq!(spargio::block_on(worker)?, "stopped");
/// # Ok(()) }
/// ```
#[derive(Clone, Default)]
pub struct CancellationToken {
    node: Arc<Node>,
}

#[derive(Default)]
struct Node {
    cancelled: AtomicBool,
    state: Mutex<NodeState>,
}

#[derive(Default)]
struct NodeState {
    waiters: Slab<Waker>,
    children: Vec<Weak<Node>>,
}

impl Node {
    fn lock(&self) -> MutexGuard<'_, NodeState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl std::fmt::Debug for CancellationToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CancellationToken")
            .field("cancelled", &self.is_cancelled())
            .finish()
    }
}

impl CancellationToken {
    /// A new, uncancelled token.
    pub fn new() -> CancellationToken {
        CancellationToken::default()
    }

    /// A token cancelled whenever this one is (and also on its own).
    pub fn child_token(&self) -> CancellationToken {
        let child = CancellationToken::new();
        let mut state = self.node.lock();
        if self.is_cancelled() {
            drop(state);
            child.cancel();
            return child;
        }
        if state.children.len() == state.children.capacity() {
            // Forget children that are gone before growing.
            state.children.retain(|c| c.strong_count() > 0);
        }
        state.children.push(Arc::downgrade(&child.node));
        child
    }

    /// Cancels this token and its descendants. Idempotent.
    pub fn cancel(&self) {
        let mut stack = vec![self.node.clone()];
        while let Some(node) = stack.pop() {
            let (waiters, children) = {
                let mut state = node.lock();
                // Release pairs with the Acquire in `is_cancelled`; set under
                // the lock so no waiter registers after we take the list.
                if node.cancelled.swap(true, Ordering::AcqRel) {
                    continue;
                }
                let waiters: Vec<Waker> = state.waiters.drain().collect();
                (waiters, std::mem::take(&mut state.children))
            };
            for waker in waiters {
                waker.wake();
            }
            stack.extend(children.iter().filter_map(Weak::upgrade));
        }
    }

    /// True once cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.node.cancelled.load(Ordering::Acquire)
    }

    /// Alias of [`CancellationToken::is_cancelled`].
    pub fn is_canceled(&self) -> bool {
        self.is_cancelled()
    }

    /// Completes once the token is cancelled (at once if it already is).
    pub fn cancelled(&self) -> Cancelled<'_> {
        Cancelled {
            token: self,
            slot: None,
        }
    }
}

/// Future returned by [`CancellationToken::cancelled`].
#[derive(Debug)]
#[must_use = "futures do nothing unless awaited"]
pub struct Cancelled<'a> {
    token: &'a CancellationToken,
    slot: Option<usize>,
}

impl Future for Cancelled<'_> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.token.is_cancelled() {
            self.slot = None;
            return Poll::Ready(());
        }
        let node = &self.token.node;
        let mut state = node.lock();
        if node.cancelled.load(Ordering::Acquire) {
            drop(state);
            self.slot = None;
            return Poll::Ready(());
        }
        match self.slot {
            Some(key) if state.waiters.contains(key) => {
                if !state.waiters[key].will_wake(cx.waker()) {
                    state.waiters[key] = cx.waker().clone();
                }
            }
            _ => {
                let key = state.waiters.insert(cx.waker().clone());
                drop(state);
                self.slot = Some(key);
            }
        }
        Poll::Pending
    }
}

impl Drop for Cancelled<'_> {
    fn drop(&mut self) {
        if let Some(key) = self.slot.take() {
            let mut state = self.token.node.lock();
            // After a cancel the slot was drained (and maybe reused by
            // nobody: cancelled nodes take no more waiters).
            if !self.token.is_cancelled() && state.waiters.contains(key) {
                state.waiters.remove(key);
            }
        }
    }
}

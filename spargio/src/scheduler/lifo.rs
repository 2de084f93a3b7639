//! The LIFO slot, kept where other shards can reach it.
//!
//! Only the owning shard puts tasks in and normally takes them out. It
//! lives in shared state for one reason: if the owner stays inside one
//! task poll for long (a task that blocks its thread, or computes for a
//! long time), the task it just woke would be stranded here, invisible to
//! stealers. An idle shard that sees the slot occupied while the owner's
//! poll counter has not moved for `LIFO_RESCUE_AFTER` takes it (see
//! `steal.rs`). Every transfer is an atomic swap, so each task is taken by
//! exactly one side.

use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicPtr, Ordering};

use crate::task::spawn::Runnable;

#[derive(Debug)]
pub(crate) struct LifoSlot {
    ptr: AtomicPtr<()>,
}

impl LifoSlot {
    pub(crate) fn new() -> LifoSlot {
        LifoSlot {
            ptr: AtomicPtr::new(ptr::null_mut()),
        }
    }

    /// Puts `r` (or nothing) in the slot and returns what was there.
    pub(crate) fn swap(&self, r: Option<Runnable>) -> Option<Runnable> {
        let new = r.map_or(ptr::null_mut(), |r| r.into_raw().as_ptr());
        // AcqRel: Release hands the task's state to whoever takes it next,
        // Acquire takes it from whoever put it here.
        let old = self.ptr.swap(new, Ordering::AcqRel);
        // SAFETY: every non-null pointer stored here came from
        // `Runnable::into_raw` of this runnable type, and the swap gives it
        // to exactly one caller.
        NonNull::new(old).map(|p| unsafe { Runnable::from_raw(p) })
    }

    pub(crate) fn take(&self) -> Option<Runnable> {
        if self.is_empty() {
            None
        } else {
            self.swap(None)
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.ptr.load(Ordering::Relaxed).is_null()
    }
}

impl Drop for LifoSlot {
    fn drop(&mut self) {
        drop(self.take());
    }
}

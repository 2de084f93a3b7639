//! The LIFO slot, kept where other shards can reach it.
//!
//! Only the owning shard puts tasks in and normally takes them out. It
//! lives in shared state for one reason: if the owner stays inside one
//! task poll for long (a task that blocks its thread, or computes for a
//! long time), the task it just woke would be stranded here, invisible to
//! stealers. An idle shard that sees the slot occupied while the owner's
//! poll counter has not moved for `LIFO_RESCUE_AFTER` takes it (see
//! `steal.rs`). Every take is an atomic swap, so each task is taken by
//! exactly one side; only the owner puts tasks in, so its push into an
//! empty slot is a plain store. The loom model below checks that no task
//! is lost or taken twice when the owner pushes and pops while a rescuer
//! takes.

#[cfg(loom)]
use loom::sync::atomic::{AtomicPtr, Ordering};
use std::ptr::{self, NonNull};
#[cfg(not(loom))]
use std::sync::atomic::{AtomicPtr, Ordering};

use crate::task::spawn::Runnable;

/// A value the slot can hold as one pointer.
pub(crate) trait RawTask: Sized {
    fn into_raw(self) -> NonNull<()>;
    /// # Safety
    /// `p` came from `into_raw` of this type and is converted back once.
    unsafe fn from_raw(p: NonNull<()>) -> Self;
}

impl RawTask for Runnable {
    fn into_raw(self) -> NonNull<()> {
        Runnable::into_raw(self)
    }

    unsafe fn from_raw(p: NonNull<()>) -> Self {
        // SAFETY: the caller's contract (a pointer from `into_raw`, used
        // once).
        unsafe { Runnable::from_raw(p) }
    }
}

#[derive(Debug)]
pub(crate) struct LifoSlot<T: RawTask = Runnable> {
    ptr: AtomicPtr<()>,
    _owns: std::marker::PhantomData<T>,
}

impl<T: RawTask> LifoSlot<T> {
    pub(crate) fn new() -> LifoSlot<T> {
        LifoSlot {
            ptr: AtomicPtr::new(ptr::null_mut()),
            _owns: std::marker::PhantomData,
        }
    }

    /// Puts `r` (or nothing) in the slot and returns what was there.
    pub(crate) fn swap(&self, r: Option<T>) -> Option<T> {
        let new = r.map_or(ptr::null_mut(), |r| r.into_raw().as_ptr());
        // AcqRel: Release hands the task's state to whoever takes it next,
        // Acquire takes it from whoever put it here.
        let old = self.ptr.swap(new, Ordering::AcqRel);
        // SAFETY: every non-null pointer stored here came from
        // `T::into_raw` (above; the field is private), and the swap moves
        // it out of the slot to exactly one caller.
        NonNull::new(old).map(|p| unsafe { T::from_raw(p) })
    }

    /// The owner puts `r` in the slot and gets back what was there.
    ///
    /// Only the owning shard calls this (rescuers only `take`), so a slot
    /// the owner finds empty stays empty until its own store: the store
    /// needs no read-modify-write. That saves one locked instruction per
    /// wake in a chain of tasks waking each other (the common case: the
    /// owner took the slot's task before polling it).
    ///
    /// Why the store is sound: a rescuer's swap is one atomic
    /// read-modify-write, so in the slot's modification order it falls
    /// either before the store (it read the empty slot, or an older task,
    /// and left it empty) or after it (it takes the task just stored).
    /// Nothing can slip between the owner's empty read and its store,
    /// because no one else ever puts a task in. Under loom the push is a
    /// swap: loom does not yet order a plain store against a concurrent
    /// read-modify-write (tokio-rs/loom#254) and reports histories the
    /// memory model rules out.
    pub(crate) fn push(&self, r: T) -> Option<T> {
        if !cfg!(loom) && self.ptr.load(Ordering::Relaxed).is_null() {
            // Release: hands the task's state to whoever takes it (the
            // owner, or a rescuer's Acquire swap).
            self.ptr.store(r.into_raw().as_ptr(), Ordering::Release);
            None
        } else {
            self.swap(Some(r))
        }
    }

    pub(crate) fn take(&self) -> Option<T> {
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

impl<T: RawTask> Drop for LifoSlot<T> {
    fn drop(&mut self) {
        drop(self.take());
    }
}

// SAFETY: the slot hands each `T` from one thread to another exactly once
// (atomic swap), like a channel of capacity one; it never shares a `T`.
unsafe impl<T: RawTask + Send> Send for LifoSlot<T> {}
// SAFETY: as above: `&LifoSlot` only moves whole `T`s between threads.
unsafe impl<T: RawTask + Send> Sync for LifoSlot<T> {}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::{LifoSlot, RawTask};
    use loom::sync::atomic::{AtomicUsize, Ordering};
    use loom::sync::Arc;
    use std::ptr::NonNull;

    /// A task stand-in that records how often it was dropped.
    struct Task(Arc<AtomicUsize>);

    impl Drop for Task {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    impl RawTask for Box<Task> {
        fn into_raw(self) -> NonNull<()> {
            NonNull::from(Box::leak(self)).cast()
        }

        unsafe fn from_raw(p: NonNull<()>) -> Self {
            // SAFETY: `p` came from `Box::leak` above, converted back once.
            unsafe { Box::from_raw(p.cast::<Task>().as_ptr()) }
        }
    }

    /// The owner pushes two tasks (the second displaces the first into its
    /// queue) and pops, while a rescuer on another shard takes: every task
    /// ends up with exactly one side and is dropped exactly once.
    #[test]
    fn owner_and_rescuer_each_get_a_task_exactly_once() {
        loom::model(|| {
            let slot = Arc::new(LifoSlot::<Box<Task>>::new());
            let drops = Arc::new(AtomicUsize::new(0));
            let rescuer = {
                let slot = slot.clone();
                loom::thread::spawn(move || slot.take().into_iter().count())
            };
            let mut owner = 0;
            assert!(slot.push(Box::new(Task(drops.clone()))).is_none());
            owner += slot.push(Box::new(Task(drops.clone()))).into_iter().count();
            owner += slot.take().into_iter().count();
            // The slot may be empty (taken above) or not (the rescuer took
            // the first task before the second push): either way a push.
            owner += slot.push(Box::new(Task(drops.clone()))).into_iter().count();
            let rescued = rescuer.join().unwrap();
            let left = slot.take().into_iter().count();
            assert_eq!(owner + rescued + left, 3, "each task taken once");
            assert!(rescued <= 1);
            drop(slot);
            assert_eq!(drops.load(Ordering::Relaxed), 3, "each task dropped once");
        });
    }
}

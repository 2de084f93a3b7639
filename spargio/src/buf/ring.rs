//! Provided-buffer rings (`IORING_REGISTER_PBUF_RING`).
//!
//! A [`BufRing`] is a pool of equal-sized buffers the kernel picks from
//! when a buffer-select operation (multishot receive) has data: the
//! completion names the buffer it filled. The pool is two allocations:
//!
//! * the ring itself, `entries` 16-byte `io_uring_buf` descriptors in
//!   page-aligned memory, whose tail the application advances to hand
//!   buffers to the kernel (the tail is the `resv` field of descriptor 0);
//! * the buffers, `entries × buffer_len` bytes.
//!
//! A filled buffer belongs to the application until it is *recycled*: its
//! descriptor is written at the tail and the tail published with a release
//! store. Recycling may happen on any thread (a [`RecvSegment`] can be
//! dropped anywhere), so producers serialize on a mutex; the kernel is the
//! only consumer. There are exactly as many buffers as descriptors, so the
//! slot at the tail is always free: a buffer is never in the ring twice.
//!
//! Registration and unregistration are `io_uring_register` calls on the
//! ring of the shard that owns the pool, made on that shard's thread (a
//! `SINGLE_ISSUER` ring accepts them from no other). The pool is
//! unregistered and freed when the last reference goes: the multishot
//! operation holds one until its final completion, each segment holds one,
//! so the kernel never sees a buffer group whose memory is gone.

use std::alloc::{self, Layout};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Waker;
use std::{fmt, io};

use crate::scheduler::context;
use crate::scheduler::Shared;
use crate::shard_id::ShardId;

/// Size of one `io_uring_buf` descriptor.
const DESC: usize = 16;
/// Byte offset of the ring's tail (descriptor 0's `resv`).
const TAIL_OFFSET: usize = 14;
const PAGE: usize = 4096;

/// The memory of one pool, freed only by [`PoolMemory::free`] (dropping it
/// leaks, which is what must happen if it can no longer be unregistered).
struct PoolMemory {
    ring: NonNull<u8>,
    ring_layout: Layout,
    bufs: NonNull<u8>,
    bufs_layout: Layout,
}

// SAFETY: plain heap memory; who may touch it is governed by `BufRing`.
unsafe impl Send for PoolMemory {}

impl PoolMemory {
    fn new(entries: u16, buffer_len: u32) -> io::Result<PoolMemory> {
        let too_big = || io::Error::new(io::ErrorKind::InvalidInput, "buffer pool too large");
        let ring_layout =
            Layout::from_size_align(usize::from(entries) * DESC, PAGE).map_err(|_| too_big())?;
        let total = usize::from(entries)
            .checked_mul(buffer_len as usize)
            .ok_or_else(too_big)?;
        let bufs_layout = Layout::from_size_align(total, 64).map_err(|_| too_big())?;
        // SAFETY: both layouts have a non-zero size (entries ≥ 1 and
        // buffer_len ≥ 1 are checked by `BufRing::register`).
        let ring = NonNull::new(unsafe { alloc::alloc_zeroed(ring_layout) });
        let ring = ring.ok_or_else(|| io::Error::from(io::ErrorKind::OutOfMemory))?;
        // SAFETY: as above.
        let bufs = match NonNull::new(unsafe { alloc::alloc(bufs_layout) }) {
            Some(bufs) => bufs,
            None => {
                // SAFETY: allocated just above with this layout.
                unsafe { alloc::dealloc(ring.as_ptr(), ring_layout) };
                return Err(io::ErrorKind::OutOfMemory.into());
            }
        };
        Ok(PoolMemory {
            ring,
            ring_layout,
            bufs,
            bufs_layout,
        })
    }

    /// # Safety
    ///
    /// The kernel no longer uses the memory (the pool is unregistered, or
    /// was never registered).
    unsafe fn free(self) {
        // SAFETY: allocated in `new` with these layouts; the caller vouches
        // that the kernel is done with them.
        unsafe {
            alloc::dealloc(self.ring.as_ptr(), self.ring_layout);
            alloc::dealloc(self.bufs.as_ptr(), self.bufs_layout);
        }
    }
}

/// Buffers in each shard's shared receive pool ([`shard_pool`]), at most.
pub(crate) const SHARD_POOL_BUFFERS: u16 = 512;
/// Buffers a shard's pool starts with, and adds when it runs low: the
/// memory of buffers never needed is never touched, and the few in use
/// stay in cache.
pub(crate) const SHARD_POOL_STEP: u16 = 64;
/// Bytes per buffer of a shard's shared receive pool.
pub(crate) const SHARD_POOL_BUFFER_LEN: u32 = 2048;

/// How long a pool that ran dry with every buffer given counts as dry
/// ([`BufRing::mark_dry`]).
const DRY_FOR: std::time::Duration = std::time::Duration::from_millis(10);

/// A shard's shared receive pool, registered on first use.
pub(crate) enum ShardPool {
    Untried,
    Ready(Arc<BufRing>),
    /// Registration failed, or the shard is shutting down: not retried.
    Refused,
}

/// The shared receive pool of the calling thread's shard, when that is
/// shard `shard` of `shared`'s runtime (else `None`: a pool is registered
/// on, and used by, its own shard's ring). Registered on first use with
/// [`SHARD_POOL_STEP`] buffers of [`SHARD_POOL_BUFFER_LEN`] bytes, growing
/// to [`SHARD_POOL_BUFFERS`].
pub(crate) fn shard_pool(shared: &Arc<Shared>, shard: ShardId) -> Option<Arc<BufRing>> {
    context::with_worker(|w| {
        let w = w.filter(|w| w.id == shard && Arc::ptr_eq(&w.shared, shared))?;
        if let ShardPool::Ready(pool) = &*w.recv_pool.borrow() {
            return Some(pool.clone());
        }
        if !matches!(*w.recv_pool.borrow(), ShardPool::Untried) {
            return None;
        }
        let pool = BufRing::register_with(
            shared,
            shard,
            SHARD_POOL_BUFFERS,
            SHARD_POOL_BUFFER_LEN,
            SHARD_POOL_STEP,
        );
        let mut slot = w.recv_pool.borrow_mut();
        match pool {
            Ok(pool) => {
                let _ = shared.shards[shard].recv_pool.set(Arc::downgrade(&pool));
                *slot = ShardPool::Ready(pool.clone());
                Some(pool)
            }
            Err(err) => {
                crate::diag::event::no_recv_pool(shard, &err);
                *slot = ShardPool::Refused;
                None
            }
        }
    })
}

/// A registered pool of provided buffers (module docs).
pub(crate) struct BufRing {
    memory: Option<PoolMemory>,
    entries: u16,
    buffer_len: u32,
    bgid: u16,
    shard: ShardId,
    shared: Arc<Shared>,
    /// The producer's private tail, published through the ring's tail.
    tail: Mutex<u16>,
    /// Buffers the kernel handed out and nobody recycled yet.
    held: AtomicUsize,
    /// Buffers `0..provided` have been given to the kernel (the rest of
    /// the allocation is untouched: see [`BufRing::grow`]). Changed only
    /// under `tail`'s lock.
    provided: AtomicU16,
    /// Until this coarse-clock instant (ns) the pool counts as dry
    /// ([`BufRing::mark_dry`]); 0: not dry.
    dry_until: AtomicU64,
    /// A consumer waiting for a buffer to come back (the kernel ran out).
    waiter: Mutex<Option<Waker>>,
    /// `waiter` is set: lets a recycle skip its lock in the common case.
    waiting: AtomicBool,
}

impl fmt::Debug for BufRing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BufRing")
            .field("shard", &self.shard)
            .field("bgid", &self.bgid)
            .field("entries", &self.entries)
            .field("buffer_len", &self.buffer_len)
            .field("held", &self.held.load(Ordering::Relaxed))
            .field("provided", &self.provided.load(Ordering::Relaxed))
            .finish()
    }
}

// SAFETY: the raw memory is shared between threads under the rules in the
// module docs: descriptors are written under `tail`'s mutex, a buffer's
// bytes are accessed only by the one holder of its id (the kernel, or the
// segment it was handed to).
unsafe impl Send for BufRing {}
// SAFETY: as above.
unsafe impl Sync for BufRing {}

impl BufRing {
    /// Creates a pool of `entries` buffers of `buffer_len` bytes and
    /// registers it with `shard`'s ring. Must run on that shard's thread.
    pub(crate) fn register(
        shared: &Arc<Shared>,
        shard: ShardId,
        entries: u16,
        buffer_len: u32,
    ) -> io::Result<Arc<BufRing>> {
        BufRing::register_with(shared, shard, entries, buffer_len, entries)
    }

    /// [`register`](Self::register), giving the kernel only the first
    /// `initial` buffers; [`grow`](Self::grow) gives more.
    pub(crate) fn register_with(
        shared: &Arc<Shared>,
        shard: ShardId,
        entries: u16,
        buffer_len: u32,
        initial: u16,
    ) -> io::Result<Arc<BufRing>> {
        if !entries.is_power_of_two() || entries > 1 << 15 || buffer_len == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a buffer pool needs a power-of-two count (at most 32768) of non-empty buffers",
            ));
        }
        let memory = PoolMemory::new(entries, buffer_len)?;
        let ring_addr = memory.ring.as_ptr() as u64;
        let registered = context::with_worker(|w| match w {
            Some(w) if w.id == shard && Arc::ptr_eq(&w.shared, shared) => {
                // SAFETY: the ring memory is page-aligned, `entries`
                // descriptors long, and stays allocated until the pool is
                // unregistered (`Drop`).
                unsafe { w.register_buf_ring(ring_addr, entries) }
            }
            _ => Err(io::Error::other("buffer pool registered off its shard")),
        });
        let bgid = match registered {
            Ok(bgid) => bgid,
            Err(err) => {
                // SAFETY: never registered.
                unsafe { memory.free() };
                return Err(err);
            }
        };
        let ring = BufRing {
            memory: Some(memory),
            entries,
            buffer_len,
            bgid,
            shard,
            shared: shared.clone(),
            tail: Mutex::new(0),
            held: AtomicUsize::new(0),
            provided: AtomicU16::new(0),
            dry_until: AtomicU64::new(0),
            waiter: Mutex::new(None),
            waiting: AtomicBool::new(false),
        };
        ring.grow(initial.max(1));
        Ok(Arc::new(ring))
    }

    fn memory(&self) -> &PoolMemory {
        self.memory.as_ref().expect("present until drop")
    }

    /// The buffer group id to put in a buffer-select SQE.
    pub(crate) fn bgid(&self) -> u16 {
        self.bgid
    }

    /// Buffers in the pool.
    pub(crate) fn entries(&self) -> u16 {
        self.entries
    }

    /// Buffers the kernel could use right now, counting every completion
    /// the consumer has seen.
    pub(crate) fn available(&self) -> usize {
        usize::from(self.provided.load(Ordering::SeqCst)) - self.held.load(Ordering::SeqCst)
    }

    /// Gives the kernel up to `step` buffers it never had (a pool starts
    /// with part of its buffers, so that memory it never needs is never
    /// touched: the kernel takes buffers in ring order and would cycle
    /// through all of them). False when every buffer was given already.
    pub(crate) fn grow(&self, step: u16) -> bool {
        let mut tail = self.tail.lock().unwrap_or_else(|p| p.into_inner());
        let from = self.provided.load(Ordering::SeqCst);
        let to = from.saturating_add(step).min(self.entries);
        if from == to {
            return false;
        }
        for bid in from..to {
            // In the ring now: `from − held` < `to` ≤ entries buffers.
            self.write_desc(&mut tail, bid);
        }
        // SeqCst: a consumer that sees the new count sees the buffers.
        self.provided.store(to, Ordering::SeqCst);
        true
    }

    /// Records that the kernel ran out of buffers with every buffer given:
    /// for the next `DRY_FOR`, [`is_dry`](Self::is_dry) says so.
    pub(crate) fn mark_dry(&self) {
        let until = crate::time::clock::coarse_ns() + DRY_FOR.as_nanos() as u64;
        self.dry_until.store(until, Ordering::Relaxed);
    }

    /// The kernel ran out of buffers lately, with every buffer given: new
    /// multishot receives would likely end at once.
    pub(crate) fn is_dry(&self) -> bool {
        let until = self.dry_until.load(Ordering::Relaxed);
        until != 0 && crate::time::clock::coarse_ns() < until
    }

    /// Buffers the kernel handed out that were not given back yet.
    pub(crate) fn held(&self) -> usize {
        self.held.load(Ordering::SeqCst)
    }

    /// Buffers given to the kernel so far.
    #[cfg(test)]
    pub(crate) fn provided(&self) -> u16 {
        self.provided.load(Ordering::SeqCst)
    }

    /// Records that a completion handed out buffer `bid`.
    pub(crate) fn take(&self, bid: u16) {
        debug_assert!(bid < self.entries);
        self.held.fetch_add(1, Ordering::SeqCst);
    }

    /// The first `len` bytes of buffer `bid`.
    ///
    /// # Safety
    ///
    /// The caller holds `bid` (a completion handed it out and it was not
    /// recycled since) and `len` is at most what the kernel wrote.
    pub(crate) unsafe fn bytes(&self, bid: u16, len: usize) -> &[u8] {
        debug_assert!(bid < self.entries && len <= self.buffer_len as usize);
        let start = usize::from(bid) * self.buffer_len as usize;
        // SAFETY: in bounds of the buffer allocation; initialized by the
        // kernel's write; nobody else touches a held buffer (caller).
        unsafe { std::slice::from_raw_parts(self.memory().bufs.as_ptr().add(start), len) }
    }

    /// Gives buffer `bid` back to the kernel (from any thread).
    pub(crate) fn recycle(&self, bid: u16) {
        if let Some(waker) = self.recycle_deferred(bid) {
            waker.wake();
        }
    }

    /// [`recycle`](Self::recycle), handing back the waiter's waker instead
    /// of calling it (for callers holding a lock).
    pub(crate) fn recycle_deferred(&self, bid: u16) -> Option<std::task::Waker> {
        debug_assert!(bid < self.entries);
        {
            let mut tail = self.tail.lock().unwrap_or_else(|p| p.into_inner());
            // The slot is outside the kernel's window: at most
            // `provided − held` < entries buffers are in the ring while we
            // hold `bid` (module docs).
            self.write_desc(&mut tail, bid);
        }
        // SeqCst on `held` and `waiting`, here and in `wait_for_buffer` +
        // `available`: either this recycle sees the waiter's flag, or the
        // waiter's check sees this buffer back.
        self.held.fetch_sub(1, Ordering::SeqCst);
        if self.waiting.swap(false, Ordering::SeqCst) {
            return self.waiter.lock().unwrap_or_else(|p| p.into_inner()).take();
        }
        None
    }

    /// Writes buffer `bid`'s descriptor at the tail and publishes it.
    /// The caller holds `tail`'s lock and knows the tail slot is outside
    /// the kernel's window (fewer than `entries` buffers in the ring).
    fn write_desc(&self, tail: &mut u16, bid: u16) {
        let memory = self.memory();
        let slot = usize::from(*tail & (self.entries - 1));
        let addr = memory.bufs.as_ptr() as u64 + u64::from(bid) * u64::from(self.buffer_len);
        // Only the holder of `tail`'s lock writes descriptors, and never
        // `resv` (descriptor 0's is the tail).
        // SAFETY: `slot` < entries: in bounds of the ring allocation.
        unsafe {
            let desc = memory.ring.as_ptr().add(slot * DESC);
            desc.cast::<u64>().write(addr);
            desc.add(8).cast::<u32>().write(self.buffer_len);
            desc.add(12).cast::<u16>().write(bid);
        }
        *tail = tail.wrapping_add(1);
        // Release: the descriptor writes above happen before the kernel
        // (which loads the tail with acquire) can see the new tail.
        self.shared_tail().store(*tail, Ordering::Release);
    }

    fn shared_tail(&self) -> &AtomicU16 {
        // SAFETY: offset 14 of the page-aligned ring allocation is 2-byte
        // aligned and lives as long as `self`; the kernel only reads it.
        unsafe {
            &*self
                .memory()
                .ring
                .as_ptr()
                .add(TAIL_OFFSET)
                .cast::<AtomicU16>()
        }
    }

    /// Registers `waker` to be woken at the next recycle.
    pub(crate) fn wait_for_buffer(&self, waker: &Waker) {
        let mut waiter = self.waiter.lock().unwrap_or_else(|p| p.into_inner());
        match &*waiter {
            Some(w) if w.will_wake(waker) => {}
            _ => *waiter = Some(waker.clone()),
        }
        // SeqCst: see `recycle`.
        self.waiting.store(true, Ordering::SeqCst);
    }
}

impl Drop for BufRing {
    fn drop(&mut self) {
        let Some(memory) = self.memory.take() else {
            return;
        };
        let (bgid, shard) = (self.bgid, self.shard);
        let unregister = move |memory: PoolMemory| {
            context::with_worker(|w| {
                let w = w.expect("on the pool's shard");
                if w.unregister_buf_ring(bgid).is_ok() {
                    // SAFETY: unregistered: the kernel holds no reference.
                    unsafe { memory.free() };
                }
                // Else the ring refused: leak rather than free memory the
                // kernel may still read.
            })
        };
        let here = context::with_worker(|w| {
            w.is_some_and(|w| w.id == shard && Arc::ptr_eq(&w.shared, &self.shared))
        });
        if here {
            unregister(memory);
        } else {
            // Off the shard (a segment dropped elsewhere): unregister there.
            // If the runtime is gone the task never runs and the memory is
            // leaked, never freed under a ring that may still exist.
            let handle = crate::RuntimeHandle {
                shared: self.shared.clone(),
            };
            let _ = handle.spawn_pinned(shard, async move { unregister(memory) });
        }
    }
}

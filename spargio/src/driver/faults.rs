//! Test-only fault injection (reached through `spargio::__private`).
//!
//! Tests use it to make the kernel interface fail the ways it can fail in
//! production (rarely, so untested otherwise): a ring that will not
//! enable, `io_uring_enter` returning `EAGAIN`/`EBUSY`/`ENOMEM`, a
//! submission queue with no room, a direct message's `MSG_RING` that the
//! kernel refuses. Each fault is armed for a number of
//! occurrences, process-wide; tests that use it run in their own test
//! binary, one at a time.
//!
//! Disarmed (always, outside such tests), each hook costs one relaxed load.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, Ordering};
use std::sync::Mutex;

static ARMED: AtomicBool = AtomicBool::new(false);
static ENABLE_FAILS: AtomicU32 = AtomicU32::new(0);
static ENTER_FAILS: AtomicU32 = AtomicU32::new(0);
static ENTER_ERRNO: AtomicI32 = AtomicI32::new(0);
static PUSH_REFUSALS: AtomicU32 = AtomicU32::new(0);
static DIRECT_FAILS: AtomicU32 = AtomicU32::new(0);
static CONTENDED: AtomicBool = AtomicBool::new(false);
static POLL_FIRST_MULTISHOT: AtomicBool = AtomicBool::new(false);
type ShardHook = Box<dyn FnMut(usize) + Send>;
static BEFORE_OUTSIDE_WAIT: Mutex<Option<ShardHook>> = Mutex::new(None);

fn arm() {
    // Relaxed: a flag that only gates the counters below; each counter is
    // read with its own atomic operation.
    ARMED.store(true, Ordering::Relaxed);
}

/// The next `n` shard starts fail to enable their ring (`EBUSY`).
pub fn fail_ring_enables(n: u32) {
    ENABLE_FAILS.store(n, Ordering::SeqCst);
    arm();
}

/// The next `n` entries into the kernel fail with `errno`.
pub fn fail_enters(errno: i32, n: u32) {
    ENTER_ERRNO.store(errno, Ordering::SeqCst);
    ENTER_FAILS.store(n, Ordering::SeqCst);
    arm();
}

/// The next `n` pushes of an SQE find the submission queue full.
pub fn refuse_pushes(n: u32) {
    PUSH_REFUSALS.store(n, Ordering::SeqCst);
    arm();
}

/// The next `n` direct messages are posted to an invalid ring fd, so the
/// kernel refuses them (`EBADF`) as it would a closing target ring.
pub fn fail_direct_posts(n: u32) {
    DIRECT_FAILS.store(n, Ordering::SeqCst);
    arm();
}

/// Every shard's CPU counts as contended (`scheduler/spin.rs`) where
/// the I/O layer asks (not for the shard's own idling), until `reset`.
pub fn assume_contended(on: bool) {
    CONTENDED.store(on, Ordering::SeqCst);
    arm();
}

/// Multishot receives are armed with `IORING_RECVSEND_POLL_FIRST`, under
/// which Linux 6.18 loses nearly every reset that follows data
/// (`scripts/probes/multishot_reset`), until `reset`.
pub fn poll_first_multishot_receives(on: bool) {
    POLL_FIRST_MULTISHOT.store(on, Ordering::SeqCst);
    arm();
}

/// Runs `hook` (with the shard's index) on a shard thread each time that
/// shard, parking in its tokio runtime, has published itself parked and
/// not yet prepared the wait: the window in which a wake must still end
/// the park. Until `reset`.
pub fn before_outside_wait(hook: impl FnMut(usize) + Send + 'static) {
    *lock_hook() = Some(Box::new(hook));
    arm();
}

fn lock_hook() -> std::sync::MutexGuard<'static, Option<ShardHook>> {
    BEFORE_OUTSIDE_WAIT
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Occurrences not yet taken: (ring enables, enters, pushes).
pub fn left() -> (u32, u32, u32) {
    (
        ENABLE_FAILS.load(Ordering::SeqCst),
        ENTER_FAILS.load(Ordering::SeqCst),
        PUSH_REFUSALS.load(Ordering::SeqCst),
    )
}

/// Disarms every fault.
pub fn reset() {
    ENABLE_FAILS.store(0, Ordering::SeqCst);
    ENTER_FAILS.store(0, Ordering::SeqCst);
    PUSH_REFUSALS.store(0, Ordering::SeqCst);
    DIRECT_FAILS.store(0, Ordering::SeqCst);
    CONTENDED.store(false, Ordering::SeqCst);
    POLL_FIRST_MULTISHOT.store(false, Ordering::SeqCst);
    *lock_hook() = None;
}

/// Takes one occurrence of a fault, if armed.
fn take(counter: &AtomicU32) -> bool {
    // Relaxed: see `arm`.
    if !ARMED.load(Ordering::Relaxed) {
        return false;
    }
    counter
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok()
}

pub(crate) fn ring_enable() -> std::io::Result<()> {
    if take(&ENABLE_FAILS) {
        return Err(std::io::Error::from_raw_os_error(libc::EBUSY));
    }
    Ok(())
}

pub(crate) fn enter() -> std::io::Result<()> {
    if take(&ENTER_FAILS) {
        return Err(std::io::Error::from_raw_os_error(
            ENTER_ERRNO.load(Ordering::SeqCst),
        ));
    }
    Ok(())
}

pub(crate) fn push_refused() -> bool {
    take(&PUSH_REFUSALS)
}

pub(crate) fn direct_post_fails() -> bool {
    take(&DIRECT_FAILS)
}

pub(crate) fn poll_first_multishot() -> bool {
    // Relaxed: see `arm`.
    ARMED.load(Ordering::Relaxed) && POLL_FIRST_MULTISHOT.load(Ordering::SeqCst)
}

pub(crate) fn contended() -> bool {
    // Relaxed: see `arm`.
    ARMED.load(Ordering::Relaxed) && CONTENDED.load(Ordering::SeqCst)
}

/// The hook of [`before_outside_wait`], if one is set.
#[cfg(feature = "tokio-compat")]
pub(crate) fn outside_wait_window(shard: usize) {
    // Relaxed: see `arm`.
    if ARMED.load(Ordering::Relaxed) {
        if let Some(hook) = lock_hook().as_mut() {
            hook(shard);
        }
    }
}

//! Panics in foreign code the shard calls outside any task (wakers,
//! destructors of abandoned operations' state, a `submit_unsafe` builder)
//! cost that value only: the shard keeps running, and shutdown completes.

mod common;

use std::future::Future;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;
use std::task::{Context, Wake, Waker};
use std::time::{Duration, Instant};

use spargio::fs::File;
use spargio::{Runtime, RuntimeHandle};

/// A waker whose `wake` panics.
struct PanickingWaker;

impl Wake for PanickingWaker {
    fn wake(self: Arc<Self>) {
        panic!("a waker that panics");
    }
}

/// Drops by panicking.
struct PanicOnDrop;

impl Drop for PanicOnDrop {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            panic!("a destructor that panics");
        }
    }
}

fn pipe() -> (OwnedFd, OwnedFd) {
    let mut fds = [0; 2];
    // SAFETY: `fds` is a valid out-array of two ints.
    let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    assert_eq!(rc, 0, "pipe2: {}", std::io::Error::last_os_error());
    // SAFETY: pipe2 returned two fresh fds that nothing else owns.
    unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
}

fn callbacks_panicked(h: &RuntimeHandle) -> u64 {
    h.stats_snapshot().totals.callbacks_panicked
}

/// Waits (bounded) until `cond` holds.
fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < common::HANG, "never happened: {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Every shard still runs tasks, and dropping the runtime returns.
fn still_healthy(rt: Runtime) {
    let h = rt.handle();
    for shard in 0..h.shard_count() {
        let join = h.spawn_pinned(shard, async move { shard * 2 }).unwrap();
        assert_eq!(spargio::block_on(join).unwrap(), shard * 2);
    }
    drop(rt);
}

#[test]
fn a_panicking_destructor_of_abandoned_op_state_costs_only_that_value() {
    common::within_hang_bound(|| {
        let rt = common::runtime(2);
        let h = rt.handle();
        let (r, w) = pipe();
        let fd = spargio::NativeFd::from(r);
        let native = h.uring_native_unbound();
        for shard in 0..2 {
            let fd2 = fd.clone();
            let buf = vec![0u8; 16];
            // SAFETY: the SQE points into the Vec's heap block, owned by
            // the state; the fd is kept open by the state's NativeFd.
            let op = unsafe {
                native.submit_unsafe_on_shard(
                    shard,
                    (buf, fd2, PanicOnDrop),
                    |(buf, fd, _)| {
                        io_uring::opcode::Read::new(
                            io_uring::types::Fd(fd.as_raw_fd()),
                            buf.as_mut_ptr(),
                            16,
                        )
                        .build()
                    },
                    |cqe, _state| cqe.map(|c| c.result),
                )
            };
            // Submitted, then abandoned: the state is kept until the
            // cancel's completion and dropped on the shard.
            let mut op = Box::pin(op);
            let waker = Waker::noop();
            assert!(op
                .as_mut()
                .poll(&mut Context::from_waker(waker))
                .is_pending());
            drop(op);
        }
        eventually("both destructors ran and panicked", || {
            callbacks_panicked(&h) >= 2
        });
        drop(w);
        still_healthy(rt);
    });
}

#[test]
fn a_panicking_waker_of_a_native_op_costs_only_that_wake() {
    common::within_hang_bound(|| {
        let rt = common::runtime(2);
        let h = rt.handle();
        let (r, w) = pipe();
        let file = File::from_std(&h, std::fs::File::from(r));
        let mut read = Box::pin(file.read_at(0, 8));
        let waker = Waker::from(Arc::new(PanickingWaker));
        assert!(read
            .as_mut()
            .poll(&mut Context::from_waker(&waker))
            .is_pending());
        let before = callbacks_panicked(&h);
        rustix_write(&w, b"wake");
        eventually("the waker ran and panicked", || {
            callbacks_panicked(&h) > before
        });
        // The result is still there for whoever polls next.
        let got = spargio::block_on(read).unwrap();
        assert_eq!(got, b"wake");
        still_healthy(rt);
    });
}

#[test]
fn a_panicking_timer_waker_costs_only_that_wake() {
    common::within_hang_bound(|| {
        let rt = common::runtime(2);
        let h = rt.handle();
        let h2 = h.clone();
        // Polled on a shard (so the timer lives on that shard's wheel) with
        // a waker that panics.
        let join = h
            .spawn_pinned(1, async move {
                let mut sleep = Box::pin(spargio::time::sleep(Duration::from_millis(5)));
                let waker = Waker::from(Arc::new(PanickingWaker));
                assert!(sleep
                    .as_mut()
                    .poll(&mut Context::from_waker(&waker))
                    .is_pending());
                std::mem::forget(sleep);
                let _ = h2;
            })
            .unwrap();
        spargio::block_on(join).unwrap();
        eventually("the timer fired into the panicking waker", || {
            callbacks_panicked(&h) >= 1
        });
        still_healthy(rt);
    });
}

#[test]
fn a_panicking_submit_unsafe_builder_leaves_no_operation_behind() {
    common::within_hang_bound(|| {
        let rt = common::runtime(2);
        let h = rt.handle();
        let native = h.uring_native_unbound();
        for shard in 0..2 {
            let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                // SAFETY: the builder never returns an SQE.
                unsafe {
                    native.submit_unsafe_on_shard(
                        shard,
                        (),
                        |_: &mut ()| -> io_uring::squeue::Entry { panic!("a builder that panics") },
                        |cqe, ()| cqe.map(|c| c.result),
                    )
                }
            }));
            assert!(caught.is_err());
        }
        let pending: usize = h
            .stats_snapshot()
            .shards
            .iter()
            .map(|s| s.pending_native_ops)
            .sum();
        assert_eq!(pending, 0, "an op-table entry outlived its builder");
        still_healthy(rt);
    });
}

#[test]
fn a_panicking_shutdown_waiter_does_not_stop_the_exit() {
    common::within_hang_bound(|| {
        let rt = common::runtime(2);
        let waker = Waker::from(Arc::new(PanickingWaker));
        {
            let mut shutdown = Box::pin(rt.shutdown());
            let mut cx = Context::from_waker(&waker);
            while shutdown.as_mut().poll(&mut cx).is_pending() {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        drop(rt);
    });
}

fn rustix_write(fd: &OwnedFd, data: &[u8]) {
    use std::os::fd::AsRawFd;
    // SAFETY: writing from a valid slice to an fd we own.
    let n = unsafe { libc::write(fd.as_raw_fd(), data.as_ptr().cast(), data.len()) };
    assert_eq!(n, data.len() as isize);
}

/// A task that calls tokio's runtime where there is none (the feature
/// `tokio-compat` off, or the runtime built with it off) fails with
/// tokio's message and the fix.
#[test]
fn calling_tokio_without_its_runtime_fails_naming_the_fix() {
    let builder = spargio::RuntimeBuilder::new().shards(1);
    #[cfg(feature = "tokio-compat")]
    let builder = builder.tokio_compat(false);
    let rt = builder.build().unwrap();
    let task = rt
        .handle()
        .spawn_pinned(0, async {
            tokio::spawn(async {});
        })
        .unwrap();
    let err = spargio::block_on(task).unwrap_err();
    assert!(err.is_panic());
    let payload = err.into_panic();
    let msg = payload
        .downcast_ref::<String>()
        .expect("the explained message");
    assert!(msg.contains("Tokio 1.x runtime"), "{msg}");
    assert!(
        msg.contains("tokio-compat") || msg.contains("tokio_compat(false)"),
        "{msg}"
    );
}

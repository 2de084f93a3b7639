//! Waiting for a child on the ring, and reaping it.
//!
//! # The pidfd
//!
//! Right after `fork`/`exec`, `pidfd_open(pid)` gives an fd that names this
//! one process for as long as the fd is open. It is race-free: nothing else
//! reaps our children (no `SIGCHLD` handler is installed, and `waitpid(-1)`
//! is the caller's own business), so the child stays at least a zombie
//! until we reap it and its pid cannot be reused under the fd. Signals go
//! through `pidfd_send_signal`, so a kill never reaches a recycled pid.
//!
//! # Waiting: the ring tells, one syscall reaps
//!
//! 1. [`Proc::try_reap`] first: `waitid(P_PIDFD, WEXITED | WNOHANG)`. A
//!    child that already exited costs no SQE.
//! 2. Otherwise an `IORING_OP_WAITID` (Linux 6.7+) with
//!    `WEXITED | WNOWAIT` is put on a ring. `WNOWAIT` makes the kernel
//!    report the exit *without* reaping: the ring op only says "it exited".
//! 3. Its decoder, which runs on the final completion even when the future
//!    awaiting it was dropped, calls [`Proc::try_reap`], which reaps and
//!    records the status in the slot the `ChildHandle` shares.
//! 4. The waiter loops to step 1 and finds the status in the slot.
//! 5. A ring wait that fails reads the slot before it reports the error.
//!    Two ring ops can be armed at once (a dropped `wait()` whose cancel
//!    has not landed, and the next one), each on its own ring: the exit
//!    wakes both, the first decoder reaps, and when the other ring's op
//!    looks again the child is gone, so it completes with `ECHILD` (so
//!    does an op that reaches the kernel after a reap). The reap recorded
//!    the status under the lock before anyone could see `ECHILD`, so the
//!    slot has it.
//!
//! Why not let the ring op reap (no `WNOWAIT`)? Because there may be two
//! waiters at once: a `wait()` future dropped while its op is still being
//! cancelled, and the next `wait()` or a `try_wait()`. With the ring op
//! reaping, the loser gets `ECHILD` while the winner's decoder may not have
//! recorded the status yet. With `WNOWAIT` every reap happens in
//! `try_reap`, under the slot's lock, which checks the slot first: exactly
//! one reap, and everyone after it reads the slot (step 5 covers a ring op
//! that looks after the reap). The price is one
//! non-blocking `waitid` per child.
//!
//! # Older kernels
//!
//! A kernel without `IORING_OP_WAITID` completes it with `-EINVAL` (an
//! unknown opcode) or `-EOPNOTSUPP`. The first such completion switches the
//! process to the fallback for good: an `IORING_OP_POLL_ADD` on the pidfd
//! for `POLLIN` (readable once the process has exited), then the same
//! decoder. Either way there is no thread per child and no signal handler.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use spargio::extension::io_uring::{opcode, types};
use spargio::{NativeFd, UringCqe, UringNativeAny};

/// Set once a WAITID completion said the kernel does not know the opcode.
/// Relaxed: a stale `false` costs one more refused SQE, nothing else.
static WAITID_UNSUPPORTED: AtomicBool = AtomicBool::new(false);

/// A child process as seen through its pidfd, with its recorded status.
#[derive(Debug)]
pub(crate) struct Proc {
    pid: u32,
    pidfd: NativeFd,
    /// The exit status, once reaped. Every reap happens under this lock.
    status: Mutex<Option<ExitStatus>>,
}

impl Proc {
    /// Opens a pidfd for `pid`, which must be an unreaped child of ours.
    pub(crate) fn open(pid: u32) -> io::Result<Proc> {
        let raw_pid = libc::pid_t::try_from(pid)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "pid out of range"))?;
        // SAFETY: `pidfd_open(pid_t, unsigned int)` takes no pointers.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, raw_pid, 0 as libc::c_uint) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: the syscall returned a new fd (close-on-exec) that nothing
        // else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) };
        Ok(Proc {
            pid,
            pidfd: NativeFd::new(fd),
            status: Mutex::new(None),
        })
    }

    pub(crate) fn pid(&self) -> u32 {
        self.pid
    }

    fn slot(&self) -> MutexGuard<'_, Option<ExitStatus>> {
        self.status.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The recorded status, if the child was reaped.
    pub(crate) fn status(&self) -> Option<ExitStatus> {
        *self.slot()
    }

    /// Reaps the child if it has exited (never blocks).
    pub(crate) fn try_reap(&self) -> io::Result<Option<ExitStatus>> {
        self.reap(libc::WNOHANG)
    }

    /// Reaps a child that was sent `SIGKILL` when there is no runtime left
    /// to wait on: blocks the thread until it exits, but at most `grace`
    /// (a kill that has not acted by then, e.g. a child stuck in an
    /// uninterruptible sleep, must not hold the caller for good); `None`
    /// if it still runs. The wait is a `poll` on the pidfd *outside* the
    /// status lock, so nothing else holding this `Proc` (a ring op's
    /// decoder on a shard, `status`, `signal`) waits behind it; the reap
    /// itself is `try_reap`'s, under the lock, as every reap is.
    pub(crate) fn reap_killed(&self, grace: Duration) -> io::Result<Option<ExitStatus>> {
        let deadline = Instant::now() + grace;
        loop {
            if let Some(status) = self.try_reap()? {
                return Ok(Some(status));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            let mut pollfd = libc::pollfd {
                fd: self.pidfd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // Rounded up, so a sub-millisecond rest still waits.
            let ms = libc::c_int::try_from(left.as_millis() + 1).unwrap_or(libc::c_int::MAX);
            // SAFETY: `pollfd` is one valid, writable `pollfd` (count 1);
            // the pidfd is open (owned by `self`). A pidfd reads ready
            // once the process has exited.
            let rc = unsafe { libc::poll(&mut pollfd, 1, ms) };
            if rc < 0 {
                let err = io::Error::last_os_error();
                if err.kind() != io::ErrorKind::Interrupted {
                    return Err(err);
                }
            }
        }
    }

    fn reap(&self, extra: libc::c_int) -> io::Result<Option<ExitStatus>> {
        let mut slot = self.slot();
        if let Some(status) = *slot {
            return Ok(Some(status));
        }
        // SAFETY: all-zero is a valid `siginfo_t` (plain integers); zero
        // `si_pid` is also how WNOHANG says "still running".
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        let id = self.pidfd.as_raw_fd() as libc::id_t;
        // SAFETY: `info` is a valid, writable `siginfo_t`; the pidfd is
        // open (owned by `self`).
        let rc = unsafe { libc::waitid(libc::P_PIDFD, id, &mut info, libc::WEXITED | extra) };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: the kernel filled `info` for a `SIGCHLD` (or left it
        // zeroed), so the `si_pid`/`si_status` union members are the ones
        // to read.
        let pid = unsafe { info.si_pid() };
        if pid == 0 {
            return Ok(None);
        }
        // SAFETY: as above.
        let status = exit_status(info.si_code, unsafe { info.si_status() });
        *slot = Some(status);
        Ok(Some(status))
    }

    /// Sends `sig` unless the child was reaped already (then nothing is
    /// sent and the call succeeds). A child that exited but is not yet
    /// reaped also succeeds: the kernel ignores signals to a zombie.
    pub(crate) fn signal(&self, sig: libc::c_int) -> io::Result<()> {
        let slot = self.slot();
        if slot.is_some() {
            return Ok(());
        }
        // SAFETY: a null `siginfo_t *` is allowed (the kernel fills one as
        // `kill(2)` would); the pidfd is open (owned by `self`); the slot
        // lock is held, so the child is not reaped meanwhile.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                self.pidfd.as_raw_fd(),
                sig,
                std::ptr::null::<libc::siginfo_t>(),
                0 as libc::c_uint,
            )
        };
        drop(slot);
        if rc < 0 {
            let err = io::Error::last_os_error();
            if err.raw_os_error() == Some(libc::ESRCH) {
                return Ok(());
            }
            return Err(err);
        }
        Ok(())
    }
}

/// The wait status `waitpid` would have reported, from `waitid`'s
/// `si_code` and `si_status`, so `ExitStatus::code`/`signal`/
/// `core_dumped` work.
pub(crate) fn exit_status(si_code: libc::c_int, si_status: libc::c_int) -> ExitStatus {
    let raw = match si_code {
        libc::CLD_EXITED => (si_status & 0xff) << 8,
        libc::CLD_KILLED => si_status & 0x7f,
        libc::CLD_DUMPED => (si_status & 0x7f) | 0x80,
        // WEXITED only reports the three above; keep anything else as an
        // exit code rather than inventing a signal.
        _ => (si_status & 0xff) << 8,
    };
    ExitStatus::from_raw(raw)
}

/// Waits on the ring until the child has exited, and reaps it (module
/// docs, steps 1 to 5).
pub(crate) async fn wait(native: &UringNativeAny, proc: &Arc<Proc>) -> io::Result<ExitStatus> {
    loop {
        if let Some(status) = proc.try_reap()? {
            return Ok(status);
        }
        if let Err(err) = exited(native, proc).await {
            // Step 5: another waiter may have reaped after our `try_reap`
            // (the kernel then says `ECHILD`); its status is in the slot.
            return proc.status().ok_or(err);
        }
    }
}

/// What a ring wait reported.
enum Armed {
    /// The child exited (and the decoder has reaped it).
    Exited,
    /// The kernel has no `IORING_OP_WAITID`.
    Unsupported,
}

/// Returns once the child has exited and the decoder has tried to reap it.
async fn exited(native: &UringNativeAny, proc: &Arc<Proc>) -> io::Result<()> {
    if !WAITID_UNSUPPORTED.load(Ordering::Relaxed) {
        match waitid_on_ring(native, proc.clone()).await? {
            Armed::Exited => return Ok(()),
            Armed::Unsupported => WAITID_UNSUPPORTED.store(true, Ordering::Relaxed),
        }
    }
    poll_on_ring(native, proc.clone()).await
}

/// The decoder both ring waits share: on success reap now (this runs even
/// if the waiting future is gone, so the status is never lost).
fn decode(cqe: io::Result<UringCqe>, proc: &Proc) -> io::Result<Armed> {
    let cqe = cqe?;
    if cqe.result >= 0 {
        proc.try_reap()?;
        return Ok(Armed::Exited);
    }
    match -cqe.result {
        libc::EINVAL | libc::EOPNOTSUPP => Ok(Armed::Unsupported),
        errno => Err(io::Error::from_raw_os_error(errno)),
    }
}

/// `IORING_OP_WAITID(P_PIDFD, WEXITED | WNOWAIT)`.
fn waitid_on_ring(
    native: &UringNativeAny,
    proc: Arc<Proc>,
) -> impl std::future::Future<Output = io::Result<Armed>> + Send + 'static {
    let build = |proc: &mut Arc<Proc>| {
        let id = proc.pidfd.as_raw_fd() as libc::id_t;
        opcode::WaitId::new(libc::P_PIDFD, id, libc::WEXITED | libc::WNOWAIT).build()
    };
    // `infop` stays null: the decoder's reaping `waitid` reads the status,
    // so the decoder returns no resource that would need giving back.
    // SAFETY: the SQE carries no address; the pidfd it names is owned by
    // the `Proc` the state holds until the completion; WAITID posts exactly
    // one completion and uses no fixed files or buffers.
    unsafe { native.submit_unsafe(proc, build, |cqe, proc| decode(cqe, &proc)) }
}

/// The fallback: `IORING_OP_POLL_ADD(pidfd, POLLIN)`.
fn poll_on_ring(
    native: &UringNativeAny,
    proc: Arc<Proc>,
) -> impl std::future::Future<Output = io::Result<()>> + Send + 'static {
    let build = |proc: &mut Arc<Proc>| {
        opcode::PollAdd::new(types::Fd(proc.pidfd.as_raw_fd()), libc::POLLIN as u32).build()
    };
    // SAFETY: the SQE carries no address; the pidfd it polls is owned by
    // the `Proc` the state holds until the completion; a single-shot poll
    // posts exactly one completion; no fixed files or buffers.
    let op = unsafe { native.submit_unsafe(proc, build, |cqe, proc| decode(cqe, &proc)) };
    async move {
        match op.await? {
            Armed::Exited => Ok(()),
            // A poll is never "unsupported"; an EINVAL here is an error.
            Armed::Unsupported => Err(io::Error::from_raw_os_error(libc::EINVAL)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;

    #[test]
    fn statuses_decode_like_waitpid() {
        let exited = exit_status(libc::CLD_EXITED, 3);
        assert_eq!(exited.code(), Some(3));
        assert_eq!(exited.signal(), None);
        let killed = exit_status(libc::CLD_KILLED, libc::SIGKILL);
        assert_eq!(killed.code(), None);
        assert_eq!(killed.signal(), Some(libc::SIGKILL));
        assert!(!killed.core_dumped());
        let dumped = exit_status(libc::CLD_DUMPED, libc::SIGSEGV);
        assert_eq!(dumped.signal(), Some(libc::SIGSEGV));
        assert!(dumped.core_dumped());
    }

    /// Spawns with std, then hands the reaping to a `Proc`.
    #[allow(clippy::zombie_processes)]
    fn spawn_proc(args: &[&str]) -> Arc<Proc> {
        let child = std::process::Command::new(args[0])
            .args(&args[1..])
            .spawn()
            .expect("spawn");
        Arc::new(Proc::open(child.id()).expect("pidfd_open"))
    }

    /// Runs `f` on its own thread; fails the test if it does not finish
    /// within a minute (a hang bound, not a performance assertion).
    fn bounded<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(f());
        });
        rx.recv_timeout(std::time::Duration::from_secs(60))
            .expect("hung (or panicked)")
    }

    /// Two waits in flight at once on two rings, as a dropped `wait()`
    /// whose op is still armed and the next `wait()` are: the exit wakes
    /// both ops, the first decoder reaps, and the other ring's op then
    /// finds no child and completes with `ECHILD`. Both must report the
    /// recorded status.
    #[test]
    fn two_waits_on_two_rings_both_report_the_status() {
        const ROUNDS: usize = 100;
        let failures = bounded(|| {
            let rt = spargio::Runtime::builder().shards(2).build().unwrap();
            let h = rt.handle();
            let mut failures = Vec::new();
            for _ in 0..ROUNDS {
                let proc = spawn_proc(&["sleep", "3600"]);
                let (armed_tx, armed_rx) = std::sync::mpsc::channel();
                let waits: Vec<_> = (0..2)
                    .map(|shard| {
                        let native = h.uring_native_unbound();
                        let (proc, armed) = (proc.clone(), armed_tx.clone());
                        let waiting = async move {
                            let mut waiting = std::pin::pin!(wait(&native, &proc));
                            // One poll puts the op on this shard's ring
                            // (the least loaded, ties to the caller).
                            let first = std::future::poll_fn(|cx| {
                                std::task::Poll::Ready(waiting.as_mut().poll(cx))
                            })
                            .await;
                            armed.send(()).unwrap();
                            match first {
                                std::task::Poll::Ready(out) => out,
                                std::task::Poll::Pending => waiting.await,
                            }
                        };
                        h.spawn_pinned(shard, waiting).unwrap()
                    })
                    .collect();
                armed_rx.recv().unwrap();
                armed_rx.recv().unwrap();
                proc.signal(libc::SIGKILL).unwrap();
                for waiting in waits {
                    let out = spargio::block_on(waiting).unwrap();
                    if out.as_ref().ok().and_then(|s| s.signal()) != Some(libc::SIGKILL) {
                        failures.push(out.map_err(|e| e.raw_os_error()));
                    }
                }
            }
            failures
        });
        assert!(
            failures.is_empty(),
            "{} waits of {}: {failures:?}",
            failures.len(),
            2 * ROUNDS
        );
    }

    /// The reap a dropped, killed child gets when no runtime is left must
    /// not hold the status lock while it waits for the exit: every other
    /// holder of the `Proc` (a ring op's decoder on a shard, `signal`,
    /// `status`) would block behind it for as long as the child lives.
    #[test]
    fn a_blocking_reap_does_not_hold_the_lock_while_it_waits() {
        let proc = spawn_proc(&["sleep", "3600"]);
        let pid = proc.pid() as libc::pid_t;
        let reaping = proc.clone();
        // The child has not died yet (a kill that is slow to act, or did
        // not act at all).
        let (reaper_tx, reaper_rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = reaper_tx.send(reaping.reap_killed(Duration::from_secs(60)));
        });
        std::thread::sleep(std::time::Duration::from_millis(50));
        let probe = proc.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(probe.try_reap().map_err(|e| e.raw_os_error()));
        });
        let probed = rx.recv_timeout(std::time::Duration::from_secs(10));
        // SAFETY: `pid` is our unreaped child (its pidfd is open in
        // `proc`), so the pid cannot name another process.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        assert_eq!(probed, Ok(Ok(None)), "try_reap blocked behind the reap");
        let reaped = reaper_rx.recv_timeout(std::time::Duration::from_secs(60));
        let signal = reaped.ok().and_then(Result::ok).flatten();
        assert_eq!(signal.and_then(|s| s.signal()), Some(libc::SIGKILL));
        assert_eq!(proc.status(), signal, "recorded in the slot");
    }

    /// A kill that has not acted within the grace leaves the child to
    /// run: the reap gives up, reaps nothing, records nothing.
    #[test]
    fn a_blocking_reap_gives_up_after_its_grace() {
        let proc = spawn_proc(&["sleep", "3600"]);
        let pid = proc.pid() as libc::pid_t;
        let reaping = proc.clone();
        let reaped = bounded(move || {
            reaping
                .reap_killed(Duration::from_millis(20))
                .map_err(|e| e.raw_os_error())
        });
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat"));
        assert_eq!(proc.reap_killed(Duration::ZERO).unwrap(), None);
        proc.signal(libc::SIGKILL).unwrap();
        let status = bounded(move || proc.reap_killed(Duration::from_secs(60)).unwrap());
        assert_eq!(reaped, Ok(None));
        assert!(state.is_ok_and(|s| !s.contains(") Z ")), "still running");
        assert_eq!(status.and_then(|s| s.signal()), Some(libc::SIGKILL));
    }

    /// The fallback path, forced: a poll on the pidfd, then the reap.
    #[test]
    fn the_poll_fallback_reaps_the_child() {
        let rt = spargio::Runtime::builder().shards(1).build().unwrap();
        let native = rt.handle().uring_native_unbound();
        let proc = spawn_proc(&["sh", "-c", "sleep 0.05; exit 7"]);
        let task = rt.handle().spawn_stealable(async move {
            loop {
                poll_on_ring(&native, proc.clone()).await.unwrap();
                if let Some(status) = proc.status() {
                    return status;
                }
            }
        });
        let status = spargio::block_on(task.unwrap()).unwrap();
        assert_eq!(status.code(), Some(7));
    }

    /// The WAITID path with `WNOWAIT`: the ring op does not reap, the
    /// decoder does.
    #[test]
    fn the_waitid_decoder_reaps_the_child() {
        let rt = spargio::Runtime::builder().shards(1).build().unwrap();
        let native = rt.handle().uring_native_unbound();
        let proc = spawn_proc(&["sh", "-c", "exit 5"]);
        let probe = proc.clone();
        let task = rt
            .handle()
            .spawn_stealable(async move { waitid_on_ring(&native, probe).await });
        match spargio::block_on(task.unwrap()).unwrap().unwrap() {
            Armed::Exited => assert_eq!(proc.status().and_then(|s| s.code()), Some(5)),
            Armed::Unsupported => eprintln!("SKIP: no IORING_OP_WAITID on this kernel"),
        }
    }
}

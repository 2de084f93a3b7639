//! The shard's epoll instance: interest per fd, and the wait.
//!
//! An fd the runtime owns is registered once, edge-triggered for reads and
//! writes, and stays registered until it is closed (`epochs.rs` says when
//! that is). Any other fd is armed (`EPOLLONESHOT`, level-triggered): an fd
//! reports once, then stays registered but disarmed until the driver arms
//! it again for the operations still waiting. Level-triggered arming means
//! an fd that became ready between an operation's `EAGAIN` and the arm
//! reports at once; one-shot means nothing reports for an fd nobody waits
//! on. Either way the driver never deregisters: the kernel drops a closed
//! file's registration by itself, and an arm or registration that finds
//! none (the fd number now names another file) registers anew.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// The event token of the shard's eventfd (fd tokens are fd numbers).
pub(super) const EVENTFD_TOKEN: u64 = u64::MAX;

/// How an arm ended.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Armed {
    Yes,
    /// The file does not support readiness (a regular file, a directory):
    /// the operation runs on the blocking pool instead.
    NotPollable,
}

/// Most readiness events one wait returns.
pub(super) const EVENTS_PER_WAIT: usize = 256;

#[derive(Debug)]
pub(crate) struct Poller {
    /// `None` only for `dead`.
    epfd: Option<OwnedFd>,
    events: Vec<libc::epoll_event>,
}

/// `epoll_pwait2` (Linux 5.11) waits with a `timespec`; where it is
/// missing (`ENOSYS`, old kernels, some sandboxes) timeouts round up to
/// whole milliseconds for `epoll_wait`.
static NO_PWAIT2: AtomicBool = AtomicBool::new(false);

impl Poller {
    pub(crate) fn new(eventfd: RawFd) -> io::Result<Poller> {
        // The fd table starts here, on `build`'s thread: an fd the runtime
        // adopts before it is kept counts as not owned, and is armed
        // one-shot for every wait (`epochs.rs`). With `build` no longer
        // waiting for the shards, activating on the shard's thread let a
        // runtime's first sockets (made right after `build`) take that path.
        super::epochs::activate();
        // SAFETY: plain syscall; the result is checked.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a fresh fd nothing else owns.
        let epfd = unsafe { OwnedFd::from_raw_fd(fd) };
        let poller = Poller {
            epfd: Some(epfd),
            events: Vec::with_capacity(EVENTS_PER_WAIT),
        };
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: EVENTFD_TOKEN,
        };
        // SAFETY: `ev` is a valid event for the duration of the call.
        let r = unsafe { libc::epoll_ctl(poller.raw(), libc::EPOLL_CTL_ADD, eventfd, &mut ev) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(poller)
    }

    /// A poller without an epoll instance, for a shard that could get
    /// neither a ring nor one (`runtime.rs`): every call on it fails with
    /// `EBADF`, so the shard's first park fails it through the shard
    /// loop's failure path (reported, runtime shut down, tasks dropped).
    pub(crate) fn dead() -> Poller {
        Poller {
            epfd: None,
            events: Vec::new(),
        }
    }

    /// The epoll fd, for a poller that nests it (`outside.rs`).
    #[cfg(feature = "tokio-compat")]
    pub(super) fn fd(&self) -> RawFd {
        self.raw()
    }

    /// The epoll fd, or -1 (which every syscall refuses) for `dead`.
    fn raw(&self) -> RawFd {
        self.epfd.as_ref().map_or(-1, |fd| fd.as_raw_fd())
    }

    /// Arms `fd` one-shot for `interest` (`EPOLLIN`/`EPOLLOUT`/...).
    /// `registered` is the caller's belief that the fd is in the interest
    /// list (it is corrected either way).
    pub(super) fn arm(&self, fd: RawFd, interest: u32, registered: bool) -> io::Result<Armed> {
        self.ctl(fd, interest | libc::EPOLLONESHOT as u32, registered)
    }

    /// Registers `fd` edge-triggered for `super::EDGE_KINDS` (reads,
    /// writes, hang-ups, urgent data), for as long as the file is open (an
    /// fd the runtime owns: `epochs.rs`).
    pub(super) fn register_edge(&self, fd: RawFd, registered: bool) -> io::Result<Armed> {
        self.ctl(fd, super::EDGE_KINDS | libc::EPOLLET as u32, registered)
    }

    fn ctl(&self, fd: RawFd, events: u32, registered: bool) -> io::Result<Armed> {
        let mut op = if registered {
            libc::EPOLL_CTL_MOD
        } else {
            libc::EPOLL_CTL_ADD
        };
        for _ in 0..2 {
            let mut ev = libc::epoll_event {
                events,
                u64: fd as u64,
            };
            // SAFETY: `ev` is a valid event for the duration of the call.
            if unsafe { libc::epoll_ctl(self.raw(), op, fd, &mut ev) } == 0 {
                return Ok(Armed::Yes);
            }
            let err = io::Error::last_os_error();
            match err.raw_os_error() {
                Some(libc::ENOENT) if op == libc::EPOLL_CTL_MOD => op = libc::EPOLL_CTL_ADD,
                Some(libc::EEXIST) if op == libc::EPOLL_CTL_ADD => op = libc::EPOLL_CTL_MOD,
                Some(libc::EPERM) => return Ok(Armed::NotPollable),
                _ => return Err(err),
            }
        }
        Err(io::Error::other("epoll registration kept changing"))
    }

    /// Waits up to `timeout` (`None`: until an event), then hands each
    /// `(token, events)` to `f`. Returns the number of events.
    pub(super) fn wait(
        &mut self,
        timeout: Option<Duration>,
        mut f: impl FnMut(u64, u32),
    ) -> io::Result<usize> {
        let cap = self.events.capacity() as libc::c_int;
        let ptr = self.events.as_mut_ptr();
        let n = loop {
            let n = if NO_PWAIT2.load(Ordering::Relaxed) {
                let ms = timeout.map_or(-1, |t| {
                    let ms = t.as_nanos().div_ceil(1_000_000);
                    ms.min(i32::MAX as u128) as libc::c_int
                });
                // SAFETY: `ptr` has room for `cap` events (the vector's
                // capacity); the kernel writes at most `cap`.
                unsafe { libc::epoll_wait(self.raw(), ptr, cap, ms) as i64 }
            } else {
                let ts = timeout.map(|t| libc::timespec {
                    tv_sec: t.as_secs().min(i64::MAX as u64) as libc::time_t,
                    tv_nsec: t.subsec_nanos() as libc::c_long,
                });
                let tsp = ts
                    .as_ref()
                    .map_or(std::ptr::null(), |t| t as *const libc::timespec);
                // SAFETY: as above for `ptr`; `tsp` is null or points to
                // `ts`, alive across the call; no signal mask is passed.
                unsafe {
                    libc::syscall(
                        libc::SYS_epoll_pwait2,
                        self.raw(),
                        ptr,
                        cap,
                        tsp,
                        std::ptr::null::<libc::sigset_t>(),
                        0usize,
                    )
                }
            };
            if n >= 0 {
                break n as usize;
            }
            let err = io::Error::last_os_error();
            match err.raw_os_error() {
                Some(libc::EINTR) => break 0,
                Some(libc::ENOSYS) if !NO_PWAIT2.load(Ordering::Relaxed) => {
                    NO_PWAIT2.store(true, Ordering::Relaxed);
                }
                _ => return Err(err),
            }
        };
        // SAFETY: the kernel initialized the first `n <= cap` events.
        unsafe { self.events.set_len(n) };
        for ev in self.events.drain(..) {
            let (token, events) = (ev.u64, ev.events);
            f(token, events);
        }
        Ok(n)
    }
}

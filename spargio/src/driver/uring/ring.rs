//! Ring setup, feature probing, and the one place SQEs are pushed.
//!
//! Setup asks for everything the configuration allows
//! (`SINGLE_ISSUER | DEFER_TASKRUN | COOP_TASKRUN | TASKRUN_FLAG`, or SQPOLL)
//! and, when the kernel answers `EINVAL`, drops one optional flag at a time
//! until it accepts. What was obtained is recorded in [`RingFeatures`].

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

use io_uring::{opcode, squeue, types, IoUring, Probe};

use crate::error::RuntimeError;
use crate::stats::RingFeatures;

/// `IORING_ENTER_GETEVENTS` (uapi `io_uring.h`): run deferred task work and
/// flush overflowed completions while entering.
const ENTER_GETEVENTS: u32 = 1;
/// `IORING_ENTER_SQ_WAKEUP`: wake an idle `SQPOLL` thread.
const ENTER_SQ_WAKEUP: u32 = 2;

/// The longest one blocking `io_uring_enter` may last, when the
/// environment sets `SPARGIO_MAX_BLOCK_US`; by default, unbounded.
///
/// A debugging aid for tools that run one thread at a time and treat a
/// blocking `io_uring_enter` as non-blocking (valgrind 3.19 does): there, a
/// shard blocked in the kernel keeps every other thread from running, and
/// the bound turns that deadlock into a slow poll. Read once per process.
fn max_block() -> Option<Duration> {
    static MAX: std::sync::OnceLock<Option<Duration>> = std::sync::OnceLock::new();
    *MAX.get_or_init(|| {
        std::env::var("SPARGIO_MAX_BLOCK_US")
            .ok()
            .and_then(|v| v.parse().ok())
            .map(Duration::from_micros)
    })
}

/// What the runtime asks of each ring.
#[derive(Clone, Debug)]
pub(crate) struct RingConfig {
    pub(crate) entries: u32,
    pub(crate) sqpoll_idle_ms: Option<u32>,
    pub(crate) sqpoll_cpu: Option<u32>,
    pub(crate) single_issuer: bool,
    pub(crate) coop_taskrun: bool,
    pub(crate) defer_taskrun: bool,
}

/// The optional setup flags, in the order they are given up on `EINVAL`.
#[derive(Clone, Copy, Debug)]
struct Wanted {
    defer_taskrun: bool,
    taskrun_flag: bool,
    coop_taskrun: bool,
    single_issuer: bool,
    sqpoll: bool,
}

impl Wanted {
    /// Drops the most demanding flag still set; `false` when none is left.
    fn relax(&mut self) -> bool {
        for flag in [
            &mut self.defer_taskrun,
            &mut self.taskrun_flag,
            &mut self.coop_taskrun,
            &mut self.single_issuer,
            &mut self.sqpoll,
        ] {
            if *flag {
                *flag = false;
                return true;
            }
        }
        false
    }
}

/// One shard's io_uring instance.
pub(crate) struct Ring {
    uring: IoUring,
    features: RingFeatures,
    /// Pushes that found the submission queue full (taken by the driver).
    sq_full: u64,
    /// `SPARGIO_URING_FAULTS` (`faults.rs`); off otherwise.
    faults: super::faults::Faults,
}

impl Ring {
    /// Creates the ring disabled (`IORING_SETUP_R_DISABLED`), falling back
    /// flag by flag. The shard thread calls [`Ring::enable`], which makes it
    /// the ring's single issuer; until then nobody may submit.
    pub(crate) fn new(config: &RingConfig, shard: usize) -> Result<Ring, RuntimeError> {
        let mut wanted = Wanted {
            // DEFER_TASKRUN needs SINGLE_ISSUER and excludes SQPOLL.
            defer_taskrun: config.defer_taskrun
                && config.single_issuer
                && config.sqpoll_idle_ms.is_none(),
            // The kernel refuses the task-run flags with SQPOLL (no IPIs
            // to tune there): do not ask for what it will refuse.
            taskrun_flag: (config.coop_taskrun || config.defer_taskrun)
                && config.sqpoll_idle_ms.is_none(),
            coop_taskrun: config.coop_taskrun && config.sqpoll_idle_ms.is_none(),
            single_issuer: config.single_issuer,
            sqpoll: config.sqpoll_idle_ms.is_some(),
        };
        let uring = loop {
            match build(config, wanted) {
                Ok(uring) => break uring,
                Err(err) if err.raw_os_error() == Some(libc::EINVAL) && wanted.relax() => {}
                Err(err) => return Err(classify_setup(err, config.entries)),
            }
        };
        let params = uring.params();
        if !params.is_feature_ext_arg() {
            return Err(RuntimeError::IoUringUnavailable {
                reason: "the kernel lacks IORING_FEAT_EXT_ARG (Linux 5.11+ is required)".into(),
                source: io::Error::from_raw_os_error(libc::ENOSYS),
            });
        }
        // The kernel's opcode table does not change while we run: probe
        // once per process, not once per ring (cold starts pay per ring).
        static MSG_RING: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        let msg_ring = *MSG_RING.get_or_init(|| {
            let mut probe = Probe::new();
            uring.submitter().register_probe(&mut probe).is_ok()
                && probe.is_supported(opcode::MsgRingData::CODE)
        });
        let features = RingFeatures {
            sq_entries: params.sq_entries(),
            cq_entries: params.cq_entries(),
            single_issuer: wanted.single_issuer,
            coop_taskrun: wanted.coop_taskrun,
            defer_taskrun: wanted.defer_taskrun,
            taskrun_flag: wanted.taskrun_flag,
            sqpoll: wanted.sqpoll,
            msg_ring,
            nodrop: params.is_feature_nodrop(),
            skip_cqe_on_success: params.is_feature_skip_cqe_on_success(),
        };
        Ok(Ring {
            uring,
            features,
            sq_full: 0,
            faults: super::faults::Faults::for_shard(shard),
        })
    }

    /// Enables the ring on the calling thread, which becomes its submitter
    /// (with `SINGLE_ISSUER`, the only thread allowed to submit).
    pub(crate) fn enable(&self) -> io::Result<()> {
        self.uring.submitter().register_enable_rings()
    }

    /// The ring's registration calls.
    pub(crate) fn submitter(&self) -> io_uring::Submitter<'_> {
        self.uring.submitter()
    }

    /// Turns the registered eventfd's signalling on or off
    /// (`IORING_CQ_EVENTFD_DISABLED`; see `outside.rs`).
    #[cfg(feature = "tokio-compat")]
    pub(crate) fn completion_notify(&mut self, on: bool) {
        let cq = self.uring.completion();
        if on {
            cq.enable_eventfd();
        } else {
            cq.disable_eventfd();
        }
    }

    pub(crate) fn fd(&self) -> RawFd {
        self.uring.as_raw_fd()
    }

    pub(crate) fn features(&self) -> RingFeatures {
        self.features
    }

    /// Queues one SQE, submitting first when the SQ is full.
    ///
    /// # Safety
    ///
    /// Every address the entry hands the kernel (buffers, iovecs, paths,
    /// sockaddrs) must stay valid, and must not be accessed in a way that
    /// conflicts with the kernel's use, until the entry's final CQE is reaped.
    pub(crate) unsafe fn push(&mut self, entry: &squeue::Entry) -> io::Result<()> {
        // A patched entry points where `entry` does, or nowhere (a NOP).
        let faulty = self.faults.apply(entry);
        let entry = faulty.as_ref().unwrap_or(entry);
        for _ in 0..2 {
            let refused = crate::driver::faults::push_refused();
            // SAFETY: the caller upholds the lifetime contract of every address
            // in `entry` (this function's own contract).
            if !refused && unsafe { self.uring.submission().push(entry) }.is_ok() {
                return Ok(());
            }
            self.sq_full += 1;
            self.submit()?;
        }
        // The SQ stayed full: the kernel refused to take entries (CQ overflow
        // backlog). The caller reaps and tries again.
        Err(io::Error::from(io::ErrorKind::WouldBlock))
    }

    /// Pushes that found the submission queue full, since the last call.
    pub(crate) fn take_sq_full(&mut self) -> u64 {
        std::mem::take(&mut self.sq_full)
    }

    /// Number of SQEs queued but not yet handed to the kernel.
    pub(crate) fn unsubmitted(&mut self) -> usize {
        self.uring.submission().len()
    }

    /// True when entering the kernel without waiting would make progress:
    /// queued SQEs, deferred task work, or overflowed completions.
    pub(crate) fn needs_enter(&mut self) -> bool {
        let defer_blind = self.features.defer_taskrun && !self.features.taskrun_flag;
        let sq = self.uring.submission();
        !sq.is_empty() || sq.taskrun() || sq.cq_overflow() || defer_blind
    }

    /// Hands queued SQEs to the kernel and, in the same call, runs deferred
    /// task work and flushes overflowed CQEs. Never blocks.
    pub(crate) fn submit(&mut self) -> io::Result<usize> {
        let to_submit = self.unsubmitted() as u32;
        let mut flags = ENTER_GETEVENTS;
        // Under SQPOLL the kernel thread takes the SQEs and `to_submit` is
        // ignored; once that thread has idled it sleeps until woken, and
        // it says so in the SQ flags. `need_wakeup` issues the full fence
        // the kernel documents between publishing the tail (done when the
        // queue was pushed) and reading the flag.
        if self.features.sqpoll && to_submit > 0 && self.uring.submission().need_wakeup() {
            flags |= ENTER_SQ_WAKEUP;
        }
        loop {
            let res = match crate::driver::faults::enter() {
                Err(injected) => Err(injected),
                // SAFETY: a plain io_uring_enter on our own ring with no
                // argument struct; GETEVENTS with min_complete = 0 does not
                // block.
                Ok(()) => unsafe {
                    self.uring
                        .submitter()
                        .enter::<libc::sigset_t>(to_submit, 0, flags, None)
                },
            };
            match res {
                Ok(n) => return Ok(n),
                Err(err) => match err.raw_os_error() {
                    Some(libc::EINTR) => continue,
                    // CQ overflow backlog or no memory for requests right now:
                    // the caller reaps, then submits again.
                    // Transient: the kernel is short of resources or its
                    // completion queue overflowed; the SQEs stay queued
                    // and go with the next enter.
                    Some(libc::EBUSY) | Some(libc::EAGAIN) | Some(libc::ENOMEM) => return Ok(0),
                    _ => return Err(err),
                },
            }
        }
    }

    /// Submits and blocks until at least one CQE is ready or `timeout`
    /// passes. Interrupts and timeouts are not errors.
    pub(crate) fn wait(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        let timeout = match (timeout, max_block()) {
            (Some(t), Some(max)) => Some(t.min(max)),
            (t, max) => t.or(max),
        };
        // An injected failure takes the same path as a real one below.
        let res = crate::driver::faults::enter().and_then(|()| match timeout {
            Some(timeout) => {
                let ts = types::Timespec::from(timeout);
                let args = types::SubmitArgs::new().timespec(&ts);
                self.uring.submitter().submit_with_args(1, &args)
            }
            None => self.uring.submitter().submit_and_wait(1),
        });
        match res {
            Ok(_) => Ok(()),
            Err(err) => match err.raw_os_error() {
                Some(libc::ETIME) | Some(libc::EINTR) | Some(libc::EBUSY) | Some(libc::EAGAIN)
                | Some(libc::ENOMEM) => Ok(()),
                _ => Err(err),
            },
        }
    }

    /// Hands every ready CQE to `f` as `(user_data, result, flags)`.
    pub(crate) fn reap(&mut self, mut f: impl FnMut(u64, i32, u32)) -> usize {
        let mut n = 0;
        for cqe in self.uring.completion() {
            f(cqe.user_data(), cqe.result(), cqe.flags());
            n += 1;
        }
        n
    }

    /// The kernel holds completions back for lack of room in the CQ
    /// (`IORING_SQ_CQ_OVERFLOW`; kept, with `IORING_FEAT_NODROP`, and
    /// flushed by the next enter).
    pub(crate) fn cq_overflowed(&mut self) -> bool {
        self.uring.submission().cq_overflow()
    }

    /// True when at least one CQE is ready to reap.
    pub(crate) fn has_completions(&mut self) -> bool {
        !self.uring.completion().is_empty()
    }
}

fn build(config: &RingConfig, wanted: Wanted) -> io::Result<IoUring> {
    let mut builder = IoUring::builder();
    builder.setup_clamp();
    builder.setup_r_disabled();
    if wanted.sqpoll {
        builder.setup_sqpoll(config.sqpoll_idle_ms.unwrap_or(0));
        if let Some(cpu) = config.sqpoll_cpu {
            builder.setup_sqpoll_cpu(cpu);
        }
    }
    if wanted.single_issuer {
        builder.setup_single_issuer();
    }
    if wanted.coop_taskrun {
        builder.setup_coop_taskrun();
    }
    if wanted.taskrun_flag {
        builder.setup_taskrun_flag();
    }
    if wanted.defer_taskrun {
        builder.setup_defer_taskrun();
    }
    builder.build(config.entries)
}

/// Names the cause of a ring creation failure in one line.
pub(crate) fn classify_setup(err: io::Error, entries: u32) -> RuntimeError {
    let reason = match err.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => {
            "io_uring is not permitted here (kernel.io_uring_disabled sysctl, a seccomp \
             policy or a container profile blocks io_uring_setup)"
                .to_string()
        }
        Some(libc::ENOSYS) => {
            "the kernel has no io_uring support (io_uring_setup is ENOSYS)".into()
        }
        Some(libc::ENOMEM) => format!(
            "not enough locked memory for a ring of {entries} entries (raise RLIMIT_MEMLOCK \
             or lower ring_entries)"
        ),
        Some(libc::EMFILE) | Some(libc::ENFILE) => "out of file descriptors for the ring".into(),
        Some(libc::EINVAL) => format!("the kernel rejected a ring of {entries} entries"),
        _ => format!("io_uring_setup failed: {err}"),
    };
    RuntimeError::IoUringUnavailable {
        reason,
        source: err,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason(errno: i32) -> String {
        match classify_setup(io::Error::from_raw_os_error(errno), 256) {
            RuntimeError::IoUringUnavailable { reason, source } => {
                assert_eq!(source.raw_os_error(), Some(errno));
                reason
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn setup_failures_name_their_cause() {
        assert!(reason(libc::EPERM).contains("io_uring_disabled"));
        assert!(reason(libc::EPERM).contains("seccomp"));
        assert!(reason(libc::ENOSYS).contains("no io_uring support"));
        assert!(reason(libc::ENOMEM).contains("RLIMIT_MEMLOCK"));
        assert!(reason(libc::EINVAL).contains("256 entries"));
        assert!(reason(libc::EMFILE).contains("file descriptors"));
    }

    #[test]
    fn relax_drops_flags_most_demanding_first() {
        let mut w = Wanted {
            defer_taskrun: true,
            taskrun_flag: true,
            coop_taskrun: true,
            single_issuer: true,
            sqpoll: true,
        };
        assert!(w.relax());
        assert!(!w.defer_taskrun && w.taskrun_flag);
        while w.relax() {}
        assert!(!w.sqpoll && !w.single_issuer && !w.coop_taskrun);
        assert!(!w.relax());
    }
}

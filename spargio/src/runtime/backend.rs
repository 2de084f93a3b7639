//! Choosing the I/O backend.
//!
//! A runtime runs on io_uring or on epoll, never on both. The choice is
//! made once, in `build()`:
//!
//! 1. The builder's [`BackendKind`] if one was set; else the process's
//!    `SPARGIO_BACKEND` (`auto`, `io_uring`, `epoll`); else `Auto`.
//! 2. `Auto` probes io_uring once per process (see [`probe`]): a ring can
//!    be set up, registered and entered, and the kernel has every opcode
//!    the runtime submits. If any step is refused (no io_uring in the
//!    kernel, `kernel.io_uring_disabled`, a seccomp profile such as
//!    Docker's default, gVisor) the runtime is built on epoll, and the
//!    refusal is kept for [`RuntimeHandle::io_uring_refusal`] and the
//!    stats. A shard ring that cannot be created after a good probe (the
//!    memlock limit of a big ring, say) is a refusal too.
//! 3. `IoUring` never falls back: a refusal is the error of `build()`.
//!    `Epoll` does not touch io_uring at all.
//!
//! [`RuntimeHandle::io_uring_refusal`]: crate::RuntimeHandle::io_uring_refusal

use std::fmt;
use std::str::FromStr;
use std::sync::OnceLock;

use io_uring::{opcode, IoUring, Probe};

use crate::error::RuntimeError;

/// The I/O backend a runtime runs on.
///
/// ```
/// use spargio::BackendKind;
///
/// # fn main() -> Result<(), spargio::RuntimeError> {
/// // The default: io_uring where the kernel allows it, epoll elsewhere.
/// let rt = spargio::Runtime::builder().shards(1).build()?;
/// let kind = rt.handle().backend();
/// assert!(kind == BackendKind::IoUring || kind == BackendKind::Epoll);
///
/// // Forced epoll (what `SPARGIO_BACKEND=epoll` does for a whole process).
/// let rt = spargio::Runtime::builder()
///     .shards(1)
///     .backend(BackendKind::Epoll)
///     .build()?;
/// assert_eq!(rt.handle().backend(), BackendKind::Epoll);
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BackendKind {
    /// io_uring if the kernel, its settings and the sandbox allow it, else
    /// epoll (module docs of `runtime/backend.rs`, the book's "Backends").
    #[default]
    Auto,
    /// Linux io_uring, one ring per shard; `build()` fails where refused.
    IoUring,
    /// epoll readiness, one epoll instance per shard; files on the
    /// blocking pool.
    Epoll,
}

impl BackendKind {
    /// The name `SPARGIO_BACKEND` and the macros use: `auto`, `io_uring`,
    /// `epoll`.
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Auto => "auto",
            BackendKind::IoUring => "io_uring",
            BackendKind::Epoll => "epoll",
        }
    }
}

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for BackendKind {
    type Err = RuntimeError;

    /// Parses `auto`, `io_uring` (or `io-uring`, `uring`) and `epoll`,
    /// ignoring case.
    fn from_str(s: &str) -> Result<BackendKind, RuntimeError> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(BackendKind::Auto),
            "io_uring" | "io-uring" | "uring" => Ok(BackendKind::IoUring),
            "epoll" => Ok(BackendKind::Epoll),
            other => Err(RuntimeError::InvalidConfig {
                knob: "backend",
                reason: format!("unknown backend {other:?}: expected auto, io_uring or epoll"),
            }),
        }
    }
}

/// Why a runtime built with [`BackendKind::Auto`] runs on epoll.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct IoUringRefusal {
    /// The errno the kernel answered with, when one did (`EPERM` for
    /// seccomp and `io_uring_disabled`, `ENOSYS` without io_uring).
    pub errno: Option<i32>,
    /// The cause in words.
    pub reason: String,
}

impl fmt::Display for IoUringRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.reason)?;
        if let Some(errno) = self.errno {
            write!(f, " ({})", std::io::Error::from_raw_os_error(errno))?;
        }
        Ok(())
    }
}

impl IoUringRefusal {
    pub(crate) fn from_error(err: &RuntimeError) -> IoUringRefusal {
        match err {
            RuntimeError::IoUringUnavailable { reason, source } => IoUringRefusal {
                errno: source.raw_os_error(),
                reason: reason.clone(),
            },
            other => IoUringRefusal {
                errno: None,
                reason: other.to_string(),
            },
        }
    }

    fn into_error(self) -> RuntimeError {
        let source = match self.errno {
            Some(errno) => std::io::Error::from_raw_os_error(errno),
            None => std::io::Error::from(std::io::ErrorKind::Unsupported),
        };
        RuntimeError::IoUringUnavailable {
            reason: self.reason,
            source,
        }
    }
}

/// The backend to build: the builder's choice, else `SPARGIO_BACKEND`,
/// else `Auto`.
pub(crate) fn requested(builder: Option<BackendKind>) -> Result<BackendKind, RuntimeError> {
    if let Some(kind) = builder {
        return Ok(kind);
    }
    match std::env::var("SPARGIO_BACKEND") {
        Ok(v) if !v.trim().is_empty() => v.parse().map_err(|_| RuntimeError::InvalidConfig {
            knob: "SPARGIO_BACKEND",
            reason: format!("{v:?} is not auto, io_uring or epoll"),
        }),
        _ => Ok(BackendKind::Auto),
    }
}

/// What a runtime will run on: `IoUring` or `Epoll`, and for an `Auto`
/// that fell back, why.
pub(crate) fn resolve(
    requested: BackendKind,
) -> Result<(BackendKind, Option<IoUringRefusal>), RuntimeError> {
    match requested {
        BackendKind::Epoll => Ok((BackendKind::Epoll, None)),
        BackendKind::IoUring => match probe() {
            Ok(()) => Ok((BackendKind::IoUring, None)),
            Err(refusal) => Err(refusal.clone().into_error()),
        },
        BackendKind::Auto => match probe() {
            Ok(()) => Ok((BackendKind::IoUring, None)),
            Err(refusal) => Ok((BackendKind::Epoll, Some(refusal.clone()))),
        },
    }
}

/// Whether io_uring can be used by this process: `Ok` where an
/// [`BackendKind::Auto`] runtime would run on io_uring, else why not.
/// Probed once per process (a ring set up, registered and entered).
///
/// ```
/// match spargio::probe_io_uring() {
///     Ok(()) => println!("io_uring is allowed here"),
///     Err(refusal) => println!("epoll it is: {refusal}"),
/// }
/// ```
pub fn probe_io_uring() -> Result<(), IoUringRefusal> {
    probe().clone()
}

/// Opcodes every runtime submits, by name for the refusal.
const REQUIRED: [(u8, &str); 14] = [
    (opcode::Nop::CODE, "NOP"),
    (opcode::Read::CODE, "READ"),
    (opcode::Write::CODE, "WRITE"),
    (opcode::Recv::CODE, "RECV"),
    (opcode::Send::CODE, "SEND"),
    (opcode::RecvMsg::CODE, "RECVMSG"),
    (opcode::SendMsg::CODE, "SENDMSG"),
    (opcode::Accept::CODE, "ACCEPT"),
    (opcode::Connect::CODE, "CONNECT"),
    (opcode::Close::CODE, "CLOSE"),
    (opcode::OpenAt::CODE, "OPENAT"),
    (opcode::Statx::CODE, "STATX"),
    (opcode::AsyncCancel::CODE, "ASYNC_CANCEL"),
    (opcode::Timeout::CODE, "TIMEOUT"),
];

/// Whether io_uring works here, probed once per process (module docs):
/// `io_uring_setup`, `io_uring_register` (the opcode probe) and
/// `io_uring_enter` (one `NOP`), each of which a sandbox may refuse alone.
pub(crate) fn probe() -> &'static Result<(), IoUringRefusal> {
    static PROBE: OnceLock<Result<(), IoUringRefusal>> = OnceLock::new();
    PROBE.get_or_init(probe_uncached)
}

fn probe_uncached() -> Result<(), IoUringRefusal> {
    let mut ring = IoUring::new(4)
        .map_err(|err| IoUringRefusal::from_error(&crate::driver::uring::classify_setup(err, 4)))?;
    let refused = |call: &str, err: std::io::Error| IoUringRefusal {
        errno: err.raw_os_error(),
        reason: format!(
            "{call} is refused (a seccomp policy or a container profile allows \
             io_uring_setup but not {call})"
        ),
    };
    let mut probe = Probe::new();
    ring.submitter()
        .register_probe(&mut probe)
        .map_err(|e| refused("io_uring_register", e))?;
    if let Some((_, name)) = REQUIRED.iter().find(|(code, _)| !probe.is_supported(*code)) {
        return Err(IoUringRefusal {
            errno: Some(libc::EINVAL),
            reason: format!("the kernel lacks IORING_OP_{name} (Linux 5.18+ is needed)"),
        });
    }
    let nop = opcode::Nop::new().build().user_data(1);
    // SAFETY: a NOP carries no addresses.
    unsafe { ring.submission().push(&nop) }.map_err(|_| IoUringRefusal {
        errno: None,
        reason: "the probe ring's submission queue is full".into(),
    })?;
    ring.submit_and_wait(1)
        .map_err(|e| refused("io_uring_enter", e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back() {
        for kind in [BackendKind::Auto, BackendKind::IoUring, BackendKind::Epoll] {
            assert_eq!(kind.name().parse::<BackendKind>().unwrap(), kind);
        }
        assert_eq!(
            " IO-URING ".parse::<BackendKind>().unwrap(),
            BackendKind::IoUring
        );
        assert!("kqueue".parse::<BackendKind>().is_err());
    }

    #[test]
    fn builder_choice_wins_over_the_environment() {
        assert_eq!(
            requested(Some(BackendKind::Epoll)).unwrap(),
            BackendKind::Epoll
        );
    }

    #[test]
    fn a_refusal_names_its_errno() {
        let r = IoUringRefusal {
            errno: Some(libc::EPERM),
            reason: "io_uring is not permitted here".into(),
        };
        let text = r.to_string();
        assert!(text.contains("not permitted here"), "{text}");
        assert!(text.contains("Operation not permitted"), "{text}");
    }
}

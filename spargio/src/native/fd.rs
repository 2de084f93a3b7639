//! `NativeFd`: an fd shared with the operations that use it.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use crate::op::SharedFd;

/// An owned fd that native operations can share: each operation holds a
/// clone until its final completion, so the fd is closed only when the
/// last handle and the last operation are gone (and then through the ring
/// when that happens on a shard). Cloning is a reference-count increment.
///
/// ```
/// use spargio::NativeFd;
///
/// let fd = NativeFd::from(std::fs::File::open("/dev/null").unwrap());
/// let twin = fd.clone();
/// assert_eq!(std::os::fd::AsRawFd::as_raw_fd(&fd), std::os::fd::AsRawFd::as_raw_fd(&twin));
/// ```
#[derive(Clone, Debug)]
pub struct NativeFd {
    fd: SharedFd,
}

impl NativeFd {
    /// Takes ownership of `fd`.
    pub fn new(fd: OwnedFd) -> NativeFd {
        NativeFd {
            fd: SharedFd::new(fd),
        }
    }

    pub(crate) fn from_shared(fd: SharedFd) -> NativeFd {
        NativeFd { fd }
    }

    pub(crate) fn shared(&self) -> &SharedFd {
        &self.fd
    }
}

impl From<OwnedFd> for NativeFd {
    fn from(fd: OwnedFd) -> NativeFd {
        NativeFd::new(fd)
    }
}

impl From<std::fs::File> for NativeFd {
    fn from(file: std::fs::File) -> NativeFd {
        NativeFd::new(OwnedFd::from(file))
    }
}

impl From<std::net::TcpStream> for NativeFd {
    fn from(stream: std::net::TcpStream) -> NativeFd {
        NativeFd::new(OwnedFd::from(stream))
    }
}

impl From<std::net::TcpListener> for NativeFd {
    fn from(listener: std::net::TcpListener) -> NativeFd {
        NativeFd::new(OwnedFd::from(listener))
    }
}

impl From<std::os::unix::net::UnixStream> for NativeFd {
    fn from(stream: std::os::unix::net::UnixStream) -> NativeFd {
        NativeFd::new(OwnedFd::from(stream))
    }
}

impl AsRawFd for NativeFd {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.raw()
    }
}

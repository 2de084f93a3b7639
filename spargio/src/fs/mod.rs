//! Files and directories on io_uring (`spargio::fs`).
//!
//! Every call here that the kernel has an opcode for runs as a native
//! operation on a shard's ring: no helper thread, no blocking of the
//! shard. Called from a task, it goes to that task's shard; called from
//! outside the runtime, to the ring the lane selector picks. The few calls
//! io_uring cannot do (`canonicalize`, `set_permissions`, listing a
//! directory) run on the runtime's blocking pool, and say so in their docs.
//!
//! Buffers are owned: reads and writes take a buffer by value and give it
//! back with the result ([`BufResult`](crate::buf::BufResult)), so a
//! future dropped mid-operation never leaves the kernel writing into freed
//! memory. A [`File`]'s fd stays open until every operation on it has
//! completed, even if the `File` is dropped first.
//!
//! Errors are the kernel's, unchanged (`NotFound`, `AlreadyExists`,
//! `IsADirectory`, `PermissionDenied`, ...). Bad input is rejected before
//! anything is submitted: a path with an interior NUL byte or an offset past
//! `i64::MAX` is `InvalidInput`.

mod dir;
pub(crate) mod dirents;
mod du;
mod file;
mod helpers;
mod metadata;
mod open_options;
mod read_dir;
pub(crate) mod statx;

pub use crate::fs::dirents::{DirEntry, DirEntryType};
pub use dir::{create_dir, create_dir_all, hard_link, remove_dir, remove_file, rename, symlink};
pub use du::{du, DuErrorMode, DuOptions, DuSizeMode, DuSummary, DuSymlinkMode};
pub use file::File;
pub use helpers::{canonicalize, read, read_to_string, set_permissions, write};
pub use metadata::{metadata, metadata_lite, symlink_metadata, Metadata};
pub use open_options::OpenOptions;
pub use read_dir::{read_dir, ReadDir};

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use crate::RuntimeHandle;

/// A path as the kernel wants it; an interior NUL is `InvalidInput`.
pub(crate) fn path_cstring(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("path contains an interior NUL byte: {}", path.display()),
        )
    })
}

/// True for the errors a kernel without an opcode returns for it.
pub(crate) fn unsupported(err: &io::Error) -> bool {
    matches!(
        err.raw_os_error(),
        Some(libc::EINVAL) | Some(libc::ENOSYS) | Some(libc::EOPNOTSUPP)
    )
}

/// Runs `f` on the blocking pool and awaits it.
pub(crate) async fn blocking<T, F>(handle: &RuntimeHandle, f: F) -> io::Result<T>
where
    F: FnOnce() -> io::Result<T> + Send + 'static,
    T: Send + 'static,
{
    let join = handle.spawn_blocking(f).map_err(io::Error::other)?;
    match join.await {
        Ok(res) => res,
        Err(err) => Err(io::Error::other(err)),
    }
}

/// An offset the kernel accepts: `offset + len` must fit in `i64` (the
/// kernel reads offset -1 as "the file position").
pub(crate) fn check_offset(offset: u64, len: usize) -> io::Result<()> {
    let end = offset.checked_add(len as u64);
    if end.is_some_and(|end| end <= i64::MAX as u64) {
        Ok(())
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("offset {offset} + length {len} is past the largest file offset"),
        ))
    }
}

//! Path operations with io_uring opcodes: directories, links, renames.
//!
//! Each runs natively; on a kernel that lacks the opcode (`EINVAL`,
//! `ENOSYS`, `EOPNOTSUPP`) it falls back to the `std::fs` call on the
//! blocking pool.

use std::io;
use std::path::{Component, Path, PathBuf};

use super::{blocking, path_cstring, unsupported};
use crate::op::linkat::LinkAt;
use crate::op::mkdirat::MkDirAt;
use crate::op::renameat::RenameAt;
use crate::op::symlinkat::SymlinkAt;
use crate::op::unlinkat::UnlinkAt;
use crate::op::{Lane, Op, OpKind};
use crate::RuntimeHandle;

async fn native_or<K, F>(handle: &RuntimeHandle, op: K, fallback: F) -> io::Result<()>
where
    K: OpKind<Output = io::Result<()>>,
    F: FnOnce() -> io::Result<()> + Send + 'static,
{
    match Op::submit(&handle.shared, Lane::Current, op).await {
        Err(err) if unsupported(&err) => blocking(handle, fallback).await,
        res => res,
    }
}

/// Creates the directory `path` (mode `0o777` before the umask).
/// `AlreadyExists` if it exists; `NotFound` if the parent does not.
pub async fn create_dir(
    handle: impl AsRef<RuntimeHandle>,
    path: impl AsRef<Path>,
) -> io::Result<()> {
    let handle = handle.as_ref();
    let path = path.as_ref();
    let op = MkDirAt {
        path: path_cstring(path)?,
        mode: 0o777,
    };
    let owned = path.to_owned();
    native_or(handle, op, move || std::fs::create_dir(owned)).await
}

/// Creates `path` and every missing parent; an existing directory is fine.
/// Each level is one native `MKDIRAT`; paths with `.` or `..` components
/// are resolved by `std::fs::create_dir_all` on the blocking pool instead.
pub async fn create_dir_all(
    handle: impl AsRef<RuntimeHandle>,
    path: impl AsRef<Path>,
) -> io::Result<()> {
    let handle = handle.as_ref();
    let path = path.as_ref();
    let plain = path
        .components()
        .all(|c| matches!(c, Component::RootDir | Component::Normal(_)));
    if !plain {
        let owned = path.to_owned();
        return blocking(handle, move || std::fs::create_dir_all(owned)).await;
    }
    // Walk up until a level exists (or is created), then back down.
    let mut missing: Vec<PathBuf> = Vec::new();
    let mut cur = Some(path);
    while let Some(p) = cur.filter(|p| !p.as_os_str().is_empty()) {
        match create_dir(handle, p).await {
            Ok(()) => break,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                if missing.is_empty() && !super::metadata(handle, p).await?.is_dir() {
                    return Err(e);
                }
                break;
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                missing.push(p.to_owned());
                cur = p.parent();
            }
            Err(e) => return Err(e),
        }
    }
    for p in missing.iter().rev() {
        match create_dir(handle, p).await {
            Ok(()) => {}
            // Another creator won the race: fine if it is a directory.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                if !super::metadata(handle, p).await?.is_dir() {
                    return Err(e);
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Removes the file (or symlink) `path`. `IsADirectory` for a directory.
pub async fn remove_file(
    handle: impl AsRef<RuntimeHandle>,
    path: impl AsRef<Path>,
) -> io::Result<()> {
    let handle = handle.as_ref();
    let path = path.as_ref();
    let op = UnlinkAt {
        path: path_cstring(path)?,
        dir: false,
    };
    let owned = path.to_owned();
    native_or(handle, op, move || std::fs::remove_file(owned)).await
}

/// Removes the empty directory `path`. `DirectoryNotEmpty` if it has
/// entries; `NotADirectory` for a file.
pub async fn remove_dir(
    handle: impl AsRef<RuntimeHandle>,
    path: impl AsRef<Path>,
) -> io::Result<()> {
    let handle = handle.as_ref();
    let path = path.as_ref();
    let op = UnlinkAt {
        path: path_cstring(path)?,
        dir: true,
    };
    let owned = path.to_owned();
    native_or(handle, op, move || std::fs::remove_dir(owned)).await
}

/// Renames `from` to `to`, replacing `to` if it exists (as `rename(2)`).
pub async fn rename(
    handle: impl AsRef<RuntimeHandle>,
    from: impl AsRef<Path>,
    to: impl AsRef<Path>,
) -> io::Result<()> {
    let handle = handle.as_ref();
    let (from, to) = (from.as_ref(), to.as_ref());
    let op = RenameAt {
        from: path_cstring(from)?,
        to: path_cstring(to)?,
    };
    let (f, t) = (from.to_owned(), to.to_owned());
    native_or(handle, op, move || std::fs::rename(f, t)).await
}

/// Creates the hard link `link` to `original`.
pub async fn hard_link(
    handle: impl AsRef<RuntimeHandle>,
    original: impl AsRef<Path>,
    link: impl AsRef<Path>,
) -> io::Result<()> {
    let handle = handle.as_ref();
    let (original, link) = (original.as_ref(), link.as_ref());
    let op = LinkAt {
        original: path_cstring(original)?,
        link: path_cstring(link)?,
    };
    let (o, l) = (original.to_owned(), link.to_owned());
    native_or(handle, op, move || std::fs::hard_link(o, l)).await
}

/// Creates the symlink `link` pointing at `target` (which need not exist).
pub async fn symlink(
    handle: impl AsRef<RuntimeHandle>,
    target: impl AsRef<Path>,
    link: impl AsRef<Path>,
) -> io::Result<()> {
    let handle = handle.as_ref();
    let (target, link) = (target.as_ref(), link.as_ref());
    let op = SymlinkAt {
        target: path_cstring(target)?,
        link: path_cstring(link)?,
    };
    let (t, l) = (target.to_owned(), link.to_owned());
    native_or(handle, op, move || std::os::unix::fs::symlink(t, l)).await
}

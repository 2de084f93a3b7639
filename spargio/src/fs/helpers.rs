//! Whole-file conveniences, and the calls io_uring has no opcode for.

use std::io;
use std::path::{Path, PathBuf};

use super::{blocking, File};
use crate::RuntimeHandle;

/// Reads the whole file at `path` (open, read, close; all native).
pub async fn read(
    handle: impl AsRef<RuntimeHandle>,
    path: impl AsRef<Path>,
) -> io::Result<Vec<u8>> {
    let handle = handle.as_ref();
    let file = File::open(handle, path).await?;
    let data = file.read_to_end_at(0).await?;
    file.close().await?;
    Ok(data)
}

/// Reads the whole file at `path` as UTF-8; `InvalidData` if it is not.
pub async fn read_to_string(
    handle: impl AsRef<RuntimeHandle>,
    path: impl AsRef<Path>,
) -> io::Result<String> {
    let handle = handle.as_ref();
    let data = read(handle, path).await?;
    String::from_utf8(data).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// Writes `contents` to `path`, creating or truncating it (open, write,
/// close; all native).
pub async fn write(
    handle: impl AsRef<RuntimeHandle>,
    path: impl AsRef<Path>,
    contents: impl AsRef<[u8]>,
) -> io::Result<()> {
    let handle = handle.as_ref();
    let file = File::create(handle, path).await?;
    file.write_all_at(0, contents.as_ref()).await?;
    file.close().await
}

/// The absolute path with symlinks resolved. Runs `std::fs::canonicalize`
/// on the blocking pool: io_uring has no opcode for it.
pub async fn canonicalize(
    handle: impl AsRef<RuntimeHandle>,
    path: impl AsRef<Path>,
) -> io::Result<PathBuf> {
    let handle = handle.as_ref();
    let path = path.as_ref().to_owned();
    blocking(handle, move || std::fs::canonicalize(path)).await
}

/// Changes permissions. Runs `std::fs::set_permissions` on the blocking
/// pool: io_uring has no `chmod` opcode.
pub async fn set_permissions(
    handle: impl AsRef<RuntimeHandle>,
    path: impl AsRef<Path>,
    perm: std::fs::Permissions,
) -> io::Result<()> {
    let handle = handle.as_ref();
    let path = path.as_ref().to_owned();
    blocking(handle, move || std::fs::set_permissions(path, perm)).await
}

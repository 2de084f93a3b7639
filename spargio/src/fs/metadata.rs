//! Metadata through `IORING_OP_STATX`.

use std::io;
use std::path::Path;
use std::time::SystemTime;

use super::path_cstring;
use crate::extension::fs::{statx_or_metadata, StatxMetadata, StatxOptions};
use crate::fs::statx::statx_lane;
use crate::op::Lane;
use crate::RuntimeHandle;

/// A file's metadata, read with `statx(2)` through the ring. The accessors
/// follow `std::fs::Metadata` and `std::os::unix::fs::MetadataExt`; the
/// raw record is [`statx`](Metadata::statx).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Metadata {
    raw: StatxMetadata,
}

impl Metadata {
    pub(crate) fn from_raw(stx: &libc::statx) -> Metadata {
        Metadata {
            raw: StatxMetadata::from_raw(stx),
        }
    }

    /// The full statx record.
    pub fn statx(&self) -> &StatxMetadata {
        &self.raw
    }

    /// Size in bytes.
    pub fn len(&self) -> u64 {
        self.raw.size
    }

    /// True when the size is zero.
    pub fn is_empty(&self) -> bool {
        self.raw.size == 0
    }

    /// True for a directory.
    pub fn is_dir(&self) -> bool {
        self.raw.is_dir()
    }

    /// True for a regular file.
    pub fn is_file(&self) -> bool {
        self.raw.is_file()
    }

    /// True for a symlink (only from [`symlink_metadata`]).
    pub fn is_symlink(&self) -> bool {
        self.raw.is_symlink()
    }

    /// Permission bits as the standard library's type.
    pub fn permissions(&self) -> std::fs::Permissions {
        use std::os::unix::fs::PermissionsExt;
        std::fs::Permissions::from_mode(self.raw.mode & 0o7777)
    }

    /// Last modification time.
    pub fn modified(&self) -> io::Result<SystemTime> {
        Ok(self.raw.modified)
    }

    /// Last access time.
    pub fn accessed(&self) -> io::Result<SystemTime> {
        Ok(self.raw.accessed)
    }

    /// Creation time; `Unsupported` when the filesystem does not record it.
    pub fn created(&self) -> io::Result<SystemTime> {
        self.raw.created.ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::Unsupported,
                "creation time is not available on this filesystem",
            )
        })
    }

    /// File type and permission bits (`st_mode`).
    pub fn mode(&self) -> u32 {
        self.raw.mode
    }

    /// Inode number.
    pub fn ino(&self) -> u64 {
        self.raw.ino
    }

    /// Device holding the file.
    pub fn dev(&self) -> u64 {
        self.raw.dev
    }

    /// Number of hard links.
    pub fn nlink(&self) -> u64 {
        u64::from(self.raw.nlink)
    }

    /// Owner's user id.
    pub fn uid(&self) -> u32 {
        self.raw.uid
    }

    /// Group id.
    pub fn gid(&self) -> u32 {
        self.raw.gid
    }

    /// 512-byte blocks allocated.
    pub fn blocks(&self) -> u64 {
        self.raw.blocks
    }

    /// Preferred I/O block size.
    pub fn blksize(&self) -> u64 {
        u64::from(self.raw.blksize)
    }
}

/// Metadata of `path`, following symlinks (`IORING_OP_STATX`).
pub async fn metadata(
    handle: impl AsRef<RuntimeHandle>,
    path: impl AsRef<Path>,
) -> io::Result<Metadata> {
    let handle = handle.as_ref();
    let path = path_cstring(path.as_ref())?;
    let raw = statx_lane(handle, Lane::Current, path, StatxOptions::default()).await?;
    Ok(Metadata { raw })
}

/// Metadata of `path` itself, not following a final symlink
/// (`IORING_OP_STATX` with `AT_SYMLINK_NOFOLLOW`).
pub async fn symlink_metadata(
    handle: impl AsRef<RuntimeHandle>,
    path: impl AsRef<Path>,
) -> io::Result<Metadata> {
    let handle = handle.as_ref();
    let path = path_cstring(path.as_ref())?;
    let options = StatxOptions::default().follow_symlinks(false);
    let raw = statx_lane(handle, Lane::Current, path, options).await?;
    Ok(Metadata { raw })
}

/// The statx record of `path` (following symlinks): native `STATX`, with a
/// blocking-pool `std::fs::metadata` fallback on kernels without it.
pub async fn metadata_lite(
    handle: impl AsRef<RuntimeHandle>,
    path: impl AsRef<Path>,
) -> io::Result<StatxMetadata> {
    let handle = handle.as_ref();
    statx_or_metadata(handle, path).await
}

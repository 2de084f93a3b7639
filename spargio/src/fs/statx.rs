//! Safe statx wrappers over the native lane (`spargio::extension::fs`).

use std::ffi::CString;
use std::io;
use std::path::Path;
use std::time::{Duration, SystemTime};

use crate::fs::path_cstring;
use crate::native::UringNativeAny;
use crate::op::statx::Statx;
use crate::op::{Lane, Op};
use crate::shard_id::ShardId;
use crate::RuntimeHandle;

/// What `statx(2)` reported about a file. Fields the kernel did not fill
/// (see [`mask`](StatxMetadata::mask)) are zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct StatxMetadata {
    /// `STATX_*` bits of the fields the kernel filled.
    pub mask: u32,
    /// Size in bytes.
    pub size: u64,
    /// File type and permission bits (`st_mode`).
    pub mode: u32,
    /// Number of hard links.
    pub nlink: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Inode number.
    pub ino: u64,
    /// 512-byte blocks allocated.
    pub blocks: u64,
    /// Preferred I/O block size.
    pub blksize: u32,
    /// Device holding the file (`makedev(major, minor)`).
    pub dev: u64,
    /// Device the file is, for device files.
    pub rdev: u64,
    /// `STATX_ATTR_*` flags set on the file.
    pub attributes: u64,
    /// `STATX_ATTR_*` flags the filesystem supports.
    pub attributes_mask: u64,
    /// Last access.
    pub accessed: SystemTime,
    /// Last modification.
    pub modified: SystemTime,
    /// Last status change.
    pub changed: SystemTime,
    /// Creation, when the filesystem records it.
    pub created: Option<SystemTime>,
}

impl StatxMetadata {
    /// True for a directory.
    pub fn is_dir(&self) -> bool {
        self.mode & libc::S_IFMT == libc::S_IFDIR
    }

    /// True for a regular file.
    pub fn is_file(&self) -> bool {
        self.mode & libc::S_IFMT == libc::S_IFREG
    }

    /// True for a symbolic link (only seen without following links).
    pub fn is_symlink(&self) -> bool {
        self.mode & libc::S_IFMT == libc::S_IFLNK
    }

    /// Size in bytes.
    pub fn len(&self) -> u64 {
        self.size
    }

    /// True when the size is zero.
    pub fn is_empty(&self) -> bool {
        self.size == 0
    }

    pub(crate) fn from_raw(stx: &libc::statx) -> StatxMetadata {
        let time = |t: libc::statx_timestamp| {
            let nanos = Duration::new(t.tv_sec.unsigned_abs(), t.tv_nsec);
            if t.tv_sec >= 0 {
                SystemTime::UNIX_EPOCH + nanos
            } else {
                SystemTime::UNIX_EPOCH - nanos
            }
        };
        StatxMetadata {
            mask: stx.stx_mask,
            size: stx.stx_size,
            mode: u32::from(stx.stx_mode),
            nlink: stx.stx_nlink,
            uid: stx.stx_uid,
            gid: stx.stx_gid,
            ino: stx.stx_ino,
            blocks: stx.stx_blocks,
            blksize: stx.stx_blksize,
            dev: libc::makedev(stx.stx_dev_major, stx.stx_dev_minor),
            rdev: libc::makedev(stx.stx_rdev_major, stx.stx_rdev_minor),
            attributes: stx.stx_attributes,
            attributes_mask: stx.stx_attributes_mask,
            accessed: time(stx.stx_atime),
            modified: time(stx.stx_mtime),
            changed: time(stx.stx_ctime),
            created: (stx.stx_mask & libc::STATX_BTIME != 0).then(|| time(stx.stx_btime)),
        }
    }

    pub(crate) fn from_std(meta: &std::fs::Metadata) -> StatxMetadata {
        use std::os::unix::fs::MetadataExt;
        let epoch = SystemTime::UNIX_EPOCH;
        StatxMetadata {
            mask: libc::STATX_BASIC_STATS,
            size: meta.size(),
            mode: meta.mode(),
            nlink: meta.nlink() as u32,
            uid: meta.uid(),
            gid: meta.gid(),
            ino: meta.ino(),
            blocks: meta.blocks(),
            blksize: meta.blksize() as u32,
            dev: meta.dev(),
            rdev: meta.rdev(),
            attributes: 0,
            attributes_mask: 0,
            accessed: meta.accessed().unwrap_or(epoch),
            modified: meta.modified().unwrap_or(epoch),
            changed: epoch + Duration::new(meta.ctime().max(0) as u64, meta.ctime_nsec() as u32),
            created: meta.created().ok(),
        }
    }
}

/// Which fields to ask for and how to resolve the path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StatxOptions {
    mask: u32,
    flags: i32,
}

impl Default for StatxOptions {
    fn default() -> StatxOptions {
        StatxOptions {
            mask: libc::STATX_BASIC_STATS | libc::STATX_BTIME,
            flags: libc::AT_STATX_SYNC_AS_STAT,
        }
    }
}

impl StatxOptions {
    /// Basic stats plus creation time, following symlinks.
    pub fn new() -> StatxOptions {
        StatxOptions::default()
    }

    /// The `STATX_*` fields wanted (the kernel may fill more).
    pub fn mask(mut self, mask: u32) -> StatxOptions {
        self.mask = mask;
        self
    }

    /// Whether a final symlink is followed (`false`: `AT_SYMLINK_NOFOLLOW`,
    /// describing the link itself).
    pub fn follow_symlinks(mut self, follow: bool) -> StatxOptions {
        if follow {
            self.flags &= !libc::AT_SYMLINK_NOFOLLOW;
        } else {
            self.flags |= libc::AT_SYMLINK_NOFOLLOW;
        }
        self
    }

    /// Raw `AT_*` flags, replacing the current ones (e.g.
    /// `AT_STATX_DONT_SYNC` for network filesystems).
    pub fn flags(mut self, flags: i32) -> StatxOptions {
        self.flags = flags;
        self
    }
}

pub(crate) async fn statx_lane(
    handle: &RuntimeHandle,
    lane: Lane,
    path: CString,
    options: StatxOptions,
) -> io::Result<StatxMetadata> {
    let op = Statx::new(None, path, options.flags, options.mask);
    let raw = Op::submit(&handle.shared, lane, op).await?;
    Ok(StatxMetadata::from_raw(&raw))
}

/// `statx` of `path`, following symlinks, on the ring the lane selector
/// picks.
///
/// ```
/// # spargio::block_on(spargio::run(|handle| async move {
/// use spargio::extension::fs::statx;
///
/// let meta = statx(&handle.uring_native_unbound(), "/").await.unwrap();
/// assert!(meta.is_dir());
/// # })).unwrap();
/// ```
pub async fn statx(native: &UringNativeAny, path: impl AsRef<Path>) -> io::Result<StatxMetadata> {
    let path = path_cstring(path.as_ref())?;
    statx_lane(&native.handle, native.lane(), path, StatxOptions::default()).await
}

/// `statx` of `path` on `shard`'s ring, with explicit options.
pub async fn statx_on_shard(
    native: &UringNativeAny,
    shard: ShardId,
    path: impl AsRef<Path>,
    options: StatxOptions,
) -> io::Result<StatxMetadata> {
    let path = path_cstring(path.as_ref())?;
    statx_lane(&native.handle, Lane::Shard(shard), path, options).await
}

/// `statx` of `path` through the ring; if the kernel lacks the opcode
/// (`EINVAL`, `ENOSYS`, `EOPNOTSUPP`), `std::fs::metadata` on the blocking
/// pool instead.
pub async fn statx_or_metadata(
    handle: impl AsRef<RuntimeHandle>,
    path: impl AsRef<Path>,
) -> io::Result<StatxMetadata> {
    let handle = handle.as_ref();
    let path = path.as_ref();
    let c = path_cstring(path)?;
    match statx_lane(handle, Lane::Current, c, StatxOptions::default()).await {
        Err(e) if crate::fs::unsupported(&e) => {
            let path = path.to_owned();
            crate::fs::blocking(handle, move || {
                std::fs::metadata(&path).map(|m| StatxMetadata::from_std(&m))
            })
            .await
        }
        res => res,
    }
}

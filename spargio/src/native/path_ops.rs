//! Path and setup operations of [`UringNativeAny`]: `OPENAT`, `MKDIRAT`,
//! `UNLINKAT`, `RENAMEAT`, `LINKAT`, `SYMLINKAT` on the selected ring.
//!
//! Unlike `spargio::fs`, these never fall back to the blocking pool: they
//! are the raw opcodes, for callers who want to know the ring did the
//! work (an `EINVAL` from a kernel without the opcode comes back as is).
//! Paths are copied into a `CString` the op table keeps until the final
//! completion, so dropping the future mid-flight is safe; an fd opened by
//! an abandoned `open_at` is closed (see `driver/lifecycle.rs`).

use std::io;
use std::path::Path;

use super::{NativeFd, UringNativeAny};
use crate::fs::path_cstring;
use crate::op::linkat::LinkAt;
use crate::op::mkdirat::MkDirAt;
use crate::op::openat::OpenAt;
use crate::op::renameat::RenameAt;
use crate::op::symlinkat::SymlinkAt;
use crate::op::unlinkat::UnlinkAt;

impl UringNativeAny {
    /// Opens `path` with `open(2)` `flags` and `mode` (`IORING_OP_OPENAT`,
    /// relative to the working directory; `O_CLOEXEC` is always added).
    ///
    /// ```
    /// # spargio::block_on(spargio::run(|handle| async move {
    /// let native = handle.uring_native_unbound();
    /// let fd = native.open_at("/proc/self/stat", libc::O_RDONLY, 0).await.unwrap();
    /// assert!(!native.read_at(&fd, 0, 16).await.unwrap().is_empty());
    /// # })).unwrap();
    /// ```
    pub async fn open_at(
        &self,
        path: impl AsRef<Path>,
        flags: i32,
        mode: u32,
    ) -> io::Result<NativeFd> {
        let op = OpenAt {
            path: path_cstring(path.as_ref())?,
            flags,
            mode,
        };
        let fd = self.submit(self.lane(), op).await?;
        Ok(NativeFd::new(fd))
    }

    /// Creates the directory `path` with `mode` (before the umask).
    pub async fn mkdir_at(&self, path: impl AsRef<Path>, mode: u32) -> io::Result<()> {
        let op = MkDirAt {
            path: path_cstring(path.as_ref())?,
            mode,
        };
        self.submit(self.lane(), op).await
    }

    /// Removes `path`: a file or symlink, or with `is_dir` an empty
    /// directory (`AT_REMOVEDIR`).
    pub async fn unlink_at(&self, path: impl AsRef<Path>, is_dir: bool) -> io::Result<()> {
        let op = UnlinkAt {
            path: path_cstring(path.as_ref())?,
            dir: is_dir,
        };
        self.submit(self.lane(), op).await
    }

    /// Renames `from` to `to`, replacing `to` if it exists.
    pub async fn rename_at(&self, from: impl AsRef<Path>, to: impl AsRef<Path>) -> io::Result<()> {
        let op = RenameAt {
            from: path_cstring(from.as_ref())?,
            to: path_cstring(to.as_ref())?,
        };
        self.submit(self.lane(), op).await
    }

    /// Creates the hard link `link` to `original`.
    pub async fn link_at(
        &self,
        original: impl AsRef<Path>,
        link: impl AsRef<Path>,
    ) -> io::Result<()> {
        let op = LinkAt {
            original: path_cstring(original.as_ref())?,
            link: path_cstring(link.as_ref())?,
        };
        self.submit(self.lane(), op).await
    }

    /// Creates the symlink `linkpath` pointing at `target` (which need not
    /// exist).
    pub async fn symlink_at(
        &self,
        target: impl AsRef<Path>,
        linkpath: impl AsRef<Path>,
    ) -> io::Result<()> {
        let op = SymlinkAt {
            target: path_cstring(target.as_ref())?,
            link: path_cstring(linkpath.as_ref())?,
        };
        self.submit(self.lane(), op).await
    }
}

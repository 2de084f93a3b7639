//! `OpenOptions`: `open(2)` flags the std way, opened with `IORING_OP_OPENAT`.

use std::io;
use std::path::Path;

use super::{path_cstring, File};
use crate::op::openat::OpenAt;
use crate::op::{Lane, Op};
use crate::RuntimeHandle;

/// Options for opening a file, as in `std::fs::OpenOptions`, with the same
/// rules: at least one of read, write or append; `truncate`, `create` and
/// `create_new` need write access; `append` and `truncate` exclude each
/// other. A violation is `InvalidInput`, reported before anything is
/// submitted.
///
/// ```
/// # spargio::block_on(spargio::run(|handle| async move {
/// use spargio::fs::OpenOptions;
///
/// let dir = std::env::temp_dir().join(format!("spargio-doc-oo-{}", std::process::id()));
/// std::fs::create_dir_all(&dir).unwrap();
/// let file = OpenOptions::new()
///     .write(true)
///     .create(true)
///     .truncate(true)
///     .open(&handle, dir.join("log.txt"))
///     .await
///     .unwrap();
/// file.write_all_at(0, b"hello").await.unwrap();
/// # std::fs::remove_dir_all(&dir).unwrap();
/// # })).unwrap();
/// ```
#[derive(Clone, Debug)]
pub struct OpenOptions {
    read: bool,
    write: bool,
    append: bool,
    truncate: bool,
    create: bool,
    create_new: bool,
    mode: u32,
    custom_flags: i32,
}

impl Default for OpenOptions {
    fn default() -> OpenOptions {
        OpenOptions::new()
    }
}

impl OpenOptions {
    /// All options off; mode `0o666` (before the umask).
    pub fn new() -> OpenOptions {
        OpenOptions {
            read: false,
            write: false,
            append: false,
            truncate: false,
            create: false,
            create_new: false,
            mode: 0o666,
            custom_flags: 0,
        }
    }

    /// Open for reading.
    pub fn read(&mut self, read: bool) -> &mut OpenOptions {
        self.read = read;
        self
    }

    /// Open for writing.
    pub fn write(&mut self, write: bool) -> &mut OpenOptions {
        self.write = write;
        self
    }

    /// Open for appending: writes go to the end (implies write access).
    pub fn append(&mut self, append: bool) -> &mut OpenOptions {
        self.append = append;
        self
    }

    /// Truncate an existing file to length 0.
    pub fn truncate(&mut self, truncate: bool) -> &mut OpenOptions {
        self.truncate = truncate;
        self
    }

    /// Create the file if it does not exist.
    pub fn create(&mut self, create: bool) -> &mut OpenOptions {
        self.create = create;
        self
    }

    /// Create the file, failing with `AlreadyExists` if it exists (a
    /// dangling symlink counts as existing).
    pub fn create_new(&mut self, create_new: bool) -> &mut OpenOptions {
        self.create_new = create_new;
        self
    }

    /// Permission bits for a created file (before the umask).
    pub fn mode(&mut self, mode: u32) -> &mut OpenOptions {
        self.mode = mode;
        self
    }

    /// Extra `open(2)` flags (e.g. `libc::O_DIRECT`, `libc::O_NOFOLLOW`).
    /// The access mode bits are ignored; `O_CLOEXEC` is always set.
    pub fn custom_flags(&mut self, flags: i32) -> &mut OpenOptions {
        self.custom_flags = flags;
        self
    }

    pub(crate) fn flags(&self) -> io::Result<i32> {
        let invalid = |msg: &str| Err(io::Error::new(io::ErrorKind::InvalidInput, msg.to_string()));
        let access = match (self.read, self.write, self.append) {
            (true, false, false) => libc::O_RDONLY,
            (false, true, false) => libc::O_WRONLY,
            (true, true, false) => libc::O_RDWR,
            (false, _, true) => libc::O_WRONLY | libc::O_APPEND,
            (true, _, true) => libc::O_RDWR | libc::O_APPEND,
            (false, false, false) => {
                return invalid("open options need read, write or append access")
            }
        };
        let writable = self.write || self.append;
        let creation = match (self.create, self.truncate, self.create_new) {
            (false, false, false) => 0,
            _ if !writable => {
                return invalid("truncate, create and create_new need write or append access")
            }
            (_, true, _) if self.append => {
                return invalid("append and truncate cannot be combined")
            }
            (true, false, false) => libc::O_CREAT,
            (false, true, false) => libc::O_TRUNC,
            (true, true, false) => libc::O_CREAT | libc::O_TRUNC,
            (_, _, true) => libc::O_CREAT | libc::O_EXCL,
        };
        Ok(access | creation | (self.custom_flags & !libc::O_ACCMODE))
    }

    /// Opens `path` with these options through `IORING_OP_OPENAT`.
    pub async fn open(
        &self,
        handle: impl AsRef<RuntimeHandle>,
        path: impl AsRef<Path>,
    ) -> io::Result<File> {
        let handle = handle.as_ref();
        let flags = self.flags()?;
        let path = path_cstring(path.as_ref())?;
        let op = OpenAt {
            path,
            flags,
            mode: self.mode,
        };
        let fd = Op::submit(&handle.shared, Lane::Current, op).await?;
        Ok(File::from_owned_fd(handle, fd))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn std_rules_for_combinations() {
        let kind = |o: &OpenOptions| o.flags().map_err(|e| e.kind());
        assert_eq!(kind(&OpenOptions::new()), Err(io::ErrorKind::InvalidInput));
        assert_eq!(
            kind(OpenOptions::new().read(true).create(true)),
            Err(io::ErrorKind::InvalidInput)
        );
        assert_eq!(
            kind(OpenOptions::new().append(true).truncate(true)),
            Err(io::ErrorKind::InvalidInput)
        );
        assert_eq!(kind(OpenOptions::new().read(true)), Ok(libc::O_RDONLY));
        assert_eq!(
            kind(OpenOptions::new().write(true).create_new(true)),
            Ok(libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL)
        );
        assert_eq!(
            kind(OpenOptions::new().append(true).create(true)),
            Ok(libc::O_WRONLY | libc::O_APPEND | libc::O_CREAT)
        );
    }
}

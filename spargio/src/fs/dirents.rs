//! Directory listing with `getdents64(2)` (`spargio::extension::fs`).
//!
//! io_uring has no opcode for reading a directory, so a listing runs on
//! the runtime's blocking pool, never on a shard:
//!
//! 1. Open the directory with `O_RDONLY | O_DIRECTORY | O_CLOEXEC`
//!    (plus `O_NOFOLLOW` when the caller must not follow a final symlink).
//!    A path longer than `PATH_MAX` is opened a chunk of whole components
//!    at a time with `openat(2)`, so deep trees list like shallow ones.
//! 2. Call `getdents64` into one reusable, 8-byte-aligned 32 KiB buffer and
//!    parse the records the kernel filled, skipping `.` and `..`. A batch
//!    ends once it holds [`BATCH_MIN`] entries or the directory is done, so
//!    a small directory costs one blocking-pool job and a huge one is
//!    handed over a bounded batch at a time.
//! 3. If the very first `getdents64` call fails with `ENOSYS` (a seccomp
//!    filter or an emulated kernel), the rest of that listing comes from
//!    `std::fs::read_dir` instead. The switch happens before any entry has
//!    been returned, so no entry is ever listed twice.
//!
//! Each record is a `struct linux_dirent64`, native-endian:
//!
//! | offset | field      | type                                        |
//! |--------|------------|---------------------------------------------|
//! | 0      | `d_ino`    | `u64`                                       |
//! | 8      | `d_off`    | `i64` (opaque cookie, unused here)          |
//! | 16     | `d_reclen` | `u16`, length of the whole record           |
//! | 18     | `d_type`   | `u8`, `DT_*` (or `DT_UNKNOWN`)              |
//! | 19     | `d_name`   | NUL-terminated, zero-padded to `d_reclen`   |
//!
//! The parser reads fields from checked slices (no pointer casts), checks
//! that every `d_reclen` covers a header and a NUL and stays inside the
//! bytes the kernel reported, and takes the name up to its first NUL. A
//! record breaking these rules is `InvalidData`, never an out-of-bounds
//! read.

use std::ffi::{CString, OsStr, OsString};
use std::fmt;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirEntryExt, FileTypeExt};
use std::path::{Path, PathBuf};

use crate::fs::{blocking, path_cstring};
use crate::op::SharedFd;
use crate::RuntimeHandle;

/// Bytes handed to each `getdents64` call.
const BUF_LEN: usize = 32 * 1024;

/// A batch is returned once it holds this many entries (or the directory
/// has ended).
pub(crate) const BATCH_MIN: usize = 256;

/// Offset of `d_name` in `struct linux_dirent64`.
const NAME_OFFSET: usize = 19;

/// The longest path one `open` accepts, without its NUL.
const PATH_MAX_BYTES: usize = libc::PATH_MAX as usize - 1;

/// The kind of a directory entry, as the directory itself records it
/// (`d_type`). Filesystems that do not record types report
/// [`Unknown`](DirEntryType::Unknown); `statx` the entry to find out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DirEntryType {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link (the link itself; it is not followed).
    Symlink,
    /// A block device.
    BlockDevice,
    /// A character device.
    CharDevice,
    /// A named pipe.
    Fifo,
    /// A Unix domain socket.
    Socket,
    /// The filesystem did not say.
    Unknown,
}

impl DirEntryType {
    fn from_d_type(d_type: u8) -> DirEntryType {
        match d_type {
            libc::DT_REG => DirEntryType::File,
            libc::DT_DIR => DirEntryType::Dir,
            libc::DT_LNK => DirEntryType::Symlink,
            libc::DT_BLK => DirEntryType::BlockDevice,
            libc::DT_CHR => DirEntryType::CharDevice,
            libc::DT_FIFO => DirEntryType::Fifo,
            libc::DT_SOCK => DirEntryType::Socket,
            _ => DirEntryType::Unknown,
        }
    }

    fn from_std(ft: std::fs::FileType) -> DirEntryType {
        if ft.is_file() {
            DirEntryType::File
        } else if ft.is_dir() {
            DirEntryType::Dir
        } else if ft.is_symlink() {
            DirEntryType::Symlink
        } else if ft.is_block_device() {
            DirEntryType::BlockDevice
        } else if ft.is_char_device() {
            DirEntryType::CharDevice
        } else if ft.is_fifo() {
            DirEntryType::Fifo
        } else if ft.is_socket() {
            DirEntryType::Socket
        } else {
            DirEntryType::Unknown
        }
    }

    /// True for [`Dir`](DirEntryType::Dir).
    pub fn is_dir(self) -> bool {
        self == DirEntryType::Dir
    }

    /// True for [`File`](DirEntryType::File).
    pub fn is_file(self) -> bool {
        self == DirEntryType::File
    }

    /// True for [`Symlink`](DirEntryType::Symlink).
    pub fn is_symlink(self) -> bool {
        self == DirEntryType::Symlink
    }
}

/// One entry of a directory listing: its name, its path (the listed
/// directory joined with the name), its inode number and its type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirEntry {
    name: OsString,
    path: PathBuf,
    ino: u64,
    file_type: DirEntryType,
}

impl DirEntry {
    fn new(dir: &Path, name: &OsStr, ino: u64, file_type: DirEntryType) -> DirEntry {
        DirEntry {
            name: name.to_owned(),
            path: dir.join(name),
            ino,
            file_type,
        }
    }

    fn from_std(entry: &std::fs::DirEntry) -> DirEntry {
        let file_type = entry
            .file_type()
            .map_or(DirEntryType::Unknown, DirEntryType::from_std);
        DirEntry {
            name: entry.file_name(),
            path: entry.path(),
            ino: entry.ino(),
            file_type,
        }
    }

    /// The entry's file name, without any leading path.
    pub fn name(&self) -> &OsStr {
        &self.name
    }

    /// The listed directory's path joined with [`name`](DirEntry::name).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Inode number (`d_ino`).
    pub fn ino(&self) -> u64 {
        self.ino
    }

    /// The type recorded in the directory (`d_type`); a symlink is
    /// reported as a symlink, not as what it points to.
    pub fn file_type(&self) -> DirEntryType {
        self.file_type
    }
}

/// Lists the directory at `path` (following a final symlink), without `.`
/// and `..`, in the order the filesystem returns them.
///
/// Runs on the runtime's blocking pool: io_uring has no opcode for reading
/// a directory. Entries come from parsing `getdents64(2)` output; if the
/// kernel refuses that call with `ENOSYS`, from `std::fs::read_dir`
/// instead. For a directory too large to hold in memory at once, use the
/// batched stream [`spargio::fs::read_dir`](crate::fs::read_dir).
///
/// Errors are the kernel's: `NotFound`, `NotADirectory`,
/// `PermissionDenied`, ...
///
/// ```
/// # spargio::block_on(spargio::run(|handle| async move {
/// use spargio::extension::fs::read_dir_entries;
///
/// let entries = read_dir_entries(&handle, "/").await.unwrap();
/// assert!(entries.iter().any(|e| e.name() == "tmp"));
/// # })).unwrap();
/// ```
pub async fn read_dir_entries(
    handle: impl AsRef<RuntimeHandle>,
    path: impl AsRef<Path>,
) -> io::Result<Vec<DirEntry>> {
    let handle = handle.as_ref();
    let path = path.as_ref().to_owned();
    blocking(handle, move || {
        let mut dir = RawDir::open(&path, true)?;
        let mut entries = Vec::new();
        while let Progress::More = dir.fill(&mut entries, usize::MAX)? {}
        Ok(entries)
    })
    .await
}

// ===== impl RawDir =====

/// Whether a directory has more entries after a batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Progress {
    /// Call [`RawDir::fill`] again.
    More,
    /// Every entry has been returned.
    End,
}

/// The `getdents64` buffer; aligned like the records the kernel writes.
#[repr(C, align(8))]
struct DirentBuf([u8; BUF_LEN]);

enum Source {
    Getdents {
        buf: Box<DirentBuf>,
        /// Set after the first successful call: from then on `ENOSYS`
        /// is an error, not a reason to switch sources.
        started: bool,
    },
    Std(std::fs::ReadDir),
    Done,
}

/// An open directory being listed. Blocking: call its methods on the
/// blocking pool. The fd is shared so native operations relative to the
/// directory (`statx` by name) can run while it is listed.
pub(crate) struct RawDir {
    path: PathBuf,
    fd: SharedFd,
    source: Source,
}

impl fmt::Debug for RawDir {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let source = match self.source {
            Source::Getdents { .. } => "getdents64",
            Source::Std(_) => "std::fs::read_dir",
            Source::Done => "done",
        };
        f.debug_struct("RawDir")
            .field("path", &self.path)
            .field("fd", &self.fd.raw())
            .field("source", &source)
            .finish()
    }
}

impl RawDir {
    /// Opens `path` for listing; with `follow == false` a final symlink is
    /// refused (`ENOTDIR`) instead of followed.
    pub(crate) fn open(path: &Path, follow: bool) -> io::Result<RawDir> {
        let mut flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC;
        if !follow {
            flags |= libc::O_NOFOLLOW;
        }
        let fd = open_dir(path, flags)?;
        Ok(RawDir {
            path: path.to_owned(),
            fd: SharedFd::new(fd),
            source: Source::Getdents {
                buf: Box::new(DirentBuf([0; BUF_LEN])),
                started: false,
            },
        })
    }

    /// The open directory, for operations relative to it.
    pub(crate) fn fd(&self) -> &SharedFd {
        &self.fd
    }

    /// Appends entries to `out` until at least `min` were added or the
    /// directory ends. After an error the listing should be abandoned.
    pub(crate) fn fill(&mut self, out: &mut Vec<DirEntry>, min: usize) -> io::Result<Progress> {
        let start = out.len();
        loop {
            match &mut self.source {
                Source::Done => return Ok(Progress::End),
                Source::Std(iter) => {
                    for entry in iter.by_ref() {
                        out.push(DirEntry::from_std(&entry?));
                        if out.len() - start >= min {
                            return Ok(Progress::More);
                        }
                    }
                    self.source = Source::Done;
                    return Ok(Progress::End);
                }
                Source::Getdents { buf, started } => {
                    let filled = match getdents64(self.fd.raw(), &mut buf.0) {
                        Ok(n) => n,
                        Err(e) if !*started && e.raw_os_error() == Some(libc::ENOSYS) => {
                            self.source = Source::Std(std::fs::read_dir(&self.path)?);
                            continue;
                        }
                        Err(e) => return Err(e),
                    };
                    *started = true;
                    if filled == 0 {
                        self.source = Source::Done;
                        return Ok(Progress::End);
                    }
                    parse_dirents(&buf.0[..filled], &self.path, out)?;
                    if out.len() - start >= min {
                        return Ok(Progress::More);
                    }
                }
            }
        }
    }
}

/// One `getdents64` call: the number of bytes of records written, 0 at
/// the end of the directory.
fn getdents64(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        // SAFETY: `buf` is valid for writes of `buf.len()` bytes for the
        // whole call and the kernel writes at most that many; `fd` is kept
        // open by the caller's `RawDir` for the duration of the call.
        let n = unsafe { libc::syscall(libc::SYS_getdents64, fd, buf.as_mut_ptr(), buf.len()) };
        if n >= 0 {
            return Ok(n as usize);
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

fn malformed(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("malformed getdents64 record: {what}"),
    )
}

/// Parses the `linux_dirent64` records in `records` (exactly the bytes the
/// kernel reported) into entries of `dir`, skipping `.` and `..`.
fn parse_dirents(records: &[u8], dir: &Path, out: &mut Vec<DirEntry>) -> io::Result<()> {
    let mut rest = records;
    while !rest.is_empty() {
        if rest.len() <= NAME_OFFSET {
            return Err(malformed("truncated header"));
        }
        let reclen = usize::from(u16::from_ne_bytes([rest[16], rest[17]]));
        if reclen <= NAME_OFFSET || reclen > rest.len() {
            return Err(malformed("record length out of bounds"));
        }
        let (record, tail) = rest.split_at(reclen);
        rest = tail;

        let mut ino = [0u8; 8];
        ino.copy_from_slice(&record[..8]);
        let d_type = record[18];
        let name_field = &record[NAME_OFFSET..];
        let len = name_field
            .iter()
            .position(|&b| b == 0)
            .ok_or_else(|| malformed("name without NUL"))?;
        let name = &name_field[..len];
        if name.is_empty() || name.contains(&b'/') {
            return Err(malformed("invalid name"));
        }
        if name == b"." || name == b".." {
            continue;
        }
        out.push(DirEntry::new(
            dir,
            OsStr::from_bytes(name),
            u64::from_ne_bytes(ino),
            DirEntryType::from_d_type(d_type),
        ));
    }
    Ok(())
}

/// Opens a directory, a chunk of whole components at a time when the path
/// is longer than one `open` accepts.
fn open_dir(path: &Path, flags: i32) -> io::Result<OwnedFd> {
    // Rejects interior NULs with the crate's usual error.
    let whole = path_cstring(path)?;
    let mut rest = whole.as_bytes();
    if rest.len() <= PATH_MAX_BYTES {
        return openat(None, whole.as_c_str(), flags);
    }
    let mut dir: Option<OwnedFd> = None;
    while !rest.is_empty() {
        let (chunk, tail) = split_chunk(rest)?;
        // Intermediate chunks only need to be walked through, which takes
        // search permission on each component, as for the whole path.
        let chunk_flags = if tail.is_empty() {
            flags
        } else {
            libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC
        };
        let chunk = CString::new(chunk).map_err(|_| malformed("interior NUL"))?;
        dir = Some(openat(dir.as_ref(), &chunk, chunk_flags)?);
        rest = tail;
    }
    dir.ok_or_else(|| io::Error::from_raw_os_error(libc::ENOENT))
}

/// Splits off the longest prefix of whole components that one `openat`
/// accepts; the tail never starts with `/` (it is relative to the prefix).
fn split_chunk(path: &[u8]) -> io::Result<(&[u8], &[u8])> {
    if path.len() <= PATH_MAX_BYTES {
        return Ok((path, &[]));
    }
    let cut = path[..PATH_MAX_BYTES]
        .iter()
        .rposition(|&b| b == b'/')
        .ok_or_else(|| io::Error::from_raw_os_error(libc::ENAMETOOLONG))?;
    let (chunk, tail) = path.split_at(cut + 1);
    let skip = tail.iter().take_while(|&&b| b == b'/').count();
    Ok((chunk, &tail[skip..]))
}

fn openat(dir: Option<&OwnedFd>, path: &std::ffi::CStr, flags: i32) -> io::Result<OwnedFd> {
    let dirfd = dir.map_or(libc::AT_FDCWD, AsRawFd::as_raw_fd);
    loop {
        // SAFETY: `path` is NUL-terminated and outlives the call; `dirfd`
        // is `AT_FDCWD` or an fd kept open by the `dir` borrow; no
        // `O_CREAT`, so the variadic mode argument is not read.
        let fd = unsafe { libc::openat(dirfd, path.as_ptr(), flags) };
        if fd >= 0 {
            // SAFETY: a successful `openat` returns a new fd that nothing
            // else owns.
            return Ok(unsafe { OwnedFd::from_raw_fd(fd) });
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One `linux_dirent64` record, padded to 8 bytes like the kernel's.
    fn record(ino: u64, d_type: u8, name: &[u8]) -> Vec<u8> {
        let len = (NAME_OFFSET + name.len() + 1).next_multiple_of(8);
        let mut rec = vec![0u8; len];
        rec[..8].copy_from_slice(&ino.to_ne_bytes());
        rec[8..16].copy_from_slice(&42i64.to_ne_bytes());
        rec[16..18].copy_from_slice(&(len as u16).to_ne_bytes());
        rec[18] = d_type;
        rec[NAME_OFFSET..NAME_OFFSET + name.len()].copy_from_slice(name);
        rec
    }

    fn parse(buf: &[u8]) -> io::Result<Vec<DirEntry>> {
        let mut out = Vec::new();
        parse_dirents(buf, Path::new("/d"), &mut out).map(|()| out)
    }

    #[test]
    fn parses_records_and_skips_dot_entries() {
        let mut buf = Vec::new();
        buf.extend(record(1, libc::DT_DIR, b"."));
        buf.extend(record(2, libc::DT_DIR, b".."));
        buf.extend(record(10, libc::DT_REG, b"file.txt"));
        buf.extend(record(11, libc::DT_DIR, b"sub"));
        buf.extend(record(12, libc::DT_LNK, b"link"));
        buf.extend(record(13, libc::DT_FIFO, b"pipe"));
        buf.extend(record(14, libc::DT_SOCK, b"sock"));
        buf.extend(record(15, libc::DT_CHR, b"tty"));
        buf.extend(record(16, libc::DT_BLK, b"disk"));
        buf.extend(record(17, libc::DT_UNKNOWN, b"mystery"));
        // A name whose NUL lands exactly at the end of the record, and one
        // with padding bytes after the NUL that are not zero.
        buf.extend(record(18, libc::DT_REG, b"abcd"));
        let mut dirty = record(u64::MAX, libc::DT_REG, b"x");
        let last = dirty.len() - 1;
        dirty[last] = b'z';
        buf.extend(dirty);

        let entries = parse(&buf).unwrap();
        let got: Vec<_> = entries
            .iter()
            .map(|e| (e.name().to_str().unwrap(), e.ino(), e.file_type()))
            .collect();
        assert_eq!(
            got,
            [
                ("file.txt", 10, DirEntryType::File),
                ("sub", 11, DirEntryType::Dir),
                ("link", 12, DirEntryType::Symlink),
                ("pipe", 13, DirEntryType::Fifo),
                ("sock", 14, DirEntryType::Socket),
                ("tty", 15, DirEntryType::CharDevice),
                ("disk", 16, DirEntryType::BlockDevice),
                ("mystery", 17, DirEntryType::Unknown),
                ("abcd", 18, DirEntryType::File),
                ("x", u64::MAX, DirEntryType::File),
            ]
        );
        assert_eq!(entries[1].path(), Path::new("/d/sub"));
    }

    #[test]
    fn empty_buffer_is_no_entries() {
        assert!(parse(&[]).unwrap().is_empty());
    }

    #[test]
    fn rejects_malformed_records() {
        let good = record(5, libc::DT_REG, b"name");
        let kind = |buf: &[u8]| parse(buf).unwrap_err().kind();

        // Shorter than a header.
        assert_eq!(kind(&good[..10]), io::ErrorKind::InvalidData);
        // d_reclen past the end of the filled bytes.
        assert_eq!(kind(&good[..good.len() - 1]), io::ErrorKind::InvalidData);
        // d_reclen too small to hold a name (and zero: no progress).
        for bad_len in [0u16, NAME_OFFSET as u16] {
            let mut bad = good.clone();
            bad[16..18].copy_from_slice(&bad_len.to_ne_bytes());
            assert_eq!(kind(&bad), io::ErrorKind::InvalidData);
        }
        // Name without a NUL inside the record.
        let mut bad = good.clone();
        for b in &mut bad[NAME_OFFSET..] {
            *b = b'a';
        }
        assert_eq!(kind(&bad), io::ErrorKind::InvalidData);
        // Empty name, and a name with a slash.
        assert_eq!(kind(&record(5, 0, b"")), io::ErrorKind::InvalidData);
        assert_eq!(kind(&record(5, 0, b"a/b")), io::ErrorKind::InvalidData);
        // A good record followed by garbage still fails as a whole.
        let mut trailing = good.clone();
        trailing.extend_from_slice(&[1, 2, 3]);
        assert_eq!(kind(&trailing), io::ErrorKind::InvalidData);
    }

    fn scratch(name: &str, files: usize) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("spargio-dirents-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        for i in 0..files {
            // Long names: about 250 records fill a getdents64 buffer.
            let name = format!("file-{i:04}-{}", "n".repeat(100));
            std::fs::write(dir.join(name), b"").unwrap();
        }
        dir
    }

    fn drain(dir: &mut RawDir, min: usize) -> (Vec<DirEntry>, usize) {
        let mut out = Vec::new();
        let mut calls = 1;
        while dir.fill(&mut out, min).unwrap() == Progress::More {
            calls += 1;
        }
        // An ended listing stays ended.
        assert_eq!(dir.fill(&mut out, min).unwrap(), Progress::End);
        (out, calls)
    }

    fn sorted(mut entries: Vec<DirEntry>) -> Vec<DirEntry> {
        entries.sort_by(|a, b| a.name().cmp(b.name()));
        entries
    }

    #[test]
    fn batches_cover_every_entry_once() {
        let path = scratch("batches", 1000);
        let (all, _) = drain(&mut RawDir::open(&path, true).unwrap(), usize::MAX);
        assert_eq!(all.len(), 1001);
        let (batched, calls) = drain(&mut RawDir::open(&path, true).unwrap(), 100);
        assert!(calls >= 4, "{calls} batches");
        assert_eq!(sorted(batched), sorted(all));
        std::fs::remove_dir_all(&path).unwrap();
    }

    #[test]
    fn std_fallback_lists_the_same_entries() {
        let path = scratch("fallback", 300);
        let (native, _) = drain(&mut RawDir::open(&path, true).unwrap(), usize::MAX);
        // The source `fill` switches to when getdents64 is `ENOSYS`.
        let mut dir = RawDir::open(&path, true).unwrap();
        dir.source = Source::Std(std::fs::read_dir(&path).unwrap());
        let (fallback, calls) = drain(&mut dir, 50);
        assert!(calls >= 6, "{calls} batches");
        let fallback = sorted(fallback);
        assert_eq!(fallback, sorted(native));
        assert!(fallback
            .iter()
            .any(|e| e.name() == "sub" && e.file_type().is_dir()));
        std::fs::remove_dir_all(&path).unwrap();
    }

    #[test]
    fn open_without_follow_refuses_a_symlink() {
        let path = scratch("nofollow", 0);
        std::os::unix::fs::symlink("sub", path.join("link")).unwrap();
        assert!(RawDir::open(&path.join("link"), true).is_ok());
        let err = RawDir::open(&path.join("link"), false).unwrap_err();
        // `O_NOFOLLOW | O_DIRECTORY` on a symlink.
        assert_eq!(err.raw_os_error(), Some(libc::ENOTDIR));
        std::fs::remove_dir_all(&path).unwrap();
    }

    #[test]
    fn splits_long_paths_on_component_boundaries() {
        let comp = "c".repeat(200);
        let path: String = (0..50).map(|_| format!("/{comp}")).collect();
        let mut rest = path.as_bytes();
        let mut rebuilt = Vec::new();
        let mut chunks = 0;
        while !rest.is_empty() {
            let (chunk, tail) = split_chunk(rest).unwrap();
            assert!(chunk.len() <= PATH_MAX_BYTES);
            assert!(tail.is_empty() || chunk.ends_with(b"/"));
            assert!(!tail.starts_with(b"/"));
            rebuilt.extend_from_slice(chunk);
            rest = tail;
            chunks += 1;
        }
        assert!(chunks >= 3);
        assert_eq!(rebuilt, path.as_bytes());
        // Doubled separators at a cut are dropped from the tail.
        let doubled = format!("{}//{}", "a".repeat(PATH_MAX_BYTES - 1), "b");
        let (chunk, tail) = split_chunk(doubled.as_bytes()).unwrap();
        assert_eq!(chunk.len(), PATH_MAX_BYTES);
        assert_eq!(tail, b"b");
        // A single component longer than PATH_MAX cannot be split.
        let one = "x".repeat(PATH_MAX_BYTES + 10);
        let err = split_chunk(one.as_bytes()).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENAMETOOLONG));
    }
}

//! `File`: positional, owned-buffer I/O on an open file.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::Path;

use super::{blocking, check_offset, Metadata, OpenOptions};
use crate::buf::{BufResult, IoBuf, IoBufMut};
use crate::op::close::Close;
use crate::op::fsync::Fsync;
use crate::op::ftruncate::Ftruncate;
use crate::op::read::{read_cached, ReadAt};
use crate::op::statx::Statx;
use crate::op::write::WriteAt;
use crate::op::{Lane, Op, SharedFd};
use crate::RuntimeHandle;

/// An open file. Every read and write names its offset (there is no
/// cursor), so one `File` can serve many concurrent operations; share it
/// with `Arc` or `&`.
///
/// Dropping a `File` closes it without blocking the shard (the close goes
/// through the ring), once no operation on it is in flight. [`close`]
/// does the same and reports the kernel's verdict.
///
/// ```
/// # spargio::block_on(spargio::run(|handle| async move {
/// use spargio::fs::File;
///
/// let path = std::env::temp_dir().join(format!("spargio-doc-file-{}", std::process::id()));
/// let file = File::create(&handle, &path).await.unwrap();
/// file.write_all_at(0, b"hello, ring").await.unwrap();
/// file.fsync().await.unwrap();
/// file.close().await.unwrap();
///
/// let file = File::open(&handle, &path).await.unwrap();
/// let (n, buf) = file.read_at_into(7, Vec::with_capacity(16)).await;
/// assert_eq!(n.unwrap(), 4);
/// assert_eq!(buf, b"ring");
/// file.close().await.unwrap();
/// # std::fs::remove_file(&path).unwrap();
/// # })).unwrap();
/// ```
///
/// [`close`]: File::close
#[derive(Debug)]
pub struct File {
    fd: SharedFd,
    handle: RuntimeHandle,
}

impl File {
    /// Opens `path` read-only.
    pub async fn open(
        handle: impl AsRef<RuntimeHandle>,
        path: impl AsRef<Path>,
    ) -> io::Result<File> {
        let handle = handle.as_ref();
        OpenOptions::new().read(true).open(handle, path).await
    }

    /// Opens `path` for writing, creating it or truncating it.
    pub async fn create(
        handle: impl AsRef<RuntimeHandle>,
        path: impl AsRef<Path>,
    ) -> io::Result<File> {
        let handle = handle.as_ref();
        OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(handle, path)
            .await
    }

    /// Wraps a file opened by the standard library.
    pub fn from_std(handle: impl AsRef<RuntimeHandle>, file: std::fs::File) -> File {
        let handle = handle.as_ref();
        File::from_owned_fd(handle, OwnedFd::from(file))
    }

    pub(crate) fn from_owned_fd(handle: &RuntimeHandle, fd: OwnedFd) -> File {
        File {
            fd: SharedFd::new(fd),
            handle: handle.clone(),
        }
    }

    fn submit<K: crate::op::OpKind>(&self, op: K) -> Op<K> {
        Op::submit(&self.handle.shared, Lane::Current, op)
    }

    /// Reads up to `len` bytes at `offset` into a new buffer (shorter at
    /// end of file; empty at or past it).
    pub async fn read_at(&self, offset: u64, len: usize) -> io::Result<Vec<u8>> {
        let (res, buf) = self.read_at_into(offset, Vec::with_capacity(len)).await;
        res.map(|_| buf)
    }

    /// Reads into `buf` at `offset`, filling from the buffer's first byte up
    /// to its capacity; returns the count and the buffer. The buffer comes
    /// back on error too.
    ///
    /// Data already in the page cache is copied at once
    /// (`preadv2(RWF_NOWAIT)`, which cannot block); otherwise the read goes
    /// through the ring. Either way the count may be short of the
    /// buffer's capacity (at end of file, or when only part of the range is
    /// cached); [`read_to_end_at`](File::read_to_end_at) loops.
    pub async fn read_at_into<B: IoBufMut>(&self, offset: u64, mut buf: B) -> BufResult<usize, B> {
        if let Err(err) = check_offset(offset, buf.bytes_total()) {
            return (Err(err), buf);
        }
        // (Not once the runtime is shutting down: then every read fails
        // alike, cached or not.)
        if !self.handle.shared.is_closing() {
            if let Some(res) = read_cached(&self.fd, &mut buf, offset) {
                return (res, buf);
            }
        }
        self.submit(ReadAt {
            fd: self.fd.clone(),
            buf,
            offset,
        })
        .await
    }

    /// Reads from `offset` to the end of the file.
    pub async fn read_to_end_at(&self, offset: u64) -> io::Result<Vec<u8>> {
        check_offset(offset, 0)?;
        let size = cached_len(self.fd.raw()).unwrap_or(0);
        let hint = usize::try_from(size.saturating_sub(offset)).unwrap_or(usize::MAX);
        let mut buf = Vec::with_capacity(hint.clamp(64, 64 << 20) + 1);
        let mut pos = offset;
        loop {
            if buf.len() == buf.capacity() {
                buf.reserve(buf.capacity().max(4096));
            }
            let start = buf.len();
            let (res, slice) = self.read_at_into(pos, buf.slice(start..)).await;
            buf = slice.into_inner();
            match res {
                Ok(0) => return Ok(buf),
                Ok(n) => pos += n as u64,
                Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                Err(err) => return Err(err),
            }
        }
    }

    /// Writes `buf`'s bytes at `offset` (once; the count may be short);
    /// returns the count and the buffer.
    pub async fn write_at<B: IoBuf>(&self, offset: u64, buf: B) -> BufResult<usize, B> {
        if let Err(err) = check_offset(offset, buf.bytes_init()) {
            return (Err(err), buf);
        }
        self.submit(WriteAt {
            fd: self.fd.clone(),
            buf,
            offset,
        })
        .await
    }

    /// Writes all of `data` at `offset` (copied into an owned buffer first;
    /// use [`write_all_at_owned`](File::write_all_at_owned) to avoid that).
    pub async fn write_all_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.write_all_at_owned(offset, data.to_vec()).await.0
    }

    /// Writes all of `buf`'s bytes at `offset`, retrying short writes.
    /// A write that makes no progress is `WriteZero`.
    pub async fn write_all_at_owned<B: IoBuf>(&self, offset: u64, mut buf: B) -> BufResult<(), B> {
        let total = buf.bytes_init();
        let mut done = 0;
        while done < total {
            let (res, slice) = self
                .write_at(offset + done as u64, buf.slice(done..total))
                .await;
            buf = slice.into_inner();
            match res {
                Ok(0) => {
                    let err = io::Error::new(io::ErrorKind::WriteZero, "file accepted no bytes");
                    return (Err(err), buf);
                }
                Ok(n) => done += n,
                Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                Err(err) => return (Err(err), buf),
            }
        }
        (Ok(()), buf)
    }

    /// Flushes data and metadata to the device (`fsync(2)`).
    pub async fn fsync(&self) -> io::Result<()> {
        self.submit(Fsync {
            fd: self.fd.clone(),
            data_only: false,
        })
        .await
    }

    /// Flushes data, and only the metadata needed to read it back
    /// (`fdatasync(2)`).
    pub async fn sync_data(&self) -> io::Result<()> {
        self.submit(Fsync {
            fd: self.fd.clone(),
            data_only: true,
        })
        .await
    }

    /// Truncates or extends the file to `len` bytes: `IORING_OP_FTRUNCATE`,
    /// or `ftruncate(2)` on the blocking pool on kernels before 6.9.
    pub async fn set_len(&self, len: u64) -> io::Result<()> {
        check_offset(len, 0)?;
        let op = Ftruncate {
            fd: self.fd.clone(),
            len,
        };
        match self.submit(op).await {
            Err(err) if super::unsupported(&err) => {
                let fd = self.fd.clone();
                blocking(&self.handle, move || {
                    // SAFETY: `fd` is kept open by the clone moved in here.
                    let rc = unsafe { libc::ftruncate(fd.raw(), len as libc::off_t) };
                    if rc == 0 {
                        Ok(())
                    } else {
                        Err(io::Error::last_os_error())
                    }
                })
                .await
            }
            res => res,
        }
    }

    /// The file's metadata (`statx` on the open fd).
    pub async fn metadata(&self) -> io::Result<Metadata> {
        let op = Statx::new(
            Some(self.fd.clone()),
            c"".to_owned(),
            libc::AT_STATX_SYNC_AS_STAT,
            libc::STATX_BASIC_STATS | libc::STATX_BTIME,
        );
        let raw = self.submit(op).await?;
        Ok(Metadata::from_raw(&raw))
    }

    /// Closes the file through the ring and reports the kernel's verdict.
    /// If operations on it are still in flight (futures dropped early), the
    /// fd is closed when the last one completes, and this returns `Ok`.
    pub async fn close(self) -> io::Result<()> {
        let File { fd, handle } = self;
        match fd.try_unwrap() {
            Ok(fd) => Op::submit(&handle.shared, Lane::Current, Close::new(fd)).await,
            Err(_in_flight) => Ok(()),
        }
    }
}

impl File {
    /// The file's fd as a [`NativeFd`](crate::NativeFd), for
    /// [`UringNativeAny`](crate::UringNativeAny) operations. The fd stays
    /// open while either is alive.
    pub fn native_fd(&self) -> crate::NativeFd {
        crate::NativeFd::from_shared(self.fd.clone())
    }
}

impl AsRawFd for File {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.raw()
    }
}

/// The file's size as the kernel has it cached, for a buffer-size hint:
/// one inline `statx(AT_EMPTY_PATH | AT_STATX_DONT_SYNC)`, which reads the
/// open inode and never waits (`DONT_SYNC`: a network filesystem answers
/// from its cache instead of asking the server). A stale size only costs
/// a buffer resize: the reads go on to the end of the file. The ring's
/// `STATX` goes to an io-wq thread, and that handoff was half the time of
/// a 4 KiB `fs::read` (`bench/README.md`, `fs_read_whole_file_4k`).
fn cached_len(fd: RawFd) -> Option<u64> {
    // SAFETY: all-zero bytes are a valid `statx` (plain integers).
    let mut stx: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: `fd` is this file's open descriptor (the `File` holds it for
    // the call); the path is a NUL-terminated empty string, which with
    // `AT_EMPTY_PATH` names `fd` itself; `stx` is a valid, writable
    // `statx` the kernel fills and that outlives the call.
    let r = unsafe {
        libc::statx(
            fd,
            c"".as_ptr(),
            libc::AT_EMPTY_PATH | libc::AT_STATX_DONT_SYNC,
            libc::STATX_SIZE,
            &mut stx,
        )
    };
    (r == 0 && stx.stx_mask & libc::STATX_SIZE != 0).then_some(stx.stx_size)
}

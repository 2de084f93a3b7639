//! `FileCursor`: a position over a positional `File`.
//!
//! [`File`] has no cursor on purpose: every operation names its offset, so
//! one `File` shared by `&` or `Arc` serves concurrent reads and writes
//! without them racing on a hidden position. A stream-style reader or
//! writer needs a position, so it lives here, in a value that owns the
//! file and is borrowed `&mut` by every operation: one owner, one position,
//! and `File` keeps its positional API.

use std::future::{ready, Future};
use std::io;

use super::traits::{AsyncRead, AsyncWrite};
use crate::buf::{BufResult, IoBuf, IoBufMut};
use crate::fs::File;

/// A [`File`] with a position, read and written as a stream: each read or
/// write goes to the position and advances it by the count.
///
/// `flush` and `shutdown` do nothing (written bytes are already the
/// kernel's); call [`File::fsync`] through [`get_ref`](FileCursor::get_ref)
/// for durability. A file opened in append mode appends whatever the
/// position says, so the position no longer tracks writes there.
///
/// ```
/// # spargio::block_on(spargio::run(|handle| async move {
/// use spargio::fs::OpenOptions;
/// use spargio::io::{copy_to_vec, AsyncWriteExt, FileCursor};
///
/// let path = std::env::temp_dir().join(format!("spargio-doc-cursor-{}", std::process::id()));
/// let file = OpenOptions::new()
///     .read(true)
///     .write(true)
///     .create(true)
///     .truncate(true)
///     .open(&handle, &path)
///     .await
///     .unwrap();
/// let mut cursor = FileCursor::new(file);
/// cursor.write_all(&b"hello "[..]).await.0.unwrap();
/// cursor.write_all(&b"world"[..]).await.0.unwrap();
/// assert_eq!(cursor.position(), 11);
///
/// cursor.set_position(6);
/// assert_eq!(copy_to_vec(&mut cursor).await.unwrap(), b"world");
/// cursor.into_inner().close().await.unwrap();
/// # std::fs::remove_file(&path).unwrap();
/// # })).unwrap();
/// ```
#[derive(Debug)]
pub struct FileCursor {
    file: File,
    pos: u64,
}

impl FileCursor {
    /// A cursor at the start of `file`.
    pub fn new(file: File) -> FileCursor {
        FileCursor::with_position(file, 0)
    }

    /// A cursor at `pos` in `file`.
    pub fn with_position(file: File, pos: u64) -> FileCursor {
        FileCursor { file, pos }
    }

    /// The offset the next read or write goes to.
    pub fn position(&self) -> u64 {
        self.pos
    }

    /// Moves the cursor (a seek); past the end is allowed, as with
    /// `lseek(2)`: a read there is end of stream, a write leaves a hole.
    pub fn set_position(&mut self, pos: u64) {
        self.pos = pos;
    }

    /// The file, for its positional methods.
    pub fn get_ref(&self) -> &File {
        &self.file
    }

    /// The file back; the position is forgotten.
    pub fn into_inner(self) -> File {
        self.file
    }
}

impl AsyncRead for FileCursor {
    async fn read<B: IoBufMut>(&mut self, buf: B) -> BufResult<usize, B> {
        let (res, buf) = self.file.read_at_into(self.pos, buf).await;
        if let Ok(n) = res {
            self.pos += n as u64;
        }
        (res, buf)
    }
}

impl AsyncWrite for FileCursor {
    async fn write<B: IoBuf>(&mut self, buf: B) -> BufResult<usize, B> {
        let (res, buf) = self.file.write_at(self.pos, buf).await;
        if let Ok(n) = res {
            self.pos += n as u64;
        }
        (res, buf)
    }
    fn flush(&mut self) -> impl Future<Output = io::Result<()>> + Send {
        ready(Ok(()))
    }
    fn shutdown(&mut self) -> impl Future<Output = io::Result<()>> + Send {
        ready(Ok(()))
    }
}

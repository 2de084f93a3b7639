//! `read_dir`: a directory listing as an async stream of entries.
//!
//! The listing runs on the blocking pool (io_uring has no opcode for
//! reading a directory), one batch per job: opening the directory and the
//! first batch share a job, each later batch is one more. A batch holds at
//! least a few hundred entries unless the directory ends first, so small
//! directories cost one job and huge ones never sit in memory whole. The
//! next batch is fetched only once the previous one has been consumed.

use std::fmt;
use std::future::Future;
use std::io;
use std::path::Path;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures_core::Stream;

use super::blocking;
use crate::fs::dirents::{DirEntry, Progress, RawDir, BATCH_MIN};
use crate::task::JoinHandle;
use crate::RuntimeHandle;

/// An open directory and the outcome of reading its next batch.
type Fetched = (RawDir, io::Result<(Vec<DirEntry>, Progress)>);

fn fetch(mut dir: RawDir) -> Fetched {
    let mut entries = Vec::new();
    let res = dir.fill(&mut entries, BATCH_MIN).map(|p| (entries, p));
    (dir, res)
}

enum State {
    /// More entries to read; no job in flight.
    Idle(RawDir),
    /// A blocking-pool job is reading the next batch.
    Fetching(JoinHandle<Fetched>),
    /// Ended, or failed (an error ends the stream).
    Done,
}

/// The entries of a directory, from [`read_dir`]: a
/// [`Stream`] of `io::Result<DirEntry>`, or call
/// [`next_entry`](ReadDir::next_entry).
///
/// Entries come in the filesystem's order, without `.` and `..`. An error
/// while listing is yielded once and ends the stream. Dropping a `ReadDir`
/// closes the directory (after a batch being read in the background, if
/// any, has finished).
pub struct ReadDir {
    handle: RuntimeHandle,
    ready: std::vec::IntoIter<DirEntry>,
    state: State,
}

impl fmt::Debug for ReadDir {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match self.state {
            State::Idle(_) => "idle",
            State::Fetching(_) => "fetching",
            State::Done => "done",
        };
        f.debug_struct("ReadDir")
            .field("buffered", &self.ready.len())
            .field("state", &state)
            .finish()
    }
}

impl ReadDir {
    /// The next entry, or `None` once the directory has been listed.
    pub async fn next_entry(&mut self) -> io::Result<Option<DirEntry>> {
        std::future::poll_fn(|cx| Pin::new(&mut *self).poll_next(cx))
            .await
            .transpose()
    }
}

impl Stream for ReadDir {
    type Item = io::Result<DirEntry>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if let Some(entry) = this.ready.next() {
                return Poll::Ready(Some(Ok(entry)));
            }
            match std::mem::replace(&mut this.state, State::Done) {
                State::Done => return Poll::Ready(None),
                State::Idle(dir) => match this.handle.spawn_blocking(move || fetch(dir)) {
                    Ok(job) => this.state = State::Fetching(job),
                    Err(err) => return Poll::Ready(Some(Err(io::Error::other(err)))),
                },
                State::Fetching(mut job) => match Pin::new(&mut job).poll(cx) {
                    Poll::Pending => {
                        this.state = State::Fetching(job);
                        return Poll::Pending;
                    }
                    Poll::Ready(Ok((dir, Ok((entries, progress))))) => {
                        this.ready = entries.into_iter();
                        if progress == Progress::More {
                            this.state = State::Idle(dir);
                        }
                    }
                    Poll::Ready(Ok((_, Err(err)))) => return Poll::Ready(Some(Err(err))),
                    Poll::Ready(Err(err)) => return Poll::Ready(Some(Err(io::Error::other(err)))),
                },
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match self.state {
            State::Done => (self.ready.len(), Some(self.ready.len())),
            _ => (self.ready.len(), None),
        }
    }
}

/// Lists the directory at `path` (following a final symlink) as a stream
/// of entries, read in batches on the blocking pool: io_uring has no
/// opcode for reading a directory. Entries carry their name, path, inode
/// number and the type the directory records (see
/// [`DirEntryType`](super::DirEntryType); a filesystem that records none
/// reports `Unknown`).
///
/// Errors opening the directory are returned here, the kernel's own:
/// `NotFound`, `NotADirectory`, `PermissionDenied`, ...
///
/// ```
/// # spargio::block_on(spargio::run(|handle| async move {
/// use spargio::fs::{read_dir, DirEntryType};
///
/// let dir = std::env::temp_dir().join(format!("spargio-doc-read-dir-{}", std::process::id()));
/// spargio::fs::create_dir_all(&handle, dir.join("sub")).await.unwrap();
/// spargio::fs::write(&handle, dir.join("a.txt"), b"hello").await.unwrap();
///
/// let mut entries = read_dir(&handle, &dir).await.unwrap();
/// let mut names = Vec::new();
/// while let Some(entry) = entries.next_entry().await.unwrap() {
///     let expected = if entry.name() == "sub" { DirEntryType::Dir } else { DirEntryType::File };
///     assert_eq!(entry.file_type(), expected);
///     names.push(entry.name().to_owned());
/// }
/// names.sort();
/// assert_eq!(names, ["a.txt", "sub"]);
/// # std::fs::remove_dir_all(&dir).unwrap();
/// # })).unwrap();
/// ```
pub async fn read_dir(
    handle: impl AsRef<RuntimeHandle>,
    path: impl AsRef<Path>,
) -> io::Result<ReadDir> {
    let handle = handle.as_ref();
    let path = path.as_ref().to_owned();
    let (dir, first) = blocking(handle, move || Ok(fetch(RawDir::open(&path, true)?))).await?;
    let (entries, progress) = first?;
    Ok(ReadDir {
        handle: handle.clone(),
        ready: entries.into_iter(),
        state: match progress {
            Progress::More => State::Idle(dir),
            Progress::End => State::Done,
        },
    })
}

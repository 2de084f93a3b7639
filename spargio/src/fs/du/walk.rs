//! The walk behind `du`: the shared stack of directories, the workers
//! and their visits (see the module docs of `du` for the protocol).

use std::collections::{HashSet, VecDeque};
use std::ffi::CString;
use std::fmt;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Poll, Waker};

use super::options::{DuErrorMode, DuOptions, DuSizeMode, DuSummary};
use super::STAT_WINDOW;
use crate::extension::fs::{StatxMetadata, StatxOptions};
use crate::fs::dirents::{DirEntry, Progress, RawDir, BATCH_MIN};
use crate::fs::{blocking, unsupported};
use crate::op::statx::Statx;
use crate::op::{Lane, Op, SharedFd};
use crate::task::JoinHandle;
use crate::RuntimeHandle;

// ===== impl Walk =====

/// The state the workers share.
pub(super) struct Walk {
    pub(super) handle: RuntimeHandle,
    pub(super) options: DuOptions,
    pub(super) root_dev: u64,
    pub(super) stack: Mutex<Stack>,
    /// Set with `failed`: lets busy workers notice without the lock. Only
    /// a hint (`Relaxed`); the error itself is published under the lock.
    pub(super) stop: AtomicBool,
    /// `(dev, ino)` of every directory entered and every non-directory
    /// that needs deduplication.
    pub(super) seen: Mutex<HashSet<(u64, u64)>>,
    /// Set once the ring refused `statx` (a kernel without the opcode);
    /// from then on entries are stated on the blocking pool.
    pub(super) statx_fallback: AtomicBool,
}

pub(super) struct Stack {
    /// Directories counted but not yet visited.
    pub(super) dirs: Vec<PathBuf>,
    /// Workers holding a directory (which may push more).
    pub(super) busy: usize,
    /// One slot per worker: the waker of a worker waiting for work.
    pub(super) parked: Vec<Option<Waker>>,
    /// FailFast: the first error, which ends the walk.
    pub(super) failed: Option<io::Error>,
}

impl Stack {
    fn take_parked(&mut self) -> Vec<Waker> {
        self.parked.iter_mut().filter_map(Option::take).collect()
    }
}

/// Aborts the workers if `du` is dropped (or fails) before they finish.
pub(super) struct Crew(pub(super) Vec<JoinHandle<DuSummary>>);

impl Drop for Crew {
    fn drop(&mut self) {
        for job in &self.0 {
            job.abort();
        }
    }
}

pub(super) async fn worker(walk: Arc<Walk>, id: usize) -> DuSummary {
    let mut tally = DuSummary::default();
    while let Some(dir) = walk.next_dir(id).await {
        let mut visit = Visit {
            walk: &walk,
            outcome: None,
        };
        visit.outcome = Some(walk.visit(dir, &mut tally).await);
    }
    tally
}

/// A directory a worker holds. Dropping it releases the directory even if
/// the visit never finished (a panic, or the task dropped), so the other
/// workers cannot wait forever for a `busy` count that never drops.
struct Visit<'a> {
    walk: &'a Walk,
    outcome: Option<io::Result<()>>,
}

impl Drop for Visit<'_> {
    fn drop(&mut self) {
        let outcome = self
            .outcome
            .take()
            .unwrap_or_else(|| Err(io::Error::other("a du worker stopped mid-directory")));
        self.walk.finish_dir(outcome);
    }
}

impl Walk {
    pub(super) fn lock_stack(&self) -> MutexGuard<'_, Stack> {
        self.stack.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The next directory to visit, or `None` when the walk is over.
    async fn next_dir(&self, id: usize) -> Option<PathBuf> {
        std::future::poll_fn(|cx| {
            let mut stack = self.lock_stack();
            if stack.failed.is_some() {
                return Poll::Ready(None);
            }
            if let Some(dir) = stack.dirs.pop() {
                stack.busy += 1;
                return Poll::Ready(Some(dir));
            }
            if stack.busy == 0 {
                return Poll::Ready(None);
            }
            // Under the lock: whoever pushes next, or finishes last, sees
            // this waker.
            stack.parked[id] = Some(cx.waker().clone());
            Poll::Pending
        })
        .await
    }

    fn push_dirs(&self, dirs: &mut Vec<PathBuf>) {
        if dirs.is_empty() {
            return;
        }
        let wakers = {
            let mut stack = self.lock_stack();
            stack.dirs.append(dirs);
            stack.take_parked()
        };
        wakers.into_iter().for_each(Waker::wake);
    }

    fn finish_dir(&self, res: io::Result<()>) {
        let wakers = {
            let mut stack = self.lock_stack();
            stack.busy -= 1;
            if let Err(err) = res {
                if stack.failed.is_none() {
                    stack.failed = Some(err);
                }
                self.stop.store(true, Ordering::Relaxed);
            }
            if stack.failed.is_some() || (stack.busy == 0 && stack.dirs.is_empty()) {
                stack.take_parked()
            } else {
                Vec::new()
            }
        };
        wakers.into_iter().for_each(Waker::wake);
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// An error below the root: the walk's error under FailFast, a count
    /// under Skip.
    fn error(
        &self,
        tally: &mut DuSummary,
        what: &'static str,
        path: &Path,
        err: io::Error,
    ) -> io::Result<()> {
        match self.options.error_mode {
            DuErrorMode::FailFast => Err(WalkError::wrap(what, path, err)),
            DuErrorMode::Skip => {
                tally.skipped_errors += 1;
                Ok(())
            }
        }
    }

    /// Lists `dir` and counts its entries, pushing its subdirectories.
    async fn visit(&self, dir: PathBuf, tally: &mut DuSummary) -> io::Result<()> {
        let follow = self.options.follow();
        let path = dir.clone();
        let opened = blocking(&self.handle, move || {
            let mut raw = RawDir::open(&path, follow)?;
            let mut entries = Vec::new();
            let progress = raw.fill(&mut entries, BATCH_MIN)?;
            Ok((raw, entries, progress))
        })
        .await;
        let (mut raw, mut entries, mut progress) = match opened {
            Ok(listing) => listing,
            Err(err) => return self.error(tally, "cannot read directory", &dir, err),
        };
        let mut subdirs = Vec::new();
        loop {
            let fd = raw.fd().clone();
            self.stat_batch(&fd, entries, tally, &mut subdirs).await?;
            self.push_dirs(&mut subdirs);
            if progress == Progress::End || self.stopped() {
                return Ok(());
            }
            let next = blocking(&self.handle, move || {
                let mut entries = Vec::new();
                let res = raw.fill(&mut entries, BATCH_MIN);
                Ok((raw, entries, res))
            })
            .await;
            match next {
                Ok((next_raw, next_entries, Ok(next_progress))) => {
                    (raw, entries, progress) = (next_raw, next_entries, next_progress);
                }
                Ok((_, _, Err(err))) | Err(err) => {
                    return self.error(tally, "cannot read directory", &dir, err);
                }
            }
        }
    }

    /// `statx`es a batch of `dir_fd`'s entries, a window at a time, and
    /// counts them.
    async fn stat_batch(
        &self,
        dir_fd: &SharedFd,
        entries: Vec<DirEntry>,
        tally: &mut DuSummary,
        subdirs: &mut Vec<PathBuf>,
    ) -> io::Result<()> {
        let follow = self.options.follow();
        let mut todo = entries.into_iter();
        let mut window: VecDeque<(DirEntry, Option<Op<Statx>>)> =
            VecDeque::with_capacity(STAT_WINDOW);
        loop {
            while window.len() < STAT_WINDOW {
                let Some(entry) = todo.next() else { break };
                let op = self.submit_stat(dir_fd, &entry, follow);
                window.push_back((entry, op));
            }
            let Some((entry, op)) = window.pop_front() else {
                return Ok(());
            };
            if self.stopped() {
                return Ok(());
            }
            let res = match op {
                Some(op) => match op.await {
                    Ok(raw) => Ok(StatxMetadata::from_raw(&raw)),
                    Err(err) if unsupported(&err) => {
                        self.statx_fallback.store(true, Ordering::Relaxed);
                        std_stat(&self.handle, entry.path().to_owned(), follow).await
                    }
                    Err(err) => Err(err),
                },
                None => std_stat(&self.handle, entry.path().to_owned(), follow).await,
            };
            match res {
                Ok(meta) => {
                    let path = entry.path().to_owned();
                    if let Some(dir) = self.count(path, &meta, false, tally) {
                        subdirs.push(dir);
                    }
                }
                Err(err) => self.error(tally, "cannot access", entry.path(), err)?,
            }
        }
    }

    /// `statx` of `entry` by name relative to its directory, on the
    /// current ring; `None` once the ring has refused `statx`.
    fn submit_stat(&self, dir_fd: &SharedFd, entry: &DirEntry, follow: bool) -> Option<Op<Statx>> {
        // `statx_fallback` is a hint (`Relaxed`): racing workers may each
        // see the ring refuse once before they all switch.
        if self.statx_fallback.load(Ordering::Relaxed) {
            return None;
        }
        // A name from the kernel has no NUL; on the impossible one the
        // fallback reports the error.
        let name = CString::new(entry.name().as_bytes()).ok()?;
        let op = Statx::new(Some(dir_fd.clone()), name, stat_flags(follow), STAT_MASK);
        Some(Op::submit(&self.handle.shared, Lane::Current, op))
    }

    /// Counts one stated entry (or the root) into `tally`; returns its
    /// path when it is a directory to visit.
    pub(super) fn count(
        &self,
        path: PathBuf,
        meta: &StatxMetadata,
        is_root: bool,
        tally: &mut DuSummary,
    ) -> Option<PathBuf> {
        if !is_root && self.options.one_file_system && meta.dev != self.root_dev {
            tally.skipped_cross_device += 1;
            return None;
        }
        let dir = meta.is_dir();
        let dedupe = self.options.hardlink_dedupe && (self.options.follow() || meta.nlink > 1);
        if dir || dedupe {
            let fresh = self
                .seen
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert((meta.dev, meta.ino));
            if !fresh {
                tally.duplicates += 1;
                return None;
            }
        }
        let size = match self.options.size_mode {
            DuSizeMode::Allocated => meta.blocks.saturating_mul(512),
            DuSizeMode::Apparent => meta.size,
        };
        tally.bytes = tally.bytes.saturating_add(size);
        if dir {
            tally.dirs += 1;
            return Some(path);
        }
        if meta.is_file() {
            tally.files += 1;
        } else if meta.is_symlink() {
            tally.symlinks += 1;
        } else {
            tally.others += 1;
        }
        None
    }
}

/// The fields `du` needs.
const STAT_MASK: u32 = libc::STATX_TYPE
    | libc::STATX_MODE
    | libc::STATX_NLINK
    | libc::STATX_INO
    | libc::STATX_SIZE
    | libc::STATX_BLOCKS;

/// Resolve like `stat(2)`/`lstat(2)`, which never trigger an automount.
fn stat_flags(follow: bool) -> i32 {
    let flags = libc::AT_STATX_SYNC_AS_STAT | libc::AT_NO_AUTOMOUNT;
    if follow {
        flags
    } else {
        flags | libc::AT_SYMLINK_NOFOLLOW
    }
}

pub(super) fn stat_options(follow: bool) -> StatxOptions {
    StatxOptions::new()
        .mask(STAT_MASK)
        .flags(stat_flags(follow))
}

/// `stat`/`lstat` on the blocking pool, for kernels without `statx` in
/// the ring.
pub(super) async fn std_stat(
    handle: &RuntimeHandle,
    path: PathBuf,
    follow: bool,
) -> io::Result<StatxMetadata> {
    blocking(handle, move || {
        let meta = if follow {
            std::fs::metadata(&path)
        } else {
            std::fs::symlink_metadata(&path)
        };
        meta.map(|m| StatxMetadata::from_std(&m))
    })
    .await
}

// ===== impl WalkError =====

/// An error with the path it happened on; `source()` is the original.
#[derive(Debug)]
pub(super) struct WalkError {
    what: &'static str,
    path: PathBuf,
    source: io::Error,
}

impl WalkError {
    pub(super) fn wrap(what: &'static str, path: &Path, source: io::Error) -> io::Error {
        io::Error::new(
            source.kind(),
            WalkError {
                what,
                path: path.to_owned(),
                source,
            },
        )
    }
}

impl fmt::Display for WalkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}: {}", self.what, self.path.display(), self.source)
    }
}

impl std::error::Error for WalkError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

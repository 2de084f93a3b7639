//! `du`: the disk usage of a tree, walked in parallel across the shards.
//!
//! # How the walk runs
//!
//! 1. The root is `statx`ed (following a final symlink only in
//!    [`DuSymlinkMode::Follow`]) and counted; its device is the one
//!    `one_file_system` keeps to. A root that is a directory becomes the
//!    first item of a shared stack of directories to visit.
//! 2. `2 * shard_count` workers are spawned as stealable tasks, so the
//!    walk spreads over every shard and idle shards steal from busy ones.
//!    A worker pops a directory (LIFO: depth first keeps the stack short),
//!    visits it, and repeats. Nothing recurses: a deep tree costs one stack
//!    entry per directory waiting to be visited, never a stack frame.
//! 3. Visiting: open the directory and read its entries in batches on the
//!    blocking pool (`getdents64`; io_uring has no opcode for it). Each
//!    entry is `statx`ed natively on the worker's current ring, by name
//!    relative to the open directory (one path component per lookup, and
//!    no `PATH_MAX` limit however deep the tree), with up to 32 in flight
//!    per worker.
//! 4. Each result is counted in the worker's private tally, so the only
//!    shared state is the stack and the `(dev, ino)` set, each behind its
//!    own mutex, locked once per entry that needs a dedupe check and once
//!    per batch that found subdirectories. A directory is counted when
//!    its parent's worker stats it, then pushed onto the stack.
//! 5. Termination: the walk is over when the stack is empty and no worker
//!    holds a directory (a worker holding one may still push more). A
//!    worker finding the stack empty while others are busy parks its waker
//!    in its slot; pushes and the last worker to finish wake the parked
//!    ones. Each check runs under the stack's lock, so a push cannot slip
//!    between a worker's "empty" check and its parking.
//! 6. [`DuErrorMode::FailFast`]: the first error is recorded under the
//!    stack's lock and stops every worker at its next check; `du` returns
//!    it. In [`DuErrorMode::Skip`] errors are only counted.
//! 7. The tallies are summed once every worker has ended. Dropping the
//!    `du` future aborts the workers (their in-flight `statx`es are
//!    cancelled, their directories closed).
//!
//! What counts, and how that follows GNU `du -s`, is documented on
//! [`du`] itself.

use std::collections::{HashSet, VecDeque};
use std::ffi::CString;
use std::fmt;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Poll, Waker};

use super::{blocking, path_cstring, unsupported};
use crate::extension::fs::{StatxMetadata, StatxOptions};
use crate::fs::dirents::{DirEntry, Progress, RawDir, BATCH_MIN};
use crate::fs::statx::statx_lane;
use crate::op::statx::Statx;
use crate::op::{Lane, Op, SharedFd};
use crate::task::JoinHandle;
use crate::RuntimeHandle;

/// Walkers per shard: one can wait on the blocking pool while the other
/// has `statx`es in flight.
const WORKERS_PER_SHARD: usize = 2;

/// `statx`es in flight per worker.
const STAT_WINDOW: usize = 32;

/// What each entry's size is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum DuSizeMode {
    /// Space allocated on disk, `st_blocks * 512` (`du -B1`): a sparse
    /// file counts only its written blocks.
    #[default]
    Allocated,
    /// The apparent size, `st_size` (`du -b`).
    Apparent,
}

/// Whether symlinks are followed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum DuSymlinkMode {
    /// Count each symlink as itself (`du -P`, the default).
    #[default]
    NoFollow,
    /// Count each entry as what it points to, walking into linked
    /// directories (`du -L`); each directory is entered at most once, so
    /// loops end. An unresolvable symlink is an error.
    Follow,
}

/// What an error on an entry below the root does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum DuErrorMode {
    /// Stop the walk and return the first error.
    #[default]
    FailFast,
    /// Count the error in [`DuSummary::skipped_errors`] and go on.
    Skip,
}

/// How [`du`] walks and what it counts. The default is GNU `du -s -B1`:
/// allocated sizes, symlinks not followed, hard links counted once, all
/// filesystems, stop at the first error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DuOptions {
    size_mode: DuSizeMode,
    symlink_mode: DuSymlinkMode,
    error_mode: DuErrorMode,
    hardlink_dedupe: bool,
    one_file_system: bool,
}

impl Default for DuOptions {
    fn default() -> DuOptions {
        DuOptions {
            size_mode: DuSizeMode::default(),
            symlink_mode: DuSymlinkMode::default(),
            error_mode: DuErrorMode::default(),
            hardlink_dedupe: true,
            one_file_system: false,
        }
    }
}

impl DuOptions {
    /// The defaults (see [`DuOptions`]).
    pub fn new() -> DuOptions {
        DuOptions::default()
    }

    /// Allocated (default) or apparent sizes.
    pub fn size_mode(mut self, mode: DuSizeMode) -> DuOptions {
        self.size_mode = mode;
        self
    }

    /// Whether symlinks are followed (default: not).
    pub fn symlink_mode(mut self, mode: DuSymlinkMode) -> DuOptions {
        self.symlink_mode = mode;
        self
    }

    /// Stop at the first error (default), or skip and count errors.
    pub fn error_mode(mut self, mode: DuErrorMode) -> DuOptions {
        self.error_mode = mode;
        self
    }

    /// Count a file with several hard links once per `(dev, ino)`
    /// (default: `true`; `false` is `du -l`).
    pub fn hardlink_dedupe(mut self, dedupe: bool) -> DuOptions {
        self.hardlink_dedupe = dedupe;
        self
    }

    /// Skip entries on another filesystem than the root (default:
    /// `false`; `true` is `du -x`).
    pub fn one_file_system(mut self, one: bool) -> DuOptions {
        self.one_file_system = one;
        self
    }

    fn follow(&self) -> bool {
        self.symlink_mode == DuSymlinkMode::Follow
    }
}

/// What [`du`] found. Entries counted under `Follow` count as their
/// targets, so `symlinks` is then zero.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DuSummary {
    /// Total size in bytes, as [`DuSizeMode`] defines it (root included).
    pub bytes: u64,
    /// Regular files counted.
    pub files: u64,
    /// Directories counted, the root included.
    pub dirs: u64,
    /// Symlinks counted (as themselves; only without following).
    pub symlinks: u64,
    /// Other entries counted: devices, FIFOs, sockets.
    pub others: u64,
    /// Entries not counted because their `(dev, ino)` already was: extra
    /// hard links, and under `Follow` anything reached a second time.
    pub duplicates: u64,
    /// Entries on another device than the root, not counted or entered
    /// (`one_file_system`).
    pub skipped_cross_device: u64,
    /// Errors skipped under [`DuErrorMode::Skip`]: entries that could not
    /// be `statx`ed (not counted) and directories that could not be
    /// listed (counted, contents not).
    pub skipped_errors: u64,
}

impl DuSummary {
    fn merge(&mut self, other: &DuSummary) {
        self.bytes = self.bytes.saturating_add(other.bytes);
        self.files += other.files;
        self.dirs += other.dirs;
        self.symlinks += other.symlinks;
        self.others += other.others;
        self.duplicates += other.duplicates;
        self.skipped_cross_device += other.skipped_cross_device;
        self.skipped_errors += other.skipped_errors;
    }
}

/// Disk usage of the tree at `path`, like GNU `du -s`.
///
/// The walk fans out over every shard as stealable tasks; directories are
/// listed on the blocking pool and every entry is `statx`ed through the
/// rings. An error on the root itself is always returned; errors below it
/// follow [`DuErrorMode`]. A returned error keeps the kernel's kind, names
/// the path, and has the original error as its `source()`.
///
/// # What counts: GNU `du -s`
///
/// Totals match `du -s -B1` ([`DuSizeMode::Allocated`], `st_blocks * 512`)
/// and `du -s -b` ([`DuSizeMode::Apparent`], `st_size`); the
/// [`DuSymlinkMode::Follow`] totals match `du -s -L`:
///
/// - The root counts, whatever it is. A root that is a symlink counts as
///   the link itself in `NoFollow` (like `du` without `-L`, `-H` or `-D`),
///   as its target in `Follow`.
/// - Every directory counts its own size, including one that cannot be
///   read (its contents are then an error; `du` does the same).
/// - `NoFollow`: a symlink counts as the link's own size or blocks and is
///   never followed.
/// - `Follow`: every entry counts as what it resolves to. A broken symlink,
///   or one in a loop (`a -> b -> a`), cannot be resolved: like `du -L`
///   ("cannot access ..."), it is an error and is not counted, so with
///   `FailFast` a tree holding one fails, and with `Skip` it adds one to
///   `skipped_errors`.
/// - Hard links (`hardlink_dedupe`, on by default, like `du` without
///   `-l`): a non-directory with more than one link counts once per
///   `(dev, ino)`. In `Follow` mode, as with `du -L`, every entry counts
///   once per `(dev, ino)`: a file reached both directly and through a
///   symlink counts once, and a directory reached again through a symlink
///   (a loop to an ancestor, or a second way into a subtree) is neither
///   counted nor entered again.
/// - Each directory is entered at most once in any mode, which is what
///   ends symlink loops in `Follow` mode. This differs from `du` in two
///   corners only: with `hardlink_dedupe(false)` in `Follow` mode `du -L
///   -l` walks a directory reachable through two different symlinks twice
///   (it only cuts loops back to an ancestor), and without following `du`
///   walks a directory bind-mounted in two places twice.
/// - `one_file_system` (like `du -x`): an entry on another device than the
///   root is not counted or entered, and adds one to
///   `skipped_cross_device`.
/// - An entry that vanishes between listing and `statx` is an error, as
///   in `du`.
///
/// ```
/// # spargio::block_on(spargio::run(|handle| async move {
/// use spargio::fs::{du, DuOptions, DuSizeMode};
///
/// let dir = std::env::temp_dir().join(format!("spargio-doc-du-{}", std::process::id()));
/// spargio::fs::create_dir_all(&handle, dir.join("sub")).await.unwrap();
/// spargio::fs::write(&handle, dir.join("sub/data"), vec![7u8; 10_000]).await.unwrap();
///
/// let options = DuOptions::new().size_mode(DuSizeMode::Apparent);
/// let usage = du(&handle, &dir, options).await.unwrap();
/// assert_eq!((usage.dirs, usage.files), (2, 1));
/// assert!(usage.bytes >= 10_000);
/// # std::fs::remove_dir_all(&dir).unwrap();
/// # })).unwrap();
/// ```
pub async fn du(
    handle: impl AsRef<RuntimeHandle>,
    path: impl AsRef<Path>,
    options: DuOptions,
) -> io::Result<DuSummary> {
    let handle = handle.as_ref();
    let root = path.as_ref();
    let c_root = path_cstring(root)?;
    let follow = options.follow();
    let meta = match statx_lane(handle, Lane::Current, c_root, stat_options(follow)).await {
        Err(e) if unsupported(&e) => std_stat(handle, root.to_owned(), follow).await,
        res => res,
    }
    .map_err(|e| WalkError::wrap("cannot access", root, e))?;

    let workers = WORKERS_PER_SHARD * handle.shard_count().max(1);
    let walk = Arc::new(Walk {
        handle: handle.clone(),
        options,
        root_dev: meta.dev,
        stack: Mutex::new(Stack {
            dirs: Vec::new(),
            busy: 0,
            parked: vec![None; workers],
            failed: None,
        }),
        stop: AtomicBool::new(false),
        seen: Mutex::new(HashSet::new()),
        statx_fallback: AtomicBool::new(false),
    });

    let mut summary = DuSummary::default();
    let Some(root_dir) = walk.count(root.to_owned(), &meta, true, &mut summary) else {
        return Ok(summary);
    };
    walk.lock_stack().dirs.push(root_dir);

    let mut crew = Crew(Vec::with_capacity(workers));
    for id in 0..workers {
        let job = handle
            .spawn_stealable(worker(walk.clone(), id))
            .map_err(io::Error::other)?;
        crew.0.push(job);
    }
    for job in &mut crew.0 {
        let tally = job.await.map_err(io::Error::other)?;
        summary.merge(&tally);
    }
    let failed = walk.lock_stack().failed.take();
    match failed {
        Some(err) => Err(err),
        None => Ok(summary),
    }
}

// ===== impl Walk =====

/// The state the workers share.
struct Walk {
    handle: RuntimeHandle,
    options: DuOptions,
    root_dev: u64,
    stack: Mutex<Stack>,
    /// Set with `failed`: lets busy workers notice without the lock. Only
    /// a hint (`Relaxed`); the error itself is published under the lock.
    stop: AtomicBool,
    /// `(dev, ino)` of every directory entered and every non-directory
    /// that needs deduplication.
    seen: Mutex<HashSet<(u64, u64)>>,
    /// Set once the ring refused `statx` (a kernel without the opcode);
    /// from then on entries are stated on the blocking pool.
    statx_fallback: AtomicBool,
}

struct Stack {
    /// Directories counted but not yet visited.
    dirs: Vec<PathBuf>,
    /// Workers holding a directory (which may push more).
    busy: usize,
    /// One slot per worker: the waker of a worker waiting for work.
    parked: Vec<Option<Waker>>,
    /// FailFast: the first error, which ends the walk.
    failed: Option<io::Error>,
}

impl Stack {
    fn take_parked(&mut self) -> Vec<Waker> {
        self.parked.iter_mut().filter_map(Option::take).collect()
    }
}

/// Aborts the workers if `du` is dropped (or fails) before they finish.
struct Crew(Vec<JoinHandle<DuSummary>>);

impl Drop for Crew {
    fn drop(&mut self) {
        for job in &self.0 {
            job.abort();
        }
    }
}

async fn worker(walk: Arc<Walk>, id: usize) -> DuSummary {
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
    fn lock_stack(&self) -> MutexGuard<'_, Stack> {
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
    fn count(
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

fn stat_options(follow: bool) -> StatxOptions {
    StatxOptions::new()
        .mask(STAT_MASK)
        .flags(stat_flags(follow))
}

/// `stat`/`lstat` on the blocking pool, for kernels without `statx` in
/// the ring.
async fn std_stat(
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
struct WalkError {
    what: &'static str,
    path: PathBuf,
    source: io::Error,
}

impl WalkError {
    fn wrap(what: &'static str, path: &Path, source: io::Error) -> io::Error {
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

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
//!
//! `options.rs` holds what a caller sets and gets back ([`DuOptions`],
//! [`DuSummary`] and the modes); `walk.rs` the shared stack, the workers
//! and their visits.

mod options;
mod walk;

use std::collections::HashSet;
use std::io;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use super::{path_cstring, unsupported};
use crate::fs::statx::statx_lane;
use crate::op::Lane;
use crate::RuntimeHandle;
use walk::{stat_options, std_stat, worker, Crew, Stack, Walk, WalkError};

pub use options::{DuErrorMode, DuOptions, DuSizeMode, DuSummary, DuSymlinkMode};

/// Walkers per shard: one can wait on the blocking pool while the other
/// has `statx`es in flight.
const WORKERS_PER_SHARD: usize = 2;

/// `statx`es in flight per worker.
const STAT_WINDOW: usize = 32;

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
/// assert_eq!(usage.total_bytes, usage.bytes);
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
        return Ok(summary.finish());
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
        None => Ok(summary.finish()),
    }
}

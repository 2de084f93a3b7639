//! What a `du` caller sets ([`DuOptions`] and its modes) and gets back
//! ([`DuSummary`]).

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

/// How [`du`](super::du) walks and what it counts. The default is GNU `du -s -B1`:
/// allocated sizes, symlinks not followed, hard links counted once, all
/// filesystems, stop at the first error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DuOptions {
    pub(super) size_mode: DuSizeMode,
    pub(super) symlink_mode: DuSymlinkMode,
    pub(super) error_mode: DuErrorMode,
    pub(super) hardlink_dedupe: bool,
    pub(super) one_file_system: bool,
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

    pub(super) fn follow(&self) -> bool {
        self.symlink_mode == DuSymlinkMode::Follow
    }
}

/// What [`du`](super::du) found. Entries counted under `Follow` count as their
/// targets, so `symlinks` is then zero.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DuSummary {
    /// Total size in bytes, as [`DuSizeMode`] defines it (root included).
    pub bytes: u64,
    /// The same value as [`DuSummary::bytes`], under the reference crate's
    /// name.
    pub total_bytes: u64,
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
    /// The summary as handed to the caller: `total_bytes` filled in.
    pub(super) fn finish(mut self) -> DuSummary {
        self.total_bytes = self.bytes;
        self
    }

    pub(super) fn merge(&mut self, other: &DuSummary) {
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

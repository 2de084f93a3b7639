//! `spargio::fs::du` against GNU `du -s` on the same trees.
//!
//! Every test checks its own counts first; the comparison with GNU du
//! needs GNU coreutils' `du`, and prints `SKIP ...` (then returns) when it
//! is missing. Once `du` is found, any disagreement fails the test.

mod common;

use std::ffi::CString;
use std::future::Future;
use std::io::{self, ErrorKind};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use spargio::fs::{du, DuErrorMode, DuOptions, DuSizeMode, DuSummary, DuSymlinkMode};

const MIB: u64 = 1024 * 1024;

/// `du` of `path` with `options` on a fresh 4-shard runtime.
fn run_du(path: &Path, options: DuOptions) -> io::Result<DuSummary> {
    let path = path.to_owned();
    common::on_runtime_with(4, move |h| {
        Box::pin(async move { du(&h, &path, options).await })
    })
}

fn apparent() -> DuOptions {
    DuOptions::new().size_mode(DuSizeMode::Apparent)
}

fn follow() -> DuOptions {
    DuOptions::new().symlink_mode(DuSymlinkMode::Follow)
}

// ===== GNU du =====

/// Why GNU du cannot be used here, if it cannot.
fn gnu_du_missing() -> Option<String> {
    match Command::new("du").arg("--version").output() {
        Ok(out) if out.status.success() => {
            let version = String::from_utf8_lossy(&out.stdout);
            if version.contains("GNU coreutils") {
                None
            } else {
                Some(format!("`du` is not GNU coreutils du: {version:?}"))
            }
        }
        Ok(out) => Some(format!("`du --version` failed: {}", out.status)),
        Err(e) => Some(format!("cannot run `du`: {e}")),
    }
}

/// What one GNU du run printed.
#[derive(Debug)]
struct GnuDu {
    total: u64,
    /// False when du reported errors (it still prints a total).
    clean: bool,
}

/// Runs `du <args> <path>` and parses the total it prints first; `None`,
/// after printing why, when GNU du is not available.
fn gnu_du(test: &str, args: &[&str], path: &Path) -> Option<GnuDu> {
    if let Some(why) = gnu_du_missing() {
        eprintln!("SKIP {test}: comparison with GNU du skipped: {why}");
        return None;
    }
    let out = Command::new("du").args(args).arg(path).output().unwrap();
    Some(parse_gnu_du(args, &out))
}

fn parse_gnu_du(args: &[&str], out: &std::process::Output) -> GnuDu {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let total = stdout
        .split_whitespace()
        .next()
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| {
            panic!(
                "du {args:?} printed no total: stdout {stdout:?}, stderr {:?}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
    GnuDu {
        total,
        clean: out.status.success(),
    }
}

// ===== fixtures =====

/// The mixed tree most tests walk:
///
/// ```text
/// plain/{a, b, nested/c}      regular files
/// sparse                      10 MiB long, 4 KiB written in the middle
/// links/orig, links/dNN/link  one file, 20 more hard links
/// loop/{a -> b, b -> a}       a symlink loop
/// loop/up -> ..               a directory symlink to its parent
/// loop/self -> .              a directory symlink to itself
/// broken -> does-not-exist
/// filelink -> plain/b, dirlink -> plain
/// deep/d/d/.../d              300 levels, a file every 50
/// empty_dir/, fifo
/// ```
fn build_tree(root: &Path) {
    use std::os::unix::fs::symlink;

    std::fs::create_dir_all(root.join("plain/nested")).unwrap();
    std::fs::write(root.join("plain/a"), vec![1u8; 3000]).unwrap();
    std::fs::write(root.join("plain/b"), vec![2u8; 70_000]).unwrap();
    std::fs::write(root.join("plain/nested/c"), b"c").unwrap();

    let sparse = std::fs::File::create(root.join("sparse")).unwrap();
    sparse.set_len(10 * MIB).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&sparse, &[7u8; 4096], 5 * MIB).unwrap();
    sparse.sync_all().unwrap();

    std::fs::create_dir(root.join("links")).unwrap();
    std::fs::write(root.join("links/orig"), vec![3u8; 20_000]).unwrap();
    for i in 0..20 {
        let sub = root.join(format!("links/d{i:02}"));
        std::fs::create_dir(&sub).unwrap();
        std::fs::hard_link(root.join("links/orig"), sub.join("link")).unwrap();
    }

    std::fs::create_dir(root.join("loop")).unwrap();
    symlink("b", root.join("loop/a")).unwrap();
    symlink("a", root.join("loop/b")).unwrap();
    symlink("..", root.join("loop/up")).unwrap();
    symlink(".", root.join("loop/self")).unwrap();
    symlink("does-not-exist", root.join("broken")).unwrap();
    symlink("plain/b", root.join("filelink")).unwrap();
    symlink("plain", root.join("dirlink")).unwrap();

    let mut deep = root.join("deep");
    std::fs::create_dir(&deep).unwrap();
    for level in 0..300 {
        deep.push("d");
        std::fs::create_dir(&deep).unwrap();
        if level % 50 == 0 {
            std::fs::write(deep.join("f"), vec![4u8; 100 + level]).unwrap();
        }
    }

    std::fs::create_dir(root.join("empty_dir")).unwrap();
    mkfifo(&root.join("fifo"));
}

fn mkfifo(path: &Path) {
    let c = CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: `c` is a NUL-terminated path that outlives the call.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
}

/// The mixed tree's counts without following: 1 root + plain, nested,
/// links, 20 dNN, loop, deep + 300 levels, empty_dir.
const TREE_DIRS: u64 = 327;
/// a, b, c, sparse, orig, 6 deep files.
const TREE_FILES: u64 = 11;
const TREE_SYMLINKS: u64 = 7;

fn tree(name: &str) -> common::ScratchDir {
    let root = common::scratch_dir(name);
    build_tree(&root);
    root
}

// ===== raw fd helpers for trees deeper than PATH_MAX =====

fn cstr(s: &str) -> CString {
    CString::new(s).unwrap()
}

fn open_at(dir: Option<&OwnedFd>, name: &CString, flags: i32, mode: u32) -> OwnedFd {
    let dirfd = dir.map_or(libc::AT_FDCWD, AsRawFd::as_raw_fd);
    // SAFETY: `name` is NUL-terminated and outlives the call; `dirfd` is
    // AT_FDCWD or kept open by the `dir` borrow.
    let fd = unsafe { libc::openat(dirfd, name.as_ptr(), flags | libc::O_CLOEXEC, mode) };
    assert!(fd >= 0, "openat: {}", io::Error::last_os_error());
    // SAFETY: a successful openat returns a new fd nothing else owns.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

fn open_path(path: &Path) -> OwnedFd {
    let c = CString::new(path.as_os_str().as_bytes()).unwrap();
    open_at(None, &c, libc::O_RDONLY | libc::O_DIRECTORY, 0)
}

/// Builds `depth` nested directories called `name` under `root`, holding
/// one fd at a time, with a 100-byte file `f` every `every` levels.
fn build_chain(root: &Path, name: &str, depth: usize, every: usize) {
    let name = cstr(name);
    let file = cstr("f");
    let mut dir = open_path(root);
    for level in 0..depth {
        // SAFETY: `name` is NUL-terminated; `dir` is an open directory.
        let rc = unsafe { libc::mkdirat(dir.as_raw_fd(), name.as_ptr(), 0o755) };
        assert_eq!(rc, 0, "mkdirat: {}", io::Error::last_os_error());
        dir = open_at(Some(&dir), &name, libc::O_RDONLY | libc::O_DIRECTORY, 0);
        if level % every == 0 {
            let f = open_at(
                Some(&dir),
                &file,
                libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL,
                0o644,
            );
            let mut f = std::fs::File::from(f);
            io::Write::write_all(&mut f, &[5u8; 100]).unwrap();
        }
    }
}

/// Removes what [`build_chain`] built: down to the bottom, then back up
/// through `..`, one fd at a time (std's `remove_dir_all` keeps one per
/// level open).
fn remove_chain(root: &Path, name: &str, depth: usize) {
    let name = cstr(name);
    let file = cstr("f");
    let dotdot = cstr("..");
    let mut dir = open_path(root);
    for _ in 0..depth {
        dir = open_at(Some(&dir), &name, libc::O_RDONLY | libc::O_DIRECTORY, 0);
    }
    for _ in 0..depth {
        // SAFETY: `file` is NUL-terminated; `dir` is an open directory. A
        // level without a file fails with ENOENT, which is fine.
        unsafe { libc::unlinkat(dir.as_raw_fd(), file.as_ptr(), 0) };
        let parent = open_at(Some(&dir), &dotdot, libc::O_RDONLY | libc::O_DIRECTORY, 0);
        drop(dir);
        // SAFETY: `name` is NUL-terminated; `parent` is an open directory.
        let rc = unsafe { libc::unlinkat(parent.as_raw_fd(), name.as_ptr(), libc::AT_REMOVEDIR) };
        assert_eq!(rc, 0, "unlinkat: {}", io::Error::last_os_error());
        dir = parent;
    }
}

// ===== tests =====

#[test]
fn allocated_total_matches_du_b1() {
    let root = tree("alloc");
    let got = run_du(&root, DuOptions::new()).unwrap();
    assert_eq!(got.dirs, TREE_DIRS);
    assert_eq!(got.files, TREE_FILES);
    assert_eq!(got.symlinks, TREE_SYMLINKS);
    assert_eq!(got.others, 1);
    assert_eq!(got.duplicates, 20, "20 extra hard links");
    assert_eq!((got.skipped_errors, got.skipped_cross_device), (0, 0));
    // The sparse file's 10 MiB are mostly holes.
    assert!(got.bytes < 10 * MIB, "{got:?}");
    if let Some(gnu) = gnu_du("allocated_total_matches_du_b1", &["-s", "-B1"], &root) {
        assert!(gnu.clean);
        assert_eq!(got.bytes, gnu.total, "{got:?}");
    }
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn apparent_total_matches_du_b() {
    let root = tree("apparent");
    let got = run_du(&root, apparent()).unwrap();
    assert_eq!(
        (got.dirs, got.files, got.symlinks),
        (TREE_DIRS, TREE_FILES, TREE_SYMLINKS)
    );
    assert!(got.bytes > 10 * MIB, "{got:?}");
    if let Some(gnu) = gnu_du("apparent_total_matches_du_b", &["-s", "-b"], &root) {
        assert!(gnu.clean);
        assert_eq!(got.bytes, gnu.total, "{got:?}");
    }
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn follow_matches_du_dash_l_and_ends_loops() {
    let root = tree("follow");
    let skip = follow().error_mode(DuErrorMode::Skip);
    let got = run_du(&root, skip).unwrap();
    // `broken`, `loop/a` and `loop/b` cannot be resolved: errors, as in
    // `du -L`, not counted.
    assert_eq!(got.skipped_errors, 3, "{got:?}");
    assert_eq!(got.symlinks, 0);
    assert_eq!(got.dirs, TREE_DIRS);
    assert_eq!(got.files, TREE_FILES);
    // 20 hard links, plus filelink (plain/b), dirlink (plain), loop/up
    // (the root) and loop/self (loop), each already counted.
    assert_eq!(got.duplicates, 24, "{got:?}");
    let apparent_got = run_du(&root, skip.size_mode(DuSizeMode::Apparent)).unwrap();

    // FailFast stops at an unresolvable link (which one comes first
    // depends on the walk's order).
    let err = run_du(&root, follow()).unwrap_err();
    let source = std::error::Error::source(&err)
        .and_then(|s| s.downcast_ref::<io::Error>())
        .expect("the original error is the source");
    assert!(
        matches!(source.raw_os_error(), Some(libc::ENOENT | libc::ELOOP)),
        "{source:?}"
    );
    let message = err.to_string();
    assert!(
        ["broken", "loop/a", "loop/b"]
            .iter()
            .any(|p| message.contains(p)),
        "{message}"
    );

    let test = "follow_matches_du_dash_l_and_ends_loops";
    if let Some(gnu) = gnu_du(test, &["-s", "-L", "-B1"], &root) {
        assert!(!gnu.clean, "du -L reports the unresolvable links");
        assert_eq!(got.bytes, gnu.total, "{got:?}");
        let gnu = gnu_du(test, &["-s", "-L", "-b"], &root).unwrap();
        assert_eq!(apparent_got.bytes, gnu.total, "{apparent_got:?}");
    }
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn follow_without_broken_links_succeeds() {
    let root = common::scratch_dir("follow-clean");
    std::fs::create_dir_all(root.join("real/inner")).unwrap();
    std::fs::write(root.join("real/inner/data"), vec![9u8; 50_000]).unwrap();
    std::fs::write(root.join("only-via-link"), vec![8u8; 5000]).unwrap();
    // A second way into `real`, a loop back to the root, a file reached
    // twice, and a directory outside the tree reached only by a link.
    std::os::unix::fs::symlink("real", root.join("alias")).unwrap();
    std::os::unix::fs::symlink("..", root.join("real/back")).unwrap();
    std::os::unix::fs::symlink("only-via-link", root.join("again")).unwrap();
    let outside = common::scratch_dir("follow-clean-outside");
    std::fs::write(outside.join("o"), vec![6u8; 7000]).unwrap();
    std::os::unix::fs::symlink(&outside, root.join("out")).unwrap();

    let got = run_du(&root, follow()).unwrap();
    assert_eq!((got.dirs, got.files, got.symlinks), (4, 3, 0), "{got:?}");
    assert_eq!(got.duplicates, 3, "{got:?}");
    let got_apparent = run_du(&root, follow().size_mode(DuSizeMode::Apparent)).unwrap();
    let nofollow = run_du(&root, DuOptions::new()).unwrap();
    assert_eq!((nofollow.dirs, nofollow.symlinks), (3, 4));

    let test = "follow_without_broken_links_succeeds";
    if let Some(gnu) = gnu_du(test, &["-s", "-L", "-B1"], &root) {
        assert!(gnu.clean);
        assert_eq!(got.bytes, gnu.total, "{got:?}");
        let gnu = gnu_du(test, &["-s", "-L", "-b"], &root).unwrap();
        assert_eq!(got_apparent.bytes, gnu.total, "{got_apparent:?}");
        let gnu = gnu_du(test, &["-s", "-B1"], &root).unwrap();
        assert_eq!(nofollow.bytes, gnu.total, "{nofollow:?}");
    }
    std::fs::remove_dir_all(&root).unwrap();
    std::fs::remove_dir_all(&outside).unwrap();
}

#[test]
fn hard_links_count_once_unless_asked() {
    let root = common::scratch_dir("links");
    std::fs::write(root.join("orig"), vec![3u8; 20_000]).unwrap();
    for i in 0..20 {
        let sub = root.join(format!("d{i:02}"));
        std::fs::create_dir(&sub).unwrap();
        std::fs::hard_link(root.join("orig"), sub.join("link")).unwrap();
    }
    let file_blocks = std::fs::metadata(root.join("orig")).unwrap().blocks() * 512;
    assert!(file_blocks > 0);

    let once = run_du(&root, DuOptions::new()).unwrap();
    let every = run_du(&root, DuOptions::new().hardlink_dedupe(false)).unwrap();
    assert_eq!((once.files, once.duplicates), (1, 20));
    assert_eq!((every.files, every.duplicates), (21, 0));
    assert_eq!(every.bytes - once.bytes, 20 * file_blocks);

    let test = "hard_links_count_once_unless_asked";
    if let Some(gnu) = gnu_du(test, &["-s", "-B1"], &root) {
        assert_eq!(once.bytes, gnu.total);
        let gnu = gnu_du(test, &["-s", "-l", "-B1"], &root).unwrap();
        assert_eq!(every.bytes, gnu.total);
    }
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn sparse_file_counts_allocated_blocks() {
    let root = common::scratch_dir("sparse");
    let path = root.join("sparse");
    let file = std::fs::File::create(&path).unwrap();
    file.set_len(10 * MIB).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&file, &[7u8; 4096], 5 * MIB).unwrap();
    file.sync_all().unwrap();
    let blocks = std::fs::metadata(&path).unwrap().blocks() * 512;

    // The file itself as the root.
    let alloc = run_du(&path, DuOptions::new()).unwrap();
    let appar = run_du(&path, apparent()).unwrap();
    assert_eq!((alloc.files, alloc.dirs), (1, 0));
    assert_eq!(alloc.bytes, blocks);
    assert!(alloc.bytes >= 4096 && alloc.bytes < MIB, "{alloc:?}");
    assert_eq!(appar.bytes, 10 * MIB);

    let test = "sparse_file_counts_allocated_blocks";
    if let Some(gnu) = gnu_du(test, &["-s", "-B1"], &path) {
        assert_eq!(alloc.bytes, gnu.total);
        assert_eq!(
            appar.bytes,
            gnu_du(test, &["-s", "-b"], &path).unwrap().total
        );
    }
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn root_symlink_counts_as_link_unless_followed() {
    let root = common::scratch_dir("root-link");
    std::fs::create_dir(root.join("target")).unwrap();
    std::fs::write(root.join("target/data"), vec![1u8; 30_000]).unwrap();
    let link = root.join("link");
    std::os::unix::fs::symlink("target", &link).unwrap();

    let as_link = run_du(&link, apparent()).unwrap();
    assert_eq!((as_link.symlinks, as_link.dirs, as_link.files), (1, 0, 0));
    assert_eq!(as_link.bytes, "target".len() as u64);
    let followed = run_du(&link, follow().size_mode(DuSizeMode::Apparent)).unwrap();
    assert_eq!(
        (followed.symlinks, followed.dirs, followed.files),
        (0, 1, 1)
    );
    assert!(followed.bytes >= 30_000);

    let test = "root_symlink_counts_as_link_unless_followed";
    if let Some(gnu) = gnu_du(test, &["-s", "-b"], &link) {
        assert_eq!(as_link.bytes, gnu.total);
        assert_eq!(
            followed.bytes,
            gnu_du(test, &["-s", "-L", "-b"], &link).unwrap().total
        );
    }
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn root_errors_are_returned_in_every_mode() {
    let root = common::scratch_dir("root-errors");
    std::os::unix::fs::symlink("nowhere", root.join("dangling")).unwrap();
    for mode in [DuErrorMode::FailFast, DuErrorMode::Skip] {
        let options = DuOptions::new().error_mode(mode);
        let err = run_du(&root.join("missing"), options).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::NotFound);
        assert!(err.to_string().contains("missing"), "{err}");
        let err = run_du(
            &root.join("dangling"),
            options.symlink_mode(DuSymlinkMode::Follow),
        );
        assert_eq!(err.unwrap_err().kind(), ErrorKind::NotFound);
        let err = run_du(Path::new("bad\0path"), options).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
    }
    // Without following, the dangling root is just a symlink.
    let link = run_du(&root.join("dangling"), DuOptions::new()).unwrap();
    assert_eq!(link.symlinks, 1);
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn tree_deeper_than_path_max() {
    const DEPTH: usize = 2000;
    const NAME: &str = "level-dir-xyz";
    let root = common::scratch_dir("deep");
    build_chain(&root, NAME, DEPTH, 100);
    // The bottom's path is far past PATH_MAX.
    assert!(DEPTH * (NAME.len() + 1) > 4 * libc::PATH_MAX as usize);

    let alloc = run_du(&root, DuOptions::new());
    let appar = run_du(&root, apparent());
    let gnu = gnu_du("tree_deeper_than_path_max", &["-s", "-B1"], &root);
    let gnu_b = gnu
        .as_ref()
        .map(|_| gnu_du("tree_deeper_than_path_max", &["-s", "-b"], &root).unwrap());
    remove_chain(&root, NAME, DEPTH);
    std::fs::remove_dir_all(&root).unwrap();

    let alloc = alloc.unwrap();
    let appar = appar.unwrap();
    assert_eq!((alloc.dirs, alloc.files), (DEPTH as u64 + 1, 20));
    assert_eq!(alloc.skipped_errors, 0);
    if let (Some(gnu), Some(gnu_b)) = (gnu, gnu_b) {
        assert!(gnu.clean && gnu_b.clean);
        assert_eq!(alloc.bytes, gnu.total);
        assert_eq!(appar.bytes, gnu_b.total);
    }
}

#[test]
fn wide_tree_matches_du() {
    let root = common::scratch_dir("wide");
    for d in 0..64 {
        let dir = root.join(format!("dir{d}"));
        std::fs::create_dir(&dir).unwrap();
        for f in 0..50 {
            std::fs::write(dir.join(format!("f{f}")), vec![0u8; (d * 50 + f) * 37]).unwrap();
        }
    }
    let got = run_du(&root, DuOptions::new()).unwrap();
    let got_apparent = run_du(&root, apparent()).unwrap();
    assert_eq!((got.dirs, got.files), (65, 3200));
    let expected_files: u64 = (0..3200u64).map(|i| i * 37).sum();
    let dir_sizes: u64 = std::iter::once(root.clone())
        .chain((0..64).map(|d| root.join(format!("dir{d}"))))
        .map(|d| std::fs::metadata(d).unwrap().len())
        .sum();
    assert_eq!(got_apparent.bytes, expected_files + dir_sizes);

    let test = "wide_tree_matches_du";
    if let Some(gnu) = gnu_du(test, &["-s", "-B1"], &root) {
        assert_eq!(got.bytes, gnu.total);
        assert_eq!(
            got_apparent.bytes,
            gnu_du(test, &["-s", "-b"], &root).unwrap().total
        );
    }
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn one_file_system_skips_other_devices() {
    let root = tree("xdev");
    let same = run_du(&root, DuOptions::new().one_file_system(true)).unwrap();
    assert_eq!(same, run_du(&root, DuOptions::new()).unwrap());
    assert_eq!(same.skipped_cross_device, 0);

    // A directory on another filesystem, reached through a symlink.
    let shm = Path::new("/dev/shm");
    let other_dev = std::fs::metadata(shm)
        .map(|m| m.dev() != std::fs::metadata(&root).unwrap().dev())
        .unwrap_or(false);
    if !other_dev {
        eprintln!(
            "SKIP one_file_system_skips_other_devices: /dev/shm is missing or on the same device"
        );
        std::fs::remove_dir_all(&root).unwrap();
        return;
    }
    let away = shm.join(format!("spargio-fs-du-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&away);
    std::fs::create_dir(&away).unwrap();
    std::fs::write(away.join("payload"), vec![1u8; 100_000]).unwrap();
    std::os::unix::fs::symlink(&away, root.join("elsewhere")).unwrap();

    let opts = follow().error_mode(DuErrorMode::Skip);
    let xdev = run_du(&root, opts.one_file_system(true)).unwrap();
    let all = run_du(&root, opts).unwrap();
    assert_eq!(xdev.skipped_cross_device, 1);
    assert_eq!(all.skipped_cross_device, 0);
    assert_eq!(all.files, xdev.files + 1);
    assert_eq!(all.dirs, xdev.dirs + 1);

    let test = "one_file_system_skips_other_devices";
    if let Some(gnu) = gnu_du(test, &["-s", "-L", "-x", "-B1"], &root) {
        assert_eq!(xdev.bytes, gnu.total);
        assert_eq!(
            all.bytes,
            gnu_du(test, &["-s", "-L", "-B1"], &root).unwrap().total
        );
    }
    std::fs::remove_dir_all(&root).unwrap();
    std::fs::remove_dir_all(&away).unwrap();
}

#[test]
fn dropping_du_mid_walk_aborts_the_walk() {
    let root = common::scratch_dir("drop");
    for d in 0..40 {
        let dir = root.join(format!("dir{d}/inner"));
        std::fs::create_dir_all(&dir).unwrap();
        for f in 0..40 {
            std::fs::write(dir.join(format!("f{f}")), b"x").unwrap();
        }
    }
    let path = root.clone();
    let summary = common::on_runtime_with(2, move |h| {
        Box::pin(async move {
            // Poll until `du` has stated the root (first pending) and
            // spawned its workers (second pending: it now waits on them),
            // then drop it mid-walk.
            let mut walk = Box::pin(du(&h, &path, DuOptions::new()));
            let mut pendings = 0;
            let early = std::future::poll_fn(|cx| match walk.as_mut().poll(cx) {
                std::task::Poll::Ready(res) => std::task::Poll::Ready(Some(res)),
                std::task::Poll::Pending if pendings == 1 => std::task::Poll::Ready(None),
                std::task::Poll::Pending => {
                    pendings += 1;
                    std::task::Poll::Pending
                }
            })
            .await;
            drop(walk);
            if let Some(res) = early {
                res.unwrap();
            }
            // The runtime is unharmed: a full walk still completes.
            du(&h, &path, DuOptions::new()).await.unwrap()
        })
    });
    assert_eq!((summary.files, summary.dirs), (1600, 81));
    std::fs::remove_dir_all(&root).unwrap();
}

// ===== permission denied, as an unprivileged user =====

const CHILD_ENV: &str = "SPARGIO_DU_DENIED_ROOT";
const NOBODY: u32 = 65534;

/// Builds a tree with an unreadable directory under /tmp (traversable by
/// everyone), then runs [`permission_denied_child`] as uid/gid 65534: root
/// reads any directory whatever its mode, so the denial needs another
/// user.
#[test]
fn permission_denied_is_skipped_or_fails_fast() {
    let base = Path::new("/tmp").join(format!("spargio-fs-du-denied-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir(&base).unwrap();
    std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::create_dir_all(base.join("open/sub")).unwrap();
    std::fs::write(base.join("open/sub/file"), vec![1u8; 9000]).unwrap();
    std::fs::create_dir(base.join("denied")).unwrap();
    std::fs::write(base.join("denied/secret"), vec![2u8; 50_000]).unwrap();
    std::fs::set_permissions(base.join("denied"), std::fs::Permissions::from_mode(0o000)).unwrap();

    let mut child = Command::new(std::env::current_exe().unwrap());
    child
        .args([
            "--ignored",
            "--exact",
            "permission_denied_child",
            "--nocapture",
        ])
        .args(["--test-threads", "1"])
        .env(CHILD_ENV, &base);
    // SAFETY: geteuid has no preconditions.
    let is_root = unsafe { libc::geteuid() } == 0;
    if is_root {
        // SAFETY: the hook runs in the forked child before exec and only
        // calls async-signal-safe functions (setgroups, setgid, setuid);
        // it neither allocates nor takes locks.
        unsafe {
            child.pre_exec(|| {
                if libc::setgroups(0, std::ptr::null()) != 0
                    || libc::setgid(NOBODY) != 0
                    || libc::setuid(NOBODY) != 0
                {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    let out = child.output();

    std::fs::set_permissions(base.join("denied"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::remove_dir_all(&base).unwrap();

    let out = match out {
        Ok(out) => out,
        Err(e) => {
            eprintln!("SKIP permission_denied_is_skipped_or_fails_fast: cannot run the check as uid {NOBODY}: {e}");
            return;
        }
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if let Some(line) = stdout.lines().find(|l| l.starts_with("SKIP")) {
        eprintln!("{line}");
        return;
    }
    assert!(
        out.status.success() && stdout.contains("CHILD OK"),
        "unprivileged check failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
}

/// The unprivileged half of [`permission_denied_is_skipped_or_fails_fast`]
/// (ignored: it only makes sense when that test starts it).
#[test]
#[ignore = "started by permission_denied_is_skipped_or_fails_fast as an unprivileged user"]
fn permission_denied_child() {
    let Some(base) = std::env::var_os(CHILD_ENV).map(PathBuf::from) else {
        println!("SKIP permission_denied_child: run by permission_denied_is_skipped_or_fails_fast");
        return;
    };
    match std::fs::read_dir(base.join("denied")) {
        Err(e) if e.kind() == ErrorKind::PermissionDenied => {}
        other => {
            println!(
                "SKIP permission_denied_is_skipped_or_fails_fast: the denied directory is readable \
                 here (uid {}): {other:?}",
                // SAFETY: getuid has no preconditions.
                unsafe { libc::getuid() }
            );
            return;
        }
    }

    let skip = DuOptions::new().error_mode(DuErrorMode::Skip);
    let got = run_du(&base, skip).unwrap();
    assert_eq!(got.skipped_errors, 1, "{got:?}");
    // The unreadable directory itself counts, as in du; its file does not.
    assert_eq!((got.dirs, got.files), (4, 1), "{got:?}");
    let got_apparent = run_du(&base, skip.size_mode(DuSizeMode::Apparent)).unwrap();

    let err = run_du(&base, DuOptions::new()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::PermissionDenied, "{err}");
    assert!(err.to_string().contains("denied"), "{err}");

    // The denied directory as the root: counted, then skipped or failed.
    let at_root = run_du(&base.join("denied"), skip).unwrap();
    assert_eq!((at_root.dirs, at_root.skipped_errors), (1, 1));
    let err = run_du(&base.join("denied"), DuOptions::new()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::PermissionDenied);

    let test = "permission_denied_child";
    if let Some(gnu) = gnu_du(test, &["-s", "-B1"], &base) {
        assert!(!gnu.clean, "du reports the unreadable directory");
        assert_eq!(got.bytes, gnu.total, "{got:?}");
        let gnu = gnu_du(test, &["-s", "-b"], &base).unwrap();
        assert_eq!(got_apparent.bytes, gnu.total, "{got_apparent:?}");
        let gnu = gnu_du(test, &["-s", "-B1"], &base.join("denied")).unwrap();
        assert_eq!(at_root.bytes, gnu.total, "{at_root:?}");
    }
    println!("CHILD OK");
}

//! `spargio::fs::read_dir` and `extension::fs::read_dir_entries` against
//! `std::fs::read_dir`.

mod common;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::ErrorKind;
use std::os::unix::fs::{DirEntryExt, FileTypeExt};
use std::path::{Path, PathBuf};
use std::pin::Pin;

use futures_core::Stream;
use spargio::extension::fs::read_dir_entries;
use spargio::fs::{read_dir, DirEntry, DirEntryType, ReadDir};

/// name -> (path, inode, type), as `std::fs::read_dir` sees it.
fn std_listing(dir: &Path) -> BTreeMap<OsString, (PathBuf, u64, DirEntryType)> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let ft = e.file_type().unwrap();
            let kind = if ft.is_file() {
                DirEntryType::File
            } else if ft.is_dir() {
                DirEntryType::Dir
            } else if ft.is_symlink() {
                DirEntryType::Symlink
            } else if ft.is_fifo() {
                DirEntryType::Fifo
            } else if ft.is_socket() {
                DirEntryType::Socket
            } else if ft.is_char_device() {
                DirEntryType::CharDevice
            } else if ft.is_block_device() {
                DirEntryType::BlockDevice
            } else {
                DirEntryType::Unknown
            };
            (e.file_name(), (e.path(), e.ino(), kind))
        })
        .collect()
}

fn as_listing(entries: Vec<DirEntry>) -> BTreeMap<OsString, (PathBuf, u64, DirEntryType)> {
    let n = entries.len();
    let map: BTreeMap<_, _> = entries
        .into_iter()
        .map(|e| {
            assert_eq!(e.path().file_name(), Some(e.name()));
            (
                e.name().to_owned(),
                (e.path().to_owned(), e.ino(), e.file_type()),
            )
        })
        .collect();
    assert_eq!(map.len(), n, "an entry was listed twice");
    map
}

/// Every entry of `rd`, through the `Stream` impl.
async fn collect_stream(mut rd: ReadDir) -> Vec<DirEntry> {
    let mut out = Vec::new();
    while let Some(entry) = std::future::poll_fn(|cx| Pin::new(&mut rd).poll_next(cx)).await {
        out.push(entry.unwrap());
    }
    // An ended stream stays ended.
    assert!(std::future::poll_fn(|cx| Pin::new(&mut rd).poll_next(cx))
        .await
        .is_none());
    out
}

/// A directory with one of each kind of entry a user can make.
fn mixed_fixture(name: &str) -> common::ScratchDir {
    let dir = common::scratch_dir(name);
    std::fs::write(dir.join("file.txt"), b"contents").unwrap();
    std::fs::write(dir.join("empty"), b"").unwrap();
    std::fs::create_dir(dir.join("sub")).unwrap();
    std::fs::write(dir.join("sub/inner"), b"not listed").unwrap();
    std::os::unix::fs::symlink("file.txt", dir.join("link")).unwrap();
    std::os::unix::fs::symlink("missing", dir.join("dangling")).unwrap();
    std::fs::hard_link(dir.join("file.txt"), dir.join("hard")).unwrap();
    let fifo =
        std::ffi::CString::new(dir.join("fifo").into_os_string().into_encoded_bytes()).unwrap();
    // SAFETY: `fifo` is a NUL-terminated path that outlives the call.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
    let _socket = std::os::unix::net::UnixListener::bind(dir.join("sock")).unwrap();
    // Names that need no escaping but are not plain ASCII words.
    std::fs::write(dir.join("sp ace"), b"").unwrap();
    std::fs::write(dir.join("ünï"), b"").unwrap();
    std::fs::write(dir.join(".hidden"), b"").unwrap();
    dir
}

#[test]
fn read_dir_matches_std_names_types_and_inodes() {
    let dir = mixed_fixture("mixed");
    let expected = std_listing(&dir);
    assert_eq!(expected.len(), 11);
    let listed = common::on_runtime({
        let dir = dir.clone();
        move |h| Box::pin(async move { collect_stream(read_dir(&h, &dir).await.unwrap()).await })
    });
    let got = as_listing(listed);
    assert_eq!(got, expected);
    assert_eq!(got[&OsString::from("sub")].2, DirEntryType::Dir);
    assert_eq!(got[&OsString::from("link")].2, DirEntryType::Symlink);
    assert_eq!(got[&OsString::from("fifo")].2, DirEntryType::Fifo);
    assert_eq!(got[&OsString::from("sock")].2, DirEntryType::Socket);
    assert_eq!(
        got[&OsString::from("hard")].1,
        got[&OsString::from("file.txt")].1,
        "hard links share an inode"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn read_dir_entries_matches_std() {
    let dir = mixed_fixture("entries");
    let expected = std_listing(&dir);
    let listed = common::on_runtime({
        let dir = dir.clone();
        move |h| Box::pin(async move { read_dir_entries(&h, &dir).await.unwrap() })
    });
    assert_eq!(as_listing(listed), expected);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn empty_directory_lists_nothing() {
    let dir = common::scratch_dir("empty");
    let (streamed, all) = common::on_runtime({
        let dir = dir.clone();
        move |h| {
            Box::pin(async move {
                let mut rd = read_dir(&h, &dir).await.unwrap();
                let first = rd.next_entry().await.unwrap();
                (first, read_dir_entries(&h, &dir).await.unwrap())
            })
        }
    });
    assert_eq!(streamed, None);
    assert!(all.is_empty());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn symlink_to_directory_is_followed() {
    let dir = common::scratch_dir("follow");
    std::fs::create_dir(dir.join("real")).unwrap();
    std::fs::write(dir.join("real/x"), b"").unwrap();
    std::os::unix::fs::symlink("real", dir.join("alias")).unwrap();
    let names = common::on_runtime({
        let dir = dir.clone();
        move |h| {
            Box::pin(async move {
                let mut rd = read_dir(&h, dir.join("alias")).await.unwrap();
                let mut names = Vec::new();
                while let Some(e) = rd.next_entry().await.unwrap() {
                    assert_eq!(e.path(), dir.join("alias").join("x"));
                    names.push(e.name().to_owned());
                }
                names
            })
        }
    });
    assert_eq!(names, ["x"]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn errors_are_the_kernels() {
    let dir = common::scratch_dir("errors");
    std::fs::write(dir.join("plain"), b"x").unwrap();
    std::os::unix::fs::symlink("nowhere", dir.join("dangling")).unwrap();
    common::on_runtime({
        let dir = dir.clone();
        move |h| {
            Box::pin(async move {
                let missing = dir.join("missing");
                let err = read_dir(&h, &missing).await.unwrap_err();
                assert_eq!(err.kind(), ErrorKind::NotFound);
                let err = read_dir_entries(&h, &missing).await.unwrap_err();
                assert_eq!(err.kind(), ErrorKind::NotFound);

                let file = dir.join("plain");
                let err = read_dir(&h, &file).await.unwrap_err();
                assert_eq!(err.kind(), ErrorKind::NotADirectory);
                assert_eq!(err.raw_os_error(), Some(libc::ENOTDIR));
                let err = read_dir_entries(&h, &file).await.unwrap_err();
                assert_eq!(err.kind(), ErrorKind::NotADirectory);

                let err = read_dir(&h, dir.join("dangling")).await.unwrap_err();
                assert_eq!(err.kind(), ErrorKind::NotFound);

                let err = read_dir(&h, "bad\0path").await.unwrap_err();
                assert_eq!(err.kind(), ErrorKind::InvalidInput);
            })
        }
    });
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn five_thousand_entries_arrive_once_each() {
    const N: usize = 5000;
    let dir = common::scratch_dir("big");
    for i in 0..N {
        // Long names, so the listing spans many getdents64 buffers.
        let name = format!("entry-{i:05}-{}", "x".repeat(40));
        if i % 10 == 0 {
            std::fs::create_dir(dir.join(name)).unwrap();
        } else {
            std::fs::write(dir.join(name), b"").unwrap();
        }
    }
    let expected = std_listing(&dir);
    assert_eq!(expected.len(), N);
    let (streamed, all, partial) = common::on_runtime({
        let dir = dir.clone();
        move |h| {
            Box::pin(async move {
                let streamed = collect_stream(read_dir(&h, &dir).await.unwrap()).await;
                let all = read_dir_entries(&h, &dir).await.unwrap();
                // Dropping a stream mid-listing (a batch possibly being
                // read in the background) is fine.
                let mut rd = read_dir(&h, &dir).await.unwrap();
                let mut partial = 0;
                while partial < 300 {
                    rd.next_entry().await.unwrap().unwrap();
                    partial += 1;
                }
                drop(rd);
                (streamed, all, partial)
            })
        }
    });
    assert_eq!(as_listing(streamed), expected);
    assert_eq!(as_listing(all), expected);
    assert_eq!(partial, 300);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn listing_works_from_outside_the_runtime() {
    let dir = mixed_fixture("outside");
    let expected = std_listing(&dir);
    let got = common::within_hang_bound({
        let dir = dir.clone();
        move || {
            let rt = common::runtime(1);
            let h = rt.handle();
            spargio::block_on(async move {
                let rd = read_dir(&h, &dir).await.unwrap();
                collect_stream(rd).await
            })
        }
    });
    assert_eq!(as_listing(got), expected);
    std::fs::remove_dir_all(&dir).unwrap();
}

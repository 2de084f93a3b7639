//! `spargio::fs` path helpers: round trips and the kernel's errors.

mod common;

use std::io::ErrorKind;
use std::os::unix::fs::PermissionsExt;

use spargio::fs;

#[test]
fn directories_create_and_remove() {
    let dir = common::scratch_dir("dirs");
    common::on_runtime(move |h| {
        Box::pin(async move {
            let a = dir.join("a");
            fs::create_dir(&h, &a).await.unwrap();
            assert!(std::fs::metadata(&a).unwrap().is_dir());
            let e = fs::create_dir(&h, &a).await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::AlreadyExists);
            let e = fs::create_dir(&h, dir.join("missing/parent"))
                .await
                .unwrap_err();
            assert_eq!(e.kind(), ErrorKind::NotFound);

            // All levels, natively; an existing prefix and a rerun are fine.
            let deep = dir.join("x/y/z/w");
            fs::create_dir_all(&h, &deep).await.unwrap();
            fs::create_dir_all(&h, &deep).await.unwrap();
            assert!(std::fs::metadata(&deep).unwrap().is_dir());
            // A path with `..` goes through std on the blocking pool.
            fs::create_dir_all(&h, dir.join("x/../v/u")).await.unwrap();
            assert!(dir.join("v/u").is_dir());
            // A file in the way.
            std::fs::write(dir.join("file"), b"f").unwrap();
            let e = fs::create_dir_all(&h, dir.join("file/sub"))
                .await
                .unwrap_err();
            assert_eq!(e.raw_os_error(), Some(libc::ENOTDIR));
            let e = fs::create_dir_all(&h, dir.join("file")).await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::AlreadyExists);

            let e = fs::remove_dir(&h, dir.join("x")).await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::DirectoryNotEmpty);
            fs::remove_dir(&h, &deep).await.unwrap();
            assert!(!deep.exists());
            let e = fs::remove_dir(&h, dir.join("file")).await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::NotADirectory);
            let e = fs::remove_file(&h, &a).await.unwrap_err();
            assert_eq!(e.raw_os_error(), Some(libc::EISDIR));
            fs::remove_file(&h, dir.join("file")).await.unwrap();
            let e = fs::remove_file(&h, dir.join("file")).await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::NotFound);
            let e = fs::create_dir(&h, "bad\0path").await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidInput);
            std::fs::remove_dir_all(&dir).unwrap();
        })
    });
}

#[test]
fn links_renames_and_whole_file_helpers() {
    let dir = common::scratch_dir("links");
    common::on_runtime(move |h| {
        Box::pin(async move {
            let f = dir.join("f.txt");
            fs::write(&h, &f, "hello, path").await.unwrap();
            assert_eq!(fs::read(&h, &f).await.unwrap(), b"hello, path");
            assert_eq!(fs::read_to_string(&h, &f).await.unwrap(), "hello, path");

            fs::hard_link(&h, &f, dir.join("hard")).await.unwrap();
            assert_eq!(fs::metadata(&h, &f).await.unwrap().nlink(), 2);
            let e = fs::hard_link(&h, &f, dir.join("hard")).await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::AlreadyExists);

            fs::symlink(&h, "f.txt", dir.join("soft")).await.unwrap();
            assert!(fs::symlink_metadata(&h, dir.join("soft"))
                .await
                .unwrap()
                .is_symlink());
            assert!(fs::metadata(&h, dir.join("soft")).await.unwrap().is_file());
            let lite = fs::metadata_lite(&h, dir.join("soft")).await.unwrap();
            assert_eq!(lite.size, 11);
            let canon = fs::canonicalize(&h, dir.join("soft")).await.unwrap();
            assert_eq!(canon, std::fs::canonicalize(&f).unwrap());

            fs::rename(&h, &f, dir.join("g.txt")).await.unwrap();
            assert!(!f.exists());
            // The symlink now dangles.
            let e = fs::metadata(&h, dir.join("soft")).await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::NotFound);
            let e = fs::rename(&h, &f, dir.join("h")).await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::NotFound);

            fs::set_permissions(
                &h,
                dir.join("g.txt"),
                std::fs::Permissions::from_mode(0o600),
            )
            .await
            .unwrap();
            let mode = fs::metadata(&h, dir.join("g.txt"))
                .await
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);

            std::fs::write(dir.join("bin"), [0xff, 0xfe]).unwrap();
            let e = fs::read_to_string(&h, dir.join("bin")).await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidData);
            std::fs::remove_dir_all(&dir).unwrap();
        })
    });
}

/// `fs::read` takes its buffer size from the inode's cached size, a hint
/// only: a file whose size says nothing (`/proc` reports 0) or that is
/// larger than the hint's buffer reads whole all the same.
#[test]
fn whole_file_read_does_not_trust_the_size_hint() {
    let dir = common::scratch_dir("hint");
    common::on_runtime(move |h| {
        Box::pin(async move {
            let status = fs::read(&h, "/proc/self/status").await.unwrap();
            let text = String::from_utf8(status).unwrap();
            assert!(text.contains("Pid:"), "read whole: {text:?}");
            assert!(text.ends_with('\n'));
            // Larger than any first buffer, with a distinct tail.
            let path = dir.join("big");
            let mut data = vec![7u8; 3 * 1024 * 1024 + 123];
            data.extend_from_slice(b"tail");
            std::fs::write(&path, &data).unwrap();
            assert_eq!(fs::read(&h, &path).await.unwrap(), data);
        })
    });
}

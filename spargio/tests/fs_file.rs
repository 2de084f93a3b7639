//! `spargio::fs::File` and `OpenOptions`: round trips and error paths.

mod common;

use std::io::ErrorKind;

use spargio::buf::IoBuf;
use spargio::fs::{File, OpenOptions};

#[test]
fn write_then_read_round_trips_bytes() {
    let dir = common::scratch_dir("rt");
    common::on_runtime(move |h| {
        Box::pin(async move {
            let path = dir.join("a");
            let file = File::create(&h, &path).await.unwrap();
            let data: Vec<u8> = (0..10_000u32).map(|i| i as u8).collect();
            file.write_all_at(0, &data).await.unwrap();
            file.fsync().await.unwrap();
            file.sync_data().await.unwrap();
            file.close().await.unwrap();

            let file = File::open(&h, &path).await.unwrap();
            assert_eq!(file.read_to_end_at(0).await.unwrap(), data);
            assert_eq!(file.read_at(9_990, 100).await.unwrap(), &data[9_990..]);
            assert!(file.read_at(20_000, 10).await.unwrap().is_empty());
            let (n, buf) = file.read_at_into(5, vec![0u8; 3].into_boxed_slice()).await;
            assert_eq!(n.unwrap(), 3);
            assert_eq!(&buf[..], &data[5..8]);
            // Reads into a slice of spare capacity extend the vec.
            let mut v = Vec::with_capacity(8);
            v.extend_from_slice(b"xy");
            let (n, slice) = file.read_at_into(0, v.slice(2..6)).await;
            assert_eq!(n.unwrap(), 4);
            let v = slice.into_inner();
            assert_eq!(&v[..2], b"xy");
            assert_eq!(&v[2..], &data[..4]);
            assert_eq!(file.metadata().await.unwrap().len(), 10_000);
            std::fs::remove_dir_all(&dir).unwrap();
        })
    });
}

#[test]
fn set_len_truncates_and_extends() {
    let dir = common::scratch_dir("len");
    common::on_runtime(move |h| {
        Box::pin(async move {
            let path = dir.join("b");
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .open(&h, &path)
                .await
                .unwrap();
            file.write_all_at(0, b"0123456789").await.unwrap();
            file.set_len(4).await.unwrap();
            assert_eq!(file.read_to_end_at(0).await.unwrap(), b"0123");
            file.set_len(6).await.unwrap();
            assert_eq!(file.read_to_end_at(0).await.unwrap(), b"0123\0\0");
            std::fs::remove_dir_all(&dir).unwrap();
        })
    });
}

#[test]
fn open_errors_carry_the_os_error() {
    let dir = common::scratch_dir("err");
    common::on_runtime(move |h| {
        Box::pin(async move {
            let missing = File::open(&h, dir.join("nope")).await.unwrap_err();
            assert_eq!(missing.kind(), ErrorKind::NotFound);
            assert_eq!(missing.raw_os_error(), Some(libc::ENOENT));

            File::create(&h, dir.join("x")).await.unwrap();
            let exists = OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&h, dir.join("x"))
                .await
                .unwrap_err();
            assert_eq!(exists.kind(), ErrorKind::AlreadyExists);

            let isdir = File::create(&h, &dir).await.unwrap_err();
            assert_eq!(isdir.raw_os_error(), Some(libc::EISDIR));

            let nul = File::open(&h, "a\0b").await.unwrap_err();
            assert_eq!(nul.kind(), ErrorKind::InvalidInput);

            let bad = OpenOptions::new()
                .append(true)
                .truncate(true)
                .open(&h, dir.join("x"))
                .await
                .unwrap_err();
            assert_eq!(bad.kind(), ErrorKind::InvalidInput);

            let file = File::open(&h, dir.join("x")).await.unwrap();
            let (res, buf) = file.read_at_into(u64::MAX - 2, Vec::with_capacity(8)).await;
            assert_eq!(res.unwrap_err().kind(), ErrorKind::InvalidInput);
            assert_eq!(buf.capacity(), 8, "the buffer comes back on error");
            // Writing to a read-only file: EBADF from the kernel.
            let (res, _) = file.write_at(0, b"zz".as_slice()).await;
            assert_eq!(res.unwrap_err().raw_os_error(), Some(libc::EBADF));
            std::fs::remove_dir_all(&dir).unwrap();
        })
    });
}

#[test]
fn append_mode_appends() {
    let dir = common::scratch_dir("append");
    common::on_runtime(move |h| {
        Box::pin(async move {
            let path = dir.join("log");
            std::fs::write(&path, b"one ").unwrap();
            let file = OpenOptions::new()
                .append(true)
                .open(&h, &path)
                .await
                .unwrap();
            file.write_all_at(0, b"two").await.unwrap();
            drop(file);
            assert_eq!(std::fs::read(&path).unwrap(), b"one two");
            std::fs::remove_dir_all(&dir).unwrap();
        })
    });
}

#[test]
fn from_std_and_outside_runtime_submission() {
    let dir = common::scratch_dir("std");
    let path = dir.join("s");
    std::fs::write(&path, b"from std").unwrap();
    let rt = common::runtime(2);
    let h = rt.handle();
    // Awaited on a plain thread: the op goes through a shard's inbox.
    let file = File::from_std(&h, std::fs::File::open(&path).unwrap());
    let data = spargio::block_on(file.read_to_end_at(0)).unwrap();
    assert_eq!(data, b"from std");
    let meta = spargio::block_on(spargio::fs::metadata(&h, &path)).unwrap();
    assert!(meta.is_file());
    assert_eq!(meta.len(), 8);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn ops_after_shutdown_fail_cleanly() {
    let dir = common::scratch_dir("shut");
    let path = dir.join("s");
    std::fs::write(&path, b"data").unwrap();
    let rt = common::runtime(1);
    let h = rt.handle();
    let file = File::from_std(&h, std::fs::File::open(&path).unwrap());
    drop(rt);
    let (res, buf) = spargio::block_on(file.read_at_into(0, Vec::with_capacity(4)));
    let err = res.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Other);
    assert!(err.to_string().contains("shut"), "{err}");
    assert_eq!(buf.capacity(), 4);
    drop(file);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A slice of a buffer that safe code shrank after slicing: the read must
/// stay inside the allocation (before the fix, the kernel or the inline
/// `preadv2` wrote 64 KiB into a 16-byte block: heap corruption, SIGABRT).
#[test]
fn reads_into_a_slice_of_a_shrunk_buffer_stay_inside_the_allocation() {
    let dir = common::scratch_dir("shrunk");
    let path = dir.join("f");
    std::fs::write(&path, vec![9u8; 65_536]).unwrap();
    common::on_runtime(move |h| {
        Box::pin(async move {
            let file = File::open(&h, &path).await.unwrap();
            let native = h.uring_native_unbound();
            let fd = file.native_fd();
            for through_ring in [false, true] {
                let mut slice = Vec::<u8>::with_capacity(65_536).slice(..);
                slice.get_mut().shrink_to(16);
                let cap = slice.get_ref().capacity();
                let (n, slice) = if through_ring {
                    native.read_at_into(&fd, 0, slice).await
                } else {
                    file.read_at_into(0, slice).await
                };
                let n = n.unwrap();
                let buf = slice.into_inner();
                assert!(n <= cap, "read {n} bytes into {cap}");
                assert!(buf.len() <= buf.capacity());
                assert!(buf.iter().all(|&b| b == 9));
            }
            std::fs::remove_file(&path).unwrap();
        })
    });
}

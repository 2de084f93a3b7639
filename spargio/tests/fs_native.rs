//! `UringNativeAny`: unbound file and stream ops, lane selection, fd
//! leases, the unsafe extension lane and its statx wrappers.

mod common;

use std::io::ErrorKind;
use std::os::fd::AsRawFd;
use std::time::Duration;

use spargio::extension::fs::{statx, statx_on_shard, statx_or_metadata, StatxOptions};
use spargio::extension::io_uring::{opcode, types};
use spargio::{NativeFd, UringCqe};

fn temp(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("spargio-native-{}-{name}", std::process::id()))
}

#[test]
fn file_ops_round_trip_on_any_lane() {
    let path = temp("rw");
    let p = path.clone();
    common::on_runtime(move |h| {
        Box::pin(async move {
            let native = h.uring_native_unbound();
            let file = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(true)
                .open(&p)
                .unwrap();
            let fd = NativeFd::from(file);
            let (n, _) = native.write_at(&fd, 0, b"native lane".to_vec()).await;
            assert_eq!(n.unwrap(), 11);
            native.fsync(&fd).await.unwrap();
            assert_eq!(native.read_at(&fd, 7, 32).await.unwrap(), b"lane");
            let (n, buf) = native.read_at_into(&fd, 0, vec![0u8; 6]).await;
            assert_eq!(n.unwrap(), 6);
            assert_eq!(buf, b"native");
            // Many ops in flight spread over rings; all come back right.
            let mut futs = Vec::new();
            for i in 0..64u64 {
                let native = native.clone();
                let fd = fd.clone();
                futs.push(async move { native.read_at(&fd, i % 11, 1).await.unwrap() });
            }
            for (i, f) in futs.into_iter().enumerate() {
                assert_eq!(f.await, &b"native lane"[i % 11..i % 11 + 1]);
            }
            native.sleep(Duration::from_millis(2)).await.unwrap();
            assert_eq!(native.active_native_op_count(), 0);
        })
    });
    std::fs::remove_file(path).unwrap();
}

#[test]
fn outside_thread_ops_and_preferred_shard() {
    let rt = common::runtime(2);
    let h = rt.handle();
    let native = h.uring_native_unbound().with_preferred_shard(1);
    let fd = NativeFd::from(std::fs::File::open("/proc/self/stat").unwrap());
    let data = spargio::block_on(native.read_at(&fd, 0, 16)).unwrap();
    assert_eq!(data.len(), 16);
    assert_eq!(
        native.select_shard(),
        1,
        "preferred shard wins on an idle runtime"
    );
}

#[test]
fn stream_ops_keep_one_lane_while_in_flight() {
    common::on_runtime(|h| {
        Box::pin(async move {
            let native = h.uring_native_unbound();
            let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
            let (a, b) = (NativeFd::from(a), NativeFd::from(b));
            // A pending receive holds b's lease.
            let n2 = native.clone();
            let b2 = b.clone();
            let recv = h
                .spawn_stealable(async move { n2.recv(&b2, 64).await.unwrap() })
                .unwrap();
            let leased = loop {
                if let Some(s) = native.leased_shard(&b) {
                    break s;
                }
                spargio::sleep(Duration::from_millis(1)).await;
            };
            let n = native.send(&a, b"ping").await.unwrap();
            assert_eq!(n, 4);
            assert_eq!(recv.await.unwrap(), b"ping");
            assert!(leased < h.shard_count());
            assert_eq!(native.leased_shard(&b), None, "lease lapses when idle");

            let bufs: Vec<Vec<u8>> = (0..50u8).map(|i| vec![i; 1000]).collect();
            let (total, back) = native.send_all_batch(&a, bufs, 8).await;
            assert_eq!(total.unwrap(), 50_000);
            assert_eq!(back.len(), 50);
            let mut got = Vec::new();
            while got.len() < 50_000 {
                let chunk = native.recv(&b, 65_536).await.unwrap();
                assert!(!chunk.is_empty());
                got.extend_from_slice(&chunk);
            }
            for (i, c) in got.chunks(1000).enumerate() {
                assert!(c.iter().all(|&x| x == i as u8), "batch kept its order");
            }
            // A closed peer (closed synchronously, by std): an empty
            // receive on one side, a send error on the other.
            let (c, d) = std::os::unix::net::UnixStream::pair().unwrap();
            let c = NativeFd::from(c);
            drop(d);
            assert!(native.recv(&c, 8).await.unwrap().is_empty());
            let (res, _) = native.send_buf(&c, vec![1u8; 8]).await;
            assert_eq!(res.unwrap_err().kind(), ErrorKind::BrokenPipe);
        })
    });
}

#[test]
fn submit_unsafe_runs_a_custom_sqe() {
    common::on_runtime(|h| {
        Box::pin(async move {
            let native = h.uring_native_unbound();
            let fd = NativeFd::from(std::fs::File::open("/proc/self/stat").unwrap());
            // A NOP: result 0.
            // SAFETY: a NOP names no memory.
            let nop = unsafe {
                native.submit_unsafe(
                    (),
                    |_| opcode::Nop::new().build(),
                    |cqe: std::io::Result<UringCqe>, ()| Ok(cqe?.result),
                )
            };
            assert_eq!(nop.await.unwrap(), 0);
            // A read into state-owned memory, on an explicit shard.
            let state = (fd.clone(), vec![0u8; 8]);
            // SAFETY: the SQE points into the state's Vec (heap, stable
            // under moves), and the fd is kept open by the state's clone.
            let read = unsafe {
                native.submit_unsafe_on_shard(
                    1,
                    state,
                    |(fd, buf)| {
                        opcode::Read::new(types::Fd(fd.as_raw_fd()), buf.as_mut_ptr(), 8).build()
                    },
                    |cqe, (_fd, buf)| {
                        let n = cqe?.result;
                        if n < 0 {
                            return Err(std::io::Error::from_raw_os_error(-n));
                        }
                        Ok(buf[..n as usize].to_vec())
                    },
                )
            };
            assert_eq!(read.await.unwrap().len(), 8);
        })
    });
}

#[test]
fn statx_wrappers_agree_with_std() {
    let path = temp("statx");
    std::fs::write(&path, vec![1u8; 12_345]).unwrap();
    let p = path.clone();
    common::on_runtime(move |h| {
        Box::pin(async move {
            let native = h.uring_native_unbound();
            let std_meta = std::fs::metadata(&p).unwrap();
            use std::os::unix::fs::MetadataExt;
            let m = statx(&native, &p).await.unwrap();
            assert_eq!(m.size, 12_345);
            assert!(m.is_file());
            assert_eq!(m.ino, std_meta.ino());
            assert_eq!(m.dev, std_meta.dev());
            assert_eq!(m.blocks, std_meta.blocks());
            let m = statx_on_shard(&native, 0, "/", StatxOptions::new())
                .await
                .unwrap();
            assert!(m.is_dir());
            let m = statx_or_metadata(&h, &p).await.unwrap();
            assert_eq!(m.nlink, 1);
            let e = statx(&native, p.with_extension("missing"))
                .await
                .unwrap_err();
            assert_eq!(e.kind(), ErrorKind::NotFound);
            let link = p.with_extension("lnk");
            std::os::unix::fs::symlink(&p, &link).unwrap();
            let opts = StatxOptions::new().follow_symlinks(false);
            assert!(statx_on_shard(&native, 1, &link, opts)
                .await
                .unwrap()
                .is_symlink());
            std::fs::remove_file(link).unwrap();
        })
    });
    std::fs::remove_file(path).unwrap();
}

#[test]
fn completion_queue_overflow_loses_nothing() {
    // A tiny ring (8 SQEs, 16 CQEs) and 5,000 operations submitted in one
    // poll: the SQ fills (the runtime submits to make room), the CQ
    // overflows into the kernel's backlog, and every completion must still
    // arrive exactly once.
    common::within_hang_bound(|| {
        let rt = spargio::RuntimeBuilder::new()
            .shards(1)
            .ring_entries(8)
            .build()
            .unwrap();
        let h = rt.handle();
        let native = h.uring_native_unbound();
        let join = h
            .spawn_pinned(0, async move {
                let mut ops = Vec::new();
                for i in 0..5_000u32 {
                    // SAFETY: a NOP names no memory.
                    ops.push(unsafe {
                        native.submit_unsafe(
                            i,
                            |_| opcode::Nop::new().build(),
                            |cqe: std::io::Result<UringCqe>, i| {
                                assert_eq!(cqe?.result, 0);
                                Ok(i)
                            },
                        )
                    });
                }
                let mut sum = 0u64;
                for op in ops {
                    sum += u64::from(op.await.unwrap());
                }
                sum
            })
            .unwrap();
        assert_eq!(spargio::block_on(join).unwrap(), (0..5_000u64).sum::<u64>());
    });
}

/// SQEs that would reach the runtime's own requests or kernel state are
/// refused before the kernel sees them, and the runtime goes on.
#[test]
fn submit_unsafe_refuses_sqes_that_act_on_runtime_state() {
    use spargio::extension::io_uring::squeue::{Entry, Flags};
    common::on_runtime(|h| {
        Box::pin(async move {
            let native = h.uring_native_unbound();
            type Build = Box<dyn FnOnce(&mut ()) -> Entry + Send>;
            let forged: Vec<Build> = vec![
                // A forged completion into our own ring.
                Box::new(|_| {
                    opcode::MsgRingData::new(types::Fd(0), 0, 0x0100_0000_0000_0001, None).build()
                }),
                Box::new(|_| opcode::AsyncCancel::new(0x0100_0000_0000_0001).build()),
                Box::new(|_| opcode::ProvideBuffers::new(std::ptr::null_mut(), 8, 1, 0, 0).build()),
                Box::new(|_| opcode::Nop::new().build().flags(Flags::BUFFER_SELECT)),
                Box::new(|_| opcode::Nop::new().build().flags(Flags::SKIP_SUCCESS)),
                Box::new(|_| opcode::Nop::new().build().flags(Flags::IO_LINK)),
            ];
            for build in forged {
                let decoded = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
                let d = decoded.clone();
                // SAFETY: the SQEs carry no pointers into memory we own (the
                // one with a null buffer must be refused before the kernel).
                let res = unsafe {
                    native
                        .submit_unsafe((), build, move |cqe, ()| {
                            d.store(true, std::sync::atomic::Ordering::SeqCst);
                            cqe.map(|c: UringCqe| c.result)
                        })
                        .await
                };
                assert_eq!(res.unwrap_err().kind(), ErrorKind::InvalidInput);
                assert!(!decoded.load(std::sync::atomic::Ordering::SeqCst));
            }
            // A plain NOP still goes through.
            // SAFETY: NOP carries no pointers.
            let ok = unsafe {
                native
                    .submit_unsafe(
                        (),
                        |_| opcode::Nop::new().build(),
                        |cqe, ()| cqe.map(|c| c.result),
                    )
                    .await
            };
            assert_eq!(ok.unwrap(), 0);
        })
    });
}

#[test]
fn path_ops_on_the_native_lane_and_their_errors() {
    let dir = temp("paths");
    let d = dir.clone();
    common::on_runtime(move |h| {
        Box::pin(async move {
            let native = h.uring_native_unbound();
            native.mkdir_at(&d, 0o755).await.unwrap();
            assert!(std::fs::metadata(&d).unwrap().is_dir());
            assert_eq!(
                native.mkdir_at(&d, 0o755).await.unwrap_err().kind(),
                ErrorKind::AlreadyExists
            );
            // Create a file through open_at and write through the lane.
            let file = d.join("a");
            let fd = native
                .open_at(&file, libc::O_CREAT | libc::O_WRONLY, 0o644)
                .await
                .unwrap();
            let (n, _) = native.write_at(&fd, 0, b"paths".to_vec()).await;
            assert_eq!(n.unwrap(), 5);
            drop(fd);
            native.link_at(&file, d.join("b")).await.unwrap();
            native.symlink_at("a", d.join("c")).await.unwrap();
            native.rename_at(d.join("b"), d.join("b2")).await.unwrap();
            assert_eq!(std::fs::read(d.join("b2")).unwrap(), b"paths");
            assert_eq!(std::fs::read(d.join("c")).unwrap(), b"paths");
            assert_eq!(
                std::fs::read_link(d.join("c")).unwrap(),
                std::path::Path::new("a")
            );
            // Errors come back as the kernel gave them.
            let missing = d.join("missing");
            assert_eq!(
                native
                    .open_at(&missing, libc::O_RDONLY, 0)
                    .await
                    .unwrap_err()
                    .kind(),
                ErrorKind::NotFound
            );
            assert_eq!(
                native
                    .unlink_at(&d, false)
                    .await
                    .unwrap_err()
                    .raw_os_error(),
                Some(libc::EISDIR)
            );
            assert_eq!(
                native.unlink_at(&d, true).await.unwrap_err().kind(),
                ErrorKind::DirectoryNotEmpty
            );
            assert_eq!(
                native
                    .mkdir_at("bad\0path", 0o755)
                    .await
                    .unwrap_err()
                    .kind(),
                ErrorKind::InvalidInput
            );
            for name in ["a", "b2", "c"] {
                native.unlink_at(d.join(name), false).await.unwrap();
            }
            native.unlink_at(&d, true).await.unwrap();
            assert!(!d.exists());
            assert_eq!(native.active_native_op_count(), 0);
        })
    });
    assert!(!dir.exists());
}

#[test]
fn stream_ops_on_explicit_shards_batches_and_socket_setup() {
    common::on_runtime(|h| {
        Box::pin(async move {
            let native = h.uring_native_unbound();
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = listener.local_addr().unwrap();
            let listener = NativeFd::from(listener);
            let (client, accepted) = futures_util::future::join(
                native.connect_on_shard(1, addr),
                native.accept_on_shard(0, &listener),
            )
            .await;
            let client = client.unwrap();
            let (server, peer) = accepted.unwrap();
            assert_eq!(peer.ip(), addr.ip());
            // Non-blocking, as documented.
            // SAFETY: F_GETFL on an fd `server` keeps open.
            let flags = unsafe { libc::fcntl(server.as_raw_fd(), libc::F_GETFL) };
            assert_ne!(flags & libc::O_NONBLOCK, 0);
            // Owned I/O on named rings.
            let (n, _) = native
                .send_owned_on_shard(1, &client, b"abcdefgh".to_vec())
                .await
                .unwrap();
            assert_eq!(n, 8);
            // Two 3-byte frames, then 2 bytes and the end of the stream.
            let (res, bufs) = native
                .recv_batch_into(
                    &server,
                    vec![Vec::with_capacity(3), Vec::with_capacity(3)],
                    4,
                )
                .await;
            assert_eq!(res.unwrap(), 6);
            assert_eq!(bufs, vec![b"abc".to_vec(), b"def".to_vec()]);
            let (n, buf) = native
                .recv_owned_on_shard(0, &server, Vec::with_capacity(16))
                .await
                .unwrap();
            assert_eq!((n, &buf[..]), (2, &b"gh"[..]));
            let (res, _) = native
                .send_all_batch_on_shard(1, &client, vec![b"xy".to_vec(), b"z".to_vec()], 2)
                .await;
            assert_eq!(res.unwrap(), 3);
            drop(client);
            let (res, bufs) = native
                .recv_batch_into(
                    &server,
                    vec![
                        Vec::with_capacity(2),
                        Vec::with_capacity(2),
                        Vec::with_capacity(2),
                    ],
                    1,
                )
                .await;
            assert_eq!(res.unwrap(), 3, "stops at the end of the stream");
            assert_eq!(bufs[0], b"xy");
            assert_eq!(bufs[1], b"z");
            assert!(bufs[2].is_empty());
            // Bad shards are refused before anything is submitted.
            let err = native.connect_on_shard(7, addr).await.unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidInput);
            let err = native
                .recv_owned_on_shard(9, &server, Vec::with_capacity(1))
                .await
                .unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidInput);
            assert!(native.select_stream_session_shard() < 2);
        })
    });
}

#[test]
fn offset_forms_append_and_resume_inside_one_buffer() {
    common::on_runtime(|h| {
        Box::pin(async move {
            let native = h.uring_native_unbound();
            let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
            let (a, b) = (NativeFd::from(a), NativeFd::from(b));
            // Send the tail of a buffer, starting at byte 4.
            let (n, buf) = native
                .send_owned_at_on_shard(1, &a, b"skipsent".to_vec(), 4)
                .await
                .unwrap();
            assert_eq!((n, &buf[..]), (4, &b"skipsent"[..]));
            // Receive after the 2 bytes a buffer already holds.
            let mut into = Vec::with_capacity(8);
            into.extend_from_slice(b">>");
            let (n, into) = native.recv_owned_at_on_shard(0, &b, into, 2).await.unwrap();
            assert_eq!((n, &into[..]), (4, &b">>sent"[..]));
            // Offsets past the data are refused, and the fd stays usable.
            let err = native
                .send_owned_at_on_shard(0, &a, b"ab".to_vec(), 3)
                .await
                .unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidInput);
            let err = native
                .recv_owned_at_on_shard(0, &b, Vec::with_capacity(4), 5)
                .await
                .unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidInput);
            native
                .send_owned_on_shard(0, &a, b"ok".to_vec())
                .await
                .unwrap();
            assert_eq!(native.recv(&b, 8).await.unwrap(), b"ok");
        })
    });
}

#[test]
fn flat_multishot_receive_stops_at_its_target_and_leaves_the_rest() {
    use std::io::Write;
    common::on_runtime(|h| {
        Box::pin(async move {
            let native = h.uring_native_unbound();
            let (mut a, b) = std::os::unix::net::UnixStream::pair().unwrap();
            let b = NativeFd::from(b);
            let data: Vec<u8> = (0..20_000u32).map(|i| (i % 251) as u8).collect();
            a.write_all(&data[..8_000]).unwrap();
            // Target 5,000 bytes through a small pool (4 x 1 KiB): the
            // pool is recycled as segments are copied out.
            let got = native
                .recv_multishot_segments_on_shard(1, &b, 1024, 4, 5_000)
                .await
                .unwrap();
            assert!(got.buffer.len() >= 5_000);
            assert_eq!(got.buffer, data[..got.buffer.len()]);
            let covered: usize = got.segments.iter().map(|s| s.len).sum();
            assert_eq!(covered, got.buffer.len());
            for (i, s) in got.segments.iter().enumerate() {
                assert!(s.len <= 1024);
                assert_eq!(got.segment(i), &data[s.offset..s.offset + s.len]);
            }
            // Nothing lost: the rest is still in the socket.
            let taken = got.buffer.len();
            a.write_all(&data[8_000..]).unwrap();
            drop(a);
            let chunks = native
                .recv_multishot(&b, 4096, 2, usize::MAX)
                .await
                .unwrap();
            let rest: Vec<u8> = chunks.concat();
            assert_eq!(rest, data[taken..]);
            // A bad shard or pool shape is refused.
            let err = native
                .recv_multishot_segments_on_shard(5, &b, 1024, 4, 1)
                .await
                .unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidInput);
        })
    });
}

//! Backends: choosing one, and the epoll backend running the public API.
//!
//! The container case is real: a child process installs the seccomp
//! filter Docker's default profile amounts to for io_uring (the three
//! syscalls fail with `EPERM`), and everything after runs there.

mod common;

use std::process::Command;
use std::time::Duration;

use spargio::net::{TcpListener, TcpStream, UdpSocket};
use spargio::{BackendKind, Runtime, RuntimeError};

fn epoll_runtime(shards: usize) -> Runtime {
    Runtime::builder()
        .shards(shards)
        .backend(BackendKind::Epoll)
        .build()
        .expect("an epoll runtime builds anywhere")
}

/// What every backend must do, end to end: tasks on both shards,
/// messages, timers, TCP, UDP, files and path operations.
fn exercise(rt: &Runtime) {
    let handle = rt.handle();
    let dir = std::env::temp_dir().join(format!("spargio-backend-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let h = handle.clone();
    let job = handle
        .spawn_pinned(1, async move {
            // Tasks and messages across shards.
            let on0 = h
                .spawn_pinned(0, async {
                    spargio::ShardCtx::current().unwrap().shard_id()
                })
                .unwrap();
            assert_eq!(on0.await.unwrap(), 0);

            // Timers.
            spargio::time::sleep(Duration::from_millis(5)).await;
            assert!(
                spargio::time::timeout(Duration::from_millis(5), std::future::pending::<()>())
                    .await
                    .is_err()
            );

            // TCP: 1 MiB each way through a listener on this shard.
            let listener = TcpListener::bind(&h, "127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let payload: Vec<u8> = (0..1 << 20).map(|i| (i * 7 + 3) as u8).collect();
            let expect = payload.clone();
            let h2 = h.clone();
            let client = h
                .spawn_pinned(0, async move {
                    let s = TcpStream::connect(&h2, addr).await.unwrap();
                    s.write_all_owned(payload).await.unwrap();
                    s.read_exact_owned(vec![0u8; 1 << 20]).await.unwrap()
                })
                .unwrap();
            let (server, _) = listener.accept().await.unwrap();
            let got = server.read_exact_owned(vec![0u8; 1 << 20]).await.unwrap();
            assert!(got == expect, "server received the client's bytes");
            server.write_all_owned(got).await.unwrap();
            assert!(client.await.unwrap() == expect, "the echo came back");

            // A refused connection is an error, not a hang.
            drop(listener);
            let err = TcpStream::connect(&h, addr).await.unwrap_err();
            assert_eq!(err.kind(), std::io::ErrorKind::ConnectionRefused);

            // UDP.
            let a = UdpSocket::bind(&h, "127.0.0.1:0").await.unwrap();
            let b = UdpSocket::bind(&h, "127.0.0.1:0").await.unwrap();
            a.send_to(b"datagram", b.local_addr().unwrap())
                .await
                .unwrap();
            let (data, from) = b.recv_from(64).await.unwrap();
            assert_eq!(
                (&data[..], from),
                (&b"datagram"[..], a.local_addr().unwrap())
            );

            // Files and path operations (the blocking pool on epoll).
            spargio::fs::create_dir_all(&h, &dir).await.unwrap();
            let path = dir.join("f");
            spargio::fs::write(&h, &path, b"hello backend")
                .await
                .unwrap();
            let f = spargio::fs::File::open(&h, &path).await.unwrap();
            assert_eq!(f.read_at(6, 64).await.unwrap(), b"backend");
            assert_eq!(f.metadata().await.unwrap().len(), 13);
            f.close().await.unwrap();
            spargio::fs::rename(&h, &path, dir.join("g")).await.unwrap();
            let missing = spargio::fs::File::open(&h, &path).await.unwrap_err();
            assert_eq!(missing.kind(), std::io::ErrorKind::NotFound);
            spargio::fs::remove_file(&h, dir.join("g")).await.unwrap();
            spargio::fs::remove_dir(&h, &dir).await.unwrap();
        })
        .unwrap();
    common::within_hang_bound(move || spargio::block_on(job).unwrap());
}

#[test]
fn epoll_runs_the_runtime_and_says_so() {
    let rt = epoll_runtime(2);
    let handle = rt.handle();
    assert_eq!(handle.backend(), BackendKind::Epoll);
    assert_eq!(handle.io_uring_refusal(), None, "epoll was asked for");
    let stats = handle.stats_snapshot();
    assert_eq!(stats.backend, BackendKind::Epoll);
    assert!(stats.shards.iter().all(|s| !s.ring.msg_ring));
    exercise(&rt);
}

#[test]
fn auto_picks_io_uring_where_it_is_allowed() {
    if let Err(refusal) = spargio::probe_io_uring() {
        eprintln!("skipped: io_uring is refused here ({refusal})");
        return;
    }
    let rt = Runtime::builder()
        .shards(2)
        .backend(BackendKind::Auto)
        .build()
        .unwrap();
    assert_eq!(rt.handle().backend(), BackendKind::IoUring);
    assert_eq!(rt.handle().stats_snapshot().io_uring_refusal, None);
    exercise(&rt);
}

#[test]
fn sqpoll_on_epoll_is_a_configuration_error() {
    let err = Runtime::builder()
        .backend(BackendKind::Epoll)
        .io_uring_sqpoll(Some(10))
        .build()
        .unwrap_err();
    match err {
        RuntimeError::InvalidConfig { knob, reason } => {
            assert_eq!(knob, "io_uring_sqpoll");
            assert!(reason.contains("epoll"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn submit_unsafe_names_the_backend_for_opcodes_epoll_cannot_run() {
    let rt = epoll_runtime(1);
    let native = rt.handle().uring_native_unbound();
    // SAFETY: a NOP and a FADVISE on no memory; the state owns nothing.
    let nop = unsafe {
        native.submit_unsafe(
            (),
            |_| io_uring::opcode::Nop::new().build(),
            |cqe, _| cqe.map(|c| c.result),
        )
    };
    assert_eq!(spargio::block_on(nop).unwrap(), 0);
    // SAFETY: as above.
    let fadvise = unsafe {
        native.submit_unsafe(
            (),
            |_| io_uring::opcode::Fadvise::new(io_uring::types::Fd(0), 0, 0).build(),
            |cqe, _| cqe.map(|c| c.result),
        )
    };
    let err = spargio::block_on(fadvise).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::Unsupported);
    let text = err.to_string();
    assert!(text.contains("epoll backend"), "{text}");
    assert!(text.contains("epoll was asked for"), "{text}");
}

/// Runs `child` (an ignored test of this file) in a new process whose io_uring
/// syscalls fail with `EPERM`.
fn run_under_seccomp(child: &str) {
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            child,
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("SPARGIO_SECCOMP_CHILD", "1")
        .env_remove("SPARGIO_BACKEND")
        .output()
        .unwrap();
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "{child} failed under seccomp:\n{text}"
    );
    assert!(text.contains("1 passed"), "{child} did not run:\n{text}");
}

fn in_seccomp_child() {
    assert_eq!(
        std::env::var("SPARGIO_SECCOMP_CHILD").as_deref(),
        Ok("1"),
        "run by its parent test"
    );
    common::seccomp::refuse_io_uring().expect("install the seccomp filter");
}

#[test]
fn auto_falls_back_to_epoll_when_seccomp_refuses_io_uring() {
    run_under_seccomp("seccomp_child_auto");
}

#[test]
#[ignore = "run by auto_falls_back_to_epoll_when_seccomp_refuses_io_uring"]
fn seccomp_child_auto() {
    in_seccomp_child();
    let refusal = spargio::probe_io_uring().unwrap_err();
    assert_eq!(refusal.errno, Some(libc::EPERM));
    assert!(refusal.reason.contains("seccomp"), "{refusal}");

    let rt = Runtime::builder().shards(2).build().unwrap();
    let handle = rt.handle();
    assert_eq!(handle.backend(), BackendKind::Epoll);
    assert_eq!(handle.io_uring_refusal(), Some(refusal.clone()));
    let stats = handle.stats_snapshot();
    assert_eq!(stats.backend, BackendKind::Epoll);
    assert_eq!(stats.io_uring_refusal, Some(refusal));
    exercise(&rt);
}

#[test]
fn io_uring_refused_by_seccomp_is_named_when_io_uring_is_required() {
    run_under_seccomp("seccomp_child_required");
}

#[test]
#[ignore = "run by io_uring_refused_by_seccomp_is_named_when_io_uring_is_required"]
fn seccomp_child_required() {
    in_seccomp_child();
    let err = Runtime::builder()
        .backend(BackendKind::IoUring)
        .build()
        .unwrap_err();
    match err {
        RuntimeError::IoUringUnavailable { reason, source } => {
            assert_eq!(source.raw_os_error(), Some(libc::EPERM));
            assert!(reason.contains("seccomp"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
#[ignore = "sets the machine-wide kernel.io_uring_disabled sysctl (root, 6.6+); run alone"]
fn auto_falls_back_when_the_sysctl_disables_io_uring() {
    const SYSCTL: &str = "/proc/sys/kernel/io_uring_disabled";
    let Ok(before) = std::fs::read_to_string(SYSCTL) else {
        eprintln!("skipped: this kernel has no {SYSCTL}");
        return;
    };
    if let Err(err) = std::fs::write(SYSCTL, "2") {
        eprintln!("skipped: cannot set {SYSCTL} ({err})");
        return;
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "sysctl_child", "--ignored", "--nocapture"])
        .output();
    std::fs::write(SYSCTL, before.trim()).expect("restore the sysctl");
    let out = out.unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && text.contains("1 passed"), "{text}");
}

#[test]
#[ignore = "run by auto_falls_back_when_the_sysctl_disables_io_uring"]
fn sysctl_child() {
    let rt = Runtime::builder().shards(2).build().unwrap();
    let refusal = rt.handle().io_uring_refusal().expect("io_uring refused");
    assert_eq!(refusal.errno, Some(libc::EPERM));
    assert!(refusal.reason.contains("io_uring_disabled"), "{refusal}");
    exercise(&rt);
}

/// An fd whose wait was cancelled, then closed away from its shard (here:
/// on a plain thread), may come back under the same number as another
/// socket. The shard must arm the new one: its accept completes.
#[test]
fn a_reused_fd_number_is_armed_again_after_a_cancelled_wait() {
    use std::os::fd::AsRawFd;
    let rt = epoll_runtime(1);
    let h = rt.handle();
    let mut reused = 0;
    for _ in 0..20 {
        let h2 = h.clone();
        let job = h
            .spawn_pinned(0, async move {
                let listener = TcpListener::bind(&h2, "127.0.0.1:0").await.unwrap();
                let waited =
                    spargio::time::timeout(Duration::from_millis(10), listener.accept()).await;
                assert!(waited.is_err(), "nobody connected");
                listener
            })
            .unwrap();
        let listener = common::within_hang_bound(move || spargio::block_on(job).unwrap());
        let old = listener.as_raw_fd();
        // Closed here, on a thread outside the runtime: the shard's epoll
        // set loses the fd without the shard seeing a close.
        drop(listener);
        let h2 = h.clone();
        let job = h
            .spawn_pinned(0, async move {
                // The lowest free number: the one just closed, usually.
                let listener = TcpListener::bind(&h2, "127.0.0.1:0").await.unwrap();
                let reused = listener.as_raw_fd() == old;
                let addr = listener.local_addr().unwrap();
                let peer = std::thread::spawn(move || {
                    std::thread::sleep(Duration::from_millis(5));
                    std::net::TcpStream::connect(addr).unwrap()
                });
                // Waits on the (maybe reused) listener fd until the connect.
                let (accepted, _) = listener.accept().await.unwrap();
                drop((accepted, peer.join().unwrap()));
                reused
            })
            .unwrap();
        if common::within_hang_bound(move || spargio::block_on(job).unwrap()) {
            reused += 1;
        }
    }
    assert!(
        reused > 0,
        "no fd number came back; the test proved nothing"
    );
}

/// A short read means "drained" only for data: an end of stream the
/// shard saw before that read is a state, not an edge, and the next read
/// must return 0 at once instead of waiting for an edge that never comes.
#[test]
fn a_short_read_after_the_peer_closed_still_reads_the_end() {
    use std::io::Write;
    let rt = epoll_runtime(1);
    let h = rt.handle();
    let h2 = h.clone();
    let job = h
        .spawn_pinned(0, async move {
            let listener = TcpListener::bind(&h2, "127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
            let peer = std::thread::spawn(move || {
                let mut s = std::net::TcpStream::connect(addr).unwrap();
                go_rx.recv().unwrap();
                s.write_all(b"abcd").unwrap();
                go_rx.recv().unwrap();
                s.write_all(b"efghij").unwrap();
                s.shutdown(std::net::Shutdown::Write).unwrap();
            });
            let (stream, _) = listener.accept().await.unwrap();
            // A first read that waits (the fd gets its registration).
            let first = stream.recv_owned(vec![0u8; 4]);
            go_tx.send(()).unwrap();
            let (n, buf) = first.await.unwrap();
            assert_eq!(&buf[..n], b"abcd");
            // The rest and the FIN arrive while the shard idles: it sees
            // their edge with nobody waiting.
            go_tx.send(()).unwrap();
            spargio::time::sleep(Duration::from_millis(50)).await;
            let (n, buf) = stream.recv_owned(vec![0u8; 64]).await.unwrap();
            assert_eq!(&buf[..n], b"efghij", "a short read");
            let (n, _) = stream.recv_owned(vec![0u8; 64]).await.unwrap();
            assert_eq!(n, 0, "then the end of the stream");
            peer.join().unwrap();
        })
        .unwrap();
    common::within_hang_bound(move || spargio::block_on(job).unwrap());
}

/// The driver's own timers (`IORING_OP_TIMEOUT` on epoll): one expires,
/// one dropped mid-wait is cancelled and leaves nothing pending.
#[test]
fn epoll_timeout_ops_expire_and_cancel() {
    let rt = epoll_runtime(1);
    let h = rt.handle();
    let native = h.uring_native_unbound();
    let job = h
        .spawn_pinned(0, async move {
            native.sleep(Duration::from_millis(5)).await.unwrap();
            let dropped = spargio::time::timeout(
                Duration::from_millis(5),
                native.sleep(Duration::from_secs(600)),
            )
            .await;
            assert!(dropped.is_err(), "the long sleep was still waiting");
        })
        .unwrap();
    common::within_hang_bound(move || spargio::block_on(job).unwrap());
    let stats = h.stats_snapshot();
    assert_eq!(
        stats.pending_native_ops_by_shard,
        vec![0],
        "the cancel ended it"
    );
    assert!(stats.native_ops_cancelled >= 1);
}

/// `SPARGIO_BACKEND` picks the backend of runtimes whose code names none;
/// a value it does not know is an error naming the variable.
#[test]
fn the_environment_variable_picks_the_backend() {
    for value in ["epoll", "kqueue"] {
        let out = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "env_child", "--ignored", "--nocapture"])
            .env("SPARGIO_BACKEND", value)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && text.contains("1 passed"),
            "{value}: {text}"
        );
    }
}

#[test]
#[ignore = "run by the_environment_variable_picks_the_backend"]
fn env_child() {
    let value = std::env::var("SPARGIO_BACKEND").expect("set by the parent");
    let built = Runtime::builder().shards(1).build();
    match value.as_str() {
        "epoll" => {
            assert_eq!(built.unwrap().handle().backend(), BackendKind::Epoll);
            // Code that names a backend wins over the variable.
            let named = Runtime::builder()
                .shards(1)
                .backend(BackendKind::Auto)
                .build()
                .unwrap();
            let expect = match spargio::probe_io_uring() {
                Ok(()) => BackendKind::IoUring,
                Err(_) => BackendKind::Epoll,
            };
            assert_eq!(named.handle().backend(), expect);
        }
        _ => match built.unwrap_err() {
            RuntimeError::InvalidConfig { knob, reason } => {
                assert_eq!(knob, "SPARGIO_BACKEND");
                assert!(reason.contains("kqueue"), "{reason}");
            }
            other => panic!("{other:?}"),
        },
    }
}

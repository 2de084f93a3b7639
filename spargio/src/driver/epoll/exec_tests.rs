//! Unit tests of `exec.rs`: the epoll backend's syscalls for an SQE.

use super::*;
use io_uring::{opcode, types};

#[test]
fn a_cancelled_connect_puts_the_blocking_mode_back() {
    use socket2::{Domain, Socket, Type};
    let listener = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    listener
        .bind(
            &"127.0.0.1:0"
                .parse::<std::net::SocketAddr>()
                .unwrap()
                .into(),
        )
        .unwrap();
    listener.listen(0).unwrap();
    let addr = listener.local_addr().unwrap();
    // Connections nobody accepts fill the backlog: a later SYN is
    // dropped, so the connect below stays in progress.
    let mut queued = Vec::new();
    for _ in 0..4 {
        let s = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
        s.set_nonblocking(true).unwrap();
        let _ = s.connect(&addr);
        queued.push(s);
    }
    let s = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    assert!(!is_nonblocking_now(&s), "made in blocking mode");
    let entry = opcode::Connect::new(
        types::Fd(std::os::fd::AsRawFd::as_raw_fd(&s)),
        addr.as_ptr().cast(),
        addr.len(),
    )
    .build();
    let sqe = Sqe::from_entry(entry);
    let mut progress = Progress::default();
    let step = connect(&sqe, &mut progress);
    assert!(matches!(step, Step::Wait(_)), "in progress: {step:?}");
    assert!(is_nonblocking_now(&s), "non-blocking while it waits");
    assert_eq!(progress.cancelled(&sqe), -libc::ECANCELED);
    assert!(!is_nonblocking_now(&s), "the cancel put blocking mode back");
}

#[test]
fn a_read_of_a_blocking_file_that_polls_readable_goes_to_the_pool() {
    // Readable now, but another reader of the same open file could
    // take the input before the read: the shard must not do it.
    let (r, w) = std::io::pipe().unwrap();
    std::io::Write::write_all(&mut &w, b"x").unwrap();
    let mut buf = [0u8; 4];
    let entry = opcode::Read::new(
        types::Fd(std::os::fd::AsRawFd::as_raw_fd(&r)),
        buf.as_mut_ptr(),
        4,
    )
    .offset(u64::MAX)
    .build();
    let sqe = Sqe::from_entry(entry);
    // The state a file that refuses RWF_NOWAIT, in blocking mode, is
    // left in after its first attempt.
    let mut progress = Progress {
        no_nowait: true,
        blocking: true,
        ..Progress::default()
    };
    let step = read_write(&sqe, false, &mut progress);
    assert_eq!(step, Step::Offload);
    assert_eq!(
        blocking(&sqe, progress),
        1,
        "the pool's read takes the byte"
    );
    assert_eq!(&buf[..1], b"x");
    drop(w);
}

fn is_nonblocking_now(s: &socket2::Socket) -> bool {
    // SAFETY: plain fcntl on an open socket.
    let fl = unsafe { libc::fcntl(std::os::fd::AsRawFd::as_raw_fd(s), libc::F_GETFL) };
    fl & libc::O_NONBLOCK != 0
}

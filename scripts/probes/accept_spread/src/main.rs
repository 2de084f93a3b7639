//! How the kernel spreads connections over several multishot accepts
//! armed on one listening socket, one per ring (one ring per thread, as
//! spargio's shards have), against one multishot accept per
//! `SO_REUSEPORT` listener.
//!
//! `cargo run --release --manifest-path scripts/probes/accept_spread/Cargo.toml [RINGS] [CONNS] [CLIENTS]`
//!
//! Each ring thread arms `IORING_OP_ACCEPT` with `IORING_ACCEPT_MULTISHOT`
//! and counts the connections it receives (closing each). `CLIENTS`
//! threads connect `CONNS` times in all, in bursts of 64 connections
//! opened before any is closed. Printed: per ring, the share of the
//! connections, for the shared listener and for reuseport listeners.
//! Kept outside the workspace (its own manifest) so CI does not build it.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use io_uring::{opcode, types, IoUring};

fn arg(i: usize, default: usize) -> usize {
    std::env::args()
        .nth(i)
        .and_then(|a| a.parse().ok())
        .unwrap_or(default)
}

/// A listening TCP socket on 127.0.0.1 (`port` 0: any), with
/// `SO_REUSEPORT` when asked.
fn listener(port: u16, reuseport: bool) -> TcpListener {
    // SAFETY: plain syscall; the result is checked before use.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
    // SAFETY: `fd` is a new socket nothing else owns.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    let one: libc::c_int = 1;
    for opt in [libc::SO_REUSEADDR, libc::SO_REUSEPORT] {
        if opt == libc::SO_REUSEPORT && !reuseport {
            continue;
        }
        // SAFETY: the value is a live c_int and the length says so.
        let rc = unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                opt,
                (&one as *const libc::c_int).cast(),
                4,
            )
        };
        assert_eq!(rc, 0, "setsockopt: {}", std::io::Error::last_os_error());
    }
    let addr = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from_be_bytes([127, 0, 0, 1]).to_be(),
        },
        sin_zero: [0; 8],
    };
    // SAFETY: `addr` is a live sockaddr_in and the length is its size.
    let rc = unsafe {
        libc::bind(
            fd,
            (&addr as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0, "bind: {}", std::io::Error::last_os_error());
    // SAFETY: plain syscall on a bound socket.
    assert_eq!(unsafe { libc::listen(fd, 4096) }, 0);
    TcpListener::from(owned)
}

/// One ring thread: a multishot accept on `fd`, counting connections
/// until `done`.
fn ring_thread(fd: i32, got: Arc<AtomicUsize>, done: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut ring: IoUring = IoUring::builder()
            .setup_single_issuer()
            .setup_defer_taskrun()
            .build(256)
            .unwrap();
        let accept = opcode::AcceptMulti::new(types::Fd(fd)).build().user_data(1);
        // SAFETY: the SQE carries no pointers (no peer address asked for).
        unsafe { ring.submission().push(&accept).unwrap() };
        let ts = types::Timespec::new().nsec(20_000_000);
        let args = types::SubmitArgs::new().timespec(&ts);
        while !done.load(Ordering::Relaxed) {
            let _ = ring.submitter().submit_with_args(1, &args);
            let mut rearm = false;
            for cqe in ring.completion() {
                if cqe.result() >= 0 {
                    // SAFETY: a successful accept's result is a new fd.
                    drop(unsafe { OwnedFd::from_raw_fd(cqe.result()) });
                    got.fetch_add(1, Ordering::Relaxed);
                }
                if !io_uring::cqueue::more(cqe.flags()) {
                    rearm = true;
                }
            }
            if rearm {
                // SAFETY: as above.
                unsafe { ring.submission().push(&accept).unwrap() };
            }
        }
    })
}

fn run(rings: usize, conns: usize, clients: usize, reuseport: bool) -> Vec<usize> {
    let first = listener(0, reuseport);
    let addr: SocketAddr = first.local_addr().unwrap();
    let mut listeners = vec![first];
    if reuseport {
        for _ in 1..rings {
            listeners.push(listener(addr.port(), true));
        }
    }
    let done = Arc::new(AtomicBool::new(false));
    let counts: Vec<_> = (0..rings).map(|_| Arc::new(AtomicUsize::new(0))).collect();
    let threads: Vec<_> = (0..rings)
        .map(|i| {
            let l = &listeners[if reuseport { i } else { 0 }];
            ring_thread(l.as_raw_fd(), counts[i].clone(), done.clone())
        })
        .collect();
    std::thread::sleep(Duration::from_millis(50));
    let per_client = conns / clients;
    let clients: Vec<_> = (0..clients)
        .map(|_| {
            std::thread::spawn(move || {
                let mut left = per_client;
                while left > 0 {
                    let burst = left.min(64);
                    let open: Vec<_> = (0..burst).map(|_| TcpStream::connect(addr).unwrap()).collect();
                    drop(open);
                    left -= burst;
                }
            })
        })
        .collect();
    for c in clients {
        c.join().unwrap();
    }
    let total = per_client * (conns / per_client);
    while counts.iter().map(|c| c.load(Ordering::Relaxed)).sum::<usize>() < total {
        std::thread::sleep(Duration::from_millis(5));
    }
    done.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
    counts.iter().map(|c| c.load(Ordering::Relaxed)).collect()
}

fn main() {
    let rings = arg(1, 2);
    let conns = arg(2, 20_000);
    let clients = arg(3, 4);
    for reuseport in [false, true] {
        let counts = run(rings, conns, clients, reuseport);
        let total: usize = counts.iter().sum();
        let shares: Vec<String> = counts
            .iter()
            .map(|&c| format!("{:.1}%", c as f64 * 100.0 / total as f64))
            .collect();
        println!(
            "{}: {} connections over {} rings: {}",
            if reuseport { "SO_REUSEPORT listeners" } else { "one shared listener" },
            total,
            rings,
            shares.join(" / ")
        );
    }
}

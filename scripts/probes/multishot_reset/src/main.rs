//! Does the kernel report a TCP connection's end (FIN, or a reset) to a
//! multishot receive that has just delivered the connection's last data?
//!
//! Plain io_uring, no spargio: one ring (`SINGLE_ISSUER | DEFER_TASKRUN`,
//! as spargio's shards set it up), one provided-buffer ring of 4,096
//! buffers of 2 KiB, and per accepted connection one receive, re-armed
//! whenever it ends without an end of stream. Four client threads open
//! the connections; each sends a 4-byte length, a byte saying how it will
//! close, then 200 B to 60 KB, and closes with FIN or (one in three) with
//! a reset (`SO_LINGER` 0). A connection whose end has not reached the
//! ring 3 s after the last completion counts as lost.
//!
//! Four receive shapes, each over the same connections:
//! `multishot`, `multishot+poll_first` (`IORING_RECVSEND_POLL_FIRST`),
//! `oneshot` (a single receive with buffer selection, re-armed per
//! completion), and `poll_first+rdhup watch`: the poll-first multishot
//! plus a one-shot `POLLRDHUP` poll per connection; when the poll fires
//! and the receive has not ended, the receive is cancelled and armed
//! again without poll-first. `TRACE=1` prints each lost connection's TCP
//! state, what a plain `recv` says of it, and its completions.
//!
//! On 6.18.44 (2 CPUs, 5 rounds of 600): no FIN lost anywhere; resets
//! lost: oneshot 0, multishot 0 (about 1 in 8,000 over longer runs),
//! poll-first multishot 1032 of 1035 (the socket is closed and `recv`
//! says `ECONNRESET`, but the receive never completes), watched 0.
//!
//! ```text
//! cargo run --release --manifest-path scripts/probes/multishot_reset/Cargo.toml [ROUNDS] [CONNS]
//! ```
//!
//! Kept outside the workspace: it is a question to the kernel, not part
//! of the product, and CI does not build it.

use io_uring::{cqueue, opcode, squeue, types, IoUring};
use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsRawFd, IntoRawFd};
use std::time::{Duration, Instant};

const BUFS: u16 = 4096;
const BUF_LEN: usize = 2048;
const BGID: u16 = 1;
/// `IORING_RECVSEND_POLL_FIRST` and `IORING_RECV_MULTISHOT`, in the SQE's
/// `ioprio`.
const POLL_FIRST: u16 = 1;
const RECV_MULTISHOT: u16 = 2;

#[derive(Clone, Copy, PartialEq)]
enum Shape {
    Multishot,
    MultishotPollFirst,
    Oneshot,
    /// `MultishotPollFirst`, plus a one-shot poll for `POLLRDHUP` per
    /// connection: when it fires and the receive has not ended, the
    /// receive is cancelled and armed again (without poll-first).
    Watched,
}

impl Shape {
    fn name(self) -> &'static str {
        match self {
            Shape::Multishot => "multishot",
            Shape::MultishotPollFirst => "multishot+poll_first",
            Shape::Oneshot => "oneshot",
            Shape::Watched => "poll_first+rdhup watch",
        }
    }
}

/// The kernel's `struct io_uring_buf`.
#[repr(C)]
struct BufEntry {
    addr: u64,
    len: u32,
    bid: u16,
    resv: u16,
}

/// The provided-buffer ring and the memory its entries point into.
struct Pool {
    entries: *mut BufEntry,
    mem: Vec<u8>,
    tail: u16,
}

impl Pool {
    fn new(ring: &IoUring) -> Pool {
        let bytes = BUFS as usize * std::mem::size_of::<BufEntry>();
        // SAFETY: an anonymous private mapping; the result is checked.
        let entries = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(entries, libc::MAP_FAILED);
        // SAFETY: page-aligned memory for BUFS entries, never unmapped.
        unsafe {
            ring.submitter()
                .register_buf_ring_with_flags(entries as u64, BUFS, BGID, 0)
                .expect("register the buffer ring");
        }
        let mut pool = Pool {
            entries: entries.cast(),
            mem: vec![0; BUFS as usize * BUF_LEN],
            tail: 0,
        };
        for bid in 0..BUFS {
            pool.give_back(bid);
        }
        pool.publish();
        pool
    }

    fn give_back(&mut self, bid: u16) {
        // SAFETY: the index is masked into the mapping; `bid` names a
        // BUF_LEN slice of `mem`, which lives as long as the pool.
        unsafe {
            let e = self.entries.add((self.tail & (BUFS - 1)) as usize);
            (*e).addr = self.mem.as_ptr().add(bid as usize * BUF_LEN) as u64;
            (*e).len = BUF_LEN as u32;
            (*e).bid = bid;
        }
        self.tail = self.tail.wrapping_add(1);
    }

    fn publish(&self) {
        // SAFETY: the ring's tail is the `resv` field of entry 0 (offset
        // 14), which the kernel reads atomically.
        unsafe {
            let tail = (self.entries as *mut u8).add(14) as *const std::sync::atomic::AtomicU16;
            (*tail).store(self.tail, std::sync::atomic::Ordering::Release);
        }
    }

    fn bytes(&self, bid: u16, n: usize) -> &[u8] {
        &self.mem[bid as usize * BUF_LEN..][..n]
    }
}

#[derive(Default)]
struct Conn {
    fd: i32,
    got: usize,
    ended: bool,
    /// The watch fired: re-arms go without poll-first.
    watched: bool,
    head: Vec<u8>,
    trace: Vec<String>,
}

impl Conn {
    fn reset_sent(&self) -> Option<bool> {
        (self.head.len() >= 5).then(|| self.head[4] == 1)
    }
}

fn arm(ring: &mut IoUring, shape: Shape, fd: i32, idx: usize) {
    let entry = match shape {
        Shape::Oneshot => opcode::Recv::new(types::Fd(fd), std::ptr::null_mut(), BUF_LEN as u32)
            .buf_group(BGID)
            .build()
            .flags(squeue::Flags::BUFFER_SELECT),
        Shape::Multishot | Shape::MultishotPollFirst | Shape::Watched => {
            // `opcode::RecvMulti` with `ioprio` settable (as spargio builds
            // it): a null buffer of length 0 and buffer selection.
            let mut ioprio = RECV_MULTISHOT;
            if matches!(shape, Shape::MultishotPollFirst | Shape::Watched) {
                ioprio |= POLL_FIRST;
            }
            opcode::Recv::new(types::Fd(fd), std::ptr::null_mut(), 0)
                .buf_group(BGID)
                .ioprio(ioprio)
                .build()
                .flags(squeue::Flags::BUFFER_SELECT)
        }
    };
    // SAFETY: the entry points at no memory of ours (buffers come from
    // the registered pool).
    unsafe {
        ring.submission()
            .push(&entry.user_data((idx as u64) << 2))
            .expect("submission queue has room")
    };
}

/// User data: the connection's index, shifted, and what the entry is.
const WATCH: u64 = 1;
const CANCEL: u64 = 2;

fn watch(ring: &mut IoUring, fd: i32, idx: usize) {
    let entry = opcode::PollAdd::new(types::Fd(fd), libc::POLLRDHUP as u32)
        .build()
        .user_data(((idx as u64) << 2) | WATCH);
    // SAFETY: a poll carries no pointers.
    unsafe { ring.submission().push(&entry).expect("room") };
}

fn cancel(ring: &mut IoUring, idx: usize) {
    let entry = opcode::AsyncCancel::new((idx as u64) << 2)
        .build()
        .user_data(((idx as u64) << 2) | CANCEL);
    // SAFETY: a cancel carries no pointers.
    unsafe { ring.submission().push(&entry).expect("room") };
}

fn clients(
    addr: std::net::SocketAddr,
    round: usize,
    conns: usize,
) -> Vec<std::thread::JoinHandle<()>> {
    (0..4)
        .map(|t| {
            std::thread::spawn(move || {
                let mut seed = (round * 7919 + t * 104_729 + 1) as u64;
                for i in 0..conns / 4 {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    let len = 200 + (seed % 60_000) as usize;
                    let reset = seed.is_multiple_of(3);
                    let mut msg = (len as u32).to_le_bytes().to_vec();
                    msg.push(u8::from(reset));
                    msg.extend(std::iter::repeat_n((i % 251) as u8, len - 1));
                    let mut s = TcpStream::connect(addr).expect("connect");
                    s.write_all(&msg).expect("send");
                    if reset {
                        let linger = libc::linger {
                            l_onoff: 1,
                            l_linger: 0,
                        };
                        // SAFETY: a plain setsockopt on an open socket.
                        unsafe {
                            libc::setsockopt(
                                s.as_raw_fd(),
                                libc::SOL_SOCKET,
                                libc::SO_LINGER,
                                (&linger as *const libc::linger).cast(),
                                std::mem::size_of::<libc::linger>() as u32,
                            )
                        };
                    }
                }
            })
        })
        .collect()
}

/// One round: `conns` connections through `shape`. Returns the lost ends
/// (FIN, reset) and the reset count.
fn round(shape: Shape, round: usize, conns: usize) -> (usize, usize, usize) {
    let mut ring: IoUring = IoUring::builder()
        .setup_single_issuer()
        .setup_defer_taskrun()
        .setup_cqsize(16_384)
        .build(4096)
        .expect("ring");
    let mut pool = Pool::new(&ring);
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.set_nonblocking(true).expect("nonblocking");
    let threads = clients(listener.local_addr().expect("addr"), round, conns);
    let mut table: Vec<Conn> = Vec::new();
    let mut ended = 0;
    let mut last_progress = Instant::now();
    while ended < conns && last_progress.elapsed() < Duration::from_secs(3) {
        while let Ok((s, _)) = listener.accept() {
            let fd = s.into_raw_fd();
            table.push(Conn {
                fd,
                ..Conn::default()
            });
            arm(&mut ring, shape, fd, table.len() - 1);
            if shape == Shape::Watched {
                watch(&mut ring, fd, table.len() - 1);
            }
        }
        let ts = types::Timespec::new().nsec(1_000_000);
        let _ = ring
            .submitter()
            .submit_with_args(1, &types::SubmitArgs::new().timespec(&ts));
        let cqes: Vec<cqueue::Entry> = ring.completion().collect();
        if !cqes.is_empty() {
            last_progress = Instant::now();
        }
        for cqe in cqes {
            let idx = (cqe.user_data() >> 2) as usize;
            let res = cqe.result();
            let c = &mut table[idx];
            match cqe.user_data() & 3 {
                WATCH => {
                    c.trace.push(format!("watch {res:#x}"));
                    if !c.ended {
                        c.watched = true;
                        cancel(&mut ring, idx);
                    }
                    continue;
                }
                CANCEL => {
                    c.trace.push(format!("cancel {res}"));
                    continue;
                }
                _ => {}
            }
            if let Some(bid) = cqueue::buffer_select(cqe.flags()) {
                if res > 0 && c.head.len() < 5 {
                    let n = (res as usize).min(5 - c.head.len());
                    c.head.extend_from_slice(pool.bytes(bid, n));
                }
                pool.give_back(bid);
            }
            if res > 0 {
                c.got += res as usize;
            }
            if res <= 0 || !cqueue::more(cqe.flags()) {
                c.trace
                    .push(format!("recv {res} more={}", cqueue::more(cqe.flags())));
            }
            if !cqueue::more(cqe.flags()) {
                if res == 0 || (res < 0 && res != -libc::ENOBUFS && res != -libc::ECANCELED) {
                    c.ended = true;
                    ended += 1;
                } else {
                    let fd = c.fd;
                    let again = if c.watched { Shape::Multishot } else { shape };
                    arm(&mut ring, again, fd, idx);
                }
            }
        }
        pool.publish();
    }
    for t in threads {
        t.join().expect("client thread");
    }
    let (mut lost_fin, mut lost_reset, mut resets) = (0, 0, 0);
    if std::env::var("TRACE").is_ok() {
        let fired = table
            .iter()
            .filter(|c| c.trace.iter().any(|t| t.starts_with("watch")))
            .count();
        println!("watches fired: {fired} of {}", table.len());
    }
    for c in &table {
        let reset = c.reset_sent() == Some(true);
        resets += usize::from(reset);
        if !c.ended {
            if std::env::var("TRACE").is_ok() {
                trace_lost(c, reset);
            }
            if reset {
                lost_reset += 1;
            } else {
                lost_fin += 1;
            }
        }
        // SAFETY: the connection's fd, closed once.
        unsafe { libc::close(c.fd) };
    }
    (lost_fin, lost_reset, resets)
}

/// Prints a lost connection's TCP state, what a plain `recv` says of it,
/// and its completions (`TRACE=1`).
fn trace_lost(c: &Conn, reset: bool) {
    // SAFETY: `tcp_info` is plain integers; all zeroes is a valid value.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as u32;
    // SAFETY: getsockopt writes at most `len` bytes into the live `info`.
    unsafe {
        libc::getsockopt(
            c.fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    let mut b = [0u8; 16];
    // SAFETY: recv writes at most 16 bytes into the live local `b`.
    let r = unsafe { libc::recv(c.fd, b.as_mut_ptr().cast(), 16, libc::MSG_DONTWAIT) };
    let e = std::io::Error::last_os_error();
    println!(
        "lost: reset={reset} got={} state={} recv={r} {e} {:?}",
        c.got, info.tcpi_state, c.trace
    );
}

fn main() {
    let mut args = std::env::args().skip(1);
    let rounds: usize = args.next().map_or(10, |s| s.parse().expect("ROUNDS"));
    let conns: usize = args.next().map_or(600, |s| s.parse().expect("CONNS"));
    // SAFETY: `utsname` is plain byte arrays; all zeroes is a valid value.
    let mut uname: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: uname fills the struct it is given.
    unsafe { libc::uname(&mut uname) };
    // SAFETY: uname's fields are NUL-terminated.
    let release = unsafe { std::ffi::CStr::from_ptr(uname.release.as_ptr()) };
    println!(
        "kernel {}, {rounds} rounds of {conns} connections per shape",
        release.to_string_lossy()
    );
    for shape in [
        Shape::Oneshot,
        Shape::Multishot,
        Shape::MultishotPollFirst,
        Shape::Watched,
    ] {
        let (mut fin, mut reset, mut resets) = (0, 0, 0);
        for r in 0..rounds {
            let (f, x, n) = round(shape, r, conns);
            fin += f;
            reset += x;
            resets += n;
        }
        let total = rounds * conns;
        println!(
            "{:>22}: ends lost: {fin} of {} FIN, {reset} of {resets} resets",
            shape.name(),
            total - resets
        );
    }
}

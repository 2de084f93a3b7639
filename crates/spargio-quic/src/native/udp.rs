//! The driver's UDP I/O: socket setup and the ring send/receive
//! operations (`SENDMSG`/`RECVMSG` through spargio's `send_msg_owned` /
//! `recv_msg_owned`), with GSO (one send carries a connection's burst of
//! same-size datagrams) and GRO (one receive may carry several datagrams,
//! split by the driver) where the kernel has them.
//!
//! Every operation is spargio's owned-buffer `UdpSocket` op: the buffer
//! moves into the op and comes back with the completion, so the kernel
//! never sees freed memory even if the driver drops an op mid-flight.

use std::cell::RefCell;
use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::rc::{Rc, Weak};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};

use bytes::BytesMut;
use socket2::{Domain, Protocol, Socket, Type};
use spargio::net::UdpSocket;
use spargio::RuntimeHandle;

/// A finished receive.
pub(crate) struct RecvDone {
    pub(crate) res: io::Result<RecvMeta>,
    pub(crate) buf: BytesMut,
}

/// What a receive carried.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RecvMeta {
    pub(crate) len: usize,
    pub(crate) addr: SocketAddr,
    /// GRO: the datagrams are `segment_size` bytes each (the last may be
    /// shorter).
    pub(crate) segment_size: Option<usize>,
    pub(crate) ecn: Option<u8>,
    pub(crate) dst_ip: Option<IpAddr>,
}

impl From<spargio::net::UdpRecvMeta> for RecvMeta {
    fn from(m: spargio::net::UdpRecvMeta) -> RecvMeta {
        RecvMeta {
            len: m.len,
            addr: m.addr,
            segment_size: m.segment_size,
            ecn: m.ecn,
            dst_ip: m.dst_ip,
        }
    }
}

/// A finished send.
pub(crate) struct SendDone {
    pub(crate) res: io::Result<usize>,
    pub(crate) buf: Vec<u8>,
}

pub(crate) type RecvOp = Pin<Box<dyn Future<Output = RecvDone>>>;

/// A receive in flight, with the order its completion arrived in.
///
/// Several receives on one socket may be in flight; the kernel fills
/// them in the order it runs them, which need not be the order they were
/// submitted, and posts each completion right after filling it. spargio
/// wakes the operations in completion order, so the op's own waker
/// stamps that order and the driver handles ready receives by stamp:
/// handling them in any other order reorders the datagrams, which
/// quinn-proto takes for loss (spurious retransmits, congestion-window
/// cuts).
pub(crate) struct OrderedRecv {
    pub(crate) op: RecvOp,
    stamp: Arc<RecvStamp>,
    waker: Waker,
}

struct RecvStamp {
    /// 0 until woken; then the wake's position in the process-wide order.
    order: AtomicU64,
    /// The driver task's waker.
    task: Mutex<Option<Waker>>,
}

impl Wake for RecvStamp {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        // Relaxed: the stamp orders wakes that spargio makes in sequence
        // on the op's shard; the task reads it after being woken.
        let _ = self.order.compare_exchange(
            0,
            NEXT.fetch_add(1, Ordering::Relaxed),
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
        let task = self.task.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if let Some(w) = task {
            // The driver task's own (spargio) waker.
            w.wake();
        }
    }
}

impl OrderedRecv {
    fn new(op: RecvOp) -> OrderedRecv {
        let stamp = Arc::new(RecvStamp {
            order: AtomicU64::new(0),
            task: Mutex::new(None),
        });
        OrderedRecv {
            op,
            waker: Waker::from(stamp.clone()),
            stamp,
        }
    }

    /// Polls the receive on behalf of the task woken by `cx`.
    pub(crate) fn poll(&mut self, cx: &mut Context<'_>) -> Poll<RecvDone> {
        {
            let mut task = self.stamp.task.lock().unwrap_or_else(|e| e.into_inner());
            match &*task {
                Some(w) if w.will_wake(cx.waker()) => {}
                _ => *task = Some(cx.waker().clone()),
            }
        }
        self.op.as_mut().poll(&mut Context::from_waker(&self.waker))
    }

    /// When its completion was signalled (`u64::MAX` if never woken).
    pub(crate) fn order(&self) -> u64 {
        match self.stamp.order.load(Ordering::Relaxed) {
            0 => u64::MAX,
            n => n,
        }
    }
}
pub(crate) type SendOp = Pin<Box<dyn Future<Output = SendDone>>>;

/// Bytes one receive may carry without GRO (one datagram; quinn-proto's
/// largest UDP payload by default is 1472).
const RECV_SIZE: usize = 2048;
/// Bytes one receive may carry with GRO (the kernel coalesces up to 64
/// KiB).
const GRO_RECV_SIZE: usize = 64 * 1024;

/// Creates the (std) socket: `SO_REUSEPORT` if asked, larger kernel
/// buffers (best effort) and path-MTU probing (so quinn-proto's MTU
/// discovery sees real losses instead of fragmentation).
pub(crate) fn bind_socket(addr: SocketAddr, reuse_port: bool) -> io::Result<std::net::UdpSocket> {
    let socket = Socket::new(
        Domain::for_address(addr),
        Type::DGRAM.cloexec(),
        Some(Protocol::UDP),
    )?;
    if reuse_port {
        socket.set_reuse_port(true)?;
    }
    let _ = socket.set_recv_buffer_size(4 << 20);
    let _ = socket.set_send_buffer_size(4 << 20);
    set_pmtu_probe(&socket, addr.is_ipv4())?;
    // Non-blocking on purpose, though every receive and send goes through
    // the ring: with several receives in flight, one datagram wakes them
    // all, one takes it, and the kernel hands the losers (already polled
    // once) to an io-wq worker thread. On a blocking socket that worker
    // then sleeps in `recvmsg` and takes a later datagram through a thread
    // wake-up; that hop was half of a request/response round trip
    // (quic_rtt 58.8 -> 28.8 ms). Non-blocking, the worker's attempt ends
    // with EAGAIN at once and the driver re-arms that receive.
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    Ok(socket.into())
}

/// `IP(V6)_MTU_DISCOVER = PROBE`: set DF, never fragment locally, ignore
/// the kernel's cached path MTU (quinn-proto runs its own discovery).
fn set_pmtu_probe(socket: &Socket, v4: bool) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let (level, name, value) = if v4 {
        (
            libc::IPPROTO_IP,
            libc::IP_MTU_DISCOVER,
            libc::IP_PMTUDISC_PROBE,
        )
    } else {
        (
            libc::IPPROTO_IPV6,
            libc::IPV6_MTU_DISCOVER,
            libc::IPV6_PMTUDISC_PROBE,
        )
    };
    // SAFETY: `socket` is an open fd for the duration of the call; the
    // option value points to a live `c_int` and its exact size is passed.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            level,
            name,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

thread_local! {
    /// Per shard thread: each driver's socket for connection tasks on
    /// this shard (a `dup` of the driver's socket, its ring operations on
    /// this shard's ring). Weak: the fd closes when the last connection
    /// task of that driver on this shard ends.
    static SHARD_SOCKETS: RefCell<HashMap<u64, Weak<UdpIo>>> = RefCell::new(HashMap::new());
}

/// The socket connection tasks of driver `driver_id` on the calling shard
/// send with: the shard's live one, or a new `dup` of `src` (the driver's
/// socket) wrapped for this shard — so a connection costs no `dup` when
/// its shard already has one.
pub(crate) fn shard_socket(
    handle: &RuntimeHandle,
    driver_id: u64,
    src: &std::net::UdpSocket,
    offload: bool,
) -> io::Result<Rc<UdpIo>> {
    SHARD_SOCKETS.with(|m| {
        let mut m = m.borrow_mut();
        if let Some(live) = m.get(&driver_id).and_then(Weak::upgrade) {
            return Ok(live);
        }
        m.retain(|_, w| w.strong_count() > 0);
        let io = Rc::new(UdpIo::new(handle, src.try_clone()?, offload)?);
        m.insert(driver_id, Rc::downgrade(&io));
        Ok(io)
    })
}

/// The driver's socket (owned by the driver task on its shard).
pub(crate) struct UdpIo {
    sock: Rc<UdpSocket>,
    /// Segmentation offload requested (and GRO/ECN/pktinfo enabled).
    offload: bool,
    gro: bool,
}

impl UdpIo {
    /// Wraps `socket`; must run on the driver's shard so the socket's ring
    /// operations go to that shard's ring. With `offload`, turns on GRO,
    /// ECN and destination-address reporting where the kernel has them.
    pub(crate) fn new(
        handle: &RuntimeHandle,
        socket: std::net::UdpSocket,
        offload: bool,
    ) -> io::Result<UdpIo> {
        let sock = UdpSocket::from_std(handle, socket)?;
        let gro = offload && sock.enable_offload()?.gro;
        Ok(UdpIo {
            sock: Rc::new(sock),
            offload,
            gro,
        })
    }

    /// The most datagrams one send may carry now (1: no GSO; spargio
    /// turns GSO off for good if the device fails a segmented send).
    pub(crate) fn max_segments(&self) -> usize {
        if self.offload {
            self.sock.offload().max_gso_segments.max(1)
        } else {
            1
        }
    }

    /// A `dup` of the socket (the same socket, another fd) for another
    /// shard's connection tasks.
    pub(crate) fn dup(&self) -> io::Result<std::net::UdpSocket> {
        use std::os::fd::AsFd;
        Ok(std::net::UdpSocket::from(
            self.sock.as_fd().try_clone_to_owned()?,
        ))
    }

    /// Whether segmentation offload was requested.
    pub(crate) fn offload(&self) -> bool {
        self.offload
    }

    /// Whether receives may coalesce datagrams (GRO).
    pub(crate) fn gro(&self) -> bool {
        self.gro
    }

    /// Bytes a receive buffer needs.
    pub(crate) fn recv_size(&self) -> usize {
        if self.gro {
            GRO_RECV_SIZE
        } else {
            RECV_SIZE
        }
    }

    /// Starts a receive into `buf`'s spare capacity (`buf` must be empty
    /// with at least [`recv_size`](Self::recv_size) capacity).
    pub(crate) fn recv(&self, buf: BytesMut) -> OrderedRecv {
        let sock = self.sock.clone();
        OrderedRecv::new(Box::pin(async move {
            let (res, buf) = sock.recv_msg_owned(buf).await;
            RecvDone {
                res: res.map(RecvMeta::from),
                buf,
            }
        }))
    }

    /// Takes a datagram (or a GRO batch) already queued on the socket,
    /// without the ring; `WouldBlock` when none is (see
    /// `spargio::net::UdpSocket::try_recv_msg`).
    pub(crate) fn try_recv(&self, buf: BytesMut) -> RecvDone {
        let (res, buf) = self.sock.try_recv_msg(buf);
        RecvDone {
            res: res.map(RecvMeta::from),
            buf,
        }
    }

    /// Starts a send of `buf` to `dst` (one datagram, or GSO segments of
    /// `segment_size` when the socket supports it).
    pub(crate) fn send(
        &self,
        buf: Vec<u8>,
        dst: SocketAddr,
        segment_size: Option<usize>,
        ecn: Option<u8>,
    ) -> SendOp {
        let sock = self.sock.clone();
        // A "batch" of one datagram needs no UDP_SEGMENT control message.
        let segment_size = segment_size.filter(|&s| s < buf.len());
        Box::pin(async move {
            let (res, buf) = sock.send_msg_owned(buf, dst, segment_size, ecn).await;
            SendDone { res, buf }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pending_recv() -> OrderedRecv {
        OrderedRecv::new(Box::pin(std::future::pending()))
    }

    #[test]
    fn receives_are_ordered_by_completion_wake_not_submission() {
        let (a, b) = (pending_recv(), pending_recv());
        assert_eq!(a.order(), u64::MAX);
        // The later-submitted receive completes first.
        b.waker.wake_by_ref();
        a.waker.wake_by_ref();
        assert!(b.order() < a.order());
        // A second wake keeps the first stamp.
        let first = b.order();
        b.waker.wake_by_ref();
        assert_eq!(b.order(), first);
        let mut ready = [(a.order(), 'a'), (b.order(), 'b')];
        ready.sort_by_key(|r| r.0);
        assert_eq!(ready.map(|r| r.1), ['b', 'a']);
    }
}

//! Sockets on io_uring (`spargio::net`).
//!
//! Every stream has a *session shard* ([`StreamSessionPolicy`]): the ring
//! all its operations go to. From a task on that shard, an operation is
//! pushed straight into the ring; from anywhere else it crosses to the
//! shard through its inbox, and the completion wakes the task wherever it
//! runs. [`TcpStream::spawn_on_session`] pins a task to the session shard,
//! so a hot per-stream loop never crosses shards.
//!
//! Setup uses io_uring opcodes where the kernel has them (`SOCKET`,
//! `CONNECT`, `ACCEPT`, `SHUTDOWN`); `bind` and `listen` are immediate
//! syscalls through `socket2`. Host names are resolved on the blocking
//! pool, never on a shard; the `*_socket_addr` variants never resolve.
//!
//! Errors are the kernel's: `ConnectionRefused`, `ConnectionReset`,
//! `AddrInUse`, `BrokenPipe` (sends never raise `SIGPIPE`), and
//! `UnexpectedEof` from `read_exact` when the peer closes early.

mod addr;
mod datagram;
mod incoming;
mod segments;
mod session;
pub(crate) mod stream;
mod tcp;
mod udp;
mod unix;

pub use segments::{RecvPoolConfig, RecvSegment, RecvSegments};
pub use session::StreamSessionPolicy;
pub use tcp::{Incoming, TcpListener, TcpStream};
pub use udp::UdpSocket;
pub use unix::{UnixDatagram, UnixIncoming, UnixListener, UnixStream};

//! Sockets on io_uring (`spargio::net`).
//!
//! Every stream has a *session shard* ([`StreamSessionPolicy`]): the ring
//! all its operations go to. From a task on that shard, an operation is
//! pushed straight into the ring; from anywhere else it crosses to the
//! shard through its inbox, and the completion wakes the task wherever it
//! runs. [`TcpStream::spawn_on_session`] pins a task to the session shard,
//! so a hot per-stream loop never crosses shards.
//!
//! Owned-buffer I/O comes in two forms. The `*_owned` methods
//! (`recv_owned`, `send_owned`, `write_all_owned`, `read_exact_owned`, and
//! the datagram ones) return `io::Result<(usize, B)>` or `io::Result<B>`:
//! made for `?`, they drop the buffer when the operation fails. The
//! `*_buf` methods (`recv_buf`, `send_buf`, `write_all_buf`,
//! `read_exact_buf`, ...) are the same operations returning a
//! [`BufResult`](crate::buf::BufResult), which hands the buffer back in
//! every case: use them in loops that reuse one buffer across errors and
//! retries, or for buffers too valuable to lose (pooled, registered). The
//! [`io`](crate::io) traits are built on the `*_buf` form.
//!
//! **Cancel safety.** A stream receive (`recv`, `recv_owned`, `recv_buf`,
//! the [`io`](crate::io) read, [`Compat`](crate::io::Compat)'s reads) may
//! be dropped at any point, by a timeout or a `select!`: whatever the
//! kernel had already received for it goes to the stream's next receive,
//! in order. `read_exact` is not: bytes it already placed in its buffer go
//! with the dropped future, as with tokio's. Dropping a
//! [`RecvSegments`] stream drops the segments it had not handed out, and a
//! dropped datagram receive may take its one datagram with it.
//!
//! Constructors take the runtime's handle (`TcpListener::bind(&handle,
//! addr)`); inside a task, the `*_here` forms (`TcpListener::bind_here`,
//! `TcpStream::connect_here`, `UdpSocket::bind_here`,
//! `UnixListener::bind_here`, `UnixStream::connect_here`) use the runtime
//! the task runs on, as tokio's do.
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
mod ambient;
mod datagram;
mod incoming;
mod io_impls;
mod segments;
mod session;
pub(crate) mod stream;
mod tcp;
mod udp;
mod udp_offload;
mod unix;

pub(crate) use addr::{connect, socket};
pub(crate) use tcp::sock_addr;

pub use segments::{RecvPoolConfig, RecvSegment, RecvSegments};
pub use session::StreamSessionPolicy;
pub use tcp::{Incoming, TcpListener, TcpStream};
pub use udp::UdpSocket;
pub use udp_offload::{UdpOffload, UdpRecvMeta};
pub use unix::{UnixDatagram, UnixIncoming, UnixListener, UnixStream};

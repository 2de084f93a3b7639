//! Address resolution and socket setup shared by the socket types.

use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::os::fd::OwnedFd;

use crate::fs::{blocking, unsupported};
use crate::op::connect::Connect;
use crate::op::socket::Socket;
use crate::op::{Lane, Op, SharedFd};
use crate::shard_id::ShardId;
use crate::RuntimeHandle;

/// Resolves `addr` on the blocking pool (DNS may block; a shard never
/// does). A literal address resolves without a thread hop.
pub(crate) async fn resolve<A>(handle: &RuntimeHandle, addr: A) -> io::Result<Vec<SocketAddr>>
where
    A: ToSocketAddrs + Send + 'static,
    A::Iter: Send,
{
    let addrs: Vec<SocketAddr> = blocking(handle, move || {
        addr.to_socket_addrs().map(Iterator::collect)
    })
    .await?;
    if addrs.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "the address resolved to nothing",
        ));
    }
    Ok(addrs)
}

/// A new socket, through `IORING_OP_SOCKET` on `shard`'s ring, or
/// `socket(2)` on kernels without the opcode.
pub(crate) async fn socket(
    handle: &RuntimeHandle,
    shard: ShardId,
    domain: socket2::Domain,
    ty: socket2::Type,
) -> io::Result<OwnedFd> {
    let op = Socket {
        domain: domain.into(),
        ty: ty.into(),
        protocol: 0,
    };
    match Op::submit(&handle.shared, Lane::Shard(shard), op).await {
        Err(e) if unsupported(&e) => {
            let s = socket2::Socket::new(domain, ty.cloexec(), None)?;
            Ok(OwnedFd::from(s))
        }
        res => res,
    }
}

/// `IORING_OP_CONNECT` on `shard`'s ring.
pub(crate) async fn connect(
    handle: &RuntimeHandle,
    shard: ShardId,
    fd: &SharedFd,
    addr: socket2::SockAddr,
) -> io::Result<()> {
    let op = Connect {
        fd: fd.clone(),
        addr: Box::new(addr),
    };
    Op::submit(&handle.shared, Lane::Shard(shard), op).await
}

/// Tries each address in turn, returning the first success or the last
/// error (as `std::net::TcpStream::connect` does).
pub(crate) async fn first_ok<T, F, Fut>(addrs: Vec<SocketAddr>, mut f: F) -> io::Result<T>
where
    F: FnMut(SocketAddr) -> Fut,
    Fut: std::future::Future<Output = io::Result<T>>,
{
    let mut last = None;
    for addr in addrs {
        match f(addr).await {
            Ok(v) => return Ok(v),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no addresses")))
}

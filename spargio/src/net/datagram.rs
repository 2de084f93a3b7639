//! The I/O shared by UDP and Unix datagram sockets.

use std::io;

use crate::buf::{BufResult, IoBuf, IoBufMut};
use crate::op::recv::Recv;
use crate::op::recvmsg::RecvFrom;
use crate::op::send::Send as SendOp;
use crate::op::sendmsg::SendTo;
use crate::op::{Lane, Op, OpKind, SharedFd};
use crate::shard_id::ShardId;
use crate::RuntimeHandle;

/// A datagram socket and the shard whose ring its operations use.
#[derive(Debug)]
pub(crate) struct DatagramCore {
    pub(crate) fd: SharedFd,
    pub(crate) session: ShardId,
    pub(crate) handle: RuntimeHandle,
}

impl DatagramCore {
    fn submit<K: OpKind>(&self, op: K) -> Op<K> {
        Op::submit(&self.handle.shared, Lane::Shard(self.session), op)
    }

    pub(crate) async fn connect(&self, addr: socket2::SockAddr) -> io::Result<()> {
        super::addr::connect(&self.handle, self.session, &self.fd, addr).await
    }

    pub(crate) async fn send_owned<B: IoBuf>(&self, buf: B) -> BufResult<usize, B> {
        self.submit(SendOp {
            fd: self.fd.clone(),
            buf,
        })
        .await
    }

    pub(crate) async fn recv_owned<B: IoBufMut>(&self, buf: B) -> BufResult<usize, B> {
        self.submit(Recv {
            fd: self.fd.clone(),
            buf,
            carry: false,
            poll_first: false,
        })
        .await
    }

    pub(crate) async fn send_to_owned<B: IoBuf>(
        &self,
        buf: B,
        addr: &socket2::SockAddr,
    ) -> BufResult<usize, B> {
        self.submit(SendTo::new(self.fd.clone(), buf, addr)).await
    }

    pub(crate) async fn recv_from_owned<B: IoBufMut>(
        &self,
        buf: B,
    ) -> BufResult<(usize, socket2::SockAddr), B> {
        self.submit(RecvFrom::new(self.fd.clone(), buf)).await
    }
}

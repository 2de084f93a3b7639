//! Native operations with no fixed shard: [`UringNativeAny`] (file and
//! stream ops, path ops in `path_ops.rs`, shard-aimed stream ops and
//! socket setup in `stream_ops.rs`), the lane selector, fd leases, and the
//! unsafe extension lane. The safe `spargio::extension::fs` wrappers (statx,
//! directory entries) live in `fs/`.

mod fd;
mod lease;
mod multishot;
mod path_ops;
mod stream_ops;

use std::future::Future;
use std::io;
use std::time::Duration;

use io_uring::squeue;

use crate::buf::{BufResult, IoBuf, IoBufMut};
use crate::fs::check_offset;
use crate::net::stream::StreamCore;
use crate::op::fsync::Fsync;
use crate::op::read::ReadAt;
use crate::op::timeout::Timeout;
use crate::op::unsafe_op::UnsafeOp;
use crate::op::write::WriteAt;
use crate::op::{Lane, Op, OpKind};
use crate::scheduler::choose_op_lane;
use crate::shard_id::ShardId;
use crate::RuntimeHandle;

pub use crate::op::unsafe_op::UringCqe;
pub use fd::NativeFd;
use lease::Lease;
pub use multishot::{UringRecvMultishotSegments, UringRecvSegment};

/// Entry point to native io_uring operations that are not tied to a shard.
///
/// * **Lane selection.** Each operation goes, at submission, to the ring
///   with the fewest operations in flight; ties go to the calling shard,
///   then to an awake shard, then round-robin. A preferred shard
///   ([`with_preferred_shard`](UringNativeAny::with_preferred_shard)) wins
///   while its depth is within the steering margin of the best.
/// * **Fd leases.** File operations (`read_at`, `write_at`, `fsync`) are
///   steered one by one. Stream operations (`send*`, `recv*`) take a strong
///   lease: while any is in flight on an fd, the next one goes to the same
///   ring, so their order is kept.
/// * **Routing.** An operation's future remembers its ring and op-table
///   slot; dropping it cancels the operation on that ring, from any thread.
///
/// Operations take a [`NativeFd`], which keeps the fd open until every
/// operation that used it has completed — even one whose future was
/// dropped — so an fd number is never reused under an operation.
///
/// ```
/// # spargio::block_on(spargio::run(|handle| async move {
/// use spargio::NativeFd;
///
/// let native = handle.uring_native_unbound();
/// let fd = NativeFd::from(std::fs::File::open("/proc/self/stat").unwrap());
/// let bytes = native.read_at(&fd, 0, 64).await.unwrap();
/// assert!(!bytes.is_empty());
/// # })).unwrap();
/// ```
#[derive(Clone, Debug)]
pub struct UringNativeAny {
    pub(crate) handle: RuntimeHandle,
    preferred: Option<ShardId>,
}

impl UringNativeAny {
    pub(crate) fn new(handle: RuntimeHandle) -> UringNativeAny {
        UringNativeAny {
            handle,
            preferred: None,
        }
    }

    /// A copy that prefers `shard` when loads are close.
    pub fn with_preferred_shard(&self, shard: ShardId) -> UringNativeAny {
        UringNativeAny {
            handle: self.handle.clone(),
            preferred: Some(shard),
        }
    }

    pub(crate) fn lane(&self) -> Lane {
        Lane::Any {
            preferred: self.preferred,
        }
    }

    fn submit<K: OpKind>(&self, lane: Lane, op: K) -> Op<K> {
        Op::submit(&self.handle.shared, lane, op)
    }

    /// On epoll, what `submit_unsafe` says of an opcode it cannot run.
    fn epoll_note(&self) -> Option<crate::op::unsafe_op::EpollNote> {
        (self.handle.backend() == crate::BackendKind::Epoll)
            .then(|| crate::op::unsafe_op::EpollNote(self.handle.clone()))
    }

    /// The ring the selector would pick now.
    pub fn select_shard(&self) -> ShardId {
        let shared = &self.handle.shared;
        let current = crate::scheduler::context::current_shard(shared);
        choose_op_lane(shared, current, self.preferred)
    }

    /// `fd` as a stream on its leased ring (strong lease, held by the
    /// caller while its operation runs).
    fn leased_stream(&self, fd: &NativeFd) -> (Lease, StreamCore) {
        let (lease, session) = Lease::acquire(fd.shared(), || self.select_shard());
        let stream = StreamCore {
            fd: fd.shared().clone(),
            session,
            handle: self.handle.clone(),
        };
        (lease, stream)
    }

    /// Native operations in flight on every ring (submitted, final CQE not
    /// yet reaped), this handle's or not.
    pub fn active_native_op_count(&self) -> usize {
        self.handle
            .shared
            .shards
            .iter()
            .map(|s| s.ops.pending())
            .sum()
    }

    /// The ring `fd`'s stream operations are leased to right now, if any
    /// is in flight.
    pub fn leased_shard(&self, fd: &NativeFd) -> Option<ShardId> {
        Lease::current(fd.shared())
    }

    /// Reads up to `len` bytes at `offset` into a new buffer.
    pub async fn read_at(&self, fd: &NativeFd, offset: u64, len: usize) -> io::Result<Vec<u8>> {
        let (res, buf) = self.read_at_into(fd, offset, Vec::with_capacity(len)).await;
        res.map(|_| buf)
    }

    /// Reads into `buf` at `offset` (filling from its first byte up to its
    /// capacity); returns the count and the buffer.
    pub async fn read_at_into<B: IoBufMut>(
        &self,
        fd: &NativeFd,
        offset: u64,
        buf: B,
    ) -> BufResult<usize, B> {
        if let Err(err) = check_offset(offset, buf.bytes_total()) {
            return (Err(err), buf);
        }
        let op = ReadAt {
            fd: fd.shared().clone(),
            buf,
            offset,
        };
        self.submit(self.lane(), op).await
    }

    /// Writes `buf`'s bytes at `offset` (once; the count may be short).
    pub async fn write_at<B: IoBuf>(
        &self,
        fd: &NativeFd,
        offset: u64,
        buf: B,
    ) -> BufResult<usize, B> {
        if let Err(err) = check_offset(offset, buf.bytes_init()) {
            return (Err(err), buf);
        }
        let op = WriteAt {
            fd: fd.shared().clone(),
            buf,
            offset,
        };
        self.submit(self.lane(), op).await
    }

    /// Flushes the file to its device (`fsync(2)`).
    pub async fn fsync(&self, fd: &NativeFd) -> io::Result<()> {
        let op = Fsync {
            fd: fd.shared().clone(),
            data_only: false,
        };
        self.submit(self.lane(), op).await
    }

    /// Sleeps for `duration` with an `IORING_OP_TIMEOUT` on the selected
    /// ring. (The runtime's timer wheel, [`crate::sleep`], is cheaper for
    /// most uses: it costs no SQE.) A duration past the kernel's timespec
    /// (`Duration::MAX`) saturates: it never ends.
    pub async fn sleep(&self, duration: Duration) -> io::Result<()> {
        // The kernel's `tv_sec` is signed: `Duration::MAX`'s seconds read
        // as -1, refused with `EINVAL`.
        let duration = duration.min(Duration::from_secs(i64::MAX as u64));
        self.submit(self.lane(), Timeout::new(duration)).await
    }

    /// Receives up to `len` bytes from a socket into a new buffer. Empty
    /// means the peer closed its side.
    pub async fn recv(&self, fd: &NativeFd, len: usize) -> io::Result<Vec<u8>> {
        let (res, buf) = self.recv_buf(fd, Vec::with_capacity(len)).await;
        res.map(|_| buf)
    }

    /// Receives into `buf` (from its first byte up to its capacity);
    /// returns the count and the buffer. On error the buffer is dropped:
    /// [`recv_buf`](Self::recv_buf) keeps it.
    pub async fn recv_owned<B: IoBufMut>(&self, fd: &NativeFd, buf: B) -> io::Result<(usize, B)> {
        let (res, buf) = self.recv_buf(fd, buf).await;
        res.map(|n| (n, buf))
    }

    /// [`recv_owned`](Self::recv_owned), handing the buffer back whatever
    /// happens ([`BufResult`]): the form for loops that reuse one buffer.
    pub async fn recv_buf<B: IoBufMut>(&self, fd: &NativeFd, buf: B) -> BufResult<usize, B> {
        let (_lease, stream) = self.leased_stream(fd);
        stream.recv_owned(buf).await
    }

    /// Sends a copy of `data` (once; the count may be short).
    pub async fn send(&self, fd: &NativeFd, data: &[u8]) -> io::Result<usize> {
        self.send_buf(fd, data.to_vec()).await.0
    }

    /// Sends `buf`'s bytes (once; the count may be short); returns the
    /// count and the buffer. A closed peer is `BrokenPipe` (no `SIGPIPE`).
    /// On error the buffer is dropped: [`send_buf`](Self::send_buf) keeps
    /// it.
    pub async fn send_owned<B: IoBuf>(&self, fd: &NativeFd, buf: B) -> io::Result<(usize, B)> {
        let (res, buf) = self.send_buf(fd, buf).await;
        res.map(|n| (n, buf))
    }

    /// [`send_owned`](Self::send_owned), handing the buffer back whatever
    /// happens ([`BufResult`]).
    pub async fn send_buf<B: IoBuf>(&self, fd: &NativeFd, buf: B) -> BufResult<usize, B> {
        let (_lease, stream) = self.leased_stream(fd);
        stream.send_owned(buf).await
    }

    /// Sends every buffer completely, in order: up to `window` buffers at a
    /// time go out in one gathering `sendmsg` (one operation, one
    /// completion; `window` is clamped to 1..=1024), which the kernel
    /// retries internally until every byte is taken (`MSG_WAITALL`). A
    /// send that still stops short resumes from the first byte not taken.
    /// Returns the total and the buffers; on error, the buffers and the
    /// error (how much went out is not reported then: a stream that failed
    /// mid-batch is not worth resuming).
    pub async fn send_all_batch<B: IoBuf>(
        &self,
        fd: &NativeFd,
        bufs: Vec<B>,
        window: usize,
    ) -> BufResult<usize, Vec<B>> {
        let (_lease, stream) = self.leased_stream(fd);
        stream.send_all_batch(bufs, window).await
    }

    /// Submits a caller-built SQE on the selected ring.
    ///
    /// `state` is moved into the operation; `build` runs once, right away,
    /// and returns the SQE (its `user_data` is replaced by the runtime's);
    /// `decode` gets the raw completion (or the error that kept the
    /// operation from reaching the kernel, e.g. shutdown) and the state
    /// back. If the future is dropped first, `state` is kept alive until
    /// the kernel's final completion and the operation is cancelled with
    /// `ASYNC_CANCEL`.
    ///
    /// # Safety
    ///
    /// The caller guarantees, for the SQE `build` returns:
    ///
    /// * every address in it points into heap memory owned by `state` that
    ///   does not move when `state` is moved (a `Box`, `Vec`, `CString`
    ///   ...), or into memory that outlives the operation (`'static`);
    /// * that memory is not otherwise accessed while the kernel may use it
    ///   (i.e. `decode` is the first to look at it);
    /// * any fd it names stays open until the completion (hold a
    ///   [`NativeFd`] clone in `state`);
    /// * the opcode posts exactly one completion (no multishot, no
    ///   `SEND_ZC` notification) and does not use fixed buffers/files the
    ///   runtime did not register;
    /// * if the future may be dropped after the kernel completed the
    ///   operation, `decode` still runs (on whatever thread reaps it) and
    ///   its output is dropped: return owning types (`OwnedFd`, not a raw
    ///   fd) so what the operation produced is given back.
    ///
    /// Checked, not trusted: SQEs that would act on the runtime's own
    /// requests or kernel state (`MSG_RING`, `ASYNC_CANCEL`, `POLL_REMOVE`,
    /// `TIMEOUT_REMOVE`, `LINK_TIMEOUT`, `PROVIDE_BUFFERS`,
    /// `REMOVE_BUFFERS`) or that use `IOSQE_BUFFER_SELECT`,
    /// `IOSQE_CQE_SKIP_SUCCESS` or links are refused with `InvalidInput`
    /// before they reach the kernel. A completion with `IORING_CQE_F_MORE`
    /// never ends the operation: its state is kept until the last one.
    ///
    /// See `examples/native_extension_statx.rs` and the safe wrappers in
    /// [`crate::extension::fs`].
    pub unsafe fn submit_unsafe<S, B, D, T>(
        &self,
        state: S,
        build: B,
        decode: D,
    ) -> impl Future<Output = io::Result<T>> + std::marker::Send + 'static
    where
        S: std::marker::Send + 'static,
        B: FnOnce(&mut S) -> squeue::Entry + std::marker::Send + 'static,
        D: FnOnce(io::Result<UringCqe>, S) -> io::Result<T> + std::marker::Send + 'static,
        T: 'static,
    {
        self.submit(
            self.lane(),
            UnsafeOp::new(state, build, decode, self.epoll_note()),
        )
    }

    /// [`submit_unsafe`](UringNativeAny::submit_unsafe) on an explicit
    /// shard's ring.
    ///
    /// # Safety
    ///
    /// As for [`submit_unsafe`](UringNativeAny::submit_unsafe).
    pub unsafe fn submit_unsafe_on_shard<S, B, D, T>(
        &self,
        shard: ShardId,
        state: S,
        build: B,
        decode: D,
    ) -> impl Future<Output = io::Result<T>> + std::marker::Send + 'static
    where
        S: std::marker::Send + 'static,
        B: FnOnce(&mut S) -> squeue::Entry + std::marker::Send + 'static,
        D: FnOnce(io::Result<UringCqe>, S) -> io::Result<T> + std::marker::Send + 'static,
        T: 'static,
    {
        self.submit(
            Lane::Shard(shard),
            UnsafeOp::new(state, build, decode, self.epoll_note()),
        )
    }
}

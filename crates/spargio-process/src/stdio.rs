//! The parent's ends of the child's stdio pipes, read and written on the
//! ring.
//!
//! `std::process::Command` makes the pipes (`pipe2(O_CLOEXEC)`); the
//! parent's ends are taken out of the std `Child` and kept *blocking*.
//! That is what io_uring wants: a read or write on a pipe is first tried
//! without blocking inside the kernel and, if the pipe is empty (or full),
//! parked on the pipe's internal poll until it is ready, with no thread
//! blocked. An `O_NONBLOCK` fd would instead complete with `EAGAIN`.
//!
//! Each read or write is one `IORING_OP_READ`/`WRITE` at offset 0 through
//! [`UringNativeAny`]: a pipe is a stream (`FMODE_STREAM`), so the kernel
//! ignores the offset. At most one operation per stream is in flight (the
//! methods take `&mut self`), so bytes stay in order whichever ring each
//! operation lands on.
//!
//! Two interfaces, one stream: the owned-buffer
//! [`spargio::io::AsyncRead`]/[`AsyncWrite`](spargio::io::AsyncWrite)
//! traits, and the poll-based `futures_io` (and, with `tokio-io`, tokio)
//! traits through the state kept in `compat.rs`. Mixing them is safe: an
//! owned-buffer read first hands out bytes the poll side already
//! received, and an owned-buffer write first waits for the poll side's
//! write-behind.

use std::future::{poll_fn, Future};
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::process::Stdio;

use spargio::buf::{BufResult, IoBuf, IoBufMut};
use spargio::{NativeFd, RuntimeHandle, UringNativeAny};

use crate::compat::{PollReader, PollWriter};

/// One end of a pipe and the ring lane its operations go through.
#[derive(Clone, Debug)]
pub(crate) struct Pipe {
    pub(crate) native: UringNativeAny,
    pub(crate) fd: NativeFd,
}

impl Pipe {
    fn new(handle: &RuntimeHandle, fd: OwnedFd) -> Pipe {
        Pipe {
            native: handle.uring_native_unbound(),
            fd: NativeFd::new(fd),
        }
    }

    fn borrow_fd(&self) -> BorrowedFd<'_> {
        // SAFETY: the fd is open for as long as `self.fd` (which owns a
        // reference to it) lives, and the borrow is tied to `self`.
        unsafe { BorrowedFd::borrow_raw(self.fd.as_raw_fd()) }
    }
}

fn closed_stdin() -> io::Error {
    io::Error::new(io::ErrorKind::BrokenPipe, "the child's stdin was shut down")
}

// ===== impl ChildStdin =====

/// The child's standard input: write to it, then drop it or call
/// [`shutdown`](spargio::io::AsyncWrite::shutdown) so the child reads end
/// of file.
///
/// Writes go through the ring ([`spargio::io::AsyncWrite`], owned
/// buffers) or through `futures_io::AsyncWrite` (and `tokio::io::AsyncWrite`
/// with the `tokio-io` feature), which copy into an internal buffer and
/// write behind: flush or close to see the last write's error.
///
/// ```
/// # spargio::block_on(spargio::run(|handle| async move {
/// use std::process::Stdio;
/// use spargio::io::AsyncWriteExt;
/// use spargio_process::CommandBuilder;
///
/// let mut child = CommandBuilder::new("cat")
///     .stdin(Stdio::piped())
///     .stdout(Stdio::piped())
///     .spawn(&handle)
///     .unwrap();
/// let mut stdin = child.stdin.take().unwrap();
/// stdin.write_all(b"meow".to_vec()).await.0.unwrap();
/// drop(stdin); // end of file for `cat`
/// let out = child.output().await.unwrap();
/// assert_eq!(out.stdout, b"meow");
/// # })).unwrap();
/// ```
#[derive(Debug)]
pub struct ChildStdin {
    /// `None` once shut down.
    pipe: Option<Pipe>,
    pub(crate) poll: PollWriter,
}

impl ChildStdin {
    pub(crate) fn new(handle: &RuntimeHandle, stdin: std::process::ChildStdin) -> ChildStdin {
        ChildStdin {
            pipe: Some(Pipe::new(handle, OwnedFd::from(stdin))),
            poll: PollWriter::new(),
        }
    }

    /// Wraps a std `ChildStdin` (e.g. from a child spawned by
    /// `std::process::Command`), so it is written through `handle`'s rings.
    pub fn from_std(handle: impl AsRef<RuntimeHandle>, stdin: std::process::ChildStdin) -> Self {
        ChildStdin::new(handle.as_ref(), stdin)
    }

    pub(crate) fn pipe(&self) -> io::Result<&Pipe> {
        self.pipe.as_ref().ok_or_else(closed_stdin)
    }

    /// Closes the pipe (the poll side's pending write, if any, must have
    /// been flushed by the caller).
    pub(crate) fn close(&mut self) {
        self.pipe = None;
    }
}

impl spargio::io::AsyncWrite for ChildStdin {
    async fn write<B: IoBuf>(&mut self, buf: B) -> BufResult<usize, B> {
        if let Err(e) = poll_fn(|cx| self.poll_flush_inner(cx)).await {
            return (Err(e), buf);
        }
        match &self.pipe {
            Some(pipe) => pipe.native.write_at(&pipe.fd, 0, buf).await,
            None => (Err(closed_stdin()), buf),
        }
    }

    fn flush(&mut self) -> impl Future<Output = io::Result<()>> + Send {
        poll_fn(|cx| self.poll_flush_inner(cx))
    }

    /// Flushes, then closes the pipe: the child reads end of file. Writes
    /// after this fail with `BrokenPipe`.
    fn shutdown(&mut self) -> impl Future<Output = io::Result<()>> + Send {
        poll_fn(|cx| self.poll_close_inner(cx))
    }
}

// ===== impl ChildStdout / ChildStderr =====

macro_rules! reader {
    ($name:ident, $std:ty, $what:literal) => {
        #[doc = concat!("The child's standard ", $what, ", read through the ring.")]
        ///
        /// Read it with [`spargio::io::AsyncRead`] (owned buffers; `Ok(0)`
        /// is end of file) or through `futures_io::AsyncRead` (and
        /// `tokio::io::AsyncRead` with the `tokio-io` feature), which keep
        /// the read in flight inside the stream, so a poll abandoned by
        /// `select!` loses no byte.
        #[derive(Debug)]
        pub struct $name {
            pub(crate) pipe: Pipe,
            pub(crate) poll: PollReader,
        }

        impl $name {
            pub(crate) fn new(handle: &RuntimeHandle, std: $std) -> $name {
                $name {
                    pipe: Pipe::new(handle, OwnedFd::from(std)),
                    poll: PollReader::new(),
                }
            }

            #[doc = concat!("Wraps a std `", stringify!($name), "`, so it is read through `handle`'s rings.")]
            pub fn from_std(handle: impl AsRef<RuntimeHandle>, std: $std) -> $name {
                $name::new(handle.as_ref(), std)
            }
        }

        impl spargio::io::AsyncRead for $name {
            async fn read<B: IoBufMut>(&mut self, buf: B) -> BufResult<usize, B> {
                if self.poll.is_idle() {
                    return self.pipe.native.read_at_into(&self.pipe.fd, 0, buf).await;
                }
                read_from_poll_side(&mut self.poll, &self.pipe, buf).await
            }
        }

        impl AsFd for $name {
            fn as_fd(&self) -> BorrowedFd<'_> {
                self.pipe.borrow_fd()
            }
        }

        impl AsRawFd for $name {
            fn as_raw_fd(&self) -> RawFd {
                self.pipe.fd.as_raw_fd()
            }
        }
    };
}

reader!(ChildStdout, std::process::ChildStdout, "output");
reader!(ChildStderr, std::process::ChildStderr, "error");

/// An owned-buffer read served from the poll side's buffered bytes (or
/// its read in flight), so bytes stay in order when both interfaces are
/// used on one stream.
async fn read_from_poll_side<B: IoBufMut>(
    poll: &mut PollReader,
    pipe: &Pipe,
    mut buf: B,
) -> BufResult<usize, B> {
    let res = poll_fn(|cx| {
        let total = buf.bytes_total();
        let ptr = buf.stable_mut_ptr().cast::<MaybeUninit<u8>>();
        // SAFETY: `IoBufMut` promises `ptr` is valid for writes of `total`
        // bytes while `buf` is borrowed (here, mutably, for this call);
        // `MaybeUninit` makes no claim that they are initialized.
        let out = unsafe { std::slice::from_raw_parts_mut(ptr, total) };
        poll.poll_read_uninit(cx, pipe, out)
    })
    .await;
    if let Ok(n) = res {
        // SAFETY: `poll_read_uninit` initialized the first `n <= total`
        // bytes.
        unsafe { buf.set_init(n) };
    }
    (res, buf)
}

impl AsFd for ChildStdin {
    /// The pipe's fd.
    ///
    /// # Panics
    ///
    /// After [`shutdown`](spargio::io::AsyncWrite::shutdown), which closed
    /// it.
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.pipe.as_ref().expect("stdin was shut down").borrow_fd()
    }
}

impl AsRawFd for ChildStdin {
    /// The pipe's fd, or -1 after shutdown.
    fn as_raw_fd(&self) -> RawFd {
        self.pipe.as_ref().map_or(-1, |p| p.fd.as_raw_fd())
    }
}

// ===== into Stdio: handing a pipe to another child =====

fn into_stdio(pipe: &Pipe, idle: bool) -> io::Result<Stdio> {
    if !idle {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "the stream holds bytes (or an operation) of the poll-based traits",
        ));
    }
    // A duplicate: our end closes when `pipe` drops (once no operation
    // uses it any more), the next child gets its own.
    Ok(Stdio::from(pipe.borrow_fd().try_clone_to_owned()?))
}

/// The pipe as another child's stdio, to connect two children directly
/// (`a | b`), as `tokio::process` allows. `InvalidInput` if the poll-based
/// traits left bytes in the stream.
impl TryFrom<ChildStdout> for Stdio {
    type Error = io::Error;

    fn try_from(stdout: ChildStdout) -> io::Result<Stdio> {
        into_stdio(&stdout.pipe, stdout.poll.is_idle())
    }
}

/// The pipe as another child's stdio (see `TryFrom<ChildStdout>`).
impl TryFrom<ChildStderr> for Stdio {
    type Error = io::Error;

    fn try_from(stderr: ChildStderr) -> io::Result<Stdio> {
        into_stdio(&stderr.pipe, stderr.poll.is_idle())
    }
}

/// The pipe as another child's stdout or stderr (see
/// `TryFrom<ChildStdout>`). `InvalidInput` if a poll-based write is still
/// in flight (flush first); `BrokenPipe` after shutdown.
impl TryFrom<ChildStdin> for Stdio {
    type Error = io::Error;

    fn try_from(stdin: ChildStdin) -> io::Result<Stdio> {
        into_stdio(stdin.pipe()?, stdin.poll.is_idle())
    }
}

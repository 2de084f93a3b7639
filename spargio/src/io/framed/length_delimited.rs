//! `LengthDelimited`: the frame codec over a stream.

use std::io;

use super::codec::{FrameConfig, FrameDecoder};
use crate::buf::{BufResult, IoBuf};
use crate::io::{AsyncRead, AsyncWrite, AsyncWriteExt};

/// Size of the reused read buffer: one read can carry many small frames.
const READ_BUF_LEN: usize = 32 << 10;

/// Owned frames up to this size are copied behind their header and sent in
/// one write; larger ones go as header, then payload, without a copy.
const COPY_FRAME_MAX: usize = 16 << 10;

/// The write buffer is kept between frames up to this capacity, so one
/// large frame does not pin its size for the connection's life.
const WRITE_BUF_KEEP: usize = 64 << 10;

/// Length-prefixed frames over a stream `T`: [`write_frame`] sends one,
/// [`read_frame`] receives one. The format and its limits are in the
/// [module docs](super); [`FrameConfig`] changes them.
///
/// Reads go through one reused buffer ([`FrameDecoder`] does the parsing),
/// so a stream of small frames costs about one read per 32 KiB.
///
/// Like any completion-based reader, a `read_frame` dropped while its read
/// is in flight loses the bytes that read receives, and the stream is then
/// out of step: abandon the connection rather than retry.
///
/// ```
/// # spargio::block_on(spargio::run(|handle| async move {
/// use spargio::io::framed::LengthDelimited;
/// use spargio::net::{TcpListener, TcpStream};
///
/// let listener = TcpListener::bind_socket_addr(&handle, "127.0.0.1:0".parse().unwrap()).unwrap();
/// let addr = listener.local_addr().unwrap();
/// let server = handle.spawn_stealable(async move {
///     let (stream, _) = listener.accept().await.unwrap();
///     let mut frames = LengthDelimited::new(stream);
///     let mut got = Vec::new();
///     while let Some(frame) = frames.read_frame().await.unwrap() {
///         got.push(frame);
///     }
///     got
/// }).unwrap();
///
/// let stream = TcpStream::connect_socket_addr(&handle, addr).await.unwrap();
/// let mut frames = LengthDelimited::new(stream);
/// frames.write_frame(b"hello").await.unwrap();
/// frames.write_frame(b"").await.unwrap();
/// frames.write_frame_owned(vec![7u8; 100_000]).await.0.unwrap();
/// frames.shutdown().await.unwrap();
///
/// let got = server.await.unwrap();
/// assert_eq!(got.len(), 3);
/// assert_eq!(got[0], b"hello");
/// assert!(got[1].is_empty());
/// assert_eq!(got[2], vec![7u8; 100_000]);
/// # })).unwrap();
/// ```
///
/// [`write_frame`]: LengthDelimited::write_frame
/// [`read_frame`]: LengthDelimited::read_frame
#[derive(Debug)]
pub struct LengthDelimited<T> {
    io: T,
    decoder: FrameDecoder,
    /// Bytes read but not yet decoded are `read_buf[read_pos..]`.
    read_buf: Vec<u8>,
    read_pos: usize,
    write_buf: Vec<u8>,
}

impl<T> LengthDelimited<T> {
    /// Frames over `io` in the default format (4-byte big-endian length,
    /// 8 MiB limit).
    pub fn new(io: T) -> LengthDelimited<T> {
        LengthDelimited::with_config(io, FrameConfig::default())
    }

    /// Frames over `io` in the given format.
    pub fn with_config(io: T, config: FrameConfig) -> LengthDelimited<T> {
        LengthDelimited {
            io,
            decoder: FrameDecoder::new(config),
            read_buf: Vec::new(),
            read_pos: 0,
            write_buf: Vec::new(),
        }
    }

    /// The frame format.
    pub fn config(&self) -> FrameConfig {
        self.decoder.config()
    }

    /// The decoder's state (is a frame partly received, how much memory
    /// does it hold).
    pub fn decoder(&self) -> &FrameDecoder {
        &self.decoder
    }

    /// The underlying stream.
    pub fn get_ref(&self) -> &T {
        &self.io
    }

    /// The underlying stream, mutably. Reading or writing it directly
    /// breaks the framing unless done at a frame boundary.
    pub fn get_mut(&mut self) -> &mut T {
        &mut self.io
    }

    /// The underlying stream back. Bytes read but not yet decoded, and any
    /// partly received frame, are dropped.
    pub fn into_inner(self) -> T {
        self.io
    }
}

impl<T: AsyncRead> LengthDelimited<T> {
    /// Receives the next frame. `Ok(None)` when the stream ends cleanly at
    /// a frame boundary.
    ///
    /// Errors: `UnexpectedEof` if it ends inside a frame; `InvalidData` for
    /// a declared length above the limit (raised before anything is
    /// allocated for it, and for every later call); the stream's own errors.
    pub async fn read_frame(&mut self) -> io::Result<Option<Vec<u8>>> {
        loop {
            // Always consult the decoder, even with nothing buffered: it
            // reports an earlier failure.
            let mut input = &self.read_buf[self.read_pos..];
            let decoded = self.decoder.decode(&mut input);
            self.read_pos = self.read_buf.len() - input.len();
            if let Some(frame) = decoded? {
                return Ok(Some(frame));
            }
            // The decoder used up the buffer without completing a frame.
            if self.fill().await? == 0 {
                self.decoder.decode_eof()?;
                return Ok(None);
            }
        }
    }

    /// Replaces the (fully decoded) read buffer with one read's bytes;
    /// returns the count (0: end of stream).
    async fn fill(&mut self) -> io::Result<usize> {
        let mut buf = std::mem::take(&mut self.read_buf);
        self.read_pos = 0;
        if buf.capacity() == 0 {
            // First read, or the last one was dropped in flight.
            buf = Vec::with_capacity(READ_BUF_LEN);
        }
        loop {
            // A read fills from the first byte: the count becomes the length.
            buf.clear();
            let (res, filled) = self.io.read(buf).await;
            buf = filled;
            match res {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                res => {
                    self.read_buf = buf;
                    return res;
                }
            }
        }
    }
}

impl<T: AsyncWrite> LengthDelimited<T> {
    /// Sends one frame: its header and a copy of `frame`, in one write.
    /// A frame above the limit is `InvalidInput` and nothing is sent.
    ///
    /// [`write_frame_owned`](LengthDelimited::write_frame_owned) avoids the
    /// copy for large frames.
    pub async fn write_frame(&mut self, frame: impl AsRef<[u8]>) -> io::Result<()> {
        let mut buf = std::mem::take(&mut self.write_buf);
        buf.clear();
        let encoded = self.config().encode(frame.as_ref(), &mut buf);
        let res = match encoded {
            Ok(()) => {
                let (res, written) = self.io.write_all(buf).await;
                buf = written;
                res
            }
            Err(e) => Err(e),
        };
        self.keep_write_buf(buf);
        res
    }

    /// Sends one frame from an owned buffer (its initialized bytes) and
    /// returns the buffer. Frames up to 16 KiB are copied behind the header
    /// and sent in one write; larger ones are sent as the header, then the
    /// buffer itself. A frame above the limit is `InvalidInput` and nothing
    /// is sent.
    pub async fn write_frame_owned<B: IoBuf>(&mut self, frame: B) -> BufResult<(), B> {
        let len = frame.bytes_init();
        let mut buf = std::mem::take(&mut self.write_buf);
        buf.clear();
        if let Err(e) = self.config().encode_header(len, &mut buf) {
            self.keep_write_buf(buf);
            return (Err(e), frame);
        }
        if len <= COPY_FRAME_MAX {
            buf.extend_from_slice(frame.as_init_slice());
        }
        let (res, buf) = self.io.write_all(buf).await;
        self.keep_write_buf(buf);
        if res.is_err() || len <= COPY_FRAME_MAX {
            return (res, frame);
        }
        self.io.write_all(frame).await
    }

    /// Flushes the stream (for a buffered `T`).
    pub async fn flush(&mut self) -> io::Result<()> {
        self.io.flush().await
    }

    /// Flushes and shuts down the stream's write direction: the peer's
    /// [`read_frame`](LengthDelimited::read_frame) then returns `Ok(None)`.
    pub async fn shutdown(&mut self) -> io::Result<()> {
        self.io.shutdown().await
    }

    fn keep_write_buf(&mut self, mut buf: Vec<u8>) {
        buf.clear();
        if buf.capacity() > WRITE_BUF_KEEP {
            buf = Vec::new();
        }
        self.write_buf = buf;
    }
}

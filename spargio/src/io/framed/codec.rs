//! The frame format: `FrameConfig` (and encoding) and `FrameDecoder`.

use std::io;

/// Payload growth steps: a payload buffer grows by what arrives plus
/// `clamp(received so far, MIN_GROW, MAX_GROW)` (see the module docs).
const MIN_GROW: usize = 4 << 10;
const MAX_GROW: usize = 1 << 20;

/// The frame format: length-field width and the largest frame accepted.
///
/// ```
/// use spargio::io::framed::FrameConfig;
///
/// let config = FrameConfig::new().with_length_field_bytes(2).with_max_frame_length(1024);
/// let mut wire = Vec::new();
/// config.encode(b"hi", &mut wire).unwrap();
/// assert_eq!(wire, [0, 2, b'h', b'i']);
/// assert!(config.encode(&[0; 1025], &mut wire).is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameConfig {
    max_frame_length: usize,
    length_field_bytes: usize,
}

impl Default for FrameConfig {
    fn default() -> FrameConfig {
        FrameConfig {
            max_frame_length: FrameConfig::DEFAULT_MAX_FRAME_LENGTH,
            length_field_bytes: 4,
        }
    }
}

impl FrameConfig {
    /// The default [`max_frame_length`](FrameConfig::max_frame_length):
    /// 8 MiB.
    pub const DEFAULT_MAX_FRAME_LENGTH: usize = 8 << 20;

    /// A 4-byte length field and an 8 MiB limit.
    pub fn new() -> FrameConfig {
        FrameConfig::default()
    }

    /// Sets the largest payload accepted (read) or sent (written).
    pub fn with_max_frame_length(mut self, max: usize) -> FrameConfig {
        self.max_frame_length = max;
        self
    }

    /// Sets the width of the big-endian length field, in bytes.
    ///
    /// # Panics
    ///
    /// Unless `1 <= bytes <= 8`.
    pub fn with_length_field_bytes(mut self, bytes: usize) -> FrameConfig {
        assert!(
            (1..=8).contains(&bytes),
            "length field must be 1 to 8 bytes, not {bytes}"
        );
        self.length_field_bytes = bytes;
        self
    }

    /// The largest payload accepted or sent, as set.
    pub fn max_frame_length(&self) -> usize {
        self.max_frame_length
    }

    /// The width of the length field, in bytes.
    pub fn length_field_bytes(&self) -> usize {
        self.length_field_bytes
    }

    /// The effective limit: the configured one, or less if the length
    /// field cannot express it.
    fn limit(&self) -> u64 {
        let field_max = u64::MAX >> (64 - 8 * self.length_field_bytes as u32);
        field_max.min(self.max_frame_length as u64)
    }

    /// Appends `len`'s header to `out`; `InvalidInput` above the limit.
    pub(super) fn encode_header(&self, len: usize, out: &mut Vec<u8>) -> io::Result<()> {
        if len as u64 > self.limit() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("frame of {len} bytes exceeds the limit of {}", self.limit()),
            ));
        }
        let be = (len as u64).to_be_bytes();
        out.extend_from_slice(&be[8 - self.length_field_bytes..]);
        Ok(())
    }

    /// Appends `frame`, header first, to `out`. A frame longer than the
    /// limit (or than the length field can express) is `InvalidInput`, and
    /// `out` is left as it was.
    pub fn encode(&self, frame: &[u8], out: &mut Vec<u8>) -> io::Result<()> {
        self.encode_header(frame.len(), out)?;
        out.extend_from_slice(frame);
        Ok(())
    }
}

/// Where the decoder is in the byte stream.
#[derive(Debug)]
enum State {
    /// Collecting the length field: `have` of its bytes so far.
    Header { have: usize, bytes: [u8; 8] },
    /// Collecting a payload of `len` bytes (in `FrameDecoder::frame`).
    Body { len: usize },
    /// An error was returned; the stream is out of step.
    Failed,
}

impl State {
    const START: State = State::Header {
        have: 0,
        bytes: [0; 8],
    };
}

/// Decodes length-prefixed frames from bytes fed in any chunking; no I/O.
///
/// ```
/// use spargio::io::framed::{FrameConfig, FrameDecoder};
///
/// let config = FrameConfig::new();
/// let mut wire = Vec::new();
/// config.encode(b"one", &mut wire).unwrap();
/// config.encode(b"", &mut wire).unwrap();
///
/// let mut decoder = FrameDecoder::new(config);
/// let mut frames = Vec::new();
/// for chunk in wire.chunks(2) {
///     let mut input = chunk;
///     while let Some(frame) = decoder.decode(&mut input).unwrap() {
///         frames.push(frame);
///     }
/// }
/// assert_eq!(frames, [b"one".to_vec(), Vec::new()]);
/// decoder.decode_eof().unwrap();
/// ```
#[derive(Debug)]
pub struct FrameDecoder {
    config: FrameConfig,
    state: State,
    /// The payload so far, in `State::Body`; empty (unallocated) otherwise.
    frame: Vec<u8>,
}

impl FrameDecoder {
    /// A decoder at a frame boundary.
    pub fn new(config: FrameConfig) -> FrameDecoder {
        FrameDecoder {
            config,
            state: State::START,
            frame: Vec::new(),
        }
    }

    /// The format this decoder reads.
    pub fn config(&self) -> FrameConfig {
        self.config
    }

    /// Consumes bytes from the front of `input`, up to the end of one
    /// frame, and returns that frame if it completed. `Ok(None)` means
    /// `input` was used up without completing one.
    ///
    /// A declared length above the limit is `InvalidData`, before any
    /// payload memory is allocated; from then on (and after any error)
    /// every call is `InvalidData`.
    pub fn decode(&mut self, input: &mut &[u8]) -> io::Result<Option<Vec<u8>>> {
        loop {
            match &mut self.state {
                State::Failed => return Err(invalid("the frame decoder failed earlier")),
                State::Header { have, bytes } => {
                    let width = self.config.length_field_bytes;
                    let take = (width - *have).min(input.len());
                    bytes[*have..*have + take].copy_from_slice(&input[..take]);
                    *input = &input[take..];
                    *have += take;
                    if *have < width {
                        return Ok(None);
                    }
                    let mut be = [0u8; 8];
                    be[8 - width..].copy_from_slice(&bytes[..width]);
                    let len = u64::from_be_bytes(be);
                    let limit = self.config.limit();
                    if len > limit {
                        self.state = State::Failed;
                        return Err(invalid(&format!(
                            "declared frame length {len} exceeds the limit of {limit}"
                        )));
                    }
                    // `len <= limit <= max_frame_length`, a `usize`.
                    let len = len as usize;
                    if len == 0 {
                        self.state = State::START;
                        return Ok(Some(Vec::new()));
                    }
                    self.state = State::Body { len };
                }
                State::Body { len } => {
                    let len = *len;
                    let take = (len - self.frame.len()).min(input.len());
                    if take == 0 {
                        return Ok(None);
                    }
                    reserve_as_received(&mut self.frame, take, len);
                    self.frame.extend_from_slice(&input[..take]);
                    *input = &input[take..];
                    if self.frame.len() < len {
                        return Ok(None);
                    }
                    self.state = State::START;
                    return Ok(Some(std::mem::take(&mut self.frame)));
                }
            }
        }
    }

    /// Checks that the stream may end here: `Ok` at a frame boundary,
    /// `UnexpectedEof` inside a frame, `InvalidData` after an error.
    pub fn decode_eof(&self) -> io::Result<()> {
        match self.state {
            State::Header { have: 0, .. } => Ok(()),
            State::Header { have, .. } => Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("stream ended after {have} bytes of a frame header"),
            )),
            State::Body { len } => Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "stream ended after {} of a frame's {len} bytes",
                    self.frame.len()
                ),
            )),
            State::Failed => Err(invalid("the frame decoder failed earlier")),
        }
    }

    /// True between frames (nothing of a next frame received yet).
    pub fn is_at_frame_boundary(&self) -> bool {
        matches!(self.state, State::Header { have: 0, .. })
    }

    /// Payload bytes of the current frame received so far.
    pub fn partial_frame_len(&self) -> usize {
        self.frame.len()
    }

    /// Bytes allocated for the current frame's payload: what the
    /// allocation bound in the [module docs](super) is about.
    pub fn partial_frame_capacity(&self) -> usize {
        self.frame.capacity()
    }
}

/// Makes room for `incoming` more payload bytes, growing by at most
/// `max(MIN_GROW, min(received, MAX_GROW))` beyond them and never past the
/// declared length.
fn reserve_as_received(frame: &mut Vec<u8>, incoming: usize, declared: usize) {
    let needed = frame.len() + incoming;
    if needed <= frame.capacity() {
        return;
    }
    let slack = frame.len().clamp(MIN_GROW, MAX_GROW);
    let target = needed.saturating_add(slack).min(declared);
    frame.reserve_exact(target - frame.len());
}

fn invalid(msg: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_widths_round_trip() {
        for width in 1..=8 {
            let config = FrameConfig::new().with_length_field_bytes(width);
            let mut wire = Vec::new();
            config.encode(&[7; 200], &mut wire).unwrap();
            assert_eq!(wire.len(), width + 200);
            let mut input = &wire[..];
            let mut decoder = FrameDecoder::new(config);
            assert_eq!(decoder.decode(&mut input).unwrap().unwrap(), [7; 200]);
            assert!(input.is_empty());
        }
        let narrow = FrameConfig::new().with_length_field_bytes(1);
        narrow.encode(&[0; 255], &mut Vec::new()).unwrap();
        let mut out = vec![1];
        let err = narrow.encode(&[0; 256], &mut out).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        assert_eq!(out, [1], "a rejected frame leaves the output alone");
    }

    #[test]
    fn growth_stays_near_what_arrived() {
        let declared = 3 << 20;
        let mut frame = Vec::new();
        let mut received = 0;
        while received < declared {
            let before = frame.len();
            reserve_as_received(&mut frame, 1000.min(declared - received), declared);
            received += 1000.min(declared - received);
            frame.resize(received, 0);
            assert!(frame.capacity() <= declared);
            assert!(frame.capacity() <= received + before.clamp(MIN_GROW, MAX_GROW));
        }
    }
}

//! Length-prefixed framing over a byte stream (`spargio::io::framed`).
//!
//! # Wire format
//!
//! Each frame is its length as an unsigned big-endian integer (4 bytes by
//! default, 1 to 8 by [`FrameConfig::with_length_field_bytes`]), then that
//! many payload bytes. A zero-length frame is just its header.
//!
//! # Untrusted input
//!
//! The length comes from the peer, so the reader never believes it before
//! the bytes arrive:
//!
//! 1. A declared length above [`FrameConfig::max_frame_length`] (8 MiB by
//!    default) is `InvalidData` as soon as the header is complete, before
//!    anything is allocated for the payload.
//! 2. A payload buffer grows as its bytes arrive, never to the declared
//!    length up front. Its capacity stays within the declared length and
//!    within `received + max(4 KiB, min(received, 1 MiB))`: at most twice
//!    what arrived plus 4 KiB, and never more than 1 MiB ahead of it.
//!    (Growing by a fixed step instead would bound it by "received plus a
//!    constant", but copy an 8 MiB frame about a hundred times over as it
//!    grows; doubling up to 1 MiB steps copies it about twice.)
//! 3. End of stream inside a frame is `UnexpectedEof`; at a frame boundary
//!    it is a clean end (`Ok(None)`).
//! 4. After an error the stream is out of step with its peer: the decoder
//!    refuses further input.
//!
//! # Layout
//!
//! [`FrameDecoder`] is the pure state machine: bytes in, frames out, no
//! I/O. It is what the property tests drive with arbitrary bytes in
//! arbitrary chunks. [`LengthDelimited`] puts it over an
//! [`AsyncRead`](super::AsyncRead)/[`AsyncWrite`](super::AsyncWrite) with
//! one reused read buffer.

mod codec;
mod length_delimited;

pub use codec::{FrameConfig, FrameDecoder};
pub use length_delimited::LengthDelimited;

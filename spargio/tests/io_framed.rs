//! `spargio::io::framed`: round trips over loopback TCP, the untrusted-input
//! rules (oversize, truncation, allocation as bytes arrive), and property
//! tests of the decoder under arbitrary bytes and chunkings.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::io::ErrorKind;

use proptest::prelude::*;
use spargio::buf::{BufResult, IoBufMut};
use spargio::io::framed::{FrameConfig, FrameDecoder, LengthDelimited};
use spargio::io::AsyncRead;

// ===== allocation tracking =====

/// The system allocator, recording the largest single request made by
/// each thread (so tests running in parallel do not see each other's).
struct Tracking;

thread_local! {
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

fn note(size: usize) {
    // `try_with`: the slot may be gone while the thread exits.
    let _ = LARGEST.try_with(|largest| largest.set(largest.get().max(size)));
}

// SAFETY: every call forwards to `System` with the caller's arguments
// unchanged; `note` touches only a const-initialized thread-local `Cell`,
// which never allocates.
unsafe impl GlobalAlloc for Tracking {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: the caller's contract for `alloc`, passed on.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: the caller's contract for `alloc_zeroed`, passed on.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract for `dealloc`, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        // SAFETY: the caller's contract for `realloc`, passed on.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Tracking = Tracking;

/// Runs `f` on this thread; returns its result and the largest single
/// allocation it made.
fn largest_allocation<T>(f: impl FnOnce() -> T) -> (T, usize) {
    LARGEST.with(|l| l.set(0));
    let out = f();
    (out, LARGEST.with(|l| l.get()))
}

// ===== helpers =====

/// An in-memory stream that hands out its bytes in the given chunk sizes
/// (cycling), as a socket might.
struct Chunked {
    data: Vec<u8>,
    pos: usize,
    chunks: Vec<usize>,
    next: usize,
}

impl Chunked {
    fn new(data: Vec<u8>, chunks: Vec<usize>) -> Chunked {
        assert!(chunks.iter().all(|&c| c > 0));
        Chunked {
            data,
            pos: 0,
            chunks,
            next: 0,
        }
    }
}

impl AsyncRead for Chunked {
    async fn read<B: IoBufMut>(&mut self, buf: B) -> BufResult<usize, B> {
        let chunk = self.chunks[self.next % self.chunks.len()];
        self.next += 1;
        let end = (self.pos + chunk).min(self.data.len());
        let mut src = &self.data[self.pos..end];
        let (res, buf) = src.read(buf).await;
        if let Ok(n) = &res {
            self.pos += n;
        }
        (res, buf)
    }
}

fn encode_all(config: FrameConfig, frames: &[Vec<u8>]) -> Vec<u8> {
    let mut wire = Vec::new();
    for frame in frames {
        config.encode(frame, &mut wire).unwrap();
    }
    wire
}

/// The allocation bound promised in the module docs.
fn within_bound(capacity: usize, received: usize) -> bool {
    capacity <= received + (4 << 10).max(received.min(1 << 20))
}

// ===== over TCP =====

#[test]
fn many_frames_round_trip_over_tcp_including_empty_and_max_size() {
    common::on_runtime(|h| {
        Box::pin(async move {
            let (client, server) = common::tcp_pair(&h).await;
            let max = FrameConfig::DEFAULT_MAX_FRAME_LENGTH;
            let mut frames: Vec<Vec<u8>> = vec![Vec::new(), b"x".to_vec(), vec![0xab; max]];
            for i in 0..200usize {
                let len = (i * 7919) % 70_000;
                frames.push((0..len).map(|j| (i + j) as u8).collect());
            }
            frames.push(Vec::new());
            let to_send = frames.clone();
            let writer = h
                .spawn_stealable(async move {
                    let mut out = LengthDelimited::new(client);
                    for (i, frame) in to_send.into_iter().enumerate() {
                        if i % 2 == 0 {
                            out.write_frame(&frame).await.unwrap();
                        } else {
                            let (res, back) = out.write_frame_owned(frame).await;
                            res.unwrap();
                            drop(back);
                        }
                    }
                    out.shutdown().await.unwrap();
                })
                .unwrap();

            let mut input = LengthDelimited::new(server);
            for (i, expected) in frames.iter().enumerate() {
                let got = input.read_frame().await.unwrap().expect("a frame");
                assert!(got == *expected, "frame {i} differs");
            }
            assert!(input.read_frame().await.unwrap().is_none(), "clean end");
            assert!(input.decoder().is_at_frame_boundary());
            writer.await.unwrap();
        })
    });
}

#[test]
fn oversize_frame_is_rejected_before_allocating_over_tcp() {
    common::on_runtime(|h| {
        Box::pin(async move {
            let (client, server) = common::tcp_pair(&h).await;
            // Declares 4 GiB - 1, then sends a little.
            let mut wire = vec![0xff; 4];
            wire.extend_from_slice(&[0; 100]);
            client.write_all(&wire).await.unwrap();

            let mut input = LengthDelimited::new(server);
            let err = input.read_frame().await.unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidData);
            assert!(err.to_string().contains("exceeds"), "{err}");
            assert_eq!(input.decoder().partial_frame_capacity(), 0);
            let again = input.read_frame().await.unwrap_err();
            assert_eq!(again.kind(), ErrorKind::InvalidData, "stays failed");

            // The sender refuses an oversize frame, and sends nothing of it.
            let (client, server) = common::tcp_pair(&h).await;
            let config = FrameConfig::new().with_max_frame_length(10);
            let mut out = LengthDelimited::with_config(client, config);
            let err = out.write_frame([0u8; 11]).await.unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidInput);
            let (res, back) = out.write_frame_owned(vec![0u8; 11]).await;
            assert_eq!(res.unwrap_err().kind(), ErrorKind::InvalidInput);
            assert_eq!(back.len(), 11, "the buffer comes back");
            out.write_frame(b"fits").await.unwrap();
            out.shutdown().await.unwrap();
            let mut input = LengthDelimited::with_config(server, config);
            assert_eq!(input.read_frame().await.unwrap().unwrap(), b"fits");
            assert!(input.read_frame().await.unwrap().is_none());
        })
    });
}

#[test]
fn truncated_frames_are_unexpected_eof_over_tcp() {
    for wire in [vec![0, 0, 0, 100, 1, 2, 3], vec![0, 0]] {
        common::on_runtime(move |h| {
            Box::pin(async move {
                let (client, server) = common::tcp_pair(&h).await;
                client.write_all(&wire).await.unwrap();
                client.shutdown(std::net::Shutdown::Write).await.unwrap();
                let mut input = LengthDelimited::new(server);
                let err = input.read_frame().await.unwrap_err();
                assert_eq!(err.kind(), ErrorKind::UnexpectedEof, "{err}");
            })
        });
    }
}

// ===== allocation as bytes arrive =====

#[test]
fn declared_lengths_are_not_allocated_up_front() {
    // Over the limit: rejected with nothing allocated for the payload.
    let mut wire = 0x4000_0000u32.to_be_bytes().to_vec();
    wire.extend_from_slice(&[0; 1000]);
    let (res, largest) = largest_allocation(|| {
        let mut input = LengthDelimited::new(&wire[..]);
        spargio::block_on(input.read_frame())
    });
    assert_eq!(res.unwrap_err().kind(), ErrorKind::InvalidData);
    assert!(largest <= 64 << 10, "largest allocation {largest}");

    // Under a raised limit: 1 GiB declared, 100 KB sent. Memory follows
    // what arrived, not what was declared.
    let mut wire = 0x4000_0000u32.to_be_bytes().to_vec();
    wire.extend_from_slice(&vec![7; 100_000]);
    let config = FrameConfig::new().with_max_frame_length(usize::MAX);
    let (res, largest) = largest_allocation(|| {
        let mut input = LengthDelimited::with_config(&wire[..], config);
        spargio::block_on(input.read_frame())
    });
    assert_eq!(res.unwrap_err().kind(), ErrorKind::UnexpectedEof);
    assert!(largest <= 256 << 10, "largest allocation {largest}");
}

#[test]
fn a_frame_arriving_byte_by_byte_grows_with_it() {
    let declared = 50_000;
    let mut decoder = FrameDecoder::new(FrameConfig::new());
    let mut wire = (declared as u32).to_be_bytes().to_vec();
    wire.resize(4 + declared, 1);
    let mut frame = None;
    for byte in wire.chunks(1) {
        let mut input = byte;
        frame = decoder.decode(&mut input).unwrap();
        if frame.is_none() {
            let (cap, len) = (
                decoder.partial_frame_capacity(),
                decoder.partial_frame_len(),
            );
            assert!(within_bound(cap, len), "capacity {cap} after {len} bytes");
        }
    }
    let frame = frame.expect("complete");
    assert_eq!(frame.len(), declared);
    assert_eq!(frame.capacity(), declared, "never past the declared length");
}

// ===== properties =====

/// Any of the supported field widths with a limit that the frames fit.
fn wide_config() -> impl Strategy<Value = FrameConfig> {
    (2usize..=8).prop_map(|w| FrameConfig::new().with_length_field_bytes(w))
}

fn chunkings() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(1usize..97, 1..8)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn arbitrary_bytes_never_panic_nor_overallocate(
        bytes in prop::collection::vec(any::<u8>(), 0..3000),
        chunks in chunkings(),
        width in 1usize..=8,
        max in prop_oneof![0usize..5000, Just(usize::MAX)],
    ) {
        let config = FrameConfig::new().with_length_field_bytes(width).with_max_frame_length(max);
        let mut decoder = FrameDecoder::new(config);
        let mut rest = &bytes[..];
        let mut decoded = 0usize;
        let mut next = 0;
        'feed: while !rest.is_empty() {
            let take = chunks[next % chunks.len()].min(rest.len());
            next += 1;
            let mut input = &rest[..take];
            rest = &rest[take..];
            while !input.is_empty() {
                match decoder.decode(&mut input) {
                    Ok(Some(frame)) => {
                        prop_assert!(frame.len() <= max);
                        decoded += width + frame.len();
                    }
                    Ok(None) => {}
                    Err(e) => {
                        prop_assert_eq!(e.kind(), ErrorKind::InvalidData);
                        prop_assert_eq!(decoder.partial_frame_capacity(), 0);
                        break 'feed;
                    }
                }
                let (cap, len) = (decoder.partial_frame_capacity(), decoder.partial_frame_len());
                prop_assert!(within_bound(cap, len), "capacity {} after {} bytes", cap, len);
                prop_assert!(cap <= max);
            }
        }
        prop_assert!(decoded <= bytes.len());
        let _ = decoder.decode_eof();
    }

    #[test]
    fn frame_sequences_round_trip_under_any_chunking(
        frames in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..400), 0..12),
        chunks in chunkings(),
        config in wide_config(),
    ) {
        let wire = encode_all(config, &frames);
        let mut decoder = FrameDecoder::new(config);
        let mut got = Vec::new();
        let mut next = 0;
        let mut rest = &wire[..];
        while !rest.is_empty() {
            let take = chunks[next % chunks.len()].min(rest.len());
            next += 1;
            let mut input = &rest[..take];
            rest = &rest[take..];
            while let Some(frame) = decoder.decode(&mut input).unwrap() {
                got.push(frame);
            }
            prop_assert!(input.is_empty());
        }
        prop_assert!(decoder.decode_eof().is_ok());
        prop_assert_eq!(got, frames);
    }

    #[test]
    fn length_delimited_round_trips_over_a_chunked_stream(
        frames in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..400), 0..12),
        chunks in chunkings(),
        config in wide_config(),
    ) {
        // Writing: copied and owned frames produce the encoding.
        let mut out = LengthDelimited::with_config(Vec::new(), config);
        for (i, frame) in frames.iter().enumerate() {
            if i % 2 == 0 {
                spargio::block_on(out.write_frame(frame)).unwrap();
            } else {
                spargio::block_on(out.write_frame_owned(frame.clone())).0.unwrap();
            }
        }
        let wire = out.into_inner();
        prop_assert_eq!(&wire, &encode_all(config, &frames));

        // Reading: every frame, then a clean end.
        let mut input = LengthDelimited::with_config(Chunked::new(wire, chunks), config);
        let got = spargio::block_on(async {
            let mut got = Vec::new();
            while let Some(frame) = input.read_frame().await? {
                got.push(frame);
            }
            std::io::Result::Ok(got)
        }).unwrap();
        prop_assert_eq!(got, frames);
    }

    #[test]
    fn a_cut_stream_ends_cleanly_only_at_a_frame_boundary(
        frames in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..200), 1..8),
        cut in any::<prop::sample::Index>(),
        chunks in chunkings(),
    ) {
        let config = FrameConfig::new();
        let wire = encode_all(config, &frames);
        let cut = cut.index(wire.len() + 1);
        let mut boundaries = vec![0];
        for frame in &frames {
            boundaries.push(boundaries.last().unwrap() + 4 + frame.len());
        }
        let whole = boundaries.iter().filter(|&&b| b <= cut).count() - 1;

        let mut input = LengthDelimited::new(Chunked::new(wire[..cut].to_vec(), chunks));
        for frame in &frames[..whole] {
            let got = spargio::block_on(input.read_frame()).unwrap();
            prop_assert_eq!(got.as_ref(), Some(frame));
        }
        let end = spargio::block_on(input.read_frame());
        if boundaries.contains(&cut) {
            prop_assert!(end.unwrap().is_none());
        } else {
            prop_assert_eq!(end.unwrap_err().kind(), ErrorKind::UnexpectedEof);
        }
    }
}

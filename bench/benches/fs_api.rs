//! File reads and metadata lookups from the page cache.
//!
//! * `fs_read_rtt_4k`: 256 reads of 4 KiB per iteration, one at a time
//!   (depth 1), at scattered 4 KiB-aligned offsets of a 64 MiB file.
//! * `fs_read_throughput_4k_qd32`: 1024 such reads per iteration, 32 in
//!   flight at all times (a new read starts as soon as one finishes).
//! * `fs_metadata_rtt`: 256 metadata lookups per iteration, one at a time,
//!   cycling over 64 small files.
//! * `fs_read_whole_file_4k`, `fs_read_whole_file_1m`: 32 whole-file reads
//!   (`fs::read`: open, read to the end, close) per iteration, one at a
//!   time, of a 4 KiB and a 1 MiB file.
//!
//! The fixtures live in a temporary directory created once at start-up and
//! removed at the end; the data file is read once before any measurement,
//! so every read hits the page cache (the whole-file fixtures were just
//! written, so they are in it too). Every read is checked (full 4 KiB, and
//! the block index stamped in its first 8 bytes), every lookup's size is
//! summed and checked, every whole-file read's length and first and last
//! block stamps are checked.
//!
//! Variants, each with 2 runtime worker threads and its runtimes built
//! once, outside the measurement:
//! * tokio (`tokio_spawn_blocking_*`): multi-thread runtime with 2 workers;
//!   each read is a `spawn_blocking` running `FileExt::read_at` on a shared
//!   `std::fs::File` (what `tokio::fs` does), the buffer moved into the
//!   closure and back out so it is reused; depth 32 keeps 32 such reads in a
//!   `JoinSet` (tokio's blocking pool runs them). Metadata is
//!   `tokio::fs::metadata`, whole files `tokio::fs::read` (both on the
//!   blocking pool).
//! * tokio with io_uring (`tokio_uring_*`, only built with
//!   `RUSTFLAGS="--cfg tokio_unstable"` and the `tokio-uring` feature):
//!   `new_multi_thread().worker_threads(2).enable_io_uring()`. tokio 1.54
//!   sends `tokio::fs::File::open` (`OPENAT`), `File`'s `AsyncRead`
//!   (`READ` at the file position) and `tokio::fs::read` (`OPENAT`,
//!   `STATX`, `READ`s) through one ring per runtime. `tokio::fs::File` has
//!   no positional read (the ring's `read_at` is crate-private) and a `File`
//!   runs one operation at a time, so a read at an offset is
//!   `seek(SeekFrom::Start)` (an `lseek` on the blocking pool: tokio's
//!   `start_seek` is `spawn_blocking`) then `read_exact` (one ring `READ`):
//!   `tokio_uring_seek_read_*`. `tokio_uring_dup_lseek_read_*` (not
//!   idiomatic: the ring read's floor) moves the position with a plain
//!   `lseek` on a duplicate `std::fs::File` of the descriptor instead. Depth
//!   32 is a `JoinSet` of 32 tasks, each with its own `File` (32 opened
//!   once), a new task as soon as one ends. `tokio::fs::metadata`
//!   does not use the ring (only `try_exists` and `fs::read` do `STATX`), so
//!   `fs_metadata_rtt` has no such variant.
//! * spargio (`spargio_*`): `shards(2)`; depth 1 is one stealable task doing
//!   `File::read_at_into` with a reused buffer; depth 32 is one stealable
//!   task per shard, each with 16 `read_at_into` futures in flight in a
//!   `FuturesUnordered`. Metadata is `spargio::fs::metadata_lite` (native
//!   `IORING_OP_STATX`) from one stealable task, whole files
//!   `spargio::fs::read` from one stealable task.
//! * compio (`compio_*`): two persistent compio runtimes, one per thread
//!   (compio is thread-per-core), the data file opened on each;
//!   `compio::fs::File` with `AsyncReadAt::read_at` and reused buffers.
//!   Depth 1, metadata (`compio::fs::metadata`, native `STATX`) and whole
//!   files (`compio::fs::read`) are a serial stream, so they run on one
//!   runtime; depth 32 is split over both, 16 in flight on each, with the
//!   same `FuturesUnordered` driver as spargio.
//!
//! As in the other benches, every variant's iteration starts on the
//! benchmark thread, hands the work to a runtime worker and waits for it,
//! so the handoff is measured on every side.

#[path = "common/cpu.rs"]
mod cpu;

// tokio's `io-uring` feature only exists under `--cfg tokio_unstable`:
// without it the `tokio_uring_*` variants would silently not be built.
#[cfg(all(feature = "tokio-uring", not(tokio_unstable)))]
compile_error!(
    "feature `tokio-uring` needs RUSTFLAGS=\"--cfg tokio_unstable\" (see bench/README.md)"
);

use std::fs;
use std::future::Future;
use std::hint::black_box;
use std::io::{self, BufWriter, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::{mpsc, Arc};
use std::thread;

use criterion::{Criterion, Throughput};
use futures_util::stream::{FuturesUnordered, StreamExt};

/// Read size, and alignment of every offset.
const BLOCK: usize = 4096;
/// Blocks in the data file (64 MiB).
const FILE_BLOCKS: u64 = 16 * 1024;
/// Reads per iteration of `fs_read_rtt_4k`.
const RTT_READS: usize = 256;
/// Reads per iteration of `fs_read_throughput_4k_qd32`.
const QD32_READS: usize = 1024;
/// Reads in flight in `fs_read_throughput_4k_qd32`.
const QD: usize = 32;
/// Files the metadata lookups cycle over.
const META_FILES: usize = 64;
/// Lookups per iteration of `fs_metadata_rtt`.
const META_LOOKUPS: usize = 256;
/// Sizes of the whole-file fixtures, with their group names.
const WHOLE_FILES: [(usize, &str); 2] = [
    (4 << 10, "fs_read_whole_file_4k"),
    (1 << 20, "fs_read_whole_file_1m"),
];
/// Whole-file reads per iteration of `fs_read_whole_file_*`.
const WHOLE_READS: usize = 32;
/// Worker threads (tokio workers, spargio shards) on every side.
const WORKERS: usize = 2;

/// Block read by read `i` of an iteration: a fixed scatter over the file
/// (7919 is prime, so coprime with the block count: no block repeats within
/// an iteration).
fn block_of(i: usize) -> u64 {
    (i as u64 * 7919 + 11) % FILE_BLOCKS
}

fn offset_of(i: usize) -> u64 {
    block_of(i) * BLOCK as u64
}

/// What the checksum of reads `0..reads` must be.
fn expected_read_sum(reads: usize) -> u64 {
    (0..reads).map(block_of).sum()
}

/// Checks that read `i` returned its whole block and returns the block
/// index stamped in the block's first 8 bytes.
fn check_block(i: usize, res: io::Result<usize>, buf: &[u8]) -> u64 {
    let n = res.unwrap_or_else(|err| panic!("read {i} failed: {err}"));
    assert_eq!(n, BLOCK, "short read {i}");
    let stamp = u64::from_le_bytes(buf[..8].try_into().expect("8 bytes"));
    assert_eq!(stamp, block_of(i), "read {i} returned the wrong block");
    stamp
}

/// A read's index, result and buffer.
type ReadDone = (usize, io::Result<usize>, Vec<u8>);

/// Reads `indices`, one per buffer in `bufs` in flight (a new read starts
/// as soon as one finishes), through `read`; returns the checksum with the
/// buffers back in `bufs`. One driver, in one task, for spargio and compio.
async fn reads_in_flight<I, F, Fut>(indices: I, bufs: &mut Vec<Vec<u8>>, read: F) -> u64
where
    I: IntoIterator<Item = usize>,
    F: Fn(usize, Vec<u8>) -> Fut,
    Fut: Future<Output = ReadDone>,
{
    let mut indices = indices.into_iter();
    let mut in_flight = FuturesUnordered::new();
    while !bufs.is_empty() {
        let Some(i) = indices.next() else { break };
        let buf = bufs.pop().expect("not empty");
        in_flight.push(read(i, buf));
    }
    let mut sum = 0;
    while let Some((i, res, buf)) = in_flight.next().await {
        sum += check_block(i, res, &buf);
        match indices.next() {
            Some(next) => in_flight.push(read(next, buf)),
            None => bufs.push(buf),
        }
    }
    sum
}

/// Part `part` of `parts` of reads `0..reads` (every `parts`-th read), for
/// spreading the depth-32 reads over the workers.
fn part_of(reads: usize, part: usize, parts: usize) -> std::iter::StepBy<std::ops::Range<usize>> {
    (part..reads).step_by(parts)
}

/// Checks a whole-file read of fixture `which` (its length, and the block
/// index stamped at the start of its first and last 4 KiB blocks) and
/// returns its length.
fn check_whole(which: usize, res: io::Result<Vec<u8>>) -> u64 {
    let data = res.unwrap_or_else(|err| panic!("whole-file read failed: {err}"));
    let size = WHOLE_FILES[which].0;
    assert_eq!(data.len(), size, "whole-file read of the wrong length");
    let last = size / BLOCK - 1;
    for b in [0, last] {
        let at = b * BLOCK;
        let stamp = u64::from_le_bytes(data[at..at + 8].try_into().expect("8 bytes"));
        assert_eq!(stamp, b as u64, "whole-file read: block {b} wrong");
    }
    data.len() as u64
}

fn read_buffers(n: usize, filled: bool) -> Vec<Vec<u8>> {
    (0..n)
        .map(|_| {
            if filled {
                vec![0; BLOCK]
            } else {
                Vec::with_capacity(BLOCK)
            }
        })
        .collect()
}

// --------------------------------------------------------------- fixtures

/// The data file and the metadata files, in a temporary directory removed
/// on drop.
struct Fixture {
    dir: PathBuf,
    data: PathBuf,
    meta: Arc<[PathBuf]>,
    /// Sum of the sizes of the `META_LOOKUPS` lookups of one iteration.
    meta_sum: u64,
    /// The whole-file fixtures, one per `WHOLE_FILES` entry.
    whole: Arc<[PathBuf]>,
}

impl Fixture {
    fn new() -> io::Result<Fixture> {
        let dir = std::env::temp_dir().join(format!("spargio-bench-fs-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir)?;
        let data = dir.join("data.bin");
        let mut out = BufWriter::with_capacity(1 << 20, fs::File::create(&data)?);
        let mut block = vec![0xA5u8; BLOCK];
        for b in 0..FILE_BLOCKS {
            block[..8].copy_from_slice(&b.to_le_bytes());
            out.write_all(&block)?;
        }
        out.into_inner().map_err(|e| e.into_error())?.sync_all()?;

        // Warm the page cache: read the whole file once.
        let mut warm = fs::File::open(&data)?;
        let mut chunk = vec![0u8; 1 << 20];
        let mut total = 0u64;
        loop {
            match warm.read(&mut chunk)? {
                0 => break,
                n => total += n as u64,
            }
        }
        assert_eq!(total, FILE_BLOCKS * BLOCK as u64);

        let meta: Vec<PathBuf> = (0..META_FILES)
            .map(|i| {
                let path = dir.join(format!("meta-{i:02}"));
                fs::write(&path, vec![b'm'; meta_len(i) as usize]).map(|()| path)
            })
            .collect::<io::Result<_>>()?;
        let meta_sum = (0..META_LOOKUPS).map(|j| meta_len(j % META_FILES)).sum();
        let whole: Vec<PathBuf> = WHOLE_FILES
            .iter()
            .map(|&(size, _)| {
                let path = dir.join(format!("whole-{size}"));
                let mut contents = vec![0x5Au8; size];
                for (b, block) in contents.chunks_mut(BLOCK).enumerate() {
                    block[..8].copy_from_slice(&(b as u64).to_le_bytes());
                }
                fs::write(&path, contents).map(|()| path)
            })
            .collect::<io::Result<_>>()?;
        Ok(Fixture {
            dir,
            data,
            meta: meta.into(),
            meta_sum,
            whole: whole.into(),
        })
    }
}

/// Size of metadata file `i`.
fn meta_len(i: usize) -> u64 {
    1 + 37 * i as u64
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.dir);
    }
}

// ------------------------------------------------------------------ tokio

/// A multi-thread runtime with 2 workers and the data file as a shared
/// `std::fs::File` (`tokio::fs::File` has no positional reads and allows
/// one operation at a time, so positional reads go through
/// `spawn_blocking` directly, as `tokio::fs` does internally).
struct TokioSide {
    rt: tokio::runtime::Runtime,
    file: Arc<fs::File>,
    meta: Arc<[PathBuf]>,
    /// Reused between iterations (moved into the driver task and back).
    bufs: Option<Vec<Vec<u8>>>,
}

impl TokioSide {
    fn new(fx: &Fixture) -> TokioSide {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(WORKERS)
            .build()
            .expect("tokio multi-thread runtime");
        TokioSide {
            rt,
            file: Arc::new(fs::File::open(&fx.data).expect("open data file")),
            meta: fx.meta.clone(),
            bufs: Some(read_buffers(QD, true)),
        }
    }

    /// Runs `f(file, bufs)` as a task on the runtime and waits for it.
    fn run<F, Fut>(&mut self, f: F) -> u64
    where
        F: FnOnce(Arc<fs::File>, Vec<Vec<u8>>) -> Fut,
        Fut: Future<Output = (u64, Vec<Vec<u8>>)> + Send + 'static,
    {
        let bufs = self
            .bufs
            .take()
            .expect("buffers are home between iterations");
        let task = f(self.file.clone(), bufs);
        let (sum, bufs) = self
            .rt
            .block_on(async { tokio::spawn(task).await.expect("driver task") });
        self.bufs = Some(bufs);
        sum
    }

    fn reads_qd1(&mut self, reads: usize) -> u64 {
        self.run(move |file, mut bufs| async move {
            let mut buf = bufs.pop().expect("a buffer");
            let mut sum = 0;
            for i in 0..reads {
                let file = file.clone();
                let (res, back) = tokio::task::spawn_blocking(move || {
                    let res = file.read_at(&mut buf, offset_of(i));
                    (res, buf)
                })
                .await
                .expect("blocking read");
                buf = back;
                sum += check_block(i, res, &buf);
            }
            bufs.push(buf);
            (sum, bufs)
        })
    }

    fn reads_qd(&mut self, reads: usize) -> u64 {
        self.run(move |file, mut bufs| async move {
            let mut set = tokio::task::JoinSet::new();
            let start = |set: &mut tokio::task::JoinSet<ReadDone>, i: usize, mut buf: Vec<u8>| {
                let file = file.clone();
                set.spawn_blocking(move || {
                    let res = file.read_at(&mut buf, offset_of(i));
                    (i, res, buf)
                });
            };
            let mut next = 0;
            while next < reads {
                let Some(buf) = bufs.pop() else { break };
                start(&mut set, next, buf);
                next += 1;
            }
            let mut sum = 0;
            while let Some(done) = set.join_next().await {
                let (i, res, buf) = done.expect("blocking read");
                sum += check_block(i, res, &buf);
                if next < reads {
                    start(&mut set, next, buf);
                    next += 1;
                } else {
                    bufs.push(buf);
                }
            }
            (sum, bufs)
        })
    }

    fn metadata(&mut self, lookups: usize) -> u64 {
        let meta = self.meta.clone();
        self.run(move |_, bufs| async move {
            let mut sum = 0;
            for j in 0..lookups {
                sum += tokio::fs::metadata(&meta[j % meta.len()])
                    .await
                    .expect("metadata")
                    .len();
            }
            (sum, bufs)
        })
    }

    /// `reads` `tokio::fs::read`s of `path`, one at a time.
    fn whole(&mut self, which: usize, path: &std::path::Path, reads: usize) -> u64 {
        let path = path.to_owned();
        self.run(move |_, bufs| async move {
            let mut sum = 0;
            for _ in 0..reads {
                sum += check_whole(which, tokio::fs::read(&path).await);
            }
            (sum, bufs)
        })
    }
}

// ------------------------------------------------------ tokio with io_uring

/// A data file opened by `tokio::fs::File::open` (ring `OPENAT`), and a
/// `std::fs::File` duplicate of its descriptor (same open file, so the same
/// file position) for [`Seek::Dup`].
#[cfg(all(tokio_unstable, feature = "tokio-uring"))]
struct UringFile {
    file: tokio::fs::File,
    dup: fs::File,
}

/// How a `tokio_uring_*` read moves the file position to its offset
/// before its ring `READ` (tokio's `File` has no positional read).
#[cfg(all(tokio_unstable, feature = "tokio-uring"))]
#[derive(Clone, Copy)]
enum Seek {
    /// `AsyncSeekExt::seek`: what tokio offers, an `lseek` on the blocking
    /// pool (tokio's `start_seek` is a `spawn_blocking`).
    Tokio,
    /// A plain `lseek` on the duplicate descriptor, inline in the task: not
    /// something tokio offers (it relies on the ring read using the shared
    /// file position), only to show what the ring read costs alone.
    Dup,
}

/// tokio's io_uring file operations (tokio 1.54, `--cfg tokio_unstable`,
/// feature `io-uring`): a multi-thread runtime with 2 workers and
/// `enable_io_uring()` (the ring is made on the first file operation, one
/// per runtime, and completions reach the workers through the I/O driver's
/// epoll), and `QD` data files opened once (a `File` runs one operation at
/// a time, so each read in flight needs its own).
#[cfg(all(tokio_unstable, feature = "tokio-uring"))]
struct TokioUringSide {
    rt: tokio::runtime::Runtime,
    /// Reused between iterations (moved into the driver task and back).
    files: Option<Vec<UringFile>>,
    bufs: Option<Vec<Vec<u8>>>,
}

#[cfg(all(tokio_unstable, feature = "tokio-uring"))]
impl TokioUringSide {
    fn new(fx: &Fixture) -> TokioUringSide {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(WORKERS)
            .enable_io_uring()
            .build()
            .expect("tokio multi-thread runtime with io_uring");
        let data = fx.data.clone();
        let files = rt.block_on(async move {
            let mut files = Vec::with_capacity(QD);
            for _ in 0..QD {
                let file = tokio::fs::File::open(&data).await.expect("open data file");
                let dup = file.try_clone().await.expect("dup data file");
                let dup = dup.try_into_std().expect("no operation in flight");
                files.push(UringFile { file, dup });
            }
            files
        });
        TokioUringSide {
            rt,
            files: Some(files),
            bufs: Some(read_buffers(QD, true)),
        }
    }

    /// Runs `f(files, bufs)` as a task on the runtime and waits for it.
    fn run<F, Fut>(&mut self, f: F) -> u64
    where
        F: FnOnce(Vec<UringFile>, Vec<Vec<u8>>) -> Fut,
        Fut: Future<Output = (u64, Vec<UringFile>, Vec<Vec<u8>>)> + Send + 'static,
    {
        let files = self.files.take().expect("files are home");
        let bufs = self.bufs.take().expect("buffers are home");
        let task = f(files, bufs);
        let (sum, files, bufs) = self
            .rt
            .block_on(async { tokio::spawn(task).await.expect("driver task") });
        self.files = Some(files);
        self.bufs = Some(bufs);
        sum
    }

    /// Read `i` into `buf` through `f`: the file position moved to the
    /// read's offset (`seek`), then `read_exact` (ring `READ`s at the file
    /// position; one for a 4 KiB block from the page cache).
    async fn read(f: &mut UringFile, seek: Seek, i: usize, buf: &mut [u8]) -> io::Result<usize> {
        use std::io::Seek as _;
        use tokio::io::{AsyncReadExt, AsyncSeekExt};
        let to = io::SeekFrom::Start(offset_of(i));
        match seek {
            Seek::Tokio => f.file.seek(to).await?,
            Seek::Dup => f.dup.seek(to)?,
        };
        f.file.read_exact(buf).await
    }

    fn reads_qd1(&mut self, seek: Seek, reads: usize) -> u64 {
        self.run(move |mut files, mut bufs| async move {
            let file = files.first_mut().expect("a file");
            let buf = bufs.first_mut().expect("a buffer");
            let mut sum = 0;
            for i in 0..reads {
                let res = Self::read(file, seek, i, buf).await;
                sum += check_block(i, res, buf);
            }
            (sum, files, bufs)
        })
    }

    /// `QD` reads in flight, each a task in a `JoinSet` with its own file
    /// and buffer; a new one as soon as one ends.
    fn reads_qd(&mut self, seek: Seek, reads: usize) -> u64 {
        self.run(move |mut files, mut bufs| async move {
            type Done = (usize, io::Result<usize>, Vec<u8>, UringFile);
            let mut set = tokio::task::JoinSet::new();
            let start = |set: &mut tokio::task::JoinSet<Done>,
                         i: usize,
                         mut buf: Vec<u8>,
                         mut file: UringFile| {
                set.spawn(async move {
                    let res = Self::read(&mut file, seek, i, &mut buf).await;
                    (i, res, buf, file)
                });
            };
            let mut next = 0;
            while next < reads && !bufs.is_empty() {
                let buf = bufs.pop().expect("not empty");
                let file = files.pop().expect("a file per buffer");
                start(&mut set, next, buf, file);
                next += 1;
            }
            let mut sum = 0;
            while let Some(done) = set.join_next().await {
                let (i, res, buf, file) = done.expect("read task");
                sum += check_block(i, res, &buf);
                if next < reads {
                    start(&mut set, next, buf, file);
                    next += 1;
                } else {
                    bufs.push(buf);
                    files.push(file);
                }
            }
            (sum, files, bufs)
        })
    }

    /// `reads` `tokio::fs::read`s of `path` (ring `OPENAT`, `STATX`,
    /// `READ`s), one at a time.
    fn whole(&mut self, which: usize, path: &std::path::Path, reads: usize) -> u64 {
        let path = path.to_owned();
        self.run(move |files, bufs| async move {
            let mut sum = 0;
            for _ in 0..reads {
                sum += check_whole(which, tokio::fs::read(&path).await);
            }
            (sum, files, bufs)
        })
    }
}

// ---------------------------------------------------------------- spargio

/// A 2-shard runtime and the data file, opened once.
struct SpargioSide {
    /// Kept for its `Drop` (shuts down and joins the shards).
    _rt: spargio::Runtime,
    handle: spargio::RuntimeHandle,
    file: Arc<spargio::fs::File>,
    meta: Arc<[PathBuf]>,
    /// Reused between iterations (moved into the driver task and back).
    bufs: Option<Vec<Vec<u8>>>,
}

impl SpargioSide {
    fn new(fx: &Fixture) -> SpargioSide {
        let rt = spargio::Runtime::builder()
            .shards(WORKERS)
            .build()
            .expect("spargio runtime");
        let handle = rt.handle();
        let open = {
            let handle = handle.clone();
            let path = fx.data.clone();
            handle
                .clone()
                .spawn_stealable(async move { spargio::fs::File::open(&handle, path).await })
                .expect("spawn open")
        };
        let file = spargio::block_on(open)
            .expect("open task")
            .expect("open data file");
        SpargioSide {
            _rt: rt,
            handle,
            file: Arc::new(file),
            meta: fx.meta.clone(),
            bufs: Some(read_buffers(QD, false)),
        }
    }

    /// Runs `f(file, bufs)` as a stealable task and waits for it.
    fn run<F, Fut>(&mut self, f: F) -> u64
    where
        F: FnOnce(Arc<spargio::fs::File>, Vec<Vec<u8>>) -> Fut,
        Fut: Future<Output = (u64, Vec<Vec<u8>>)> + Send + 'static,
    {
        let bufs = self
            .bufs
            .take()
            .expect("buffers are home between iterations");
        let task = self
            .handle
            .spawn_stealable(f(self.file.clone(), bufs))
            .expect("spawn driver");
        let (sum, bufs) = spargio::block_on(task).expect("driver task");
        self.bufs = Some(bufs);
        sum
    }

    fn reads_qd1(&mut self, reads: usize) -> u64 {
        self.run(move |file, mut bufs| async move {
            let mut buf = bufs.pop().expect("a buffer");
            let mut sum = 0;
            for i in 0..reads {
                let (res, back) = file.read_at_into(offset_of(i), buf).await;
                buf = back;
                sum += check_block(i, res, &buf);
            }
            bufs.push(buf);
            (sum, bufs)
        })
    }

    /// Depth 32 spread over the shards: one stealable task per shard
    /// (the scheduler puts them on different shards), each keeping
    /// `QD / WORKERS` reads in flight over every `WORKERS`-th read. One task
    /// with all 32 in flight uses one shard's ring only and measured about
    /// twice as slow.
    fn reads_qd(&mut self, reads: usize) -> u64 {
        let mut bufs = self
            .bufs
            .take()
            .expect("buffers are home between iterations");
        let per_part = bufs.len() / WORKERS;
        let parts: Vec<_> = (0..WORKERS)
            .map(|part| {
                let mut mine: Vec<Vec<u8>> = bufs.drain(..per_part).collect();
                let file = self.file.clone();
                self.handle
                    .spawn_stealable(async move {
                        let file = &*file;
                        let indices = part_of(reads, part, WORKERS);
                        let sum = reads_in_flight(indices, &mut mine, |i, buf| async move {
                            let (res, buf) = file.read_at_into(offset_of(i), buf).await;
                            (i, res, buf)
                        })
                        .await;
                        (sum, mine)
                    })
                    .expect("spawn part")
            })
            .collect();
        let mut sum = 0;
        for part in parts {
            let (part_sum, mine) = spargio::block_on(part).expect("part task");
            sum += part_sum;
            bufs.extend(mine);
        }
        self.bufs = Some(bufs);
        sum
    }

    fn metadata(&mut self, lookups: usize) -> u64 {
        let meta = self.meta.clone();
        let handle = self.handle.clone();
        self.run(move |_, bufs| async move {
            let mut sum = 0;
            for j in 0..lookups {
                sum += spargio::fs::metadata_lite(&handle, &meta[j % meta.len()])
                    .await
                    .expect("metadata")
                    .size;
            }
            (sum, bufs)
        })
    }

    /// `reads` `spargio::fs::read`s of `path`, one at a time.
    fn whole(&mut self, which: usize, path: &std::path::Path, reads: usize) -> u64 {
        let path = path.to_owned();
        let handle = self.handle.clone();
        self.run(move |_, bufs| async move {
            let mut sum = 0;
            for _ in 0..reads {
                sum += check_whole(which, spargio::fs::read(&handle, &path).await);
            }
            (sum, bufs)
        })
    }
}

// ----------------------------------------------------------------- compio

#[derive(Clone, Copy, Debug)]
enum CompioJob {
    /// Reads `0..reads`, one at a time.
    ReadsQd1(usize),
    /// Part `part` of `parts` of reads `0..reads`, `QD / parts` in flight.
    ReadsQd {
        reads: usize,
        part: usize,
        parts: usize,
    },
    /// `lookups` metadata lookups, one at a time.
    Metadata(usize),
    /// `reads` reads of whole-file fixture `which`, one at a time.
    Whole { which: usize, reads: usize },
}

/// Persistent compio runtimes, one per thread (compio is thread-per-core),
/// each with the data file opened on it once. The benchmark thread hands
/// jobs over channels and waits for the checksums. A serial stream (depth
/// 1, metadata) runs on one runtime; depth 32 is split over all of them.
struct CompioPool {
    jobs: Vec<mpsc::Sender<CompioJob>>,
    done: mpsc::Receiver<u64>,
    threads: Vec<thread::JoinHandle<()>>,
}

impl CompioPool {
    fn new(fx: &Fixture) -> CompioPool {
        let (done_tx, done) = mpsc::channel();
        let (jobs, threads) = (0..WORKERS)
            .map(|_| {
                let (jobs, job_rx) = mpsc::channel::<CompioJob>();
                let done_tx = done_tx.clone();
                let data = fx.data.clone();
                let meta = fx.meta.clone();
                let whole = fx.whole.clone();
                let thread = thread::spawn(move || {
                    let rt = compio::runtime::Runtime::new().expect("compio runtime");
                    let file = rt
                        .block_on(compio::fs::File::open(&data))
                        .expect("open data file");
                    let mut bufs = read_buffers(QD, false);
                    while let Ok(job) = job_rx.recv() {
                        let sum = rt.block_on(compio_job(job, &file, &meta, &whole, &mut bufs));
                        if done_tx.send(sum).is_err() {
                            break;
                        }
                    }
                });
                (jobs, thread)
            })
            .unzip();
        CompioPool {
            jobs,
            done,
            threads,
        }
    }

    /// Runs `job` on the first runtime.
    fn run_one(&self, job: CompioJob) -> u64 {
        self.jobs[0].send(job).expect("compio worker alive");
        self.done.recv().expect("compio worker alive")
    }

    /// Depth 32 over all runtimes; returns the summed checksum.
    fn reads_qd(&self, reads: usize) -> u64 {
        let parts = self.jobs.len();
        for (part, jobs) in self.jobs.iter().enumerate() {
            jobs.send(CompioJob::ReadsQd { reads, part, parts })
                .expect("compio worker alive");
        }
        (0..parts)
            .map(|_| self.done.recv().expect("compio worker alive"))
            .sum()
    }
}

async fn compio_job(
    job: CompioJob,
    file: &compio::fs::File,
    meta: &[PathBuf],
    whole: &[PathBuf],
    bufs: &mut Vec<Vec<u8>>,
) -> u64 {
    use compio::buf::BufResult;
    use compio::io::AsyncReadAt;

    match job {
        CompioJob::ReadsQd1(reads) => {
            let mut buf = bufs.pop().expect("a buffer");
            let mut sum = 0;
            for i in 0..reads {
                let BufResult(res, back) = file.read_at(buf, offset_of(i)).await;
                buf = back;
                sum += check_block(i, res, &buf);
            }
            bufs.push(buf);
            sum
        }
        CompioJob::ReadsQd { reads, part, parts } => {
            let mut mine = bufs.split_off(bufs.len() - QD / parts);
            let sum = reads_in_flight(
                part_of(reads, part, parts),
                &mut mine,
                |i, buf| async move {
                    let BufResult(res, buf) = file.read_at(buf, offset_of(i)).await;
                    (i, res, buf)
                },
            )
            .await;
            bufs.append(&mut mine);
            sum
        }
        CompioJob::Metadata(lookups) => {
            let mut sum = 0;
            for j in 0..lookups {
                sum += compio::fs::metadata(&meta[j % meta.len()])
                    .await
                    .expect("metadata")
                    .len();
            }
            sum
        }
        CompioJob::Whole { which, reads } => {
            let mut sum = 0;
            for _ in 0..reads {
                sum += check_whole(which, compio::fs::read(&whole[which]).await);
            }
            sum
        }
    }
}

impl Drop for CompioPool {
    fn drop(&mut self) {
        // Closing the job channels ends the workers.
        self.jobs.clear();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

// ------------------------------------------------------------- benchmarks

fn fs_read_rtt_4k(c: &mut Criterion, fx: &Fixture) {
    let want = expected_read_sum(RTT_READS);
    let mut group = cpu::Group::new(c, "fs_read_rtt_4k");
    group.throughput(Throughput::Elements(RTT_READS as u64));
    {
        let mut side = TokioSide::new(fx);
        group.bench("tokio_spawn_blocking_pread_qd1", || {
            assert_eq!(black_box(side.reads_qd1(RTT_READS)), want)
        });
    }
    #[cfg(all(tokio_unstable, feature = "tokio-uring"))]
    {
        let mut side = TokioUringSide::new(fx);
        group.bench("tokio_uring_seek_read_qd1", || {
            assert_eq!(black_box(side.reads_qd1(Seek::Tokio, RTT_READS)), want)
        });
        group.bench("tokio_uring_dup_lseek_read_qd1", || {
            assert_eq!(black_box(side.reads_qd1(Seek::Dup, RTT_READS)), want)
        });
    }
    {
        let mut side = SpargioSide::new(fx);
        group.bench("spargio_fs_read_at_qd1", || {
            assert_eq!(black_box(side.reads_qd1(RTT_READS)), want)
        });
    }
    {
        let pool = CompioPool::new(fx);
        group.bench("compio_fs_read_at_qd1", || {
            assert_eq!(
                black_box(pool.run_one(CompioJob::ReadsQd1(RTT_READS))),
                want
            )
        });
    }
    group.finish();
}

fn fs_read_throughput_4k_qd32(c: &mut Criterion, fx: &Fixture) {
    let want = expected_read_sum(QD32_READS);
    let mut group = cpu::Group::new(c, "fs_read_throughput_4k_qd32");
    group.throughput(Throughput::Elements(QD32_READS as u64));
    {
        let mut side = TokioSide::new(fx);
        group.bench("tokio_spawn_blocking_pread_qd32", || {
            assert_eq!(black_box(side.reads_qd(QD32_READS)), want)
        });
    }
    #[cfg(all(tokio_unstable, feature = "tokio-uring"))]
    {
        let mut side = TokioUringSide::new(fx);
        group.bench("tokio_uring_seek_read_qd32", || {
            assert_eq!(black_box(side.reads_qd(Seek::Tokio, QD32_READS)), want)
        });
        group.bench("tokio_uring_dup_lseek_read_qd32", || {
            assert_eq!(black_box(side.reads_qd(Seek::Dup, QD32_READS)), want)
        });
    }
    {
        let mut side = SpargioSide::new(fx);
        group.bench("spargio_fs_read_at_qd32", || {
            assert_eq!(black_box(side.reads_qd(QD32_READS)), want)
        });
    }
    {
        let pool = CompioPool::new(fx);
        group.bench("compio_fs_read_at_qd32", || {
            assert_eq!(black_box(pool.reads_qd(QD32_READS)), want)
        });
    }
    group.finish();
}

fn fs_metadata_rtt(c: &mut Criterion, fx: &Fixture) {
    let want = fx.meta_sum;
    let mut group = cpu::Group::new(c, "fs_metadata_rtt");
    group.throughput(Throughput::Elements(META_LOOKUPS as u64));
    {
        let mut side = TokioSide::new(fx);
        group.bench("tokio_spawn_blocking_metadata", || {
            assert_eq!(black_box(side.metadata(META_LOOKUPS)), want)
        });
    }
    {
        let mut side = SpargioSide::new(fx);
        group.bench("spargio_metadata_lite", || {
            assert_eq!(black_box(side.metadata(META_LOOKUPS)), want)
        });
    }
    {
        let pool = CompioPool::new(fx);
        group.bench("compio_metadata", || {
            assert_eq!(
                black_box(pool.run_one(CompioJob::Metadata(META_LOOKUPS))),
                want
            )
        });
    }
    group.finish();
}

/// One group per whole-file fixture: `WHOLE_READS` `fs::read`s of it, one
/// at a time.
fn fs_read_whole_file(c: &mut Criterion, fx: &Fixture) {
    for (which, &(size, name)) in WHOLE_FILES.iter().enumerate() {
        let path = &fx.whole[which];
        let want = (size * WHOLE_READS) as u64;
        let mut group = cpu::Group::new(c, name);
        group.throughput(Throughput::Bytes(want));
        {
            let mut side = TokioSide::new(fx);
            group.bench("tokio_fs_read", || {
                assert_eq!(black_box(side.whole(which, path, WHOLE_READS)), want)
            });
        }
        #[cfg(all(tokio_unstable, feature = "tokio-uring"))]
        {
            let mut side = TokioUringSide::new(fx);
            group.bench("tokio_uring_fs_read", || {
                assert_eq!(black_box(side.whole(which, path, WHOLE_READS)), want)
            });
        }
        {
            let mut side = SpargioSide::new(fx);
            group.bench("spargio_fs_read", || {
                assert_eq!(black_box(side.whole(which, path, WHOLE_READS)), want)
            });
        }
        {
            let pool = CompioPool::new(fx);
            group.bench("compio_fs_read", || {
                assert_eq!(
                    black_box(pool.run_one(CompioJob::Whole {
                        which,
                        reads: WHOLE_READS
                    })),
                    want
                )
            });
        }
        group.finish();
    }
}

fn main() {
    // Not `criterion_main!`: the fixtures are made once for all groups and
    // removed at the end.
    let fx = Fixture::new().expect("create fs fixtures");
    let mut c = Criterion::default().configure_from_args();
    fs_read_rtt_4k(&mut c, &fx);
    fs_read_throughput_4k_qd32(&mut c, &fx);
    fs_metadata_rtt(&mut c, &fx);
    fs_read_whole_file(&mut c, &fx);
    c.final_summary();
    drop(fx);
}

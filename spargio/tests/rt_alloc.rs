//! Steady-state allocation counts, with a counting global allocator.
//! One test in this binary, so nothing else allocates concurrently.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

use spargio::{block_on, Event, ShardCtx};

struct Counting;

static ALLOCS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// Set on the test's own thread: its bookkeeping (e.g. `block_on`'s
    /// parker, created while a measured phase may already be running on a
    /// shard) is not the runtime's and is not counted.
    static UNCOUNTED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

fn count() {
    if !UNCOUNTED.try_with(std::cell::Cell::get).unwrap_or(false) {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
    }
}

// SAFETY: forwards to the system allocator unchanged; only counts calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: same contract as ours.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: same contract as ours.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocs() -> u64 {
    ALLOCS.load(Ordering::Relaxed)
}

/// Allocations on the steady-state paths of `rt`: (message round trips,
/// spawns and their count, file reads and their count).
fn measure(rt: spargio::Runtime) -> (u64, u64, u64, u64, u64) {
    UNCOUNTED.with(|c| c.set(true));
    let h = rt.handle();
    h.spawn_pinned(1, async {
        let ctx = ShardCtx::current().unwrap();
        loop {
            let Event::RingMsg { from, tag, val } = ctx.next_event().await;
            ctx.send_raw_nowait(from, tag, val).unwrap();
        }
    })
    .unwrap();
    let h2 = h.clone();
    let (msg_allocs, spawn_allocs, spawns) = block_on(
        h.spawn_pinned(0, async move {
            let ctx = ShardCtx::current().unwrap();
            let round_trips = |n: u32| {
                let ctx = ctx.clone();
                async move {
                    for i in 0..n {
                        ctx.send_raw_nowait(1, 1, i).unwrap();
                        ctx.next_event().await;
                    }
                }
            };
            let spawn_join = |n: u64| {
                let h2 = h2.clone();
                async move {
                    for i in 0..n {
                        assert_eq!(
                            h2.spawn_stealable(async move { i }).unwrap().await.unwrap(),
                            i
                        );
                    }
                }
            };
            // Warm up: mailboxes, waiter lists, queues and slabs reach
            // their steady size.
            round_trips(1_000).await;
            spawn_join(1_000).await;

            let before = allocs();
            round_trips(10_000).await;
            let msg_allocs = allocs() - before;

            let spawns = 10_000;
            let before = allocs();
            spawn_join(spawns).await;
            (msg_allocs, allocs() - before, spawns)
        })
        .unwrap(),
    )
    .unwrap();
    // File reads with a reused buffer, on the task's own shard.
    let path = std::env::temp_dir().join(format!("spargio-alloc-{}", std::process::id()));
    std::fs::write(&path, vec![3u8; 1 << 16]).unwrap();
    let h3 = h.clone();
    let p = path.clone();
    let (read_allocs, reads) = block_on(
        h.spawn_pinned(0, async move {
            let file = spargio::fs::File::open(&h3, &p).await.unwrap();
            let mut buf = Vec::with_capacity(4096);
            let read = |n: u64, mut b: Vec<u8>| {
                let file = &file;
                async move {
                    for i in 0..n {
                        b.clear();
                        let (res, back) = file.read_at_into((i % 16) * 4096, b).await;
                        assert_eq!(res.unwrap(), 4096);
                        b = back;
                    }
                    b
                }
            };
            buf = read(1_000, buf).await;
            let reads = 10_000;
            let before = allocs();
            buf = read(reads, buf).await;
            let inline_allocs = allocs() - before;
            // The same through the ring (the unbound lane never reads
            // inline), on this shard's ring or the other's.
            let native = h3.uring_native_unbound();
            let fd = file.native_fd();
            let ring_read = |n: u64, mut b: Vec<u8>| {
                let (native, fd) = (&native, &fd);
                async move {
                    for i in 0..n {
                        b.clear();
                        let (res, back) = native.read_at_into(fd, (i % 16) * 4096, b).await;
                        assert_eq!(res.unwrap(), 4096);
                        b = back;
                    }
                    b
                }
            };
            buf = ring_read(1_000, buf).await;
            let before = allocs();
            let _ = ring_read(reads, buf).await;
            (inline_allocs + allocs() - before, 2 * reads)
        })
        .unwrap(),
    )
    .unwrap();
    std::fs::remove_file(path).unwrap();
    (msg_allocs, spawn_allocs, spawns, read_allocs, reads)
}

#[test]
fn steady_state_paths_do_not_allocate() {
    let builder = spargio::RuntimeBuilder::new().shards(2);
    // The shards' tokio runtimes have their own test below.
    #[cfg(feature = "tokio-compat")]
    let builder = builder.tokio_compat(false);
    let (msg_allocs, spawn_allocs, spawns, read_allocs, reads) = measure(builder.build().unwrap());
    eprintln!(
        "allocations: {msg_allocs} for 10000 message round trips, {spawn_allocs} for {spawns} \
         spawn+join, {read_allocs} for {reads} file reads"
    );
    // File reads, inline and through the ring: the op-table slot, SQE,
    // waker and fd handle are all reused; nothing per read.
    assert_eq!(read_allocs, 0, "file reads allocated");
    // Messages: nothing per message, on either shard.
    assert_eq!(msg_allocs, 0, "message round trips allocated");
    // Spawns: the task itself (one allocation), plus at most an amortised
    // queue block now and then.
    assert!(
        spawn_allocs <= spawns + spawns / 10,
        "{spawn_allocs} allocations for {spawns} spawns"
    );

    // With each shard driving a tokio runtime: a busy shard turns it
    // through `block_on`, whose fresh context allocates the one deferred
    // waker of the turn; turns of an unused runtime back off to one per
    // 64 loop turns (`scheduler/tokio_shard.rs`), so the paths above stay
    // well under one allocation per 32 operations.
    #[cfg(feature = "tokio-compat")]
    {
        let rt = spargio::RuntimeBuilder::new()
            .shards(2)
            .tokio_compat(true)
            .build()
            .unwrap();
        let (msg_allocs, spawn_allocs, spawns, read_allocs, reads) = measure(rt);
        eprintln!(
            "with tokio-compat: {msg_allocs} for 10000 message round trips, {spawn_allocs} for \
             {spawns} spawn+join, {read_allocs} for {reads} file reads"
        );
        assert!(
            msg_allocs <= 10_000 / 32,
            "message round trips: {msg_allocs}"
        );
        assert!(read_allocs <= reads / 32, "file reads: {read_allocs}");
        assert!(
            spawn_allocs <= spawns + spawns / 10 + spawns / 32,
            "spawns: {spawn_allocs}"
        );
    }
}

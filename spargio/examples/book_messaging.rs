//! The guide's chapter on messaging (`book/src/messaging.md`): a typed
//! message, a counter shard, backpressure, batches, a ticket, and a message
//! from a thread outside the runtime.
//!
//! ```text
//! cargo run -p spargio --example book_messaging
//! ```

use spargio::{Event, Runtime, RuntimeBuilder, SendError, ShardCtx, ShardId};

// ANCHOR: message
/// Commands for the counter shard, carried as `(tag, val)` pairs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cmd {
    Add(u32),
    Report,
    Total(u32),
    Stop,
}

impl spargio::RingMsg for Cmd {
    fn encode(&self) -> (u16, u32) {
        match *self {
            Cmd::Add(n) => (1, n),
            Cmd::Report => (2, 0),
            Cmd::Total(n) => (3, n),
            Cmd::Stop => (4, 0),
        }
    }

    fn decode(tag: u16, val: u32) -> Option<Cmd> {
        match tag {
            1 => Some(Cmd::Add(val)),
            2 => Some(Cmd::Report),
            3 => Some(Cmd::Total(val)),
            4 => Some(Cmd::Stop),
            _ => None,
        }
    }
}
// ANCHOR_END: message

// ANCHOR: owner
/// Owns a counter on its shard: no lock, since nothing else touches it.
async fn counter() -> u32 {
    let ctx = ShardCtx::current().expect("pinned on a shard");
    let mut total = 0u32;
    loop {
        let event = ctx.next_event().await;
        let Event::RingMsg { from, .. } = event;
        match event.decode::<Cmd>() {
            Some(Cmd::Add(n)) => total += n,
            Some(Cmd::Report) => {
                // Refused at once, or accepted with a ticket to await.
                let ticket = ctx.send(from, Cmd::Total(total)).expect("room");
                ticket.await.expect("reply");
            }
            // From a thread outside the runtime `from` is
            // `Event::EXTERNAL_SENDER` (`event.sender()` is `None`).
            Some(Cmd::Stop) => return total,
            _ => panic!("unexpected event {event:?}"),
        }
    }
}
// ANCHOR_END: owner

// ANCHOR: retry
/// Sends, yielding to the shard while the target's queue is full: the
/// message is never dropped, and yielding lets the target run and drain.
async fn send_with_retry(ctx: &ShardCtx, target: ShardId, cmd: Cmd) {
    loop {
        match ctx.send_nowait(target, cmd) {
            Ok(()) => return,
            Err(SendError::Backpressure) => spargio::yield_now().await,
            Err(err) => panic!("send to shard {target}: {err}"),
        }
    }
}
// ANCHOR_END: retry

// ANCHOR: hot
const STOP: u16 = 100;
const MORE_WORK: u16 = 101;

/// A stop signal on the hot lane, and work notifications summed into a
/// counter instead of queued one by one.
fn hot_lanes() -> Result<(), Box<dyn std::error::Error>> {
    let rt = RuntimeBuilder::new()
        .shards(2)
        .hot_msg_tag(STOP)
        .coalesced_hot_msg_tag(MORE_WORK)
        .build()?;
    let handle = rt.handle();
    let consumer = handle.spawn_pinned(1, async {
        let ctx = ShardCtx::current().unwrap();
        let mut units = 0u64;
        while units < 600 {
            // Takes the whole sum so far: a burst costs one wake.
            units += ctx.next_hot_count(MORE_WORK).await;
        }
        // Hot events never wait behind general ones (`next_event`).
        let stop = ctx.next_hot_event().await;
        assert_eq!(stop.payload(), (STOP, 0));
        units
    })?;
    handle.spawn_pinned(0, async {
        let ctx = ShardCtx::current().unwrap();
        for _ in 0..100 {
            ctx.send_many_raw_nowait(1, [(MORE_WORK, 1), (MORE_WORK, 5)])
                .expect("room in the mailbox");
        }
        ctx.send_raw_nowait(1, STOP, 0)
            .expect("room in the mailbox");
    })?;
    assert_eq!(spargio::block_on(consumer)?, 600);
    Ok(())
}
// ANCHOR_END: hot

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // ANCHOR: driver
    // A small queue per (sender, target) pair, so that backpressure shows.
    let rt: Runtime = RuntimeBuilder::new()
        .shards(2)
        .msg_ring_queue_capacity(8)
        .build()?;
    let handle = rt.handle();
    let owner = handle.spawn_pinned(1, counter())?;

    let driver = handle.spawn_pinned(0, async {
        let ctx = ShardCtx::current().unwrap();
        // One at a time, without tickets; retried on backpressure.
        for _ in 0..1000 {
            send_with_retry(&ctx, 1, Cmd::Add(1)).await;
        }
        // A batch: all of it is queued or none of it, with one doorbell.
        let batch = [Cmd::Add(10); 4];
        while let Err(SendError::Backpressure) = ctx.send_many_nowait(1, batch) {
            spargio::yield_now().await;
        }
        // A barrier: every doorbell owed for the sends above has been
        // submitted to the kernel once this resolves.
        ctx.flush().expect("flush").await.unwrap();
        // Ask for the total (the owner answers with a ticketed `send`).
        send_with_retry(&ctx, 1, Cmd::Report).await;
        match ctx.next_event().await.decode::<Cmd>() {
            Some(Cmd::Total(n)) => n,
            other => panic!("expected a total, got {other:?}"),
        }
    })?;
    assert_eq!(spargio::block_on(driver)?, 1040);
    // ANCHOR_END: driver

    // ANCHOR: external
    // From this (non-runtime) thread: the message travels through shard
    // 1's inbox and eventfd, and arrives from `Event::EXTERNAL_SENDER`.
    handle.remote(1).send_nowait(Cmd::Stop)?;
    assert_eq!(spargio::block_on(owner)?, 1040);
    // ANCHOR_END: external

    let stats = handle.stats_snapshot();
    println!(
        "messages: {} sent, {} consumed, {} refused for backpressure, {} doorbells",
        stats.totals.ring_msgs_submitted,
        stats.totals.ring_msgs_completed,
        stats.totals.ring_msgs_backpressure,
        stats.totals.doorbells_sent
    );
    hot_lanes()
}

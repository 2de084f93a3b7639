//! The reference crate's (spargio 0.5.x) API shapes, used exactly as code
//! written against it uses them, so that such code compiles here
//! unchanged: `ShardCtx::remote` as an `Option`, tickets behind a
//! synchronous `Result`, an irrefutable `Event::RingMsg`, event futures
//! that outlive the `ShardCtx` they came from, batches of any
//! `IntoIterator`, `DuSummary::total_bytes`, and the two-stage
//! `BoundaryClient::call`.

mod common;

use std::time::Duration;

use common::runtime;
use spargio::boundary::{self, BoundaryError};
use spargio::fs::{du, DuOptions};
use spargio::{block_on, Event, RingMsg, RuntimeBuilder, SendError, ShardCtx};

const TAG: u16 = 13;

#[derive(Clone, Copy, Debug, PartialEq)]
struct Add(u32);

impl RingMsg for Add {
    fn encode(&self) -> (u16, u32) {
        (TAG, self.0)
    }
    fn decode(tag: u16, val: u32) -> Option<Self> {
        (tag == TAG).then_some(Add(val))
    }
}

/// Receives `n` events on shard 1 (as `(from, tag, val)`).
fn receive(h: &spargio::RuntimeHandle, n: usize) -> spargio::JoinHandle<Vec<(usize, u16, u32)>> {
    h.spawn_pinned(1, async move {
        let mut got = Vec::new();
        while got.len() < n {
            let next = ShardCtx::current().unwrap().next_event();
            let Event::RingMsg { from, tag, val } = next.await;
            got.push((from, tag, val));
        }
        got
    })
    .unwrap()
}

// ===== 1. ShardCtx::remote is an Option =====

#[test]
fn shard_ctx_remote_is_none_out_of_range() {
    let rt = runtime(2);
    let (peer, missing) = block_on(
        rt.handle()
            .spawn_pinned(0, async {
                let ctx = ShardCtx::current().unwrap();
                let peer = ctx.remote(1).map(|p| p.shard_id());
                (peer, ctx.remote(2).is_none())
            })
            .unwrap(),
    )
    .unwrap();
    assert_eq!(peer, Some(1));
    assert!(missing, "remote(2) of a 2-shard runtime must be None");
}

// ===== 2. send_raw / flush: Result<SendTicket, SendError> =====

#[test]
fn send_raw_through_a_remote_ticket_after_a_sync_result() {
    let rt = runtime(2);
    let h = rt.handle();
    let rx = receive(&h, 3);
    h.spawn_pinned(0, async {
        let ctx = ShardCtx::current().unwrap();
        let peer = ctx.remote(1).unwrap();
        for v in [5, 6] {
            peer.send_raw(1, v).unwrap().await.unwrap();
        }
        ctx.send_raw(1, 2, 7).unwrap().await.unwrap();
        peer.flush().expect("flush accepted").await.unwrap();
        ctx.flush().expect("flush accepted").await.unwrap();
    })
    .unwrap();
    assert_eq!(block_on(rx).unwrap(), vec![(0, 1, 5), (0, 1, 6), (0, 2, 7)]);
}

#[test]
fn a_refused_send_fails_before_any_await() {
    let rt = RuntimeBuilder::new()
        .shards(2)
        .msg_ring_queue_capacity(2)
        .build()
        .unwrap();
    let h = rt.handle();
    let errs = block_on(
        h.spawn_pinned(0, async {
            let ctx = ShardCtx::current().unwrap();
            let invalid = ctx.send_raw(9, 1, 1).map(drop);
            let typed = ctx.send(9, Add(1)).map(drop);
            // Nobody reads shard 1's mailbox: the third send does not fit.
            ctx.send_raw(1, 1, 1).unwrap().await.unwrap();
            ctx.send_raw(1, 1, 2).unwrap().await.unwrap();
            let full = ctx.send_raw(1, 1, 3).map(drop);
            (invalid, typed, full)
        })
        .unwrap(),
    )
    .unwrap();
    assert_eq!(errs.0, Err(SendError::InvalidShard(9)));
    assert_eq!(errs.1, Err(SendError::InvalidShard(9)));
    assert_eq!(errs.2, Err(SendError::Backpressure));
    // From outside the runtime too.
    let remote = h.remote(1);
    let sent: Vec<_> = (0..3).map(|v| remote.send_raw(1, v).map(drop)).collect();
    assert_eq!(sent, vec![Ok(()), Ok(()), Err(SendError::Backpressure)]);
    assert!(block_on(remote.flush().unwrap()).is_ok());
}

// ===== 3. Event::RingMsg is irrefutable =====

#[test]
fn event_is_matched_irrefutably_even_from_outside() {
    let rt = runtime(2);
    let h = rt.handle();
    let rx = h
        .spawn_pinned(1, async {
            let ctx = ShardCtx::current().unwrap();
            let Event::RingMsg { from, tag, val } = ctx.next_event().await;
            let first = (from, tag, val);
            let event = ctx.next_event().await;
            let Event::RingMsg { from, tag, val } = event;
            (first, (from, tag, val), event.sender())
        })
        .unwrap();
    h.spawn_pinned(0, async {
        ShardCtx::current()
            .unwrap()
            .send_raw_nowait(1, 4, 40)
            .unwrap();
    })
    .unwrap();
    // Wait until the first one is in before sending the second (order).
    while h.stats_snapshot().totals.ring_msgs_submitted == 0 {
        std::thread::yield_now();
    }
    h.remote(1).send_raw_nowait(5, 50).unwrap();
    let (first, second, sender) = block_on(rx).unwrap();
    assert_eq!(first, (0, 4, 40));
    assert_eq!(second, (Event::EXTERNAL_SENDER, 5, 50));
    assert_eq!(sender, None);
}

// ===== 4. Event futures do not borrow the ShardCtx =====

#[test]
fn event_futures_outlive_the_temporary_ctx() {
    const HOT: u16 = 20;
    const COUNT: u16 = 21;
    let rt = RuntimeBuilder::new()
        .shards(2)
        .hot_msg_tag(HOT)
        .coalesced_hot_msg_tag(COUNT)
        .build()
        .unwrap();
    let h = rt.handle();
    let rx = h
        .spawn_pinned(1, async {
            let next = ShardCtx::current().unwrap().next_event();
            let Event::RingMsg { tag, val, .. } = next.await;
            let hot = ShardCtx::current().unwrap().next_hot_event();
            let Event::RingMsg {
                tag: hot_tag,
                val: hot_val,
                ..
            } = hot.await;
            let count = ShardCtx::current().unwrap().next_hot_count(COUNT);
            ((tag, val), (hot_tag, hot_val), count.await)
        })
        .unwrap();
    h.spawn_pinned(0, async {
        let ctx = ShardCtx::current().unwrap();
        ctx.send_raw(1, 1, 10).unwrap().await.unwrap();
        ctx.send_raw(1, HOT, 11).unwrap().await.unwrap();
        ctx.send_raw(1, COUNT, 12).unwrap().await.unwrap();
    })
    .unwrap();
    assert_eq!(block_on(rx).unwrap(), ((1, 10), (HOT, 11), 12));
}

// ===== 5. Batches of any IntoIterator =====

#[test]
fn batches_take_any_into_iterator() {
    let rt = runtime(2);
    let h = rt.handle();
    let total = 2 + 1 + 1 + 2 + 100 + 2 + 1;
    let rx = receive(&h, total);
    h.spawn_pinned(0, async {
        let ctx = ShardCtx::current().unwrap();
        let peer = ctx.remote(1).unwrap();
        ctx.send_many_raw_nowait(1, [(13, 1), (13, 2)]).unwrap();
        peer.send_many_raw_nowait([(13, 3)]).unwrap();
        // A slice still works.
        let slice: &[(u16, u32)] = &[(13, 4)];
        ctx.send_many_raw_nowait(1, slice).unwrap();
        ctx.send_many_nowait(1, [Add(5), Add(6)]).unwrap();
        // Beyond one stack chunk, from a lazy iterator.
        ctx.send_many_raw_nowait(1, (0..100).map(|v| (14, v)))
            .unwrap();
        ctx.send_many_raw_direct_nowait(1, [(15, 1), (15, 2)])
            .unwrap();
        peer.send_many_nowait(vec![Add(7)]).unwrap();
        ctx.flush().unwrap().await.unwrap();
    })
    .unwrap();
    let mut got = block_on(rx).unwrap();
    // Direct messages overtake queued ones; compare each kind in order.
    let direct: Vec<_> = got.iter().filter(|m| m.1 == 15).copied().collect();
    got.retain(|m| m.1 != 15);
    assert_eq!(direct, vec![(0, 15, 1), (0, 15, 2)]);
    let mut want: Vec<_> = [1, 2, 3, 4, 5, 6].map(|v| (0, TAG, v)).to_vec();
    want.extend((0..100).map(|v| (0, 14, v)));
    want.push((0, TAG, 7));
    assert_eq!(got, want);
}

#[test]
fn a_batch_from_an_iterator_is_all_or_nothing() {
    let rt = RuntimeBuilder::new()
        .shards(2)
        .msg_ring_queue_capacity(4)
        .build()
        .unwrap();
    let h = rt.handle();
    let res = block_on(
        h.spawn_pinned(0, async {
            let ctx = ShardCtx::current().unwrap();
            let too_many = ctx.send_many_raw_nowait(1, (0..5).map(|v| (1, v)));
            let fits = ctx.send_many_raw_nowait(1, (0..4).map(|v| (1, v)));
            (too_many, fits)
        })
        .unwrap(),
    )
    .unwrap();
    assert_eq!(res, (Err(SendError::Backpressure), Ok(())));
    assert_eq!(
        block_on(receive(&h, 4)).unwrap(),
        (0..4).map(|v| (0, 1, v)).collect::<Vec<_>>()
    );
}

// ===== 6. DuSummary::total_bytes =====

#[test]
fn du_summary_has_total_bytes() {
    let dir = std::env::temp_dir().join(format!("spargio-seed-shapes-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    std::fs::write(dir.join("sub/data"), vec![7u8; 10_000]).unwrap();
    let path = dir.clone();
    let usage = block_on(spargio::run(|h| async move {
        du(&h, &path, DuOptions::new()).await
    }))
    .unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let usage = usage.unwrap();
    assert!(usage.total_bytes >= 10_000, "{usage:?}");
    assert_eq!(usage.total_bytes, usage.bytes);
}

// ===== 7. BoundaryClient::call: accepted, then answered =====

#[test]
fn boundary_call_yields_a_ticket_awaited_for_the_reply() {
    let rt = runtime(2);
    let (client, server) = boundary::channel::<u64, u64>(4);
    let ticket = block_on(client.call(7)).expect("queued");
    // Accepted, not yet answered: the server has not even received it.
    rt.handle()
        .spawn_stealable(async move {
            while let Ok(req) = server.recv().await {
                let n = *req.request();
                let _ = req.respond(n * n);
            }
        })
        .unwrap();
    assert_eq!(block_on(ticket), Ok(49));
    let ticket = block_on(client.call_with_timeout(3, Duration::from_secs(60))).unwrap();
    assert_eq!(block_on(ticket), Ok(9));
    // The one-stage helpers.
    assert_eq!(block_on(client.request(5)), Ok(25));
    assert_eq!(
        block_on(client.request_with_timeout(6, Duration::from_secs(60))),
        Ok(36)
    );
}

#[test]
fn boundary_ticket_wait_timeout() {
    // Room for both calls: the first, timed out, stays queued.
    let (client, server) = boundary::channel::<u64, u64>(2);
    let ticket = block_on(client.call(7)).expect("queued");
    let err = block_on(ticket.wait_timeout(Duration::from_millis(10))).unwrap_err();
    assert_eq!(err, BoundaryError::Timeout);
    // The deadline of `call_with_timeout` bounds the ticket too.
    let ticket = block_on(client.call_with_timeout(8, Duration::from_millis(10))).unwrap();
    assert_eq!(block_on(ticket), Err(BoundaryError::Timeout));
    drop(server);
}

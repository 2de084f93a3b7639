//! Hot-tag lanes: routing by tag at the receiver, coalesced counters,
//! bounds.

mod common;

use std::time::Duration;

use spargio::{block_on, Event, RuntimeBuilder, SendError, ShardCtx};

const WORK: u16 = 1;
const STOP: u16 = 2;
const MORE: u16 = 3;

#[test]
fn every_source_is_routed_by_tag() {
    let rt = RuntimeBuilder::new()
        .shards(2)
        .hot_msg_tag(STOP)
        .coalesced_hot_msg_tag(MORE)
        .build()
        .unwrap();
    let h = rt.handle();
    let rx = h
        .spawn_pinned(1, async {
            let ctx = ShardCtx::current().unwrap();
            let mut hot = Vec::new();
            while hot.len() < 3 {
                hot.push(ctx.next_hot_event().await);
            }
            let mut general = Vec::new();
            while general.len() < 3 {
                general.push(ctx.next_event().await);
            }
            let mut more = 0;
            while more < 6 {
                more += ctx.next_hot_count(MORE).await;
            }
            assert_eq!(ctx.try_next_event(), None);
            assert_eq!(ctx.try_take_hot_count(MORE), None);
            (hot, general, more)
        })
        .unwrap();
    block_on(
        h.spawn_pinned(0, async {
            let ctx = ShardCtx::current().unwrap();
            // Mailbox, then direct.
            ctx.send_many_raw_nowait(1, [(WORK, 10), (STOP, 11), (MORE, 1)])
                .unwrap();
            ctx.send_many_raw_direct_nowait(1, [(WORK, 20), (STOP, 21), (MORE, 2)])
                .unwrap();
        })
        .unwrap(),
    )
    .unwrap();
    // From outside the runtime.
    let remote = h.remote(1);
    remote.send_raw_nowait(WORK, 30).unwrap();
    remote.send_raw_nowait(STOP, 31).unwrap();
    remote.send_raw_nowait(MORE, 3).unwrap();
    let (hot, general, more) = block_on(rx).unwrap();
    let mut hot: Vec<_> = hot.iter().map(|e| e.payload()).collect();
    hot.sort_unstable();
    assert_eq!(hot, vec![(STOP, 11), (STOP, 21), (STOP, 31)]);
    let mut general: Vec<_> = general.iter().map(|e| e.payload()).collect();
    general.sort_unstable();
    assert_eq!(general, vec![(WORK, 10), (WORK, 20), (WORK, 30)]);
    assert_eq!(more, 6);
}

#[test]
fn a_waiting_counter_consumer_wakes_on_the_first_update_and_sums_bursts() {
    let rt = RuntimeBuilder::new()
        .shards(2)
        .coalesced_hot_msg_tag(MORE)
        .hot_counter_wake_threshold(1_000)
        .build()
        .unwrap();
    let h = rt.handle();
    let rx = h
        .spawn_pinned(1, async {
            let ctx = ShardCtx::current().unwrap();
            // Far below the threshold: the 0 -> nonzero change wakes it.
            let first = ctx.next_hot_count(MORE).await;
            let mut rest = 0;
            while first + rest < 1 + 1000 * 5 {
                rest += ctx.next_hot_count(MORE).await;
            }
            (first, rest)
        })
        .unwrap();
    std::thread::sleep(Duration::from_millis(20));
    block_on(
        h.spawn_pinned(0, async {
            ShardCtx::current()
                .unwrap()
                .send_raw_nowait(1, MORE, 1)
                .unwrap();
        })
        .unwrap(),
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(20));
    block_on(
        h.spawn_pinned(0, async {
            let ctx = ShardCtx::current().unwrap();
            for _ in 0..1000 {
                while ctx.send_raw_nowait(1, MORE, 5) == Err(SendError::Backpressure) {
                    common::yield_now().await;
                }
            }
        })
        .unwrap(),
    )
    .unwrap();
    let (first, rest) = block_on(rx).unwrap();
    assert_eq!(first, 1);
    assert_eq!(rest, 5000);
}

#[test]
fn a_full_hot_lane_leaves_messages_with_their_senders() {
    let cap = 4;
    let rt = RuntimeBuilder::new()
        .shards(2)
        .msg_ring_queue_capacity(cap)
        .hot_msg_tag(STOP)
        .build()
        .unwrap();
    let h = rt.handle();
    // Shard 1 waits on the general lane only, so sorting fills the hot
    // lane; then the mailbox; then the sender is refused.
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let general = h
        .spawn_pinned(1, async { ShardCtx::current().unwrap().next_event().await })
        .unwrap();
    let accepted = block_on(
        h.spawn_pinned(0, async move {
            let ctx = ShardCtx::current().unwrap();
            let mut accepted = 0u32;
            'send: for i in 0..100u32 {
                // A refusal is retried for a while (shard 1 may sort in
                // the meantime); one that lasts means the lanes are full.
                for _ in 0..50 {
                    match ctx.send_raw_nowait(1, STOP, i) {
                        Ok(()) => {
                            accepted += 1;
                            continue 'send;
                        }
                        Err(SendError::Backpressure) => {
                            spargio::time::sleep(Duration::from_millis(2)).await;
                        }
                        Err(other) => panic!("{other:?}"),
                    }
                }
                break;
            }
            accepted
        })
        .unwrap(),
    )
    .unwrap();
    // The hot lane's 4 plus the mailbox's 4: never more.
    assert_eq!(accepted as usize, 2 * cap);
    go_tx.send(()).unwrap();
    let hot = block_on(
        h.spawn_pinned(1, async move {
            go_rx.recv().unwrap();
            let ctx = ShardCtx::current().unwrap();
            let mut vals = Vec::new();
            while vals.len() < 2 * cap {
                vals.push(ctx.next_hot_event().await.payload().1);
            }
            // A general message still reaches the general waiter.
            ctx.send_raw_nowait(1, WORK, 77).unwrap();
            vals
        })
        .unwrap(),
    )
    .unwrap();
    assert_eq!(hot, (0..2 * cap as u32).collect::<Vec<_>>());
    assert_eq!(
        block_on(general).unwrap(),
        Event::RingMsg {
            from: 1,
            tag: WORK,
            val: 77
        }
    );
}

#[test]
fn coalesced_tags_are_summed_at_the_sender_when_the_mailbox_is_full() {
    let cap = 4;
    let rt = RuntimeBuilder::new()
        .shards(2)
        .msg_ring_queue_capacity(cap)
        .coalesced_hot_msg_tag(MORE)
        .build()
        .unwrap();
    let h = rt.handle();
    // Nobody on shard 1 reads yet: the mailbox fills after `cap` messages.
    let sent = block_on(
        h.spawn_pinned(0, async move {
            let ctx = ShardCtx::current().unwrap();
            for _ in 0..1000 {
                ctx.send_raw_nowait(1, MORE, 3)
                    .expect("a coalesced tag is never refused by a full mailbox");
            }
            // A general tag still is.
            let mut refused = false;
            for i in 0..(2 * cap as u32) {
                refused |= ctx.send_raw_nowait(1, WORK, i) == Err(SendError::Backpressure);
            }
            refused
        })
        .unwrap(),
    )
    .unwrap();
    assert!(sent, "general messages still see backpressure");
    let total = block_on(
        h.spawn_pinned(1, async {
            let ctx = ShardCtx::current().unwrap();
            let mut total = 0;
            while total < 3000 {
                total += ctx.next_hot_count(MORE).await;
            }
            total
        })
        .unwrap(),
    )
    .unwrap();
    assert_eq!(total, 3000, "every unit arrived, none twice");
}

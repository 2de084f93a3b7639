//! Direct messages: `(tag, val)` carried by one `MSG_RING` CQE each.

mod common;

use std::time::Duration;

use common::runtime;
use spargio::{block_on, Event, RuntimeBuilder, SendError, ShardCtx};

/// Collects `n` events on shard `shard`.
fn collect(h: &spargio::RuntimeHandle, shard: usize, n: usize) -> spargio::JoinHandle<Vec<Event>> {
    h.spawn_pinned(shard, async move {
        let ctx = ShardCtx::current().unwrap();
        let mut got = Vec::new();
        while got.len() < n {
            got.push(ctx.next_event().await);
        }
        got
    })
    .unwrap()
}

#[test]
fn direct_messages_carry_sender_tag_and_every_value_bit() {
    // Direct posts are `MSG_RING` CQEs: io_uring's alone.
    let Some(rt) = common::io_uring_runtime(2) else {
        return;
    };
    let h = rt.handle();
    let vals = [0u32, 1, 0x7fff_ffff, 0x8000_0000, u32::MAX];
    let rx = collect(&h, 1, vals.len() + 2);
    // Let shard 1 park: the CQE itself must wake it.
    std::thread::sleep(Duration::from_millis(20));
    let before = h.stats_snapshot();
    block_on(
        h.spawn_pinned(0, async move {
            let ctx = ShardCtx::current().unwrap();
            for (i, v) in vals.into_iter().enumerate() {
                ctx.send_raw_direct_nowait(1, i as u16, v).unwrap();
            }
            ctx.send_many_raw_direct_nowait(1, [(u16::MAX, 7), (40, 41)])
                .unwrap();
        })
        .unwrap(),
    )
    .unwrap();
    let mut got: Vec<(usize, u16, u32)> = block_on(rx)
        .unwrap()
        .into_iter()
        .map(|Event::RingMsg { from, tag, val }| (from, tag, val))
        .collect();
    got.sort_unstable();
    let mut want: Vec<(usize, u16, u32)> = vals
        .iter()
        .enumerate()
        .map(|(i, &v)| (0, i as u16, v))
        .chain([(0, u16::MAX, 7), (0, 40, 41)])
        .collect();
    want.sort_unstable();
    assert_eq!(got, want);
    // They went as direct posts, one each, none refused.
    let after = h.stats_snapshot();
    assert_eq!(after.ring_msgs_direct - before.ring_msgs_direct, 7);
    assert_eq!(after.ring_msgs_direct_resent, 0);
}

#[test]
fn unread_direct_messages_are_bounded_and_a_refused_batch_sends_nothing() {
    let rt = RuntimeBuilder::new()
        .shards(2)
        .msg_ring_queue_capacity(8)
        .build()
        .unwrap();
    let h = rt.handle();
    // Shard 1 reads nothing until told to.
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let sent = block_on(
        h.spawn_pinned(0, async move {
            let ctx = ShardCtx::current().unwrap();
            for i in 0..5 {
                ctx.send_raw_direct_nowait(1, 1, i).unwrap();
            }
            // 5 + 4 > 8: all or none.
            assert_eq!(
                ctx.send_many_raw_direct_nowait(1, [(2, 0), (2, 1), (2, 2), (2, 3)]),
                Err(SendError::Backpressure)
            );
            for i in 5..8 {
                ctx.send_raw_direct_nowait(1, 1, i).unwrap();
            }
            assert_eq!(
                ctx.send_raw_direct_nowait(1, 1, 8),
                Err(SendError::Backpressure)
            );
            8u32
        })
        .unwrap(),
    )
    .unwrap();
    go_tx.send(()).unwrap();
    let rx = h
        .spawn_pinned(1, async move {
            go_rx.recv().unwrap();
            let ctx = ShardCtx::current().unwrap();
            let mut vals = Vec::new();
            for _ in 0..sent {
                match ctx.next_event().await {
                    Event::RingMsg {
                        from: 0,
                        tag: 1,
                        val,
                    } => vals.push(val),
                    other => panic!("unexpected {other:?}"),
                }
            }
            assert!(ctx.try_next_event().is_none(), "the refused batch arrived");
            vals
        })
        .unwrap();
    let mut vals = block_on(rx).unwrap();
    vals.sort_unstable();
    assert_eq!(vals, (0..8).collect::<Vec<_>>());
    // Read: there is room again.
    block_on(
        h.spawn_pinned(0, async {
            ShardCtx::current().unwrap().send_raw_direct_nowait(1, 1, 9)
        })
        .unwrap(),
    )
    .unwrap()
    .unwrap();
}

#[test]
fn where_msg_ring_cannot_go_direct_sends_take_the_queued_path() {
    let rt = runtime(2);
    let h = rt.handle();
    // To itself: the mailbox, arriving as a ring message from itself.
    let own = block_on(
        h.spawn_pinned(1, async {
            let ctx = ShardCtx::current().unwrap();
            ctx.send_raw_direct_nowait(1, 3, 33).unwrap();
            ctx.next_event().await
        })
        .unwrap(),
    )
    .unwrap();
    assert_eq!(
        own,
        Event::RingMsg {
            from: 1,
            tag: 3,
            val: 33
        }
    );
    // From outside the runtime: the inbox, arriving from the external sender.
    let rx = collect(&h, 0, 1);
    h.remote(0).send_raw_direct_nowait(4, 44).unwrap();
    assert_eq!(
        block_on(rx).unwrap(),
        vec![Event::RingMsg {
            from: Event::EXTERNAL_SENDER,
            tag: 4,
            val: 44
        }]
    );
    // A shard that does not exist.
    let err = block_on(
        h.spawn_pinned(0, async {
            ShardCtx::current().unwrap().send_raw_direct_nowait(9, 0, 0)
        })
        .unwrap(),
    )
    .unwrap();
    assert_eq!(err, Err(SendError::InvalidShard(9)));
}

//! Messages between shards: order, flush, backpressure, outside senders.

mod common;

use common::{runtime, yield_now};
use spargio::{block_on, Event, RingMsg, RuntimeBuilder, SendError, ShardCtx};

const DATA: u16 = 1;
const DONE: u16 = 2;

#[test]
fn messages_from_one_sender_arrive_in_order_exactly_once() {
    let rt = runtime(2);
    let h = rt.handle();
    let receiver = h
        .spawn_pinned(1, async {
            let ctx = ShardCtx::current().unwrap();
            let mut next = 0u32;
            loop {
                match ctx.next_event().await {
                    Event::RingMsg {
                        from: 0,
                        tag: DATA,
                        val,
                    } => {
                        assert_eq!(val, next, "out of order or duplicated");
                        next += 1;
                    }
                    Event::RingMsg { tag: DONE, .. } => return next,
                    other => panic!("unexpected {other:?}"),
                }
            }
        })
        .unwrap();
    block_on(
        h.spawn_pinned(0, async {
            let ctx = ShardCtx::current().unwrap();
            let mut i = 0u32;
            while i < 50_000 {
                match ctx.send_raw_nowait(1, DATA, i) {
                    Ok(()) => i += 1,
                    Err(SendError::Backpressure) => yield_now().await,
                    Err(e) => panic!("{e}"),
                }
            }
            // The mailbox may still be full of data: the end marker waits
            // for room like the data did.
            loop {
                match ctx.send_raw(1, DONE, 0) {
                    Ok(sent) => break sent.await.unwrap(),
                    Err(SendError::Backpressure) => yield_now().await,
                    Err(e) => panic!("{e}"),
                }
            }
        })
        .unwrap(),
    )
    .unwrap();
    assert_eq!(block_on(receiver).unwrap(), 50_000);
}

#[test]
fn backpressure_refuses_without_losing_and_recovers() {
    let rt = RuntimeBuilder::new()
        .shards(2)
        .msg_ring_queue_capacity(4)
        .build()
        .unwrap();
    let h = rt.handle();
    let (tx, rx) = std::sync::mpsc::channel();
    // The sender fills the mailbox while nobody consumes.
    block_on(
        h.spawn_pinned(0, async move {
            let ctx = ShardCtx::current().unwrap();
            for v in 0..4 {
                ctx.send_raw_nowait(1, DATA, v).unwrap();
            }
            tx.send(ctx.send_raw_nowait(1, DATA, 99)).unwrap();
            // All-or-nothing batches.
            tx.send(ctx.send_many_raw_nowait(1, [(DATA, 100), (DATA, 101)]))
                .unwrap();
        })
        .unwrap(),
    )
    .unwrap();
    assert_eq!(rx.recv().unwrap(), Err(SendError::Backpressure));
    assert_eq!(rx.recv().unwrap(), Err(SendError::Backpressure));
    assert!(h.stats_snapshot().totals.ring_msgs_backpressure >= 2);
    // Consuming frees room; the refused messages were never queued.
    let got = block_on(
        h.spawn_pinned(1, async {
            let ctx = ShardCtx::current().unwrap();
            let mut got = Vec::new();
            for _ in 0..4 {
                got.push(ctx.next_event().await.payload().1);
            }
            assert_eq!(ctx.try_next_event(), None);
            got
        })
        .unwrap(),
    )
    .unwrap();
    assert_eq!(got, vec![0, 1, 2, 3]);
    block_on(
        h.spawn_pinned(0, async {
            ShardCtx::current()
                .unwrap()
                .send_raw_nowait(1, DATA, 5)
                .unwrap();
        })
        .unwrap(),
    )
    .unwrap();
}

#[test]
fn outside_thread_messages_arrive_in_order_from_the_external_sender() {
    let rt = runtime(2);
    let h = rt.handle();
    let receiver = h
        .spawn_pinned(1, async {
            let ctx = ShardCtx::current().unwrap();
            let mut vals = Vec::new();
            while vals.len() < 1000 {
                match ctx.next_event().await {
                    Event::RingMsg {
                        from: Event::EXTERNAL_SENDER,
                        tag: DATA,
                        val,
                    } => vals.push(val),
                    other => panic!("unexpected {other:?}"),
                }
            }
            vals
        })
        .unwrap();
    let remote = h.remote(1);
    for v in 0..1000 {
        loop {
            match remote.send_raw_nowait(DATA, v) {
                Ok(()) => break,
                Err(SendError::Backpressure) => std::thread::yield_now(),
                Err(e) => panic!("{e}"),
            }
        }
    }
    block_on(remote.flush().unwrap()).unwrap();
    assert_eq!(block_on(receiver).unwrap(), (0..1000).collect::<Vec<_>>());
}

#[test]
fn outside_backpressure_is_reported() {
    let rt = RuntimeBuilder::new()
        .shards(1)
        .msg_ring_queue_capacity(2)
        .build()
        .unwrap();
    let remote = rt.handle().remote(0);
    remote.send_raw_nowait(DATA, 1).unwrap();
    remote.send_raw_nowait(DATA, 2).unwrap();
    assert_eq!(
        remote.send_raw_nowait(DATA, 3),
        Err(SendError::Backpressure)
    );
    assert_eq!(
        remote.send_many_raw_nowait([(DATA, 4)]),
        Err(SendError::Backpressure)
    );
}

#[test]
fn invalid_target_and_closed_runtime_are_errors() {
    let rt = runtime(2);
    let h = rt.handle();
    assert_eq!(
        h.remote(2).send_raw_nowait(DATA, 0),
        Err(SendError::InvalidShard(2))
    );
    let inside = block_on(
        h.spawn_pinned(0, async {
            ShardCtx::current().unwrap().send_raw_nowait(7, DATA, 0)
        })
        .unwrap(),
    )
    .unwrap();
    assert_eq!(inside, Err(SendError::InvalidShard(7)));
    drop(rt);
    assert_eq!(h.remote(0).send_raw_nowait(DATA, 0), Err(SendError::Closed));
}

#[derive(Debug, PartialEq, Clone, Copy)]
enum Cmd {
    Add(u32),
    Stop,
}

impl RingMsg for Cmd {
    fn encode(&self) -> (u16, u32) {
        match *self {
            Cmd::Add(n) => (10, n),
            Cmd::Stop => (11, 0),
        }
    }
    fn decode(tag: u16, val: u32) -> Option<Self> {
        match tag {
            10 => Some(Cmd::Add(val)),
            11 => Some(Cmd::Stop),
            _ => None,
        }
    }
}

#[test]
fn typed_messages_and_batches_round_trip() {
    let rt = runtime(2);
    let h = rt.handle();
    let summer = h
        .spawn_pinned(1, async {
            let ctx = ShardCtx::current().unwrap();
            let mut sum = 0;
            loop {
                match ctx.next_event().await.decode::<Cmd>() {
                    Some(Cmd::Add(n)) => sum += n,
                    Some(Cmd::Stop) => return sum,
                    None => panic!("undecodable"),
                }
            }
        })
        .unwrap();
    block_on(
        h.spawn_pinned(0, async {
            let ctx = ShardCtx::current().unwrap();
            let batch: Vec<Cmd> = (1..=100).map(Cmd::Add).collect();
            ctx.send_many_nowait(1, batch).unwrap();
            ctx.flush().unwrap().await.unwrap();
            ctx.send(1, Cmd::Stop).unwrap().await.unwrap();
        })
        .unwrap(),
    )
    .unwrap();
    assert_eq!(block_on(summer).unwrap(), 5050);
}

#[test]
fn several_waiters_share_one_event_stream() {
    let rt = runtime(2);
    let h = rt.handle();
    let waiters: Vec<_> = (0..4)
        .map(|_| {
            h.spawn_local_on(1, |ctx| async move { ctx.next_event().await.payload().1 })
                .unwrap()
        })
        .collect();
    block_on(
        h.spawn_pinned(0, async {
            let ctx = ShardCtx::current().unwrap();
            for v in 0..4 {
                ctx.send_raw(1, DATA, v).unwrap().await.unwrap();
            }
        })
        .unwrap(),
    )
    .unwrap();
    let mut got: Vec<u32> = waiters.into_iter().map(|w| block_on(w).unwrap()).collect();
    got.sort();
    assert_eq!(got, vec![0, 1, 2, 3]);
}

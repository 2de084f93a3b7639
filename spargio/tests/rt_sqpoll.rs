//! Rings with a kernel submission-queue polling thread (`SQPOLL`): once
//! that thread idles, submissions must wake it (`IORING_ENTER_SQ_WAKEUP`),
//! or they wait until the submitting shard next parks.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use spargio::{Event, ShardCtx};

#[test]
fn a_message_sent_before_the_sender_blocks_arrives_while_it_blocks() {
    common::within_hang_bound(|| {
        let Some(builder) = common::io_uring_builder() else {
            return;
        };
        let rt = builder.shards(2).io_uring_sqpoll(Some(5)).build().unwrap();
        let h = rt.handle();
        if !h.stats_snapshot().shards.iter().all(|s| s.ring.sqpoll) {
            eprintln!("SKIP: the kernel refused IORING_SETUP_SQPOLL here");
            return;
        }
        let arrived = Arc::new(AtomicBool::new(false));
        let a = arrived.clone();
        let receiver = h
            .spawn_pinned(1, async move {
                let ctx = ShardCtx::current().unwrap();
                let Event::RingMsg { tag, val, .. } = ctx.next_event().await;
                assert_eq!((tag, val), (3, 42));
                a.store(true, Ordering::SeqCst);
            })
            .unwrap();
        let sender = h
            .spawn_pinned(0, async move {
                // Let both SQ threads go idle (idle time 5 ms).
                spargio::time::sleep(Duration::from_millis(50)).await;
                let ctx = ShardCtx::current().unwrap();
                ctx.send_raw_nowait(1, 3, 42).unwrap();
                // Block this shard's thread: the message must not wait for
                // it to park.
                for _ in 0..500 {
                    if arrived.load(Ordering::SeqCst) {
                        return true;
                    }
                    std::thread::sleep(Duration::from_millis(2));
                }
                arrived.load(Ordering::SeqCst)
            })
            .unwrap();
        assert!(
            spargio::block_on(sender).unwrap(),
            "the message waited for the sender to park"
        );
        spargio::block_on(receiver).unwrap();
    });
}

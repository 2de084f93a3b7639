//! Every public `Duration` saturates: `Duration::MAX` means "forever" (no
//! deadline, no next tick), never an overflow panic or an error.

mod common;

use std::time::Duration;

use common::{on_runtime, runtime, within_hang_bound};
use spargio::boundary;
use spargio::net::TcpListener;
use spargio::time::{interval, timeout, MissedTickBehavior};

#[test]
fn interval_of_duration_max_ticks_once_then_never() {
    for behavior in [
        MissedTickBehavior::Burst,
        MissedTickBehavior::Delay,
        MissedTickBehavior::Skip,
    ] {
        let rt = runtime(1);
        let h = rt.handle();
        let ticked_again = within_hang_bound(move || {
            spargio::block_on(
                h.spawn_stealable(async move {
                    let mut every = interval(Duration::MAX);
                    every.set_missed_tick_behavior(behavior);
                    every.tick().await;
                    let again = timeout(Duration::from_millis(50), every.tick()).await;
                    every.reset();
                    let after_reset = timeout(Duration::from_millis(20), every.tick()).await;
                    again.is_ok() || after_reset.is_ok()
                })
                .unwrap(),
            )
            .unwrap()
        });
        assert!(!ticked_again, "{behavior:?}: a second tick");
    }
}

#[test]
fn boundary_recv_timeout_of_duration_max_waits_for_the_request() {
    let rt = runtime(1);
    let (client, server) = boundary::channel::<u32, u32>(1);
    let h = rt.handle();
    let got = within_hang_bound(move || {
        let call = h
            .spawn_stealable(async move { client.call(7).await.unwrap().await })
            .unwrap();
        let req = spargio::block_on(server.recv_timeout(Duration::MAX)).unwrap();
        let n = *req.request();
        req.respond(n + 1).unwrap();
        spargio::block_on(call).unwrap()
    });
    assert_eq!(got, Ok(8));
}

#[test]
fn tcp_defer_accept_of_duration_max_saturates() {
    on_runtime(|h| {
        Box::pin(async move {
            let listener = TcpListener::bind(&h, "127.0.0.1:0").await.unwrap();
            listener.set_defer_accept(Duration::MAX).unwrap();
            // The kernel keeps its own bound; what matters is that it is on.
            assert!(!listener.defer_accept().unwrap().is_zero());
        })
    });
}

#[test]
fn native_sleep_of_duration_max_never_ends() {
    on_runtime(|h| {
        Box::pin(async move {
            let native = h.uring_native_unbound();
            let slept = timeout(Duration::from_millis(50), native.sleep(Duration::MAX)).await;
            assert!(slept.is_err(), "it ended: {slept:?}");
        })
    });
}

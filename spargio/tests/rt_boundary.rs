//! The boundary channel between spargio and tokio, both directions, and
//! every error path.

mod common;

use std::time::Duration;

use common::{runtime, within_hang_bound};
use spargio::boundary::{self, BoundaryError};
use spargio::{block_on, ShardCtx};

fn tokio_rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap()
}

#[test]
fn tokio_clients_call_a_spargio_server() {
    let rt = runtime(2);
    let (client, server) = boundary::channel::<u32, (u32, bool)>(64);
    rt.handle()
        .spawn_stealable(async move {
            while let Ok(req) = server.recv().await {
                let n = *req.request();
                let _ = req.respond((n * 2, ShardCtx::current().is_some()));
            }
        })
        .unwrap();
    let tk = tokio_rt();
    let results = within_hang_bound(move || {
        tk.block_on(async move {
            let calls: Vec<_> = (0..500u32)
                .map(|i| {
                    let c = client.clone();
                    // Accepted, then answered.
                    tokio::spawn(async move { c.call(i).await?.await })
                })
                .collect();
            let mut out = Vec::new();
            for c in calls {
                out.push(c.await.unwrap().unwrap());
            }
            out
        })
    });
    for (i, (doubled, on_spargio)) in results.into_iter().enumerate() {
        assert_eq!(doubled, 2 * i as u32);
        assert!(on_spargio, "server did not run on a spargio shard");
    }
}

#[test]
fn spargio_clients_call_a_tokio_server() {
    let tk = tokio_rt();
    let (client, server) = boundary::channel::<String, usize>(8);
    tk.spawn(async move {
        while let Ok(req) = server.recv().await {
            tokio::time::sleep(Duration::from_micros(50)).await;
            let len = req.request().len();
            let _ = req.respond(len);
        }
    });
    let rt = runtime(2);
    let h = rt.handle();
    let calls: Vec<_> = (0..100usize)
        .map(|i| {
            let c = client.clone();
            h.spawn_stealable(async move { c.request("x".repeat(i)).await })
                .unwrap()
        })
        .collect();
    drop(client);
    for (i, call) in calls.into_iter().enumerate() {
        assert_eq!(block_on(call).unwrap(), Ok(i));
    }
}

#[test]
fn try_call_is_overloaded_when_full_and_call_waits_for_room() {
    let (client, server) = boundary::channel::<u8, u8>(2);
    let before = boundary::stats_snapshot().overloaded;
    let t1 = client.try_call(1).unwrap();
    let t2 = client.try_call(2).unwrap();
    assert_eq!(client.try_call(3).unwrap_err(), BoundaryError::Overloaded);
    assert!(boundary::stats_snapshot().overloaded > before);
    // A waiting call goes through once the server drains.
    let c2 = client.clone();
    let waiting = std::thread::spawn(move || block_on(c2.request(4)));
    let rt = runtime(1);
    rt.handle()
        .spawn_stealable(async move {
            while let Ok(req) = server.recv().await {
                let v = *req.request();
                let _ = req.respond(v + 100);
            }
        })
        .unwrap();
    assert_eq!(block_on(t1), Ok(101));
    assert_eq!(block_on(t2), Ok(102));
    assert_eq!(within_hang_bound(move || waiting.join().unwrap()), Ok(104));
}

#[test]
fn a_timed_out_call_is_reported_to_the_server_as_canceled() {
    let (client, server) = boundary::channel::<u8, u8>(4);
    let ticket = block_on(client.call_with_timeout(1, Duration::from_millis(10))).unwrap();
    let err = block_on(ticket).unwrap_err();
    assert_eq!(err, BoundaryError::Timeout);
    assert_eq!(
        std::io::Error::from(err).kind(),
        std::io::ErrorKind::TimedOut
    );
    // The queued request whose caller gave up is skipped, not served.
    let fresh = client.try_call(2).unwrap();
    let req = block_on(server.recv()).unwrap();
    assert_eq!(*req.request(), 2);
    assert!(!req.is_canceled());
    req.respond(20).unwrap();
    assert_eq!(block_on(fresh), Ok(20));
    // A caller that drops its ticket while queued: the request is skipped
    // (counted as canceled), so the server sees nothing to serve.
    let canceled = boundary::stats_snapshot().canceled;
    drop(client.try_call(3).unwrap());
    let req = block_on(server.recv_timeout(Duration::from_millis(50)));
    assert_eq!(req.unwrap_err(), BoundaryError::Timeout);
    assert!(boundary::stats_snapshot().canceled > canceled);
}

#[test]
fn responding_after_the_caller_left_reports_canceled() {
    let (client, server) = boundary::channel::<u8, u8>(4);
    let ticket = client.try_call(7).unwrap();
    let req = block_on(server.recv()).unwrap();
    assert!(!req.is_canceled());
    // The caller gives up while the server holds the request.
    assert_eq!(
        block_on(ticket.wait_timeout(Duration::from_millis(5))),
        Err(BoundaryError::Timeout)
    );
    assert!(req.is_canceled());
    assert_eq!(req.respond(70), Err(BoundaryError::Canceled));
}

#[test]
fn a_request_dropped_unanswered_cancels_the_call() {
    let (client, server) = boundary::channel::<u8, u8>(4);
    let ticket = client.try_call(1).unwrap();
    drop(block_on(server.recv()).unwrap());
    assert_eq!(block_on(ticket), Err(BoundaryError::Canceled));
}

#[test]
fn closing_either_side_is_reported() {
    let (client, server) = boundary::channel::<u8, u8>(4);
    let queued = client.try_call(1).unwrap();
    drop(server);
    assert_eq!(block_on(queued), Err(BoundaryError::Closed));
    assert_eq!(block_on(client.call(2)).unwrap_err(), BoundaryError::Closed);
    assert_eq!(client.try_call(3).unwrap_err(), BoundaryError::Closed);

    let (client, server) = boundary::channel::<u8, u8>(4);
    let waiting = std::thread::spawn(move || block_on(server.recv()).map(drop));
    std::thread::sleep(Duration::from_millis(5));
    drop(client);
    assert_eq!(
        within_hang_bound(move || waiting.join().unwrap()),
        Err(BoundaryError::Closed)
    );
}

#[test]
fn recv_timeout_times_out() {
    let (_client, server) = boundary::channel::<u8, u8>(1);
    let err = block_on(server.recv_timeout(Duration::from_millis(5))).unwrap_err();
    assert_eq!(err, BoundaryError::Timeout);
}

#[test]
fn wait_timeout_on_a_ticket() {
    let (client, server) = boundary::channel::<u8, u8>(1);
    let ticket = client.try_call(9).unwrap();
    assert_eq!(
        block_on(ticket.wait_timeout(Duration::from_millis(5))),
        Err(BoundaryError::Timeout)
    );
    let req = block_on(server.recv_timeout(Duration::from_millis(50)));
    // The abandoned request is skipped.
    assert_eq!(req.unwrap_err(), BoundaryError::Timeout);
}

#[test]
#[should_panic(expected = "capacity must be at least 1")]
fn zero_capacity_is_refused() {
    let _ = boundary::channel::<u8, u8>(0);
}

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
use spargio::block_on;
use spargio::boundary::{self, BoundaryError};
use spargio::fs::{du, DuOptions};

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

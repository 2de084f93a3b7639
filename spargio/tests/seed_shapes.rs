//! The reference crate's (spargio 0.5.x) API shapes, used exactly as code
//! written against it uses them, so that such code compiles here
//! unchanged: `ShardCtx::remote` as an `Option`, tickets behind a
//! synchronous `Result`, an irrefutable `Event::RingMsg`, event futures
//! that outlive the `ShardCtx` they came from, batches of any
//! `IntoIterator`, `DuSummary::total_bytes`, and the two-stage
//! `BoundaryClient::call`.

use spargio::block_on;
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

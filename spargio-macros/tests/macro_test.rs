//! `#[spargio::test]` in action.

use std::time::Duration;

#[spargio::test]
async fn a_test_runs_on_a_runtime() {
    spargio::time::sleep(Duration::from_millis(1)).await;
    assert!(spargio::ShardCtx::current().is_some());
}

#[spargio::test(shards = 3)]
async fn a_test_can_take_the_handle(
    handle: spargio::RuntimeHandle,
) -> Result<(), spargio::RuntimeError> {
    assert_eq!(handle.shard_count(), 3);
    let on = handle.spawn_pinned(2, async {
        spargio::ShardCtx::current().unwrap().shard_id()
    })?;
    assert_eq!(on.await.unwrap(), 2);
    Ok(())
}

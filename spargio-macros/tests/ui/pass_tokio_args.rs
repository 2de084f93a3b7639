//! A `#[tokio::main(...)]` ported by its path alone.

#[spargio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main(handle: spargio::RuntimeHandle) {
    assert_eq!(handle.shard_count(), 2);
}

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

#[spargio::test(shards = 2, backend = "epoll")]
async fn a_test_can_name_its_backend(handle: spargio::RuntimeHandle) {
    assert_eq!(handle.backend(), spargio::BackendKind::Epoll);
    let listener = spargio::net::TcpListener::bind(&handle, "127.0.0.1:0")
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let h = handle.clone();
    let client = handle
        .spawn_stealable(async move {
            let s = spargio::net::TcpStream::connect(&h, addr).await.unwrap();
            s.write_all_owned(b"epoll".to_vec()).await.unwrap();
        })
        .unwrap();
    let (server, _) = listener.accept().await.unwrap();
    let got = server.read_exact_owned(vec![0; 5]).await.unwrap();
    assert_eq!(got, b"epoll");
    client.await.unwrap();
}

#[spargio::test(backend = "auto")]
async fn auto_resolves_to_a_real_backend(handle: spargio::RuntimeHandle) {
    let kind = handle.backend();
    assert!(kind == spargio::BackendKind::IoUring || kind == spargio::BackendKind::Epoll);
}

// tokio's own argument names, so a ported `#[tokio::test(...)]` keeps its
// arguments: `worker_threads` is `shards`, the current-thread flavor is
// one shard, the multi-thread flavor is spargio's default.

#[spargio::test(flavor = "multi_thread", worker_threads = 3)]
async fn tokio_worker_threads_are_shards(handle: spargio::RuntimeHandle) {
    assert_eq!(handle.shard_count(), 3);
}

#[spargio::test(flavor = "current_thread")]
async fn tokio_current_thread_is_one_shard(handle: spargio::RuntimeHandle) {
    assert_eq!(handle.shard_count(), 1);
}

#[spargio::test(flavor = "multi_thread")]
async fn tokio_multi_thread_is_the_default(handle: spargio::RuntimeHandle) {
    let default = spargio::RuntimeBuilder::new()
        .build()
        .expect("a default runtime")
        .handle()
        .shard_count();
    assert_eq!(handle.shard_count(), default);
}

#[spargio::test(start_paused = false)]
async fn tokio_start_paused_false_changes_nothing() {
    spargio::time::sleep(Duration::from_millis(1)).await;
}

// The commonest tokio signature, `-> Result<(), Box<dyn Error>>`: the box
// is not `Send`, and the body runs on shard 0, so the error comes back to
// the caller's thread as its text (the same `Debug` and `Display`).

#[spargio::test]
async fn a_test_may_return_a_boxed_error() -> Result<(), Box<dyn std::error::Error>> {
    let n: u32 = "42".parse()?;
    assert_eq!(n, 42);
    Ok(())
}

type BoxResult<T> = Result<T, Box<dyn std::error::Error>>;

#[spargio::main]
async fn fails_to_parse() -> BoxResult<u32> {
    Ok("4x2".parse::<u32>()?)
}

#[test]
fn a_boxed_error_comes_back_as_it_was() {
    let err = fails_to_parse().expect_err("the parse fails");
    let original = "4x2".parse::<u32>().unwrap_err();
    assert_eq!(format!("{err:?}"), format!("{original:?}"));
    assert_eq!(err.to_string(), original.to_string());
}

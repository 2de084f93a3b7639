//! Async entry points and sync `block_on`.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::rc::Rc;

use spargio::{block_on, run, run_local_on, run_with, RuntimeBuilder, RuntimeError, ShardCtx};

#[test]
fn run_drives_the_entry_and_returns_its_output() {
    let out = block_on(run(|handle| async move {
        let child = handle.spawn_stealable(async { 20 }).unwrap();
        child.await.unwrap() + 22
    }))
    .unwrap();
    assert_eq!(out, 42);
}

#[test]
fn run_with_reports_bad_configuration() {
    let err = block_on(run_with(RuntimeBuilder::new().shards(0), |_| async {})).unwrap_err();
    assert!(matches!(
        err,
        RuntimeError::InvalidConfig { knob: "shards", .. }
    ));
}

#[test]
fn run_local_on_runs_a_non_send_entry_on_the_chosen_shard() {
    let builder = RuntimeBuilder::new().shards(2);
    let (shard, count) = block_on(run_local_on(builder, 1, |ctx| async move {
        let counter = Rc::new(std::cell::Cell::new(0));
        let c2 = counter.clone();
        ctx.spawn_local(async move { c2.set(c2.get() + 1) })
            .unwrap()
            .await
            .unwrap();
        (ShardCtx::current().unwrap().shard_id(), counter.get())
    }))
    .unwrap();
    assert_eq!((shard, count), (1, 1));
}

#[test]
fn a_panicking_entry_panics_in_the_caller() {
    let caught = catch_unwind(AssertUnwindSafe(|| {
        block_on(run_with(RuntimeBuilder::new().shards(1), |_| async {
            panic!("entry failed")
        }))
    }));
    let payload = caught.unwrap_err();
    let msg = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned());
    assert_eq!(msg.as_deref(), Some("entry failed"));
}

#[test]
fn block_on_refuses_to_run_on_a_shard() {
    let rt = RuntimeBuilder::new().shards(1).build().unwrap();
    let err = block_on(
        rt.handle()
            .spawn_pinned(0, async { block_on(async {}) })
            .unwrap(),
    )
    .unwrap_err();
    assert!(err.is_panic());
    assert!(err.to_string().contains("shard thread"), "{err}");
}

#[test]
fn run_is_usable_from_inside_another_executor() {
    // As in a `#[tokio::main]`: tokio drives spargio's `run` future.
    let tk = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let out = tk
        .block_on(run_with(
            RuntimeBuilder::new().shards(2),
            |handle| async move {
                let a = handle.spawn_pinned(1, async { 40 }).unwrap();
                a.await.unwrap() + 2
            },
        ))
        .unwrap();
    assert_eq!(out, 42);
}

//! Builder validation and what the runtime reports about itself.

mod common;

use spargio::{BackendKind, RuntimeBuilder, RuntimeError};

fn knob_of(err: RuntimeError) -> &'static str {
    match err {
        RuntimeError::InvalidConfig { knob, .. } => knob,
        other => panic!("expected InvalidConfig, got {other:?}"),
    }
}

#[test]
fn invalid_knobs_are_clear_errors() {
    let cases: Vec<(RuntimeBuilder, &str)> = vec![
        (RuntimeBuilder::new().shards(0), "shards"),
        (RuntimeBuilder::new().shards(100_000), "shards"),
        (RuntimeBuilder::new().ring_entries(0), "ring_entries"),
        (RuntimeBuilder::new().ring_entries(1 << 20), "ring_entries"),
        (
            RuntimeBuilder::new().stealable_queue_capacity(0),
            "stealable_queue_capacity",
        ),
        (
            RuntimeBuilder::new().msg_ring_queue_capacity(0),
            "msg_ring_queue_capacity",
        ),
        (RuntimeBuilder::new().steal_budget(0), "steal_budget"),
        (
            RuntimeBuilder::new().steal_batch_size(0),
            "steal_batch_size",
        ),
        (
            RuntimeBuilder::new()
                .steal_backoff_min(9)
                .steal_backoff_max(3),
            "steal_backoff_min",
        ),
        (RuntimeBuilder::new().thread_name("a\0b"), "thread_name"),
    ];
    for (builder, knob) in cases {
        let err = builder.build().expect_err(knob);
        let text = err.to_string();
        assert_eq!(knob_of(err), knob, "{text}");
        assert!(text.contains(knob), "{text}");
    }
}

#[test]
fn defaults_build_and_report_themselves() {
    // Ring sizes and flags: io_uring's defaults.
    let Some(builder) = common::io_uring_builder() else {
        return;
    };
    let rt = builder.build().unwrap();
    let h = rt.handle();
    let cpus = std::thread::available_parallelism().unwrap().get();
    assert_eq!(h.shard_count(), cpus);
    assert_eq!(h.backend(), BackendKind::IoUring);
    let stats = h.stats_snapshot();
    assert_eq!(stats.shards.len(), cpus);
    for shard in &stats.shards {
        assert!(shard.ring.sq_entries >= 256);
        assert!(shard.ring.cq_entries >= shard.ring.sq_entries);
    }
}

#[test]
fn steal_knobs_are_clamped_and_reported() {
    let rt = RuntimeBuilder::new()
        .shards(3)
        .steal_victim_stride(99)
        .build()
        .unwrap();
    assert_eq!(rt.handle().stats_snapshot().steal_victim_stride, 2);
    let rt = RuntimeBuilder::new()
        .shards(3)
        .steal_victim_stride(0)
        .build()
        .unwrap();
    assert_eq!(rt.handle().stats_snapshot().steal_victim_stride, 1);
}

#[test]
fn every_ring_flag_combination_builds() {
    // Flag-by-flag fallback means no combination may fail on a kernel that
    // has io_uring at all.
    for defer in [false, true] {
        for coop in [false, true] {
            for single in [false, true] {
                let rt = RuntimeBuilder::new()
                    .shards(1)
                    .io_uring_defer_taskrun(defer)
                    .io_uring_coop_taskrun(coop)
                    .io_uring_single_issuer(single)
                    .build()
                    .unwrap();
                let h = rt.handle();
                assert_eq!(
                    spargio::block_on(h.spawn_pinned(0, async { 1 }).unwrap()).unwrap(),
                    1
                );
                let ring = h.stats_snapshot().shards[0].ring;
                assert!(!ring.defer_taskrun || single, "defer without single issuer");
            }
        }
    }
}

#[test]
fn sqpoll_ring_works() {
    let Some(builder) = common::io_uring_builder() else {
        return;
    };
    let rt = builder.shards(2).io_uring_sqpoll(Some(10)).build().unwrap();
    let h = rt.handle();
    assert_eq!(
        spargio::block_on(h.spawn_stealable(async { 2 }).unwrap()).unwrap(),
        2
    );
}

#[test]
fn runtime_error_converts_to_io_error() {
    let err = RuntimeBuilder::new().shards(0).build().unwrap_err();
    let io: std::io::Error = err.into();
    assert_eq!(io.kind(), std::io::ErrorKind::InvalidInput);
}

#[test]
fn throughput_mode_sets_its_flags_and_runs_io() {
    for sqpoll in [None, Some(10)] {
        let Some(builder) = common::io_uring_builder() else {
            return;
        };
        let rt = builder
            .shards(2)
            .io_uring_coop_taskrun(false)
            .io_uring_throughput_mode(sqpoll)
            .build()
            .unwrap();
        let h = rt.handle();
        for s in &h.stats_snapshot().shards {
            // The kernel takes cooperative task running only without
            // SQPOLL (which it may refuse too: then the build fell back).
            if sqpoll.is_none() {
                assert!(s.ring.coop_taskrun && !s.ring.sqpoll);
            } else if s.ring.sqpoll {
                assert!(!s.ring.coop_taskrun && !s.ring.defer_taskrun);
            }
        }
        // I/O on every shard: a pipe round trip through the ring.
        let (a, b) = spargio::net::UnixStream::pair(&h).unwrap();
        let got = spargio::block_on(
            h.spawn_pinned(1, async move {
                a.write_all_owned(b"through".to_vec()).await.unwrap();
                b.recv(16).await.unwrap()
            })
            .unwrap(),
        )
        .unwrap();
        assert_eq!(&got[..], b"through");
    }
}

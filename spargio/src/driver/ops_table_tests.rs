//! Unit tests of the op table: phases, orphaning, multishot queues,
//! close.

use super::*;
use crate::driver::lifecycle::MULTISHOT_QUEUE_LIMIT;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::task::Wake;

struct Flag(AtomicBool);
impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::SeqCst);
    }
}

fn kernel(result: i32) -> Outcome {
    Outcome::Kernel { result, flags: 0 }
}

#[test]
fn key_round_trips_through_payload() {
    let key = OpKey {
        slot: 123_456,
        gen: GEN_MASK,
    };
    assert_eq!(OpKey::from_payload(key.to_payload()), key);
    assert!(key.to_payload() < 1 << 56);
}

#[test]
fn poll_then_complete_wakes_and_hands_over() {
    let table = OpTable::default();
    let key = table.insert(Phase::InRing, 0).unwrap();
    let flag = Arc::new(Flag(AtomicBool::new(false)));
    let waker = Waker::from(flag.clone());
    let mut cx = Context::from_waker(&waker);
    assert!(table.poll(key, &mut cx).is_pending());
    let mut out = Reaped::default();
    table.complete_batch([(key, kernel(7))], &mut out);
    out.settle();
    assert!(flag.0.load(Ordering::SeqCst));
    assert_eq!(table.poll(key, &mut cx), Poll::Ready(kernel(7)));
    assert_eq!(table.pending(), 0);
}

/// Resources that record the outcome they were reclaimed with.
struct Res(Arc<Mutex<Vec<Outcome>>>);
impl Orphan for Res {
    fn reclaim(self: Box<Self>, outcome: Outcome) {
        self.0.lock().unwrap().push(outcome);
    }
}

#[test]
fn orphan_keeps_resources_until_the_cqe_then_reclaims_with_it() {
    let table = OpTable::default();
    let key = table.insert(Phase::InRing, 0).unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    assert!(matches!(
        table.orphan(key, Res(log.clone())),
        Orphaned::Kept
    ));
    assert_eq!(Arc::strong_count(&log), 2, "kept by the table");
    let mut out = Reaped::default();
    table.complete_batch([(key, kernel(9))], &mut out);
    assert_eq!(out.released.len(), 1);
    out.settle();
    assert_eq!(
        *log.lock().unwrap(),
        vec![kernel(9)],
        "reclaimed with the CQE"
    );
    assert_eq!(Arc::strong_count(&log), 1);
    assert_eq!(table.pending(), 0);
}

#[test]
fn orphan_after_completion_hands_the_outcome_back() {
    let table = OpTable::default();
    let key = table.insert(Phase::InRing, 0).unwrap();
    let mut out = Reaped::default();
    table.complete_batch([(key, kernel(5))], &mut out);
    let log = Arc::new(Mutex::new(Vec::new()));
    match table.orphan(key, Res(log)) {
        Orphaned::Completed(_, outcome) => assert_eq!(outcome, kernel(5)),
        _ => panic!("the outcome must come back with the resources"),
    }
    assert_eq!(table.pending(), 0);
}

#[test]
fn a_queued_op_orphaned_before_its_push_is_never_pushed() {
    let table = OpTable::default();
    let key = table.insert(Phase::Queued, 0).unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    assert!(matches!(
        table.orphan(key, Res(log.clone())),
        Orphaned::Kept
    ));
    // The owner sees no cancel to push: it is not in the ring yet.
    assert!(!table.wants_cancel(key));
    match table.mark_in_ring(key) {
        MarkInRing::Abandoned(keep, outcome) => keep.reclaim(outcome),
        _ => panic!("an orphaned queued op must not be pushed"),
    }
    assert_eq!(*log.lock().unwrap(), vec![kernel(-libc::ECANCELED)]);
    assert_eq!(table.pending(), 0);
}

/// A detached operation: it runs without its future.
struct Wanted(Arc<Mutex<Vec<Outcome>>>);
impl Orphan for Wanted {
    fn reclaim(self: Box<Self>, outcome: Outcome) {
        self.0.lock().unwrap().push(outcome);
    }

    fn still_wanted(&self) -> bool {
        true
    }
}

#[test]
fn a_queued_op_detached_before_its_push_is_pushed_and_finished_by_its_cqe() {
    let table = OpTable::default();
    let key = table.insert(Phase::Queued, 0).unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    assert!(matches!(
        table.orphan(key, Wanted(log.clone())),
        Orphaned::Kept
    ));
    assert!(
        matches!(table.mark_in_ring(key), MarkInRing::Push),
        "a detached queued op must still run"
    );
    assert!(log.lock().unwrap().is_empty());
    let mut out = Reaped::default();
    table.complete_batch([(key, kernel(42))], &mut out);
    out.settle();
    assert_eq!(*log.lock().unwrap(), vec![kernel(42)]);
    assert_eq!(table.pending(), 0);
}

#[test]
fn a_single_shot_entry_outlives_completions_with_more() {
    let table = OpTable::default();
    let key = table.insert(Phase::InRing, 0).unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    assert!(matches!(
        table.orphan(key, Res(log.clone())),
        Orphaned::Kept
    ));
    let mut out = Reaped::default();
    table.complete_batch([(key, shot(1)), (key, shot(2))], &mut out);
    assert!(out.released.is_empty(), "memory kept while F_MORE");
    table.complete_batch([(key, kernel(3))], &mut out);
    out.settle();
    assert_eq!(*log.lock().unwrap(), vec![kernel(3)]);
}

#[test]
fn stale_completions_are_ignored() {
    let table = OpTable::default();
    let mut out = Reaped::default();
    table.complete_batch([(OpKey { slot: 7, gen: 3 }, kernel(1))], &mut out);
    assert!(out.is_empty());
}

#[test]
fn a_panicking_waker_or_reclaim_costs_only_itself() {
    struct Boom;
    impl Wake for Boom {
        fn wake(self: Arc<Self>) {
            panic!("waker boom");
        }
    }
    struct BoomRes;
    impl Orphan for BoomRes {
        fn reclaim(self: Box<Self>, _: Outcome) {
            panic!("reclaim boom");
        }
    }
    let table = OpTable::default();
    let a = table.insert(Phase::InRing, 0).unwrap();
    let b = table.insert(Phase::InRing, 0).unwrap();
    let c = table.insert(Phase::InRing, 0).unwrap();
    let boom = Waker::from(Arc::new(Boom));
    assert!(table.poll(a, &mut Context::from_waker(&boom)).is_pending());
    assert!(matches!(table.orphan(b, BoomRes), Orphaned::Kept));
    let flag = Arc::new(Flag(AtomicBool::new(false)));
    let waker = Waker::from(flag.clone());
    assert!(table.poll(c, &mut Context::from_waker(&waker)).is_pending());
    let mut out = Reaped::default();
    table.complete_batch([(a, kernel(0)), (b, kernel(0)), (c, kernel(0))], &mut out);
    out.settle();
    assert_eq!(out.panicked, 2);
    assert!(flag.0.load(Ordering::SeqCst), "the healthy waker still ran");
}

#[test]
fn stale_generation_is_not_taken() {
    let table = OpTable::default();
    let old = table.insert(Phase::InRing, 0).unwrap();
    let mut out = Reaped::default();
    table.complete_batch([(old, kernel(1))], &mut out);
    let flag = Arc::new(Flag(AtomicBool::new(false)));
    let waker = Waker::from(flag);
    let mut cx = Context::from_waker(&waker);
    assert_eq!(table.poll(old, &mut cx), Poll::Ready(kernel(1)));
    let new = table.insert(Phase::InRing, 0).unwrap();
    assert_eq!(new.slot, old.slot, "slot reused");
    assert_ne!(new.gen, old.gen);
    assert!(!table.wants_cancel(old));
    assert!(table.wants_cancel(new));
}

const F_MORE: u32 = 1 << 1;

fn shot(result: i32) -> Outcome {
    Outcome::Kernel {
        result,
        flags: F_MORE,
    }
}

#[derive(Clone, Default)]
struct Sink(Arc<Mutex<Vec<i32>>>);
impl Discard for Sink {
    fn discard(&mut self, result: i32, _flags: u32, _wake: &mut Vec<Waker>) {
        self.0.lock().unwrap().push(result);
    }
}

#[test]
fn multishot_queues_until_the_final_completion() {
    let table = OpTable::default();
    let key = table
        .insert_multi(Phase::InRing, 0, MULTISHOT_QUEUE_LIMIT)
        .unwrap();
    let flag = Arc::new(Flag(AtomicBool::new(false)));
    let waker = Waker::from(flag.clone());
    let mut cx = Context::from_waker(&waker);
    assert!(table.poll_shot(key, &mut cx).is_pending());
    let mut out = Reaped::default();
    table.complete_batch([(key, shot(1)), (key, shot(2))], &mut out);
    assert_eq!(out.completed, 0, "not final yet");
    out.settle();
    assert!(flag.0.load(Ordering::SeqCst));
    assert_eq!(table.poll_shot(key, &mut cx), Poll::Ready(shot(1)));
    assert_eq!(table.poll_shot(key, &mut cx), Poll::Ready(shot(2)));
    assert!(table.poll_shot(key, &mut cx).is_pending());
    assert!(table.wants_cancel(key));
    table.complete_batch([(key, kernel(-125))], &mut out);
    assert_eq!(out.completed, 1);
    assert!(!table.wants_cancel(key), "ended");
    assert_eq!(table.in_ring(), 0);
    assert_eq!(table.poll_shot(key, &mut cx), Poll::Ready(kernel(-125)));
    assert_eq!(table.pending(), 0, "removed with the final read");
}

#[test]
fn orphaned_multishot_discards_unread_and_later_completions() {
    let table = OpTable::default();
    let key = table
        .insert_multi(Phase::InRing, 0, MULTISHOT_QUEUE_LIMIT)
        .unwrap();
    let mut out = Reaped::default();
    table.complete_batch([(key, shot(5))], &mut out);
    let sink = Sink::default();
    assert!(table.orphan_multi(key, Box::new(sink.clone())).is_none());
    assert_eq!(*sink.0.lock().unwrap(), vec![5], "unread one discarded");
    table.complete_batch([(key, shot(6)), (key, kernel(7))], &mut out);
    assert_eq!(*sink.0.lock().unwrap(), vec![5, 6, 7]);
    assert_eq!(out.released.len(), 1, "hook dropped at the final one");
    assert_eq!(table.pending(), 0);
}

#[test]
fn an_unread_multishot_is_paused_at_its_bound() {
    let table = OpTable::default();
    let key = table
        .insert_multi(Phase::InRing, 0, MULTISHOT_QUEUE_LIMIT)
        .unwrap();
    let mut out = Reaped::default();
    let shots: Vec<_> = (0..MULTISHOT_QUEUE_LIMIT as i32 + 5)
        .map(|i| (key, shot(i)))
        .collect();
    table.complete_batch(shots, &mut out);
    assert_eq!(out.cancels, vec![key], "one cancel at the bound");
    table.complete_batch([(key, kernel(-libc::ECANCELED))], &mut out);
    let waker = Waker::from(Arc::new(Flag(AtomicBool::new(false))));
    let mut cx = Context::from_waker(&waker);
    for i in 0..MULTISHOT_QUEUE_LIMIT as i32 + 5 {
        assert_eq!(table.poll_shot(key, &mut cx), Poll::Ready(shot(i)));
    }
    assert_eq!(table.poll_shot(key, &mut cx), Poll::Ready(Outcome::Paused));
    assert_eq!(table.pending(), 0);
}

#[test]
fn orphaning_an_ended_multishot_hands_the_hook_back() {
    let table = OpTable::default();
    let key = table
        .insert_multi(Phase::InRing, 0, MULTISHOT_QUEUE_LIMIT)
        .unwrap();
    let mut out = Reaped::default();
    table.complete_batch([(key, shot(1)), (key, kernel(0))], &mut out);
    let sink = Sink::default();
    assert!(table.orphan_multi(key, Box::new(sink.clone())).is_some());
    assert_eq!(*sink.0.lock().unwrap(), vec![1, 0]);
    assert_eq!(table.pending(), 0);
}

#[test]
fn close_ends_a_queued_multishot() {
    let table = OpTable::default();
    let key = table
        .insert_multi(Phase::Queued, 0, MULTISHOT_QUEUE_LIMIT)
        .unwrap();
    let mut out = Reaped::default();
    assert!(table.close(&mut out).is_empty());
    let waker = Waker::from(Arc::new(Flag(AtomicBool::new(false))));
    let mut cx = Context::from_waker(&waker);
    assert_eq!(
        table.poll_shot(key, &mut cx),
        Poll::Ready(Outcome::Shutdown)
    );
    assert_eq!(table.pending(), 0);
}

#[test]
fn close_fails_queued_and_reports_in_ring() {
    let table = OpTable::default();
    let queued = table.insert(Phase::Queued, 0).unwrap();
    let in_ring = table.insert(Phase::InRing, 0).unwrap();
    let mut out = Reaped::default();
    assert_eq!(table.close(&mut out), vec![in_ring]);
    assert!(matches!(table.mark_in_ring(queued), MarkInRing::Skip));
    let waker = Waker::from(Arc::new(Flag(AtomicBool::new(false))));
    let mut cx = Context::from_waker(&waker);
    assert_eq!(table.poll(queued, &mut cx), Poll::Ready(Outcome::Shutdown));
    assert!(table.insert(Phase::InRing, 0).is_err());
    assert_eq!(table.in_ring(), 1);
}

#[test]
fn leaking_tells_every_orphan_it_is_forsaken_and_wakes_outside_the_lock() {
    struct Forsaken(Arc<Flag>);
    impl Orphan for Forsaken {
        fn reclaim(self: Box<Self>, _: Outcome) {
            panic!("a leaked operation is never reclaimed");
        }
        fn forsake(&mut self, wake: &mut Vec<Waker>) {
            wake.push(Waker::from(self.0.clone()));
        }
    }
    let table = OpTable::default();
    let key = table.insert(Phase::InRing, 0).unwrap();
    let flag = Arc::new(Flag(AtomicBool::new(false)));
    assert!(matches!(
        table.orphan(key, Forsaken(flag.clone())),
        Orphaned::Kept
    ));
    table.leak_in_ring();
    assert!(flag.0.load(Ordering::SeqCst), "the orphan was not told");
}

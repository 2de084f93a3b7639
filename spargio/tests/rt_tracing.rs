//! The `tracing` feature (issue 24): a span per task, entered on each poll
//! on whichever shard runs it, and the runtime's events (stalls, ring
//! pressure) as `tracing` events under their targets. A small recording
//! subscriber, installed process-wide (shards are threads of their own),
//! stands in for fmt or OpenTelemetry; the tests share it and tell their
//! records apart by spawn line.

mod common;

use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};

/// One span as the subscriber saw it.
#[derive(Clone, Debug, Default)]
struct SpanRec {
    name: String,
    target: String,
    fields: HashMap<String, String>,
    entered: u64,
}

/// One event: its target, level, message and the span it was raised in.
#[derive(Clone, Debug)]
struct EventRec {
    target: String,
    level: Level,
    message: String,
    span: Option<u64>,
}

#[derive(Default)]
struct Recorder {
    next: AtomicU64,
    spans: Mutex<HashMap<u64, SpanRec>>,
    events: Mutex<Vec<EventRec>>,
}

thread_local! {
    static CURRENT: std::cell::RefCell<Vec<u64>> = const { std::cell::RefCell::new(Vec::new()) };
}

struct Fields<'a>(&'a mut HashMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        self.0
            .insert(field.name().to_string(), format!("{value:?}"));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_string(), value.to_string());
    }
}

struct Shared(Arc<Recorder>);

impl Subscriber for Shared {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }

    fn new_span(&self, attrs: &Attributes<'_>) -> Id {
        let id = self.0.next.fetch_add(1, Ordering::Relaxed) + 1;
        let mut rec = SpanRec {
            name: attrs.metadata().name().to_string(),
            target: attrs.metadata().target().to_string(),
            ..SpanRec::default()
        };
        attrs.record(&mut Fields(&mut rec.fields));
        self.0.spans.lock().unwrap().insert(id, rec);
        Id::from_u64(id)
    }

    fn record(&self, span: &Id, values: &Record<'_>) {
        if let Some(rec) = self.0.spans.lock().unwrap().get_mut(&span.into_u64()) {
            values.record(&mut Fields(&mut rec.fields));
        }
    }

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, event: &Event<'_>) {
        let mut fields = HashMap::new();
        event.record(&mut Fields(&mut fields));
        self.0.events.lock().unwrap().push(EventRec {
            target: event.metadata().target().to_string(),
            level: *event.metadata().level(),
            message: fields.remove("message").unwrap_or_default(),
            span: CURRENT.with(|c| c.borrow().last().copied()),
        });
    }

    fn enter(&self, span: &Id) {
        CURRENT.with(|c| c.borrow_mut().push(span.into_u64()));
        if let Some(rec) = self.0.spans.lock().unwrap().get_mut(&span.into_u64()) {
            rec.entered += 1;
        }
    }

    fn exit(&self, _: &Id) {
        CURRENT.with(|c| c.borrow_mut().pop());
    }
}

fn recorder() -> &'static Arc<Recorder> {
    static REC: OnceLock<Arc<Recorder>> = OnceLock::new();
    REC.get_or_init(|| {
        let rec = Arc::new(Recorder::default());
        tracing::subscriber::set_global_default(Shared(rec.clone())).unwrap();
        rec
    })
}

/// The `spargio::task` spans spawned at this file's `line`.
fn task_spans(line: u32) -> Vec<SpanRec> {
    recorder()
        .spans
        .lock()
        .unwrap()
        .values()
        .filter(|s| {
            s.target == "spargio::task"
                && s.fields.get("loc.file").map(String::as_str) == Some(file!())
                && s.fields.get("loc.line") == Some(&line.to_string())
        })
        .cloned()
        .collect()
}

#[test]
fn each_task_has_a_span_entered_on_every_poll_with_its_events_inside() {
    let rec = recorder();
    common::within_hang_bound(|| {
        let rt = common::runtime(2);
        let h = rt.handle();
        let line = line!() + 1;
        let task = h.spawn_pinned(1, async {
            for _ in 0..3 {
                common::yield_now().await;
            }
            tracing::info!(target: "app", "inside the task");
        });
        spargio::block_on(task.unwrap()).unwrap();
        let stealable_line = line!() + 1;
        let stealable = h.spawn_stealable(async { common::yield_now().await });
        spargio::block_on(stealable.unwrap()).unwrap();

        let spans = task_spans(line);
        assert_eq!(spans.len(), 1, "{spans:?}");
        let span = &spans[0];
        assert_eq!(span.name, "task");
        assert_eq!(span.fields["task.kind"], "pinned");
        assert_eq!(span.fields["task.home"], "1");
        assert_eq!(span.entered, 4, "one enter per poll: {span:?}");
        let stealable = task_spans(stealable_line);
        assert_eq!(stealable.len(), 1, "{stealable:?}");
        assert_eq!(stealable[0].fields["task.kind"], "stealable");
        assert_eq!(stealable[0].entered, 2);

        let events = rec.events.lock().unwrap().clone();
        let inside: Vec<_> = events.iter().filter(|e| e.target == "app").collect();
        assert_eq!(inside.len(), 1, "{events:?}");
        let id = rec
            .spans
            .lock()
            .unwrap()
            .iter()
            .find(|(_, s)| s.fields.get("loc.line") == Some(&line.to_string()))
            .map(|(id, _)| *id);
        assert_eq!(inside[0].span, id, "the event carries the task's span");
        assert_eq!(inside[0].message, "inside the task");
    });
}

#[test]
fn a_stall_is_a_warn_event_naming_the_task() {
    let rec = recorder();
    common::within_hang_bound(|| {
        let rt = spargio::Runtime::builder()
            .shards(1)
            .stall_threshold(Some(Duration::from_millis(10)))
            .build()
            .unwrap();
        let h = rt.handle();
        let line = line!() + 1;
        let task = h.spawn_pinned(0, async {
            std::thread::sleep(Duration::from_millis(60));
        });
        spargio::block_on(task.unwrap()).unwrap();
        // The runtime's drop delivers the reports still queued.
        drop(rt);
        let events = rec.events.lock().unwrap().clone();
        let stalls: Vec<_> = events
            .iter()
            .filter(|e| e.target == "spargio::stall")
            .filter(|e| e.message.contains(&format!("{}:{line}:", file!())))
            .collect();
        assert_eq!(stalls.len(), 1, "{events:?}");
        assert_eq!(stalls[0].level, Level::WARN);
    });
}

#[test]
fn a_full_submission_queue_is_a_ring_event() {
    let rec = recorder();
    common::within_hang_bound(|| {
        let Some(builder) = common::io_uring_builder() else {
            return;
        };
        let rt = builder.shards(1).ring_entries(2).build().unwrap();
        let h = rt.handle();
        let h2 = h.clone();
        let task = h.spawn_pinned(0, async move {
            let pairs: Vec<_> = (0..32)
                .map(|_| std::os::unix::net::UnixStream::pair().unwrap())
                .collect();
            let mut ours = Vec::new();
            let mut theirs = Vec::new();
            for (a, b) in pairs {
                ours.push(spargio::net::UnixStream::from_std(&h2, a).unwrap());
                theirs.push(b);
            }
            for (i, b) in theirs.iter_mut().enumerate() {
                use std::io::Write;
                b.write_all(&[i as u8]).unwrap();
            }
            let got = futures_util::future::join_all(ours.iter().map(|s| s.recv(1))).await;
            got.into_iter().map(|r| r.unwrap()[0]).collect::<Vec<u8>>()
        });
        let got = spargio::block_on(task.unwrap()).unwrap();
        assert_eq!(got, (0..32).collect::<Vec<u8>>());
        assert!(h.stats_snapshot().sq_full > 0);
        let events = rec.events.lock().unwrap().clone();
        assert!(
            events
                .iter()
                .any(|e| e.target == "spargio::ring" && e.level == Level::WARN),
            "{events:?}"
        );
    });
}

//! [`RuntimeStats`] in the Prometheus text exposition format (0.0.4).
//!
//! Every per-shard counter is a `counter` named `spargio_<name>_total`
//! with one sample per shard (label `shard`); high-water marks and queue
//! depths are `gauge`s. Runtime-wide values (the blocking pool, the stall
//! detector's pool reports) have no label; `spargio_info` carries the
//! backend as a label, `spargio_ops_in_flight` the opcode (`op`). Help texts are the fields' documentation.

use std::fmt::Write;

use super::histogram::bucket_bound;
use super::{RuntimeStats, ShardStats};

/// One metric family: its header, then samples.
struct Family<'a> {
    out: &'a mut String,
}

impl<'a> Family<'a> {
    fn new(out: &'a mut String, name: &str, kind: &str, help: &str) -> Family<'a> {
        let _ = writeln!(out, "# HELP {name} {}", escape_help(help));
        let _ = writeln!(out, "# TYPE {name} {kind}");
        Family { out }
    }

    fn sample(&mut self, name: &str, labels: &str, value: impl std::fmt::Display) {
        if labels.is_empty() {
            let _ = writeln!(self.out, "{name} {value}");
        } else {
            let _ = writeln!(self.out, "{name}{{{labels}}} {value}");
        }
    }
}

/// A doc comment as one help line: `\` and line breaks escaped, runs of
/// whitespace collapsed.
fn escape_help(help: &str) -> String {
    let mut out = String::with_capacity(help.len());
    for word in help.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(&word.replace('\\', "\\\\"));
    }
    out
}

/// A per-shard gauge: its name, help, and how to read it.
type ShardGauge = (&'static str, &'static str, fn(&ShardStats) -> u64);

const SHARD_GAUGES: &[ShardGauge] = &[
    (
        "spargio_queue_depth",
        "Stealable tasks queued on the shard (deque plus injector).",
        |s| s.queue_depth as u64,
    ),
    (
        "spargio_local_queue_depth",
        "Pinned tasks queued on the shard, plus its LIFO slot's task (as of its last scheduler pass).",
        |s| s.local_queue_depth as u64,
    ),
    (
        "spargio_command_depth",
        "Commands (remote wakes of pinned tasks, outside messages) waiting in the shard's inbox.",
        |s| s.command_depth as u64,
    ),
    (
        "spargio_pending_native_ops",
        "Native I/O operations in flight on the shard's ring.",
        |s| s.pending_native_ops as u64,
    ),
    (
        "spargio_timers_armed",
        "Timers armed in the shard's wheel and not yet fired.",
        |s| s.timers_armed as u64,
    ),
    (
        "spargio_live_tasks",
        "Tasks homed on the shard that have not ended.",
        |s| s.live_tasks as u64,
    ),
    (
        "spargio_recv_pool_held",
        "Buffers of the shard's shared receive pool filled and not given back yet.",
        |s| s.recv_pool_held as u64,
    ),
    (
        "spargio_tokio_alive_tasks",
        "Tasks alive on the shard's tokio runtime (feature tokio-compat).",
        |s| s.tokio_alive_tasks as u64,
    ),
    (
        "spargio_tokio_queue_depth",
        "Tasks queued on the shard's tokio runtime from other threads.",
        |s| s.tokio_queue_depth as u64,
    ),
    (
        "spargio_ring_sq_entries",
        "Submission queue entries of the shard's ring (0 on epoll).",
        |s| u64::from(s.ring.sq_entries),
    ),
    (
        "spargio_ring_cq_entries",
        "Completion queue entries of the shard's ring (0 on epoll).",
        |s| u64::from(s.ring.cq_entries),
    ),
];

impl RuntimeStats {
    /// The snapshot in the Prometheus text exposition format, ready to be
    /// served on a `/metrics` endpoint (`Content-Type: text/plain;
    /// version=0.0.4`): every counter per shard (`spargio_<name>_total`,
    /// label `shard`), queue depths and ring sizes as gauges, the blocking
    /// pool and the stall detector's totals.
    ///
    /// ```
    /// let rt = spargio::Runtime::builder().shards(2).build().unwrap();
    /// let task = rt.handle().spawn_pinned(1, async { 7 }).unwrap();
    /// assert_eq!(spargio::block_on(task).unwrap(), 7);
    /// let text = rt.handle().stats_snapshot().to_prometheus_text();
    /// assert!(text.contains("# TYPE spargio_tasks_polled_total counter"));
    /// assert!(text.contains("spargio_spawn_pinned_total{shard=\"1\"} 1"));
    /// ```
    pub fn to_prometheus_text(&self) -> String {
        let mut out = String::with_capacity(16 * 1024);
        {
            let mut f = Family::new(
                &mut out,
                "spargio_info",
                "gauge",
                "The runtime: its backend (label) and shard count.",
            );
            let labels = format!("backend=\"{}\"", self.backend.name());
            f.sample("spargio_info", &labels, self.shards.len());
        }
        // Per-shard counters, family by family.
        let mut names = Vec::new();
        self.totals
            .each(|name, help, _, max| names.push((name, help, max)));
        let values: Vec<Vec<u64>> = self
            .shards
            .iter()
            .map(|s| {
                let mut v = Vec::with_capacity(names.len());
                s.counters.each(|_, _, value, _| v.push(value));
                v
            })
            .collect();
        for (i, (name, help, max)) in names.into_iter().enumerate() {
            let (metric, kind) = if max {
                (format!("spargio_{name}"), "gauge")
            } else {
                (format!("spargio_{name}_total"), "counter")
            };
            let mut f = Family::new(&mut out, &metric, kind, help);
            for (shard, v) in values.iter().enumerate() {
                f.sample(&metric, &format!("shard=\"{shard}\""), v[i]);
            }
        }
        {
            let name = "spargio_poll_time_seconds";
            let mut f = Family::new(
                &mut out,
                name,
                "histogram",
                "Task poll durations, sampled (one poll in 64 is timed).",
            );
            for (shard, stats) in self.shards.iter().enumerate() {
                let mut cumulative = 0;
                for (i, n) in stats.poll_time_buckets.iter().enumerate() {
                    cumulative += n;
                    let le = match bucket_bound(i) {
                        Some(bound) => format!("{}", bound.as_secs_f64()),
                        None => "+Inf".to_string(),
                    };
                    let labels = format!("shard=\"{shard}\",le=\"{le}\"");
                    f.sample(&format!("{name}_bucket"), &labels, cumulative);
                }
                let labels = format!("shard=\"{shard}\"");
                let sum = stats.poll_time_sum_ns as f64 / 1e9;
                f.sample(&format!("{name}_sum"), &labels, sum);
                f.sample(&format!("{name}_count"), &labels, cumulative);
            }
        }
        for (name, help, read) in SHARD_GAUGES {
            let mut f = Family::new(&mut out, name, "gauge", help);
            for (shard, stats) in self.shards.iter().enumerate() {
                f.sample(name, &format!("shard=\"{shard}\""), read(stats));
            }
        }
        {
            let name = "spargio_ops_in_flight";
            let mut f = Family::new(
                &mut out,
                name,
                "gauge",
                "Native operations in flight on the shard's ring, by io_uring opcode.",
            );
            for (shard, stats) in self.shards.iter().enumerate() {
                for (op, n) in &stats.ops_in_flight {
                    f.sample(name, &format!("shard=\"{shard}\",op=\"{op}\""), n);
                }
            }
        }
        let runtime: [(&str, &str, &str, u64); 5] = [
            (
                "spargio_blocking_threads",
                "gauge",
                "Blocking-pool threads alive.",
                self.blocking_threads as u64,
            ),
            (
                "spargio_blocking_idle_threads",
                "gauge",
                "Blocking-pool threads waiting for work.",
                self.blocking_idle as u64,
            ),
            (
                "spargio_blocking_queued",
                "gauge",
                "Blocking jobs queued, not yet started.",
                self.blocking_queued as u64,
            ),
            (
                "spargio_blocking_stalls_total",
                "counter",
                "Blocking jobs the stall detector reported (queued longer than the threshold).",
                self.blocking_stalls,
            ),
            (
                "spargio_stall_reports_dropped_total",
                "counter",
                "Stall reports dropped because 64 were already waiting for the detector's thread.",
                self.stall_reports_dropped,
            ),
        ];
        for (name, kind, help, value) in runtime {
            Family::new(&mut out, name, kind, help).sample(name, "", value);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn help_text_is_one_escaped_line() {
        assert_eq!(
            escape_help(" Bumps a\n counter  (a \\ b)."),
            "Bumps a counter (a \\\\ b)."
        );
    }

    #[test]
    fn every_line_is_a_comment_or_a_sample_and_every_family_is_typed() {
        let stats = RuntimeStats {
            shards: vec![ShardStats::default(), ShardStats::default()],
            ..RuntimeStats::default()
        };
        let text = stats.to_prometheus_text();
        let mut typed = std::collections::HashSet::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, kind) = rest.split_once(' ').unwrap();
                assert!(matches!(kind, "counter" | "gauge" | "histogram"), "{line}");
                assert!(typed.insert(name.to_string()), "{name} typed twice");
            } else if line.starts_with("# HELP ") {
                continue;
            } else {
                let sample = line.split(['{', ' ']).next().unwrap();
                let name = ["_bucket", "_sum", "_count"]
                    .iter()
                    .find_map(|s| sample.strip_suffix(s))
                    .filter(|n| typed.contains(*n))
                    .unwrap_or(sample);
                assert!(typed.contains(name), "sample before its TYPE: {line}");
                let value = line.rsplit(' ').next().unwrap();
                assert!(value.parse::<f64>().is_ok(), "{line}");
                assert!(
                    name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
                    "{name}"
                );
            }
        }
        assert!(typed.contains("spargio_tasks_polled_total"));
        assert!(typed.contains("spargio_steal_failed_streak_max"));
        assert!(text.contains("spargio_stalls_total{shard=\"1\"} 0"));
    }
}

//! QUIC endpoints' counters in the Prometheus text exposition format,
//! beside the runtime's own (`RuntimeStats::to_prometheus_text`).
//!
//! Endpoint counters ([`QuicMetrics`](crate::QuicMetrics)) are
//! `spargio_quic_<name>_total{endpoint="..."}`; the native backend's
//! per-driver counters ([`NativeProtoStats`](crate::NativeProtoStats)) are
//! `spargio_quic_driver_<name>_total{endpoint="...",driver="N"}`. Help
//! texts are the fields' documentation.

use std::fmt::Write;

use crate::QuicEndpoint;

/// The counters of `endpoints`, each under its name (label `endpoint`),
/// in the Prometheus text format: serve it on `/metrics` after the
/// runtime's own text. Names are escaped as label values.
///
/// ```no_run
/// # fn f(handle: &spargio::RuntimeHandle, server: &spargio_quic::QuicEndpoint) {
/// let mut text = handle.stats_snapshot().to_prometheus_text();
/// text.push_str(&spargio_quic::prometheus_text(&[("public", server)]));
/// # }
/// ```
pub fn prometheus_text(endpoints: &[(&str, &QuicEndpoint)]) -> String {
    let mut out = String::new();
    let mut families: Vec<Family> = Vec::new();
    for (name, endpoint) in endpoints {
        let label = format!("endpoint=\"{}\"", escape_label(name));
        endpoint.metrics().snapshot().each(|metric, help, value| {
            let family = family(&mut families, format!("spargio_quic_{metric}_total"), help);
            family.samples.push((label.clone(), value));
        });
        for (i, driver) in endpoint.drivers().iter().enumerate() {
            let labels = format!("{label},driver=\"{i}\"");
            driver.stats().each(|metric, help, value| {
                let name = format!("spargio_quic_driver_{metric}_total");
                family(&mut families, name, help)
                    .samples
                    .push((labels.clone(), value));
            });
        }
    }
    for f in &families {
        let _ = writeln!(out, "# HELP {} {}", f.name, escape_help(f.help));
        let _ = writeln!(out, "# TYPE {} counter", f.name);
        for (labels, value) in &f.samples {
            let _ = writeln!(out, "{}{{{labels}}} {value}", f.name);
        }
    }
    out
}

/// One metric family and its samples, written together (a family's
/// samples may not be split in the text format).
struct Family {
    name: String,
    help: &'static str,
    samples: Vec<(String, u64)>,
}

fn family<'a>(families: &'a mut Vec<Family>, name: String, help: &'static str) -> &'a mut Family {
    match families.iter().position(|f| f.name == name) {
        Some(i) => &mut families[i],
        None => {
            families.push(Family {
                name,
                help,
                samples: Vec::new(),
            });
            families.last_mut().expect("just pushed")
        }
    }
}

/// A doc comment as one help line: `\` escaped, whitespace collapsed.
fn escape_help(help: &str) -> String {
    help.split_whitespace()
        .map(|w| w.replace('\\', "\\\\"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A label value: `\`, `"` and line breaks escaped.
fn escape_label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_and_help_are_escaped() {
        assert_eq!(escape_label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
        assert_eq!(escape_help(" one\n  two\\ "), "one two\\\\");
    }
}

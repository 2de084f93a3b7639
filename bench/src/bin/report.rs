//! Renders the benchmark results as markdown tables and an SVG chart.
//!
//! ```text
//! cargo run -p spargio-bench --bin report [-- <target-dir>]
//! ```
//!
//! Reads criterion's `<target>/criterion/<group>/<variant>/new/estimates.json`
//! for every group found, plus `<target>/criterion/idle_cpu/result.json`
//! when present. `<target>` is the first argument, else `$CARGO_TARGET_DIR`,
//! else `target`. Prints the tables, and writes them to
//! `<target>/criterion/report.md` and the ratio chart to
//! `<target>/criterion/report.svg`.
//!
//! The ratio of a row is its mean over its spargio counterpart's mean: above
//! 1, spargio is faster. The counterpart of `tokio_mt_4` is `spargio_4`
//! (same suffix after the last `_`) when the group has one, else the
//! group's first `spargio*` row.

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde_json::Value;

/// Groups in the order the README describes them; others follow by name.
const GROUP_ORDER: &[&str] = &[
    "steady_ping_pong_rtt",
    "steady_one_way_send_drain",
    "cold_start_ping_pong",
    "fanout_fanin_balanced",
    "fanout_fanin_skewed",
    "fs_read_rtt_4k",
    "fs_read_throughput_4k_qd32",
    "fs_metadata_rtt",
    "net_echo_rtt_256b",
    "net_stream_throughput_4k_window32",
    "net_stream_imbalanced_4k_hot1_light7",
    "net_stream_hotspot_rotation_4k",
    "net_pipeline_hotspot_rotation_4k_window32",
    "net_keyed_hotspot_rotation_4k",
];

/// Variants in their natural order; others follow by name.
const VARIANT_ORDER: &[&str] = &[
    "spargio_io_uring",
    "tokio_two_worker",
    "tokio_mt_2",
    "spargio_4",
    "tokio_mt_4",
    "spargio_ncpu",
    "tokio_mt_ncpu",
    "spargio_fs_read_at_qd1",
    "tokio_spawn_blocking_pread_qd1",
    "compio_fs_read_at_qd1",
    "spargio_fs_read_at_qd32",
    "tokio_spawn_blocking_pread_qd32",
    "compio_fs_read_at_qd32",
    "spargio_metadata_lite",
    "tokio_spawn_blocking_metadata",
    "compio_metadata",
    "spargio_tcp_echo_qd1",
    "tokio_tcp_echo_qd1",
    "compio_tcp_echo_qd1",
    "spargio_tcp_echo_window32",
    "tokio_tcp_echo_window32",
    "compio_tcp_echo_window32",
    "spargio_tcp_8streams_hotcold",
    "tokio_tcp_8streams_hotcold",
    "compio_tcp_8streams_hotcold",
    "spargio_tcp_8streams_rotating_hotspot",
    "tokio_tcp_8streams_rotating_hotspot",
    "compio_tcp_8streams_rotating_hotspot",
    "spargio_tcp_pipeline_hotspot",
    "tokio_tcp_pipeline_hotspot",
    "compio_tcp_pipeline_hotspot",
    "spargio_tcp_keyed_router_hotspot",
    "tokio_tcp_keyed_router_hotspot",
    "compio_tcp_keyed_router_hotspot",
];

/// Directories under `criterion/` that are not benchmark groups.
const NOT_GROUPS: &[&str] = &["report", "idle_cpu"];

struct Variant {
    name: String,
    /// Mean time per iteration, ns.
    mean: f64,
    /// 95 % confidence interval of the mean, ns.
    ci: (f64, f64),
    /// Criterion's slope estimate (what its console prints as `time` under
    /// linear sampling), ns; `None` under flat sampling.
    slope: Option<f64>,
    /// From `cpu.json` (benches/common/cpu.rs): process CPU time per
    /// iteration, ns, and CPU time over wall time (cores kept busy).
    cpu: Option<(f64, f64)>,
}

struct Group {
    name: String,
    variants: Vec<Variant>,
}

struct Ratio {
    group: String,
    variant: String,
    baseline: String,
    ratio: f64,
}

fn order_key(order: &[&str], name: &str) -> (usize, String) {
    let pos = order.iter().position(|&o| o == name).unwrap_or(order.len());
    (pos, name.to_string())
}

fn subdirs(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    out.sort();
    out
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn read_json(path: &Path) -> Option<Value> {
    let text = fs::read_to_string(path).ok()?;
    match serde_json::from_str(&text) {
        Ok(v) => Some(v),
        Err(err) => {
            eprintln!("skipping {}: {err}", path.display());
            None
        }
    }
}

fn read_variant(dir: &Path) -> Option<Variant> {
    let est = read_json(&dir.join("new").join("estimates.json"))?;
    let mean = &est["mean"];
    let point = mean["point_estimate"].as_f64()?;
    let ci = &mean["confidence_interval"];
    let lo = ci["lower_bound"].as_f64().unwrap_or(point);
    let hi = ci["upper_bound"].as_f64().unwrap_or(point);
    Some(Variant {
        name: file_name(dir),
        mean: point,
        ci: (lo, hi),
        slope: est["slope"]["point_estimate"].as_f64(),
        cpu: read_json(&dir.join("cpu.json")).and_then(|c| {
            let iters = c["iters"].as_f64().filter(|&n| n > 0.0)?;
            let cpu = c["cpu_ns"].as_f64()?;
            let wall = c["wall_ns"].as_f64().filter(|&w| w > 0.0)?;
            Some((cpu / iters, cpu / wall))
        }),
    })
}

fn read_groups(criterion: &Path) -> Vec<Group> {
    let mut groups: Vec<Group> = subdirs(criterion)
        .into_iter()
        .filter(|d| !NOT_GROUPS.contains(&file_name(d).as_str()))
        .filter_map(|d| {
            let mut variants: Vec<Variant> =
                subdirs(&d).iter().filter_map(|v| read_variant(v)).collect();
            variants.sort_by_key(|v| order_key(VARIANT_ORDER, &v.name));
            (!variants.is_empty()).then(|| Group {
                name: file_name(&d),
                variants,
            })
        })
        .collect();
    groups.sort_by_key(|g| order_key(GROUP_ORDER, &g.name));
    groups
}

/// The spargio row `name` is compared with, if any.
fn baseline<'a>(group: &'a Group, name: &str) -> Option<&'a Variant> {
    if name.starts_with("spargio") {
        return group.variants.iter().find(|v| v.name == name);
    }
    let suffix = name.rsplit('_').next().unwrap_or(name);
    let paired = format!("spargio_{suffix}");
    group
        .variants
        .iter()
        .find(|v| v.name == paired)
        .or_else(|| {
            group
                .variants
                .iter()
                .find(|v| v.name.starts_with("spargio"))
        })
}

/// A duration in ns with a unit that keeps it readable.
fn fmt_time(ns: f64) -> String {
    if ns < 1e3 {
        format!("{ns:.1} ns")
    } else if ns < 1e6 {
        format!("{:.2} µs", ns / 1e3)
    } else if ns < 1e9 {
        format!("{:.3} ms", ns / 1e6)
    } else {
        format!("{:.3} s", ns / 1e9)
    }
}

fn render_groups(groups: &[Group], md: &mut String, ratios: &mut Vec<Ratio>) {
    for group in groups {
        let _ = writeln!(md, "### {}\n", group.name);
        let _ = writeln!(
            md,
            "| variant | mean | 95% CI of mean | slope | CPU / iter | cores busy | compared with | ratio vs spargio | CPU ratio vs spargio |"
        );
        let _ = writeln!(md, "|---|---:|---:|---:|---:|---:|---|---:|---:|");
        for v in &group.variants {
            let cpu_ratio = match (baseline(group, &v.name).and_then(|b| b.cpu), v.cpu) {
                (Some((b, _)), Some((c, _))) if b > 0.0 => format!("{:.2}", c / b),
                _ => "n/a".to_string(),
            };
            let (cpu, busy) = v.cpu.map_or_else(
                || ("n/a".to_string(), "n/a".to_string()),
                |(c, b)| (fmt_time(c), format!("{b:.2}")),
            );
            let (vs, ratio) = match baseline(group, &v.name) {
                Some(b) if b.name == v.name => ("—".to_string(), "1.00".to_string()),
                Some(b) => {
                    let r = v.mean / b.mean;
                    ratios.push(Ratio {
                        group: group.name.clone(),
                        variant: v.name.clone(),
                        baseline: b.name.clone(),
                        ratio: r,
                    });
                    (b.name.clone(), format!("{r:.2}"))
                }
                None => ("—".to_string(), "n/a".to_string()),
            };
            let _ = writeln!(
                md,
                "| {} | {} | {} – {} | {} | {} | {} | {} | {} | {} |",
                v.name,
                fmt_time(v.mean),
                fmt_time(v.ci.0),
                fmt_time(v.ci.1),
                v.slope
                    .map_or_else(|| "(flat sampling)".to_string(), fmt_time),
                cpu,
                busy,
                vs,
                ratio,
                cpu_ratio
            );
        }
        let _ = writeln!(md);
    }
}

fn render_idle(result: &Value, md: &mut String) {
    let idle = result["idle_secs"].as_f64().unwrap_or(2.0);
    let _ = writeln!(md, "### idle_cpu\n");
    let _ = writeln!(
        md,
        "| runtime | shards | CPU s over {idle:.1} s | % of one core per shard |"
    );
    let _ = writeln!(md, "|---|---:|---:|---:|");
    for row in result["rows"].as_array().into_iter().flatten() {
        let _ = writeln!(
            md,
            "| {} | {} | {:.4} | {:.3} % |",
            row["runtime"].as_str().unwrap_or("?"),
            row["shards"].as_u64().unwrap_or(0),
            row["cpu_secs"].as_f64().unwrap_or(f64::NAN),
            row["pct_per_shard"].as_f64().unwrap_or(f64::NAN),
        );
    }
    let threshold = result["threshold_pct_per_shard"].as_f64().unwrap_or(1.0);
    let verdict = match result["pass"].as_bool() {
        Some(true) => "pass",
        Some(false) => "FAIL",
        None => "unknown",
    };
    let _ = writeln!(
        md,
        "\nspargio idle budget: < {threshold} % of a core per shard: **{verdict}**\n"
    );
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A diverging bar chart of the ratios on a log2 axis centred on 1.
fn render_svg(ratios: &[Ratio]) -> String {
    const WIDTH: f64 = 960.0;
    const LABEL_W: f64 = 400.0;
    const RIGHT_PAD: f64 = 70.0;
    const TOP: f64 = 60.0;
    const ROW_H: f64 = 24.0;
    const BAR_H: f64 = 16.0;
    const BOTTOM: f64 = 50.0;

    let max_log = ratios
        .iter()
        .map(|r| r.ratio.log2().abs())
        .filter(|l| l.is_finite())
        .fold(1.0f64, f64::max)
        .ceil()
        .min(8.0);
    let plot_w = WIDTH - LABEL_W - RIGHT_PAD;
    let x_of = |ratio: f64| {
        let l = ratio.log2().clamp(-max_log, max_log);
        LABEL_W + (l + max_log) / (2.0 * max_log) * plot_w
    };
    let height = TOP + ROW_H * ratios.len().max(1) as f64 + BOTTOM;
    let axis_bottom = TOP + ROW_H * ratios.len().max(1) as f64;

    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(
        svg,
        r##"<rect x="0" y="0" width="{WIDTH}" height="{height}" fill="#ffffff"/>"##
    );
    let _ = writeln!(
        svg,
        r#"<text x="{}" y="22" font-size="15" font-weight="bold" text-anchor="middle">Mean time relative to spargio (log scale; right of 1× = spargio faster)</text>"#,
        WIDTH / 2.0
    );

    // Grid and ticks at powers of two.
    let lo = -(max_log as i32);
    // Label every other power of two on wide axes, so labels do not collide.
    let label_step = if max_log > 4.0 { 2 } else { 1 };
    for k in lo..=-lo {
        let ratio = 2f64.powi(k);
        let x = x_of(ratio);
        let (stroke, width) = if k == 0 {
            ("#333333", 1.5)
        } else {
            ("#dddddd", 1.0)
        };
        let _ = writeln!(
            svg,
            r#"<line x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{axis_bottom:.1}" stroke="{stroke}" stroke-width="{width}"/>"#,
            TOP - 6.0
        );
        if k % label_step != 0 {
            continue;
        }
        let label = if k >= 0 {
            format!("{}×", 1u64 << k)
        } else {
            format!("1/{}×", 1u64 << -k)
        };
        let _ = writeln!(
            svg,
            r##"<text x="{x:.1}" y="{:.1}" text-anchor="middle" fill="#555555">{}</text>"##,
            axis_bottom + 16.0,
            xml_escape(&label)
        );
    }
    let _ = writeln!(
        svg,
        r##"<text x="{:.1}" y="{:.1}" text-anchor="middle" fill="#555555">other mean / spargio mean</text>"##,
        LABEL_W + plot_w / 2.0,
        axis_bottom + 36.0
    );

    if ratios.is_empty() {
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">no results</text>"#,
            WIDTH / 2.0,
            TOP + ROW_H / 2.0
        );
    }

    let one = x_of(1.0);
    for (i, r) in ratios.iter().enumerate() {
        let y = TOP + ROW_H * i as f64;
        let x = x_of(r.ratio);
        let (x0, w) = if x >= one {
            (one, x - one)
        } else {
            (x, one - x)
        };
        let fill = if r.ratio >= 1.0 { "#2e8b57" } else { "#cd5c5c" };
        let label = format!("{} · {} vs {}", r.group, r.variant, r.baseline);
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
            LABEL_W - 8.0,
            y + ROW_H / 2.0 + 4.0,
            xml_escape(&label)
        );
        let _ = writeln!(
            svg,
            r#"<rect x="{x0:.1}" y="{:.1}" width="{:.1}" height="{BAR_H}" fill="{fill}"><title>{}: {:.3}</title></rect>"#,
            y + (ROW_H - BAR_H) / 2.0,
            w.max(1.0),
            xml_escape(&label),
            r.ratio
        );
        let (tx, anchor) = if x >= one {
            (x + 4.0, "start")
        } else {
            (x - 4.0, "end")
        };
        let _ = writeln!(
            svg,
            r#"<text x="{tx:.1}" y="{:.1}" text-anchor="{anchor}">{:.2}×</text>"#,
            y + ROW_H / 2.0 + 4.0,
            r.ratio
        );
    }
    svg.push_str("</svg>\n");
    svg
}

fn main() -> ExitCode {
    let target = std::env::args_os()
        .nth(1)
        .or_else(|| std::env::var_os("CARGO_TARGET_DIR"))
        .map_or_else(|| PathBuf::from("target"), PathBuf::from);
    let criterion = target.join("criterion");
    if !criterion.is_dir() {
        eprintln!(
            "no criterion results in {} (run `cargo bench -p spargio-bench` first)",
            criterion.display()
        );
        return ExitCode::FAILURE;
    }

    let groups = read_groups(&criterion);
    let mut md = String::from("## spargio benchmark report\n\n");
    let _ = writeln!(
        md,
        "Ratio = other mean / spargio mean (above 1: spargio faster). \
         Slope is criterion's linear-regression estimate (its console `time`); \
         it leaves out per-sample fixed costs that the mean includes.\n"
    );
    let mut ratios = Vec::new();
    render_groups(&groups, &mut md, &mut ratios);
    if let Some(idle) = read_json(&criterion.join("idle_cpu").join("result.json")) {
        render_idle(&idle, &mut md);
    }
    if groups.is_empty() {
        let _ = writeln!(md, "(no criterion groups found)\n");
    }
    print!("{md}");

    let md_path = criterion.join("report.md");
    let svg_path = criterion.join("report.svg");
    for (path, text) in [(&md_path, md.clone()), (&svg_path, render_svg(&ratios))] {
        if let Err(err) = fs::write(path, text) {
            eprintln!("could not write {}: {err}", path.display());
            return ExitCode::FAILURE;
        }
    }
    eprintln!("wrote {} and {}", md_path.display(), svg_path.display());
    ExitCode::SUCCESS
}

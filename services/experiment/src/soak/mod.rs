//! A soak: one open-loop round of hours, judged for drift rather than for speed. The measured
//! phase is cut into windows (`window` in the plan, k6 tags each request with its window); per
//! window the report shows the client's p50/p99 and throughput, every process's RSS, open file
//! descriptors, threads and CPU per message, and each server's data on disk. The verdict is
//! "flat" only when, comparing the first and the last edge of the phase (10 minutes each, or a
//! third of a shorter soak), the p99 stayed within 1.5×, our processes' RSS grew less than 5 %
//! per hour, their descriptors and threads did not grow, and the round passed every gate (above
//! all: every acknowledged message is in every store, same content).
//!
//! The servers' memory and files are shown, not judged: Redis holds every message in memory and
//! MariaDB's buffer pool fills as the tables grow, by design; a leak of ours is what this looks for.

mod chart;
mod render;

pub(crate) use chart::draw;
pub(crate) use render::render;

use crate::evidence::{at, Evidence, RoundEvidence};
use crate::prom::label;
use crate::stats::num;
use std::collections::BTreeMap;

/// The processes judged for leaks: ours.
pub(crate) const JUDGED: [&str; 2] = ["ingest", "writer"];
/// Most the last edge's p99 may be over the first edge's.
pub(crate) const MAX_P99_RATIO: f64 = 1.5;
/// Most RSS may grow per hour, as a share of the first edge's.
pub(crate) const MAX_RSS_GROWTH_PER_HOUR: f64 = 0.05;

/// One process over one window.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct ProcWindow {
    /// At the window's end.
    pub rss_bytes: Option<f64>,
    pub fds: Option<f64>,
    pub threads: Option<f64>,
    /// CPU over the window over the window's requests (one message each), in µs.
    pub cpu_us_per_msg: Option<f64>,
}

/// One window of the measured phase.
#[derive(Debug, Clone, Default)]
pub(crate) struct Window {
    /// Since the measured phase's start.
    pub start_s: f64,
    pub secs: f64,
    pub requests: f64,
    pub errors: f64,
    pub p50: Option<f64>,
    pub p99: Option<f64>,
    pub procs: BTreeMap<String, ProcWindow>,
    /// Each server's data on disk at the window's end.
    pub data_bytes: BTreeMap<String, f64>,
}

impl Window {
    pub(crate) fn rate(&self) -> f64 {
        if self.secs > 0.0 {
            self.requests / self.secs
        } else {
            0.0
        }
    }
}

/// One check of the verdict.
#[derive(Debug, Clone)]
pub(crate) struct Check {
    pub ok: bool,
    pub what: String,
    pub detail: String,
}

#[derive(Debug, Clone, Default)]
pub(crate) struct Soak {
    pub round: String,
    pub target_rate: u32,
    pub window_s: f64,
    /// Windows in each edge the verdict compares.
    pub edge: usize,
    pub windows: Vec<Window>,
    /// p50/p99 over all requests of the first and the last edge (k6's own, not a mean of windows).
    pub first: (Option<f64>, Option<f64>),
    pub last: (Option<f64>, Option<f64>),
    pub checks: Vec<Check>,
}

impl Soak {
    pub(crate) fn flat(&self) -> bool {
        !self.checks.is_empty() && self.checks.iter().all(|c| c.ok)
    }
}

/// The soak of an evidence folder whose plan has windows (its one round); `round_valid` is the
/// round's gate verdict.
pub(crate) fn analyse(ev: &Evidence, round_valid: bool) -> Option<Soak> {
    let window_s = ev.plan.window_s()?;
    let r = ev.rounds.first()?;
    let mut s = Soak {
        round: r.name.clone(),
        target_rate: ev.plan.rates.first().copied().unwrap_or(0),
        window_s,
        ..Soak::default()
    };
    let summary = r.summary.clone().unwrap_or_default();
    s.windows = windows(r, &summary);
    s.edge = num(&summary, &["window_edges", "windows"]).map(|e| e as usize).unwrap_or(0);
    let pair =
        |part: &str| (num(&summary, &["window_edges", part, "p50"]), num(&summary, &["window_edges", part, "p99"]));
    (s.first, s.last) = (pair("first"), pair("last"));
    s.checks = checks(&s, round_valid);
    Some(s)
}

/// The k6 summary's windows, with the timeline's figures at each window's bounds.
fn windows(r: &RoundEvidence, summary: &serde_json::Value) -> Vec<Window> {
    let measured = r.record.k6.as_ref().map(|k| k.measured_s).unwrap_or(0.0);
    let list = summary.get("windows").and_then(|w| w.as_array()).cloned().unwrap_or_default();
    list.iter()
        .map(|w| {
            let get = |k: &[&str]| num(w, k);
            let mut win = Window {
                start_s: get(&["start_s"]).unwrap_or(0.0),
                secs: get(&["secs"]).unwrap_or(0.0),
                requests: get(&["requests"]).unwrap_or(0.0),
                errors: get(&["errors"]).unwrap_or(0.0),
                p50: get(&["latency_ms", "p50"]),
                p99: get(&["latency_ms", "p99"]),
                ..Window::default()
            };
            let (a, b) = (measured + win.start_s, measured + win.start_s + win.secs);
            let tl = &r.timeline;
            for (labels, pts) in tl.matching("proc", "cpu_seconds") {
                let Some(name) = label(labels, "process") else { continue };
                let p = win.procs.entry(name.to_string()).or_default();
                if let (Some(x), Some(y)) = (at(pts, a), at(pts, b)) {
                    if win.requests > 0.0 {
                        p.cpu_us_per_msg = Some((y - x).max(0.0) * 1e6 / win.requests);
                    }
                }
                let last = |metric: &str| tl.get("proc", metric, labels).and_then(|pts| at(pts, b));
                p.rss_bytes = last("rss_bytes");
                p.fds = last("open_fds");
                p.threads = last("threads");
            }
            for (labels, pts) in tl.matching("disk", "data_bytes") {
                if let (Some(server), Some(v)) = (label(labels, "server"), at(pts, b)) {
                    win.data_bytes.insert(server.to_string(), v);
                }
            }
            win
        })
        .collect()
}

fn mean(values: impl Iterator<Item = f64>) -> Option<f64> {
    let v: Vec<f64> = values.collect();
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

fn max(values: impl Iterator<Item = f64>) -> Option<f64> {
    values.reduce(f64::max)
}

fn median(mut values: Vec<f64>) -> Option<f64> {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied()
}

/// The verdict's checks, in the order the report lists them.
fn checks(s: &Soak, round_valid: bool) -> Vec<Check> {
    let mut out = vec![Check {
        ok: round_valid,
        what: "the round passed every gate".into(),
        detail: "nothing lost: every acknowledged message in every store once, same content (reconcile); errors, rate, drops".into(),
    }];
    let n = s.windows.len();
    if s.edge == 0 || n < 2 * s.edge {
        out.push(Check {
            ok: false,
            what: "windows to compare".into(),
            detail: format!("{n} windows, edge {}", s.edge),
        });
        return out;
    }
    let (first, last) = (&s.windows[..s.edge], &s.windows[n - s.edge..]);
    let edge = match s.edge as f64 * s.window_s {
        e if e >= 60.0 => format!("{} min", minutes(e)),
        e => format!("{e:.0} s"),
    };
    out.push(match (s.first.1, s.last.1) {
        (Some(a), Some(b)) if a > 0.0 => Check {
            ok: b <= MAX_P99_RATIO * a,
            what: format!("p99 of the last {edge} within {MAX_P99_RATIO}× of the first {edge}"),
            detail: format!("{a:.1} ms → {b:.1} ms ({:.2}×)", b / a),
        },
        _ => Check { ok: false, what: "p99 of both edges".into(), detail: "not in the k6 summary".into() },
    });
    // Hours between the two edges' middles: the growth rate's denominator.
    let hours = (n - s.edge) as f64 * s.window_s / 3600.0;
    for name in JUDGED {
        let series = |ws: &[Window], f: fn(&ProcWindow) -> Option<f64>| -> Vec<f64> {
            ws.iter().filter_map(|w| w.procs.get(name).and_then(f)).collect()
        };
        let (a, b) =
            (mean(series(first, |p| p.rss_bytes).into_iter()), mean(series(last, |p| p.rss_bytes).into_iter()));
        out.push(match (a, b) {
            (Some(a), Some(b)) if a > 0.0 && hours > 0.0 => {
                let per_hour = (b - a) / a / hours;
                Check {
                    ok: per_hour <= MAX_RSS_GROWTH_PER_HOUR,
                    what: format!("{name}: RSS grows < {:.0} % per hour", MAX_RSS_GROWTH_PER_HOUR * 100.0),
                    detail: format!(
                        "{:.1} → {:.1} MiB, {:+.1} % per hour",
                        a / 1048576.0,
                        b / 1048576.0,
                        per_hour * 100.0
                    ),
                }
            }
            _ => Check { ok: false, what: format!("{name}: RSS sampled"), detail: "no samples".into() },
        });
        for (what, f) in
            [("open file descriptors", (|p| p.fds) as fn(&ProcWindow) -> Option<f64>), ("threads", |p| p.threads)]
        {
            // The last edge's typical count against the first edge's most: a leak lifts every
            // window after it, while a connection opened and closed lifts one sample.
            let (a, b) = (max(series(first, f).into_iter()), median(series(last, f)));
            out.push(match (a, b) {
                (Some(a), Some(b)) => Check {
                    ok: b <= a,
                    what: format!("{name}: {what} do not grow"),
                    detail: format!("most {a:.0} in the first edge, median {b:.0} in the last"),
                },
                _ => Check { ok: false, what: format!("{name}: {what} sampled"), detail: "no samples".into() },
            });
        }
    }
    out
}

/// `12` for whole minutes, `0.5` for windows shorter than a minute. Here, not in render.rs, because
/// the checks name their edges in minutes too, and render.rs reads this file's types: one way only.
fn minutes(secs: f64) -> String {
    let m = secs / 60.0;
    if (m - m.round()).abs() < 1e-9 {
        format!("{m:.0}")
    } else {
        format!("{m:.1}")
    }
}

#[cfg(test)]
mod tests;

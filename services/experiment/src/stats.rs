//! Numbers of one round, from its evidence: throughput and latency (k6's measured phase), CPU
//! microseconds per message per process, and what the writer's pools did.
//!
//! CPU per message is taken over the window from k6's start until the writer stopped storing
//! (its `writer_store_records_total` stopped rising): a writer that lags behind the load works on
//! after k6 ends, and that work belongs to the messages too. The divisor is every message that
//! entered the pipeline (accepted + uncertain, warm-up included, since those are stored too).

use crate::evidence::{at, at_or_after, RoundEvidence, Timeline};
use crate::prom::label;
use serde_json::Value;
use std::collections::BTreeMap;

/// Process columns in a fixed order: ours, the load generator, the broker, then each store's
/// server in the registry's order. Here, beside the per-process CPU it orders, because the report,
/// its charts and the soak all show processes in this order and none of them owns the others.
pub(crate) fn processes() -> Vec<&'static str> {
    let mut p = vec!["writer", "ingest", "k6", "kafka"];
    p.extend(pipeline_stores::StoreKind::ALL.iter().map(|k| k.name()));
    p
}

#[derive(Debug, Clone, Default)]
pub(crate) struct PoolStats {
    /// Over the measured phase.
    pub caller_runs: f64,
    pub rejected: f64,
    /// Highest queue depth since the writer started (the pool's own peak gauge).
    pub peak_queue: f64,
    pub mean_active: f64,
    pub peak_active: f64,
}

#[derive(Debug, Clone, Default)]
pub(crate) struct RoundStats {
    pub throughput: Option<f64>,
    pub requests: f64,
    pub p50: Option<f64>,
    pub p95: Option<f64>,
    pub p99: Option<f64>,
    pub error_rate: Option<f64>,
    pub non_202: BTreeMap<String, f64>,
    pub dropped: f64,
    /// Messages that entered the pipeline (accepted + uncertain).
    pub messages: f64,
    pub cpu_window: Option<(f64, f64)>,
    pub cpu_us_per_msg: BTreeMap<String, f64>,
    /// Records/s the writer stored in all four stores during the measured phase (the slowest
    /// store's rate: a record is done when all four hold it). Kafka decouples it from k6's rate.
    pub writer_rate: Option<f64>,
    /// Seconds the writer kept storing after k6 stopped: the backlog the load left behind.
    pub drain_after_s: Option<f64>,
    /// Cores k6 used during the measured phase.
    pub k6_cores: Option<f64>,
    /// Cores used during the measured phase by processes outside the round (the machine's busy
    /// time minus every sampled process's): another job on the machine distorts the comparison.
    pub outside_cores: Option<f64>,
    pub pools: BTreeMap<String, PoolStats>,
}

impl RoundStats {
    /// What the pipeline sustained into every store: the lower of the ingest's accepted rate
    /// and the writer's stored rate over the measured phase. Policies are ranked by it, since
    /// Kafka lets the ingest accept faster than the writer stores, and an accepted rate the
    /// writer does not keep up with is only a backlog growing. Either alone when the other is
    /// missing.
    pub(crate) fn end_to_end(&self) -> Option<f64> {
        match (self.throughput, self.writer_rate) {
            (Some(a), Some(w)) => Some(a.min(w)),
            (a, w) => a.or(w),
        }
    }

    pub(crate) fn caller_runs(&self) -> f64 {
        self.pools.values().map(|p| p.caller_runs).sum()
    }

    /// The deepest any pool's queue got (the writer's own peak gauge).
    pub(crate) fn peak_queue(&self) -> f64 {
        self.pools.values().map(|p| p.peak_queue).fold(0.0, f64::max)
    }

    pub(crate) fn rejected(&self) -> f64 {
        self.pools.values().map(|p| p.rejected).sum()
    }

    pub(crate) fn cpu_total(&self) -> Option<f64> {
        (!self.cpu_us_per_msg.is_empty()).then(|| self.cpu_us_per_msg.values().sum())
    }
}

/// The number at `path` in a JSON document (a k6 summary), if it is one.
pub(crate) fn num(v: &Value, path: &[&str]) -> Option<f64> {
    path.iter().try_fold(v, |v, k| v.get(k))?.as_f64()
}

pub(crate) fn compute(r: &RoundEvidence) -> RoundStats {
    let mut s = RoundStats::default();
    if let Some(sum) = &r.summary {
        s.throughput = num(sum, &["measured", "messages_per_s"]);
        s.requests = num(sum, &["measured", "requests"]).unwrap_or(0.0);
        s.p50 = num(sum, &["measured", "latency_ms", "p50"]);
        s.p95 = num(sum, &["measured", "latency_ms", "p95"]);
        s.p99 = num(sum, &["measured", "latency_ms", "p99"]);
        s.error_rate = num(sum, &["measured", "error_rate"]);
        s.dropped = num(sum, &["measured", "dropped_iterations"]).unwrap_or(0.0);
        s.messages = num(sum, &["accepted"]).unwrap_or(0.0) + num(sum, &["uncertain"]).unwrap_or(0.0);
        if let Some(m) = sum.pointer("/measured/non_202").and_then(Value::as_object) {
            s.non_202 = m.iter().filter_map(|(k, v)| Some((k.clone(), v.as_f64()?))).collect();
        }
    }
    let Some(k6) = &r.record.k6 else { return s };
    let tl = &r.timeline;
    let end = drained_at(tl, k6.started_s, r.record.reconcile_s.map(|x| x.1).unwrap_or(k6.ended_s)).max(k6.ended_s);
    s.cpu_window = Some((k6.started_s, end));
    s.drain_after_s = Some(end - k6.ended_s);
    let window = k6.ended_s - k6.measured_s;
    if window > 0.0 {
        s.writer_rate = tl
            .matching("writer", "writer_store_records_total")
            .filter_map(|(_, pts)| Some(at(pts, k6.ended_s)? - at(pts, k6.measured_s).unwrap_or(0.0)))
            .map(|d| d / window)
            .reduce(f64::min);
    }
    if s.messages > 0.0 {
        for (labels, pts) in tl.matching("proc", "cpu_seconds") {
            let Some(name) = label(labels, "process") else { continue };
            let (Some(a), Some(b)) =
                (at(pts, k6.started_s).or_else(|| pts.first().map(|p| p.1)), at_or_after(pts, end))
            else {
                continue;
            };
            s.cpu_us_per_msg.insert(name.to_string(), (b - a).max(0.0) * 1e6 / s.messages);
        }
    }
    if let Some(pts) = tl.get("proc", "cpu_seconds", "process=k6") {
        let inside: Vec<&(f64, f64)> = pts.iter().filter(|(t, _)| *t >= k6.measured_s && *t <= k6.ended_s).collect();
        if let (Some(a), Some(b)) = (inside.first(), inside.last()) {
            if b.0 > a.0 {
                s.k6_cores = Some((b.1 - a.1) / (b.0 - a.0));
            }
        }
    }
    s.outside_cores = outside(tl, k6.measured_s, k6.ended_s);
    s.pools = pools(tl, k6.measured_s, k6.ended_s);
    s
}

/// When the writer stopped storing: the first sample that shows the final total of
/// `writer_store_records_total` (all stores) within [from, to]; `from` when nothing was stored.
pub(crate) fn drained_at(tl: &Timeline, from: f64, to: f64) -> f64 {
    let mut totals: BTreeMap<u64, f64> = BTreeMap::new();
    for (_, pts) in tl.matching("writer", "writer_store_records_total") {
        for (t, v) in pts.iter().filter(|(t, _)| *t >= from && *t <= to) {
            *totals.entry(t.to_bits()).or_default() += v;
        }
    }
    let series: Vec<(f64, f64)> = totals.into_iter().map(|(t, v)| (f64::from_bits(t), v)).collect();
    let Some(last) = series.last().map(|p| p.1) else { return from };
    series.iter().find(|(_, v)| *v >= last).map(|p| p.0).unwrap_or(from)
}

fn outside(tl: &Timeline, from: f64, to: f64) -> Option<f64> {
    let machine = tl.get("machine", "cpu_busy_seconds", "")?;
    let inside: Vec<&(f64, f64)> = machine.iter().filter(|(t, _)| *t >= from && *t <= to).collect();
    let (a, b) = (inside.first()?, inside.last()?);
    if b.0 <= a.0 {
        return None;
    }
    let ours: f64 = tl
        .matching("proc", "cpu_seconds")
        .filter_map(|(_, pts)| Some(at_or_after(pts, b.0)? - at_or_after(pts, a.0)?))
        .map(|d| d.max(0.0))
        .sum();
    Some(((b.1 - a.1) - ours).max(0.0) / (b.0 - a.0))
}

fn pools(tl: &Timeline, from: f64, to: f64) -> BTreeMap<String, PoolStats> {
    let mut out: BTreeMap<String, PoolStats> = BTreeMap::new();
    let delta = |pts: &[(f64, f64)]| at(pts, to).unwrap_or(0.0) - at(pts, from).unwrap_or(0.0);
    for (labels, pts) in tl.matching("writer", "writer_pool_caller_runs_total") {
        out.entry(pool_name(labels)).or_default().caller_runs = delta(pts);
    }
    for (labels, pts) in tl.matching("writer", "writer_pool_rejected_total") {
        out.entry(pool_name(labels)).or_default().rejected = delta(pts);
    }
    for (labels, pts) in tl.matching("writer", "writer_pool_queue_depth_peak") {
        out.entry(pool_name(labels)).or_default().peak_queue = pts.iter().map(|p| p.1).fold(0.0, f64::max);
    }
    for (labels, pts) in tl.matching("writer", "writer_pool_active_workers_peak") {
        out.entry(pool_name(labels)).or_default().peak_active = pts.iter().map(|p| p.1).fold(0.0, f64::max);
    }
    for (labels, pts) in tl.matching("writer", "writer_pool_active_workers") {
        let inside: Vec<f64> = pts.iter().filter(|(t, _)| *t >= from && *t <= to).map(|p| p.1).collect();
        if !inside.is_empty() {
            out.entry(pool_name(labels)).or_default().mean_active = inside.iter().sum::<f64>() / inside.len() as f64;
        }
    }
    out
}

pub(crate) fn pool_name(labels: &str) -> String {
    label(labels, "pool").unwrap_or("?").to_string()
}

/// Median, min and max of some values (None when there are none).
/// Median, min and max of some rounds' values.
pub(crate) type Spread = (f64, f64, f64);

/// Whether two cells' rounds overlap (min–max): if they do, the difference of their medians is
/// within the round-to-round spread.
pub(crate) fn ranges_overlap(a: Spread, b: Spread) -> bool {
    a.1 <= b.2 && b.1 <= a.2
}

pub(crate) fn spread(values: &[f64]) -> Option<Spread> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let med = if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 };
    Some((med, v[0], v[n - 1]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians() {
        assert_eq!(spread(&[3.0, 1.0, 2.0]), Some((2.0, 1.0, 3.0)));
        assert_eq!(spread(&[4.0, 1.0]), Some((2.5, 1.0, 4.0)));
        assert_eq!(spread(&[]), None);
    }

    #[test]
    fn drain_is_when_the_total_stops_rising() {
        let mut tl = Timeline::default();
        let key = |s: &str| ("writer".to_string(), "writer_store_records_total".to_string(), format!("store={s}"));
        tl.series.insert(key("mysql"), vec![(1.0, 0.0), (2.0, 5.0), (3.0, 10.0), (4.0, 10.0)]);
        tl.series.insert(key("es"), vec![(1.0, 0.0), (2.0, 5.0), (3.0, 8.0), (4.0, 10.0)]);
        assert_eq!(drained_at(&tl, 0.0, 9.0), 4.0);
        assert_eq!(drained_at(&Timeline::default(), 2.0, 9.0), 2.0);
    }
}

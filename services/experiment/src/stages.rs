//! Where a request's time goes inside the ingest, stage by stage, over a round's measured phase:
//! the ingest's own latency histograms (ring wait, gathering, Kafka delivery, the whole answer)
//! read once when the measured phase starts and once when it ends; the quantiles come from the
//! difference of the two, as Prometheus' `histogram_quantile` over the phase would give them.
//! The round keeps both readings (`ingest-metrics-start.prom`, `ingest-metrics-end.prom`), so a
//! report computes them from the evidence alone.

use pipeline_common::catalog;
use std::collections::BTreeMap;
use std::path::Path;

/// The stages, in the order a request crosses them, with the histogram that measures each (the
/// answer's is the single-message route's).
pub(crate) const STAGES: [(&str, &str, &str); 4] = [
    ("ring wait", catalog::INGEST_RING_WAIT_SECONDS, ""),
    ("gathering", catalog::INGEST_GATHER_SECONDS, ""),
    ("Kafka delivery", catalog::INGEST_KAFKA_DELIVERY_SECONDS, ""),
    ("answer", catalog::INGEST_REQUEST_SECONDS, "route=\"/v1/messages\""),
];

pub(crate) const START: &str = "ingest-metrics-start.prom";
pub(crate) const END: &str = "ingest-metrics-end.prom";

/// The cumulative buckets `(le, count)` of histogram `name`, summed over its series whose labels
/// contain `labels` (empty: all), in the order of `le`.
fn buckets(body: &str, name: &str, labels: &str) -> Vec<(f64, f64)> {
    let prefix = format!("{name}_bucket{{");
    let mut by_le: BTreeMap<u64, (f64, f64)> = BTreeMap::new();
    for line in body.lines().filter(|l| l.starts_with(&prefix) && l.contains(labels)) {
        let Some((head, value)) = line.rsplit_once(' ') else { continue };
        let Some(le) = head.split("le=\"").nth(1).and_then(|s| s.split('"').next()) else { continue };
        let le: f64 = if le == "+Inf" { f64::INFINITY } else { le.parse().unwrap_or(f64::NAN) };
        let Ok(count) = value.trim().parse::<f64>() else { continue };
        if le.is_nan() {
            continue;
        }
        let e = by_le.entry(le.to_bits()).or_insert((le, 0.0));
        e.1 += count;
    }
    let mut out: Vec<(f64, f64)> = by_le.into_values().collect();
    out.sort_by(|a, b| a.0.total_cmp(&b.0));
    out
}

/// The `q` quantile (0..1) of what was observed between two readings, in seconds: linear within
/// the bucket it falls in, as `histogram_quantile` does; `None` when nothing was observed.
pub(crate) fn quantile(start: &[(f64, f64)], end: &[(f64, f64)], q: f64) -> Option<f64> {
    let before = |le: f64| start.iter().find(|(l, _)| *l == le).map_or(0.0, |(_, c)| *c);
    let delta: Vec<(f64, f64)> = end.iter().map(|(le, c)| (*le, (c - before(*le)).max(0.0))).collect();
    let total = delta.last()?.1;
    if total <= 0.0 {
        return None;
    }
    let rank = q * total;
    let mut prev = (0.0, 0.0);
    for (le, count) in &delta {
        if *count >= rank {
            if le.is_infinite() {
                return Some(prev.0);
            }
            let within = if count - prev.1 > 0.0 { (rank - prev.1) / (count - prev.1) } else { 0.0 };
            return Some(prev.0 + (le - prev.0) * within);
        }
        prev = (*le, *count);
    }
    Some(prev.0)
}

/// One stage's p50 and p99 over the measured phase, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Stage {
    pub name: &'static str,
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
}

/// Every stage of a round, from its two readings; empty when the round has none.
pub(crate) fn of_round(dir: &Path) -> Vec<Stage> {
    let (Ok(start), Ok(end)) = (std::fs::read_to_string(dir.join(START)), std::fs::read_to_string(dir.join(END)))
    else {
        return Vec::new();
    };
    STAGES
        .iter()
        .map(|(name, metric, labels)| {
            let (a, b) = (buckets(&start, metric, labels), buckets(&end, metric, labels));
            let ms = |q| quantile(&a, &b, q).map(|s| s * 1000.0);
            Stage { name, p50_ms: ms(0.5), p99_ms: ms(0.99) }
        })
        .collect()
}

/// Reads the ingest's `/metrics` into `dir/file`; a failure is logged, not fatal (the stage
/// table then says it has no reading).
pub(crate) async fn read(http: &reqwest::Client, base: &str, dir: &Path, file: &str) {
    let body = match http.get(format!("{base}/metrics")).send().await {
        Ok(r) => r.text().await.unwrap_or_default(),
        Err(e) => {
            tracing::warn!(error = %e, "could not read the ingest's metrics for the stage table");
            return;
        }
    };
    if let Err(e) = std::fs::write(dir.join(file), body) {
        tracing::warn!(error = %e, file, "could not keep the ingest's metrics");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const START_BODY: &str = "\
ingest_ring_wait_seconds_bucket{le=\"0.001\"} 10\n\
ingest_ring_wait_seconds_bucket{le=\"0.01\"} 10\n\
ingest_ring_wait_seconds_bucket{le=\"+Inf\"} 10\n";
    const END_BODY: &str = "\
ingest_ring_wait_seconds_bucket{le=\"0.001\"} 60\n\
ingest_ring_wait_seconds_bucket{le=\"0.01\"} 109\n\
ingest_ring_wait_seconds_bucket{le=\"+Inf\"} 110\n\
ingest_request_seconds_bucket{route=\"/v1/messages\",le=\"0.01\"} 5\n\
ingest_request_seconds_bucket{route=\"/v1/messages/batch\",le=\"0.01\"} 7\n";

    #[test]
    fn quantiles_come_from_what_was_observed_between_the_readings() {
        let (a, b) = (
            buckets(START_BODY, catalog::INGEST_RING_WAIT_SECONDS, ""),
            buckets(END_BODY, catalog::INGEST_RING_WAIT_SECONDS, ""),
        );
        // 100 observed: 50 up to 1 ms, 49 in (1, 10] ms, 1 above.
        let p50 = quantile(&a, &b, 0.5).expect("observed");
        assert!((p50 - 0.001).abs() < 1e-9, "{p50}");
        let p90 = quantile(&a, &b, 0.9).expect("observed");
        assert!((p90 - (0.001 + 0.009 * 40.0 / 49.0)).abs() < 1e-9, "{p90}");
        assert_eq!(quantile(&b, &b, 0.5), None, "nothing between two equal readings");
    }

    #[test]
    fn a_labelled_series_is_chosen_by_its_labels() {
        let b = buckets(END_BODY, catalog::INGEST_REQUEST_SECONDS, "route=\"/v1/messages\"");
        assert_eq!(b, vec![(0.01, 5.0)]);
    }
}

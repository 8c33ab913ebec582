//! `verdicts.json`: what a script or a test reads of the report, the same views the markdown shows.

use super::view::RoundView;
use crate::gates::{self, Verdict};

/// `verdicts.json`: every round's gates, for scripts and tests.
pub(crate) fn verdicts_json(views: &[RoundView]) -> serde_json::Value {
    serde_json::Value::Array(
        views
            .iter()
            .map(|v| {
                let gates: Vec<serde_json::Value> = v
                    .gates
                    .iter()
                    .map(|g| {
                        let verdict = match g.verdict {
                            Verdict::Pass => "pass",
                            Verdict::Warn => "warn",
                            Verdict::Fail => "fail",
                        };
                        serde_json::json!({ "gate": g.name, "verdict": verdict, "detail": g.detail })
                    })
                    .collect();
                serde_json::json!({
                    "round": v.name, "policy": v.slot.policy, "point": v.slot.point, "valid": v.valid,
                    "reasons": gates::reasons(&v.gates), "throughput": v.stats.throughput, "writer_rate": v.stats.writer_rate, "p99_ms": v.stats.p99,
                    "caller_runs": v.stats.caller_runs(), "rejections": v.stats.rejected(), "gates": gates,
                    "p50_ms": v.stats.p50, "messages": v.stats.messages, "cpu_us_per_msg": v.stats.cpu_us_per_msg,
                    "k6_cores": v.stats.k6_cores, "outside_cores": v.stats.outside_cores,
                })
            })
            .collect(),
    )
}

//! The gates: what makes a round's numbers untrustworthy. A round that fails one is kept in the
//! evidence, listed with the reason, and left out of every median.
//!
//! Each gate guards against one way the reference's own first results were wrong, or could have been:
//! errors counted as throughput, a stale process measured twice, a store that did not get what
//! was acknowledged, a load generator that could not keep up.

use crate::evidence::RoundEvidence;
use crate::plan::{LoadKind, Plan};
use crate::stats::RoundStats;
use pipeline_common::reconcile_report::{CheckReport, Level};
use serde_json::Value;
use std::collections::BTreeMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    Pass,
    /// Worth a reader's attention; the round still counts.
    Warn,
    Fail,
}

#[derive(Debug, Clone)]
pub(crate) struct Gate {
    pub name: &'static str,
    pub verdict: Verdict,
    pub detail: String,
}

fn gate(name: &'static str, ok: bool, detail: String) -> Gate {
    Gate { name, verdict: if ok { Verdict::Pass } else { Verdict::Fail }, detail }
}

pub(crate) fn valid(gates: &[Gate]) -> bool {
    gates.iter().all(|g| g.verdict != Verdict::Fail)
}

/// A timing gate (rate, dropped, p99): judged, or, with `--no-timing-gates`, a failure shown as
/// a warning that says it was not judged.
fn timed(judged: bool, g: Gate) -> Gate {
    if judged || g.verdict != Verdict::Fail {
        return g;
    }
    Gate { verdict: Verdict::Warn, detail: format!("{} (not judged: --no-timing-gates)", g.detail), ..g }
}

/// The failing gates' details, for a one-line reason.
pub(crate) fn reasons(gates: &[Gate]) -> String {
    gates
        .iter()
        .filter(|g| g.verdict == Verdict::Fail)
        .map(|g| format!("{}: {}", g.name, g.detail))
        .collect::<Vec<_>>()
        .join("; ")
}

/// Boot ids seen in each round (start ids), so a repeat across rounds is caught.
pub(crate) fn boot_owners(rounds: &[RoundEvidence]) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for r in rounds {
        for id in [&r.record.boots.writer_start, &r.record.boots.ingest_start].into_iter().flatten() {
            out.entry(id.clone()).or_default().push(r.name.clone());
        }
    }
    out
}

pub(crate) fn evaluate(
    plan: &Plan,
    r: &RoundEvidence,
    s: &RoundStats,
    owners: &BTreeMap<String, Vec<String>>,
) -> Vec<Gate> {
    let g = &plan.gates;
    let mut out = Vec::new();
    if let Some(e) = &r.record.setup_error {
        out.push(gate("setup", false, e.clone()));
    }
    if let Some(u) = &r.record.unfinished {
        out.push(gate("finished", false, format!("the runner {u}: its record is the one written before that step")));
    }
    if let Some(f) = &r.record.fault {
        out.push(Gate {
            name: "fault",
            verdict: Verdict::Warn,
            detail: format!("injected at {:.0} s: {}", f.at_s, f.detail),
        });
    }
    out.push(k6_errors(r, s, g.max_error_rate));
    if let Some(fast) = fast_errors(r, s, g.fast_error_ms) {
        out.push(fast);
    }
    if r.record.setup_error.is_none() || r.record.boots.writer_start.is_some() {
        out.push(boot_ids(r, owners));
    }
    if r.record.k6.is_some() {
        out.push(reconcile(r));
    }
    if plan.load == LoadKind::Open && r.summary.is_some() {
        let target = f64::from(r.record.slot.as_ref().map(|x| x.point).unwrap_or(0));
        let achieved = s.requests / crate::duration::seconds(&plan.duration).unwrap_or(1.0).max(0.001);
        let ratio = if target > 0.0 { achieved / target } else { 0.0 };
        out.push(timed(
            g.judge_timing,
            gate(
                "rate",
                ratio >= g.min_rate_ratio,
                format!(
                    "{achieved:.0}/s of {target:.0}/s = {:.1} % (needs ≥ {:.0} %)",
                    ratio * 100.0,
                    g.min_rate_ratio * 100.0
                ),
            ),
        ));
        let planned = target * crate::duration::seconds(&plan.duration).unwrap_or(0.0);
        let share = if planned > 0.0 { s.dropped / planned } else { 0.0 };
        out.push(timed(
            g.judge_timing,
            gate(
                "dropped",
                share <= g.max_dropped_ratio,
                format!(
                    "{} dropped iterations = {:.2} % (at most {:.0} %)",
                    s.dropped,
                    share * 100.0,
                    g.max_dropped_ratio * 100.0
                ),
            ),
        ));
    }
    if let (Some(max), Some(p99)) = (g.max_p99_ms, s.p99) {
        out.push(timed(g.judge_timing, gate("p99", p99 <= max, format!("p99 {p99:.1} ms (at most {max:.0} ms)"))));
    }
    if let Some(c) = s.outside_cores {
        let busy = c > g.k6_cpu_warn / 2.0;
        out.push(Gate {
            name: "outside-load",
            verdict: if busy { Verdict::Warn } else { Verdict::Pass },
            detail: format!(
                "processes outside the round used {c:.2} cores in the measured phase{}",
                if busy { ": the machine was shared, compare with care" } else { "" }
            ),
        });
    }
    let mut suspect = Vec::new();
    if let Some(c) = s.k6_cores.filter(|c| *c > g.k6_cpu_warn) {
        suspect.push(format!("k6 used {:.0} % of a core in the measured phase", c * 100.0));
    }
    if s.dropped > 0.0 {
        suspect.push(format!("k6 dropped {} iterations", s.dropped));
    }
    out.push(Gate {
        name: "load-generator",
        verdict: if suspect.is_empty() { Verdict::Pass } else { Verdict::Warn },
        detail: if suspect.is_empty() {
            match s.k6_cores {
                Some(c) => format!("k6 used {:.0} % of a core, dropped nothing", c * 100.0),
                None => "k6's CPU was not sampled".into(),
            }
        } else {
            suspect.join("; ") + ": the load generator may be the bottleneck"
        },
    });
    out
}

fn k6_errors(r: &RoundEvidence, s: &RoundStats, max: f64) -> Gate {
    let Some(rate) = s.error_rate else {
        let code = r.record.k6.as_ref().and_then(|k| k.exit_code);
        return gate("k6-errors", false, format!("no k6 summary (k6 exit {code:?})"));
    };
    if s.requests < 1.0 {
        return gate("k6-errors", false, "no request in the measured phase".into());
    }
    let non: Vec<String> = s.non_202.iter().map(|(k, v)| format!("{k}×{v}")).collect();
    gate(
        "k6-errors",
        rate < max,
        format!(
            "{:.3} % of {} measured requests not 202{} (must be < {} %)",
            rate * 100.0,
            s.requests,
            if non.is_empty() { String::new() } else { format!(" ({})", non.join(", ")) },
            max * 100.0
        ),
    )
}

/// The reference's "hit the air": a dead app answers errors fast, which looks like great throughput.
fn fast_errors(r: &RoundEvidence, s: &RoundStats, fast_ms: f64) -> Option<Gate> {
    r.summary.as_ref()?;
    let p50 = s.p50?;
    let bad = !s.non_202.is_empty() && p50 < fast_ms;
    Some(gate(
        "fast-errors",
        !bad,
        if bad {
            format!("median {p50:.3} ms with non-202 answers: errors were measured, not the pipeline")
        } else {
            format!("median {p50:.1} ms")
        },
    ))
}

fn boot_ids(r: &RoundEvidence, owners: &BTreeMap<String, Vec<String>>) -> Gate {
    let b = &r.record.boots;
    let mut bad = Vec::new();
    for (who, start, end) in [("writer", &b.writer_start, &b.writer_end), ("ingest", &b.ingest_start, &b.ingest_end)] {
        match (start, end) {
            (None, _) => bad.push(format!("{who}: no boot id at the start")),
            (Some(s), Some(e)) if s != e => bad.push(format!("{who}: boot id {s} at the start, {e} at the end")),
            (Some(_), None) => bad.push(format!("{who}: not checked at the end")),
            _ => {}
        }
        if let Some(s) = start {
            let seen: Vec<&String> = owners.get(s).into_iter().flatten().filter(|n| **n != r.name).collect();
            if !seen.is_empty() {
                bad.push(format!("{who}: boot id {s} also in round {:?} (not a fresh process)", seen));
            }
        }
    }
    if let Some(sum) = &r.summary {
        if sum.get("boot_id_changed").and_then(Value::as_bool) == Some(true) {
            bad.push("k6 saw the ingest's boot id change".into());
        }
        let k6_saw = sum.get("boot_id_start").and_then(Value::as_str);
        if k6_saw.is_some() && k6_saw != b.ingest_start.as_deref() {
            bad.push(format!("k6 loaded ingest {k6_saw:?}, not the one started ({:?})", b.ingest_start));
        }
    }
    let ok = bad.is_empty();
    gate("boot-ids", ok, if ok { "fresh writer and ingest, unchanged to the end".into() } else { bad.join("; ") })
}

fn reconcile(r: &RoundEvidence) -> Gate {
    let code = r.record.reconcile_exit;
    let Some(answer) = &r.reconcile else {
        return gate("reconcile", false, format!("no JSON answer (exit {code:?}; see reconcile.log)"));
    };
    if let Some(nd) = answer.not_drained() {
        let lag: Vec<String> = nd.lagging.iter().map(ToString::to_string).collect();
        return gate("reconcile", false, format!("not drained (lagging partitions: {})", lag.join(", ")));
    }
    if let Some(e) = answer.error() {
        return gate("reconcile", false, format!("{}: {}", e.error, e.detail));
    }
    let level = answer.level().map_or("?", Level::name);
    let check = answer.check();
    let clean = check.is_some_and(|c| c.clean);
    let failing: Vec<String> =
        check.into_iter().flat_map(CheckReport::failing).map(|(k, c)| format!("{k} {}", c.total)).collect();
    // Content is compared by every reconcile that writes `content`; an older one did not.
    let content = check.and_then(|c| c.content).is_some_and(|c| c.compared);
    let ok = code == Some(0) && clean && level == "ids" && content;
    let detail = if ok {
        let stored = check.and_then(|c| c.expected).map(|e| e.accepted.to_string()).unwrap_or_default();
        let sent = check.and_then(|c| c.content).map(|c| c.checked_against_sent.to_string()).unwrap_or_default();
        format!("exact at id level and content ({stored} accepted ids in all four stores, the same content in each; {sent} checked against what k6 sent)")
    } else if level != "ids" {
        format!("checked at level `{level}`, not ids (exit {code:?})")
    } else if !content {
        format!("content not compared (a reconcile older than content checks? exit {code:?})")
    } else {
        format!("MISMATCH at id level: {} (exit {code:?})", failing.join(", "))
    };
    gate("reconcile", ok, detail)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Slot;
    use crate::round::RoundRecord;

    /// An open-loop round at 100 requests/s for 10 s that reached 90/s and dropped 3 % of its
    /// iterations: both timing gates fail.
    fn slow_open_round() -> (RoundEvidence, RoundStats) {
        let slot = Slot { index: 1, rep: 1, point: 100, policy: "default".into(), fault: None, condition: None };
        let record = RoundRecord { slot: Some(slot), ..RoundRecord::default() };
        let r = RoundEvidence {
            name: "r1".into(),
            record,
            summary: Some(serde_json::json!({})),
            reconcile: None,
            timeline: Default::default(),
        };
        let s = RoundStats { requests: 900.0, dropped: 30.0, p99: Some(500.0), ..RoundStats::default() };
        (r, s)
    }

    fn verdict(gates: &[Gate], name: &str) -> Option<Verdict> {
        gates.iter().find(|g| g.name == name).map(|g| g.verdict)
    }

    #[test]
    fn timing_gates_decide_unless_told_not_to_judge_them() {
        let (r, s) = slow_open_round();
        let mut plan = Plan { load: LoadKind::Open, duration: "10s".into(), ..Plan::default() };
        plan.gates.max_p99_ms = Some(100.0);
        let judged = evaluate(&plan, &r, &s, &BTreeMap::new());
        for name in ["rate", "dropped", "p99"] {
            assert_eq!(verdict(&judged, name), Some(Verdict::Fail), "{name} judged");
        }

        plan.gates.judge_timing = false;
        let shown = evaluate(&plan, &r, &s, &BTreeMap::new());
        for name in ["rate", "dropped", "p99"] {
            assert_eq!(verdict(&shown, name), Some(Verdict::Warn), "{name} shown, not judged");
            let g = shown.iter().find(|g| g.name == name);
            assert!(g.is_some_and(|g| g.detail.ends_with("(not judged: --no-timing-gates)")), "{name}");
        }
        // The other gates still judge: a round without k6's error count stays invalid.
        assert_eq!(verdict(&shown, "k6-errors"), Some(Verdict::Fail));
        assert!(!valid(&shown));
    }

    /// The record a runner leaves when it is stopped during the final reconcile makes the round
    /// invalid with that reason, and the finished record does not.
    #[test]
    fn a_round_whose_runner_stopped_before_its_end_is_invalid_and_says_why() {
        let (mut r, s) = slow_open_round();
        let plan = Plan { load: LoadKind::Open, duration: "10s".into(), ..Plan::default() };
        assert_eq!(verdict(&evaluate(&plan, &r, &s, &BTreeMap::new()), "finished"), None);
        r.record.unfinished = Some("stopped during the final reconcile, started 4220 s into the round".into());
        let gates = evaluate(&plan, &r, &s, &BTreeMap::new());
        assert_eq!(verdict(&gates, "finished"), Some(Verdict::Fail));
        let g = gates.iter().find(|g| g.name == "finished").map(|g| g.detail.clone()).unwrap_or_default();
        assert!(g.contains("during the final reconcile"), "{g}");
        // Evidence from before the field reads as finished.
        let old: RoundRecord = serde_json::from_str(r#"{"started_at": "", "writer_args": [], "boots": {}, "stops": [], "servers": [], "timeline_rows": 0, "ended_s": 1.0}"#)
            .unwrap_or_else(|e| panic!("an old round.json: {e}"));
        assert_eq!(old.unfinished, None);
    }
}

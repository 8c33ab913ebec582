//! Evidence → verdicts. A scenario's verdict is its id- and content-level reconcile; its other
//! checks (processes alive, exit codes, metrics that must move during a freeze, the backlog
//! drained, the poison corpus's expectations) are counted apart. Everything here reads the
//! scenario's files only, so a verdict can be recomputed from an evidence folder.
//!
//! Judging only: the files are read by `files.rs` and the rows written as a table by
//! `table.rs`; every way a scenario can fail is still judged in this one file.

use super::files::{load, ScenarioFiles};
use super::monitor::Sample;
pub(super) use super::record::{Check, Event, EventKind, Progress, Record, Recovery};
use pipeline_common::reconcile_report::{names, Answer, CheckReport, Level};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// One row of the table (`row.json`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(super) struct Row {
    pub scenario: String,
    pub faults: String,
    pub accepted: Option<u64>,
    pub lost: Option<u64>,
    pub lost_by_store: BTreeMap<String, u64>,
    pub duplicated: Option<u64>,
    pub dup_by_store: BTreeMap<String, u64>,
    pub uncertain_stored: Option<u64>,
    pub uncertain_not_stored: Option<u64>,
    pub dead_letters: Option<u64>,
    pub recoveries: Vec<Recovery>,
    pub recover_max_s: Option<f64>,
    pub notes: Vec<String>,
    pub checks: Vec<Check>,
    /// The id-level verdict's reasons, then the failed checks.
    pub failures: Vec<String>,
    pub verdict: String,
    pub checks_ok: bool,
    pub checks_summary: String,
}

fn at_or_before(samples: &[Sample], t: f64) -> Option<&Sample> {
    samples.iter().take_while(|s| s.t <= t).last().or(samples.first())
}

/// Seconds after `t` until the pipeline moved again: `Produce`, the topic's high watermarks grew;
/// `Consume`, every partition that lagged at `t` had its committed offset move or had no lag
/// left (a partition stuck behind a dead member counts even when the others progress).
/// `samples` are those with offsets, in time order (as the monitor and `files::load_samples` give them).
pub(super) fn recovery(samples: &[Sample], t: f64, progress: Progress) -> Option<f64> {
    let base = at_or_before(samples, t)?;
    let later: Vec<&Sample> = samples.iter().filter(|s| s.t > t).collect();
    if progress == Progress::Produce {
        let h0: i64 = base.high.iter().sum();
        return later.iter().find(|s| s.high.iter().sum::<i64>() > h0).map(|s| s.t - t);
    }
    let mut worst = 0.0f64;
    for (p, (&c0, &h0)) in base.committed.iter().zip(&base.high).enumerate() {
        if h0 - c0 <= 0 {
            continue;
        }
        let moved = |s: &&Sample| {
            let (c, h) = (s.committed.get(p).copied().unwrap_or(0), s.high.get(p).copied().unwrap_or(0));
            c > c0 || c >= h
        };
        worst = worst.max(later.iter().find(|s| moved(s)).map(|s| s.t - t)?);
    }
    Some(worst)
}

/// The sum of the kept series of writer `port` that `pred` picks.
fn metric(s: Option<&Sample>, port: Option<&str>, pred: &dyn Fn(&str) -> bool) -> f64 {
    let (Some(s), Some(port)) = (s, port) else { return 0.0 };
    s.w.get(port).map(|m| m.iter().filter(|(k, _)| pred(k)).map(|(_, v)| v).sum()).unwrap_or(0.0)
}

/// During a freeze of a store, its writer's /metrics must show it (a retry, an error, a pool
/// rejection or caller-run, a write over 1 s, or a growing queue), and afterwards the lag must
/// come back to where it was before.
fn freeze_notes(samples: &[Sample], events: &[Event]) -> (Vec<String>, Vec<Check>) {
    let (mut notes, mut checks) = (Vec::new(), Vec::new());
    for start in events.iter().filter(|e| e.kind == EventKind::FreezeStart) {
        let store = &start.label;
        let Some(t2) = events.iter().find(|e| e.kind == EventKind::FreezeEnd && &e.label == store).map(|e| e.t) else {
            continue;
        };
        let t1 = start.t;
        let ports: std::collections::BTreeSet<&str> =
            samples.iter().flat_map(|s| s.w.keys().map(String::as_str)).collect();
        let port = ports.into_iter().next();
        let lab = format!("\"{store}\"");
        let fam = |name: &'static str| {
            let lab = lab.clone();
            move |k: &str| k.starts_with(&format!("{name}{{")) && k.contains(&lab)
        };
        let bucket = |le: &'static str| {
            let lab = lab.clone();
            move |k: &str| {
                k.starts_with("writer_store_write_seconds_bucket{")
                    && k.contains(&lab)
                    && k.contains(&format!("le=\"{le}\""))
            }
        };
        let before = at_or_before(samples, t1);
        let after = at_or_before(samples, t2 + 2.0);
        let window: Vec<&Sample> = samples.iter().filter(|s| t1 <= s.t && s.t <= t2 + 2.0).collect();
        let pre: Vec<&Sample> = samples.iter().filter(|s| t1 - 5.0 <= s.t && s.t < t1).collect();
        let delta = |p: &dyn Fn(&str) -> bool| metric(after, port, p) - metric(before, port, p);
        let retries = delta(&fam("writer_store_retries_total"));
        let errors = delta(&fam("writer_store_errors_total"));
        let rejected = delta(&fam("writer_pool_rejected_total"));
        let caller = delta(&fam("writer_pool_caller_runs_total"));
        let slow = delta(&bucket("+Inf")) - delta(&bucket("1"));
        let peak = |set: &[&Sample], name: &'static str| {
            set.iter().map(|s| metric(Some(s), port, &fam(name))).fold(0.0f64, f64::max)
        };
        let (qmax, qpre) = (peak(&window, "writer_pool_queue_depth"), peak(&pre, "writer_pool_queue_depth"));
        let amax = peak(&window, "writer_pool_active_workers");
        let lag_pre = pre.iter().map(|s| s.lag()).max().unwrap_or(0);
        let lag_peak = window.iter().map(|s| s.lag()).max().unwrap_or(0);
        let back = samples.iter().find(|s| s.t > t2 && s.lag() <= lag_pre).map(|s| s.t - t2);
        let moved = retries + errors + rejected + caller + slow > 0.0 || qmax > qpre;
        notes.push(format!(
            "freeze {store} {:.0} s: /metrics during the freeze: retries +{retries:.0}, errors +{errors:.0}, pool \
             rejected +{rejected:.0}, caller-runs +{caller:.0}, queue depth max {qmax:.0} (before {qpre:.0}), active \
             workers max {amax:.0}, {store} writes over 1 s +{slow:.0}; lag {lag_pre} before → peak {lag_peak} → back \
             to ≤{lag_pre} {}",
            t2 - t1,
            back.map(|b| format!("{b:.1} s after SIGCONT")).unwrap_or_else(|| "NEVER".into())
        ));
        checks.push(Check {
            ok: moved,
            check: format!("freeze-{store}: /metrics moved during the freeze"),
            detail: if moved {
                String::new()
            } else {
                "no retry, error, rejection, caller-run, queue growth or slow write seen".into()
            },
        });
        checks.push(Check {
            ok: back.is_some(),
            check: format!("freeze-{store}: backlog drained after SIGCONT"),
            detail: if back.is_some() { String::new() } else { format!("lag never returned to {lag_pre}") },
        });
    }
    (notes, checks)
}

/// The reconcile JSON's verdict: fills the row's counts and returns the id-level failures.
fn reconcile_verdict(row: &mut Row, rec: &Answer) -> Vec<String> {
    let mut failures = Vec::new();
    if let Some(nd) = rec.not_drained() {
        let lag: Vec<String> = nd.lagging.iter().map(ToString::to_string).collect();
        failures.push(format!("NOT DRAINED ({})", lag.join(", ")));
        return failures;
    }
    if let Some(e) = rec.error() {
        let detail: String = e.detail.chars().take(200).collect();
        failures.push(format!("reconcile: {}: {detail}", e.error));
        return failures;
    }
    let check = rec.check();
    let total = |name: &str| check.map_or(0, |c| c.total(name));
    let totals_expected = rec.totals().and_then(|t| t.expected).map(|e| e.accepted);
    row.accepted = check.and_then(|c| c.expected).map(|e| e.accepted).or(totals_expected);
    // The run's stores only: a store left out of --stores has no zero to show.
    for &k in crate::procs::stores().kinds() {
        row.lost_by_store.insert(k.name().into(), total(&names::missing(k)));
        row.dup_by_store.insert(k.name().into(), total(&names::duplicated(k)));
    }
    row.lost = Some(row.lost_by_store.values().max().copied().unwrap_or(0) + total(names::DL_ACCEPTED));
    row.duplicated = row.dup_by_store.values().max().copied();
    row.uncertain_stored = Some(total(names::UNCERTAIN_STORED));
    row.uncertain_not_stored = Some(total(names::UNCERTAIN_NOT_STORED));
    row.dead_letters = check.map(|c| c.dead_letters.records);
    if rec.level() != Some(Level::Ids) {
        failures.push(format!("checked at {} level, not ids", rec.level().map_or("?", Level::name)));
    }
    for (k, c) in check.into_iter().flat_map(CheckReport::failing) {
        let ex: Vec<&str> = c.examples.iter().take(3).map(String::as_str).collect();
        failures.push(format!("{k} {} (e.g. {})", c.total, ex.join(", ")));
    }
    failures
}

/// The row of the scenario whose evidence is in `dir`: its files loaded, then judged.
pub(super) fn row(dir: &Path, record: &Record) -> Row {
    judge(&load(dir), record)
}

/// The row of a scenario from its files and its record: the id-level verdict (reconcile's),
/// the recoveries after each fault, then the other checks, which are counted apart.
fn judge(files: &ScenarioFiles, record: &Record) -> Row {
    let mut row = Row { scenario: record.scenario.clone(), faults: record.faults.clone(), ..Row::default() };
    let rec = &files.rec;
    let samples = &files.samples;
    let events = &record.events;
    let mut failures = id_failures(&mut row, files, record);
    failures.extend(recoveries(&mut row, samples, events));
    let (notes, mut checks) = freeze_notes(samples, events);
    row.notes.extend(notes);
    let (notes, cut_checks) = super::cuts::notes(samples, events);
    row.notes.extend(notes);
    checks.extend(cut_checks);
    let (notes, backlog_checks) = event_notes(samples, events);
    row.notes.extend(notes);
    checks.extend(backlog_checks);
    checks.extend(dead_letters(rec.as_ref()));
    checks.extend(record.checks.iter().cloned());
    row.notes.extend(record.notes.iter().cloned());
    conclude(row, failures, checks, rec.as_ref())
}

/// The id-level failures: reconcile's verdict when it answered (which also fills the row's
/// counts), else why there is none.
fn id_failures(row: &mut Row, files: &ScenarioFiles, record: &Record) -> Vec<String> {
    match (&files.rec, &record.reconciled) {
        (Some(rec), _) => reconcile_verdict(row, rec),
        (None, Some(code)) => {
            let err = &files.reconcile_log;
            let last: String = err.lines().last().unwrap_or("").chars().take(300).collect();
            vec![format!("reconcile produced no JSON (exit {code:?}): {last}")]
        }
        (None, None) => vec!["not reconciled (the scenario was aborted)".into()],
    }
}

/// How long the pipeline took to move again after each fault ended, into the row (with a note
/// when there were several); a fault after which it never moved is a failure.
fn recoveries(row: &mut Row, samples: &[Sample], events: &[Event]) -> Vec<String> {
    let mut failures = Vec::new();
    let starts: Vec<f64> = events.iter().filter(|e| e.kind == EventKind::FaultStart).map(|e| e.t).collect();
    for e in events.iter().filter(|e| e.kind == EventKind::FaultEnd) {
        let progress = e.progress.unwrap_or(Progress::Consume);
        let x = recovery(samples, e.t, progress);
        let next = starts.iter().find(|s| **s > e.t);
        let next_fault_first = matches!((x, next), (Some(x), Some(n)) if *n < e.t + x);
        if x.is_none() {
            failures.push(format!("no progress after {}", e.label));
        }
        row.recoveries.push(Recovery { fault: e.label.clone(), progress, recover_s: x, next_fault_first });
    }
    if row.recoveries.len() > 1 {
        row.notes.push(recovery_note(&row.recoveries));
    }
    row.recover_max_s =
        row.recoveries.iter().filter_map(|r| r.recover_s).fold(None, |m, x| Some(m.map_or(x, |m: f64| m.max(x))));
    failures
}

/// The note of several recoveries: each fault's seconds, starred where the next fault came first.
fn recovery_note(recoveries: &[Recovery]) -> String {
    let each: Vec<String> = recoveries
        .iter()
        .map(|r| {
            let s = r.recover_s.map(|x| format!("{x:.1}")).unwrap_or_else(|| "-".into());
            format!("{} {s}{}", r.fault, if r.next_fault_first { "*" } else { "" })
        })
        .collect();
    let star = if recoveries.iter().any(|r| r.next_fault_first) { " (* = the next fault came first)" } else { "" };
    format!("recovery per fault (s): {}{star}", each.join(", "))
}

/// The lag at each `Lag` and `NeedBacklog` event, as notes; a `NeedBacklog` without a backlog
/// fails its check (the scenario then tested nothing).
fn event_notes(samples: &[Sample], events: &[Event]) -> (Vec<String>, Vec<Check>) {
    let (mut notes, mut checks) = (Vec::new(), Vec::new());
    for e in events {
        let s = at_or_before(samples, e.t);
        match e.kind {
            EventKind::Lag => notes.push(format!(
                "lag at {}: {} records",
                e.label,
                s.map(|s| s.lag().to_string()).unwrap_or("?".into())
            )),
            EventKind::NeedBacklog => {
                let lag = s.map(Sample::lag).unwrap_or(0);
                let of = s.map(|s| {
                    format!("committed {} of {}", s.committed.iter().sum::<i64>(), s.high.iter().sum::<i64>())
                });
                notes.push(format!("lag at {}: {lag} records ({})", e.label, of.unwrap_or_else(|| "no sample".into())));
                checks.push(Check {
                    ok: lag > 0,
                    check: format!("a backlog at {}", e.label),
                    detail: if lag > 0 {
                        String::new()
                    } else {
                        "the backlog had drained already: make it bigger".into()
                    },
                });
            }
            _ => {}
        }
    }
    (notes, checks)
}

/// Dead letters fail a scenario whatever reconcile says of the ids: none may be left (dlq-replay
/// replays its own, which reconcile then counts as replayed, not as records).
fn dead_letters(rec: Option<&Answer>) -> Option<Check> {
    let r = rec.and_then(Answer::check).filter(|r| r.dead_letters.records > 0)?;
    let (n, topic) = (r.dead_letters.records, &r.dead_letters.topic);
    Some(Check { ok: false, check: "no dead letters".into(), detail: format!("{n} records in {topic}") })
}

/// The row's verdict and its checks' summary: the id-level failures, then the failed checks.
fn conclude(mut row: Row, mut failures: Vec<String>, checks: Vec<Check>, rec: Option<&Answer>) -> Row {
    let failed: Vec<String> = checks
        .iter()
        .filter(|c| !c.ok)
        .map(|c| if c.detail.is_empty() { c.check.clone() } else { format!("{}: {}", c.check, c.detail) })
        .collect();
    row.verdict = if failures.is_empty() {
        "exact".into()
    } else if rec.is_some_and(|r| r.check().is_some()) {
        "NOT EXACT".into()
    } else {
        "NO VERDICT".into()
    };
    row.checks_ok = failed.is_empty();
    row.checks_summary = if failed.is_empty() {
        format!("{} ok", checks.len())
    } else {
        format!("{} of {} FAILED", failed.len(), checks.len())
    };
    row.checks = checks;
    failures.extend(failed);
    row.failures = failures;
    row
}

/// Every verdict exact and every other check passed.
pub(super) fn all_passed(rows: &[Row]) -> bool {
    rows.iter().all(|r| r.verdict == "exact" && r.checks_ok)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chaos::table::table;
    use pipeline_common::reconcile_report::{ClassSummary, DeadLetterSummary, ExpectedIds, Verdict};

    fn s(t: f64, committed: &[i64], high: &[i64]) -> Sample {
        Sample { t, committed: committed.to_vec(), high: high.to_vec(), ..Sample::default() }
    }

    /// A partition stuck behind a dead member is no recovery, even while the others move.
    #[test]
    fn recovery_waits_for_every_lagging_partition() {
        let samples = vec![s(0.0, &[5, 5], &[10, 10]), s(1.0, &[8, 5], &[12, 12]), s(3.0, &[9, 7], &[12, 12])];
        assert_eq!(recovery(&samples, 0.5, Progress::Consume), Some(2.5));
        assert_eq!(recovery(&samples[..2], 0.5, Progress::Consume), None);
        assert_eq!(recovery(&samples, 0.0, Progress::Produce), Some(1.0));
    }

    /// An id-level report of 10 accepted ids with these classes, as reconcile prints it.
    fn report(classes: BTreeMap<String, ClassSummary>) -> CheckReport {
        CheckReport {
            check: Level::Ids,
            only_prefix: None,
            source: String::new(),
            expected: Some(ExpectedIds { accepted: 10, ..ExpectedIds::default() }),
            content: None,
            dead_letters: DeadLetterSummary::default(),
            classes,
            clean: true,
            ok: true,
            verdict: Verdict::Ok,
            message: String::new(),
            seconds: Vec::new(),
            drained: None,
            stores: None,
        }
    }

    #[test]
    fn a_clean_reconcile_is_exact_and_a_loss_is_not() {
        let dir = std::env::temp_dir().join(format!("verdict-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let clean = report(BTreeMap::new());
        std::fs::write(dir.join("reconcile.json"), clean.to_string()).expect("write");
        let rec = Record { scenario: "x".into(), reconciled: Some(Some(0)), ..Record::default() };
        let row = row(&dir, &rec);
        assert_eq!((row.verdict.as_str(), row.accepted, row.lost), ("exact", Some(10), Some(0)));
        let missing =
            ClassSummary { total: 2, failure: true, examples: vec!["a".into(), "b".into()], ..Default::default() };
        let lossy = report(BTreeMap::from([("missing from redis".to_string(), missing)]));
        std::fs::write(dir.join("reconcile.json"), lossy.to_string()).expect("write");
        let row = super::row(&dir, &rec);
        assert_eq!((row.verdict.as_str(), row.lost), ("NOT EXACT", Some(2)));
        assert!(!all_passed(std::slice::from_ref(&row)));
        assert!(table(&[row]).contains("2 (redis 2)"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}

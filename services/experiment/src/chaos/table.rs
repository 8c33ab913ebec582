//! The chaos run's table (`table.txt`): a line per scenario's row, then each row's notes and
//! failures. It reads the judged rows (`verdict.rs`) and nothing else, so the verdicts can be
//! recomputed from an evidence folder without this file, and the table changed without them.

use super::verdict::Row;
use std::collections::BTreeMap;

fn count(v: Option<u64>, by: &BTreeMap<String, u64>) -> String {
    match v {
        None => "?".into(),
        Some(n) if n > 0 && by.values().any(|x| *x > 0) => {
            let each: Vec<String> = by.iter().filter(|(_, x)| **x > 0).map(|(s, x)| format!("{s} {x}")).collect();
            format!("{n} ({})", each.join(" "))
        }
        Some(n) => n.to_string(),
    }
}

/// The table of the rows, then each row's notes and failures.
pub(super) fn table(rows: &[Row]) -> String {
    let head = [
        "scenario",
        "faults injected",
        "202s",
        "lost",
        "duplicated",
        "uncertain stored/not",
        "max recover s",
        "id-level verdict",
        "other checks",
    ];
    let opt = |v: Option<u64>| v.map(|n| n.to_string()).unwrap_or_else(|| "?".into());
    let body: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                r.scenario.clone(),
                r.faults.clone(),
                opt(r.accepted),
                count(r.lost, &r.lost_by_store),
                count(r.duplicated, &r.dup_by_store),
                format!("{} / {}", opt(r.uncertain_stored), opt(r.uncertain_not_stored)),
                r.recover_max_s.map(|x| format!("{x:.1}")).unwrap_or_else(|| "-".into()),
                r.verdict.clone(),
                r.checks_summary.clone(),
            ]
        })
        .collect();
    let width: Vec<usize> = (0..head.len())
        .map(|i| body.iter().map(|b| b[i].chars().count()).chain([head[i].chars().count()]).max().unwrap_or(0))
        .collect();
    let line = |cells: &[String]| {
        let padded: Vec<String> =
            cells.iter().enumerate().map(|(i, c)| format!("{c}{}", " ".repeat(width[i] - c.chars().count()))).collect();
        format!("| {} |\n", padded.join(" | "))
    };
    let mut out = line(&head.map(str::to_string));
    out.push_str(&format!("|{}|\n", width.iter().map(|w| "-".repeat(w + 2)).collect::<Vec<_>>().join("|")));
    for b in &body {
        out.push_str(&line(b));
    }
    for r in rows {
        for n in r.notes.iter().cloned().chain(r.failures.iter().map(|f| format!("FAILED: {f}"))) {
            out.push_str(&format!("  {}: {n}\n", r.scenario));
        }
    }
    out
}

//! The crossover section of `report.md`: the sweep's tables and the winner under each condition,
//! with how far it is from the next policy and from the reference's C, and whether the rounds'
//! ranges are apart.

use crate::plan::Plan;
use crate::report::crossover::{Cell, Crossover, REFERENCE};
use crate::report::format::{f, spread_text};
use crate::stats::ranges_overlap;
use std::fmt::Write;

/// A's lead over B in words: the ratio of medians and whether the ranges are apart.
fn lead(a: &Cell, b: &Cell, name: &str) -> Option<String> {
    let (ra, rb) = (a.end_to_end?, b.end_to_end?);
    let (ma, mb) = (ra.0, rb.0);
    let spread = if a.valid < 2 || b.valid < 2 {
        "too few valid rounds to judge the spread"
    } else if ranges_overlap(ra, rb) {
        "ranges overlap"
    } else {
        "ranges apart"
    };
    Some(format!("{:+.0} % over {name} ({mb:.0}/s), {spread}", (ma / mb - 1.0) * 100.0))
}

/// The crossover section of report.md: three tables (end-to-end, caller-runs/min, peak queue;
/// policies × conditions) and the winner under each condition.
pub(crate) fn render(md: &mut String, x: &Crossover) {
    let _ = writeln!(md, "## Crossover: every policy under every condition (valid rounds)\n");
    let names: Vec<String> =
        x.conditions.iter().enumerate().map(|(i, c)| format!("d{} `{}`", i + 1, Plan::condition_name(c))).collect();
    let head = format!("| policy | {} |\n|---|{}", names.join(" | "), "---|".repeat(names.len()));
    type Show = fn(&Cell) -> String;
    let tables: [(&str, Show); 3] = [
        ("End-to-end messages/s, median (min–max); writer stored/s after the slash", |c| {
            format!("{} / {}", spread_text(c.end_to_end, c.valid, 0), f(c.stored, 0))
        }),
        ("Caller-runs per minute of the measured phase, all pools (median)", |c| f(c.caller_runs_per_min, 0)),
        ("Peak queue, deepest pool (median)", |c| f(c.peak_queue, 0)),
    ];
    for (title, show) in tables {
        let _ = writeln!(md, "{title}:\n\n{head}");
        for (p, row) in x.policies.iter().zip(&x.cells) {
            let cols: Vec<String> =
                row.iter()
                    .map(|c| {
                        if c.valid < c.rounds {
                            format!("{} ({}/{} valid)", show(c), c.valid, c.rounds)
                        } else {
                            show(c)
                        }
                    })
                    .collect();
            let _ = writeln!(md, "| {p} | {} |", cols.join(" | "));
        }
        let _ = writeln!(md);
    }
    let _ = writeln!(md, "Winner under each condition (median end-to-end rate):\n");
    for (n, name) in names.iter().enumerate() {
        let mut ranked: Vec<(usize, f64)> =
            x.cells.iter().enumerate().filter_map(|(p, row)| row[n].end_to_end.map(|e| (p, e.0))).collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1));
        let Some(&(best, _)) = ranked.first() else {
            let _ = writeln!(md, "- {name}: no valid round");
            continue;
        };
        let cell = &x.cells[best][n];
        let mut parts = vec![format!("**{}** {}/s", x.policies[best], spread_text(cell.end_to_end, cell.valid, 0))];
        if let Some(&(next, _)) = ranked.get(1) {
            parts.extend(lead(cell, &x.cells[next][n], &x.policies[next]));
        }
        let reference = x.policies.iter().position(|p| p == REFERENCE);
        if let Some(c) = reference.filter(|&c| c != best && ranked.get(1).map(|r| r.0) != Some(c)) {
            parts.extend(lead(cell, &x.cells[c][n], REFERENCE));
        }
        let _ = writeln!(md, "- {name}: {}", parts.join("; "));
    }
    let _ = writeln!(
        md,
        "\n*ranges apart*: the winner's slowest round beat the other's fastest, so the lead is not round-to-round spread. `crossover.png` draws the first table.\n"
    );
}

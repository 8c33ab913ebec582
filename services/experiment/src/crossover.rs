//! The crossover of a condition sweep (a plan with `conditions`): every policy under every
//! condition side by side, so that where the reference's pool starts to lose, and what beats it
//! there, reads off one table and one chart instead of a row per `POLICY@dN`.
//!
//! Per cell (valid rounds only): the end-to-end rate (median, min–max: what the ranking uses),
//! the writer's stored rate, caller-runs per minute of the measured phase and the deepest queue of
//! any pool. Per condition: the winner, and how far it is from the next policy and from the
//! reference's C, with whether the rounds' ranges are apart.

use crate::chart_style::{colour, Draw, FONT, WIDTH};
use crate::evidence::Evidence;
use crate::plan::Plan;
use crate::report::{f, spread_text, RoundView};
use crate::stats::{ranges_overlap, spread, RoundStats, Spread};
use plotters::prelude::*;
use std::fmt::Write;
use std::path::Path;

/// The policy the reference's own table ends with (MySQL on the consumer, the rest in the pool):
/// the one a remedy has to beat.
const REFERENCE: &str = "C";

/// One policy under one condition, over its valid rounds.
#[derive(Debug, Clone, Default)]
pub(crate) struct Cell {
    pub rounds: usize,
    pub valid: usize,
    /// End-to-end messages/s.
    pub end_to_end: Option<Spread>,
    pub stored: Option<f64>,
    pub caller_runs_per_min: Option<f64>,
    pub peak_queue: Option<f64>,
}

/// Policies (rows, plan order) × conditions (columns, d1..dN).
#[derive(Debug)]
pub(crate) struct Crossover {
    pub conditions: Vec<String>,
    pub policies: Vec<String>,
    /// `cells[policy][condition]`.
    pub cells: Vec<Vec<Cell>>,
}

fn median(vs: &[&RoundView], get: impl Fn(&RoundStats) -> Option<f64>) -> Option<f64> {
    spread(&vs.iter().filter_map(|v| get(&v.stats)).collect::<Vec<_>>()).map(|s| s.0)
}

/// The crossover of `ev`'s sweep; `None` for a plan without swept conditions. With several load
/// points (an open-loop gradient) only the first is compared.
pub(crate) fn build(ev: &Evidence, views: &[RoundView]) -> Option<Crossover> {
    let plan = &ev.plan;
    if plan.conditions.is_empty() {
        return None;
    }
    let point = plan.points().first().copied();
    let minutes = crate::duration::seconds(&plan.duration).unwrap_or(60.0).max(1.0) / 60.0;
    let cells = plan
        .policies
        .iter()
        .map(|p| {
            (1..=plan.conditions.len())
                .map(|n| {
                    let label = format!("{p}@d{n}");
                    let all: Vec<&RoundView> =
                        views.iter().filter(|v| v.slot.policy == label && Some(v.slot.point) == point).collect();
                    let vs: Vec<&RoundView> = all.iter().copied().filter(|v| v.valid).collect();
                    Cell {
                        rounds: all.len(),
                        valid: vs.len(),
                        end_to_end: spread(&vs.iter().filter_map(|v| v.stats.end_to_end()).collect::<Vec<_>>()),
                        stored: median(&vs, |s| s.writer_rate),
                        caller_runs_per_min: median(&vs, |s| Some(s.caller_runs() / minutes)),
                        peak_queue: median(&vs, |s| Some(s.peak_queue())),
                    }
                })
                .collect()
        })
        .collect();
    Some(Crossover { conditions: plan.conditions.clone(), policies: plan.policies.clone(), cells })
}

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

/// `crossover.png`: the end-to-end rate (median, whiskers min–max) of each policy across the
/// conditions, and below it the caller-runs per minute, one line per policy.
pub(crate) fn draw(path: &Path, x: &Crossover) -> Draw<()> {
    let canvas = BitMapBackend::new(path, (WIDTH, 1000)).into_drawing_area();
    canvas.fill(&WHITE)?;
    let (top, bottom) = canvas.split_vertically(620);
    let labels: Vec<String> = x
        .conditions
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let c = Plan::condition_name(c);
            let short: String = c.chars().take(30).collect();
            format!("d{} {short}{}", i + 1, if short.len() < c.len() { "…" } else { "" })
        })
        .collect();
    // Each policy's points, nudged apart so that equal values stay visible.
    let series = |get: &dyn Fn(&Cell) -> Option<Spread>| -> Vec<Line> {
        let nudge = |p: usize| (p as f64 - (x.policies.len() as f64 - 1.0) / 2.0) * 0.04;
        x.cells
            .iter()
            .enumerate()
            .map(|(p, row)| {
                let pts = row.iter().enumerate().filter_map(|(i, c)| Some((i as f64 + nudge(p), get(c)?))).collect();
                (x.policies[p].clone(), pts)
            })
            .collect()
    };
    let rates = series(&|c| c.end_to_end);
    let caption = "End-to-end messages/s under each condition (median; whiskers: min–max of valid rounds)";
    panel(&top, caption, "messages / s", &labels, &rates, true)?;
    let runs = series(&|c| c.caller_runs_per_min.map(|v| (v, v, v)));
    panel(&bottom, "Caller-runs per minute, all pools (median)", "caller-runs / min", &labels, &runs, false)?;
    canvas.present()?;
    Ok(())
}

/// A policy's name and its points: (x, spread).
type Line = (String, Vec<(f64, Spread)>);

/// One panel of the crossover chart: conditions along x, a line per policy, whiskers where the
/// rounds differ.
fn panel(
    area: &DrawingArea<BitMapBackend<'_>, plotters::coord::Shift>,
    caption: &str,
    y_desc: &str,
    labels: &[String],
    lines: &[Line],
    legend: bool,
) -> Draw<()> {
    let n = labels.len();
    // At least 10, so that a panel of zeros (no caller-run anywhere) has whole-number ticks.
    let ymax = (lines.iter().flat_map(|l| l.1.iter().map(|p| p.1 .2)).fold(0.0, f64::max) * 1.15).max(10.0);
    let label = |v: &f64| crate::charts::category(labels, *v);
    let mut chart = ChartBuilder::on(area)
        .caption(caption, (FONT, 22))
        .margin(20)
        .x_label_area_size(50)
        .y_label_area_size(90)
        .build_cartesian_2d(-0.5..n as f64 - 0.5, 0.0..ymax)?;
    chart
        .configure_mesh()
        .light_line_style(TRANSPARENT)
        .disable_x_mesh()
        .x_labels(n + 1)
        .x_label_formatter(&label)
        .y_desc(y_desc)
        .y_label_formatter(&|y| format!("{y:.0}"))
        .label_style((FONT, 16))
        .axis_desc_style((FONT, 18))
        .draw()?;
    for (p, (name, pts)) in lines.iter().enumerate() {
        let c = colour(p);
        chart
            .draw_series(LineSeries::new(pts.iter().map(|(i, e)| (*i, e.0)), c.stroke_width(2)))?
            .label(name.clone())
            .legend(move |(a, b)| PathElement::new(vec![(a, b), (a + 24, b)], c.stroke_width(3)));
        chart.draw_series(pts.iter().map(|(i, e)| Circle::new((*i, e.0), 5, c.filled())))?;
        let whiskers = pts.iter().filter(|(_, e)| e.1 < e.2);
        chart.draw_series(whiskers.map(|(i, e)| PathElement::new(vec![(*i, e.1), (*i, e.2)], c.stroke_width(2))))?;
    }
    if legend {
        chart
            .configure_series_labels()
            .label_font((FONT, 16))
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperRight)
            .draw()?;
    }
    Ok(())
}

#[cfg(test)]
#[path = "crossover_tests.rs"]
mod tests;

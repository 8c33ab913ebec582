//! `crossover.png`: a sweep's crossover (`report/crossover.rs`) as two panels, the end-to-end rate
//! and the caller-runs per minute of each policy across the conditions.

use super::axis::category;
use crate::chart_style::{colour, Draw, FONT, WIDTH};
use crate::plan::Plan;
use crate::report::crossover::{Cell, Crossover};
use crate::stats::Spread;
use plotters::prelude::*;
use std::path::Path;

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
    let label = |v: &f64| category(labels, *v);
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

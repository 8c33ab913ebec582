//! The summary charts (PNG, 1200 px wide): throughput per round per policy, latency percentiles,
//! CPU per message per process, and for a gradient achieved-vs-target rate and p99 vs rate.
//! The per-policy pool timelines are in `timeline.rs`, a sweep's crossover chart in
//! `crossover.rs`; what they share (size, font, palette) in `crate::chart_style`.

use super::axis::category;
use crate::chart_style::{colour, Draw, FONT, WIDTH};
use crate::report::view::{cells, RoundView};
use crate::stats::{processes, spread};
use plotters::prelude::*;
use std::path::Path;

pub(super) fn throughput(path: &Path, ev: &crate::evidence::Evidence, views: &[RoundView]) -> Draw<()> {
    let canvas = BitMapBackend::new(path, (WIDTH, 730)).into_drawing_area();
    canvas.fill(&WHITE)?;
    let (root, note) = canvas.split_vertically(690);
    let ymax = views.iter().flat_map(|v| [v.stats.throughput, v.stats.writer_rate]).flatten().fold(1.0, f64::max) * 1.2;
    let rounds = ev.plan.rounds as f64;
    let mut chart = ChartBuilder::on(&root)
        .caption("Throughput per round: accepted by the ingest (solid) and stored by the writer (dashed)", (FONT, 26))
        .margin(20)
        .x_label_area_size(60)
        .y_label_area_size(90)
        .build_cartesian_2d(0.5..rounds + 0.5, 0.0..ymax)?;
    chart
        .configure_mesh()
        .light_line_style(TRANSPARENT)
        .x_labels(ev.plan.rounds as usize)
        .x_label_formatter(&|x| if (x - x.round()).abs() < 0.01 { format!("{}", x.round()) } else { String::new() })
        .x_desc("round (policies interleaved within each round)")
        .y_desc("messages / s")
        .y_label_formatter(&|y| format!("{y:.0}"))
        .label_style((FONT, 18))
        .axis_desc_style((FONT, 20))
        .draw()?;
    let n = ev.plan.labels().len() as f64;
    for (i, policy) in ev.plan.labels().iter().enumerate() {
        let c = colour(i);
        let dx = (i as f64 - (n - 1.0) / 2.0) * 0.06;
        let pts: Vec<(f64, f64, bool)> = views
            .iter()
            .filter(|v| &v.slot.policy == policy)
            .filter_map(|v| Some((v.slot.rep as f64 + dx, v.stats.throughput?, v.valid)))
            .collect();
        let valid: Vec<(f64, f64)> = pts.iter().filter(|p| p.2).map(|p| (p.0, p.1)).collect();
        chart
            .draw_series(LineSeries::new(valid.clone(), c.stroke_width(2)))?
            .label(policy.to_string())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], c.stroke_width(3)));
        chart.draw_series(valid.iter().map(|p| Circle::new(*p, 6, c.filled())))?;
        chart.draw_series(pts.iter().filter(|p| !p.2).map(|p| Cross::new((p.0, p.1), 9, c.stroke_width(3))))?;
        // The writer's own rate: what it stored in all four stores per second of the same phase.
        let stored: Vec<(f64, f64)> = views
            .iter()
            .filter(|v| &v.slot.policy == policy && v.valid)
            .filter_map(|v| Some((v.slot.rep as f64 + dx, v.stats.writer_rate?)))
            .collect();
        chart.draw_series(DashedLineSeries::new(stored.clone(), 8, 5, c.stroke_width(2)))?;
        chart.draw_series(stored.iter().map(|p| Circle::new(*p, 5, c.stroke_width(2))))?;
    }
    chart
        .configure_series_labels()
        .label_font((FONT, 18))
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .position(SeriesLabelPosition::LowerRight)
        .draw()?;
    note.draw(&Text::new(
        "● accepted/s (valid round)   ○ stored/s   ✕ invalid round (excluded)",
        (100, 8),
        (FONT, 16),
    ))?;
    canvas.present()?;
    Ok(())
}

/// Bars of p50, p95, p99 (median over valid rounds) per policy, with min–max whiskers.
pub(super) fn latency(path: &Path, ev: &crate::evidence::Evidence, views: &[RoundView]) -> Draw<()> {
    let cells = cells(ev, views);
    let root = BitMapBackend::new(path, (WIDTH, 700)).into_drawing_area();
    root.fill(&WHITE)?;
    type Get = fn(&crate::stats::RoundStats) -> Option<f64>;
    let pcts: [(&str, Get); 3] = [("p50", |s| s.p50), ("p95", |s| s.p95), ("p99", |s| s.p99)];
    let mut bars = Vec::new();
    for (ci, c) in cells.iter().enumerate() {
        for (pi, (_, get)) in pcts.iter().enumerate() {
            let vals: Vec<f64> = views
                .iter()
                .filter(|v| v.valid && v.slot.policy == c.0 && v.slot.point == c.1)
                .filter_map(|v| get(&v.stats))
                .collect();
            if let Some(s) = spread(&vals) {
                bars.push((ci, pi, s));
            }
        }
    }
    let ymax = bars.iter().map(|b| b.2 .2).fold(1.0, f64::max) * 1.15;
    let n = cells.len();
    let mut chart = ChartBuilder::on(&root)
        .caption("Latency percentiles (median of valid rounds; whiskers: min–max)", (FONT, 28))
        .margin(20)
        .x_label_area_size(60)
        .y_label_area_size(90)
        .build_cartesian_2d(-0.5..n as f64 - 0.5, 0.0..ymax)?;
    let labels: Vec<String> = cells.iter().map(|c| cell_label(ev, c)).collect();
    chart
        .configure_mesh()
        .light_line_style(TRANSPARENT)
        .disable_x_mesh()
        .x_labels(n + 1)
        .x_label_formatter(&|x| category(&labels, *x))
        .x_desc("policy")
        .y_desc("latency, ms")
        .y_label_formatter(&|y| format!("{y:.0}"))
        .label_style((FONT, 18))
        .axis_desc_style((FONT, 20))
        .draw()?;
    for (pi, (name, _)) in pcts.iter().enumerate() {
        let c = colour(pi + 4);
        let x0 = |ci: usize| ci as f64 - 0.36 + pi as f64 * 0.24;
        let mine: Vec<&(usize, usize, (f64, f64, f64))> = bars.iter().filter(|b| b.1 == pi).collect();
        chart
            .draw_series(mine.iter().map(|b| Rectangle::new([(x0(b.0), 0.0), (x0(b.0) + 0.22, b.2 .0)], c.filled())))?
            .label(*name)
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 18, y + 6)], c.filled()));
        chart.draw_series(mine.iter().map(|b| {
            let xm = x0(b.0) + 0.11;
            PathElement::new(vec![(xm, b.2 .1), (xm, b.2 .2)], BLACK.stroke_width(2))
        }))?;
    }
    chart
        .configure_series_labels()
        .label_font((FONT, 18))
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}

/// Stacked bars: CPU µs per message of each process, per policy (medians of valid rounds).
pub(super) fn cpu(path: &Path, ev: &crate::evidence::Evidence, views: &[RoundView]) -> Draw<()> {
    let cells = cells(ev, views);
    let root = BitMapBackend::new(path, (WIDTH, 700)).into_drawing_area();
    root.fill(&WHITE)?;
    let stacks: Vec<Vec<f64>> = cells
        .iter()
        .map(|c| {
            processes()
                .iter()
                .map(|p| {
                    let vals: Vec<f64> = views
                        .iter()
                        .filter(|v| v.valid && v.slot.policy == c.0 && v.slot.point == c.1)
                        .filter_map(|v| v.stats.cpu_us_per_msg.get(*p).copied())
                        .collect();
                    spread(&vals).map(|s| s.0).unwrap_or(0.0)
                })
                .collect()
        })
        .collect();
    let ymax = stacks.iter().map(|s| s.iter().sum::<f64>()).fold(1.0, f64::max) * 1.15;
    let n = cells.len();
    let mut chart = ChartBuilder::on(&root)
        .caption("CPU time per message, by process (median of valid rounds)", (FONT, 28))
        .margin(20)
        .x_label_area_size(60)
        .y_label_area_size(90)
        .build_cartesian_2d(-0.5..n as f64 - 0.5 + 0.9, 0.0..ymax)?;
    let labels: Vec<String> = cells.iter().map(|c| cell_label(ev, c)).collect();
    chart
        .configure_mesh()
        .light_line_style(TRANSPARENT)
        .disable_x_mesh()
        .x_labels(n + 2)
        .x_label_formatter(&|x| category(&labels, *x))
        .x_desc("policy")
        .y_desc("CPU µs per message (user + system)")
        .y_label_formatter(&|y| format!("{y:.0}"))
        .label_style((FONT, 18))
        .axis_desc_style((FONT, 20))
        .draw()?;
    for (pi, p) in processes().iter().enumerate() {
        let c = colour(pi);
        let rects: Vec<Rectangle<(f64, f64)>> = stacks
            .iter()
            .enumerate()
            .map(|(ci, s)| {
                let base: f64 = s[..pi].iter().sum();
                Rectangle::new([(ci as f64 - 0.3, base), (ci as f64 + 0.3, base + s[pi])], c.filled())
            })
            .collect();
        chart
            .draw_series(rects)?
            .label(*p)
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 18, y + 6)], c.filled()));
    }
    chart
        .configure_series_labels()
        .label_font((FONT, 18))
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .draw()?;
    root.present()?;
    Ok(())
}

/// Open loop: achieved vs target rate (with the ideal diagonal), or p99 vs target rate.
pub(super) fn gradient(path: &Path, ev: &crate::evidence::Evidence, views: &[RoundView], p99: bool) -> Draw<()> {
    let root = BitMapBackend::new(path, (WIDTH, 700)).into_drawing_area();
    root.fill(&WHITE)?;
    let xmax = ev.plan.rates.iter().copied().max().unwrap_or(1) as f64 * 1.1;
    let secs = crate::duration::seconds(&ev.plan.duration).unwrap_or(1.0).max(0.001);
    let y = |v: &RoundView| if p99 { v.stats.p99 } else { Some(v.stats.requests / secs) };
    let ymax = views.iter().filter_map(y).fold(1.0, f64::max).max(if p99 { 1.0 } else { xmax }) * 1.1;
    let (caption, ydesc) = if p99 {
        ("p99 latency vs target rate (each round; ✕ invalid)", "p99 latency, ms")
    } else {
        ("Achieved vs target rate (each round; ✕ invalid; dashed: ideal)", "achieved requests / s")
    };
    let mut chart = ChartBuilder::on(&root)
        .caption(caption, (FONT, 28))
        .margin(20)
        .x_label_area_size(60)
        .y_label_area_size(90)
        .build_cartesian_2d(0.0..xmax, 0.0..ymax)?;
    chart
        .configure_mesh()
        .light_line_style(TRANSPARENT)
        .x_label_formatter(&|x| format!("{x:.0}"))
        .x_desc("target requests / s")
        .y_desc(ydesc)
        .y_label_formatter(&|y| format!("{y:.0}"))
        .label_style((FONT, 18))
        .axis_desc_style((FONT, 20))
        .draw()?;
    if !p99 {
        chart.draw_series(DashedLineSeries::new(vec![(0.0, 0.0), (xmax, xmax)], 10, 6, BLACK.stroke_width(1)))?;
    }
    for (i, policy) in ev.plan.labels().iter().enumerate() {
        let c = colour(i);
        let mine: Vec<&RoundView> = views.iter().filter(|v| &v.slot.policy == policy).collect();
        let mut line: Vec<(f64, f64)> = ev
            .plan
            .rates
            .iter()
            .filter_map(|&r| {
                let vals: Vec<f64> =
                    mine.iter().filter(|v| v.valid && v.slot.point == r).filter_map(|v| y(v)).collect();
                spread(&vals).map(|s| (r as f64, s.0))
            })
            .collect();
        line.sort_by(|a, b| a.0.total_cmp(&b.0));
        chart
            .draw_series(LineSeries::new(line, c.stroke_width(2)))?
            .label(policy.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], c.stroke_width(3)));
        chart.draw_series(
            mine.iter()
                .filter(|v| v.valid)
                .filter_map(|v| Some(Circle::new((v.slot.point as f64, y(v)?), 5, c.filled()))),
        )?;
        chart.draw_series(
            mine.iter()
                .filter(|v| !v.valid)
                .filter_map(|v| Some(Cross::new((v.slot.point as f64, y(v)?), 9, c.stroke_width(3)))),
        )?;
    }
    chart
        .configure_series_labels()
        .label_font((FONT, 18))
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()?;
    root.present()?;
    Ok(())
}

fn cell_label(ev: &crate::evidence::Evidence, c: &(String, u32)) -> String {
    if ev.plan.points().len() > 1 {
        format!("{} @{}", c.0, c.1)
    } else {
        c.0.clone()
    }
}

//! One policy's pools over a round, from its 1 s timeline: queue depth, active workers,
//! rejections per second and caller-runs per second, one line per pool, the warm-up and the
//! measured phase shaded. This is the chart that shows what the reference could only infer: whether
//! the "async" writes were in fact running on the consumer threads (caller-runs) under load.

use crate::chart_style::{colour, Draw, FONT, WIDTH};
use crate::evidence::{Evidence, RoundEvidence};
use crate::report::view::RoundView;
use crate::stats::pool_name;
use plotters::prelude::*;
use std::path::Path;

/// The round drawn for a policy: its valid round with the median end-to-end rate, else its first.
pub(crate) fn representative<'a>(ev: &'a Evidence, views: &[RoundView], policy: &str) -> Option<&'a RoundEvidence> {
    let mut valid: Vec<(f64, &str)> = views
        .iter()
        .filter(|v| v.valid && v.slot.policy == policy)
        .map(|v| (v.stats.end_to_end().unwrap_or(0.0), v.name.as_str()))
        .collect();
    valid.sort_by(|a, b| a.0.total_cmp(&b.0));
    let name = match valid.get(valid.len() / 2) {
        Some((_, n)) => n.to_string(),
        None => views.iter().find(|v| v.slot.policy == policy)?.name.clone(),
    };
    ev.rounds.iter().find(|r| r.name == name)
}

type Series = Vec<(String, Vec<(f64, f64)>)>;

/// Per-second rate of a counter (negative steps, a restart, count as 0).
fn per_second(pts: &[(f64, f64)]) -> Vec<(f64, f64)> {
    pts.windows(2).map(|w| (w[1].0, ((w[1].1 - w[0].1) / (w[1].0 - w[0].0).max(0.001)).max(0.0))).collect()
}

fn series(r: &RoundEvidence, name: &str, rate: bool) -> Series {
    r.timeline
        .matching("writer", name)
        .map(|(labels, pts)| (pool_name(labels), if rate { per_second(pts) } else { pts.to_vec() }))
        .collect()
}

pub(crate) fn pools(path: &Path, ev: &Evidence, r: &RoundEvidence, policy: &str, _index: usize) -> Draw<()> {
    let panels: [(&str, Series); 4] = [
        ("queue depth, jobs", series(r, "writer_pool_queue_depth", false)),
        ("active workers", series(r, "writer_pool_active_workers", false)),
        ("rejections / s", series(r, "writer_pool_rejected_total", true)),
        ("caller-runs / s", series(r, "writer_pool_caller_runs_total", true)),
    ];
    let root = BitMapBackend::new(path, (WIDTH, 1300)).into_drawing_area();
    root.fill(&WHITE)?;
    let about = ev.plan.policy_def(policy).map(|p| p.about).unwrap_or_default();
    let (title, body) = root.split_vertically(70);
    title.draw(&Text::new(format!("Pools of policy {policy}, round {}", r.name), (20, 8), (FONT, 26)))?;
    title.draw(&Text::new(
        format!("{about}. Dark grey: measured phase; light grey: warm-up (and the pause before measuring)."),
        (20, 42),
        (FONT, 16),
    ))?;
    let xmax = r.timeline.series.values().flat_map(|v| v.iter().map(|p| p.0)).fold(1.0, f64::max);
    let k6 = r.record.k6.clone().unwrap_or_default();
    let warm_from = k6.scenarios_s.unwrap_or(k6.started_s);
    let areas = body.split_evenly((4, 1));
    let mut pools: Vec<String> = panels.iter().flat_map(|p| p.1.iter().map(|s| s.0.clone())).collect();
    pools.sort();
    pools.dedup();
    for (area, (desc, data)) in areas.iter().zip(panels.iter()) {
        let ymax = data.iter().flat_map(|s| s.1.iter().map(|p| p.1)).fold(1.0, f64::max) * 1.15;
        let mut chart = ChartBuilder::on(area)
            .margin(10)
            .x_label_area_size(45)
            .y_label_area_size(80)
            .build_cartesian_2d(0.0..xmax, 0.0..ymax)?;
        chart
            .configure_mesh()
            .light_line_style(TRANSPARENT)
            .x_desc("seconds since the round's start")
            .y_desc(*desc)
            .x_label_formatter(&|x| format!("{x:.0}"))
            .y_label_formatter(&|y| if ymax > 5.0 { format!("{y:.0}") } else { format!("{y:.1}") })
            .label_style((FONT, 15))
            .axis_desc_style((FONT, 17))
            .draw()?;
        if k6.measured_s > warm_from {
            chart.draw_series(std::iter::once(Rectangle::new(
                [(warm_from, 0.0), (k6.measured_s, ymax)],
                RGBColor(238, 238, 238).filled(),
            )))?;
        }
        chart.draw_series(std::iter::once(Rectangle::new(
            [(k6.measured_s, 0.0), (k6.ended_s, ymax)],
            RGBColor(215, 215, 215).filled(),
        )))?;
        for (name, pts) in data {
            let i = pools.iter().position(|p| p == name).unwrap_or(0);
            let c = colour(i);
            chart
                .draw_series(LineSeries::new(pts.clone(), c.stroke_width(2)))?
                .label(match capacity(r, name, desc) {
                    Some(cap) => format!("pool {name} (holds {cap})"),
                    None => format!("pool {name}"),
                })
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], c.stroke_width(3)));
        }
        if !data.is_empty() {
            chart
                .configure_series_labels()
                .label_font((FONT, 15))
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .position(SeriesLabelPosition::UpperRight)
                .draw()?;
        }
    }
    root.present()?;
    Ok(())
}

/// The pool's queue capacity (jobs) or most workers, for the legend of the matching panel.
fn capacity(r: &RoundEvidence, pool: &str, panel: &str) -> Option<String> {
    let metric = if panel.starts_with("queue") {
        "writer_pool_queue_capacity"
    } else if panel.starts_with("active") {
        "writer_pool_max_workers"
    } else {
        return None;
    };
    let (_, pts) = r.timeline.matching("writer", metric).find(|(labels, _)| pool_name(labels) == pool)?;
    pts.last().map(|p| format!("{:.0}", p.1))
}

#[cfg(test)]
mod tests {
    #[test]
    fn counter_rates() {
        let r = super::per_second(&[(0.0, 0.0), (1.0, 10.0), (3.0, 30.0), (4.0, 0.0)]);
        assert_eq!(r, vec![(1.0, 10.0), (3.0, 10.0), (4.0, 0.0)]);
    }
}

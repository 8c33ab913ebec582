//! `soak.png`: one panel per figure the verdict and the tables rest on, against the minute of the
//! measured phase: latency, CPU per message, memory, descriptors, threads, data on disk.

use super::{ProcWindow, Soak, Window};
use crate::chart_style::{colour, Draw, FONT, WIDTH};
use plotters::prelude::*;
use std::path::Path;

type Series = Vec<(String, Vec<(f64, f64)>)>;

fn minute(w: &Window) -> f64 {
    (w.start_s + w.secs) / 60.0
}

fn per_process(s: &Soak, f: fn(&ProcWindow) -> Option<f64>, scale: f64) -> Series {
    of(s, &crate::stats::processes(), f, scale)
}

fn of(s: &Soak, names: &[&str], f: fn(&ProcWindow) -> Option<f64>, scale: f64) -> Series {
    names
        .iter()
        .map(|p| {
            let pts =
                s.windows.iter().filter_map(|w| Some((minute(w), w.procs.get(*p).and_then(f)? / scale))).collect();
            (p.to_string(), pts)
        })
        .filter(|(_, pts): &(String, Vec<(f64, f64)>)| !pts.is_empty())
        .collect()
}

pub(crate) fn draw(path: &Path, s: &Soak) -> Draw<()> {
    let latency: Series = vec![
        ("p50".into(), s.windows.iter().filter_map(|w| Some((minute(w), w.p50?))).collect()),
        ("p99".into(), s.windows.iter().filter_map(|w| Some((minute(w), w.p99?))).collect()),
    ];
    let servers: Vec<String> = s.windows.last().map(|w| w.data_bytes.keys().cloned().collect()).unwrap_or_default();
    let data: Series = servers
        .iter()
        .map(|k| {
            (k.clone(), s.windows.iter().filter_map(|w| Some((minute(w), w.data_bytes.get(k)? / 1048576.0))).collect())
        })
        .collect();
    // Ours apart: next to k6's and Redis's gigabytes a leak of ours would be a flat line.
    let others: Vec<&str> = crate::stats::processes().into_iter().filter(|p| !super::JUDGED.contains(p)).collect();
    let panels: [(&str, Series); 7] = [
        ("k6 latency per window, ms", latency),
        ("CPU per message, µs", per_process(s, |p| p.cpu_us_per_msg, 1.0)),
        ("resident memory (ours), MiB", of(s, &super::JUDGED, |p| p.rss_bytes, 1048576.0)),
        ("resident memory (the rest), MiB", of(s, &others, |p| p.rss_bytes, 1048576.0)),
        ("open file descriptors", per_process(s, |p| p.fds, 1.0)),
        ("threads", per_process(s, |p| p.threads, 1.0)),
        ("data on disk, MiB", data),
    ];
    let root = BitMapBackend::new(path, (WIDTH, 2300)).into_drawing_area();
    root.fill(&WHITE)?;
    let (title, body) = root.split_vertically(50);
    let verdict = if s.flat() { "flat" } else { "NOT flat" };
    title.draw(&Text::new(
        format!("Soak at {} requests/s, {:.0} s windows: {verdict}", s.target_rate, s.window_s),
        (20, 10),
        (FONT, 26),
    ))?;
    let xmax = s.windows.last().map(minute).unwrap_or(1.0).max(1.0);
    let order = crate::stats::processes();
    for (area, (desc, data)) in body.split_evenly((7, 1)).iter().zip(panels.iter()) {
        // Log scale would hide a slow drift; a linear axis from 0 shows it against the level.
        let ymax = data.iter().flat_map(|s| s.1.iter().map(|p| p.1)).fold(1.0, f64::max) * 1.15;
        let mut chart = ChartBuilder::on(area)
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(80)
            .build_cartesian_2d(0.0..xmax, 0.0..ymax)?;
        chart
            .configure_mesh()
            .light_line_style(TRANSPARENT)
            .x_desc("minute of the measured phase")
            .y_desc(*desc)
            .label_style((FONT, 14))
            .axis_desc_style((FONT, 16))
            .draw()?;
        for (i, (name, pts)) in data.iter().enumerate() {
            // A process (or its server's data) keeps one colour in every panel, whatever the
            // panel's subset and order: its place in the report's process order.
            let c = colour(order.iter().position(|p| p == name).unwrap_or(i));
            chart
                .draw_series(LineSeries::new(pts.clone(), c.stroke_width(2)))?
                .label(name.clone())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], c.stroke_width(3)));
        }
        if !data.is_empty() {
            chart
                .configure_series_labels()
                .label_font((FONT, 14))
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .position(SeriesLabelPosition::UpperLeft)
                .draw()?;
        }
    }
    root.present()?;
    Ok(())
}

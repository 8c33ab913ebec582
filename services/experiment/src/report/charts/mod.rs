//! The report's charts (PNG, 1200 px wide), each drawn from the report's model (`view.rs`,
//! `crossover.rs`): the summary charts (`summary.rs`), a sweep's crossover (`crossover.rs`) and
//! each policy's pools over a round (`timeline.rs`). What every chart shares (size, font,
//! palette) is `crate::chart_style`, which the soak's chart uses too.

mod axis;
/// `pub(super)` for the crossover's tests, which draw the chart of a made-up sweep.
pub(super) mod crossover;
mod summary;
mod timeline;

use crate::chart_style::{ChartError, Draw};
use crate::report::view::RoundView;
use std::path::Path;

/// Renders every summary chart into `dir`; returns the file names written.
pub(crate) fn render_all(
    dir: &Path,
    ev: &crate::evidence::Evidence,
    views: &[RoundView],
) -> Result<Vec<String>, ChartError> {
    let mut out = Vec::new();
    let mut run = |name: &str, f: &dyn Fn(&Path) -> Draw<()>| -> Result<(), ChartError> {
        f(&dir.join(name)).map_err(|e| ChartError::Draw(name.into(), e.to_string()))?;
        out.push(name.to_string());
        Ok(())
    };
    if ev.plan.load != crate::plan::LoadKind::Open {
        run("throughput.png", &|p| summary::throughput(p, ev, views))?;
    } else {
        run("gradient-rate.png", &|p| summary::gradient(p, ev, views, false))?;
        run("gradient-p99.png", &|p| summary::gradient(p, ev, views, true))?;
    }
    if let Some(x) = crate::report::crossover::build(ev, views) {
        run("crossover.png", &|p| crossover::draw(p, &x))?;
    }
    run("latency.png", &|p| summary::latency(p, ev, views))?;
    run("cpu.png", &|p| summary::cpu(p, ev, views))?;
    for (i, policy) in ev.plan.labels().iter().enumerate() {
        let name = format!("pool-{policy}.png");
        if let Some(r) = timeline::representative(ev, views, policy) {
            run(&name, &|p| timeline::pools(p, ev, r, policy, i))?;
        }
    }
    Ok(out)
}

//! The crossover of a condition sweep (a plan with `conditions`): every policy under every
//! condition side by side, so that where the reference's pool starts to lose, and what beats it
//! there, reads off one table and one chart instead of a row per `POLICY@dN`.
//!
//! Per cell (valid rounds only): the end-to-end rate (median, min–max: what the ranking uses),
//! the writer's stored rate, caller-runs per minute of the measured phase and the deepest queue of
//! any pool. This file is the model only, computed from the round views; its table and its
//! winners are written by `markdown/crossover.rs` and its chart drawn by `charts/crossover.rs`,
//! both of which read this and nothing of each other.

use super::view::RoundView;
use crate::evidence::Evidence;
use crate::stats::{spread, RoundStats, Spread};

/// The policy the reference's own table ends with (MySQL on the consumer, the rest in the pool):
/// the one a remedy has to beat.
pub(crate) const REFERENCE: &str = "C";

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

//! The report's model of an evidence folder: each round with its statistics and gate verdicts
//! ([`RoundView`]), and the cells (policy × load point) the report compares. The markdown, the
//! charts and `verdicts.json` are all drawn from these views, so they read this file and it reads
//! none of them.

use crate::evidence::Evidence;
use crate::gates::{self, Gate};
use crate::plan::Slot;
use crate::stats::{self, RoundStats};

/// One round as the report sees it.
pub(crate) struct RoundView {
    pub name: String,
    pub slot: Slot,
    /// The round's condition as its proxies measured it (empty: none).
    pub conditions: Vec<crate::condition::proxy::ProxyStats>,
    pub stats: RoundStats,
    pub gates: Vec<Gate>,
    pub valid: bool,
}

/// Every round of `ev` with its statistics and its gates, in the evidence's order.
pub(crate) fn analyse(ev: &Evidence) -> Vec<RoundView> {
    let owners = gates::boot_owners(&ev.rounds);
    ev.rounds
        .iter()
        .map(|r| {
            let s = stats::compute(r);
            let g = gates::evaluate(&ev.plan, r, &s, &owners);
            let slot = r.record.slot.clone().unwrap_or(Slot {
                index: 0,
                rep: 0,
                point: 0,
                policy: "?".into(),
                fault: None,
                condition: None,
            });
            // Under a condition sweep a round is grouped as its policy under its condition.
            let slot = Slot { policy: crate::plan::Plan::label(&slot), ..slot };
            let conditions = r.record.conditions.clone();
            RoundView { name: r.name.clone(), slot, conditions, valid: gates::valid(&g), stats: s, gates: g }
        })
        .collect()
}

/// Policies in plan order, then load points: the cells the report compares.
pub(crate) fn cells(ev: &Evidence, views: &[RoundView]) -> Vec<(String, u32)> {
    let mut out = Vec::new();
    for &point in &ev.plan.points() {
        for p in &ev.plan.labels() {
            out.push((p.clone(), point));
        }
    }
    for v in views {
        let key = (v.slot.policy.clone(), v.slot.point);
        if !out.contains(&key) {
            out.push(key);
        }
    }
    out
}

/// The valid rounds of one cell: what every median of the report is taken over.
pub(crate) fn valid_of<'a>(views: &'a [RoundView], cell: &(String, u32)) -> Vec<&'a RoundView> {
    views.iter().filter(|v| v.valid && v.slot.policy == cell.0 && v.slot.point == cell.1).collect()
}

//! An evidence folder's report written out: the model computed once from the evidence, then the
//! markdown, `verdicts.json`, the charts and (for a soak) its drift verdict, each from that model.
//! Here rather than in main.rs so that a run (`crate::run`), which writes its report when its
//! last round ends, and the `report` command call the same code without reaching into the root.

use super::{charts, markdown, verdicts, view};
use crate::evidence::Evidence;
use crate::{gates, soak};
use std::path::Path;
use tracing::{info, warn};

/// Writes report.md, verdicts.json and the charts of an evidence folder; true when every round
/// is valid. Charts are skipped (and the report says so) when no font is found.
pub(crate) fn write_report(dir: &Path, font: Option<&Path>) -> anyhow::Result<bool> {
    let ev = Evidence::load(dir)?;
    let views = view::analyse(&ev);
    let charts = match crate::chart_style::register_font(font) {
        Ok(_) => match charts::render_all(dir, &ev, &views) {
            Ok(c) => c,
            Err(e) => {
                warn!("charts not drawn: {e}");
                Vec::new()
            }
        },
        Err(e) => {
            warn!("charts not drawn: {e}");
            Vec::new()
        }
    };
    let mut md = markdown::render(&ev, &views, &charts);
    if charts.is_empty() {
        md.push_str("\n(No charts: see the warning in the run's output; `experiment report DIR --font FILE` draws them later.)\n");
    }
    // A soak is also judged for drift; its verdict decides the exit code with the gates.
    let soak = soak::analyse(&ev, views.first().is_some_and(|v| v.valid));
    if let Some(s) = &soak {
        md.push_str(&soak::render(s));
        if !charts.is_empty() {
            if let Err(e) = soak::draw(&dir.join("soak.png"), s) {
                warn!("soak chart not drawn: {e}");
            }
        }
        let checks: Vec<serde_json::Value> =
            s.checks.iter().map(|c| serde_json::json!({ "check": c.what, "ok": c.ok, "detail": c.detail })).collect();
        let json = serde_json::json!({ "round": s.round, "flat": s.flat(), "checks": checks });
        std::fs::write(dir.join("soak.json"), serde_json::to_string_pretty(&json)? + "\n")?;
        info!("soak: {}", if s.flat() { "flat" } else { "NOT flat (report.md says which check failed)" });
    }
    std::fs::write(dir.join("report.md"), md)?;
    let verdicts = serde_json::to_string_pretty(&verdicts::verdicts_json(&views))?;
    std::fs::write(dir.join("verdicts.json"), verdicts + "\n")?;
    let valid = views.iter().filter(|v| v.valid).count();
    info!("report: {} ({valid} of {} rounds valid)", dir.join("report.md").display(), views.len());
    for v in views.iter().filter(|v| !v.valid) {
        warn!("round {} INVALID: {}", v.name, gates::reasons(&v.gates));
    }
    Ok(valid == views.len() && soak.as_ref().is_none_or(soak::Soak::flat))
}

//! What a scenario left in its folder and its verdict reads: reconcile's last JSON line (or its
//! log when it wrote none) and the monitor's samples. Reading only, so that judging
//! (`verdict.rs`) is a function of these and of the scenario's record.

use super::monitor::Sample;
use pipeline_common::reconcile_report::Answer;
use std::path::Path;

/// A scenario's files as its verdict reads them.
pub(super) struct ScenarioFiles {
    /// The last line of `reconcile.json` that parses.
    pub rec: Option<Answer>,
    /// `reconcile.log`, read only when reconcile left no JSON: its last line says why.
    pub reconcile_log: String,
    /// The monitor's samples that carry offsets, in time order.
    pub samples: Vec<Sample>,
}

/// The files of the scenario whose evidence is in `dir`; a missing file reads as empty.
pub(super) fn load(dir: &Path) -> ScenarioFiles {
    let rec = last_json(&dir.join("reconcile.json"));
    let reconcile_log = if rec.is_none() {
        std::fs::read_to_string(dir.join("reconcile.log")).unwrap_or_default()
    } else {
        String::new()
    };
    ScenarioFiles { rec, reconcile_log, samples: load_samples(&dir.join("monitor.jsonl")) }
}

/// The monitor's samples that carry offsets, in time order.
pub(super) fn load_samples(path: &Path) -> Vec<Sample> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines().filter_map(|l| serde_json::from_str::<Sample>(l).ok()).filter(Sample::has_offsets).collect()
}

/// The last line of a reconcile `--json` output that parses.
pub(super) fn last_json(path: &Path) -> Option<Answer> {
    let text = std::fs::read_to_string(path).ok()?;
    Answer::last_in(&text).ok()
}

//! Reading an evidence folder back: the plan, the environment, and every round's record, k6
//! summary, reconcile answer and timeline. The report is computed from these alone, so
//! `experiment report DIR` re-renders exactly what the run would have written.

use crate::plan::Plan;
use crate::round::RoundRecord;
use pipeline_common::reconcile_report::Answer;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub(crate) enum EvidenceError {
    #[error("{0}: {1}")]
    Io(String, std::io::Error),
    #[error("{0}: {1}")]
    Json(String, serde_json::Error),
    #[error("{0}: {1}")]
    Plan(String, crate::plan::PlanError),
    #[error("{0}: line {1} is not t_s,source,name,labels,value")]
    Csv(String, usize),
    #[error("{0} holds no rounds (no rounds/*/round.json)")]
    NoRounds(String),
}

/// Series key: (source, name, labels).
pub(crate) type Key = (String, String, String);

/// A round's timeline: every series as (seconds since the round's start, value), in time order.
#[derive(Debug, Default)]
pub(crate) struct Timeline {
    pub series: BTreeMap<Key, Vec<(f64, f64)>>,
}

impl Timeline {
    pub(crate) fn load(path: &Path) -> Result<Timeline, EvidenceError> {
        let name = path.display().to_string();
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Timeline::default()),
            Err(e) => return Err(EvidenceError::Io(name, e)),
        };
        let mut series: BTreeMap<Key, Vec<(f64, f64)>> = BTreeMap::new();
        for (i, line) in text.lines().enumerate().skip(1) {
            let f: Vec<&str> = line.splitn(5, ',').collect();
            let (Some(t), Some(v)) = (f.first().and_then(|t| t.parse().ok()), f.get(4).and_then(|v| v.parse().ok()))
            else {
                return Err(EvidenceError::Csv(name, i + 1));
            };
            let key = (f[1].to_string(), f[2].to_string(), f[3].to_string());
            series.entry(key).or_default().push((t, v));
        }
        Ok(Timeline { series })
    }

    pub(crate) fn get(&self, source: &str, name: &str, labels: &str) -> Option<&[(f64, f64)]> {
        self.series.get(&(source.to_string(), name.to_string(), labels.to_string())).map(Vec::as_slice)
    }

    /// Every series of a metric: (labels, points).
    pub(crate) fn matching<'a>(
        &'a self,
        source: &'a str,
        name: &'a str,
    ) -> impl Iterator<Item = (&'a str, &'a [(f64, f64)])> {
        self.series
            .iter()
            .filter(move |((s, n, _), _)| s == source && n == name)
            .map(|((_, _, l), v)| (l.as_str(), v.as_slice()))
    }
}

/// The last value at or before `t` (None before the first sample).
pub(crate) fn at(points: &[(f64, f64)], t: f64) -> Option<f64> {
    points.iter().take_while(|(x, _)| *x <= t).last().map(|(_, v)| *v)
}

/// The first value at or after `t`, else the last one.
pub(crate) fn at_or_after(points: &[(f64, f64)], t: f64) -> Option<f64> {
    points.iter().find(|(x, _)| *x >= t).or(points.last()).map(|(_, v)| *v)
}

pub(crate) struct RoundEvidence {
    pub name: String,
    pub record: RoundRecord,
    pub summary: Option<Value>,
    /// The final check's answer; `None` when reconcile printed none that parses.
    pub reconcile: Option<Answer>,
    pub timeline: Timeline,
}

pub(crate) struct Evidence {
    pub dir: PathBuf,
    pub plan: Plan,
    pub env: Option<Value>,
    /// The servers' warm-up before the first round (`warmup.json`); `None` for none.
    pub warmed: Option<Vec<crate::warm::Warmed>>,
    /// The unmeasured round after the servers' warm-up (`warm-round/round.json`).
    pub warm_round: Option<RoundRecord>,
    pub rounds: Vec<RoundEvidence>,
}

fn read_json(path: &Path) -> Result<Option<Value>, EvidenceError> {
    match std::fs::read_to_string(path) {
        // reconcile prints one JSON document; an empty or cut file is "no answer", not an error.
        Ok(t) => Ok(serde_json::from_str(t.trim()).ok()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(EvidenceError::Io(path.display().to_string(), e)),
    }
}

impl Evidence {
    pub(crate) fn load(dir: &Path) -> Result<Evidence, EvidenceError> {
        let plan_path = dir.join("plan.toml");
        let text =
            std::fs::read_to_string(&plan_path).map_err(|e| EvidenceError::Io(plan_path.display().to_string(), e))?;
        let plan = Plan::from_toml(&text).map_err(|e| EvidenceError::Plan(plan_path.display().to_string(), e))?;
        let env = read_json(&dir.join("env.json"))?;
        let warmed = read_json(&dir.join(crate::warm::FILE))?.and_then(|v| serde_json::from_value(v).ok());
        let warm_round = read_json(&dir.join(crate::warm::ROUND_DIR).join("round.json"))?
            .and_then(|v| serde_json::from_value(v).ok());
        let rounds_dir = dir.join("rounds");
        let mut names: Vec<PathBuf> = match std::fs::read_dir(&rounds_dir) {
            Ok(d) => d.flatten().map(|e| e.path()).filter(|p| p.join("round.json").exists()).collect(),
            Err(_) => Vec::new(),
        };
        names.sort();
        let mut rounds = Vec::new();
        for d in names {
            let rpath = d.join("round.json");
            let text =
                std::fs::read_to_string(&rpath).map_err(|e| EvidenceError::Io(rpath.display().to_string(), e))?;
            let record: RoundRecord =
                serde_json::from_str(&text).map_err(|e| EvidenceError::Json(rpath.display().to_string(), e))?;
            rounds.push(RoundEvidence {
                name: d.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
                summary: read_json(&crate::k6::summary_path(&d))?,
                reconcile: read_json(&d.join("reconcile.json"))?.and_then(|v| serde_json::from_value(v).ok()),
                timeline: Timeline::load(&d.join("timeline.csv"))?,
                record,
            });
        }
        if rounds.is_empty() {
            return Err(EvidenceError::NoRounds(dir.display().to_string()));
        }
        Ok(Evidence { dir: dir.to_path_buf(), plan, env, warmed, warm_round, rounds })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookups_in_time() {
        let p = [(1.0, 10.0), (2.0, 20.0), (3.0, 30.0)];
        assert_eq!(at(&p, 0.5), None);
        assert_eq!(at(&p, 2.5), Some(20.0));
        assert_eq!(at_or_after(&p, 2.5), Some(30.0));
        assert_eq!(at_or_after(&p, 9.0), Some(30.0));
    }
}

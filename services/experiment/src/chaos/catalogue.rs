//! The fault catalogue: every chaos scenario by name, made from the registry's list of stores
//! for the per-store ones, and the sizes of a full and a short (CI) run.

use pipeline_stores::StoreKind;

/// One scenario: a fault injected under load, ending in an exact reconcile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    /// The writer SIGKILLed N times under load, restarted after the restart delay.
    WriterKill,
    /// A backlog, two writers, a third joining and leaving, then one SIGKILLed and restarted.
    Rebalance,
    /// The ingest SIGKILLed under load and restarted.
    IngestKill,
    /// A store's server SIGSTOPped, then SIGCONT.
    Freeze(StoreKind),
    /// Edge-case requests through the HTTP API: each refused with a 4xx or stored everywhere.
    Poison,
    /// A store emptied mid-run (its own reset), then `reconcile repair`.
    Wipe(StoreKind),
    /// MySQL refusing most messages for good, then `reconcile dlq replay`.
    DlqReplay,
}

impl Scenario {
    /// Every scenario, in the order a full run takes them.
    pub fn all() -> Vec<Scenario> {
        let mut out = vec![Scenario::WriterKill, Scenario::Rebalance, Scenario::IngestKill];
        out.extend(StoreKind::ALL.iter().map(|k| Scenario::Freeze(*k)));
        out.push(Scenario::Poison);
        out.extend(Scenario::wipes());
        out.push(Scenario::DlqReplay);
        out
    }

    /// A wipe for every store but MySQL, the system of record the others are rebuilt from.
    fn wipes() -> impl Iterator<Item = Scenario> {
        StoreKind::ALL.into_iter().filter(|k| *k != StoreKind::Mysql).map(Scenario::Wipe)
    }

    pub fn name(&self) -> String {
        match self {
            Scenario::WriterKill => "writer-kill".into(),
            Scenario::Rebalance => "rebalance".into(),
            Scenario::IngestKill => "ingest-kill".into(),
            Scenario::Freeze(k) => format!("freeze-{k}"),
            Scenario::Poison => "poison".into(),
            Scenario::Wipe(k) => format!("wipe-{k}"),
            Scenario::DlqReplay => "dlq-replay".into(),
        }
    }

    /// `all`, `freeze` (every freeze-*), `wipe` (every wipe-*) or scenario names, in the order
    /// given, each once.
    pub fn select(words: &[String]) -> Result<Vec<Scenario>, String> {
        let all = Scenario::all();
        let mut out: Vec<Scenario> = Vec::new();
        for w in words.iter().map(|w| w.trim()).filter(|w| !w.is_empty()) {
            let picked: Vec<Scenario> = match w {
                "all" => all.clone(),
                "freeze" => all.iter().copied().filter(|s| matches!(s, Scenario::Freeze(_))).collect(),
                "wipe" => all.iter().copied().filter(|s| matches!(s, Scenario::Wipe(_))).collect(),
                name => match all.iter().find(|s| s.name() == name) {
                    Some(s) => vec![*s],
                    None => {
                        let known: Vec<String> = all.iter().map(Scenario::name).collect();
                        return Err(format!(
                            "unknown scenario {name} (known: {}, freeze, wipe, all)",
                            known.join(", ")
                        ));
                    }
                },
            };
            for s in picked {
                if !out.contains(&s) {
                    out.push(s);
                }
            }
        }
        Ok(out)
    }
}

/// How big each scenario is: `--short` is the CI version (one kill, one join/leave, 5 s freezes,
/// small loads, ~5 min in all), the full one ~15-20 min on 2 cores.
#[derive(Debug, Clone, Copy)]
pub struct Sizes {
    pub kills: u32,
    pub joins: u32,
    pub ingest_kills: u32,
    /// Seconds a server stays frozen.
    pub freeze_s: u64,
    /// Open-loop requests per second of the live load.
    pub rate: u32,
    pub backlog_s: u64,
    pub backlog_vus: u32,
    /// Seconds of load between two faults.
    pub run_between_s: u64,
    /// Seconds of load before the first fault and after the last.
    pub pre_s: u64,
    pub post_s: u64,
    /// Longest wait for recovery between a rebalance's joins and leaves.
    pub rebalance_wait_s: u64,
    /// Seconds of live load during the rebalance.
    pub rebalance_live_s: u64,
}

impl Sizes {
    pub fn new(short: bool, kills: Option<u32>) -> Sizes {
        let s = if short {
            Sizes {
                kills: 1,
                joins: 1,
                ingest_kills: 1,
                freeze_s: 5,
                rate: 60,
                backlog_s: 4,
                backlog_vus: 2,
                run_between_s: 4,
                pre_s: 4,
                post_s: 6,
                rebalance_wait_s: 10,
                rebalance_live_s: 45,
            }
        } else {
            Sizes {
                kills: 10,
                joins: 3,
                ingest_kills: 3,
                freeze_s: 10,
                rate: 150,
                backlog_s: 20,
                backlog_vus: 4,
                run_between_s: 6,
                pre_s: 6,
                post_s: 12,
                rebalance_wait_s: 15,
                rebalance_live_s: 150,
            }
        };
        Sizes { kills: kills.unwrap_or(s.kills), ..s }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_catalogue_follows_the_registry() {
        let names: Vec<String> = Scenario::all().iter().map(Scenario::name).collect();
        for k in StoreKind::ALL {
            assert!(names.contains(&format!("freeze-{k}")), "{names:?}");
            assert_eq!(names.contains(&format!("wipe-{k}")), k != StoreKind::Mysql, "{names:?}");
        }
        assert_eq!(names.len(), 5 + StoreKind::ALL.len() * 2 - 1);
    }

    #[test]
    fn selection_expands_groups_once_and_refuses_unknown_names() {
        let words = |s: &str| s.split(',').map(str::to_string).collect::<Vec<_>>();
        let got = Scenario::select(&words("wipe,wipe-es,poison")).expect("known");
        assert_eq!(got.len(), StoreKind::ALL.len());
        assert_eq!(got.last(), Some(&Scenario::Poison));
        assert!(Scenario::select(&words("freeze-nothing")).unwrap_err().contains("unknown scenario"));
        assert_eq!(Scenario::select(&words("all")).expect("all"), Scenario::all());
    }
}

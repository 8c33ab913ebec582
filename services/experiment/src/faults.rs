//! The fault catalogue: every fault the runner injects, by name, in one place.
//!
//! Two scales of fault, one list: a [`Scenario`] is a whole chaos scenario (`experiment chaos`:
//! its own load, faults and reconcile), made from the registry's list of stores for the
//! per-store ones; a [`RoundFault`] is one fault inside a measured round of the experiment
//! (`--fault ROUND:KIND`), there to prove that the round's gates catch what they claim to.

use pipeline_stores::StoreKind;

/// One scenario: a fault injected under load, ending in an exact reconcile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scenario {
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
    /// Hosts in network namespaces: a writer's host cut from everything past the group's
    /// session, then healed.
    PartitionWriter,
    /// A writer's host cut from the broker but not from the stores (a zombie), then healed.
    ZombieWriter,
    /// An ingest's host cut from the broker, then healed.
    PartitionIngest,
    /// A writer's host cut from one store, then healed.
    PartitionStore,
}

impl Scenario {
    /// Every scenario, in the order a full run takes them.
    pub(crate) fn all() -> Vec<Scenario> {
        let mut out = vec![Scenario::WriterKill, Scenario::Rebalance, Scenario::IngestKill];
        out.extend(StoreKind::ALL.iter().map(|k| Scenario::Freeze(*k)));
        out.push(Scenario::Poison);
        out.extend(Scenario::wipes());
        out.push(Scenario::DlqReplay);
        out.extend(Scenario::PARTITIONS);
        out
    }

    /// The scenarios on hosts of their own (network namespaces the run makes: root only).
    pub(crate) const PARTITIONS: [Scenario; 4] =
        [Scenario::PartitionWriter, Scenario::ZombieWriter, Scenario::PartitionIngest, Scenario::PartitionStore];

    pub(crate) fn on_hosts(&self) -> bool {
        Scenario::PARTITIONS.contains(self)
    }

    /// A wipe for every store but MySQL, the system of record the others are rebuilt from.
    fn wipes() -> impl Iterator<Item = Scenario> {
        StoreKind::ALL.into_iter().filter(|k| *k != StoreKind::Mysql).map(Scenario::Wipe)
    }

    pub(crate) fn name(&self) -> String {
        match self {
            Scenario::WriterKill => "writer-kill".into(),
            Scenario::Rebalance => "rebalance".into(),
            Scenario::IngestKill => "ingest-kill".into(),
            Scenario::Freeze(k) => format!("freeze-{k}"),
            Scenario::Poison => "poison".into(),
            Scenario::Wipe(k) => format!("wipe-{k}"),
            Scenario::DlqReplay => "dlq-replay".into(),
            Scenario::PartitionWriter => "partition-writer".into(),
            Scenario::ZombieWriter => "zombie-writer".into(),
            Scenario::PartitionIngest => "partition-ingest".into(),
            Scenario::PartitionStore => "partition-store".into(),
        }
    }

    /// `all`, `freeze` (every freeze-*), `wipe` (every wipe-*), `partition` (the four on hosts
    /// of their own) or scenario names, in the order given, each once.
    pub(crate) fn select(words: &[String]) -> Result<Vec<Scenario>, String> {
        let all = Scenario::all();
        let mut out: Vec<Scenario> = Vec::new();
        for w in words.iter().map(|w| w.trim()).filter(|w| !w.is_empty()) {
            let picked: Vec<Scenario> = match w {
                "all" => all.clone(),
                "freeze" => all.iter().copied().filter(|s| matches!(s, Scenario::Freeze(_))).collect(),
                "wipe" => all.iter().copied().filter(|s| matches!(s, Scenario::Wipe(_))).collect(),
                "partition" => Scenario::PARTITIONS.to_vec(),
                name => match all.iter().find(|s| s.name() == name) {
                    Some(s) => vec![*s],
                    None => {
                        let known: Vec<String> = all.iter().map(Scenario::name).collect();
                        return Err(format!(
                            "unknown scenario {name} (known: {}, freeze, wipe, partition, all)",
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

/// A fault inside one measured round, halfway through k6's measured phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum RoundFault {
    /// SIGKILL the writer and leave it dead: the round must fail its reconcile gate.
    KillWriter,
    /// SIGKILL the writer and start a new one (a new boot id within the round): the round must
    /// still reconcile exactly.
    RestartWriter,
}

impl RoundFault {
    pub(crate) const ALL: [RoundFault; 2] = [RoundFault::KillWriter, RoundFault::RestartWriter];

    pub(crate) fn name(&self) -> &'static str {
        match self {
            RoundFault::KillWriter => "kill-writer",
            RoundFault::RestartWriter => "restart-writer",
        }
    }

    pub(crate) fn from_name(name: &str) -> Option<RoundFault> {
        RoundFault::ALL.into_iter().find(|f| f.name() == name)
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
        assert_eq!(names.len(), 5 + StoreKind::ALL.len() * 2 - 1 + 4);
        for n in ["partition-writer", "zombie-writer", "partition-ingest", "partition-store"] {
            assert!(names.contains(&n.to_string()), "{names:?}");
        }
    }

    #[test]
    fn a_round_fault_is_named_as_a_plan_and_its_evidence_spell_it() {
        for f in RoundFault::ALL {
            assert_eq!(RoundFault::from_name(f.name()), Some(f));
            assert_eq!(serde_json::to_string(&f).expect("json"), format!("\"{}\"", f.name()));
        }
        assert_eq!(RoundFault::from_name("kill-ingest"), None);
    }

    #[test]
    fn selection_expands_groups_once_and_refuses_unknown_names() {
        let words = |s: &str| s.split(',').map(str::to_string).collect::<Vec<_>>();
        let got = Scenario::select(&words("wipe,wipe-es,poison")).expect("known");
        assert_eq!(got.len(), StoreKind::ALL.len());
        assert_eq!(got.last(), Some(&Scenario::Poison));
        assert!(Scenario::select(&words("freeze-nothing")).unwrap_err().contains("unknown scenario"));
        assert_eq!(Scenario::select(&words("all")).expect("all"), Scenario::all());
        let parts = Scenario::select(&words("partition,zombie-writer")).expect("partition");
        assert_eq!(parts, Scenario::PARTITIONS.to_vec());
        assert!(parts.iter().all(Scenario::on_hosts) && !Scenario::Poison.on_hosts());
    }
}

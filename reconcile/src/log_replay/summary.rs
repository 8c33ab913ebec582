//! What a replay read, wrote and found on reading back, as text or JSON, and its exit code.
//!
//! The verdict is about the range asked for: exit 0 when every message read is in every chosen
//! store at its version or newer (in a dry run: when nothing would be written), 1 when a store
//! refused or still lacks one, or when part of the range is past the topic's retention (those
//! records cannot be replayed, so the stores may lack messages nobody can name any more).

use super::apply::StoreTally;
use super::range::Planned;
use crate::findings::Class;
use pipeline_common::reconcile_report::{
    GoneRange, ReadBack, ReplayPartition, ReplayStore, TopicReplayReport, TopicTag,
};
use std::collections::BTreeMap;

/// What was read from one partition. Here, beside the summary that holds one per partition,
/// because `mod.rs` fills it while it hands the finished summary to this file.
#[derive(Debug, Default, Clone, Copy, serde::Serialize)]
pub(crate) struct PartitionRead {
    pub records: u64,
    pub messages: u64,
    pub undecodable: u64,
}

pub(crate) struct Summary {
    pub topic: String,
    /// The range as the flags gave it.
    pub range: String,
    pub dry_run: bool,
    pub plan: Vec<Planned>,
    pub parts: BTreeMap<i32, PartitionRead>,
    /// Items that are not valid messages: reported, never written (the writer dead-lettered them).
    pub undecodable: Class,
    pub stores: Vec<StoreTally>,
}

impl Summary {
    fn gone(&self) -> impl Iterator<Item = (i32, i64, i64)> + '_ {
        self.plan.iter().filter_map(|p| p.gone.map(|(a, b)| (p.partition, a, b)))
    }

    fn to_write(&self) -> u64 {
        self.stores.iter().map(StoreTally::to_write_total).sum()
    }

    fn stores_clean(&self) -> bool {
        self.stores.iter().all(|s| !s.refused.fails() && s.verify.as_ref().is_none_or(|v| v.clean()))
    }

    pub(crate) fn ok(&self) -> bool {
        let gone = self.gone().next().is_some();
        !gone && self.stores_clean() && !(self.dry_run && self.to_write() > 0)
    }

    pub(crate) fn code(&self) -> u8 {
        if self.ok() {
            0
        } else {
            crate::exit::MISMATCH
        }
    }

    fn message(&self) -> String {
        let n = self.to_write();
        let gone: i64 = self.gone().map(|(_, a, b)| b - a).sum();
        let gone = if gone > 0 {
            format!("; {gone} records of the range are past the topic's retention and could not be replayed")
        } else {
            String::new()
        };
        match (self.dry_run, self.stores_clean()) {
            (true, _) if n == 0 => {
                format!(
                    "NOTHING TO DO: every chosen store holds every message of the range at its version or newer{gone}"
                )
            }
            (true, _) => format!("DRY RUN: {n} messages would be written; nothing was changed{gone}"),
            (false, true) if n == 0 => {
                format!(
                    "NOTHING TO DO: every chosen store holds every message of the range at its version or newer{gone}"
                )
            }
            (false, true) => format!(
                "REPLAYED: {n} messages written; every chosen store holds every message of the range at its \
                 version or newer{gone}"
            ),
            (false, false) => format!("NOT RESTORED: some messages of the range are not in a store (see above){gone}"),
        }
    }

    pub(crate) fn print(&self, as_json: bool) {
        if as_json {
            crate::report::print_json(&self.to_report());
        } else {
            self.print_text();
        }
    }

    /// The summary as `--json` prints it ([`TopicReplayReport`], the type its readers parse).
    fn to_report(&self) -> TopicReplayReport {
        let partitions = self
            .plan
            .iter()
            .map(|p| {
                let read = self.parts.get(&p.partition).copied().unwrap_or_default();
                ReplayPartition {
                    partition: p.partition,
                    low: p.low,
                    high: p.high,
                    start: p.start,
                    end: p.end,
                    gone: p.gone.map(|(from, to)| GoneRange { from, to }),
                    records: read.records,
                    messages: read.messages,
                    undecodable: read.undecodable,
                }
            })
            .collect();
        let stores = self
            .stores
            .iter()
            .map(|s| ReplayStore {
                store: s.store.name().to_string(),
                to_write: s.to_write.clone(),
                to_write_total: s.to_write_total(),
                written: s.written,
                held: s.held,
                refused: s.refused.to_examples(),
                unversioned_other_content: s.unversioned.to_examples(),
                verify: s.verify.as_ref().map(|v| ReadBack {
                    checked: v.checked,
                    missing: v.missing.to_examples(),
                    older: v.older.to_examples(),
                    different: v.different.to_examples(),
                }),
            })
            .collect();
        let sum = |f: fn(&PartitionRead) -> u64| self.parts.values().map(f).sum::<u64>();
        TopicReplayReport {
            replay: TopicTag::Topic,
            topic: self.topic.clone(),
            range: self.range.clone(),
            dry_run: self.dry_run,
            partitions,
            records: sum(|p| p.records),
            messages: sum(|p| p.messages),
            undecodable: self.undecodable.to_examples(),
            stores,
            ok: self.ok(),
            message: self.message(),
        }
    }

    fn print_text(&self) {
        let names: Vec<&str> = self.stores.iter().map(|s| s.store.name()).collect();
        println!(
            "replay of topic {} into {} ({}){}",
            self.topic,
            names.join(", "),
            self.range,
            if self.dry_run { ", dry run" } else { "" }
        );
        for p in &self.plan {
            let read = self.parts.get(&p.partition).copied().unwrap_or_default();
            println!(
                "  partition {}: offsets {}..{} of {}..{}: {} records, {} messages, {} undecodable",
                p.partition, p.start, p.end, p.low, p.high, read.records, read.messages, read.undecodable
            );
            if let Some((a, b)) = p.gone {
                println!("    offsets {a}..{b} are past the topic's retention: gone, not replayed");
            }
        }
        for s in &self.stores {
            let by: Vec<String> = s.to_write.iter().map(|(p, n)| format!("partition {p}: {n}")).collect();
            let by = if by.is_empty() { String::new() } else { format!(" ({})", by.join(", ")) };
            print!(
                "{}: {} {}{by}, held already {}, refused {}",
                s.store,
                if self.dry_run { "would write" } else { "to write" },
                s.to_write_total(),
                s.held,
                s.refused.total
            );
            if let Some(v) = &s.verify {
                print!(
                    "; written {}; read back {}: missing {}, older {}, different {}",
                    s.written, v.checked, v.missing.total, v.older.total, v.different.total
                );
            }
            println!();
            let mut classes = vec![("refused", &s.refused), ("unversioned, other content kept", &s.unversioned)];
            if let Some(v) = &s.verify {
                classes.extend([("missing", &v.missing), ("older", &v.older), ("different", &v.different)]);
            }
            for (name, c) in classes {
                c.examples().take(5).for_each(|e| println!("  {name}: {e}"));
            }
        }
        if self.undecodable.total > 0 {
            println!("undecodable items (reported, not written): {}", self.undecodable.total);
            self.undecodable.examples().take(5).for_each(|e| println!("  {e}"));
        }
        println!("{}", self.message());
    }
}

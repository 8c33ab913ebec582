//! Id-level reconciliation: which ids are missing from which store, which a store holds that
//! nobody expected, which MySQL rows sit in the wrong shard table, which sit in two.
//!
//! Memory is proportional to the number of ids (one map entry per id with a bit per store).

use pipeline_common::message::{shard_of, shard_table};
use pipeline_common::stores::{Store, StoreKind};
use serde_json::json;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

const EXAMPLES: usize = 20;

#[derive(Default)]
struct Class {
    total: u64,
    examples: Vec<String>,
}

impl Class {
    fn add(&mut self, id: &str) {
        self.total += 1;
        if self.examples.len() < EXAMPLES {
            self.examples.push(id.to_string());
        }
    }
}

#[derive(Default)]
pub struct Report {
    /// Keyed by "missing from es", "extra in redis", "wrong shard (mysql)", "duplicated (mysql)".
    classes: BTreeMap<String, Class>,
    expected: u64,
}

impl Report {
    pub fn is_clean(&self) -> bool {
        self.classes.values().all(|c| c.total == 0)
    }

    pub fn print(&self, as_json: bool) {
        if as_json {
            let classes: serde_json::Map<String, serde_json::Value> = self
                .classes
                .iter()
                .map(|(k, c)| (k.clone(), json!({ "total": c.total, "examples": c.examples })))
                .collect();
            println!("{}", json!({ "expected": self.expected, "clean": self.is_clean(), "classes": classes }));
            return;
        }
        println!("expected ids: {}", self.expected);
        for (name, c) in &self.classes {
            println!("{name}: {}", c.total);
            for id in &c.examples {
                println!("  {id}");
            }
        }
        println!("{}", if self.is_clean() { "OK: every id exactly once in every store" } else { "DIFFERENCES FOUND" });
    }
}

pub async fn diff(stores: &[Arc<dyn Store>], wanted: Option<HashSet<String>>) -> anyhow::Result<Report> {
    // id -> bitmask of stores holding it.
    let mut seen: HashMap<String, u8> = HashMap::new();
    let mut report = Report::default();
    for (bit, s) in stores.iter().enumerate() {
        let kind = s.kind();
        for name in ["missing from", "extra in"] {
            report.classes.entry(format!("{name} {kind}")).or_default();
        }
        let mut places: HashMap<String, u32> = HashMap::new();
        for sid in s.ids().await? {
            if let Some(place) = &sid.place {
                let wrong = report.classes.entry(format!("wrong shard ({kind})")).or_default();
                if *place != shard_table(shard_of(&sid.id)) {
                    wrong.add(&format!("{} in {place}", sid.id));
                }
                *places.entry(sid.id.clone()).or_default() += 1;
            }
            *seen.entry(sid.id).or_default() |= 1 << bit;
        }
        if kind == StoreKind::Mysql {
            let dup = report.classes.entry(format!("duplicated ({kind})")).or_default();
            let mut ids: Vec<_> = places.into_iter().filter(|(_, n)| *n > 1).map(|(id, _)| id).collect();
            ids.sort();
            ids.iter().for_each(|id| dup.add(id));
        }
    }
    let expected: HashSet<String> = wanted.unwrap_or_else(|| seen.keys().cloned().collect());
    report.expected = expected.len() as u64;
    let mut all: Vec<&String> = expected.iter().chain(seen.keys()).collect();
    all.sort();
    all.dedup();
    for id in all {
        let mask = seen.get(id).copied().unwrap_or(0);
        let is_expected = expected.contains(id);
        for (bit, s) in stores.iter().enumerate() {
            let has = mask & (1 << bit) != 0;
            let class = match (is_expected, has) {
                (true, false) => format!("missing from {}", s.kind()),
                (false, true) => format!("extra in {}", s.kind()),
                _ => continue,
            };
            report.classes.entry(class).or_default().add(id);
        }
    }
    Ok(report)
}
